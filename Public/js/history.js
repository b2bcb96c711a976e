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
import { h, setText, user, userList, option, render } from './dom.js';
import { fmtMs, jsonShort, jsonLines, plural } from './format.js';
import { fetchFleet, renderFleet, fleetNote, fmtWhen, ago } from './fleet.js';

const TYPES = ['run-exit', 'perform', 'thread', 'warning', 'stall', 'stall-ended', 'request', 'instance', 'task', 'timer-mode', 'source-mode'];
const RANGES = [
  ['all', 'all kept'],
  ['15m', 'last 15 min'],
  ['1h', 'last hour'],
  ['24h', 'last 24 h'],
  ['7d', 'last 7 days'],
];
const LIMITS = ['10', '25', '50', '100'];
const DEFAULT_LIMIT = '50';
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

// ---- the panel's markup -------------------------------------------------------

function build(panel) {
  const tab = (name, label) =>
    h('button', { type: 'button', role: 'tab', id: `hist-tab-${name}`, 'aria-controls': `hist-${name}`, 'aria-selected': 'false', tabindex: '-1', 'data-tab': name }, label);
  const select = (name, label, options, value) =>
    h('label', null, label, h('select', { name }, ...options.map(([v, text]) => h('option', { value: v, selected: v === value }, text))));
  panel.replaceChildren(
    h(
      'div',
      { class: 'section-head' },
      h('h2', { id: 'hist-h' }, 'History'),
      h('button', { type: 'button', id: 'hist-close', class: 'small' }, 'Close'),
    ),
    h('p', { id: 'hist-store', class: 'hist-store small-text', role: 'status' }),
    h('div', { class: 'hist-tabs', role: 'tablist', 'aria-label': 'History views' }, tab('events', 'Events'), tab('threads', 'Threads'), tab('fleet', 'Fleet')),
    // Events
    h(
      'div',
      { id: 'hist-events', class: 'hist-tabpanel', role: 'tabpanel', 'aria-labelledby': 'hist-tab-events', tabindex: '-1' },
      h(
        'form',
        { id: 'hist-filters', class: 'hist-filters', novalidate: true, 'aria-label': 'Filter the events' },
        h('label', null, 'Thread', h('input', { name: 'thread', list: 'hist-thread-ids', placeholder: 'any (t1, t2…)', autocomplete: 'off', maxlength: '200' })),
        h('datalist', { id: 'hist-thread-ids' }),
        select('instance', 'Instance', [['', 'all instances']], ''),
        select('since', 'Time', RANGES, 'all'),
        select('limit', 'Per page', LIMITS.map((n) => [n, n]), DEFAULT_LIMIT),
        h(
          'fieldset',
          { class: 'hist-types' },
          h('legend', null, 'Event types (none ticked = all)'),
          ...TYPES.map((t) => h('label', { class: 'check' }, h('input', { type: 'checkbox', name: 'type', value: t }), ' ' + t)),
        ),
        h(
          'div',
          { class: 'form-actions' },
          h('button', { type: 'submit', id: 'hist-refresh' }, 'Refresh'),
          h('button', { type: 'button', id: 'hist-clear', class: 'hist-secondary' }, 'Clear filters'),
          h('span', { id: 'hist-updated', class: 'muted small-text' }),
        ),
      ),
      h('p', { id: 'hist-focus', class: 'hist-focus small-text', hidden: true }),
      h('p', { id: 'hist-error', class: 'form-error', role: 'alert' }),
      h('p', { id: 'hist-notice', class: 'hist-notice', hidden: true }),
      h('p', { id: 'hist-page', class: 'small-text muted', role: 'status', 'aria-live': 'polite' }),
      h('ol', { id: 'hist-list', class: 'hist-list', 'aria-label': 'Kept events, newest first' }),
      h(
        'div',
        { class: 'btn-row hist-paging' },
        h('button', { type: 'button', id: 'hist-newest', 'aria-disabled': 'true' }, 'Back to newest'),
        h('button', { type: 'button', id: 'hist-newer', 'aria-disabled': 'true' }, '‹ Newer'),
        h('button', { type: 'button', id: 'hist-older', 'aria-disabled': 'true' }, 'Older ›'),
      ),
    ),
    // Threads
    h(
      'div',
      { id: 'hist-threads', class: 'hist-tabpanel', role: 'tabpanel', 'aria-labelledby': 'hist-tab-threads', tabindex: '-1', hidden: true },
      h('p', { class: 'muted small-text' }, 'Every thread the store kept, of this start and earlier ones (newest first). A thread of a process that died is marked lost. Pick one to see its events.'),
      h('p', { id: 'hist-threads-error', class: 'form-error', role: 'alert' }),
      h('p', { id: 'hist-threads-notice', class: 'hist-notice', hidden: true }),
      h('ol', { id: 'hist-thread-list', class: 'hist-list', 'aria-label': 'Kept threads' }),
      h('p', { id: 'hist-threads-none', class: 'muted small-text', hidden: true }, 'No thread kept yet.'),
    ),
    // Fleet
    h(
      'div',
      { id: 'hist-fleet', class: 'hist-tabpanel', role: 'tabpanel', 'aria-labelledby': 'hist-tab-fleet', tabindex: '-1', hidden: true },
      h('p', { id: 'fleet-note', class: 'small-text' }),
      h('p', { id: 'fleet-error', class: 'form-error', role: 'alert' }),
      h('ul', { id: 'fleet-list', class: 'fleet-list', 'aria-label': 'Instances' }),
    ),
  );
}

