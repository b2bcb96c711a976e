// runloopd dashboard: plain ES module, no build step, no external resources.
// Data flow: GET /api/events (SSE) drives live updates; GET /api/threads is
// polled once a second for states the stream does not announce (running /
// waiting); the detail panel re-fetches its thread at most ~3 times a second.
// Every DOM write happens in one requestAnimationFrame flush, in place.

const EXIT_REASONS = ['finished', 'stopped', 'timedOut', 'handledSource'];
const ACTIVITIES = ['entry', 'beforeTimers', 'beforeSources', 'beforeWaiting', 'afterWaiting', 'exit'];
const EVENT_NAMES = ['thread', 'run-exit', 'timer', 'perform', 'source', 'task', 'activity'];
const POLL_MS = 1000;
const DETAIL_MIN_MS = 350;
const DETAIL_IDLE_MS = 2000;
const RING_MAX = 4000;

// ---------------------------------------------------------------- helpers

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  if (attrs) {
    for (const [k, v] of Object.entries(attrs)) {
      if (v === undefined || v === null || v === false) continue;
      if (k === 'class') el.className = v;
      else if (k === 'text') el.textContent = v;
      else if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
      else el.setAttribute(k, v === true ? '' : v);
    }
  }
  for (const c of children) if (c !== null && c !== undefined) el.append(c);
  return el;
}

function setText(el, text) {
  text = String(text);
  if (el.textContent !== text) el.textContent = text;
}

function setClass(el, cls) {
  if (el.className !== cls) el.className = cls;
}

const fmtMs = (ms) => (ms === null || ms === undefined ? '–' : ms >= 1000 ? (ms / 1000).toFixed(2) + ' s' : ms.toFixed(1) + ' ms');
const fmtNum = (n) => (n === null || n === undefined ? '–' : String(n));
function fmtTime(iso) {
  if (!iso) return '–';
  const d = new Date(iso);
  if (isNaN(d)) return iso;
  return d.toLocaleTimeString([], { hour12: false }) + '.' + String(d.getMilliseconds()).padStart(3, '0');
}
function fmtIn(iso) {
  if (!iso) return '–';
  const delta = Date.parse(iso) - Date.now();
  if (delta < 0) return fmtTime(iso) + ' (due)';
  return fmtTime(iso) + (delta < 600000 ? ` (in ${fmtMs(delta)})` : '');
}
const jsonShort = (v) => {
  if (v === null || v === undefined) return '–';
  const s = JSON.stringify(v);
  return s.length > 60 ? s.slice(0, 57) + '…' : s;
};

// ---------------------------------------------------------------- API + token

class ApiError extends Error {
  constructor(status, code, message, field) {
    super(message);
    this.status = status;
    this.code = code;
    this.field = field;
  }
}

const TOKEN_KEY = 'runloopd.token';
let token = sessionStorage.getItem(TOKEN_KEY) || '';
let tokenPrompted = false;
let tokenAsk = null;

function askToken() {
  if (tokenAsk) return tokenAsk;
  const dialog = document.getElementById('token-dialog');
  const form = document.getElementById('token-form');
  tokenAsk = new Promise((resolve) => {
    const done = () => {
      dialog.removeEventListener('close', done);
      const value = dialog.returnValue === 'ok' ? form.elements.token.value.trim() : '';
      tokenAsk = null;
      if (value) {
        token = value;
        sessionStorage.setItem(TOKEN_KEY, token);
        reconnectSoon(0);
      }
      resolve(!!value);
    };
    dialog.addEventListener('close', done);
    form.elements.token.value = '';
    dialog.showModal();
  });
  return tokenAsk;
}

async function api(method, path, body) {
  for (let attempt = 0; ; attempt++) {
    const headers = { Accept: 'application/json' };
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    if (token) headers.Authorization = 'Bearer ' + token;
    let res;
    try {
      res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), cache: 'no-store' });
    } catch (e) {
      throw new ApiError(0, 'network', 'cannot reach the server (' + e.message + ')', null);
    }
    const text = await res.text();
    let data = null;
    try {
      data = text ? JSON.parse(text) : null;
    } catch {
      data = null;
    }
    if (res.status === 401 && attempt === 0) {
      if (tokenAsk) {
        if (await tokenAsk) continue; // someone is already asking: wait for the answer
      } else if (!tokenPrompted) {
        tokenPrompted = true; // ask once per page; the Token button asks again
        if (await askToken()) continue;
      }
    }
    if (!res.ok) {
      const e = data && data.error;
      let message = (e && e.message) || `HTTP ${res.status} ${res.statusText}`;
      if (res.status === 401) message += ' (set a token with the Token… button)';
      throw new ApiError(res.status, (e && e.code) || 'http_' + res.status, message, (e && e.field) || null);
    }
    return data;
  }
}

// ---------------------------------------------------------------- state

/** id -> { snap, lastRun, timerFires: Map, observed, ring: [], dirty, card } */
const threads = new Map();
let selectedId = null;
let selectors = [];
const dirty = new Set();
let frameQueued = false;
let countsDirty = false;

function model(id) {
  let m = threads.get(id);
  if (!m) {
    m = { id, snap: null, lastRun: 0, timerFires: new Map(), observed: false, showActs: true, ring: [], recentActs: [], card: null, hint: null };
    threads.set(id, m);
    countsDirty = true;
  }
  return m;
}

function applySnapshot(snap) {
  const m = model(snap.id);
  let old = m.snap;
  if (old && old.createdAt !== snap.createdAt) {
    // same id, another thread: the server restarted (ids restart at t1)
    old = null;
    m.lastRun = 0;
    m.timerFires.clear();
    m.ring.length = 0;
    m.observed = false;
  }
  const lastRun = snap.lastExit ? snap.lastExit.run : 0;
  if (old && lastRun < m.lastRun) {
    // An older snapshot than the events already seen: keep the counters.
    snap = { ...snap, runs: old.runs, exits: old.exits, lastExit: old.lastExit };
  } else {
    m.lastRun = lastRun;
  }
  if (old && old.state === 'exited') snap = { ...snap, state: 'exited' };
  m.snap = snap;
  m.hint = null;
  m.observed = !!(snap.counts && snap.counts.observers > 0);
  markDirty(snap.id);
}

function removeThread(id) {
  const m = threads.get(id);
  if (!m) return;
  if (m.card) m.card.el.remove();
  const lane = laneEls.get(id);
  if (lane) lane.box.remove();
  laneEls.delete(id);
  threads.delete(id);
  dirty.delete(id);
  countsDirty = true;
  if (selectedId === id) {
    selectedId = null;
    detailData = null;
    document.getElementById('detail-empty').hidden = false;
    document.getElementById('detail-body').hidden = true;
  }
  queueFrame();
}

function markDirty(id) {
  dirty.add(id);
  queueFrame();
}

function queueFrame() {
  if (frameQueued) return;
  frameQueued = true;
  requestAnimationFrame(flush);
}

