// timeline.js — owns the Timeline section: one <canvas> lane per thread
// (m.lane = {box, canvas, title, hits}) redrawn about 15 times a second from
// the thread's event ring (m.ring: turns, timer / source / perform marks, run
// exits) and its stalls (m.stalls), and the Pause, Window and Zoom controls
// (state.timeline). While the thread table is the view (many threads), lanes
// are drawn only for the selected and pinned threads (state.laneIds). Turns come from the server for every thread (no observer
// needed): a block per turn (busy), shade for sleep. Hovering a turn shows
// it; clicking one opens it in the detail panel, from where a run can be
// zoomed into. Canvas drawing only: no inline styles, no images.

import { state, laneIds, eventTime } from './state.js';
import { h, setText, user, plain } from './dom.js';
import { turnText, fmtMs } from './format.js';
import { expectedBy } from './warnings.js';
import { endedHistory } from './timeline-ended.js';

const LANES = Object.freeze(['turns', 'stalls', 'timer', 'source', 'perform', 'run exit']);
const ROW = Object.freeze({ turns: 0, stalls: 1, timer: 2, source: 3, perform: 4, exit: 5 });
const LANE_H = 14;
const LABEL_W = 72;
const CSS_H = LANES.length * LANE_H + 16;
const COLORS = Object.freeze({
  grid: '#d5dae1', text: '#3b4350', sleep: 'rgba(37, 99, 235, 0.12)', busy: '#1f2937', selected: '#2563eb',
  timer: '#b45309', source: '#047857', perform: '#6d28d9', performFail: '#b91c1c', task: '#0e7490',
  micro: '#d97706', hang: '#dc2626', severe: '#7f1d1d', expectedStall: '#9ca3af',
  finished: '#4b5563', stopped: '#c2410c', timedOut: '#7e22ce', handledSource: '#15803d',
});

/** Hooks the detail panel sets: open a turn (thread id, turn object). */
export const timelineHooks = { openTurn: () => {} };

export function wireTimeline() {
  const tl = state.timeline;
  const pause = document.getElementById('tl-pause');
  pause.addEventListener('click', () => setPaused(!tl.paused));
  document.getElementById('tl-window').addEventListener('change', () => (tl.lastDraw = 0));
  document.getElementById('tl-unzoom').addEventListener('click', () => zoomTo(null));
  requestAnimationFrame(drawTimeline);
}

function setPaused(paused) {
  const tl = state.timeline;
  tl.paused = paused;
  tl.pausedAt = Date.now();
  const pause = document.getElementById('tl-pause');
  pause.setAttribute('aria-pressed', String(paused));
  setText(pause, paused ? 'Resume' : 'Pause');
  tl.lastDraw = 0;
}

/** Zooms every lane into one run of one thread (null: back to the live window). */
export function zoomTo(thread, run) {
  const tl = state.timeline;
  const unzoom = document.getElementById('tl-unzoom');
  const label = document.getElementById('tl-zoom');
  if (!thread) {
    tl.zoom = null;
    unzoom.hidden = true;
    setText(label, '');
    setPaused(false);
    return false;
  }
  const m = state.threads.get(thread);
  const turns = m ? m.ring.filter((e) => e.kind === 'turn' && e.turn.run === run) : [];
  const exit = m ? m.ring.find((e) => e.kind === 'exit' && e.run === run) : null;
  if (!turns.length) return false;
  let from = Math.min(...turns.map((e) => e.t));
  let to = Math.max(...turns.map((e) => e.end), exit ? exit.t : 0);
  const pad = Math.max(0.5, (to - from) * 0.05);
  from -= pad;
  to += pad;
  tl.zoom = { thread, run, from, to };
  unzoom.hidden = false;
  setText(label, `${thread}, run ${run}: ${turns.length} turns in ${fmtMs(to - from)}`);
  setPaused(true);
  return true;
}

function drawTimeline(ts) {
  requestAnimationFrame(drawTimeline);
  const tl = state.timeline;
  if (document.hidden || ts - tl.lastDraw < 66) return; // ~15 frames a second is plenty
  tl.lastDraw = ts;
  let span;
  if (tl.zoom) {
    span = { from: tl.zoom.from, now: tl.zoom.to, ms: tl.zoom.to - tl.zoom.from };
  } else {
    const windowMs = Number(document.getElementById('tl-window').value) * 1000;
    const now = tl.paused ? tl.pausedAt : Date.now();
    span = { from: now - windowMs, now, ms: windowMs };
  }
  if (state.view.table) {
    const ids = laneIds();
    for (const m of state.threads.values()) if (m.lane && !ids.has(m.id)) dropLane(m);
    for (const id of ids) {
      const m = state.threads.get(id);
      if (m && m.snap) drawLane(m, span);
    }
  } else for (const m of state.threads.values()) if (m.snap) drawLane(m, span);
}

function dropLane(m) {
  m.lane.box.remove();
  m.lane = null;
}

