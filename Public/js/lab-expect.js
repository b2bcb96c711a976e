// lab-expect.js — how the Experiments panel shows a step's expectation
// before it is played (with Guess first, without what gives a run's end
// away) and its differences after: rendering only, no state of its own.

import { h, user } from './dom.js';
import { endsRun } from './lab-guess.js';

const $ = (id) => document.getElementById(id);

/** An expectation of a run-ending step that gives its end away: hidden from a learner who guesses first. */
const tellsTheEnd = (path) => path === 'exitReason' || path === 'code' || path.startsWith('cause');

const EXIT_WORDS = /\b(?:finished|stopped|timedOut|handledSource)\b/;

/** Any step's expectation that names how a run ended (lastExit.exitReason, exits.stopped, a result's cause). */
const namesAnExit = (path, expected) => /(?:^|\.)(?:exitReason|exits|cause|lastExit|finalExit)(?:\.|$)/.test(path) || EXIT_WORDS.test(path) || EXIT_WORDS.test(JSON.stringify(expected));

/** What a step not played yet expects, in one short line (with Guess first, without what tells how a run ends). */
export function expectLine(step) {
  const bits = [];
  const guessing = $('lab-guess-first').checked;
  const hide = guessing && endsRun(step);
  if (step.status !== null) bits.push(`status ${step.status}`);
  let hidden = 0;
  for (const [path, expected] of step.json) {
    if ((hide && tellsTheEnd(path)) || (guessing && namesAnExit(path, expected))) hidden++;
    else bits.push([user(path), ' ', user(JSON.stringify(expected))]);
  }
  if (hide) bits.push('(its exit reason and cause: guess first)');
  else if (hidden) bits.push('(how a run ended: shown once played)');
  if (step.until) bits.push(`(waits up to ${step.until} s)`);
  return bits.length ? h('p', { class: 'lab-expect small-text muted' }, 'expects ', bits.flatMap((b, i) => (i ? [', ', b] : [b]))) : null;
}

export function diffTable(differences) {
  return h(
    'div',
    { class: 'table-wrap' },
    h(
      'table',
      { class: 'tbl lab-diffs' },
      h('caption', { class: 'sr-only' }, 'Differences'),
      h('thead', null, h('tr', null, h('th', { scope: 'col' }, 'what'), h('th', { scope: 'col' }, 'expected'), h('th', { scope: 'col' }, 'actual'))),
      h(
        'tbody',
        null,
        ...differences.map((d) =>
          h('tr', { class: 'lab-diff' }, h('th', { scope: 'row' }, user(d.what)), h('td', { class: 'lab-expected' }, user(d.expected)), h('td', { class: 'lab-actual' }, user(d.actual))),
        ),
      ),
    ),
  );
}
