// detail-predict.js — owns the Run form's prediction: what
// POST /api/threads/{id}/predict says the run in the form would return if
// sent now (exit reason, cause, when, the reasons in words, and both outcomes
// of a race it cannot decide), asked again, debounced, as the learner changes
// mode, seconds or returnAfterSourceHandled, when another thread is shown and
// when the loop's state changes (a timer, source or perform added or gone, a
// run returned); and, after a run, the prediction made for it beside what
// happened, agreement marked. Only manual threads take the Run form's runs: for
// others nothing is asked. A server without the endpoint (404 "no endpoint")
// gets a plain note and is not asked again until another thread is shown.
// Its state is state.predict.

import { state } from './state.js';
import { api, threadPath } from './api.js';
import { h, setText, user } from './dom.js';
import { fmtMs } from './format.js';
import { num, str, clean } from './forms.js';

const DEBOUNCE_MS = 250;

const pred = (state.predict = {
  /** the debounce timer of predictSoon */
  timer: null,
  /** bumped by each ask: an older answer is dropped */
  seq: 0,
  /** what the shown prediction was asked for (thread, body, loop state): the same is not asked twice */
  key: null,
  /** the server answered 404 "no endpoint": not asked again until another thread is shown */
  unavailable: false,
});

const $ = (id) => document.getElementById(id);

/** The body of a run request from the Run form's inputs (what Run sends). */
export function runBody(e) {
  return clean({ mode: str(e.mode), seconds: num(e.seconds), returnAfterSourceHandled: e.returnAfterSourceHandled.checked || undefined });
}

export function wirePredict() {
  const f = $('run-form');
  for (const name of ['mode', 'seconds', 'returnAfterSourceHandled']) {
    const input = f.elements[name];
    input.addEventListener('input', () => predictSoon());
    input.addEventListener('change', () => predictSoon());
  }
}

/** Asks again after a short pause (typing runs it once); force: even when nothing changed. */
export function predictSoon(force = false) {
  if (force) pred.key = null;
  clearTimeout(pred.timer);
  pred.timer = setTimeout(() => {
    pred.timer = null;
    predictNow();
  }, DEBOUNCE_MS);
}

/**
 * Called with each fetched view of the selected thread (detail-sections): a
 * new thread, or a change in what decides a run (the loop's items, its
 * state, a run returned), asks again. Timer fires and next-fire times are
 * left out: they change all the time and the prediction is "if run now".
 */
export function followPrediction(d, s) {
  const shape = loopShape(d, s);
  if (pred.shape === shape && pred.shapeOf === d.id) return;
  const first = pred.shapeOf !== d.id;
  pred.shape = shape;
  pred.shapeOf = d.id;
  if (first) {
    clearComparison();
    pred.unavailable = false; // asked again once per thread shown (a server may have been upgraded)
    showNote($('run-predict'), 'loading', 'predicting…'); // not the previous thread's
  }
  predictSoon();
}

function loopShape(d, s) {
  return JSON.stringify([
    s.state,
    s.depth,
    s.runs,
    s.ending,
    s.counts,
    (s.pendingPerforms || []).length,
    (d.timers || []).map((t) => [t.id, t.valid, t.modes || t.mode, t.repeats, t.maxFires]),
    (d.sources || []).map((x) => [x.id, x.valid, x.signalled, x.modes || x.mode, x.queued]),
    d.modes,
  ]);
}

/** Why the selected thread's Run form is not predicted, or null. */
function notAsked(s) {
  if (!s) return 'pick a thread first';
  if (s.state === 'exited' || s.ending) return 'the thread has ended: it runs no more';
  if (s.run && s.run.style !== 'manual') return `the Run form runs manual threads; this one runs its own loop (style ${s.run.style})`;
  if (s.depth > 0) return 'a run is under way: the next one is predicted when it returns';
  return null;
}

const snapshot = (id) => (state.threads.get(id) && state.threads.get(id).snap) || (state.detail.data && state.detail.data.id === id ? state.detail.data.thread : null);