// ---- opening, closing, tabs -----------------------------------------------------

function wire() {
  const panel = $('history');
  build(panel);
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
  line.dataset.state = s.up ? 'up' : 'failing';
  const health = s.up ? 'up' : ['failing', s.lastError ? [': ', user(s.lastError)] : ''];
  const counts = `${s.written ?? 0} written · ${s.dropped ?? 0} dropped` + (s.queued ? ` · ${s.queued} queued` : '');
  line.replaceChildren(
    ...render(
      'Store: ',
      h('strong', null, s.kind),
      ' · ',
      h('span', { class: 'mono hist-location' }, s.location ? user(s.location) : '–'),
      ' · ',
      h('span', { class: s.up ? 'hist-up' : 'hist-failing' }, health),
      ' · ' + counts,
    ),
  );
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

const idOf = (e) => `hist-ev-${e.cursor}`;

function eventItem(e) {
  const detailId = idOf(e) + '-d';
  const button = h(
    'button',
    { type: 'button', class: 'hist-row', 'aria-expanded': 'false', 'aria-controls': detailId },
    h('time', { class: 'hist-at', datetime: e.at, title: user(e.at) }, fmtWhen(e.at)),
    h('span', { class: 'hist-where' }, user(e.instance), ` · boot ${e.boot}`),
    h('span', { class: 'hist-thread mono' }, e.thread ? user(e.thread) : '–'),
    h('span', { class: 'badge hist-type hist-type-' + e.event }, e.event),
    h('span', { class: 'hist-sum' }, summary(e)),
  );
  const li = h(
    'li',
    { class: 'hist-ev', id: idOf(e), 'data-event': e.event, 'data-cursor': e.cursor, 'data-thread': e.thread || '', 'data-instance': e.instance, 'data-boot': String(e.boot) },
    button,
  );
  button.addEventListener('click', () => toggleDetail(li, e, button));
  return li;
}

function toggleDetail(li, e, button) {
  const open = button.getAttribute('aria-expanded') === 'true';
  button.setAttribute('aria-expanded', String(!open));
  let box = li.querySelector('.hist-detail');
  if (open) {
    if (box) box.hidden = true;
    return;
  }
  if (!box) {
    box = detail(e);
    box.id = button.getAttribute('aria-controls');
    li.append(box);
  }
  box.hidden = false;
}

/** The one-line summary of an event (rich text: names, modes, paths and messages are user text). */
export function summary(e) {
  const d = e.data || {};
  const u = (v, none = '?') => (v === null || v === undefined || v === '' ? none : user(v));
  switch (e.event) {
    case 'run-exit':
      return [`${d.exitReason || '?'} in `, u(d.mode), d.durationMs !== undefined ? ` after ${fmtMs(d.durationMs)}` : '', d.cause && d.cause.code ? [' · cause ', u(d.cause.code)] : ''];
    case 'perform':
      return [u(d.selector), ` ${d.ok ? 'ok' : 'failed'}`, !d.ok && d.error ? [' · ', u(d.error.code)] : ''];
    case 'warning':
      return [u(d.code), ': ', u(d.message, ''), d.active === false ? ' (resolved)' : ''];
    case 'stall':
      return [`${d.severity} stall, ${d.ms} ms`, d.change ? ` (${d.change})` : '', calloutText(d.callout)];
    case 'stall-ended':
      return [`stall ended: ${d.severity}, ${d.ms} ms`, calloutText(d.callout)];
    case 'request':
      return [`${d.method} `, u(d.path), ` → ${d.status}`];
    case 'thread': {
      const s = d.snapshot || {};
      return [d.change, s.name ? [' “', user(s.name), '”'] : '', d.change === 'created' && s.run ? ` (${s.run.style})` : ''];
    }
    case 'instance': {
      const lost = d.lostThreads || [];
      const bits = [`${d.change} (boot ${d.boot ?? e.boot})`];
      if (d.previousEnd) bits.push(['previous start ', u(d.previousEnd)]);
      if (lost.length) bits.push(['lost threads: ', userList(lost)]);
      else if (d.change === 'started') bits.push('no lost threads');
      return bits.flatMap((b, i) => (i ? [' · ', b] : [b]));
    }
    case 'task':
      return ['task ', u(d.task), ` ${d.change}`, d.runs !== undefined ? ` (${plural(d.runs, 'run')})` : ''];
    case 'timer-mode':
      return ['timer ', u(d.timer), ` ${d.change} `, u(d.mode)];
    case 'source-mode':
      return ['source ', u(d.source), ` ${d.change} `, u(d.mode)];
    default:
      return jsonShort(d);
  }
}

function calloutText(c) {
  if (!c || typeof c !== 'object') return '';
  return [` in ${c.kind || 'callout'}`, c.id ? [' ', user(c.id)] : '', c.selector ? [' ', user(c.selector)] : ''];
}

/** An event's details: what matters first (an exit's reason and cause), then its data. */
function detail(e) {
  const d = e.data || {};
  const facts = [];
  const fact = (label, value, cls) => facts.push(h('div', { class: cls || null }, h('dt', null, label), h('dd', null, value)));
  if (e.event === 'run-exit') {
    fact('exit reason', [`${d.exitReason} (code ${d.code}) in `, user(d.mode)], 'hist-key');
    if (d.cause) {
      fact('cause', user(d.cause.code), 'hist-key hist-cause-code');
      fact('what happened', d.cause.message ? user(d.cause.message) : '–', 'hist-wide hist-cause');
      if (d.cause.by) fact('by', user(d.cause.by));
    } else fact('cause', 'none recorded', 'hist-key');
    fact('run', `#${d.run} at depth ${d.depth}, ${fmtMs(d.durationMs)}`);
  } else if (e.event === 'perform') {
    fact('selector', [user(d.selector), ` ${d.ok ? 'ok' : 'failed'}`], 'hist-key');
    if (!d.ok && d.error) fact('error', [user(d.error.code), ': ', user(d.error.message)], 'hist-wide hist-cause');
    fact('queued / ran', `${fmtMs(d.queuedMs)} / ${fmtMs(d.ranMs)}`);
  } else if (e.event === 'warning') {
    fact('warning', [user(d.code), ` (${d.severity})`], 'hist-key');
    fact('message', user(d.message), 'hist-wide');
  } else if (e.event === 'request') {
    fact('request', [`${d.method} `, user(d.path), ` → ${d.status}`], 'hist-key hist-wide');
    if (d.requestId) fact('request id', user(d.requestId));
  } else if (e.event === 'instance' && (d.lostThreads || []).length) {
    fact('lost threads', userList(d.lostThreads), 'hist-key hist-wide hist-lost-line');
  }
  fact('when', user(e.at));
  fact('where', [user(e.instance), `, boot ${e.boot}`]);
  fact('event id · cursor', `${e.id} · ${e.cursor}`);
  return h(
    'div',
    { class: 'hist-detail', role: 'region', 'aria-label': `${e.event} ${e.cursor} details` },
    h('dl', { class: 'facts hist-facts' }, ...facts),
    h('pre', { class: 'log hist-json', tabindex: '0', 'aria-label': 'The event data as JSON' }, jsonLines(d, 2)),
  );
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
  list.replaceChildren(...threads.map(threadItem));
  $('hist-threads-none').hidden = threads.length > 0;
  const ids = [...new Set(threads.map((t) => t.thread))];
  $('hist-thread-ids').replaceChildren(...ids.map((id) => h('option', { value: id })));
}

function threadItem(t) {
  const how = t.live ? 'live' : t.endedHow || (t.endedAt ? 'ended' : 'not live');
  const cls = t.live ? 'st-running' : how === 'lost' ? 'hist-lost' : 'st-idle';
  const exit = t.lastExit;
  const exitText = exit ? [`last exit ${exit.exitReason}`, exit.cause && exit.cause.code ? [' · ', user(exit.cause.code)] : ''] : 'no exit';
  const button = h(
    'button',
    { type: 'button', class: 'hist-row hist-th-row' },
    h('span', { class: 'hist-th-name' }, h('strong', null, user(t.name || t.thread)), ' ', h('span', { class: 'mono muted' }, user(t.thread))),
    h('span', { class: 'hist-where' }, user(t.instance), ` · boot ${t.boot}`),
    h('span', { class: `badge hist-how ${cls}` }, how === 'live' || how === 'lost' || how === 'ended' || how === 'not live' ? how : ['ended: ', user(how)]),
    h('span', { class: 'hist-sum' }, user(t.style || '?'), ' · created ', fmtWhen(t.createdAt), t.endedAt ? ` · ended ${ago(t.endedAt)}` : '', ' · ', exitText),
  );
  button.addEventListener('click', () => showThread(t));
  return h(
    'li',
    { class: 'hist-th', 'data-thread': t.thread, 'data-instance': t.instance, 'data-boot': String(t.boot), 'data-ended-how': t.endedHow || '', 'data-live': String(!!t.live) },
    button,
  );
}

wire();
