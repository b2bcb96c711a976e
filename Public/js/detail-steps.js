// detail-steps.js — owns the detail panel's "The run loop's own steps"
// section (#loop-steps): CF's run-loop sequence as Apple's guide and the
// articles list it (ten steps, from "notify entry" to "decide to return"),
// and, for one recorded turn of the selected thread, the steps that loop
// actually took, lit in the order it took them, with times, callouts and what
// woke it. Scrubbing (Previous / Next, the slider) moves turn by turn through
// the turns GET /turns recorded (detail.js fetches them); opening a turn in
// the Explain section or on the timeline shows it here too. Every light comes
// from the recorded turn (its wokeBy, callouts, sleptMs, busyMs and end), the
// next turn of the same run (how long it slept) and the thread's lastExit
// (the exit reason): stepsOf() is a pure function of them, no script.

import { state } from './state.js';
import { h, setText, user } from './dom.js';
import { fmtMs, fmtTime, itemText } from './format.js';

const $ = (id) => document.getElementById(id);

/** CF's sequence, in order: id, the step as the articles name it, the CF call or notification behind it. */
export const LOOP_STEPS = Object.freeze([
  ['entry', 'Notify observers: the run loop is entered', 'kCFRunLoopEntry'],
  ['timers', 'Notify observers: timers are about to fire', 'kCFRunLoopBeforeTimers'],
  ['sources', 'Notify observers: sources are about to fire', 'kCFRunLoopBeforeSources'],
  ['sources0', 'Fire the ready non-port sources (source0)', '__CFRunLoopDoSources0'],
  ['source1', 'A port source (source1) or timer ready? Then handle it at once, without sleeping', 'poll the port set, timeout 0'],
  ['beforeWaiting', 'Notify observers: the thread is about to sleep', 'kCFRunLoopBeforeWaiting'],
  ['sleep', 'Sleep until a port message, a timer, the deadline or a wake-up', 'epoll_wait'],
  ['woke', 'Notify observers: the thread woke up — and what woke it', 'kCFRunLoopAfterWaiting'],
  ['handle', 'Handle what woke it: fire the timer, the port message', '__CFRunLoopDoTimers / DoSource1'],
  ['exit', 'Decide to return (handled a source, timed out, stopped, mode empty) and notify exit', 'kCFRunLoopExit'],
]);

const SOURCE0 = new Set(['source', 'perform']);
const HANDLED = new Set(['timer', 'port']);

const calloutText = (c) => [itemText(c), c.selector ? [' (', user(c.selector), ')'] : '', ` ran ${fmtMs(c.ms)}`];
const list = (cs) => cs.flatMap((c, i) => (i ? ['; ', calloutText(c)] : [calloutText(c)]));

/**
 * The steps turn t took, in order, with a note for each: {path: [step id],
 * notes: {id: rich text}}. next: the next recorded turn of the same run (its
 * sleptMs is how long this turn's sleep lasted), or null; exit: the thread's
 * lastExit (its reason when it is this turn's run), or null.
 */
export function stepsOf(t, next, exit) {
  const notes = {};
  const path = [];
  const take = (id, note) => {
    if (!path.includes(id)) path.push(id);
    if (note !== undefined) notes[id] = note;
  };
  const source0 = t.callouts.filter((c) => SOURCE0.has(c.kind));
  const handled = t.callouts.filter((c) => HANDLED.has(c.kind));
  const tasks = t.callouts.filter((c) => c.kind === 'task' || c.kind === 'observer');
  const woke = t.wokeBy.kind !== 'none';
  const pass = () => {
    take('timers', `at ${fmtTime(t.startedAt)}`);
    take('sources');
    if (source0.length) take('sources0', list(source0));
    if (t.end === 'sleep' || (!woke && handled.length)) take('source1', !woke && handled.length ? ['ready: ', list(handled), ' (handled in step 9, no sleep)'] : 'none ready');
  };
  if (!woke) {
    take('entry', [`run ${t.run} entered mode `, user(t.mode), t.depth ? ` (nested, depth ${t.depth})` : '', ` at ${fmtTime(t.startedAt)}`]);
    pass();
    if (handled.length) take('handle', list(handled));
  } else {
    take('woke', ['woke by ', itemText(t.wokeBy), ` after sleeping ${fmtMs(t.sleptMs)}`]);
    const nothing = {
      timeout: "nothing: the run's deadline passed",
      wakeup: 'nothing: a CFRunLoopWakeUp (a wake-up, or a stop)',
      source: 'nothing here: the wake-up only; the signalled source0 runs in step 4',
      perform: 'nothing here: the wake-up only; the perform source runs in step 4',
    };
    take('handle', handled.length ? list(handled) : nothing[t.wokeBy.kind] || 'nothing');
    if (t.end === 'sleep' || source0.length) pass();
  }
  if (t.end === 'sleep') {
    take('beforeWaiting', tasks.length ? ['its observers ran: ', list(tasks)] : `after ${fmtMs(t.busyMs)} busy`);
    take('sleep', next ? `slept ${fmtMs(next.sleptMs)}, until turn ${next.turn}` : 'asleep (the next turn is not recorded yet)');
  } else {
    const reason = exit && exit.run === t.run ? [`returned ${exit.exitReason}`, exit.cause ? [' (', user(exit.cause.code), ')'] : ''] : 'the run returned';
    take('exit', [reason, ` after ${fmtMs(t.busyMs)} busy in this turn`]);
  }
  return { path, notes };
}