// server clock -> page clock (smallest observed delivery delay)
let skew = null;
let skewSince = 0;
function eventTime(at) {
  const now = Date.now();
  if (!at) return now;
  const t = Date.parse(at);
  if (isNaN(t)) return now;
  const d = now - t;
  if (skew === null || d < skew || now - skewSince > 30000) {
    if (skew === null || now - skewSince > 30000) skewSince = now;
    skew = d;
  }
  return t + skew;
}

function pushRing(m, item) {
  m.ring.push(item);
  if (m.ring.length > RING_MAX) m.ring.splice(0, m.ring.length - RING_MAX * 0.75);
}

// ---------------------------------------------------------------- SSE

let es = null;
let retries = 0;
let reconnectTimer = null;

function setConn(kind, text) {
  const el = document.getElementById('conn');
  setClass(el, 'conn conn-' + kind);
  setText(document.getElementById('conn-text'), text);
}

function connect() {
  clearTimeout(reconnectTimer);
  reconnectTimer = null;
  if (es) es.close();
  setConn(retries ? 'reconnecting' : 'connecting', retries ? `reconnecting (attempt ${retries})…` : 'connecting…');
  // EventSource cannot set headers: the token travels as ?access_token=.
  const url = '/api/events' + (token ? '?access_token=' + encodeURIComponent(token) : '');
  const source = new EventSource(url);
  es = source;
  source.addEventListener('hello', (e) => {
    retries = 0;
    setConn('live', 'live');
    const data = JSON.parse(e.data);
    const known = new Set((data.threads || []).map((t) => t.id));
    for (const id of [...threads.keys()]) if (!known.has(id)) removeThread(id); // server restarted
    for (const snap of data.threads || []) applySnapshot(snap);
    refreshDetailSoon();
  });
  for (const name of EVENT_NAMES) {
    source.addEventListener(name, (e) => {
      let data;
      try {
        data = JSON.parse(e.data);
      } catch {
        return;
      }
      handleEvent(name, data);
    });
  }
  source.onerror = () => {
    if (es !== source) return;
    source.close();
    es = null;
    retries++;
    const delay = Math.min(10000, 500 * 2 ** Math.min(retries - 1, 5));
    setConn('offline', `disconnected: retrying in ${(delay / 1000).toFixed(1)} s`);
    reconnectSoon(delay);
    // A 401 is invisible to EventSource: a plain request shows it (and asks).
    api('GET', '/api/version').catch(() => {});
  };
}

function reconnectSoon(delay) {
  clearTimeout(reconnectTimer);
  reconnectTimer = setTimeout(connect, delay);
}

function handleEvent(name, d) {
  const id = d.thread;
  if (!id) return;
  const m = model(id);
  const now = Date.now();
  switch (name) {
    case 'thread':
      if (d.snapshot) applySnapshot(d.snapshot);
      if (d.change === 'exited' && m.snap) m.snap = { ...m.snap, state: 'exited' };
      pushRing(m, { t: now, kind: 'thread', label: d.change });
      break;
    case 'run-exit': {
      if (m.snap && d.run > m.lastRun) {
        const exits = { ...m.snap.exits };
        exits[d.exitReason] = (exits[d.exitReason] || 0) + 1;
        const lastExit = { exitReason: d.exitReason, code: d.code, mode: d.mode, durationMs: d.durationMs, at: d.at, run: d.run, depth: d.depth };
        m.snap = { ...m.snap, runs: m.snap.runs + 1, exits, lastExit };
        m.lastRun = d.run;
      }
      pushRing(m, { t: eventTime(d.at), kind: 'exit', reason: d.exitReason });
      break;
    }
    case 'timer':
      m.timerFires.set(d.timer, d.fires);
      pushRing(m, { t: now, kind: 'timer' });
      detailTimerEvent(id, d);
      break;
    case 'source':
      pushRing(m, { t: now, kind: 'source' });
      break;
    case 'perform':
      pushRing(m, { t: now, kind: 'perform', ok: d.ok });
      performEvent(d);
      break;
    case 'task':
      pushRing(m, { t: now, kind: 'task' });
      break;
    case 'activity': {
      m.observed = true;
      // Several observers report the same turn: keep one mark per (at, activity).
      const key = d.at + '|' + d.activity;
      if (m.recentActs.includes(key)) break;
      m.recentActs.push(key);
      if (m.recentActs.length > 24) m.recentActs.shift();
      pushRing(m, { t: eventTime(d.at), kind: 'activity', activity: d.activity });
      if (d.activity === 'beforeWaiting') m.hint = 'waiting';
      else if (d.activity === 'afterWaiting' || d.activity === 'entry') m.hint = 'running';
      else if (d.activity === 'exit') m.hint = null;
      break;
    }
  }
  markDirty(id);
  if (id === selectedId && name !== 'activity') refreshDetailSoon();
}

// ---------------------------------------------------------------- polling

let polling = false;
async function poll() {
  if (polling || document.hidden) return;
  polling = true;
  try {
    const data = await api('GET', '/api/threads');
    for (const snap of data.threads || []) applySnapshot(snap);
  } catch {
    /* connection state shows problems */
  } finally {
    polling = false;
  }
}

// ---------------------------------------------------------------- forms

function fieldFor(form, field) {
  if (!field) return null;
  return form.querySelector(`[data-field="${CSS.escape(field)}"]`) || form.querySelector(`[name="${CSS.escape(field)}"]`);
}

/** Wires a form: handler(form) returns a result text; errors appear beside the button. */
function bindForm(form, handler) {
  const errorEl = form.querySelector('.form-error');
  const resultEl = form.querySelector('.form-result');
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const button = form.querySelector('button[type=submit]');
    for (const bad of form.querySelectorAll('[aria-invalid]')) bad.removeAttribute('aria-invalid');
    setText(errorEl, '');
    setText(resultEl, button ? '…' : '');
    if (button) button.disabled = true;
    try {
      const out = await handler(form);
      const text = typeof out === 'object' && out !== null ? out.text : out;
      setText(resultEl, text || 'done');
      resultEl.classList.toggle('bad', !!(out && out.bad));
    } catch (e) {
      setText(resultEl, '');
      setText(errorEl, e.message);
      const input = fieldFor(form, e.field);
      if (input) {
        input.setAttribute('aria-invalid', 'true');
        input.focus();
      }
    } finally {
      if (button) button.disabled = false;
    }
  });
}

/** Runs an action for a button, showing the outcome in the given elements. */
async function act(button, errorEl, resultEl, fn) {
  setText(errorEl, '');
  if (resultEl) setText(resultEl, '…');
  button.disabled = true;
  try {
    const text = await fn();
    if (resultEl) setText(resultEl, text || 'done');
  } catch (e) {
    if (resultEl) setText(resultEl, '');
    setText(errorEl, e.message);
  } finally {
    button.disabled = false;
  }
}

