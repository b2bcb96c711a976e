// main.js — the dashboard's entry point (the one <script type="module"> of
// index.html): wires the modules together and starts them. Owns the frame
// render (state.render: the cards or the thread table, the thread count, the
// detail panel) and the timers that drive polling. Module map:
//   state.js            every piece of mutable state, the thread models, the frame queue
//   api.js              JSON API calls, the token (header only) and its dialog
//   sse.js              the SSE parser and a reconnecting fetch event stream
//   events.js           the live event stream, connection badge, event → model, polling
//   cards.js            the worker cards and their buttons (small sets)
//   table.js            the thread table (more than a dozen threads): sort, filter, virtual rows, summary bar
//   timeline.js         the canvas timeline lanes (turns, stalls, marks), zoom, hover and click
//   timeline-ended.js   an ended thread's lane: its turns and run exits read once from the server
//   detail-explain.js   the detail panel's Explain section: cause, why, load, turns, trace
//   detail-steps.js     the detail panel's run-loop steps: CF's ten steps lit for one recorded turn
//   warnings.js         the Warnings panel (all threads)
//   detail.js           the detail panel's selection, fetching and perform results
//   detail-sections.js  the detail panel's sections, one renderer each
//   detail-hooks.js     what the panel's sections call back into detail.js for (no import cycle)
//   detail-forms.js     every form and button that sends a request
//   pickers.js          selector pickers generated from /api/selectors
//   forms.js, dom.js, format.js   generic form, DOM and formatting helpers
//   csp.js              the record of CSP violations (tests, devtools)
//   lab.js              the Experiments panel: list, explanation, step / play all, results
//   experiments.js      the experiment rules (JSON paths, expectations, ${var}), as runloopd play
//   history.js          the History panel: kept events (filters, pages, details), kept threads, store status
//                       (its markup in history-markup.js, one event's or thread's row in history-event.js)
//   fleet.js            the History panel's Fleet tab: the instances sharing the store, their health and dashboards

import './csp.js';
import './lab.js';
import './history.js';
import { state, queueFrame, markDirty } from './state.js';
import { api, askToken } from './api.js';
import { setText } from './dom.js';
import { plural } from './format.js';
import { updateCard } from './cards.js';
import { refreshDetailIfIdle, renderDetailThrottled } from './detail.js';
import { wireForms } from './detail-forms.js';
import { startEvents, poll, removeThread, syncStream } from './events.js';
import { wireTable, renderTable, tableWanted } from './table.js';
import { loadSelectors } from './pickers.js';
import { wireTimeline } from './timeline.js';
import { wireExplain } from './detail-explain.js';
import { wireLoopSteps } from './detail-steps.js';
import { loadWarnings, renderWarnings, wireWarnings } from './warnings.js';

const POLL_MS = 1000;
const WARNINGS_MS = 3000;
const ENDED_KEEP_MS = 10 * 60 * 1000;
const ENDED_EVERY_MS = 1000;

function render() {
  const v = state.view;
  if (state.countsDirty || v.rowsDirty) setView(tableWanted());
  if (v.table) {
    // The table draws the rows in view from the models; no per-thread DOM work here.
    state.dirty.clear();
    renderTable();
  } else {
    for (const id of state.dirty) {
      const m = state.threads.get(id);
      // an ended thread's card is built only when it is to be shown
      if (m && (m.card || !m.snap || m.snap.state !== 'exited' || state.showEnded || m.id === state.selectedId)) updateCard(m);
    }
    state.dirty.clear();
  }
  if (state.countsDirty) {
    state.countsDirty = false;
    const n = state.threads.size;
    setText(document.getElementById('thread-count'), n ? plural(n, 'thread') : '');
    document.getElementById('no-threads').hidden = n > 0;
  }
  renderWarnings();
  renderEnded();
  renderDetailThrottled();
  syncStream();
}

/** Cards for a few threads, the table for more: switching drops the cards or rebuilds them. */
function setView(table) {
  const v = state.view;
  if (v.table === table) return;
  v.table = table;
  document.getElementById('table-view').hidden = !table;
  document.getElementById('cards').hidden = table;
  document.getElementById('overview').classList.toggle('as-table', table);
  for (const m of state.threads.values()) {
    if (table) {
      m.card?.el.remove();
      m.card = null;
    } else if (m.snap) state.dirty.add(m.id);
  }
  v.orderDirty = true;
  v.scrolled = true;
  v.summaryKey = '';
}

/** Ended threads: hidden unless asked for, forgotten by the page after ENDED_KEEP_MS (looked at once a second). */
function renderEnded() {
  const now = Date.now();
  const wait = ENDED_EVERY_MS - (now - state.endedCheckedAt);
  if (wait > 0) {
    state.endedTimer ??= setTimeout(() => {
      state.endedTimer = null;
      queueFrame();
    }, wait);
    return;
  }
  state.endedCheckedAt = now;
  let ended = 0;
  for (const m of [...state.threads.values()]) {
    if (!m.snap || m.snap.state !== 'exited') continue;
    const endedAt = Date.parse(m.snap.endedAt || '') || now;
    if (now - endedAt > ENDED_KEEP_MS && m.id !== state.selectedId) {
      state.forgotten.add(m.id + '|' + m.snap.createdAt);
      removeThread(m.id);
      continue;
    }
    ended++;
  }
  setText(document.getElementById('ended-count'), String(ended));
}

async function boot() {
  state.render = render;
  wireForms();
  wireTimeline();
  wireWarnings();
  wireExplain();
  wireLoopSteps();
  wireTable();
  document.getElementById('show-ended').addEventListener('change', (e) => {
    state.showEnded = e.currentTarget.checked;
    for (const m of state.threads.values()) markDirty(m.id);
    state.countsDirty = true;
  });
  document.getElementById('token-button').addEventListener('click', async () => {
    if (await askToken()) {
      poll();
      loadSelectors();
    }
  });
  state.countsDirty = true;
  queueFrame();
  await loadSelectors();
  api('GET', '/api/version')
    .then((v) => setText(document.getElementById('version'), v && v.version ? 'v' + v.version : ''))
    .catch(() => {});
  startEvents();
  poll();
  setInterval(poll, POLL_MS);
  loadWarnings();
  setInterval(loadWarnings, WARNINGS_MS);
  setInterval(refreshDetailIfIdle, 500);
  document.addEventListener('visibilitychange', () => {
    if (!document.hidden) poll();
  });
}

boot();
