// table.js — owns the thread table (#table-view), the dashboard's main view
// once more than CARDS_MAX threads are shown (cards stay for small sets):
// one compact row per thread, sortable by every column (a header button,
// aria-sort), filtered by text, state, mode and warning code, and rendered
// only for the rows in view (virtual scrolling: a fixed row height, a spacer
// row above and below, a pool of about a viewport of rows plus OVERSCAN that
// is refilled as the list scrolls). The summary bar above it counts threads
// by state and active warnings by code (both filter when clicked) and names
// the busiest loops (click: open one). A row's click opens the thread's
// detail; its pin keeps the thread's timeline lane drawn and its events
// flowing (events.js inspects the selected and pinned threads). All DOM work
// happens in renderTable, once a frame at most (main.js), whatever the
// number of snapshot rows that arrived since the last one.

import { state, queueFrame } from './state.js';
import { h, setText, setClass, user, plain, option } from './dom.js';
import { plural } from './format.js';
import { select } from './detail.js';

/** Up to this many shown threads the page shows cards; above it, the table. */
export const CARDS_MAX = 12;
const ROW_H = 28;
const OVERSCAN = 8;
const STATES = Object.freeze(['running', 'waiting', 'idle', 'exited']);
const BUSIEST = 5;

const $ = (id) => document.getElementById(id);

/** What a row shows and sorts on, from a thread model. */
const shownState = (m) => (m.snap.state === 'exited' ? 'exited' : m.hint || m.snap.state);
const busyOf = (s) => (typeof s.busyPercent === 'number' ? s.busyPercent : s.load && typeof s.load.utilization === 'number' ? s.load.utilization * 100 : null);
const wakeupsOf = (s) => (typeof s.wakeupsPerSecond === 'number' ? s.wakeupsPerSecond : null);
const modeOf = (s) => s.currentMode || s.run.mode;
const activeCodes = (s) => {
  const codes = [];
  for (const w of s.warnings || []) if (w.active && !codes.includes(w.code)) codes.push(w.code);
  return codes;
};
const idNum = (id) => Number(String(id).replace(/^\D+/, '')) || 0;
const cmpStr = (a, b) => (a < b ? -1 : a > b ? 1 : 0);
const cmpNum = (a, b) => (a === null ? (b === null ? 0 : 1) : b === null ? -1 : a - b);

/** The columns: key, header text, whether numbers (sorted descending first), the comparison. */
const COLUMNS = Object.freeze([
  { key: 'name', label: 'thread', cmp: (a, b) => cmpStr(a.snap.name || a.id, b.snap.name || b.id) || idNum(a.id) - idNum(b.id) },
  { key: 'state', label: 'state', cmp: (a, b) => STATES.indexOf(shownState(a)) - STATES.indexOf(shownState(b)) },
  { key: 'style', label: 'style · mode', cmp: (a, b) => cmpStr(a.snap.run.style, b.snap.run.style) || cmpStr(modeOf(a.snap), modeOf(b.snap)) },
  { key: 'busy', label: 'busy', num: true, cmp: (a, b) => cmpNum(busyOf(a.snap), busyOf(b.snap)) },
  { key: 'wakeups', label: 'wake-ups/s', num: true, cmp: (a, b) => cmpNum(wakeupsOf(a.snap), wakeupsOf(b.snap)) },
  { key: 'items', label: 'timers / sources / performs', short: 'tm / src / perf', num: true, cmp: (a, b) => itemsKey(a.snap) - itemsKey(b.snap) },
  { key: 'exit', label: 'last exit', cmp: (a, b) => cmpStr(exitKey(a.snap), exitKey(b.snap)) || (a.snap.runs || 0) - (b.snap.runs || 0) },
  { key: 'warnings', label: 'warnings', num: true, cmp: (a, b) => activeCodes(a.snap).length - activeCodes(b.snap).length || cmpStr(activeCodes(a.snap).join(), activeCodes(b.snap).join()) },
]);
const itemsKey = (s) => {
  const c = s.counts || {};
  return (c.timers ?? 0) * 1e8 + (c.sources ?? 0) * 1e4 + (c.pendingPerforms ?? 0);
};
const exitKey = (s) => (s.lastExit ? s.lastExit.exitReason + ' ' + (s.lastExit.cause ? s.lastExit.cause.code : '') : '');

/** Whether the table is the main view now (the shown threads outnumber CARDS_MAX, or asked for). */
export function tableWanted() {
  const forced = state.view.forced;
  if (forced) return forced === 'table';
  let shown = 0;
  for (const m of state.threads.values()) if (m.snap && (state.showEnded || m.snap.state !== 'exited') && ++shown > CARDS_MAX) return true;
  return false;
}

