// events.js — owns what the server tells the page on its own: the live event
// stream /api/events (an sse.js EventStream over fetch, the token in the
// Authorization header), the connection badge (#conn), applying each event
// to the thread models, and the once-a-second poll of /api/threads for the
// states the stream does not announce (running / waiting).

import { state, model, applySnapshot, pushRing, eventTime, markDirty, queueFrame } from './state.js';
import { api, authHeaders, onTokenChange } from './api.js';
import { setText, setClass } from './dom.js';
import { EventStream } from './sse.js';
import { clearSelection, refreshDetailSoon, detailTimerEvent, performEvent } from './detail.js';
import { warningEvent } from './warnings.js';

/** Opens the stream; reopens it with a new token, closes it when the page is put away. */
export function startEvents() {
  state.stream = new EventStream('/api/events', { headers: () => authHeaders(), onConnecting, onEvent, onDown });
  onTokenChange(() => state.stream.open());
  addEventListener('pagehide', () => state.stream.close());
  addEventListener('pageshow', (e) => {
    if (e.persisted) state.stream.open(); // back from the back/forward cache
  });
  state.stream.open();
}

export async function poll() {
  if (state.polling || document.hidden) return;
  state.polling = true;
  try {
    const data = await api('GET', '/api/threads');
    for (const snap of data.threads || []) applySnapshot(snap);
  } catch {
    /* the connection badge shows problems */
  } finally {
    state.polling = false;
  }
}

function setConn(kind, text) {
  setClass(document.getElementById('conn'), 'conn conn-' + kind);
  setText(document.getElementById('conn-text'), text);
}

function onConnecting(retries) {
  setConn(retries ? 'reconnecting' : 'connecting', retries ? `reconnecting (attempt ${retries})…` : 'connecting…');
}

function onDown({ delay }) {
  setConn('offline', `disconnected: retrying in ${(delay / 1000).toFixed(1)} s`);
  // A refused stream may be a 401: a plain request shows it (and asks for a token once).
  api('GET', '/api/version').catch(() => {});
}

function onEvent({ type, data }) {
  let d;
  try {
    d = JSON.parse(data);
  } catch {
    return;
  }
  if (type === 'hello') return hello(d);
  if (type === 'warning') return warningEvent(d);
  if (!Object.hasOwn(HANDLERS, type) || !d.thread) return;
  const m = model(d.thread);
  HANDLERS[type](m, d, Date.now());
  markDirty(m.id);
  if (m.id === state.selectedId && type !== 'activity' && type !== 'turn') refreshDetailSoon();
}

/** The stream's first event: every thread there is now. */
function hello(d) {
  setConn('live', 'live');
  const known = new Set((d.threads || []).map((t) => t.id));
  for (const id of [...state.threads.keys()]) if (!known.has(id)) removeThread(id); // server restarted
  for (const snap of d.threads || []) applySnapshot(snap);
  refreshDetailSoon();
}

export function removeThread(id) {
  const m = state.threads.get(id);
  if (!m) return;
  m.card?.el.remove();
  m.lane?.box.remove();
  state.threads.delete(id);
  state.dirty.delete(id);
  state.countsDirty = true;
  if (state.selectedId === id) clearSelection();
  queueFrame();
}

/** One handler an event name: (model, event data, now). */
const HANDLERS = Object.freeze({
  thread(m, d, now) {
    if (d.snapshot) applySnapshot(d.snapshot);
    if (d.change === 'exited' && m.snap) m.snap = { ...m.snap, state: 'exited' };
    pushRing(m, { t: now, kind: 'thread', label: d.change });
  },
  'run-exit'(m, d) {
    if (m.snap && d.run > m.lastRun) {
      const exits = { ...m.snap.exits, [d.exitReason]: (m.snap.exits[d.exitReason] || 0) + 1 };
      const lastExit = { exitReason: d.exitReason, code: d.code, mode: d.mode, durationMs: d.durationMs, at: d.at, run: d.run, depth: d.depth, cause: d.cause };
      m.snap = { ...m.snap, runs: m.snap.runs + 1, exits, lastExit };
      m.lastRun = d.run;
    }
    pushRing(m, { t: eventTime(d.at), kind: 'exit', reason: d.exitReason, run: d.run, cause: d.cause });
  },
  timer(m, d, now) {
    m.timerFires.set(d.timer, d.fires);
    pushRing(m, { t: now, kind: 'timer' });
    detailTimerEvent(m.id, d);
  },
  source(m, d, now) {
    pushRing(m, { t: now, kind: 'source' });
  },
  perform(m, d, now) {
    pushRing(m, { t: now, kind: 'perform', ok: d.ok });
    performEvent(d);
  },
  task(m, d, now) {
    pushRing(m, { t: now, kind: 'task' });
  },
  turn(m, d) {
    const t = eventTime(d.startedAt);
    pushRing(m, { t, end: t + d.busyMs, kind: 'turn', turn: d });
    m.turns.push(d);
    if (m.turns.length > 400) m.turns.splice(0, 100);
  },
  stall(m, d) {
    m.stalls.set(d.stall, { ...d, t: m.stalls.get(d.stall)?.t ?? Date.now() - d.ms, open: true });
  },
  'stall-ended'(m, d) {
    const known = m.stalls.get(d.stall);
    m.stalls.set(d.stall, { ...d, t: known ? known.t : Date.now() - d.ms, open: false });
    if (m.stalls.size > 100) m.stalls.delete(m.stalls.keys().next().value);
  },
  activity(m, d) {
    m.observed = true;
    // Several observers report the same turn: keep one mark per (at, activity).
    const key = d.at + '|' + d.activity;
    if (m.recentActs.includes(key)) return;
    m.recentActs.push(key);
    if (m.recentActs.length > 24) m.recentActs.shift();
    pushRing(m, { t: eventTime(d.at), kind: 'activity', activity: d.activity });
    if (d.activity === 'beforeWaiting') m.hint = 'waiting';
    else if (d.activity === 'afterWaiting' || d.activity === 'entry') m.hint = 'running';
    else if (d.activity === 'exit') m.hint = null;
  },
});
