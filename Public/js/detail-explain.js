// detail-explain.js — owns the detail panel's Explain section: why the last
// run ended (its cause), what keeps the loop alive (GET /why's verdicts and
// its prediction per mode), the thread's load (utilisation, lag, dispatch), its recent turns
// (GET /turns) as a table, the open turn (state.turnView: what woke it, its
// callouts) and a text trace of that turn's run, with a button that zooms the
// timeline into the run.

import { state, queueFrame } from './state.js';
import { h, setText, setFacts, syncRows, user } from './dom.js';
import { fmtMs, fmtPercent, turnText, itemText } from './format.js';
import { timelineHooks, zoomTo } from './timeline.js';
import { detailHooks } from './detail-hooks.js';
import { firesText, outcomeText } from './detail-predict.js';

const $ = (id) => document.getElementById(id);

/** Opens a turn (from the timeline or the table) in the panel. */
export function openTurn(thread, turn) {
  state.turnView = { thread, turn };
  if (state.selectedId !== thread) detailHooks.select(thread, false);
  renderOpenTurn();
  queueFrame();
}

export function wireExplain() {
  timelineHooks.openTurn = openTurn;
  $('turn-zoom').addEventListener('click', () => {
    const v = state.turnView;
    if (v && !zoomTo(v.thread, v.turn.run)) setText($('turn-zoom-result'), 'that run is no longer in the timeline');
  });
}

/** d: the fetched views (why, turns), s: the freshest snapshot. */
export function renderExplain(d, s) {
  const x = s.lastExit;
  setText($('d-cause'), x && x.cause ? [`${x.exitReason}: ${x.cause.code} — `, user(x.cause.message)] : x ? x.exitReason : 'no run has ended yet');
  $('d-cause').dataset.cause = x && x.cause ? x.cause.code : '';
  // the verdicts quote mode and item names: user text
  setText($('d-why'), d.why ? user(d.why.verdict) : '–');
  const why = d.why ? d.why.modes.map((mode) => h('li', { 'data-mode': mode.mode }, h('strong', { class: 'mono' }, user(mode.mode)), ' ', user(mode.verdict), predicted(mode.prediction))) : [];
  $('d-why-modes').replaceChildren(...why);
  const l = s.load;
  setFacts(
    $('d-load'),
    l
      ? [
          [`busy (last ${l.windowSeconds} s)`, fmtPercent(l.utilization)],
          ['busy (lifetime)', fmtPercent(l.lifetimeUtilization)],
          ['turns', l.turns],
          ['dispatch mean / max', `${fmtMs(l.dispatchMs.mean)} / ${fmtMs(l.dispatchMs.max)}`],
          ['timer lag mean / max', `${fmtMs(l.lag.timerMs.mean)} / ${fmtMs(l.lag.timerMs.max)}`],
          ['perform wait mean / max', `${fmtMs(l.lag.performMs.mean)} / ${fmtMs(l.lag.performMs.max)}`],
        ]
      : [],
  );
  const turns = (d.turns || []).slice().reverse();
  syncRows(
    document.querySelector('#turns-table tbody'),
    turns.slice(0, 30),
    (t) => String(t.turn),
    (t) => [
      String(t.turn),
      String(t.run),
      itemText(t.wokeBy),
      { text: fmtMs(t.sleptMs), cls: 'num' },
      { text: fmtMs(t.busyMs), cls: 'num' },
      t.callouts.length ? t.callouts.map((c, i) => [i ? ', ' : '', itemText(c)]) : '–',
    ],
    (t) => [h('button', { type: 'button', class: 'small', 'aria-label': `Open turn ${t.turn}`, onclick: () => openTurn(d.id, t) }, 'Open')],
  );
  if (state.turnView && state.turnView.thread === d.id) renderOpenTurn(d.turns);
  else renderTrace(d.turns || [], turns.length ? turns[0].run : null);
}

/** GET /why's prediction for a mode (a run there with no deadline, or the thread's own run): one line, or nothing. */
function predicted(p) {
  if (!p) return null;
  // labelled with the run it is about: the Run form's prediction is about the run that form would start
  return h('span', { class: 'why-predict', 'data-exit': p.exitReason || '' }, ' — predicted for a run in this mode with no deadline (a thread that runs itself: its own run): ', outcomeText(p), firesText(p));
}

/** The open turn's box and its run's trace. */
function renderOpenTurn(turns) {
  const v = state.turnView;
  const box = $('turn-box');
  box.hidden = !v;
  if (!v) return;
  const t = v.turn;
  setText($('turn-title'), [`Turn ${t.turn} of ${v.thread} (run ${t.run}, `, user(t.mode), `${t.depth ? ', depth ' + t.depth : ''})`]);
  setFacts($('turn-facts'), [
    ['woke by', itemText(t.wokeBy)],
    ['slept before', fmtMs(t.sleptMs)],
    ['busy', fmtMs(t.busyMs)],
    ['ended', t.end === 'exit' ? 'the run returned' : 'went to sleep'],
    ['callouts', t.callouts.length + (t.droppedCallouts ? ` (+${t.droppedCallouts} not kept)` : '')],
  ]);
  $('turn-callouts').replaceChildren(...t.callouts.map((c) => h('li', { class: 'mono' }, itemText(c), c.selector ? [' (', user(c.selector), ')'] : '', `: ${fmtMs(c.ms)}`)));
  setText($('turn-zoom'), `Zoom the timeline into run ${t.run}`);
  setText($('turn-zoom-result'), '');
  const m = state.threads.get(v.thread);
  const known = turns || (m ? m.turns : []);
  renderTrace(known.some((x) => x.run === t.run) ? known : [...known, t], t.run);
}

/** A run as text: one line per turn. */
function renderTrace(turns, run) {
  const lines = turns.filter((t) => t.run === run).sort((a, b) => a.turn - b.turn).map(turnText);
  setText($('trace-title'), run ? `Trace of run ${run}` : 'Trace');
  setText($('trace'), lines.length ? lines.flatMap((line, i) => (i ? ['\n', line] : [line])) : 'no turns recorded yet');
}