const num = (input) => {
  if (!input || input.value.trim() === '') return undefined;
  const v = Number(input.value);
  return Number.isNaN(v) ? input.value : v; // let the server judge odd values
};
const str = (input) => (input && input.value.trim() !== '' ? input.value.trim() : undefined);
function clean(obj) {
  for (const k of Object.keys(obj)) if (obj[k] === undefined) delete obj[k];
  return obj;
}
const exitText = (x) => `${x.exitReason} (code ${x.code}, ${x.mode}, ${fmtMs(x.durationMs)})`;

// ---------------------------------------------------------------- selector pickers

const pickers = new Map();
let pickerSeq = 0;

/** A selector <select> plus an argument form generated from its schema. */
function makePicker(mount) {
  const optional = mount.dataset.optional === 'true';
  const uid = 'pk' + ++pickerSeq;
  const select = h('select', { id: uid + '-sel', 'data-field': 'selector' });
  const label = h('label', { for: uid + '-sel' }, optional ? 'Selector (optional)' : 'Selector');
  const summary = h('p', { class: 'muted small-text picker-summary' });
  const argsBox = h('div', { class: 'picker-args' });
  mount.append(h('div', { class: 'picker-row' }, label, select), summary, argsBox);
  const picker = { mount, select, argsBox, summary, optional, uid, inputs: [] };

  function fill() {
    select.replaceChildren();
    if (optional) select.append(h('option', { value: '' }, '(none)'));
    for (const s of selectors) select.append(h('option', { value: s.name }, s.name));
    build();
  }
  function build() {
    argsBox.replaceChildren();
    picker.inputs = [];
    const s = selectors.find((x) => x.name === select.value);
    setText(summary, s ? s.summary : optional ? 'No action: the item just fires.' : '');
    if (!s) return;
    const props = (s.args && s.args.properties) || {};
    const required = new Set((s.args && s.args.required) || []);
    for (const [name, schema] of Object.entries(props)) {
      const id = `${uid}-${name}`;
      let input;
      if (schema.type === 'boolean') {
        input = h('input', { type: 'checkbox', id });
        if (schema.default === true) input.checked = true;
        argsBox.append(h('label', { class: 'check', for: id }, input, ` ${name}`, h('span', { class: 'muted' }, ` – ${schema.description || ''}`)));
      } else {
        const attrs = { id, autocomplete: 'off' };
        if (schema.type === 'integer' || schema.type === 'number') {
          attrs.type = 'number';
          attrs.step = schema.type === 'integer' ? '1' : 'any';
          if (schema.minimum !== undefined) attrs.min = schema.minimum;
          if (schema.maximum !== undefined) attrs.max = schema.maximum;
        } else if (schema.maxLength !== undefined) attrs.maxlength = schema.maxLength;
        if (schema.default !== undefined) attrs.placeholder = String(schema.default);
        input = h('input', attrs);
        const hint = [schema.type, schema.minimum !== undefined ? `≥ ${schema.minimum}` : null, schema.maximum !== undefined && schema.type !== 'string' ? `≤ ${schema.maximum}` : null].filter(Boolean).join(', ');
        argsBox.append(
          h('label', { for: id }, `${name}${required.has(name) ? ' *' : ''} `, h('span', { class: 'muted' }, `(${hint}) ${schema.description || ''}`), input),
        );
      }
      input.dataset.field = 'args.' + name;
      picker.inputs.push({ name, schema, input });
    }
    if (s.args && s.args.additionalProperties) {
      const id = `${uid}-json`;
      const ta = h('textarea', { id, rows: '2', placeholder: '{"any": "value"}', 'data-field': 'args' });
      argsBox.append(h('label', { for: id }, 'Arguments (JSON object)', ta));
      picker.json = ta;
    } else picker.json = null;
  }
  select.addEventListener('change', build);
  picker.fill = fill;
  /** {selector, args} or null (optional picker left empty). */
  picker.call = () => {
    if (!select.value) return null;
    const args = {};
    if (picker.json && picker.json.value.trim()) {
      let extra;
      try {
        extra = JSON.parse(picker.json.value);
      } catch (e) {
        throw new ApiError(0, 'client', 'arguments are not valid JSON: ' + e.message, 'args');
      }
      if (!extra || typeof extra !== 'object' || Array.isArray(extra)) throw new ApiError(0, 'client', 'arguments must be a JSON object', 'args');
      Object.assign(args, extra);
    }
    for (const { name, schema, input } of picker.inputs) {
      if (schema.type === 'boolean') {
        if (input.checked || schema.default !== undefined) args[name] = input.checked;
      } else if (input.value.trim() !== '') {
        if (schema.type === 'integer' || schema.type === 'number') {
          const v = Number(input.value);
          args[name] = Number.isNaN(v) ? input.value : v;
        } else args[name] = input.value;
      }
    }
    return { selector: select.value, args };
  };
  fill();
  pickers.set(mount.dataset.picker, picker);
  return picker;
}

// ---------------------------------------------------------------- cards

const cardsEl = () => document.getElementById('cards');

