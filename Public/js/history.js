// history.js — owns the History panel (#history, opened by the header's
// History and Fleet buttons): what the server's history store kept, across
// restarts and crashes. Three tabs:
//   Events   GET /api/history with filters (thread, event types, instance,
//            time range, page size), newest first, paged by cursor (Older,
//            Newer, Back to newest); a row opens its details (the run-exit's
//            reason and cause first, then the event's data as JSON)
//   Threads  GET /api/history/threads: every kept thread of every start, how
//            it ended (`lost` when its process died); a row shows its events
//            (instance + thread: ids repeat across starts, so its boot is
//            marked and other starts' rows dimmed)
//   Fleet    the instances sharing the store (fleet.js)
// and a status line of the store (GET /api/store). A server without a store
// (--no-store) answers 404 store_disabled, a failing one 503: both are said
// in words. The panel's markup is built here (index.html has its empty
// <section>); its state is state.history. Imported by main.js.

import { state } from './state.js';
import { api } from './api.js';
import { h, setText, user, option, render } from './dom.js';
import { fetchFleet, renderFleet, fleetNote } from './fleet.js';
import { eventItem, threadItem } from './history-event.js';
import { buildHistoryPanel, renderStoreStatus } from './history-markup.js';

const FLEET_MS = 5000;

const hist = (state.history = {
  /** 'events' | 'threads' | 'fleet' */
  tab: 'events',
  /** the header button that opened the panel (focus goes back to it) */
  opener: null,
  /** cursors of the pages shown so far: [null (newest), next of page 1, …] */
  pages: [null],
  /** the current page's `next` (older events), or null */
  next: null,
  /** the filters of the pages (a change of filters starts from the newest page) */
  query: '',
  /** bumped by every load: an older answer is dropped */
  generation: 0,
  /** the thread picked in the Threads tab: {instance, thread, boot, name} */
  focus: null,
  /** GET /api/fleet, GET /api/store (last answers) */
  fleet: null,
  store: null,
  /** the fleet refresh timer while the Fleet tab is shown */
  timer: null,
  /** the pending GET /api/store: the history is asked only when a store is there */
  storeLoad: null,
});

const $ = (id) => document.getElementById(id);

// ---- opening, closing, tabs -----------------------------------------------------

function wire() {
  const panel = $('history');
  buildHistoryPanel(panel);
  $('history-button').addEventListener('click', (e) => toggle('events', e.currentTarget));
  $('fleet-button').addEventListener('click', (e) => toggle('fleet', e.currentTarget));
  $('hist-close').addEventListener('click', close);
  panel.addEventListener('keydown', (e) => {
    if (e.key === 'Escape' && !e.defaultPrevented) {
      e.preventDefault();
      close();
    }
  });
  const tablist = panel.querySelector('[role=tablist]');
  tablist.addEventListener('click', (e) => {
    const t = e.target.closest('[role=tab]');
    if (t) showTab(t.dataset.tab);
  });
  tablist.addEventListener('keydown', (e) => {
    const tabs = [...tablist.querySelectorAll('[role=tab]')];
    const i = tabs.indexOf(document.activeElement);
    const to = { ArrowRight: i + 1, ArrowLeft: i - 1, Home: 0, End: tabs.length - 1 }[e.key];
    if (i < 0 || to === undefined) return;
    e.preventDefault();
    const t = tabs[(to + tabs.length) % tabs.length];
    showTab(t.dataset.tab);
    t.focus();
  });
  const form = $('hist-filters');
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    reload(true);
  });
  form.addEventListener('change', (e) => {
    if (e.target.name === 'thread' || e.target.name === 'instance') hist.focus = null;
    reload(false);
  });
  $('hist-clear').addEventListener('click', () => {
    form.reset();
    hist.focus = null;
    reload(false);
  });
  $('hist-older').addEventListener('click', () => page('older'));
  $('hist-newer').addEventListener('click', () => page('newer'));
  $('hist-newest').addEventListener('click', () => page('newest'));
}

function toggle(tab, button) {
  const panel = $('history');
  if (!panel.hidden && hist.tab === tab) return close();
  hist.opener = button;
  open(tab);
}

/** Opens the panel on a tab (events, threads, fleet) and loads it. */
function open(tab) {
  const panel = $('history');
  const wasHidden = panel.hidden;
  panel.hidden = false;
  showTab(tab);
  if (wasHidden) {
    panel.scrollIntoView({ block: 'nearest' });
    panel.focus();
    if (tab !== 'events') hist.storeLoad = loadStore(); // the events' load reads it too
    if (tab !== 'fleet') loadFleet(); // the Instance filter's choices
  }
}

function close() {
  $('history').hidden = true;
  stopFleetTimer();
  markButtons();
  const back = hist.opener || $('history-button');
  back.focus();
}

