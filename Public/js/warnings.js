// warnings.js — owns the Warnings panel (#warnings): every warning of every
// thread (GET /api/warnings at start and every few seconds, then `warning`
// events as they come), active ones first, each with its severity, thread,
// message and count; the first 50, with how many more and a "show all"
// toggle when there are more. A card shows its own thread's active count (cards.js).
// A warning an experiment played in this page raises on purpose (its
// `expectedWarnings`, on a thread it created: state.expectedWarnings, kept by
// lab.js) is shown muted, "expected by this experiment", with the reason,
// after the others; it is left out of the cards' counts and its stall is
// drawn grey on the timeline.

import { state, queueFrame } from './state.js';
import { api } from './api.js';
import { h, setText, user } from './dom.js';
import { fmtTime } from './format.js';

const keyOf = (w) => `${w.code}|${w.thread}|${w.subjects.join(',')}`;

/** The list shows this many unless the user asks for all: the most pressing first. */
const SHOWN = 50;
let showAll = false;
/** What the list last drew: a reload that changes nothing leaves its items (and a reader's selection) alone. */
let drawn = '';

/** The "show all" toggle under the list (#warnings-more-toggle). */
export function wireWarnings() {
  document.getElementById('warnings-more-toggle').addEventListener('click', () => {
    showAll = !showAll;
    state.warningsDirty = true;
    queueFrame();
  });
}

/** {experiment, reason} when the experiment that created `thread` declares `code` as raised on purpose, else null. */
export function expectedBy(thread, code) {
  const x = state.expectedWarnings.get(thread);
  const declared = x && x.warnings.find((d) => d.code === code);
  return declared ? { experiment: x.experiment, reason: declared.reason } : null;
}

/** A `warning` event: one warning appeared, changed or was resolved. */
export function warningEvent(w) {
  state.warnings.set(keyOf(w), w);
  const m = state.threads.get(w.thread);
  if (m && m.snap) {
    const list = (m.snap.warnings || []).filter((x) => keyOf(x) !== keyOf(w));
    m.snap = { ...m.snap, warnings: [...list, w] };
    state.dirty.add(m.id);
  }
  state.warningsDirty = true;
  queueFrame();
}

export async function loadWarnings() {
  try {
    const data = await api('GET', '/api/warnings');
    state.warnings.clear();
    for (const w of data.warnings || []) state.warnings.set(keyOf(w), w);
    state.warningsDirty = true;
    queueFrame();
  } catch {
    /* the connection badge shows problems */
  }
}

/** Redraws the panel when something changed (called from the frame render). */
export function renderWarnings() {
  if (!state.warningsDirty) return;
  state.warningsDirty = false;
  const expected = (w) => (expectedBy(w.thread, w.code) ? 1 : 0);
  const all = [...state.warnings.values()].sort((a, b) => expected(a) - expected(b) || (b.active - a.active) || Date.parse(b.lastAt) - Date.parse(a.lastAt));
  const active = all.filter((w) => w.active).length;
  const onPurpose = all.filter(expected).length;
  setText(document.getElementById('warnings-count'), all.length ? `${active} active, ${all.length} in all` + (onPurpose ? `, ${onPurpose} expected` : '') : '');
  document.getElementById('no-warnings').hidden = all.length > 0;
  const list = document.getElementById('warnings-list');
  const shown = showAll ? all : all.slice(0, SHOWN);
  // What is left out is said, with a way to see it: a new warning never just falls off a crowded list.
  document.getElementById('warnings-more').hidden = all.length <= SHOWN;
  setText(
    document.getElementById('warnings-more-text'),
    showAll ? `All ${all.length} shown.` : `The first ${SHOWN} of ${all.length} shown (unexpected, then active, newest first); ${all.length - SHOWN} more.`,
  );
  setText(document.getElementById('warnings-more-toggle'), showAll ? `Show the first ${SHOWN}` : `Show all ${all.length}`);
  const signature = JSON.stringify(shown.map((w) => [keyOf(w), w.active, w.severity, w.count, w.lastAt, w.message, expectedBy(w.thread, w.code)]));
  if (signature === drawn) return;
  drawn = signature;
  list.replaceChildren(
    ...shown.map((w) => {
      const why = expectedBy(w.thread, w.code);
      return h(
        'li',
        { class: 'warning' + (w.active ? ' active' : ' resolved') + (why ? ' expected' : ''), 'data-code': w.code, 'data-thread': w.thread, 'data-expected': why ? 'true' : 'false' },
        h('span', { class: 'badge sev ' + (why ? 'sev-expected' : 'sev-' + w.severity) }, w.severity),
        ' ',
        h('strong', { class: 'mono' }, w.code),
        ' ',
        h('span', { class: 'mono muted' }, w.thread),
        why ? h('span', { class: 'warning-expected small-text' }, h('strong', null, 'expected by this experiment'), ' (', user(why.experiment), '): ', user(why.reason)) : null,
        h('span', { class: 'warning-msg' }, user(w.message)),
        h('span', { class: 'muted small-text' }, `${w.active ? 'active' : 'resolved'} · seen ${w.count}× · last ${fmtTime(w.lastAt)}`),
      );
    }),
  );
}