export function wireTable() {
  const v = state.view;
  const head = $('tt-head');
  head.replaceChildren(
    ...COLUMNS.map((c) =>
      h('th', { scope: 'col', 'aria-sort': 'none', 'data-col': c.key }, h('button', { type: 'button', class: 'tt-sort', 'data-sort': c.key, title: c.short ? c.label : null, 'aria-label': c.short ? c.label : null }, c.short || c.label)),
    ),
    h('th', { scope: 'col', class: 'tt-pin-col' }, h('span', { class: 'sr-only' }, 'pin')),
  );
  head.addEventListener('click', (e) => {
    const b = e.target.closest('[data-sort]');
    if (!b) return;
    const key = b.dataset.sort;
    const col = COLUMNS.find((c) => c.key === key);
    v.sort = v.sort.key === key ? { key, dir: -v.sort.dir } : { key, dir: col.num ? -1 : 1 };
    renderHeader();
    changed();
  });
  $('tt-text').addEventListener('input', (e) => {
    v.filter.text = e.currentTarget.value.trim().toLowerCase();
    changed(true);
  });
  for (const [id, key] of [['tt-state', 'state'], ['tt-mode', 'mode'], ['tt-code', 'code']]) {
    $(id).addEventListener('change', (e) => {
      v.filter[key] = e.currentTarget.value;
      changed(true);
    });
  }
  $('tt-clear').addEventListener('click', () => setFilter({ text: '', state: '', mode: '', code: '' }));
  $('tt-summary').addEventListener('click', (e) => {
    const b = e.target.closest('button');
    if (!b) return;
    if (b.dataset.state !== undefined) setFilter({ state: v.filter.state === b.dataset.state ? '' : b.dataset.state });
    else if (b.dataset.code !== undefined) setFilter({ code: v.filter.code === b.dataset.code ? '' : b.dataset.code });
    else if (b.dataset.open) select(b.dataset.open, true);
  });
  $('tt-scroll').addEventListener('scroll', () => {
    v.scrolled = true;
    queueFrame();
  });
  $('tt-body').addEventListener('click', (e) => {
    const tr = e.target.closest('tr[data-thread]');
    if (!tr || !tr.dataset.thread) return;
    const id = tr.dataset.thread;
    if (e.target.closest('[data-role=pin]')) return togglePin(id);
    select(id, true);
  });
  // ?view=cards or ?view=table in the page's URL fixes the view (bookmarks, tests)
  const asked = new URLSearchParams(location.search).get('view');
  if (asked === 'cards' || asked === 'table') {
    v.forced = asked;
    $('view-mode').value = asked;
  }
  $('view-mode').addEventListener('change', (e) => {
    v.forced = e.currentTarget.value || null;
    state.countsDirty = true;
    queueFrame();
  });
  addEventListener('resize', () => {
    v.scrolled = true;
    queueFrame();
  });
}

/** Sets some filters (and their controls), then redraws. */
export function setFilter(parts) {
  const f = state.view.filter;
  Object.assign(f, parts);
  $('tt-text').value = f.text;
  for (const [id, key] of [['tt-state', 'state'], ['tt-mode', 'mode'], ['tt-code', 'code']]) {
    ensureOption($(id), f[key]);
    $(id).value = f[key];
  }
  changed(true);
}

function ensureOption(sel, value) {
  if (value && ![...sel.options].some((o) => o.value === value)) sel.append(option(value, user(value)));
}

export function togglePin(id) {
  const pinned = state.view.pinned;
  if (pinned.has(id)) pinned.delete(id);
  else pinned.add(id);
  state.view.rowsDirty = true;
  queueFrame();
}

/** The order or filter changed: re-sort, and back to the top when the filter changed. */
function changed(toTop) {
  state.view.orderDirty = true;
  if (toTop) $('tt-scroll').scrollTop = 0;
  queueFrame();
}

/** The rows the filters let through, sorted. */
function computeOrder() {
  const v = state.view;
  const f = v.filter;
  const col = COLUMNS.find((c) => c.key === v.sort.key) || COLUMNS[0];
  const out = [];
  for (const m of state.threads.values()) {
    const s = m.snap;
    if (!s) continue;
    const st = shownState(m);
    if (!listed(m, f.state)) continue;
    if (f.state && st !== f.state) continue;
    if (f.mode && s.run.mode !== f.mode && s.currentMode !== f.mode) continue;
    if (f.code && !activeCodes(s).includes(f.code)) continue;
    if (f.text && !textOf(m).includes(f.text)) continue;
    out.push(m);
  }
  const dir = v.sort.dir;
  out.sort((a, b) => dir * col.cmp(a, b) || idNum(a.id) - idNum(b.id));
  return out;
}

const textOf = (m) => {
  const s = m.snap;
  return `${s.name || ''} ${m.id} ${shownState(m)} ${s.run.style} ${modeOf(s)} ${activeCodes(s).join(' ')} ${exitKey(s)}`.toLowerCase();
};

