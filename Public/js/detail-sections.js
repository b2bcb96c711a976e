// detail-sections.js — owns drawing the Detail panel's sections from one
// fetched view of a thread (state.detail.data), one renderer a section:
// thread facts, timers, sources (and the port-message picker), modes (and the
// mode-name suggestions), observers, pending performs, task queue, log. Each
// writes in place (setText, setFacts, syncRows); the row buttons call the API.

import { api, threadPath } from './api.js';
import { h, setText, setClass, setFacts, setOptions, syncRows, user, userList } from './dom.js';
import { fmtTime, fmtIn, fmtNum, jsonShort, exitText } from './format.js';
import { act } from './forms.js';
import { detailHooks } from './detail-hooks.js';
import { renderExplain } from './detail-explain.js';
import { renderLoopSteps } from './detail-steps.js';
import { followPrediction } from './detail-predict.js';

const $ = (id) => document.getElementById(id);
const tbody = (tableId) => document.querySelector(`#${tableId} tbody`);
const yesNo = (valid) => ({ text: valid ? 'yes' : 'no', cls: valid ? '' : 'dim' });

/** d: the fetched views; s: the freshest snapshot of the thread. */
export function renderSections(d, s) {
  const base = threadPath(d.id);
  renderThread(s);
  renderExplain(d, s);
  renderLoopSteps(d, s);
  renderTimers(d.timers, base);
  renderSources(d.sources, base);
  renderModes(d.modes);
  renderObservers(d.observers);
  renderPending(s.pendingPerforms || []);
  renderTasks(d.tasks, base);
  renderLog(d.log);
  followPrediction(d, s);
}

/** A small row button calling the API, then refreshing the panel; its outcome goes to errorEl/resultEl. label: rich text. */
function rowButton(text, label, errorEl, resultEl, call) {
  const onclick = (e) =>
    act(e.currentTarget, errorEl, resultEl, async () => {
      const out = await call();
      detailHooks.refreshSoon();
      return out;
    });
  return h('button', { type: 'button', class: 'small', 'aria-label': label, onclick }, text);
}

/** A selector call (an action, a pending perform): its selector and short JSON arguments. */
const actionText = (a) => [user(a.selector), ' ', jsonShort(a.args)];

function renderThread(s) {
  setText($('d-name'), user(s.name || s.id));
  setText($('d-id'), s.id);
  setText($('d-state'), s.state);
  setClass($('d-state'), 'badge state st-' + s.state);
  setFacts($('d-facts'), [
    ['style', s.run.style],
    ['keep-alive', s.keepAlive],
    ['policy mode', user(s.run.mode)],
    ['current mode', s.currentMode ? user(s.currentMode) : '–'],
    ['seconds', s.run.seconds],
    ['returnAfterSourceHandled', s.run.returnAfterSourceHandled],
    ['runs', s.runs],
    ['depth', s.depth],
    ['parked', s.parked],
    ['thread name', [user(s.threadName), s.threadNameTruncated ? ' (truncated)' : '']],
    ['last exit', s.lastExit ? exitText(s.lastExit) : '–'],
    ['created', fmtTime(s.createdAt)],
    ['ended', fmtTime(s.endedAt)],
  ]);
}

function renderTimers(timers, base) {
  const error = $('timers-row-error');
  syncRows(
    tbody('timers-table'),
    timers,
    (t) => t.id,
    (t) => [
      t.id,
      `${t.interval} s${t.repeats ? '' : ' once'}`,
      user(t.mode),
      yesNo(t.valid),
      { text: `${t.fires}${t.maxFires ? ' / ' + t.maxFires : ''}`, cls: 'fires num' },
      t.valid ? fmtIn(t.nextFireAt) : '–',
      { text: `${fmtNum(t.lateness.p50Ms)} / ${fmtNum(t.lateness.p99Ms)} / ${fmtNum(t.lateness.maxMs)}`, cls: 'num' },
      t.action ? [actionText(t.action), t.lastActionError ? [' ⚠ ', user(t.lastActionError)] : ''] : '–',
    ],
    (t) => [rowButton('Invalidate', `Invalidate timer ${t.id}`, error, null, () => api('DELETE', `${base}/timers/${t.id}`))],
  );
}