function buildCard(m) {
  const id = m.id;
  const r = {};
  const mk = (key, tag, attrs, ...kids) => (r[key] = h(tag, attrs, ...kids));
  const exitCells = EXIT_REASONS.map((reason) =>
    h('div', { class: 'exit-count ex-' + reason }, h('dt', null, reason), (r['ex_' + reason] = h('dd', { 'data-exit': reason }, '0'))),
  );
  const runSeconds = h('input', { type: 'number', step: 'any', value: '1', id: `run-s-${id}`, class: 'run-seconds', 'aria-label': `Seconds for a run of ${id}` });
  const card = h(
    'article',
    { class: 'card', 'data-thread': id, 'aria-labelledby': `card-h-${id}` },
    h(
      'header',
      { class: 'card-head' },
      h('h3', { id: `card-h-${id}` }, mk('name', 'span', { class: 'card-name' }), ' ', h('span', { class: 'mono muted card-id' }, id)),
      mk('state', 'span', { class: 'badge state', 'data-role': 'state' }),
    ),
    mk('meta', 'p', { class: 'card-meta muted' }),
    h(
      'dl',
      { class: 'kv' },
      h('div', null, h('dt', null, 'mode'), mk('mode', 'dd', { class: 'mono' })),
      h('div', null, h('dt', null, 'runs'), mk('runs', 'dd', { 'data-role': 'runs' })),
      h('div', null, h('dt', null, 'timer fires'), mk('fires', 'dd', { 'data-role': 'fires' })),
    ),
    h('dl', { class: 'exits', 'aria-label': 'exit counts per reason' }, ...exitCells),
    h('p', { class: 'last-exit-row' }, 'last exit ', mk('lastExit', 'span', { class: 'badge exit', 'data-role': 'last-exit' })),
    mk('counts', 'p', { class: 'card-counts muted small-text' }),
    h(
      'div',
      { class: 'card-actions' },
      mk('details', 'button', { type: 'button', 'data-action': 'details', 'aria-controls': 'detail' }, 'Details'),
      mk('stop', 'button', { type: 'button', 'data-action': 'stop' }, 'Stop'),
      mk('wake', 'button', { type: 'button', 'data-action': 'wakeup' }, 'Wake'),
      mk('observe', 'button', { type: 'button', 'data-action': 'observe', 'aria-pressed': 'false', title: 'Add an observer for all activities (feeds the timeline lanes)' }, 'Observe'),
      mk('runBox', 'span', { class: 'run-box' }, h('label', { for: runSeconds.id, class: 'sr-only' }, 'seconds'), runSeconds, h('span', { class: 'unit', 'aria-hidden': 'true' }, 's'), (r.run = h('button', { type: 'button', 'data-action': 'run' }, 'Run'))),
    ),
    mk('error', 'p', { class: 'form-error card-error', role: 'alert' }),
    mk('result', 'p', { class: 'form-result card-result', role: 'status', 'data-role': 'result' }),
  );
  r.runSeconds = runSeconds;
  r.details.addEventListener('click', () => select(id, true));
  r.stop.addEventListener('click', () =>
    act(r.stop, r.error, r.result, async () => 'stop → ' + exitText(await api('POST', `/api/threads/${id}/stop`))),
  );
  r.wake.addEventListener('click', () =>
    act(r.wake, r.error, r.result, async () => {
      const res = await api('POST', `/api/threads/${id}/wakeup`);
      return `woken (state ${res.state})`;
    }),
  );
  r.observe.addEventListener('click', () =>
    act(r.observe, r.error, r.result, async () => {
      if (m.observed) {
        // Stop observing: invalidate every observer still valid on the thread.
        const list = await api('GET', `/api/threads/${id}/observers`);
        const valid = list.observers.filter((o) => o.valid);
        for (const o of valid) await api('DELETE', `/api/threads/${id}/observers/${encodeURIComponent(o.id)}`);
        m.observed = false;
        markDirty(id);
        if (id === selectedId) refreshDetailSoon();
        return `stopped observing (${valid.length} observer${valid.length === 1 ? '' : 's'} invalidated)`;
      }
      const o = await api('POST', `/api/threads/${id}/observers`, { activities: 'all' });
      m.observed = true;
      m.showActs = true;
      markDirty(id);
      if (id === selectedId) refreshDetailSoon();
      return `observer ${o.id} watches all activities`;
    }),
  );
  r.run.addEventListener('click', () =>
    act(r.run, r.error, r.result, async () => {
      const seconds = num(runSeconds);
      const x = await api('POST', `/api/threads/${id}/run`, clean({ seconds }));
      return 'run → ' + exitText(x);
    }),
  );
  runSeconds.addEventListener('keydown', (e) => {
    if (e.key === 'Enter') r.run.click();
  });
  m.card = { el: card, r };
  m.showActs = true;
  cardsEl().append(card);
  return m.card;
}

function updateCard(m) {
  const s = m.snap;
  if (!s) return;
  const { el, r } = m.card || buildCard(m);
  const state = s.state === 'exited' ? 'exited' : m.hint || s.state;
  setText(r.name, s.name || s.id);
  setText(r.state, state + (s.parked ? ' · parked' : '') + (s.ending && state !== 'exited' ? ' · ending' : ''));
  setClass(r.state, 'badge state st-' + state);
  setClass(el, 'card st-' + state + (m.id === selectedId ? ' selected' : ''));
  setText(r.meta, `${s.run.style} · keep-alive ${s.keepAlive} · ${s.run.seconds} s runs${s.run.returnAfterSourceHandled ? ' · returnAfterSourceHandled' : ''}`);
  setText(r.mode, s.currentMode || (state === 'exited' ? '–' : `(${s.run.mode})`));
  setText(r.runs, s.runs);
  let fires = 0;
  for (const f of m.timerFires.values()) fires += f;
  setText(r.fires, fires);
  for (const reason of EXIT_REASONS) setText(r['ex_' + reason], s.exits[reason] || 0);
  if (s.lastExit) {
    setText(r.lastExit, `${s.lastExit.exitReason} · ${fmtMs(s.lastExit.durationMs)}`);
    setClass(r.lastExit, 'badge exit ex-' + s.lastExit.exitReason);
    r.lastExit.title = `run ${s.lastExit.run} in ${s.lastExit.mode}, depth ${s.lastExit.depth}, ended ${fmtTime(s.lastExit.at)}`;
  } else {
    setText(r.lastExit, 'none yet');
    setClass(r.lastExit, 'badge exit ex-none');
  }
  const c = s.counts || {};
  setText(r.counts, `timers ${c.timers ?? 0} · sources ${c.sources ?? 0} · observers ${c.observers ?? 0} · tasks ${c.tasks ?? 0} · pending performs ${c.pendingPerforms ?? 0}`);
  r.runBox.hidden = s.run.style !== 'manual';
  const exited = state === 'exited';
  for (const b of [r.stop, r.wake, r.observe, r.run]) b.setAttribute('aria-disabled', exited ? 'true' : 'false');
  r.observe.setAttribute('aria-pressed', m.observed ? 'true' : 'false');
  setText(r.observe, m.observed ? 'Stop observing' : 'Observe');
}

// ---------------------------------------------------------------- flush

function flush() {
  frameQueued = false;
  for (const id of dirty) {
    const m = threads.get(id);
    if (m) updateCard(m);
  }
  dirty.clear();
  if (countsDirty) {
    countsDirty = false;
    const n = threads.size;
    setText(document.getElementById('thread-count'), n ? `${n} thread${n === 1 ? '' : 's'}` : '');
    document.getElementById('no-threads').hidden = n > 0;
  }
  if (detailData) {
    const now = performance.now();
    if (now - lastDetailRender >= 100) {
      lastDetailRender = now;
      renderDetail();
    } else queueFrame(); // at most ten detail renders a second
  }
}
let lastDetailRender = 0;

// ---------------------------------------------------------------- timeline

const LANES = [...ACTIVITIES, 'timer', 'source', 'perform', 'run exit'];
const LANE_H = 13;
const LABEL_W = 92;
const COLORS = {
  grid: '#d5dae1', text: '#3b4350', sleep: 'rgba(37, 99, 235, 0.13)', act: '#1f2937',
  timer: '#b45309', source: '#047857', perform: '#6d28d9', performFail: '#b91c1c', task: '#0e7490',
  finished: '#4b5563', stopped: '#c2410c', timedOut: '#7e22ce', handledSource: '#15803d',
};
let paused = false;
let pausedAt = 0;
let lastDraw = 0;
const laneEls = new Map();

function laneFor(m) {
  let l = laneEls.get(m.id);
  if (l) return l;
  const canvas = h('canvas', { role: 'img', 'aria-label': `Timeline of ${m.id}` });
  const title = h('h3', { class: 'lane-title' });
  const box = h('div', { class: 'lane', 'data-lane': m.id }, title, canvas);
  document.getElementById('lanes').append(box);
  l = { box, canvas, title };
  laneEls.set(m.id, l);
  return l;
}

