// cards.js — owns the worker cards in #cards: building one per thread model
// (m.card = {el, r: its parts}), updating it in place from m.snap, and the
// card's buttons (Details, Stop, Wake, Observe, Run for manual threads).

import { state, markDirty } from './state.js';
import { api, stopThread, wakeThread, threadPath } from './api.js';
import { h, setText, setClass, user, plain } from './dom.js';
import { fmtMs, fmtTime, plural, exitText, styleText, fmtPercent } from './format.js';
import { act, num, clean } from './forms.js';
import { select, refreshDetailSoon } from './detail.js';
import { expectedBy } from './warnings.js';

const EXIT_REASONS = Object.freeze(['finished', 'stopped', 'timedOut', 'handledSource']);

/** Brings a thread's card up to date (building it the first time). */
export function updateCard(m) {
  const s = m.snap;
  if (!s) return;
  const { el, r } = m.card || buildCard(m);
  const shown = s.state === 'exited' ? 'exited' : m.hint || s.state;
  const exited = shown === 'exited';
  setText(r.name, user(s.name || s.id));
  setText(r.state, shown + (s.parked ? ' · parked' : '') + (s.ending && !exited ? ' · ending' : ''));
  setClass(r.state, 'badge state st-' + shown);
  setClass(el, 'card st-' + shown + (m.id === state.selectedId ? ' selected' : ''));
  // Ended threads pile up: hidden unless asked for (or shown in the detail panel).
  el.hidden = exited && !state.showEnded && m.id !== state.selectedId;
  setText(r.meta, styleText(s.run, s.keepAlive));
  setText(r.util, fmtPercent(s.load ? s.load.utilization : null));
  // busy over the part of the window the thread existed in (all of it, or since it was made)
  const covered = s.load && typeof s.load.coveredSeconds === 'number' && s.load.coveredSeconds < s.load.windowSeconds ? `the ${fmtMs(s.load.coveredSeconds * 1000)} it has existed of ` : '';
  r.util.title = s.load ? `busy share of ${covered}the last ${s.load.windowSeconds} s (lifetime ${fmtPercent(s.load.lifetimeUtilization)}); dispatch mean ${fmtMs(s.load.dispatchMs.mean)}` : '';
  // the warnings an experiment raises on purpose are not counted (the Warnings panel shows them muted)
  const active = (s.warnings || []).filter((w) => w.active && !expectedBy(w.thread, w.code));
  r.warn.hidden = active.length === 0;
  setText(r.warn, plural(active.length, 'warning'));
  r.warn.title = plain(active.map((w, i) => [i ? '\n' : '', `${w.code}: `, user(w.message)]));
  setText(r.mode, s.currentMode ? user(s.currentMode) : exited ? '–' : ['(', user(s.run.mode), ')']);
  // runs counts the runs that returned; a loop thread's first run (or any long
  // one) is under way with none returned yet: say so, not a bare 0
  const underWay = exited ? 0 : s.depth || 0;
  setText(r.runs, s.runs);
  r.underWay.hidden = !underWay;
  setText(r.underWay, underWay ? `+${underWay} under way` : '');
  r.underWay.title = underWay ? `${plural(s.runs, 'run')} returned; ${underWay} under way (depth ${underWay})` : '';
  // the thread's lifetime count (removed timers' fires included), or the
  // timer events seen since, when they have gone past it
  let fires = 0;
  for (const f of m.timerFires.values()) fires += f;
  setText(r.fires, Math.max(fires, s.timerFires || 0));
  for (const reason of EXIT_REASONS) setText(r['ex_' + reason], s.exits[reason] || 0);
  updateLastExit(r.lastExit, s.lastExit);
  const c = s.counts || {};
  setText(r.counts, `timers ${c.timers ?? 0} · sources ${c.sources ?? 0} · observers ${c.observers ?? 0} · tasks ${c.tasks ?? 0} · pending performs ${c.pendingPerforms ?? 0}`);
  r.runBox.hidden = s.run.style !== 'manual';
  for (const b of [r.stop, r.wake, r.observe, r.run]) b.setAttribute('aria-disabled', exited ? 'true' : 'false');
  r.observe.setAttribute('aria-pressed', m.observed ? 'true' : 'false');
  setText(r.observe, m.observed ? 'Stop observing' : 'Observe');
}

function updateLastExit(badge, x) {
  if (x) {
    setText(badge, `${x.exitReason} · ${x.cause ? x.cause.code + ' · ' : ''}${fmtMs(x.durationMs)}`);
    setClass(badge, 'badge exit ex-' + x.exitReason);
    badge.title = plain([x.cause ? [user(x.cause.message), '\n'] : '', `run ${x.run} in `, user(x.mode), `, depth ${x.depth}, ended ${fmtTime(x.at)}`]);
    badge.dataset.cause = x.cause ? x.cause.code : '';
  } else {
    setText(badge, 'none yet');
    setClass(badge, 'badge exit ex-none');
  }
}

function buildCard(m) {
  const r = {};
  const el = cardElement(m.id, r);
  wireCard(m, r);
  m.card = { el, r };
  m.showActs = true;
  document.getElementById('cards').append(el);
  return m.card;
}