function renderSources(sources, base) {
  const error = $('sources-row-error');
  const result = $('sources-row-result');
  const button = (text, label, call) => rowButton(text, label, error, result, call);
  const signal = (x, wakeup, done) => async () => {
    await api('POST', `${base}/sources/${x.id}/signal`, { wakeup });
    return done;
  };
  syncRows(
    tbody('sources-table'),
    sources,
    (x) => x.id,
    (x) => [
      x.id,
      x.kind,
      user(x.mode),
      x.order,
      yesNo(x.valid),
      { text: x.fired + (x.signalled ? ' (signalled)' : ''), cls: 'num' },
      { text: x.scheduled, cls: 'num' },
      { text: x.cancelled, cls: 'num' },
      x.kind === 'port' ? `${x.received} in, ${x.queued} queued` : '–',
      x.action ? actionText(x.action) : '–',
    ],
    (x) => [
      ...(x.kind === 'custom'
        ? [
            button('Signal + wake', `Signal ${x.id} and wake the loop`, signal(x, true, `${x.id} signalled + woken`)),
            button('Signal only', `Signal ${x.id} without waking`, signal(x, false, `${x.id} signalled (no wake-up: it fires when something else wakes the loop)`)),
          ]
        : []),
      button('Invalidate', `Invalidate source ${x.id}`, async () => {
        await api('DELETE', `${base}/sources/${x.id}`);
        return `${x.id} invalidated`;
      }),
    ],
  );
  // the port-source picker of the message form
  const ports = sources.filter((x) => x.kind === 'port' && x.valid).map((x) => x.id);
  setOptions(document.querySelector('[data-source-select="port"]'), ports, h('option', { value: '' }, '(no port source)'));
}

function renderModes(modes) {
  setFacts($('modes-facts'), [
    ['current', modes.current ? user(modes.current) : '–'],
    ['all modes', modes.all.length ? userList(modes.all) : '–'],
    ['common set', modes.common.length ? userList(modes.common) : '–'],
  ]);
  const names = ['default', 'common', ...modes.all.filter((x) => x !== 'default' && x !== 'kCFRunLoopDefaultMode')];
  setOptions($('mode-names'), [...new Set(names)]);
}

function renderObservers(observers) {
  syncRows(
    tbody('observers-table'),
    observers,
    (o) => o.id,
    (o) => [o.id, o.activities.length === 6 ? 'all' : o.activities.join(', '), o.repeats ? 'yes' : 'no', user(o.mode), o.order, o.valid ? 'yes' : 'no', { text: o.fired, cls: 'num' }],
  );
}

function renderPending(pending) {
  syncRows(
    tbody('pending-table'),
    pending,
    (p) => p.performId,
    (p) => [p.performId, actionText(p), p.via || 'selector', userList(p.modes), fmtTime(p.queuedAt), p.afterDelay != null ? p.afterDelay + ' s' : '–', p.fireAt ? fmtIn(p.fireAt) : '–'],
  );
}

function renderTasks(q, base) {
  const flag = $('tasks-flag');
  setText(flag, q.suspended ? 'suspended' : 'active');
  setClass(flag, 'badge ' + (q.suspended ? 'ex-stopped' : 'ex-handledSource'));
  setFacts($('tasks-facts'), [
    ['queued', `${q.count} / ${q.capacity}`],
    ['done', q.done],
    ['failed', q.failed],
  ]);
  const error = $('tasks-row-error');
  syncRows(
    tbody('tasks-table'),
    q.tasks,
    (t) => t.id,
    (t) => [String(q.tasks.indexOf(t) + 1), user(t.id), user(t.selector), jsonShort(t.args), t.runs, t.running ? 'running' : '–'],
    (t) => [rowButton('Remove', ['Remove task ', user(t.id)], error, null, () => api('DELETE', `${base}/tasks/${encodeURIComponent(t.id)}`))],
  );
}

function renderLog(log) {
  const counters = Object.entries(log.counters || {}).map(([name, n]) => [user(name), n]);
  setFacts($('counters-facts'), counters.length ? counters : [['counters', 'none']]);
  const lines = (log.lines || []).slice(-200);
  const el = $('log-lines');
  const atEnd = el.scrollTop + el.clientHeight >= el.scrollHeight - 4;
  // a line each, as user text (a log line quotes names and messages)
  if (setText(el, lines.length ? userList(lines, '\n') : '(empty)') && atEnd) el.scrollTop = el.scrollHeight;
}
