// format.js — owns how values read on the page: durations, clock times,
// "in 1.2 s" countdowns, short JSON, a run's exit and a perform's outcome.
// Pure functions of their arguments.

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

export function jsonShort(v) {
  if (v === null || v === undefined) return '–';
  const s = JSON.stringify(v);
  return s.length > 60 ? s.slice(0, 57) + '…' : s;
}

export const plural = (n, word) => `${n} ${word}${n === 1 ? '' : 's'}`;

export const exitText = (x) =>
  `${x.exitReason} (code ${x.code}, ${x.mode}, ${fmtMs(x.durationMs)})` + (x.cause ? ` — ${x.cause.code}: ${x.cause.message}` : '');

/** What a run style means, in the words of what it mirrors. */
export function styleText(run, keepAlive) {
  const tail = `keep-alive ${keepAlive}`;
  const secs = run.distantFuture ? 'distant-future' : `${run.seconds} s`;
  if (run.style === 'forever') return `forever: CFRunLoopRun() (default mode, no timeout) · ${tail}`;
  if (run.style === 'manual') return `manual: runs on request · ${tail}`;
  if (run.style === 'run') return `run: -[NSRunLoop run] (default-mode passes until finished) · ${tail}`;
  if (run.style === 'runUntilDate') return `runUntilDate: ${run.seconds} s of default-mode passes · ${tail}`;
  if (run.style === 'runModeOnce') return `runModeOnce: one runMode:${run.mode} beforeDate: (${secs}) · ${tail}`;
  return `loop: ${secs} runs in ${run.mode}${run.returnAfterSourceHandled ? ', returnAfterSourceHandled' : ''} · ${tail}`;
}

/** A utilisation ratio (0…1) as a percentage. */
export const fmtPercent = (r) => (r === null || r === undefined ? '–' : (r * 100).toFixed(r < 0.1 ? 1 : 0) + ' %');

/** One turn as a line of text: what woke it, each callout, how it ended. */
export function turnText(t) {
  const woke = t.wokeBy.kind === 'none' ? 'run entry' : t.wokeBy.id ? `${t.wokeBy.kind} ${t.wokeBy.id}` : t.wokeBy.kind;
  const parts = [`turn ${t.turn}: woke by ${woke}` + (t.sleptMs > 0 ? ` (slept ${fmtMs(t.sleptMs)})` : '')];
  for (const c of t.callouts) parts.push(`${c.kind} ${c.id}${c.selector ? ' ' + c.selector : ''} ran ${fmtMs(c.ms)}`);
  if (t.droppedCallouts) parts.push(`${t.droppedCallouts} more callouts`);
  parts.push(`${t.end === 'exit' ? 'run returned' : 'sleep'} (busy ${fmtMs(t.busyMs)})`);
  return parts.join(' → ');
}

export function performText(r) {
  return [
    `${r.selector} ${r.ok ? 'ok' : 'failed'} on ${r.thread} (${r.performId})`,
    `queued ${fmtMs(r.queuedMs)}, ran ${fmtMs(r.ranMs)}`,
    r.ok ? 'result: ' + JSON.stringify(r.result, null, 1) : `error: ${r.error && r.error.code}: ${r.error && r.error.message}`,
  ].join('\n');
}