function laneFor(m) {
  if (m.lane) return m.lane;
  const canvas = h('canvas', { role: 'img', 'aria-label': `Timeline of ${m.id}` });
  const title = h('h3', { class: 'lane-title' });
  const box = h('div', { class: 'lane', 'data-lane': m.id }, title, canvas);
  document.getElementById('lanes').append(box);
  const lane = { box, canvas, title, hits: [], stallMarks: 0 };
  canvas.addEventListener('mousemove', (e) => {
    const hit = hitAt(lane, e.offsetX);
    canvas.title = hit ? plain(turnText(hit.turn)) : '';
    canvas.classList.toggle('over-turn', !!hit);
  });
  canvas.addEventListener('click', (e) => {
    const hit = hitAt(lane, e.offsetX);
    if (hit) timelineHooks.openTurn(m.id, hit.turn);
  });
  m.lane = lane;
  return lane;
}

/** The turn drawn at x (its block widened to 5 px so short turns can be hit). */
function hitAt(lane, x) {
  let best = null;
  for (const hit of lane.hits) {
    const mid = (hit.x0 + hit.x1) / 2;
    const half = Math.max(2.5, (hit.x1 - hit.x0) / 2);
    if (Math.abs(x - mid) <= half && (!best || Math.abs(x - mid) < Math.abs(x - (best.x0 + best.x1) / 2))) best = hit;
  }
  return best;
}

/**
 * A stall that began before the page inspected the thread (so no stall event
 * reached it): drawn from the thread's stall warnings, which carry the stall's
 * id and how long it had run when last reported.
 */
function stallsFromWarnings(m) {
  for (const w of m.snap.warnings || []) {
    const d = w.details;
    if (w.code !== 'stall' || !d || !d.stall || typeof d.ms !== 'number') continue;
    const known = m.stalls.get(d.stall);
    if (known && (known.open === w.active || !known.open)) continue;
    const t = known ? known.t : eventTime(w.lastAt, false) - d.ms;
    m.stalls.set(d.stall, { stall: d.stall, severity: w.severity, ms: d.ms, t, open: w.active });
  }
}

function drawLane(m, span) {
  const l = laneFor(m);
  stallsFromWarnings(m);
  const zoom = state.timeline.zoom;
  const recent = m.ring.length && m.ring[m.ring.length - 1].t >= span.from;
  const ended = m.snap.state === 'exited';
  // an ended thread's lane stays while its end is in the window, drawn from what the server kept of it
  const endedInWindow = ended && m.snap.endedAt && eventTime(m.snap.endedAt, false) >= span.from;
  l.box.hidden = zoom ? zoom.thread !== m.id : ended && (!(recent || endedInWindow) || !state.showEnded);
  if (l.box.hidden) return;
  if (ended) endedHistory(m);
  setText(l.title, [user(m.snap.name || m.id), ` (${m.id})`]);
  const ctx = sizedContext(l.canvas, l.box.clientWidth);
  const plotW = Math.max(10, l.box.clientWidth - LABEL_W - 4);
  const view = { ...span, ctx, plotW, x: (t) => LABEL_W + ((t - span.from) / span.ms) * plotW };
  drawGrid(view);
  l.hits = [];
  l.exitXs = [];
  drawMarks(m, view, l);
  l.stallMarks = drawStalls(m, view);
  l.box.dataset.turns = String(l.hits.length);
  // Where the newest turn is drawn (CSS px from the canvas's left): lets a test point at one.
  const last = l.hits[l.hits.length - 1];
  l.box.dataset.lastTurnX = last ? ((last.x0 + last.x1) / 2).toFixed(1) : '';
  l.box.dataset.stalls = String(l.stallMarks);
  // Where each run exit is drawn (CSS px, in time order): lets a test check them against their times.
  l.box.dataset.exitXs = l.exitXs.map((x) => x.toFixed(1)).join(',');
}

/** The canvas at the box's width (device pixels), its CSS height set through the CSSOM. */
function sizedContext(canvas, cssW) {
  const dpr = window.devicePixelRatio || 1;
  if (canvas.width !== Math.round(cssW * dpr) || canvas.height !== Math.round(CSS_H * dpr)) {
    canvas.width = Math.round(cssW * dpr);
    canvas.height = Math.round(CSS_H * dpr);
    canvas.style.height = CSS_H + 'px'; // CSSOM, allowed by style-src 'self' (no style attribute is parsed)
  }
  const ctx = canvas.getContext('2d');
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.clearRect(0, 0, cssW, CSS_H);
  return ctx;
}

/** A tick step (ms) giving about 5–10 lines across the span. */
function tickStep(ms) {
  for (const step of [0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000]) if (ms / step <= 10) return step;
  return 10000;
}