/** The card's markup; r receives the parts updateCard writes to. */
function cardElement(id, r) {
  const mk = (key, tag, attrs, ...kids) => (r[key] = h(tag, attrs, ...kids));
  const kv = (term, key, attrs) => h('div', null, h('dt', null, term), mk(key, 'dd', attrs));
  const button = (key, action, text, attrs) => mk(key, 'button', { type: 'button', 'data-action': action, ...attrs }, text);
  const exitCells = EXIT_REASONS.map((reason) => h('div', { class: 'exit-count ex-' + reason }, h('dt', null, reason), mk('ex_' + reason, 'dd', { 'data-exit': reason }, '0')));
  mk('runSeconds', 'input', { type: 'number', step: 'any', value: '1', id: `run-s-${id}`, class: 'run-seconds', 'aria-label': `Seconds for a run of ${id}` });
  mk('runFlag', 'input', { type: 'checkbox', id: `run-f-${id}`, 'data-role': 'run-return-after-source' });
  return h(
    'article',
    { class: 'card', 'data-thread': id, 'aria-labelledby': `card-h-${id}` },
    h(
      'header',
      { class: 'card-head' },
      h('h3', { id: `card-h-${id}` }, mk('name', 'span', { class: 'card-name' }), ' ', h('span', { class: 'mono muted card-id' }, id)),
      mk('warn', 'span', { class: 'badge warn', 'data-role': 'warnings', hidden: true }),
      mk('state', 'span', { class: 'badge state', 'data-role': 'state' }),
    ),
    mk('meta', 'p', { class: 'card-meta muted' }),
    h('dl', { class: 'kv' }, kv('mode', 'mode', { class: 'mono' }), h('div', null, h('dt', null, 'runs'), h('dd', null, mk('runs', 'span', { 'data-role': 'runs' }), mk('underWay', 'span', { class: 'under-way muted', 'data-role': 'runs-under-way', hidden: true }))), kv('timer fires', 'fires', { 'data-role': 'fires' }), kv('busy', 'util', { 'data-role': 'utilization' })),
    h('dl', { class: 'exits', 'aria-label': 'exit counts per reason' }, ...exitCells),
    h('p', { class: 'last-exit-row' }, 'last exit ', mk('lastExit', 'span', { class: 'badge exit', 'data-role': 'last-exit' })),
    mk('counts', 'p', { class: 'card-counts muted small-text' }),
    h(
      'div',
      { class: 'card-actions' },
      button('details', 'details', 'Details', { 'aria-controls': 'detail' }),
      button('stop', 'stop', 'Stop'),
      button('wake', 'wakeup', 'Wake'),
      button('observe', 'observe', 'Observe', { 'aria-pressed': 'false', title: 'Add an observer for all activities (its records: GET /api/threads/{id}/activity)' }),
      mk(
        'runBox',
        'span',
        { class: 'run-box' },
        h('label', { for: r.runSeconds.id, class: 'sr-only' }, 'seconds'),
        r.runSeconds,
        h('span', { class: 'unit', 'aria-hidden': 'true' }, 's'),
        h('label', { for: r.runFlag.id, class: 'check small-text', title: 'CFRunLoopRunInMode returnAfterSourceHandled: return after one source (never after a timer)' }, r.runFlag, ' return after source'),
        button('run', 'run', 'Run'),
      ),
    ),
    mk('error', 'p', { class: 'form-error card-error', role: 'alert' }),
    mk('result', 'p', { class: 'form-result card-result', role: 'status', 'data-role': 'result' }),
  );
}

function wireCard(m, r) {
  const base = threadPath(m.id);
  const on = (button, fn) => button.addEventListener('click', () => act(button, r.error, r.result, fn));
  r.details.addEventListener('click', () => select(m.id, true));
  on(r.stop, () => stopThread(base));
  on(r.wake, () => wakeThread(base));
  on(r.observe, () => (m.observed ? stopObserving(m) : observe(m)));
  on(r.run, async () => ['run → ', exitText(await api('POST', base + '/run', clean({ seconds: num(r.runSeconds), returnAfterSourceHandled: r.runFlag.checked })))]);
  r.runSeconds.addEventListener('keydown', (e) => {
    if (e.key === 'Enter') r.run.click();
  });
}

/** An observer for all activities: feeds the timeline's activity lanes. */
async function observe(m) {
  const o = await api('POST', threadPath(m.id) + '/observers', { activities: 'all' });
  m.observed = true;
  m.showActs = true;
  observedChanged(m);
  return `observer ${o.id} watches all activities`;
}

/** Invalidates every observer still valid on the thread. */
async function stopObserving(m) {
  const base = threadPath(m.id);
  const list = await api('GET', base + '/observers');
  const valid = list.observers.filter((o) => o.valid);
  for (const o of valid) await api('DELETE', `${base}/observers/${encodeURIComponent(o.id)}`);
  m.observed = false;
  observedChanged(m);
  return `stopped observing (${plural(valid.length, 'observer')} invalidated)`;
}

function observedChanged(m) {
  markDirty(m.id);
  if (m.id === state.selectedId) refreshDetailSoon();
}
