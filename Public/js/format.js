// format.js — owns how values read on the page: durations, clock times,
// "in 1.2 s" countdowns, short JSON, a run's exit and a perform's outcome.
// Pure functions of their arguments. Texts that carry names or strings from
// users are rich text (dom.js): those pieces are marked user(…).

import { user, userList } from './dom.js';

export const fmtMs = (ms) => (ms === null || ms === undefined ? '–' : ms >= 1000 ? (ms / 1000).toFixed(2) + ' s' : ms.toFixed(1) + ' ms');

export const fmtNum = (n) => (n === null || n === undefined ? '–' : String(n));

export function fmtTime(iso) {
  if (!iso) return '–';
  const d = new Date(iso);
  if (isNaN(d)) return iso;
  return d.toLocaleTimeString([], { hour12: false }) + '.' + String(d.getMilliseconds()).padStart(3, '0');
}

export function fmtIn(iso) {
  if (!iso) return '–';
  const delta = Date.parse(iso) - Date.now();
  if (delta < 0) return fmtTime(iso) + ' (due)';
  return fmtTime(iso) + (delta < 600000 ? ` (in ${fmtMs(delta)})` : '');
}

/** A value as JSON, cut at 60 characters: user text ('–' for none). */
export function jsonShort(v) {
  if (v === null || v === undefined) return '–';
  const s = JSON.stringify(v);
  return user(s.length > 60 ? s.slice(0, 57) + '…' : s);
}

/** JSON laid out over lines (JSON.stringify(v, null, indent)): each line user text. */
export const jsonLines = (v, indent) => userList(String(JSON.stringify(v, null, indent)).split('\n'), '\n');

export const plural = (n, word) => `${n} ${word}${n === 1 ? '' : 's'}`;

export const exitText = (x) => [
  `${x.exitReason} (code ${x.code}, `,
  user(x.mode),
  `, ${fmtMs(x.durationMs)})`,
  x.cause ? [` — ${x.cause.code}: `, user(x.cause.message)] : '',
];

/** What a run style means, in the words of what it mirrors. */
export function styleText(run, keepAlive) {
  const tail = `keep-alive ${keepAlive}`;
  const secs = run.distantFuture ? 'distant-future' : `${run.seconds} s`;
  if (run.style === 'forever') return `forever: CFRunLoopRun() (default mode, no timeout) · ${tail}`;
  if (run.style === 'manual') return `manual: runs on request · ${tail}`;
  if (run.style === 'run') return `run: -[NSRunLoop run] (default-mode passes while the mode holds something) · ${tail}`;
  if (run.style === 'runUntilDate') return `runUntilDate: ${run.seconds} s of default-mode passes · ${tail}`;
  if (run.style === 'runModeOnce') return ['runModeOnce: one runMode:', user(run.mode), ` beforeDate: (${secs}) · ${tail}`];
  return [`loop: ${secs} runs in `, user(run.mode), `${run.returnAfterSourceHandled ? ', returnAfterSourceHandled' : ''} · ${tail}`];
}

/** A utilisation ratio (0…1) as a percentage. */
export const fmtPercent = (r) => (r === null || r === undefined ? '–' : (r * 100).toFixed(r < 0.1 ? 1 : 0) + ' %');

/** What woke a turn, or a callout: its kind and (user text) id. */
export const itemText = (x) => (x.id ? [`${x.kind} `, user(x.id)] : x.kind);

/** One turn as a line of text: what woke it, each callout, how it ended. */
export function turnText(t) {
  const woke = t.wokeBy.kind === 'none' ? 'run entry' : itemText(t.wokeBy);
  const parts = [[`turn ${t.turn}: woke by `, woke, t.sleptMs > 0 ? ` (slept ${fmtMs(t.sleptMs)})` : '']];
  for (const c of t.callouts) parts.push([itemText(c), c.selector ? [' ', user(c.selector)] : '', ` ran ${fmtMs(c.ms)}`]);
  if (t.droppedCallouts) parts.push(`${t.droppedCallouts} more callouts`);
  parts.push(`${t.end === 'exit' ? 'run returned' : 'sleep'} (busy ${fmtMs(t.busyMs)})`);
  return parts.flatMap((p, i) => (i ? [' → ', p] : [p]));
}

export function performText(r) {
  return [
    [user(r.selector), ` ${r.ok ? 'ok' : 'failed'} on `, user(r.thread), ' (', user(r.performId), ')'],
    '\n',
    `queued ${fmtMs(r.queuedMs)}, ran ${fmtMs(r.ranMs)}`,
    '\n',
    r.ok ? ['result: ', jsonLines(r.result, 1)] : [`error: ${r.error && r.error.code}: `, user(r.error && r.error.message)],
  ];
}
