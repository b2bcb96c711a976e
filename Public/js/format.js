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

export const exitText = (x) => `${x.exitReason} (code ${x.code}, ${x.mode}, ${fmtMs(x.durationMs)})`;

export function performText(r) {
  return [
    `${r.selector} ${r.ok ? 'ok' : 'failed'} on ${r.thread} (${r.performId})`,
    `queued ${fmtMs(r.queuedMs)}, ran ${fmtMs(r.ranMs)}`,
    r.ok ? 'result: ' + JSON.stringify(r.result, null, 1) : `error: ${r.error && r.error.code}: ${r.error && r.error.message}`,
  ].join('\n');
}