function drawTimeline(ts) {
  requestAnimationFrame(drawTimeline);
  if (document.hidden || ts - lastDraw < 66) return; // ~15 frames a second is plenty
  lastDraw = ts;
  const windowS = Number(document.getElementById('tl-window').value);
  const now = paused ? pausedAt : Date.now();
  const from = now - windowS * 1000;
  const dpr = window.devicePixelRatio || 1;
  for (const m of threads.values()) {
    if (!m.snap) continue;
    const l = laneFor(m);
    const exited = m.snap.state === 'exited';
    const recent = m.ring.length && m.ring[m.ring.length - 1].t >= from;
    l.box.hidden = exited && !recent;
    if (l.box.hidden) continue;
    setText(l.title, `${m.snap.name || m.id} (${m.id})${m.observed ? '' : ' · no observer: activity lanes empty'}`);
    const cssW = l.box.clientWidth;
    const cssH = LANES.length * LANE_H + 16;
    if (l.canvas.width !== Math.round(cssW * dpr) || l.canvas.height !== Math.round(cssH * dpr)) {
      l.canvas.width = Math.round(cssW * dpr);
      l.canvas.height = Math.round(cssH * dpr);
      l.canvas.style.height = cssH + 'px';
    }
    const ctx = l.canvas.getContext('2d');
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, cssW, cssH);
    const plotW = Math.max(10, cssW - LABEL_W - 4);
    const x = (t) => LABEL_W + ((t - from) / (windowS * 1000)) * plotW;
    ctx.font = '10px system-ui, sans-serif';
    ctx.textBaseline = 'middle';
    LANES.forEach((name, i) => {
      const y = i * LANE_H;
      ctx.fillStyle = i % 2 ? '#f6f8fa' : '#ffffff';
      ctx.fillRect(LABEL_W, y, plotW, LANE_H);
      ctx.fillStyle = COLORS.text;
      ctx.fillText(name, 2, y + LANE_H / 2);
    });
    // seconds grid
    ctx.fillStyle = COLORS.grid;
    const axisY = LANES.length * LANE_H;
    for (let s = Math.ceil(from / 1000) * 1000; s <= now; s += 1000) ctx.fillRect(x(s), 0, 1, axisY);
    ctx.fillStyle = COLORS.text;
    ctx.fillText(`-${windowS} s`, LABEL_W, axisY + 8);
    ctx.textAlign = 'right';
    ctx.fillText(paused ? 'paused' : 'now', LABEL_W + plotW, axisY + 8);
    ctx.textAlign = 'left';
    const ring = m.ring;
    // first index inside the window (binary search; ring is nearly sorted)
    let lo = 0;
    let hi = ring.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (ring[mid].t < from - 2000) lo = mid + 1;
      else hi = mid;
    }
    const actH = ACTIVITIES.length * LANE_H;
    let sleepStart = null;
    for (let i = lo; i < ring.length; i++) {
      const e = ring[i];
      if (e.t > now) break;
      const ex = x(e.t);
      switch (e.kind) {
        case 'activity': {
          if (!m.showActs) break;
          const li = ACTIVITIES.indexOf(e.activity);
          if (e.activity === 'beforeWaiting') sleepStart = e.t;
          if (e.activity === 'afterWaiting' && sleepStart !== null) {
            ctx.fillStyle = COLORS.sleep;
            const sx = Math.max(LABEL_W, x(sleepStart));
            ctx.fillRect(sx, 0, ex - sx, actH);
            sleepStart = null;
          }
          if (ex < LABEL_W) break;
          ctx.fillStyle = COLORS.act;
          ctx.fillRect(ex, li * LANE_H + 1, 1.5, LANE_H - 2);
          break;
        }
        case 'timer':
          if (ex < LABEL_W) break;
          tri(ctx, ex, 6 * LANE_H, COLORS.timer);
          break;
        case 'source':
          if (ex < LABEL_W) break;
          diamond(ctx, ex, 7 * LANE_H, COLORS.source);
          break;
        case 'perform':
        case 'task':
          if (ex < LABEL_W) break;
          ctx.fillStyle = e.kind === 'task' ? COLORS.task : e.ok === false ? COLORS.performFail : COLORS.perform;
          ctx.beginPath();
          ctx.arc(ex, 8 * LANE_H + LANE_H / 2, 3.5, 0, Math.PI * 2);
          ctx.fill();
          break;
        case 'exit':
          if (ex < LABEL_W) break;
          ctx.fillStyle = COLORS[e.reason] || COLORS.finished;
          ctx.globalAlpha = 0.35;
          ctx.fillRect(ex, 0, 1, axisY);
          ctx.globalAlpha = 1;
          ctx.fillRect(ex - 1.5, 9 * LANE_H + 1, 3, LANE_H - 2);
          break;
        case 'thread':
          break;
      }
    }
    if (sleepStart !== null && m.showActs) {
      ctx.fillStyle = COLORS.sleep;
      const sx = Math.max(LABEL_W, x(sleepStart));
      ctx.fillRect(sx, 0, LABEL_W + plotW - sx, actH);
    }
  }
}

function tri(ctx, cx, y, color) {
  ctx.fillStyle = color;
  ctx.beginPath();
  ctx.moveTo(cx, y + 1.5);
  ctx.lineTo(cx + 3.5, y + LANE_H - 1.5);
  ctx.lineTo(cx - 3.5, y + LANE_H - 1.5);
  ctx.closePath();
  ctx.fill();
}
function diamond(ctx, cx, y, color) {
  const cy = y + LANE_H / 2;
  ctx.fillStyle = color;
  ctx.beginPath();
  ctx.moveTo(cx, cy - 4);
  ctx.lineTo(cx + 4, cy);
  ctx.lineTo(cx, cy + 4);
  ctx.lineTo(cx - 4, cy);
  ctx.closePath();
  ctx.fill();
}

// ---------------------------------------------------------------- detail panel

let detailData = null; // {id, thread, timers, sources, observers, modes, tasks, log}
let detailDirty = false;
let detailFetching = false;
let detailLast = 0;
let detailTimer = null;
const pendingPerformIds = new Map(); // performId -> result element

function select(id, focus) {
  if (selectedId !== id) {
    const prev = selectedId && threads.get(selectedId);
    selectedId = id;
    detailData = null;
    if (prev) markDirty(prev.id);
    markDirty(id);
    for (const el of document.querySelectorAll('#detail .form-error, #detail .form-result')) el.textContent = '';
    for (const el of document.querySelectorAll('#detail [aria-invalid]')) el.removeAttribute('aria-invalid');
    for (const tb of document.querySelectorAll('#detail tbody')) tb.replaceChildren();
    document.getElementById('detail-empty').hidden = true;
    document.getElementById('detail-body').hidden = false;
  }
  refreshDetailNow();
  if (focus) {
    const detail = document.getElementById('detail');
    detail.focus({ preventScroll: true });
    // side by side (wide): the panel is already in view; stacked (narrow): go there
    if (!matchMedia('(min-width: 1000px)').matches) detail.scrollIntoView({ block: 'start' });
  }
}

function refreshDetailSoon() {
  if (!selectedId || detailTimer) return;
  const wait = Math.max(0, DETAIL_MIN_MS - (Date.now() - detailLast));
  detailTimer = setTimeout(() => {
    detailTimer = null;
    refreshDetailNow();
  }, wait);
}

