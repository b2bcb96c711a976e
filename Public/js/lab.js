// lab.js — owns the Experiments panel (#lab, opened by the header's
// Experiments button): the list of experiments (GET /api/experiments), the
// chosen one's explanation and steps (GET /api/experiments/{id}), and playing
// them in the page — Step (the next step), Play all (the rest), Reset — with
// each step's request as sent, ✓/✗ and, for ✗, expected vs actual per
// difference. The rules of playing live in experiments.js (a mirror of the
// server's Player). A step whose path (variables filled in) is not an API
// path of this page's own server is never sent: it shows why instead. The
// experiment's texts are shown as user text (dom.js). The lanes and cards
// follow the experiment's threads on their own (the live event stream).
// Record a session: the button notes where the server's journal stands
// (GET /api/journal's journalSeq); pressed again, it exports what the
// journal recorded since (GET /api/journal?since=) and downloads it as a
// JSON experiment, the file `runloopd play` replays.
// Guess first (the toggle): before each step that ends a run, the learner
// picks its exit reason (lab-guess.js), then the step is sent and the real
// exit reason and cause show beside the guess; the summary counts the right
// guesses. A step shows what is done (`say`) before it is played and what
// happens (`then`) only once it answered. Steps joined by `withNext` are one
// group: Step plays the whole group with no pause inside it (the guesses for
// its runs are asked before the group starts), so a timed action a step arms
// counts from the same moment as the run it aims at, however long the learner
// paused before pressing Step.
// Warnings on purpose: an experiment's `expectedWarnings` are listed under
// its explanation, and each thread a step of it creates (POST /api/threads)
// is noted in state.expectedWarnings, so the Warnings panel shows those
// warnings on it as expected by this experiment (warnings.js).
// Imported by main.js; its state is state.lab (state.js keeps the page's
// state).

import { state, markDirty } from './state.js';
import { api, request } from './api.js';
import { h, setText, user, render } from './dom.js';
import { plural } from './format.js';
import { stepsOf, playStep, pagePathProblem, namesIn, runThreadOf } from './experiments.js';
import { endsRun } from './lab-guess.js';
import { startRecording, stopRecording } from './lab-record.js';
import { stepItem, renderSteps, renderStep, renderUnplayed, renderControls, renderSummary, settleGuess } from './lab-render.js';

const lab = (state.lab = {
  /** GET /api/experiments summaries */
  list: [],
  /** the chosen experiment: {id, doc, steps, reports[] (by step, sparse while background steps wait), vars{}, next, pending, lastSent, guesses{step: exitReason}} */
  current: null,
  /** whether a Step or Play all is running */
  playing: false,
  /** bumped by Reset and by another choice: a play of an older generation stops */
  generation: 0,
  /** while recording: the journal seq it began after (null: not recording) */
  recordFrom: null,
  /** the last download's object URL (revoked when replaced) */
  recordUrl: null,
  /** while a guess is awaited: settles it (with the exit reason picked, or null: no guess) */
  guessing: null,
});

const $ = (id) => document.getElementById(id);

// ---- requests ---------------------------------------------------------------

/**
 * One step's request through api.js's request() (the JSON headers, the
 * token, the token dialog on a first 401), keeping the status and the body of
 * any answer (a step may expect a 404 and its error code). fetch cannot send
 * a body with GET: a GET step's body (never useful) is left out. playStep
 * sends only API paths of this origin; checked here again, where the token
 * would leave.
 */
async function send(method, path, body) {
  const problem = pagePathProblem(path, location.origin);
  if (problem) throw new Error(`not sent: ${problem}`);
  const { res, json } = await request(method, path, method === 'GET' ? undefined : body);
  return { status: res.status, json };
}

// ---- the panel --------------------------------------------------------------

function wire() {
  $('lab-button').addEventListener('click', () => ($('lab').hidden ? open() : close()));
  $('lab-close').addEventListener('click', close);
  $('lab-step').addEventListener('click', () => play(1));
  $('lab-play').addEventListener('click', () => play(Infinity));
  $('lab-reset').addEventListener('click', reset);
  // turned off while a guess is awaited: that step goes on without one
  $('lab-guess-first').addEventListener('change', (e) => {
    if (!e.currentTarget.checked) settleGuess(null);
    renderUnplayed();
  });
  $('lab-record').addEventListener('click', (e) => {
    if (e.currentTarget.getAttribute('aria-disabled') === 'true') return;
    if (lab.recordFrom === null) startRecording();
    else stopRecording();
  });
}

async function open() {
  const panel = $('lab');
  panel.hidden = false;
  $('lab-button').setAttribute('aria-expanded', 'true');
  panel.scrollIntoView({ block: 'nearest' });
  panel.focus();
  await loadList();
}

function close() {
  $('lab').hidden = true;
  const button = $('lab-button');
  button.setAttribute('aria-expanded', 'false');
  button.focus();
}