/** Lane stripes and names, tick lines, the axis labels. */
function drawGrid({ ctx, plotW, x, from, now, ms }) {
  ctx.font = '10px system-ui, sans-serif';
  ctx.textBaseline = 'middle';
  LANES.forEach((name, i) => {
    const y = i * LANE_H;
    ctx.fillStyle = i % 2 ? '#f6f8fa' : '#ffffff';
    ctx.fillRect(LABEL_W, y, plotW, LANE_H);
    ctx.fillStyle = COLORS.text;
    ctx.fillText(name, 2, y + LANE_H / 2);
  });
  const axisY = LANES.length * LANE_H;
  const step = tickStep(ms);
  ctx.fillStyle = COLORS.grid;
  for (let t = Math.ceil(from / step) * step; t <= now; t += step) ctx.fillRect(x(t), 0, 1, axisY);
  ctx.fillStyle = COLORS.text;
  const zoomed = !!state.timeline.zoom;
  ctx.fillText(zoomed ? '0' : `-${fmtMs(ms)}`, LABEL_W, axisY + 8);
  ctx.textAlign = 'center';
  ctx.fillText(`grid ${fmtMs(step)}`, LABEL_W + plotW / 2, axisY + 8);
  ctx.textAlign = 'right';
  ctx.fillText(zoomed ? fmtMs(ms) : state.timeline.paused ? 'paused' : 'now', LABEL_W + plotW, axisY + 8);
  ctx.textAlign = 'left';
}

/** First index of the ring inside the window (binary search; the ring is nearly sorted). */
function firstInWindow(ring, from) {
  let lo = 0;
  let hi = ring.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (ring[mid].t < from - 2000) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

function drawMarks(m, view, lane) {
  const { ctx, x, now, from } = view;
  const ring = m.ring;
  const open = state.turnView && state.turnView.thread === m.id ? state.turnView.turn.turn : null;
  for (let i = firstInWindow(ring, from); i < ring.length; i++) {
    const e = ring[i];
    if (e.t > now) break;
    if (e.kind === 'turn') {
      // Asleep before the turn (afterWaiting ends the sleep), across every lane.
      if (e.turn.sleptMs > 0) shade(ctx, x(e.t - e.turn.sleptMs), x(e.t));
      const x0 = Math.max(LABEL_W, x(e.t));
      const x1 = Math.max(x0 + 2, x(e.end));
      if (x1 < LABEL_W) continue;
      ctx.fillStyle = e.turn.turn === open ? COLORS.selected : COLORS.busy;
      ctx.fillRect(x0, ROW.turns * LANE_H + 2, x1 - x0, LANE_H - 4);
      lane.hits.push({ x0, x1, turn: e.turn });
      continue;
    }
    const ex = x(e.t);
    if (ex < LABEL_W) continue;
    drawMark(ctx, e, ex);
    if (e.kind === 'exit') lane.exitXs.push(ex);
  }
}

/** Asleep, across the lanes. */
function shade(ctx, fromX, toX) {
  const sx = Math.max(LABEL_W, fromX);
  if (toX <= sx) return;
  ctx.fillStyle = COLORS.sleep;
  ctx.fillRect(sx, 0, toX - sx, LANES.length * LANE_H);
}

/** Stalls: a bar from the callout's start to its end (or now), coloured by severity. */
function drawStalls(m, { ctx, x, from, now }) {
  let drawn = 0;
  // stalls an experiment causes on purpose (its expectedWarnings): grey, not red
  const expected = !!expectedBy(m.id, 'stall');
  for (const s of m.stalls.values()) {
    const end = s.open ? Date.now() : s.t + s.ms;
    if (end < from || s.t > now) continue;
    const x0 = Math.max(LABEL_W, x(s.t));
    ctx.fillStyle = expected ? COLORS.expectedStall : COLORS[s.severity] || COLORS.hang;
    ctx.fillRect(x0, ROW.stalls * LANE_H + 2, Math.max(2, x(end) - x0), LANE_H - 4);
    drawn++;
  }
  return drawn;
}

function drawMark(ctx, e, ex) {
  switch (e.kind) {
    case 'timer':
      polygon(ctx, COLORS.timer, [[ex, 1.5], [ex + 3.5, LANE_H - 1.5], [ex - 3.5, LANE_H - 1.5]], ROW.timer * LANE_H);
      break;
    case 'source': {
      const c = LANE_H / 2;
      polygon(ctx, COLORS.source, [[ex, c - 4], [ex + 4, c], [ex, c + 4], [ex - 4, c]], ROW.source * LANE_H);
      break;
    }
    case 'perform':
    case 'task':
      ctx.fillStyle = e.kind === 'task' ? COLORS.task : e.ok === false ? COLORS.performFail : COLORS.perform;
      ctx.beginPath();
      ctx.arc(ex, ROW.perform * LANE_H + LANE_H / 2, 3.5, 0, Math.PI * 2);
      ctx.fill();
      break;
    case 'exit':
      ctx.fillStyle = COLORS[e.reason] || COLORS.finished;
      ctx.globalAlpha = 0.35;
      ctx.fillRect(ex, 0, 1, LANES.length * LANE_H);
      ctx.globalAlpha = 1;
      ctx.fillRect(ex - 1.5, ROW.exit * LANE_H + 1, 3, LANE_H - 2);
      break;
  }
}

/** A filled polygon; points' y are relative to the lane's top y. */
function polygon(ctx, color, points, y) {
  ctx.fillStyle = color;
  ctx.beginPath();
  points.forEach(([px, py], i) => (i ? ctx.lineTo(px, y + py) : ctx.moveTo(px, y + py)));
  ctx.closePath();
  ctx.fill();
}
