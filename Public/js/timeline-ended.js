// timeline-ended.js — owns what an ended thread's lane is drawn from while
// "show ended" is on: the turns and run exits the server keeps for the thread
// (GET /api/threads/{id}/turns?exits=true), read once — an ended thread's
// rings change no more — and put into its timeline ring (m.ring) at their
// real times. The live event stream brings a thread's turns only while the
// page inspects it (events.js), so a thread that ended before the page
// watched it, or while the table showed, would otherwise leave its lane
// with no turns and only the exit its last snapshot tells. Imported by
// timeline.js, which calls endedHistory(m) for each ended lane it shows.

import { eventTime, pushRing, queueFrame } from './state.js';
import { api, threadPath } from './api.js';

/** The server clamps it to its largest turn ring (--max-turn-ring-size). */
const TURNS_LIMIT = 16384;
/** A read that failed is tried again after this long. */
const RETRY_MS = 5000;

/** Reads an ended thread's turns and run exits into its ring, once (m.history: 'reading', 'done' or the time a failed read may be retried). */
export function endedHistory(m) {
  if (m.history === 'reading' || m.history === 'done' || (typeof m.history === 'number' && Date.now() < m.history)) return;
  m.history = 'reading';
  const createdAt = m.snap && m.snap.createdAt;
  api('GET', `${threadPath(m.id)}/turns?limit=${TURNS_LIMIT}&exits=true`)
    .then((page) => {
      // the same thread still (a restarted server reuses ids)
      if (!m.snap || m.snap.createdAt !== createdAt) return;
      keep(m, page);
      m.history = 'done';
      queueFrame();
    })
    .catch(() => {
      m.history = Date.now() + RETRY_MS;
    });
}

/** The page's turns and exits that the ring lacks, at the times the server recorded (no clock learnt from them). */
function keep(m, page) {
  const turns = new Set();
  const exits = new Set();
  for (const e of m.ring) {
    if (e.kind === 'turn') turns.add(e.turn.turn);
    else if (e.kind === 'exit') exits.add(e.run);
  }
  for (const t of (page && page.turns) || []) {
    if (turns.has(t.turn)) continue;
    const at = eventTime(t.startedAt, false);
    pushRing(m, { t: at, end: at + t.busyMs, kind: 'turn', turn: t });
  }
  for (const x of (page && page.exits) || []) {
    if (exits.has(x.run)) continue;
    pushRing(m, { t: eventTime(x.at, false), kind: 'exit', reason: x.exitReason, run: x.run, cause: x.cause });
  }
  m.ring.sort((a, b) => a.t - b.t);
}
