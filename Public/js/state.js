// state.js — owns every piece of mutable state the dashboard keeps: the thread
// models, the selection, the selector list, the token, the event stream, the
// render queue, the detail panel's fetch bookkeeping, the timeline's pause and
// the perform results waiting for an element. No other module keeps a
// top-level `let` or a mutable top-level object: they read and write here.
// Also the model updates that touch nothing but this state (model,
// applySnapshot, pushRing, eventTime) and the frame queue (markDirty).

const RING_MAX = 4000;

export const state = {
  /** id -> thread model, see model() */
  threads: new Map(),
  /** the thread shown in the detail panel, or null */
  selectedId: null,
  /** GET /api/selectors, sorted by name */
  selectors: [],
  /** selector pickers by their mount's data-picker name */
  pickers: new Map(),
  pickerSeq: 0,
  /** bearer token (kept in sessionStorage by api.js, never in a URL) */
  auth: { token: '', prompted: false, asking: null, listeners: [] },
  /** the live event stream (an sse.js EventStream) */
  stream: null,
  polling: false,
  /** render queue: models whose card needs an update, one frame at a time */
  dirty: new Set(),
  countsDirty: false,
  frameQueued: false,
  render: () => {},
  /** detail panel: data = {id, thread, timers, sources, observers, modes, tasks, log, at} */
  detail: { data: null, dirty: false, fetching: false, last: 0, timer: null, lastRender: 0 },
  /** timeline controls; zoom = {thread, run, from, to} while one run is shown */
  timeline: { paused: false, pausedAt: 0, lastDraw: 0, zoom: null },
  /** warnings by key (code|thread|subjects), from /api/warnings and warning events */
  warnings: new Map(),
  warningsDirty: false,
  /** thread id -> {experiment (its title), warnings [{code, reason}]}: the warnings an experiment played in this page raises on purpose on the threads it created (lab.js) */
  expectedWarnings: new Map(),
  /** the turn open in the detail panel: {thread, turn} */
  turnView: null,
  /** whether ended threads' cards are shown; ids of ended threads aged out of the list */
  showEnded: false,
  forgotten: new Set(),
  /** when the frame render last looked for ended threads to count or forget */
  endedCheckedAt: 0,
  endedTimer: null,
  /** performId -> result element waiting for it; performId -> outcome that came first */
  performs: { waiting: new Map(), recent: new Map() },
  /** server clock -> page clock: the smallest delivery delay seen lately */
  clock: { skew: null, since: 0 },
  /**
   * the main view (table.js): table or cards (forced: 'table' / 'cards' / null = by count),
   * the table's sort, filters, rows in order, row pool, pinned threads, and what needs redrawing
   */
  view: {
    table: false,
    forced: null,
    sort: { key: 'name', dir: 1 },
    filter: { text: '', state: '', mode: '', code: '' },
    order: [],
    pool: [],
    pinned: new Set(),
    rowsDirty: true,
    orderDirty: true,
    scrolled: false,
    summaryKey: '',
  },
  /** the last summary of a snapshot event (threads, byState, warningsByCode, busiest), or null */
  summary: null,
  /** the stream: whether the server sends snapshots on this connection (then no polling), its query */
  snapshots: { live: false, fresh: false, query: '', timer: null, resyncAt: 0 },
};

/** The model of a thread, created on first mention. */
export function model(id) {
  let m = state.threads.get(id);
  if (!m) {
    m = { id, snap: null, lastRun: 0, timerFires: new Map(), observed: false, showActs: true, ring: [], recentActs: [], turns: [], stalls: new Map(), card: null, lane: null, hint: null, history: null };
    state.threads.set(id, m);
    state.countsDirty = true;
  }
  return m;
}

/** Takes a thread snapshot (GET, POST or an event), never going back in run count. */
export function applySnapshot(snap) {
  if (state.forgotten.has(snap.id + '|' + snap.createdAt)) return;
  const m = model(snap.id);
  let old = m.snap;
  if (old && old.createdAt !== snap.createdAt) {
    // same id, another thread: the server restarted (ids restart at t1)
    old = null;
    m.lastRun = 0;
    m.timerFires.clear();
    m.ring.length = 0;
    m.turns.length = 0;
    m.stalls.clear();
    m.observed = false;
    m.history = null;
  }
  const lastRun = snap.lastExit ? snap.lastExit.run : 0;
  if (old && lastRun < m.lastRun) {
    // An older snapshot than the events already seen: keep the counters.
    snap = { ...snap, runs: old.runs, exits: old.exits, lastExit: old.lastExit };
  } else {
    // A run ended that no run-exit event told (the thread was not inspected then): its mark on the lane.
    if (lastRun > m.lastRun) exitMark(m, snap.lastExit, false);
    m.lastRun = lastRun;
  }
  if (old && old.state === 'exited') snap = { ...snap, state: 'exited' };
  m.snap = snap;
  m.hint = null;
  m.observed = !!(snap.counts && snap.counts.observers > 0);
  // Thread events carry no load or warnings: keep the last polled ones (and a snapshot row's rates).
  if (old && !snap.load && old.load) m.snap = { ...m.snap, load: old.load, warnings: old.warnings };
  if (old && snap.busyPercent === undefined && old.busyPercent !== undefined) m.snap = { ...m.snap, busyPercent: old.busyPercent, wakeupsPerSecond: old.wakeupsPerSecond };
  markDirty(snap.id);
}

/** A run's exit on the thread's timeline, once per run (live: told by a run-exit event as it happened; else read later). */
export function exitMark(m, x, live = true) {
  for (let i = m.ring.length - 1; i >= 0 && i >= m.ring.length - 64; i--) if (m.ring[i].kind === 'exit' && m.ring[i].run === x.run) return;
  pushRing(m, { t: eventTime(x.at, live), kind: 'exit', reason: x.exitReason, run: x.run, cause: x.cause });
}

export function pushRing(m, item) {
  m.ring.push(item);
  if (m.ring.length > RING_MAX) m.ring.splice(0, m.ring.length - RING_MAX * 0.75);
}

/**
 * A server timestamp on the page's clock. The skew is learnt from live events
 * only (`live`: delivered as they happened, so their smallest delay is the
 * clocks' difference); a time read later (a snapshot's last exit, a thread's
 * turns fetched after it ended, a warning's lastAt) only uses it: taken as a
 * delay, its age would move every other mark to "now".
 */
export function eventTime(at, live = true) {
  const now = Date.now();
  const t = at ? Date.parse(at) : NaN;
  if (isNaN(t)) return now;
  const c = state.clock;
  if (!live) return t + (c.skew ?? 0);
  const d = now - t;
  const stale = now - c.since > 30000;
  if (c.skew === null || d < c.skew || stale) {
    if (c.skew === null || stale) c.since = now;
    c.skew = d;
  }
  return t + c.skew;
}

/** The threads whose timeline lane is drawn (and whose events flow) while the table shows: selected and pinned. */
export function laneIds() {
  const ids = new Set(state.view.pinned);
  if (state.selectedId) ids.add(state.selectedId);
  return ids;
}

export function markDirty(id) {
  state.dirty.add(id);
  state.view.rowsDirty = true;
  queueFrame();
}

/** One render (state.render, set by main.js) per animation frame at most. */
export function queueFrame() {
  if (state.frameQueued) return;
  state.frameQueued = true;
  requestAnimationFrame(() => {
    state.frameQueued = false;
    state.render();
  });
}
