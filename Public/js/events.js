// events.js — owns what the server tells the page on its own: the live event
// stream /api/events (an sse.js EventStream over fetch, the token in the
// Authorization header), the connection badge (#conn), applying each event
// to the thread models, and the poll of /api/threads for a server that sends
// no snapshots.
//
// The stream is scoped (`scope=summary&inspect=…`): every thread's state
// reaches the page as `snapshot` events (the changed rows, the removed ids and
// a summary, a few a second at most), while turns, timer fires, performs and
// the other per-thread events come only for the inspected threads: the
// selected and pinned ones while the table shows, every shown thread while
// the cards do (the newest 48 at most). When that set changes the stream reconnects
// with the new query, resuming after its last event id. Applying a snapshot
// only updates the models; the frame render (main.js) draws what is in view.

import { state, model, applySnapshot, pushRing, exitMark, eventTime, markDirty, queueFrame, laneIds } from './state.js';
import { api, authHeaders, onTokenChange } from './api.js';
import { setText, setClass } from './dom.js';
import { EventStream } from './sse.js';
import { clearSelection, refreshDetailSoon, detailTimerEvent, performEvent } from './detail.js';
import { warningEvent } from './warnings.js';

const PAGE = 500;
/** A changed inspected set reconnects after this (cards: a new thread; the table: a selection, whose detail is fetched first). */
const RECONNECT_MS = { cards: 120, table: 400 };
const RESYNC_MS = 2000;
/** At most this many inspected threads (the server takes 64 by default, --stream-max-inspect). */
const MAX_INSPECT = 48;

const idNumber = (id) => Number(id.replace(/^\D+/, '')) || 0;

/** The stream's query for what the page watches now. */
function streamQuery() {
  const ids = [...laneIds()];
  if (!state.view.table) {
    // cards: every shown thread, the newest first when there are more than the bound
    const shown = [];
    for (const m of state.threads.values()) if (m.snap && !ids.includes(m.id) && (m.snap.state !== 'exited' || state.showEnded)) shown.push(m.id);
    shown.sort((a, b) => idNumber(b) - idNumber(a));
    ids.push(...shown);
  }
  ids.splice(MAX_INSPECT);
  ids.sort();
  return 'scope=summary' + (ids.length ? '&inspect=' + ids.map(encodeURIComponent).join(',') : '');
}

/** Reconnects (soon, once) when the inspected set changed; called from the frame render. */
export function syncStream() {
  const sn = state.snapshots;
  if (!state.stream || sn.timer) return;
  const query = streamQuery();
  if (query === sn.query) return;
  sn.timer = setTimeout(() => {
    sn.timer = null;
    const now = streamQuery();
    if (now === sn.query) return;
    sn.query = now;
    state.stream.url = '/api/events?' + now;
    state.stream.open();
  }, state.view.table ? RECONNECT_MS.table : RECONNECT_MS.cards);
}

/** Opens the stream; reopens it with a new token, closes it when the page is put away. */
export function startEvents() {
  state.snapshots.query = streamQuery();
  state.stream = new EventStream('/api/events?' + state.snapshots.query, { headers: () => authHeaders(), onConnecting, onEvent, onDown });
  onTokenChange(() => state.stream.open());
  addEventListener('pagehide', () => state.stream.close());
  addEventListener('pageshow', (e) => {
    if (e.persisted) state.stream.open(); // back from the back/forward cache
  });
  state.stream.open();
}

/**
 * Every thread, page by page: only while the stream sends no snapshots (they carry
 * the same rows), or (force) when a snapshot's count disagrees with the page's.
 */
export async function poll(force = false) {
  if (state.polling || document.hidden || (state.snapshots.live && !force)) return;
  state.polling = true;
  try {
    let cursor = null;
    const seen = new Set();
    const started = Date.now();
    for (let page = 0; page < 100; page++) {
      const data = await api('GET', '/api/threads?limit=' + PAGE + (cursor ? '&cursor=' + encodeURIComponent(cursor) : ''));
      for (const snap of data.threads || []) {
        seen.add(snap.id);
        applySnapshot(snap);
      }
      cursor = data.nextCursor;
      if (!cursor) {
        // the whole list: a thread the page knows and the server no longer lists is gone
        for (const [id, m] of [...state.threads]) {
          const young = m.snap && started - Date.parse(m.snap.createdAt) < 5000; // made after the first page was read
          if (!seen.has(id) && !young && id !== state.selectedId) removeThread(id);
        }
        break;
      }
      if (state.snapshots.live && !force) break;
    }
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
  state.snapshots.live = false;
  state.snapshots.fresh = true;
  state.summary = null; // the server's, until the next snapshot: counted on the page meanwhile
  state.view.rowsDirty = true;
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
  if (type === 'snapshot') return snapshot(d);
  if (type === 'hello') return hello(d);
  if (type === 'warning') return warningEvent(d);
  if (!Object.hasOwn(HANDLERS, type) || !d.thread) return;
  const m = model(d.thread);
  HANDLERS[type](m, d, Date.now());
  markDirty(m.id);
  if (m.id === state.selectedId && type !== 'activity' && type !== 'turn') refreshDetailSoon();
}

/** The stream's first event: every thread there is now (or, on a scoped stream, none: the first snapshot has them). */
function hello(d) {
  setConn('live', 'live');
  if (Array.isArray(d.threads) && d.threads.length) {
    const known = new Set(d.threads.map((t) => t.id));
    for (const id of [...state.threads.keys()]) if (!known.has(id)) removeThread(id); // server restarted
    for (const snap of d.threads) applySnapshot(snap);
  }
  refreshDetailSoon();
}

/**
 * Coalesced thread rows: {at, rows (changed threads, each a GET /api/threads object
 * with busyPercent and wakeupsPerSecond), removed (ids), summary}. The first of a
 * connection carries every thread. Models only: the frame render draws.
 */
function snapshot(d) {
  const sn = state.snapshots;
  const rows = Array.isArray(d.rows) ? d.rows : [];
  if (sn.fresh) {
    sn.fresh = false;
    setConn('live', 'live');
    const known = new Set(rows.map((t) => t.id));
    for (const id of [...state.threads.keys()]) if (!known.has(id)) removeThread(id); // gone while away, or a restart
  }
  sn.live = true;
  for (const row of rows) applySnapshot(row);
  for (const id of d.removed || []) removeThread(id);
  if (d.summary) {
    state.summary = d.summary;
    // The summary counts every thread: when the page knows another number, a row went
    // missing (or an old one stayed): read the whole list again, once in a while.
    if (typeof d.summary.threads === 'number' && d.summary.threads !== state.threads.size) resync();
  }
  state.view.rowsDirty = true;
  if (state.selectedId && rows.some((r) => r.id === state.selectedId)) refreshDetailSoon();
  queueFrame();
}

function resync() {
  const sn = state.snapshots;
  const now = Date.now();
  if (now - sn.resyncAt < RESYNC_MS) return;
  sn.resyncAt = now;
  poll(true);
}

export function removeThread(id) {
  const m = state.threads.get(id);
  if (!m) return;
  m.card?.el.remove();
  m.lane?.box.remove();
  state.threads.delete(id);
  state.dirty.delete(id);
  state.view.pinned.delete(id);
  state.view.rowsDirty = true;
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
    exitMark(m, d);
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