async function refreshDetailNow() {
  const id = selectedId;
  if (!id) return;
  if (detailFetching) {
    detailDirty = true;
    return;
  }
  detailFetching = true;
  detailLast = Date.now();
  try {
    const base = `/api/threads/${encodeURIComponent(id)}`;
    const [thread, timers, sources, observers, modes, tasks, log] = await Promise.all([
      api('GET', base),
      api('GET', base + '/timers'),
      api('GET', base + '/sources'),
      api('GET', base + '/observers'),
      api('GET', base + '/modes'),
      api('GET', base + '/tasks'),
      api('GET', base + '/log'),
    ]);
    if (id !== selectedId) return;
    detailData = { id, thread, timers: timers.timers, sources: sources.sources, observers: observers.observers, modes, tasks, log, at: Date.now() };
    applySnapshot(thread);
    for (const t of timers.timers) {
      const m = model(id);
      if ((m.timerFires.get(t.id) || 0) < t.fires) m.timerFires.set(t.id, t.fires);
    }
    queueFrame();
  } catch (e) {
    if (id === selectedId) setText(document.getElementById('detail-updated'), 'refresh failed: ' + e.message);
  } finally {
    detailFetching = false;
    if (detailDirty) {
      detailDirty = false;
      refreshDetailSoon();
    }
  }
}

function detailTimerEvent(id, d) {
  if (id !== selectedId || !detailData) return;
  const t = detailData.timers.find((x) => x.id === d.timer);
  if (t) {
    t.fires = Math.max(t.fires, d.fires);
    t.valid = d.valid;
    // the next fire is one interval on (CF keeps repeating timers on their schedule)
    if (t.repeats && d.valid) t.nextFireAt = new Date(Date.now() + t.interval * 1000 - (d.latenessMs || 0)).toISOString();
    if (t.lateness && d.latenessMs !== null) t.lateness.lastMs = d.latenessMs;
  }
}

const recentPerforms = new Map(); // performId -> result, for answers that beat their POST
function performEvent(d) {
  recentPerforms.set(d.performId, d);
  if (recentPerforms.size > 200) recentPerforms.delete(recentPerforms.keys().next().value);
  const el = pendingPerformIds.get(d.performId);
  if (!el) return;
  pendingPerformIds.delete(d.performId);
  setText(el, performText(d));
  el.classList.toggle('bad', !d.ok);
}

function performText(r) {
  return [
    `${r.selector} ${r.ok ? 'ok' : 'failed'} on ${r.thread} (${r.performId})`,
    `queued ${fmtMs(r.queuedMs)}, ran ${fmtMs(r.ranMs)}`,
    r.ok ? 'result: ' + JSON.stringify(r.result, null, 1) : `error: ${r.error && r.error.code}: ${r.error && r.error.message}`,
  ].join('\n');
}

/** Keeps rows of tbody in sync with items, keyed, updating cells in place. */
function syncRows(tbody, items, key, cellsOf, controlsOf) {
  const existing = new Map();
  for (const tr of tbody.rows) existing.set(tr.dataset.key, tr);
  const wanted = new Set(items.map(key));
  for (const [k, tr] of existing) if (!wanted.has(k)) tr.remove();
  let prev = null;
  for (const item of items) {
    const k = key(item);
    let tr = existing.get(k);
    const cells = cellsOf(item);
    if (!tr) {
      tr = h('tr', { 'data-key': k });
      cells.forEach((c, i) => tr.append(h(i === 0 ? 'th' : 'td', i === 0 ? { scope: 'row' } : null)));
      if (controlsOf) tr.append(h('td', { class: 'row-controls' }, ...controlsOf(item)));
    }
    cells.forEach((c, i) => {
      const cell = tr.cells[i];
      if (typeof c === 'object' && c !== null) {
        setText(cell, c.text);
        setClass(cell, c.cls || '');
      } else setText(cell, c);
    });
    tr.itemRef = item;
    const next = prev ? prev.nextSibling : tbody.firstChild;
    if (next !== tr) tbody.insertBefore(tr, next);
    prev = tr;
  }
}

function setFacts(dl, pairs) {
  const key = JSON.stringify(pairs);
  if (dl.dataset.key === key) return;
  dl.dataset.key = key;
  dl.replaceChildren(...pairs.map(([k, v]) => h('div', null, h('dt', null, k), h('dd', null, String(v)))));
}