async function loadList() {
  const list = $('lab-list');
  setText($('lab-error'), '');
  list.setAttribute('aria-busy', 'true');
  try {
    const data = await api('GET', '/api/experiments');
    lab.list = (data && data.experiments) || [];
  } catch (e) {
    setText($('lab-error'), ['Cannot list the experiments: ', user(e.message)]);
    lab.list = [];
  }
  list.removeAttribute('aria-busy');
  list.replaceChildren(...lab.list.map(listItem));
  $('lab-none').hidden = lab.list.length > 0;
  markChosen();
}

function listItem(x) {
  const src = x.source || {};
  const where = [src.article, src.section].filter(Boolean).flatMap((t, i) => (i ? [' · ', user(t)] : [user(t)]));
  return h(
    'li',
    { class: 'lab-item' },
    h('button', { type: 'button', class: 'lab-pick', 'data-experiment': x.id, onclick: () => choose(x.id) }, user(x.title || x.id)),
    ' ',
    h('span', { class: 'muted small-text' }, plural(x.steps || 0, 'step')),
    h('span', { class: 'lab-src small-text muted' }, where.length ? ['From ', where] : '', src.url ? ' ' : null, sourceLink(src.url)),
  );
}

/** A link to the article (http and https addresses only), opened in a new tab. */
function sourceLink(url) {
  if (!url || !/^https?:\/\//i.test(url)) return null;
  return h('a', { href: url, target: '_blank', rel: 'noopener noreferrer' }, 'read it', h('span', { class: 'sr-only' }, ' (opens in a new tab)'));
}

function markChosen() {
  $('lab-list').classList.toggle('lab-chosen', !!lab.current);
  for (const b of document.querySelectorAll('#lab-list [data-experiment]')) {
    if (lab.current && b.dataset.experiment === lab.current.id) b.setAttribute('aria-current', 'true');
    else b.removeAttribute('aria-current');
  }
}

async function choose(id) {
  lab.generation++;
  lab.playing = false;
  settleGuess(null);
  setText($('lab-error'), '');
  let doc;
  try {
    doc = await api('GET', '/api/experiments/' + encodeURIComponent(id));
  } catch (e) {
    setText($('lab-error'), ['Cannot read experiment ', user(id), ': ', user(e.message)]);
    return;
  }
  lab.current = { id, doc, steps: stepsOf(doc), ...fresh() };
  markChosen();
  const src = doc.source || {};
  setText($('lab-title'), user(doc.title || id));
  const source = $('lab-source');
  const where = [src.article && ['“', user(src.article), '”'], src.section && ['section “', user(src.section), '”']].filter(Boolean);
  const link = sourceLink(src.url);
  source.replaceChildren(...render(where.length ? ['From ', where.flatMap((x, i) => (i ? [', ', x] : [x]))] : ''), ...(link ? [where.length ? ' — ' : '', link] : []));
  setText($('lab-explanation'), doc.explanation ? user(doc.explanation) : '');
  const expected = expectedOf(doc);
  $('lab-expected').hidden = expected.length === 0;
  $('lab-expected').replaceChildren(...render(expected.length ? ['Warnings it raises on purpose (shown as expected): ', expected.map((w, i) => [i ? '; ' : '', h('strong', { class: 'mono' }, user(w.code)), ' — ', user(w.reason)])] : ''));
  $('lab-run').hidden = false;
  $('lab-run').dataset.experiment = id;
  renderSteps();
  $('lab-title').focus();
}

// ---- playing ----------------------------------------------------------------

/** The experiment's expectedWarnings, those well formed ({code, reason} strings). */
function expectedOf(doc) {
  const list = Array.isArray(doc && doc.expectedWarnings) ? doc.expectedWarnings : [];
  return list.filter((w) => w && typeof w.code === 'string' && typeof w.reason === 'string');
}

/** A step that created a thread: its warnings of the declared codes are expected (warnings.js). */
function noteCreated(x, step, report) {
  const expected = expectedOf(x.doc);
  const id = report.json && typeof report.json.id === 'string' ? report.json.id : null;
  if (!expected.length || !id || step.method !== 'POST' || report.status !== 201 || !/^\/api\/threads(?:[?#]|$)/.test(report.path)) return;
  state.expectedWarnings.set(id, { experiment: x.doc.title || x.id, warnings: expected });
  state.warningsDirty = true;
  markDirty(id);
}

/** A play's state: no step sent, nothing captured. */
const fresh = () => ({ reports: [], vars: {}, next: 0, pending: new Map(), lastSent: null, guesses: {} });


const delay = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** The steps of the group that begins at index `from` (it and every next one joined by withNext). */
function groupAt(x, from) {
  let end = from;
  while (end < x.steps.length - 1 && x.steps[end].withNext) end++;
  return x.steps.slice(from, end + 1);
}

/**
 * Plays up to `count` of the remaining groups of steps (a step alone, or
 * steps joined by withNext), one after the other, as the server's Player does: a step's `wait` (a recorded pause) passes first; a
 * `background` step is sent and the next one goes without its answer (a
 * step using what it captures waits for it; after a background run, the
 * next step waits until the thread is inside the run). Play all ends when
 * every answer came.
 */
async function play(count) {
  const x = lab.current;
  if (!x || lab.playing || x.next >= x.steps.length) return;
  const generation = lab.generation;
  const cancelled = () => lab.generation !== generation;
  lab.playing = true;
  renderControls();
  try {
    for (let n = 0; n < count && x.next < x.steps.length; ) {
      const step = x.steps[x.next];
      const startsGroup = x.next === 0 || !x.steps[x.next - 1].withNext;
      if (startsGroup && $('lab-guess-first').checked) {
        // every run the group ends is guessed before any of its steps is sent
        for (const member of groupAt(x, x.next)) {
          if (!endsRun(member) || x.guesses[member.number]) continue;
          const guess = await askGuess(stepItem(member.number), member);
          if (cancelled()) return;
          if (guess) x.guesses[member.number] = guess;
          const item = stepItem(member.number);
          item.dataset.status = 'pending';
          renderStep(item, member, null);
          const out = item.querySelector('.lab-guess-out');
          if (out) out.focus({ preventScroll: true });
        }
      }
      const used = namesIn(step);
      for (const pending of [...x.pending.values()]) if (pending.captures.some((c) => used.has(c))) await pending.done;
      if (cancelled()) return;
      if (step.wait !== null && x.lastSent !== null) {
        const left = x.lastSent + step.wait * 1000 - performance.now();
        if (left > 0) await delay(left);
        if (cancelled()) return;
      }
      const li = stepItem(step.number);
      x.next++;
      if (!step.withNext) n++;
      // Sent first, drawn after: inside a group (withNext) the next step goes
      // as soon as this one is answered, and its drawing waits for a task of
      // its own. A group's timed action counts from the run it aims at
      // (testdemo4: "in 0.2 s the main thread signals"); on a busy machine
      // the drawing between two steps once took longer than that (issue 41).
      x.lastSent = performance.now();
      const done = playStep(step, x.vars, send, location.origin, cancelled).then((report) => {
        if (cancelled() || !report) return;
        x.reports[step.number - 1] = report;
        noteCreated(x, step, report);
        const draw = () => {
          if (cancelled()) return;
          renderStep(li, step, report);
          renderSummary();
        };
        if (step.withNext) setTimeout(draw, 0);
        else draw();
      });
      li.dataset.status = 'running';
      renderStep(li, step, null);
      setText($('lab-summary'), `Playing step ${step.number} of ${x.steps.length}…`);
      li.scrollIntoView({ block: 'nearest' });
      if (!step.background) {
        await done;
      } else {
        x.pending.set(step.number, { captures: step.capture.map(([name]) => name), done });
        done.finally(() => {
          x.pending.delete(step.number);
          if (!cancelled() && !lab.playing) renderControls();
        });
        await underWay(step, x.vars, done, cancelled);
      }
      if (cancelled()) return;
    }
    if (x.next >= x.steps.length) await Promise.all([...x.pending.values()].map((p) => p.done));
  } finally {
    if (!cancelled()) {
      lab.playing = false;
      renderControls();
      renderSummary();
    }
  }
}

/** After a background run: until its thread is inside a run (depth >= 1) or it answered, at most 10 s. */
async function underWay(step, vars, done, cancelled) {
  const id = runThreadOf(step, vars);
  if (!id) return;
  let settled = false;
  done.then(() => (settled = true));
  const deadline = performance.now() + 10000;
  for (let pause = 5; !settled && !cancelled() && performance.now() < deadline; pause = Math.min(pause * 2, 50)) {
    try {
      const { status, json } = await send('GET', '/api/threads/' + encodeURIComponent(id));
      if (status !== 200 || (json && json.depth >= 1)) return;
    } catch {
      return;
    }
    await delay(pause);
  }
}

/** Shows the exit-reason buttons on a step about to be sent; resolves with the one picked (null: no guess after all). */
function askGuess(li, step) {
  settleGuess(null);
  return new Promise((resolve) => {
    lab.guessing = resolve;
    li.dataset.status = 'guessing';
    renderStep(li, step, null);
    $('lab-run').dataset.state = 'guessing';
    setText($('lab-summary'), `Step ${step.number} ends a run: pick the exit reason you expect, then it runs.`);
    li.scrollIntoView({ block: 'nearest' });
    const first = li.querySelector('.lab-guess-pick');
    if (first) first.focus({ preventScroll: true });
  }).finally(renderControls);
}

function reset() {
  lab.generation++;
  lab.playing = false;
  settleGuess(null);
  if (lab.current) {
    Object.assign(lab.current, fresh());
    renderSteps();
  }
}

wire();
