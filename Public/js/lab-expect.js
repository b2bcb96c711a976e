// lab-expect.js — how the Experiments panel shows a step's expectation
// before it is played (with Guess first, without what gives a run's end
// away) and its differences after: rendering only, no state of its own.

import { h, user } from './dom.js';
import { endsRun } from './lab-guess.js';

const $ = (id) => document.getElementById(id);

/** An expectation that gives a run's end away: hidden from a learner who guesses first. */
const tellsTheEnd = (path) => path === 'exitReason' || path === 'code' || path.startsWith('cause');

/** What a step not played yet expects, in one short line (with Guess first, without its exit reason and cause). */
export function expectLine(step) {
  const bits = [];
  const hide = $('lab-guess-first').checked && endsRun(step);
  if (step.status !== null) bits.push(`status ${step.status}`);
  for (const [path, expected] of step.json) if (!hide || !tellsTheEnd(path)) bits.push([user(path), ' ', user(JSON.stringify(expected))]);
  if (hide) bits.push('(its exit reason and cause: guess first)');
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