async function predictNow() {
  const el = $('run-predict');
  const id = state.selectedId;
  if (pred.unavailable) return showUnavailable(el);
  const s = id ? snapshot(id) : null;
  const why = notAsked(s);
  if (why) {
    pred.key = null;
    return showNote(el, 'idle', why);
  }
  const body = runBody($('run-form').elements);
  if (body.seconds === undefined) {
    pred.key = null;
    return showNote(el, 'idle', 'no prediction: a run needs seconds (how long it may last)');
  }
  const key = JSON.stringify([id, body, pred.shapeOf === id ? pred.shape : null]);
  if (pred.key === key) return;
  pred.key = key;
  const mine = ++pred.seq;
  el.setAttribute('aria-busy', 'true');
  const got = await ask(threadPath(id), body);
  if (mine !== pred.seq || id !== state.selectedId) return;
  el.removeAttribute('aria-busy');
  if (got.unavailable) return showUnavailable(el);
  if (got.error) {
    pred.key = null; // ask again next time, even for the same inputs
    return showNote(el, 'error', ['no prediction: ', user(got.error.message)]);
  }
  renderPrediction(el, got.answer);
}

/**
 * One POST /predict (api.js: the token and JSON headers of every POST).
 * Never throws: {answer}, {unavailable: true} (the server has no such
 * endpoint) or {error}.
 */
async function ask(base, body) {
  if (pred.unavailable) return { unavailable: true };
  try {
    return { answer: await api('POST', base + '/predict', body) };
  } catch (e) {
    if (e.status === 404 && e.code === 'not_found' && /^no endpoint/.test(e.message)) {
      pred.unavailable = true;
      return { unavailable: true };
    }
    return { error: e };
  }
}

/** A fresh prediction for exactly the run about to be sent (the Run button): {answer} | {unavailable} | {error}. */
export function predictionForRun(base, body) {
  clearComparison();
  return ask(base, body);
}

// ---- rendering ----------------------------------------------------------------

function showUnavailable(el) {
  showNote(el, 'unavailable', 'no prediction: this server has no POST /api/threads/{id}/predict (it answered 404); the run still works');
}

function showNote(el, kind, text) {
  el.removeAttribute('aria-busy');
  el.dataset.state = kind;
  for (const k of ['exit', 'cause', 'certain']) delete el.dataset[k];
  el.replaceChildren(h('p', { class: 'predict-line muted' }, text));
}

/** "at 500 ms", "between 200 ms and 300 ms", "at once". */
export function whenText(p) {
  const w = p.windowMs;
  if (Array.isArray(w) && w.length === 2) return `between ${fmtMs(w[0])} and ${fmtMs(w[1])}`;
  if (w && typeof w === 'object' && (w.from !== undefined || w.to !== undefined)) return `between ${fmtMs(w.from)} and ${fmtMs(w.to)}`;
  if (typeof w === 'number' && typeof p.atMs === 'number') return `at ${fmtMs(p.atMs)} (± ${fmtMs(w)})`;
  if (typeof p.atMs === 'number') return p.atMs === 0 ? 'at once' : `at ${fmtMs(p.atMs)}`;
  return 'at a time it cannot tell';
}

const causeCode = (c) => (c && c.code) || '–';

/** exit reason · cause code · when, as one line of rich text (no exit reason: the run does not return by itself). */
export const outcomeText = (o) =>
  o.exitReason
    ? [h('span', { class: 'predict-exit mono' }, user(o.exitReason)), ' · ', h('code', { class: 'predict-cause' }, user(causeCode(o.cause))), ' · ', whenText(o)]
    : [h('span', { class: 'predict-exit' }, 'no return by itself'), ' (it sleeps until a stop, a wake-up, a perform queued or a timer added)'];

/** A timer fire count that depends on the run's start: " · 4 to 5 timer fires (…)", or nothing. */
export function firesText(p) {
  const r = p && p.timerFiresRange;
  if (!r || typeof r.min !== 'number' || typeof r.max !== 'number') return '';
  return ` · ${r.min} to ${r.max} timer fires (where in its repeating timers' periods the run begins decides)`;
}

function renderPrediction(el, answer) {
  const p = (answer && answer.prediction) || {};
  el.dataset.state = 'ready';
  el.dataset.exit = p.exitReason || '';
  el.dataset.cause = causeCode(p.cause);
  el.dataset.certain = p.certain ? 'true' : 'false';
  const parts = [
    h('p', { class: 'predict-line' }, h('strong', null, 'Prediction'), ' for the run this form would start (its mode, seconds and returnAfterSourceHandled, if run now): ', outcomeText(p), firesText(p), p.certain ? ' · certain' : ' · not certain'),
  ];
  if (p.cause && p.cause.message) parts.push(h('p', { class: 'predict-message small-text' }, user(p.cause.message)));
  if (Array.isArray(p.reasons) && p.reasons.length) {
    parts.push(h('ul', { class: 'predict-reasons small-text', 'aria-label': 'Reasons' }, ...p.reasons.map((r) => h('li', null, user(r)))));
  }
  if (p.race && Array.isArray(p.race.outcomes)) parts.push(raceBlock(p.race));
  if (Array.isArray(p.nested) && p.nested.length) parts.push(nestedBlock(p.nested));
  el.replaceChildren(...parts);
}

