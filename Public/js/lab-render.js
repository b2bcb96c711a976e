// lab-render.js — how the Experiments panel (lab.js) draws the chosen
// experiment: its steps (say, request as sent, ✓/✗, the guess and its
// outcome, the differences), the Step / Play all / Reset controls and the
// summary line. It reads state.lab and keeps no state of its own; lab.js
// plays the steps and calls these.

import { state } from './state.js';
import { h, setText, user } from './dom.js';
import { plural } from './format.js';
import { guessPrompt, guessOutcome, verdictOf } from './lab-guess.js';
import { expectLine, diffTable } from './lab-expect.js';

const $ = (id) => document.getElementById(id);

/** The steps answered so far. */
const answered = (x) => x.reports.filter(Boolean);

/** Settles the guess awaited (with the exit reason picked, or null: no guess). */
export function settleGuess(value) {
  const settle = state.lab.guessing;
  state.lab.guessing = null;
  if (settle) settle(value);
}

export const stepItem = (number) => $('lab-steps').querySelector(`[data-step="${number}"]`);

export function renderSteps() {
  const x = state.lab.current;
  $('lab-steps').replaceChildren(
    ...x.steps.map((step) => {
      const li = h('li', { class: 'lab-step', 'data-step': String(step.number), 'data-status': 'pending' });
      renderStep(li, step, x.reports[step.number - 1] || null);
      return li;
    }),
  );
  renderControls();
  renderSummary();
}

const MARKS = { pending: ['·', 'not played'], guessing: ['?', 'waiting for your guess'], running: ['…', 'playing'], pass: ['✓', 'passed'], fail: ['✗', 'failed'] };

/** One step: its say, the request (as sent once played), ✓/✗, the differences (or why it was not sent). */
export function renderStep(li, step, report) {
  const status = report ? (report.differences.length ? 'fail' : 'pass') : ['running', 'guessing'].includes(li.dataset.status) ? li.dataset.status : 'pending';
  const guess = state.lab.current && state.lab.current.guesses[step.number];
  li.dataset.status = status;
  if (report && report.refused) li.dataset.refused = 'true';
  else delete li.dataset.refused;
  const [mark, label] = MARKS[status];
  const path = report ? report.path : step.path;
  const body = report ? report.body : step.body;
  const answer = () =>
    report.refused ? ' → not sent' : ` → ${report.status || 'no answer'}${report.tries > 1 ? ` after ${report.tries} tries` : ''} · ${(report.seconds * 1000).toFixed(0)} ms`;
  if (step.withNext) li.dataset.withNext = 'true';
  const parts = [
    h('div', { class: 'lab-step-head' }, h('span', { class: 'lab-mark', role: 'img', 'aria-label': label, title: label }, mark), h('span', { class: 'lab-say' }, step.say ? user(step.say) : `step ${step.number}`)),
    // what happens, once it happened
    report && step.then ? h('p', { class: 'lab-then' }, user(step.then)) : null,
    step.withNext && !report ? h('p', { class: 'lab-with-next small-text muted' }, 'played with the next step, no pause between them') : null,
    h('div', { class: 'lab-req' }, h('code', { class: 'mono' }, `${step.method} `, user(path)), report ? h('span', { class: 'lab-answer muted small-text' }, answer()) : null),
  ];
  if (body !== undefined) parts.push(h('pre', { class: 'lab-body mono' }, user(JSON.stringify(body))));
  if (status === 'guessing') parts.push(guessPrompt(step.number, settleGuess));
  else if (guess) parts.push(guessOutcome(guess, report));
  if (!report) parts.push(expectLine(step));
  if (report && Object.keys(report.captured).length) {
    parts.push(h('p', { class: 'lab-captured small-text muted' }, 'captured ', Object.entries(report.captured).map(([k, v], i) => [i ? ', ' : '', user(k), ' = ', user(v)])));
  }
  if (report && report.refused) parts.push(h('p', { class: 'form-error lab-refused' }, user(report.refused)));
  else if (report && report.differences.length) parts.push(diffTable(report.differences));
  // focus was on a picked guess (or on the outcome after it): keep it on the step's outcome
  const hadFocus = li.contains(document.activeElement) && status !== 'guessing';
  li.replaceChildren(...parts.filter(Boolean));
  const out = hadFocus && li.querySelector('.lab-guess-out');
  if (out) out.focus({ preventScroll: true });
}

/** The steps not played yet drawn again (Guess first turned on or off: their expectations). */
export function renderUnplayed() {
  const x = state.lab.current;
  if (!x) return;
  for (const step of x.steps) {
    const li = stepItem(step.number);
    if (li && li.dataset.status === 'pending') renderStep(li, step, null);
  }
}

export function renderControls() {
  const x = state.lab.current;
  const more = x && (x.next < x.steps.length || x.pending.size > 0);
  const started = x && x.next > 0;
  for (const id of ['lab-step', 'lab-play']) $(id).setAttribute('aria-disabled', state.lab.playing || !x || x.next >= x.steps.length ? 'true' : 'false');
  $('lab-reset').setAttribute('aria-disabled', started || state.lab.playing ? 'false' : 'true');
  $('lab-run').dataset.state = state.lab.playing ? 'playing' : !started ? 'idle' : more ? 'paused' : 'done';
}

export function renderSummary() {
  const x = state.lab.current;
  if (!x) return;
  const total = x.steps.length;
  const played = answered(x).length;
  const failed = answered(x).filter((r) => r.differences.length).length;
  const passed = played - failed;
  const run = $('lab-run');
  run.dataset.passed = String(passed);
  run.dataset.failed = String(failed);
  const guessed = Object.keys(x.guesses).filter((n) => x.reports[n - 1]);
  const right = guessed.filter((n) => verdictOf(x.guesses[n], x.reports[n - 1]) === 'right').length;
  run.dataset.guesses = String(guessed.length);
  run.dataset.guessesRight = String(right);
  let text;
  if (!played) text = `${plural(total, 'step')}, none played yet: Step plays the next one, Play all the rest.`;
  else if (played < total) text = `${played} of ${total} steps played: ${passed} passed, ${failed} failed.`;
  else if (!failed) text = `${total} of ${total} steps passed.`;
  else text = `${passed} of ${total} steps passed, ${failed} failed.`;
  if (guessed.length) text += ` Your guesses: ${right} of ${guessed.length} right.`;
  setText($('lab-summary'), text);
  run.classList.toggle('lab-failed', failed > 0);
}
