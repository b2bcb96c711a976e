// history-event.js — one kept event of the History panel (history.js): its
// row (when, where, thread, type, a one-line summary) and, on click, its
// details (an exit's reason and cause first, then the event's data as JSON);
// and one kept thread's row of the Threads tab.
// Names, modes, paths and messages are user text: shown through dom.js's
// user() (isolated, never markup).

import { h, user, userList } from './dom.js';
import { fmtMs, jsonShort, jsonLines, plural } from './format.js';
import { fmtWhen, ago } from './fleet.js';

// A perform and the request kept in its row share a cursor: the event id tells them apart.
const idOf = (e) => `hist-ev-${e.cursor}-${e.id}`;

/** The list item of one event: a row button that opens its details. */
export function eventItem(e) {
  const detailId = idOf(e) + '-d';
  const button = h(
    'button',
    { type: 'button', class: 'hist-row', 'aria-expanded': 'false', 'aria-controls': detailId },
    h('time', { class: 'hist-at', datetime: e.at, title: user(e.at) }, fmtWhen(e.at)),
    h('span', { class: 'hist-where' }, user(e.instance), ` · boot ${e.boot}`),
    h('span', { class: 'hist-thread mono' }, e.thread ? user(e.thread) : '–'),
    h('span', { class: 'badge hist-type hist-type-' + e.event }, e.event),
    h('span', { class: 'hist-sum' }, summary(e)),
  );
  const li = h(
    'li',
    { class: 'hist-ev', id: idOf(e), 'data-event': e.event, 'data-cursor': e.cursor, 'data-thread': e.thread || '', 'data-instance': e.instance, 'data-boot': String(e.boot) },
    button,
  );
  button.addEventListener('click', () => toggleDetail(li, e, button));
  return li;
}

function toggleDetail(li, e, button) {
  const open = button.getAttribute('aria-expanded') === 'true';
  button.setAttribute('aria-expanded', String(!open));
  let box = li.querySelector('.hist-detail');
  if (open) {
    if (box) box.hidden = true;
    return;
  }
  if (!box) {
    box = detail(e);
    box.id = button.getAttribute('aria-controls');
    li.append(box);
  }
  box.hidden = false;
}

/** The one-line summary of an event (rich text: names, modes, paths and messages are user text). */
export function summary(e) {
  const d = e.data || {};
  const u = (v, none = '?') => (v === null || v === undefined || v === '' ? none : user(v));
  switch (e.event) {
    case 'run-exit':
      return [`${d.exitReason || '?'} in `, u(d.mode), d.durationMs !== undefined ? ` after ${fmtMs(d.durationMs)}` : '', d.cause && d.cause.code ? [' · cause ', u(d.cause.code)] : ''];
    case 'perform':
      return [u(d.selector), ` ${d.ok ? 'ok' : 'failed'}`, !d.ok && d.error ? [' · ', u(d.error.code)] : ''];
    case 'warning':
      return [u(d.code), ': ', u(d.message, ''), d.active === false ? ' (resolved)' : ''];
    case 'stall':
      return [`${d.severity} stall, ${d.ms} ms`, d.change ? ` (${d.change})` : '', calloutText(d.callout)];
    case 'stall-ended':
      return [`stall ended: ${d.severity}, ${d.ms} ms`, calloutText(d.callout)];
    case 'request':
      return [`${d.method} `, u(d.path), ` → ${d.status}`];
    case 'thread': {
      const s = d.snapshot || {};
      return [d.change, s.name ? [' “', user(s.name), '”'] : '', d.change === 'created' && s.run ? ` (${s.run.style})` : ''];
    }
    case 'instance': {
      const lost = d.lostThreads || [];
      const bits = [`${d.change} (boot ${d.boot ?? e.boot})`];
      if (d.previousEnd) bits.push(['previous start ', u(d.previousEnd)]);
      if (lost.length) bits.push(['lost threads: ', userList(lost)]);
      else if (d.change === 'started') bits.push('no lost threads');
      return bits.flatMap((b, i) => (i ? [' · ', b] : [b]));
    }
    case 'task':
      return ['task ', u(d.task), ` ${d.change}`, d.runs !== undefined ? ` (${plural(d.runs, 'run')})` : ''];
    case 'timer-mode':
      return ['timer ', u(d.timer), ` ${d.change} `, u(d.mode)];
    case 'source-mode':
      return ['source ', u(d.source), ` ${d.change} `, u(d.mode)];
    default:
      return jsonShort(d);
  }
}