/** Draws the table (called from the frame render while the table is the view). */
export function renderTable() {
  const v = state.view;
  const dataChanged = v.rowsDirty;
  if (dataChanged || v.orderDirty) {
    v.order = computeOrder();
    v.orderDirty = false;
    v.rowsDirty = false;
    renderSummary();
    renderHeader();
    setText($('tt-shown'), v.order.length === countShown() ? plural(v.order.length, 'thread') : `${v.order.length} of ${plural(countShown(), 'thread')} shown`);
    $('tt-empty').hidden = v.order.length > 0;
  } else if (!v.scrolled) return;
  v.scrolled = false;
  renderRows();
}

/** The threads the table lists before any filter: the caption's total (the same rule computeOrder starts from). */
function countShown() {
  let n = 0;
  for (const m of state.threads.values()) if (m.snap && listed(m, '')) n++;
  return n;
}

/** Ended threads are listed only when asked for (the switch, or the state filter), or while open. */
const listed = (m, wantState) => shownState(m) !== 'exited' || state.showEnded || m.id === state.selectedId || wantState === 'exited';

function renderHeader() {
  const v = state.view;
  for (const th of $('tt-head').children) {
    if (!th.dataset.col) continue;
    const sort = th.dataset.col === v.sort.key ? (v.sort.dir > 0 ? 'ascending' : 'descending') : 'none';
    if (th.getAttribute('aria-sort') !== sort) th.setAttribute('aria-sort', sort);
  }
}

/** Only the rows in view (and OVERSCAN either side): a spacer above and below stands for the rest. */
function renderRows() {
  const v = state.view;
  const scroller = $('tt-scroll');
  const n = v.order.length;
  const viewH = scroller.clientHeight || 600;
  const first = Math.max(0, Math.min(n, Math.floor(scroller.scrollTop / ROW_H) - OVERSCAN));
  const last = Math.min(n, first + Math.ceil(viewH / ROW_H) + 2 * OVERSCAN);
  setHeight($('tt-top'), first * ROW_H);
  setHeight($('tt-bottom'), (n - last) * ROW_H);
  const pool = v.pool;
  const body = $('tt-body');
  while (pool.length < last - first) {
    const row = buildRow();
    pool.push(row);
    body.insertBefore(row.tr, $('tt-bottom'));
  }
  for (let i = 0; i < pool.length; i++) {
    const row = pool[i];
    const m = v.order[first + i];
    const shown = first + i < last && !!m;
    if (row.tr.hidden === shown) row.tr.hidden = !shown;
    if (shown) fillRow(row, m, first + i);
  }
}

function setHeight(el, px) {
  const want = px + 'px';
  if (el.style.height !== want) el.style.height = want; // CSSOM: allowed by style-src 'self'
}

function buildRow() {
  const r = {};
  const td = (key, cls) => (r[key] = h('td', cls ? { class: cls } : null));
  r.open = h('button', { type: 'button', class: 'tt-open' });
  r.pin = h('button', { type: 'button', class: 'small tt-pin', 'data-role': 'pin', 'aria-pressed': 'false' }, 'pin');
  r.state = h('span', { class: 'badge state', 'data-role': 'state' });
  const tr = h(
    'tr',
    { 'data-thread': '' },
    h('th', { scope: 'row', class: 'tt-name' }, r.open),
    h('td', null, r.state),
    td('style', 'tt-style'),
    td('busy', 'num'),
    td('wakeups', 'num'),
    td('items', 'num'),
    td('exit', 'tt-exit'),
    td('warn', 'tt-warn'),
    h('td', { class: 'tt-pin-col' }, r.pin),
  );
  r.tr = tr;
  return r;
}