/** The runs the run's callouts start (`runNested`), each as a prediction of its own. */
function nestedBlock(runs) {
  return h(
    'div',
    { class: 'predict-nested small-text' },
    h('p', null, h('strong', null, 'Nested runs'), ' its callouts start, in the order they return:'),
    h(
      'ul',
      { 'aria-label': 'Nested runs' },
      ...runs.map((n) =>
        h(
          'li',
          { class: 'predict-nested-run', 'data-exit': n.exitReason || '', 'data-cause': causeCode(n.cause) },
          h('code', null, user(n.mode)),
          ` for ${user(String(n.seconds))} s${n.returnAfterSourceHandled ? ', returning after a handled source' : ''}: `,
          outcomeText(n),
        ),
      ),
    ),
  );
}

function raceBlock(race) {
  return h(
    'div',
    { class: 'predict-race small-text' },
    h('p', null, h('strong', null, 'A race decides it'), race.why ? [': ', user(race.why)] : ''),
    h(
      'ul',
      { 'aria-label': 'Possible outcomes' },
      ...race.outcomes.map((o) => h('li', { class: 'predict-outcome', 'data-exit': o.exitReason || '', 'data-cause': causeCode(o.cause) }, outcomeText(o))),
    ),
  );
}

// ---- after the run: prediction and outcome side by side ------------------------------

function clearComparison() {
  const box = $('run-compare');
  box.hidden = true;
  box.replaceChildren();
  delete box.dataset.agree;
}

/** The outcomes a prediction allows: its own, or each outcome of its race. */
function allowed(p) {
  const own = [{ exitReason: p.exitReason, cause: p.cause, atMs: p.atMs, windowMs: p.windowMs }];
  return p.race && Array.isArray(p.race.outcomes) && p.race.outcomes.length ? p.race.outcomes : own;
}

const sameOutcome = (o, x) => o.exitReason === x.exitReason && causeCode(o.cause) === causeCode(x.cause);

/**
 * After a run: the prediction (got: predictionForRun's answer) beside the
 * run's exit x, and whether they agree (exit reason and cause code; for a
 * race, any of its outcomes).
 */
export function showComparison(got, x) {
  const box = $('run-compare');
  const p = got.answer && got.answer.prediction;
  const happened = [h('span', { class: 'mono' }, x.exitReason), ' · ', h('code', null, causeCode(x.cause)), ' · after ', fmtMs(x.durationMs)];
  let predicted;
  let verdict;
  if (!p) {
    box.dataset.agree = 'unknown';
    predicted = got.unavailable ? 'none (this server has no predict endpoint)' : ['none (', user(got.error ? got.error.message : 'no answer'), ')'];
    verdict = h('p', { class: 'predict-verdict' }, 'Nothing to compare: the run was not predicted.');
  } else {
    const options = allowed(p);
    const agree = options.some((o) => sameOutcome(o, x));
    box.dataset.agree = agree ? 'true' : 'false';
    predicted = options.flatMap((o, i) => (i ? [' or ', outcomeText(o)] : [outcomeText(o)]));
    const both = ['predicted ', options.map((o) => (o.exitReason ? `${o.exitReason} (${causeCode(o.cause)})` : 'no return by itself')).join(' or '), `, happened ${x.exitReason} (${causeCode(x.cause)})`];
    verdict = h(
      'p',
      { class: 'predict-verdict' },
      h('span', { class: 'predict-mark', 'aria-hidden': 'true' }, agree ? '✓ ' : '✗ '),
      h('strong', { class: 'predict-agree' }, agree ? 'agree' : 'differ'),
      ': ',
      both,
      agree && options.length > 1 ? ' (one of the race’s outcomes)' : '',
    );
  }
  box.replaceChildren(
    verdict,
    h(
      'div',
      { class: 'predict-sides' },
      h('div', { class: 'predict-side', 'data-side': 'predicted' }, h('h5', null, 'Predicted'), h('p', null, predicted)),
      h(
        'div',
        { class: 'predict-side', 'data-side': 'happened' },
        h('h5', null, 'Happened'),
        h('p', null, happened),
        x.cause && x.cause.message ? h('p', { class: 'small-text' }, user(x.cause.message)) : null,
      ),
    ),
  );
  box.hidden = false;
}
