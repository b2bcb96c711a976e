// detail.js — owns the Detail panel's life: which thread it shows
// (state.selectedId), fetching that thread's seven views (state.detail, at
// most ~3 times a second), rendering them through detail-sections.js, the
// timer events patched in between fetches, and the results of performs that
// arrive on the event stream (state.performs).

import { state, model, applySnapshot, markDirty, queueFrame, eventTime } from './state.js';
import { api, threadPath, clientError } from './api.js';
import { setText, user } from './dom.js';
import { fmtTime, performText } from './format.js';
import { renderSections } from './detail-sections.js';
import { detailHooks } from './detail-hooks.js';

const DETAIL_MIN_MS = 350;
const DETAIL_IDLE_MS = 2000;
const VIEWS = Object.freeze(['thread', 'timers', 'sources', 'observers', 'modes', 'tasks', 'log', 'why', 'turns?limit=60']);

/** Shows a thread in the panel (focus: move keyboard focus there too). */
export function select(id, focus) {
  if (state.selectedId !== id) {
    const prev = state.selectedId;
    state.selectedId = id;
    state.detail.data = null;
    state.detail.lastRender = 0; // the new thread's first render is not held back by the throttle
    if (prev && state.threads.has(prev)) markDirty(prev);
    markDirty(id);
    clearPanel();
    showPanel(true);
  }
  refreshDetailNow();
  if (focus) {
    const detail = document.getElementById('detail');
    detail.focus({ preventScroll: true });
    // side by side (wide): the panel is already in view; stacked (narrow): go there
    if (!matchMedia('(min-width: 1000px)').matches) detail.scrollIntoView({ block: 'start' });
  }
}

/** The selected thread is gone (server restarted): back to the empty panel. */
export function clearSelection() {
  state.selectedId = null;
  state.detail.data = null;
  showPanel(false);
}

function showPanel(on) {
  if (!on || (state.turnView && state.turnView.thread !== state.selectedId)) {
    state.turnView = null;
    document.getElementById('turn-box').hidden = true;
  }
  document.getElementById('detail-empty').hidden = on;
  document.getElementById('detail-body').hidden = !on;
}

/** Messages, invalid marks and rows of the previous thread. */
function clearPanel() {
  for (const el of document.querySelectorAll('#detail .form-error, #detail .form-result')) el.textContent = '';
  for (const el of document.querySelectorAll('#detail [aria-invalid]')) el.removeAttribute('aria-invalid');
  for (const tb of document.querySelectorAll('#detail tbody')) tb.replaceChildren();
}

/** The selected thread's API path, or a refusal to show beside the form. */
export function needThread() {
  if (!state.selectedId) throw clientError('pick a thread first');
  return threadPath(state.selectedId);
}

export function refreshDetailSoon() {
  const d = state.detail;
  if (!state.selectedId || d.timer) return;
  const wait = Math.max(0, DETAIL_MIN_MS - (Date.now() - d.last));
  d.timer = setTimeout(() => {
    d.timer = null;
    refreshDetailNow();
  }, wait);
}

/** Refreshes when nothing did for a while (states the events do not carry). */
export function refreshDetailIfIdle() {
  if (state.selectedId && !document.hidden && Date.now() - state.detail.last > DETAIL_IDLE_MS) refreshDetailSoon();
}

async function refreshDetailNow() {
  const id = state.selectedId;
  const d = state.detail;
  if (!id) return;
  if (d.fetching) {
    d.dirty = true;
    return;
  }
  d.fetching = true;
  d.last = Date.now();
  try {
    const base = threadPath(id);
    const got = await Promise.all(VIEWS.map((v) => api('GET', v === 'thread' ? base : `${base}/${v}`)));
    if (id !== state.selectedId) return;
    const [thread, timers, sources, observers, modes, tasks, log, why, turns] = got;
    d.data = { id, thread, timers: timers.timers, sources: sources.sources, observers: observers.observers, modes, tasks, log, why, turns: turns.turns, at: Date.now() };
    applySnapshot(thread);
    const m = model(id);
    for (const t of timers.timers) if ((m.timerFires.get(t.id) || 0) < t.fires) m.timerFires.set(t.id, t.fires);
    backfillTurns(m, turns.turns);
    queueFrame();
  } catch (e) {
    if (id === state.selectedId) setText(document.getElementById('detail-updated'), ['refresh failed: ', user(e.message)]);
  } finally {
    d.fetching = false;
    if (d.dirty) {
      d.dirty = false;
      refreshDetailSoon();
    }
  }
}

/**
 * Turns the stream did not bring (the thread was not inspected yet when they
 * ran: the page watches the events of the selected and pinned threads only)
 * go into the timeline's ring from GET /turns, in time order.
 */
function backfillTurns(m, turns) {
  const known = new Set();
  for (const e of m.ring) if (e.kind === 'turn') known.add(e.turn.turn);
  const missing = (turns || []).filter((t) => !known.has(t.turn));
  if (!missing.length) return;
  for (const t of missing) {
    const at = eventTime(t.startedAt, false);
    m.ring.push({ t: at, end: at + t.busyMs, kind: 'turn', turn: t });
  }
  m.ring.sort((a, b) => a.t - b.t);
}

/** Called once a frame: renders the panel, at most ten times a second. */
export function renderDetailThrottled() {
  const d = state.detail;
  if (!d.data) return;
  const now = performance.now();
  if (now - d.lastRender < 100) return queueFrame();
  d.lastRender = now;
  const data = d.data;
  setText(document.getElementById('detail-updated'), 'refreshed ' + fmtTime(new Date(data.at).toISOString()));
  renderSections(data, state.threads.get(data.id)?.snap || data.thread);
}

/** A timer event between fetches: its row's fires, validity and next fire. */
export function detailTimerEvent(id, e) {
  const data = state.detail.data;
  if (id !== state.selectedId || !data) return;
  const t = data.timers.find((x) => x.id === e.timer);
  if (!t) return;
  t.fires = Math.max(t.fires, e.fires);
  t.valid = e.valid;
  // the next fire is one interval on (CF keeps repeating timers on their schedule)
  if (t.repeats && e.valid) t.nextFireAt = new Date(Date.now() + t.interval * 1000 - (e.latenessMs || 0)).toISOString();
  if (t.lateness && e.latenessMs !== null) t.lateness.lastMs = e.latenessMs;
}

/** A perform's outcome from the event stream: into the element waiting for it. */
export function performEvent(e) {
  const { waiting, recent } = state.performs;
  recent.set(e.performId, e);
  if (recent.size > 200) recent.delete(recent.keys().next().value);
  const el = waiting.get(e.performId);
  if (!el) return;
  waiting.delete(e.performId);
  setText(el, performText(e));
  el.classList.toggle('bad', !e.ok);
}

/** The outcome of a queued perform when it came first, or queues resultEl for it (then: null). */
export function performOutcome(performId, resultEl) {
  const done = state.performs.recent.get(performId);
  if (done) return { text: performText(done), bad: !done.ok };
  state.performs.waiting.set(performId, resultEl);
  return null;
}

// The panel's parts call these through detailHooks (they cannot import this module).
detailHooks.select = select;
detailHooks.refreshSoon = refreshDetailSoon;