function renderDetail() {
  const d = detailData;
  const s = threads.get(d.id)?.snap || d.thread;
  const id = d.id;
  setText(document.getElementById('d-name'), s.name || s.id);
  setText(document.getElementById('d-id'), s.id);
  const st = document.getElementById('d-state');
  setText(st, s.state);
  setClass(st, 'badge state st-' + s.state);
  setText(document.getElementById('detail-updated'), 'refreshed ' + fmtTime(new Date(d.at).toISOString()));
  setFacts(document.getElementById('d-facts'), [
    ['style', s.run.style],
    ['keep-alive', s.keepAlive],
    ['policy mode', s.run.mode],
    ['current mode', s.currentMode ?? '–'],
    ['seconds', s.run.seconds],
    ['returnAfterSource\u200BHandled', s.run.returnAfterSourceHandled],
    ['runs', s.runs],
    ['depth', s.depth],
    ['parked', s.parked],
    ['thread name', s.threadName + (s.threadNameTruncated ? ' (truncated)' : '')],
    ['last exit', s.lastExit ? exitText(s.lastExit) : '–'],
    ['created', fmtTime(s.createdAt)],
    ['ended', fmtTime(s.endedAt)],
  ]);

  const rowError = document.getElementById('timers-row-error');
  syncRows(
    document.querySelector('#timers-table tbody'),
    d.timers,
    (t) => t.id,
    (t) => [
      t.id,
      `${t.interval} s${t.repeats ? '' : ' once'}`,
      t.mode,
      { text: t.valid ? 'yes' : 'no', cls: t.valid ? '' : 'dim' },
      { text: `${t.fires}${t.maxFires ? ' / ' + t.maxFires : ''}`, cls: 'fires num' },
      t.valid ? fmtIn(t.nextFireAt) : '–',
      { text: `${fmtNum(t.lateness.p50Ms)} / ${fmtNum(t.lateness.p99Ms)} / ${fmtNum(t.lateness.maxMs)}`, cls: 'num' },
      t.action ? `${t.action.selector} ${jsonShort(t.action.args)}${t.lastActionError ? ' ⚠ ' + t.lastActionError : ''}` : '–',
    ],
    (t) => [
      h('button', {
        type: 'button', class: 'small', 'aria-label': `Invalidate timer ${t.id}`,
        onclick: (e) => act(e.currentTarget, rowError, null, async () => {
          await api('DELETE', `/api/threads/${id}/timers/${t.id}`);
          refreshDetailSoon();
        }),
      }, 'Invalidate'),
    ],
  );

  const srcError = document.getElementById('sources-row-error');
  const srcResult = document.getElementById('sources-row-result');
  syncRows(
    document.querySelector('#sources-table tbody'),
    d.sources,
    (x) => x.id,
    (x) => [
      x.id,
      x.kind,
      x.mode,
      x.order,
      { text: x.valid ? 'yes' : 'no', cls: x.valid ? '' : 'dim' },
      { text: x.fired + (x.signalled ? ' (signalled)' : ''), cls: 'num' },
      { text: x.scheduled, cls: 'num' },
      { text: x.cancelled, cls: 'num' },
      x.kind === 'port' ? `${x.received} in, ${x.queued} queued` : '–',
      x.action ? `${x.action.selector} ${jsonShort(x.action.args)}` : '–',
    ],
    (x) => {
      const out = [];
      if (x.kind === 'custom') {
        out.push(
          h('button', { type: 'button', class: 'small', 'aria-label': `Signal ${x.id} and wake the loop`, onclick: (e) => act(e.currentTarget, srcError, srcResult, async () => { await api('POST', `/api/threads/${id}/sources/${x.id}/signal`, { wakeup: true }); refreshDetailSoon(); return `${x.id} signalled + woken`; }) }, 'Signal + wake'),
          h('button', { type: 'button', class: 'small', 'aria-label': `Signal ${x.id} without waking`, onclick: (e) => act(e.currentTarget, srcError, srcResult, async () => { await api('POST', `/api/threads/${id}/sources/${x.id}/signal`, { wakeup: false }); refreshDetailSoon(); return `${x.id} signalled (no wake-up: it fires when something else wakes the loop)`; }) }, 'Signal only'),
        );
      }
      out.push(h('button', { type: 'button', class: 'small', 'aria-label': `Invalidate source ${x.id}`, onclick: (e) => act(e.currentTarget, srcError, srcResult, async () => { await api('DELETE', `/api/threads/${id}/sources/${x.id}`); refreshDetailSoon(); return `${x.id} invalidated`; }) }, 'Invalidate'));
      return out;
    },
  );
  // port-source picker of the message form
  const portSel = document.querySelector('[data-source-select="port"]');
  const ports = d.sources.filter((x) => x.kind === 'port' && x.valid).map((x) => x.id);
  if (portSel.dataset.key !== ports.join(',')) {
    const keep = portSel.value;
    portSel.dataset.key = ports.join(',');
    portSel.replaceChildren(...(ports.length ? ports.map((p) => h('option', { value: p }, p)) : [h('option', { value: '' }, '(no port source)')]));
    if (ports.includes(keep)) portSel.value = keep;
  }

  setFacts(document.getElementById('modes-facts'), [
    ['current', d.modes.current ?? '–'],
    ['all modes', d.modes.all.join(', ') || '–'],
    ['common set', d.modes.common.join(', ') || '–'],
  ]);
  const dl = document.getElementById('mode-names');
  const names = ['default', 'common', ...d.modes.all.filter((x) => x !== 'default' && x !== 'kCFRunLoopDefaultMode')];
  if (dl.dataset.key !== names.join(',')) {
    dl.dataset.key = names.join(',');
    dl.replaceChildren(...[...new Set(names)].map((n) => h('option', { value: n })));
  }

  syncRows(
    document.querySelector('#observers-table tbody'),
    d.observers,
    (o) => o.id,
    (o) => [o.id, o.activities.length === 6 ? 'all' : o.activities.join(', '), o.repeats ? 'yes' : 'no', o.mode, o.order, o.valid ? 'yes' : 'no', { text: o.fired, cls: 'num' }],
  );

  const pending = s.pendingPerforms || [];
  syncRows(
    document.querySelector('#pending-table tbody'),
    pending,
    (p) => p.performId,
    (p) => [p.performId, `${p.selector} ${jsonShort(p.args)}`, p.modes.join(', '), fmtTime(p.queuedAt), p.afterDelay ? p.afterDelay + ' s' : '–', p.fireAt ? fmtIn(p.fireAt) : '–'],
  );

  const q = d.tasks;
  const flag = document.getElementById('tasks-flag');
  setText(flag, q.suspended ? 'suspended' : 'active');
  setClass(flag, 'badge ' + (q.suspended ? 'ex-stopped' : 'ex-handledSource'));
  setFacts(document.getElementById('tasks-facts'), [
    ['queued', `${q.count} / ${q.capacity}`],
    ['done', q.done],
    ['failed', q.failed],
  ]);
  const taskError = document.getElementById('tasks-row-error');
  syncRows(
    document.querySelector('#tasks-table tbody'),
    q.tasks,
    (t) => t.id,
    (t) => [String(q.tasks.indexOf(t) + 1), t.id, t.selector, jsonShort(t.args), t.runs, t.running ? 'running' : '–'],
    (t) => [
      h('button', { type: 'button', class: 'small', 'aria-label': `Remove task ${t.id}`, onclick: (e) => act(e.currentTarget, taskError, null, async () => { await api('DELETE', `/api/threads/${id}/tasks/${encodeURIComponent(t.id)}`); refreshDetailSoon(); }) }, 'Remove'),
    ],
  );

  const counters = Object.entries(d.log.counters || {});
  setFacts(document.getElementById('counters-facts'), counters.length ? counters : [['counters', 'none']]);
  const logText = (d.log.lines || []).slice(-200).join('\n') || '(empty)';
  const logEl = document.getElementById('log-lines');
  if (logEl.textContent !== logText) {
    const atEnd = logEl.scrollTop + logEl.clientHeight >= logEl.scrollHeight - 4;
    logEl.textContent = logText;
    if (atEnd) logEl.scrollTop = logEl.scrollHeight;
  }
}

// ---------------------------------------------------------------- detail forms

function needThread() {
  if (!selectedId) throw new ApiError(0, 'client', 'pick a thread first', null);
  return `/api/threads/${encodeURIComponent(selectedId)}`;
}