/** The turns to scrub through: the recorded ones of the selected thread, oldest first. */
function turnsOf(d) {
  return (d.turns || []).slice().sort((a, b) => a.turn - b.turn);
}

let shownThread = null;
let followedOpen = null;

/** d: the fetched views (turns), s: the freshest snapshot (lastExit). */
export function renderLoopSteps(d, s) {
  const turns = turnsOf(d);
  const v = state.stepsView;
  const open = state.turnView && state.turnView.thread === d.id ? state.turnView.turn.turn : null;
  if (shownThread !== d.id || !v || v.thread !== d.id) {
    state.stepsView = { thread: d.id, turn: open ?? (turns.length ? turns[turns.length - 1].turn : null), follow: open === null };
    shownThread = d.id;
  } else if (open !== null && open !== followedOpen) {
    state.stepsView = { thread: d.id, turn: open, follow: false };
  } else if (v.follow && turns.length) {
    v.turn = turns[turns.length - 1].turn; // following the newest turn until the learner scrubs
  }
  followedOpen = open;
  draw(turns, s);
}

function draw(turns, s) {
  const v = state.stepsView;
  const index = turns.findIndex((t) => t.turn === v.turn);
  const t = index >= 0 ? turns[index] : null;
  const slider = $('steps-turn');
  slider.max = String(Math.max(0, turns.length - 1));
  slider.value = String(Math.max(0, index));
  slider.disabled = turns.length < 2;
  $('steps-prev').setAttribute('aria-disabled', index > 0 ? 'false' : 'true');
  $('steps-next').setAttribute('aria-disabled', index >= 0 && index < turns.length - 1 ? 'false' : 'true');
  const box = $('loop-steps');
  box.dataset.turn = t ? String(t.turn) : '';
  if (!t) {
    setText($('steps-title'), turns.length ? 'That turn is no longer recorded' : 'No turn recorded yet: run the loop');
    setText($('steps-path'), '');
    for (const li of document.querySelectorAll('#steps-list > li')) paint(li, -1, null);
    return;
  }
  const next = turns.find((x) => x.run === t.run && x.turn > t.turn) || null;
  const { path, notes } = stepsOf(t, next, s && s.lastExit);
  setText($('steps-title'), [`Turn ${t.turn} of run ${t.run} in `, user(t.mode), ` (${index + 1} of ${turns.length} recorded)`]);
  const numbers = Object.fromEntries(LOOP_STEPS.map(([id], i) => [id, i + 1]));
  setText($('steps-path'), ['This turn took steps ', path.map((id) => numbers[id]).join(' → ')]);
  for (const li of document.querySelectorAll('#steps-list > li')) {
    const id = li.dataset.step;
    paint(li, path.indexOf(id), notes[id] ?? null);
  }
}

function paint(li, order, note) {
  li.dataset.lit = order >= 0 ? 'true' : 'false';
  li.dataset.order = order >= 0 ? String(order + 1) : '';
  setText(li.querySelector('.step-note'), order >= 0 ? note || 'taken' : '');
}

function scrub(to) {
  const d = state.detail.data;
  if (!d) return;
  const turns = turnsOf(d);
  if (!turns.length) return;
  const i = Math.min(turns.length - 1, Math.max(0, to));
  state.stepsView = { thread: d.id, turn: turns[i].turn, follow: false };
  draw(turns, state.threads.get(d.id)?.snap || d.thread);
}

const indexNow = () => Number($('steps-turn').value);

export function wireLoopSteps() {
  $('steps-list').replaceChildren(
    ...LOOP_STEPS.map(([id, name, cf], i) =>
      h('li', { class: 'step', 'data-step': id, 'data-lit': 'false' }, h('span', { class: 'step-n', 'aria-hidden': 'true' }, String(i + 1)), h('span', { class: 'step-name' }, name, ' ', h('code', { class: 'step-cf small-text' }, cf)), h('span', { class: 'step-note small-text' })),
    ),
  );
  $('steps-prev').addEventListener('click', (e) => e.currentTarget.getAttribute('aria-disabled') !== 'true' && scrub(indexNow() - 1));
  $('steps-next').addEventListener('click', (e) => e.currentTarget.getAttribute('aria-disabled') !== 'true' && scrub(indexNow() + 1));
  $('steps-turn').addEventListener('input', () => scrub(indexNow()));
}