function calloutText(c) {
  if (!c || typeof c !== 'object') return '';
  return [` in ${c.kind || 'callout'}`, c.id ? [' ', user(c.id)] : '', c.selector ? [' ', user(c.selector)] : ''];
}

/** An event's details: what matters first (an exit's reason and cause), then its data. */
function detail(e) {
  const d = e.data || {};
  const facts = [];
  const fact = (label, value, cls) => facts.push(h('div', { class: cls || null }, h('dt', null, label), h('dd', null, value)));
  if (e.event === 'run-exit') {
    fact('exit reason', [`${d.exitReason} (code ${d.code}) in `, user(d.mode)], 'hist-key');
    if (d.cause) {
      fact('cause', user(d.cause.code), 'hist-key hist-cause-code');
      fact('what happened', d.cause.message ? user(d.cause.message) : '–', 'hist-wide hist-cause');
      if (d.cause.by) fact('by', user(d.cause.by));
    } else fact('cause', 'none recorded', 'hist-key');
    fact('run', `#${d.run} at depth ${d.depth}, ${fmtMs(d.durationMs)}`);
  } else if (e.event === 'perform') {
    fact('selector', [user(d.selector), ` ${d.ok ? 'ok' : 'failed'}`], 'hist-key');
    if (!d.ok && d.error) fact('error', [user(d.error.code), ': ', user(d.error.message)], 'hist-wide hist-cause');
    fact('queued / ran', `${fmtMs(d.queuedMs)} / ${fmtMs(d.ranMs)}`);
  } else if (e.event === 'warning') {
    fact('warning', [user(d.code), ` (${d.severity})`], 'hist-key');
    fact('message', user(d.message), 'hist-wide');
  } else if (e.event === 'request') {
    fact('request', [`${d.method} `, user(d.path), ` → ${d.status}`], 'hist-key hist-wide');
    if (d.requestId) fact('request id', user(d.requestId));
  } else if (e.event === 'instance' && (d.lostThreads || []).length) {
    fact('lost threads', userList(d.lostThreads), 'hist-key hist-wide hist-lost-line');
  }
  fact('when', user(e.at));
  fact('where', [user(e.instance), `, boot ${e.boot}`]);
  fact('event id · cursor', `${e.id} · ${e.cursor}`);
  return h(
    'div',
    { class: 'hist-detail', role: 'region', 'aria-label': `${e.event} ${e.cursor} details` },
    h('dl', { class: 'facts hist-facts' }, ...facts),
    h('pre', { class: 'log hist-json', tabindex: '0', 'aria-label': 'The event data as JSON' }, jsonLines(d, 2)),
  );
}

/** The list item of one kept thread; a click calls `pick(t)` (its events). */
export function threadItem(t, pick) {
  const how = t.live ? 'live' : t.endedHow || (t.endedAt ? 'ended' : 'not live');
  const cls = t.live ? 'st-running' : how === 'lost' ? 'hist-lost' : 'st-idle';
  const exit = t.lastExit;
  const exitText = exit ? [`last exit ${exit.exitReason}`, exit.cause && exit.cause.code ? [' · ', user(exit.cause.code)] : ''] : 'no exit';
  const button = h(
    'button',
    { type: 'button', class: 'hist-row hist-th-row' },
    h('span', { class: 'hist-th-name' }, h('strong', null, user(t.name || t.thread)), ' ', h('span', { class: 'mono muted' }, user(t.thread))),
    h('span', { class: 'hist-where' }, user(t.instance), ` · boot ${t.boot}`),
    h('span', { class: `badge hist-how ${cls}` }, how === 'live' || how === 'lost' || how === 'ended' || how === 'not live' ? how : ['ended: ', user(how)]),
    h('span', { class: 'hist-sum' }, user(t.style || '?'), ' · created ', fmtWhen(t.createdAt), t.endedAt ? ` · ended ${ago(t.endedAt)}` : '', ' · ', exitText),
  );
  button.addEventListener('click', () => pick(t));
  return h(
    'li',
    { class: 'hist-th', 'data-thread': t.thread, 'data-instance': t.instance, 'data-boot': String(t.boot), 'data-ended-how': t.endedHow || '', 'data-live': String(!!t.live) },
    button,
  );
}