function wireDetail() {
  const errEl = document.getElementById('d-actions-error');
  const resEl = document.getElementById('d-actions-result');
  for (const b of document.querySelectorAll('[data-d-action]')) {
    b.addEventListener('click', () =>
      act(b, errEl, resEl, async () => {
        const base = needThread();
        const what = b.dataset.dAction;
        if (what === 'stop') return 'stop → ' + exitText(await api('POST', base + '/stop'));
        if (what === 'wakeup') return `woken (state ${(await api('POST', base + '/wakeup')).state})`;
        if (what === 'end') {
          const t = await api('DELETE', base);
          applySnapshot(t);
          return `thread ended (state ${t.state}, ${t.runs} runs)`;
        }
      }).then(refreshDetailSoon),
    );
  }

  bindForm(document.getElementById('run-form'), async (f) => {
    const x = await api('POST', needThread() + '/run', clean({ mode: str(f.elements.mode), seconds: num(f.elements.seconds), returnAfterSourceHandled: f.elements.returnAfterSourceHandled.checked || undefined }));
    return 'run → ' + exitText(x);
  });

  bindForm(document.getElementById('timer-form'), async (f) => {
    const e = f.elements;
    const body = clean({
      interval: num(e.interval),
      repeats: e.repeats.checked,
      delay: num(e.delay),
      tolerance: num(e.tolerance),
      mode: str(e.mode),
      maxFires: num(e.maxFires),
      action: pickers.get('timer-action').call() || undefined,
    });
    const t = await api('POST', needThread() + '/timers', body);
    refreshDetailSoon();
    return `timer ${t.id} added (every ${t.interval} s in ${t.mode})`;
  });

  bindForm(document.getElementById('source-form'), async (f) => {
    const e = f.elements;
    const x = await api('POST', needThread() + '/sources', clean({ kind: e.kind.value, mode: str(e.mode), order: num(e.order), action: pickers.get('source-action').call() || undefined }));
    refreshDetailSoon();
    return `source ${x.id} (${x.kind}) added in ${x.mode}`;
  });

  bindForm(document.getElementById('message-form'), async (f) => {
    const e = f.elements;
    const sid = e.source.value;
    if (!sid) throw new ApiError(0, 'client', 'add a port source first', null);
    const x = await api('POST', needThread() + `/sources/${encodeURIComponent(sid)}/messages`, clean({ msgid: num(e.msgid), data: e.data.value }));
    refreshDetailSoon();
    return `message queued on ${x.id} (${x.queued} queued)`;
  });

  bindForm(document.getElementById('common-form'), async (f) => {
    const m = await api('POST', needThread() + '/modes/common', clean({ mode: str(f.elements.mode) }));
    refreshDetailSoon();
    return `common set: ${m.common.join(', ')}`;
  });

  bindForm(document.getElementById('observer-form'), async (f) => {
    const e = f.elements;
    const acts = [...f.querySelectorAll('input[name=act]:checked')].map((x) => x.value);
    const o = await api('POST', needThread() + '/observers', clean({ activities: acts.length ? acts : 'all', repeats: e.repeats.checked, mode: str(e.mode), order: num(e.order) }));
    const m = threads.get(selectedId);
    if (m) {
      m.observed = true;
      markDirty(m.id);
    }
    refreshDetailSoon();
    return `observer ${o.id} added (${o.activities.join(', ')})`;
  });

  bindForm(document.getElementById('perform-form'), async (f) => {
    const e = f.elements;
    const call = pickers.get('perform').call();
    const wait = e.waitUntilDone.checked;
    const modes = str(e.modes) ? e.modes.value.split(',').map((x) => x.trim()).filter(Boolean) : undefined;
    const body = clean({ selector: call.selector, args: call.args, waitUntilDone: wait, modes, afterDelay: num(e.afterDelay), timeout: num(e.timeout) });
    const r = await api('POST', needThread() + '/perform', body);
    refreshDetailSoon();
    if (wait) return { text: performText(r), bad: !r.ok };
    const done = recentPerforms.get(r.performId);
    if (done) return { text: performText(done), bad: !done.ok };
    pendingPerformIds.set(r.performId, f.querySelector('.form-result'));
    return `${r.performId} queued (${r.selector} in ${r.modes.join(', ')}); result appears when it runs`;
  });

  bindForm(document.getElementById('cancel-perform-form'), async (f) => {
    const sel = f.elements.selector.value;
    const r = await api('DELETE', needThread() + '/perform?selector=' + encodeURIComponent(sel));
    refreshDetailSoon();
    return `${r.cancelled} delayed ${r.selector} perform(s) cancelled`;
  });

  const taskErr = document.getElementById('tasks-row-error');
  for (const b of document.querySelectorAll('[data-t-action]')) {
    b.addEventListener('click', () =>
      act(b, taskErr, null, async () => {
        const base = needThread() + '/tasks';
        const what = b.dataset.tAction;
        if (what === 'clear') await api('DELETE', base);
        else await api('POST', `${base}/${what}`);
        refreshDetailSoon();
      }),
    );
  }

  bindForm(document.getElementById('task-form'), async (f) => {
    const call = pickers.get('task').call();
    const q = await api('POST', needThread() + '/tasks', { id: f.elements.id.value.trim(), selector: call.selector, args: call.args });
    refreshDetailSoon();
    return `queued: ${q.count} / ${q.capacity}`;
  });

  bindForm(document.getElementById('execute-form'), async (f) => {
    const call = pickers.get('execute').call();
    const r = await api('POST', needThread() + '/tasks/execute', call);
    refreshDetailSoon();
    const done = recentPerforms.get(r.performId);
    if (done) return { text: performText(done), bad: !done.ok };
    pendingPerformIds.set(r.performId, f.querySelector('.form-result'));
    return `${r.performId} executing…`;
  });
}

// ---------------------------------------------------------------- create form

function wireCreate() {
  bindForm(document.getElementById('create-form'), async (f) => {
    const e = f.elements;
    const run = clean({ style: e.style.value, mode: str(e.mode), seconds: num(e.seconds), returnAfterSourceHandled: e.returnAfterSourceHandled.checked || undefined });
    const t = await api('POST', '/api/threads', clean({ name: str(e.name), keepAlive: e.keepAlive.value, run }));
    applySnapshot(t);
    return `created ${t.name || t.id} (${t.id})`;
  });
}

// ---------------------------------------------------------------- boot

async function loadSelectors() {
  try {
    const data = await api('GET', '/api/selectors');
    selectors = (data.selectors || []).slice().sort((a, b) => a.name.localeCompare(b.name));
  } catch (e) {
    selectors = [];
    console.warn('selectors unavailable:', e.message);
  }
  for (const mount of document.querySelectorAll('.picker-mount')) {
    const p = pickers.get(mount.dataset.picker) || makePicker(mount);
    p.fill();
  }
  for (const sel of document.querySelectorAll('[data-selector-list]')) {
    sel.replaceChildren(...selectors.map((s) => h('option', { value: s.name }, s.name)));
  }
}

async function boot() {
  wireCreate();
  wireDetail();
  document.getElementById('token-button').addEventListener('click', async () => {
    if (await askToken()) {
      poll();
      loadSelectors();
    }
  });
  const pause = document.getElementById('tl-pause');
  pause.addEventListener('click', () => {
    paused = !paused;
    pausedAt = Date.now();
    pause.setAttribute('aria-pressed', String(paused));
    setText(pause, paused ? 'Resume' : 'Pause');
    lastDraw = 0;
  });
  document.getElementById('tl-window').addEventListener('change', () => (lastDraw = 0));
  countsDirty = true;
  queueFrame();
  await loadSelectors();
  api('GET', '/api/version')
    .then((v) => setText(document.getElementById('version'), v && v.version ? 'v' + v.version : ''))
    .catch(() => {});
  connect();
  poll();
  setInterval(poll, POLL_MS);
  setInterval(() => {
    if (selectedId && !document.hidden && Date.now() - detailLast > DETAIL_IDLE_MS) refreshDetailSoon();
  }, 500);
  document.addEventListener('visibilitychange', () => {
    if (!document.hidden) poll();
  });
  requestAnimationFrame(drawTimeline);
}

boot();