function fillRow(r, m, index) {
  const s = m.snap;
  const tr = r.tr;
  if (tr.dataset.thread !== m.id) tr.dataset.thread = m.id;
  const pinned = state.view.pinned.has(m.id);
  const st = shownState(m);
  setClass(tr, 'tt-row st-' + st + (m.id === state.selectedId ? ' selected' : '') + (pinned ? ' pinned' : '') + (index % 2 ? ' odd' : ''));
  setText(r.open, [user(s.name || s.id), s.name && s.name !== s.id ? ` · ${s.id}` : '']);
  const label = plain(['Open ', user(s.name || s.id), ` (${s.id})`]);
  if (r.open.getAttribute('aria-label') !== label) r.open.setAttribute('aria-label', label);
  setText(r.state, st + (s.parked ? ' · parked' : ''));
  setClass(r.state, 'badge state st-' + st);
  setText(r.style, [s.run.style, ' · ', user(modeOf(s))]);
  const busy = busyOf(s);
  setText(r.busy, busy === null ? '–' : busy.toFixed(busy < 10 ? 1 : 0) + ' %');
  const wk = wakeupsOf(s);
  setText(r.wakeups, wk === null ? '–' : wk.toFixed(wk < 10 ? 1 : 0));
  const c = s.counts || {};
  setText(r.items, `${c.timers ?? 0} / ${c.sources ?? 0} / ${c.pendingPerforms ?? 0}`);
  const x = s.lastExit;
  setText(r.exit, x ? `${x.exitReason}${x.cause ? ' · ' + x.cause.code : ''}` : '–');
  const codes = activeCodes(s);
  setText(r.warn, codes.length ? codes.join(', ') : '');
  setClass(r.warn, codes.length ? 'tt-warn has-warn' : 'tt-warn');
  if (r.pin.getAttribute('aria-pressed') !== String(pinned)) {
    r.pin.setAttribute('aria-pressed', String(pinned));
    setText(r.pin, pinned ? 'pinned' : 'pin');
  }
  const pinLabel = plain([pinned ? 'Unpin ' : 'Pin ', user(s.name || s.id), ' (its timeline lane)']);
  if (r.pin.getAttribute('aria-label') !== pinLabel) r.pin.setAttribute('aria-label', pinLabel);
}

/** The server's summary when the stream sends one, else one counted here. */
function summary() {
  if (state.summary) return state.summary;
  const byState = {};
  const warningsByCode = {};
  const busy = [];
  let threads = 0;
  for (const m of state.threads.values()) {
    const s = m.snap;
    if (!s) continue;
    threads++;
    byState[s.state] = (byState[s.state] || 0) + 1;
    for (const code of activeCodes(s)) warningsByCode[code] = (warningsByCode[code] || 0) + 1;
    const b = busyOf(s);
    if (b !== null && s.state !== 'exited') busy.push({ id: m.id, busyPercent: b });
  }
  busy.sort((a, b) => b.busyPercent - a.busyPercent);
  return { threads, byState, warningsByCode, busiest: busy.slice(0, BUSIEST) };
}

function renderSummary() {
  const v = state.view;
  const sum = summary();
  const f = v.filter;
  const busiest = (sum.busiest || []).slice(0, BUSIEST).map((b) => {
    const m = state.threads.get(b.id);
    return { id: b.id, name: m && m.snap ? m.snap.name || b.id : b.id, busy: b.busyPercent };
  });
  const modes = new Set();
  const allCodes = new Set(Object.keys(sum.warningsByCode || {}));
  for (const m of state.threads.values()) {
    if (!m.snap) continue;
    modes.add(m.snap.run.mode);
    if (m.snap.currentMode) modes.add(m.snap.currentMode);
  }
  setChoices($('tt-mode'), [...modes].sort(), f.mode, 'any mode');
  setChoices($('tt-code'), [...allCodes].sort(), f.code, 'any warning');
  const key = JSON.stringify([sum.threads, sum.byState, sum.warningsByCode, busiest, f.state, f.code]);
  if (key === v.summaryKey) return;
  v.summaryKey = key;
  const states = Object.keys(sum.byState || {}).sort((a, b) => STATES.indexOf(a) - STATES.indexOf(b));
  const codes = Object.keys(sum.warningsByCode || {}).sort();
  const chip = (attrs, pressed, ...text) => h('button', { type: 'button', class: 'small chip', 'aria-pressed': pressed === null ? null : String(pressed), ...attrs }, ...text);
  $('tt-summary').replaceChildren(
    h('span', { class: 'sum-group' }, h('strong', null, plural(sum.threads ?? 0, 'thread')), ...states.map((st) => chip({ 'data-state': st, class: 'small chip st-' + st, title: `show only ${st} threads` }, f.state === st, `${st} ${sum.byState[st]}`))),
    h('span', { class: 'sum-group' }, h('span', { class: 'muted' }, 'warnings'), ...(codes.length ? codes.map((code) => chip({ 'data-code': code, class: 'small chip warn-chip', title: `show only threads with an active ${code} warning` }, f.code === code, `${code} ${sum.warningsByCode[code]}`)) : [h('span', { class: 'muted' }, 'none')])),
    h('span', { class: 'sum-group' }, h('span', { class: 'muted' }, 'busiest'), ...busiest.map((b) => chip({ 'data-open': b.id, title: plain(['open ', user(b.name), ` (${b.id})`]) }, null, user(b.name), ` ${b.busy.toFixed(b.busy < 10 ? 1 : 0)} %`))),
  );
}

/** A filter <select>'s options: "any" and the values (and the current choice, even if gone). */
function setChoices(sel, values, current, anyLabel) {
  if (current && !values.includes(current)) values.push(current);
  const key = JSON.stringify(values);
  if (sel.dataset.key === key) return;
  sel.dataset.key = key;
  sel.replaceChildren(option('', anyLabel), ...values.map((x) => option(x, user(x))));
  sel.value = current;
}
