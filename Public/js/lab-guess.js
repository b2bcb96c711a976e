// lab-guess.js — owns the Experiments panel's "guess first" pieces: which
// steps end a run (a POST …/run or …/stop not expected to fail, or a POST
// expecting an exitReason), the four exit reasons to pick from (the API's
// names), the prompt shown before such a step is sent and, once it answered,
// the guess beside the real exit reason and cause (right, wrong, or no exit in
// the answer). lab.js asks and keeps the guesses; nothing here sends requests.

import { h, user } from './dom.js';

/** The exit reasons as the API names them (RunExit.exitReason), in CF's order of kCFRunLoopRun… codes. */
export const EXIT_REASONS = Object.freeze(['finished', 'stopped', 'timedOut', 'handledSource']);

const RUN_OR_STOP = /^\/api\/threads\/[^/?#]+\/(?:run|stop)(?:[?#]|$)/;

/** Whether a step ends a run: its answer should carry an exitReason. */
export function endsRun(step) {
  if (step.method !== 'POST') return false;
  if (step.status !== null && (step.status < 200 || step.status > 299)) return false; // expected to be refused
  return RUN_OR_STOP.test(step.path) || step.json.some(([path]) => path === 'exitReason');
}

/** The buttons to pick an exit reason with; pick(name) is called on a click (or Enter / Space). */
export function guessPrompt(number, pick) {
  const id = `lab-guess-q-${number}`;
  return h(
    'div',
    { class: 'lab-guess', role: 'group', 'aria-labelledby': id },
    h('p', { id, class: 'lab-guess-q' }, 'Your guess first: how will this run end?'),
    h('div', { class: 'btn-row' }, ...EXIT_REASONS.map((name) => h('button', { type: 'button', class: 'small lab-guess-pick mono', 'data-guess': name, onclick: () => pick(name) }, name))),
  );
}

/** right, wrong, or none (the answer carried no exit reason). */
export function verdictOf(guess, report) {
  const real = report && report.json && typeof report.json.exitReason === 'string' ? report.json.exitReason : null;
  if (real === null) return 'none';
  return real === guess ? 'right' : 'wrong';
}

const WORDS = { right: ['✓', 'Right'], wrong: ['✗', 'Wrong'], none: ['–', 'No exit'] };

/**
 * The guess beside what happened (report: null while the step is under way).
 * Focusable (tabindex -1): the page moves focus here from the picked button.
 */
export function guessOutcome(guess, report) {
  if (!report) {
    return h('p', { class: 'lab-guess-out', 'data-verdict': 'pending', 'data-guess': guess, tabindex: '-1' }, 'You guessed ', h('code', null, guess), '; the step is under way…');
  }
  const verdict = verdictOf(guess, report);
  const json = report.json;
  const cause = json && json.cause && typeof json.cause === 'object' ? json.cause : null;
  const [mark, word] = WORDS[verdict];
  const real =
    verdict === 'none'
      ? ['; the answer carried no exit reason (', report.refused ? 'not sent' : `status ${report.status || 'none'}`, json && json.error ? [': ', user(json.error.code)] : '', ')']
      : ['; the run returned ', h('code', { class: 'lab-guess-real' }, user(json.exitReason))];
  return h(
    'div',
    { class: 'lab-guess-out', 'data-verdict': verdict, 'data-guess': guess, 'data-exit': verdict === 'none' ? '' : json.exitReason, 'data-cause': cause ? String(cause.code) : '', tabindex: '-1' },
    h('p', null, h('span', { class: 'lab-guess-mark', 'aria-hidden': 'true' }, mark), ' ', h('strong', null, word), ': you guessed ', h('code', null, guess), real),
    cause ? h('p', { class: 'lab-guess-cause small-text' }, 'cause ', h('code', null, user(cause.code)), cause.message ? [': ', user(cause.message)] : '') : null,
  );
}