function markButtons() {
  const open = !$('history').hidden;
  $('history-button').setAttribute('aria-expanded', String(open && hist.tab !== 'fleet'));
  $('fleet-button').setAttribute('aria-expanded', String(open && hist.tab === 'fleet'));
}

function showTab(tab) {
  hist.tab = tab;
  for (const t of document.querySelectorAll('#history [role=tab]')) {
    const on = t.dataset.tab === tab;
    t.setAttribute('aria-selected', String(on));
    t.tabIndex = on ? 0 : -1;
    $('hist-' + t.dataset.tab).hidden = !on;
  }
  markButtons();
  stopFleetTimer();
  if (tab === 'events') reload(false);
  else if (tab === 'threads') loadThreads();
  else {
    loadFleet();
    hist.timer = setInterval(() => {
      if (!$('history').hidden && hist.tab === 'fleet' && !document.hidden) loadFleet();
    }, FLEET_MS);
  }
}

function stopFleetTimer() {
  if (hist.timer) clearInterval(hist.timer);
  hist.timer = null;
}

// ---- the store and the fleet --------------------------------------------------------

async function loadStore() {
  const line = $('hist-store');
  try {
    hist.store = await api('GET', '/api/store');
  } catch (e) {
    line.dataset.state = 'error';
    setText(line, ['Store: cannot read its status (', user(e.message), ')']);
    return;
  }
  const s = hist.store;
  $('history').dataset.store = s.enabled ? 'on' : 'disabled';
  if (!s.enabled) {
    line.dataset.state = 'disabled';
    setText(line, 'Store: none — runloopd runs with --no-store: nothing is kept.');
    return;
  }
  renderStoreStatus(line, s);
}

async function loadFleet() {
  const error = $('fleet-error');
  try {
    hist.fleet = await fetchFleet();
    setText(error, '');
  } catch (e) {
    setText(error, ['Cannot list the fleet: ', user(e.message)]);
    return;
  }
  renderInstanceChoices();
  setText($('fleet-note'), fleetNote(hist.fleet));
  renderFleet($('fleet-list'), hist.fleet, showInstance);
}

/** The Instance filter's choices: the fleet's instances (and the one filtered by, if gone). */
function renderInstanceChoices() {
  const sel = $('hist-filters').elements.instance;
  const ids = (hist.fleet && hist.fleet.instances.map((i) => i.id)) || [];
  if (sel.value && !ids.includes(sel.value)) ids.push(sel.value);
  const key = ids.join(',');
  if (sel.dataset.key === key) return;
  const keep = sel.value;
  sel.dataset.key = key;
  const selfId = hist.fleet && hist.fleet.self;
  sel.replaceChildren(h('option', { value: '' }, 'all instances'), ...ids.map((id) => option(id, [user(id), id === selfId ? ' (this one)' : ''])));
  sel.value = keep;
}

/** The Fleet tab's History button: the events of that instance. */
function showInstance(id) {
  const form = $('hist-filters');
  hist.focus = null;
  form.elements.thread.value = '';
  setInstance(id);
  showTab('events');
  $('hist-tab-events').focus();
}

function setInstance(id) {
  const sel = $('hist-filters').elements.instance;
  if (id && ![...sel.options].some((o) => o.value === id)) sel.append(option(id, user(id)));
  sel.value = id || '';
}

// ---- events -------------------------------------------------------------------------

function filters() {
  const f = $('hist-filters').elements;
  const q = new URLSearchParams();
  if (f.thread.value.trim()) q.set('thread', f.thread.value.trim());
  const types = [...f.type].filter((c) => c.checked).map((c) => c.value);
  if (types.length) q.set('type', types.join(','));
  if (f.instance.value) q.set('instance', f.instance.value);
  if (f.since.value !== 'all') q.set('since', f.since.value);
  q.set('limit', f.limit.value);
  return q;
}

/** Loads the events again: from the newest page, or (keepPage) the page shown. */
function reload(keepPage) {
  if (!keepPage) hist.pages = [null];
  hist.storeLoad = loadStore();
  return loadEvents();
}

/** The store said it is off (--no-store): its 404 is shown without asking (no failed request). */
async function storeDisabled() {
  await hist.storeLoad;
  return !!hist.store && hist.store.enabled === false;
}

const DISABLED = { status: 404, code: 'store_disabled', message: 'no history store' };

function page(which) {
  const button = $('hist-' + which);
  if (button.getAttribute('aria-disabled') === 'true') return;
  if (which === 'older') hist.pages.push(hist.next);
  else if (which === 'newer') hist.pages.pop();
  else hist.pages = [null];
  loadEvents().then(() => {
    // the focus stays on a paging button that still works, else on the list
    const still = button.getAttribute('aria-disabled') !== 'true';
    (still ? button : $('hist-list').querySelector('button') || $('hist-events')).focus();
  });
}

