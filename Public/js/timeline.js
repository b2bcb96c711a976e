// timeline.js — owns the Timeline section: one <canvas> lane per thread
// (m.lane = {box, canvas, title}) redrawn about 15 times a second from the
// thread's event ring (m.ring), and the Pause and Window controls
// (state.timeline). Canvas drawing only: no inline styles, no images.

import { state } from './state.js';
import { h, setText } from './dom.js';

const ACTIVITIES = Object.freeze(['entry', 'beforeTimers', 'beforeSources', 'beforeWaiting', 'afterWaiting', 'exit']);
const LANES = Object.freeze([...ACTIVITIES, 'timer', 'source', 'perform', 'run exit']);
const ROW = Object.freeze({ timer: 6, source: 7, perform: 8, exit: 9 });
const LANE_H = 13;
const LABEL_W = 92;
const CSS_H = LANES.length * LANE_H + 16;
const COLORS = Object.freeze({
  grid: '#d5dae1', text: '#3b4350', sleep: 'rgba(37, 99, 235, 0.13)', act: '#1f2937',
  timer: '#b45309', source: '#047857', perform: '#6d28d9', performFail: '#b91c1c', task: '#0e7490',
  finished: '#4b5563', stopped: '#c2410c', timedOut: '#7e22ce', handledSource: '#15803d',
});

export function wireTimeline() {
  const tl = state.timeline;
  const pause = document.getElementById('tl-pause');
  pause.addEventListener('click', () => {
    tl.paused = !tl.paused;
    tl.pausedAt = Date.now();
    pause.setAttribute('aria-pressed', String(tl.paused));
    setText(pause, tl.paused ? 'Resume' : 'Pause');
    tl.lastDraw = 0;
  });
  document.getElementById('tl-window').addEventListener('change', () => (tl.lastDraw = 0));
  requestAnimationFrame(drawTimeline);
}

function drawTimeline(ts) {
  requestAnimationFrame(drawTimeline);
  const tl = state.timeline;
  if (document.hidden || ts - tl.lastDraw < 66) return; // ~15 frames a second is plenty
  tl.lastDraw = ts;
  const windowS = Number(document.getElementById('tl-window').value);
  const now = tl.paused ? tl.pausedAt : Date.now();
  const span = { from: now - windowS * 1000, now, windowS };
  for (const m of state.threads.values()) if (m.snap) drawLane(m, span);
}

function laneFor(m) {
  if (m.lane) return m.lane;
  const canvas = h('canvas', { role: 'img', 'aria-label': `Timeline of ${m.id}` });
  const title = h('h3', { class: 'lane-title' });
  const box = h('div', { class: 'lane', 'data-lane': m.id }, title, canvas);
  document.getElementById('lanes').append(box);
  m.lane = { box, canvas, title };
  return m.lane;
}

function drawLane(m, span) {
  const l = laneFor(m);
  const recent = m.ring.length && m.ring[m.ring.length - 1].t >= span.from;
  l.box.hidden = m.snap.state === 'exited' && !recent;
  if (l.box.hidden) return;
  setText(l.title, `${m.snap.name || m.id} (${m.id})${m.observed ? '' : ' · no observer: activity lanes empty'}`);
  const ctx = sizedContext(l.canvas, l.box.clientWidth);
  const plotW = Math.max(10, l.box.clientWidth - LABEL_W - 4);
  const view = { ...span, ctx, plotW, x: (t) => LABEL_W + ((t - span.from) / (span.windowS * 1000)) * plotW };
  drawGrid(view);
  drawMarks(m, view);
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

/** Lane stripes and names, one line a second, the "-N s … now" axis. */
function drawGrid({ ctx, plotW, x, from, now, windowS }) {
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
  ctx.fillStyle = COLORS.grid;
  for (let s = Math.ceil(from / 1000) * 1000; s <= now; s += 1000) ctx.fillRect(x(s), 0, 1, axisY);
  ctx.fillStyle = COLORS.text;
  ctx.fillText(`-${windowS} s`, LABEL_W, axisY + 8);
  ctx.textAlign = 'right';
  ctx.fillText(state.timeline.paused ? 'paused' : 'now', LABEL_W + plotW, axisY + 8);
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

function drawMarks(m, view) {
  const { ctx, x, now, plotW } = view;
  const ring = m.ring;
  let sleepStart = null;
  for (let i = firstInWindow(ring, view.from); i < ring.length; i++) {
    const e = ring[i];
    if (e.t > now) break;
    const ex = x(e.t);
    if (e.kind === 'activity') {
      if (!m.showActs) continue;
      if (e.activity === 'beforeWaiting') sleepStart = e.t;
      if (e.activity === 'afterWaiting' && sleepStart !== null) {
        shadeSleep(ctx, x(sleepStart), ex);
        sleepStart = null;
      }
    }
    if (ex >= LABEL_W) drawMark(ctx, e, ex);
  }
  if (sleepStart !== null && m.showActs) shadeSleep(ctx, x(sleepStart), LABEL_W + plotW);
}

/** Asleep (beforeWaiting … afterWaiting) across the activity lanes. */
function shadeSleep(ctx, fromX, toX) {
  const sx = Math.max(LABEL_W, fromX);
  ctx.fillStyle = COLORS.sleep;
  ctx.fillRect(sx, 0, toX - sx, ACTIVITIES.length * LANE_H);
}

function drawMark(ctx, e, ex) {
  switch (e.kind) {
    case 'activity':
      ctx.fillStyle = COLORS.act;
      ctx.fillRect(ex, ACTIVITIES.indexOf(e.activity) * LANE_H + 1, 1.5, LANE_H - 2);
      break;
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