async function loadEvents() {
  const generation = ++hist.generation;
  const q = filters();
  if (q.toString() !== hist.query) {
    hist.query = q.toString();
    hist.pages = [null];
  }
  const cursor = hist.pages[hist.pages.length - 1];
  if (cursor) q.set('cursor', cursor);
  const list = $('hist-list');
  list.setAttribute('aria-busy', 'true');
  setText($('hist-error'), '');
  let data;
  try {
    if (await storeDisabled()) throw DISABLED;
    data = await api('GET', '/api/history?' + q);
  } catch (e) {
    if (generation !== hist.generation) return;
    list.removeAttribute('aria-busy');
    list.replaceChildren();
    hist.next = null;
    showProblem(e, $('hist-error'), $('hist-notice'));
    setText($('hist-page'), '');
    renderPaging();
    return;
  }
  if (generation !== hist.generation) return;
  list.removeAttribute('aria-busy');
  $('hist-notice').hidden = true;
  hist.next = data.next || null;
  const events = data.events || [];
  list.replaceChildren(...events.map(eventItem));
  renderFocus();
  const limit = Number(q.get('limit'));
  const first = (hist.pages.length - 1) * limit + 1;
  setText(
    $('hist-page'),
    events.length
      ? `Events ${first}–${first + events.length - 1}, newest first` + (hist.next ? ' · older ones on the next page' : ' · the oldest kept')
      : hist.pages.length > 1
        ? 'No older events.'
        : 'No kept event matches these filters.',
  );
  setText($('hist-updated'), 'read at ' + new Date().toLocaleTimeString([], { hour12: false }));
  renderPaging();
}

function renderPaging() {
  const deeper = hist.pages.length > 1;
  $('hist-older').setAttribute('aria-disabled', String(!hist.next));
  $('hist-newer').setAttribute('aria-disabled', String(!deeper));
  $('hist-newest').setAttribute('aria-disabled', String(!deeper));
}

/** A 404 store_disabled or a 503 in words (notice), anything else as an error. */
function showProblem(e, errorEl, noticeEl) {
  noticeEl.hidden = true;
  if (e.code === 'store_disabled') {
    noticeEl.hidden = false;
    noticeEl.dataset.code = e.code;
    setText(noticeEl, 'runloopd runs with --no-store: nothing is kept. Start it without --no-store (history in --data-dir) or with --store postgres://… to keep its history.');
  } else if (e.status === 503) {
    setText(errorEl, [`The history store does not answer (503 ${e.code}): `, user(e.message), '. runloopd keeps running and retries; Refresh to read again.']);
  } else setText(errorEl, ['Cannot read the history: ', user(e.message)]);
}

// ---- a thread's events (from the Threads tab) ---------------------------------------

function renderFocus() {
  const line = $('hist-focus');
  const f = hist.focus;
  for (const li of $('hist-list').children) li.classList.toggle('hist-other-boot', !!f && li.dataset.boot !== String(f.boot));
  if (!f) {
    line.hidden = true;
    return;
  }
  line.hidden = false;
  line.replaceChildren(
    ...render(
      'Thread ',
      h('strong', { class: 'mono' }, user(f.thread)),
      f.name ? [' “', user(f.name), '”'] : '',
      ' of ',
      user(f.instance),
      `, boot ${f.boot}`,
      f.how ? h('span', { class: f.how === 'lost' ? 'hist-lost-text' : null }, ' (', f.how === 'live' ? 'live' : ['ended: ', user(f.how)], ')') : '',
      '. Thread ids repeat across starts: rows of other boots are dimmed.',
    ),
  );
}

function showThread(t) {
  const form = $('hist-filters');
  form.reset();
  form.elements.thread.value = t.thread;
  setInstance(t.instance);
  hist.focus = { instance: t.instance, thread: t.thread, boot: t.boot, name: t.name, how: t.live ? 'live' : t.endedHow };
  showTab('events');
  $('hist-tab-events').focus();
}

// ---- threads ------------------------------------------------------------------------

async function loadThreads() {
  const list = $('hist-thread-list');
  const instance = $('hist-filters').elements.instance.value;
  list.setAttribute('aria-busy', 'true');
  setText($('hist-threads-error'), '');
  let data;
  try {
    if (await storeDisabled()) throw DISABLED;
    data = await api('GET', '/api/history/threads?limit=200' + (instance ? '&instance=' + encodeURIComponent(instance) : ''));
  } catch (e) {
    list.removeAttribute('aria-busy');
    list.replaceChildren();
    showProblem(e, $('hist-threads-error'), $('hist-threads-notice'));
    return;
  }
  list.removeAttribute('aria-busy');
  $('hist-threads-notice').hidden = true;
  const threads = data.threads || [];
  list.replaceChildren(...threads.map((t) => threadItem(t, showThread)));
  $('hist-threads-none').hidden = threads.length > 0;
  const ids = [...new Set(threads.map((t) => t.thread))];
  $('hist-thread-ids').replaceChildren(...ids.map((id) => h('option', { value: id })));
}

wire();
