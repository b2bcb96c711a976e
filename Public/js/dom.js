// dom.js — owns the generic DOM helpers: building elements (h), writing text
// and classes only when they change, key/value lists (setFacts), keyed table
// rows updated in place (syncRows), and how text from users is shown (user,
// below). No dashboard knowledge, no state.
// Nothing here writes a style attribute or HTML: the page's Content-Security-
// Policy (style-src 'self') would refuse inline styles, and h() says so.
//
// Text from users. Names and strings that come from outside the page —
// thread, timer, source, observer, task and mode names, selector arguments,
// the server's messages that may quote them, experiment texts, history rows,
// fleet instances — are marked with user(value). Wherever text is accepted
// below (h's children and `text`, setText, setFacts, syncRows) it may be
// "rich": a string, a number, a user(…) mark, or an array of those. Each
// user(…) piece is drawn in its own <bdi class="user"> (bidi isolation: a
// right-to-left override or RTL letters inside cannot reorder the text around
// it), and every control, format or line/paragraph separator character in it
// (C0, DEL, C1, the bidi controls U+200E U+200F U+202A–U+202E U+2066–U+2069
// U+061C, zero-width U+200B–U+200D, U+FEFF…) as a visible escape, `\u202E`, in
// a <span class="ctl">. The page's own strings are written as they are,
// except that such characters in them are shown the same way too (newline
// and tab excepted: the page lays out lines with them), so a user string a
// caller forgot to mark still cannot hide or reorder anything. Attributes
// (title, aria-label) and <option> labels hold no markup: plain() gives their
// text, with each user piece escaped and, when not plain ASCII, wrapped in
// FIRST STRONG ISOLATE … POP DIRECTIONAL ISOLATE.

/** Control (Cc), format (Cf) and line / paragraph separator (Zl, Zp) characters. */
const HIDDEN = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]/u;
/** The same in the page's own strings, where newline and tab lay out lines. */
const HIDDEN_OWN = /[^\n\t\P{Cc}]|[\p{Cf}\p{Zl}\p{Zp}]/u;
const FSI = '\u2068';
const PDI = '\u2069';

/** A piece of text from a user (see above); make one with user(). */
class UserText {
  constructor(value) {
    this.value = value;
    Object.freeze(this);
  }

  /** In a template string by mistake: still escaped (not isolated: a string has no element). */
  toString() {
    return escaped(this.value, HIDDEN);
  }
}

/** Marks a value (a name, a message, JSON text…) as text from a user; null and undefined as ''. */
export const user = (value) => new UserText(value === null || value === undefined ? '' : String(value));

/** user() of each value, separated by sep: a list of names as rich text. */
export const userList = (values, sep = ', ') => values.flatMap((v, i) => (i ? [sep, user(v)] : [user(v)]));

/** Whether v is rich text (rather than, say, an {text, cls} cell or a Node). */
export const isRich = (v) => typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean' || Array.isArray(v) || v instanceof UserText;

/** `\u202E` for one hidden character (`\u{E0041}` beyond the BMP). */
function escapeOf(ch) {
  const c = ch.codePointAt(0);
  return c > 0xffff ? `\\u{${c.toString(16).toUpperCase()}}` : '\\u' + c.toString(16).toUpperCase().padStart(4, '0');
}

/** Splits s into plain runs and single hidden characters (as their escape, flagged). */
function pieces(s, hidden) {
  const out = [];
  let run = '';
  for (const ch of s) {
    if (hidden.test(ch)) {
      if (run) out.push(run);
      run = '';
      out.push({ ctl: escapeOf(ch) });
    } else run += ch;
  }
  if (run) out.push(run);
  return out;
}

/** s with every hidden character as its escape. */
const escaped = (s, hidden) => (hidden.test(s) ? pieces(s, hidden).map((p) => (typeof p === 'string' ? p : p.ctl)).join('') : s);

/** Rich text as a flat list of strings and UserText marks (null and undefined left out; Nodes, which only render() takes, kept). */
function flat(rich, out = []) {
  if (Array.isArray(rich)) for (const r of rich) flat(r, out);
  else if (rich instanceof UserText || rich instanceof Node) out.push(rich);
  else if (rich !== null && rich !== undefined) out.push(String(rich));
  return out;
}

/** A key that changes whenever the rendering would. */
const keyOf = (parts) => (parts.every((p) => typeof p === 'string') ? 's' + parts.join('') : 'r' + JSON.stringify(parts.map((p) => (typeof p === 'string' ? p : [p.value]))));

/** The textContent the rendering of parts has. */
const textOf = (parts) => parts.map((p) => (typeof p === 'string' ? escaped(p, HIDDEN_OWN) : escaped(p.value, HIDDEN))).join('');

/** Text and <span class="ctl"> nodes for a string. */
function textNodes(s, hidden) {
  if (!hidden.test(s)) return [s];
  return pieces(s, hidden).map((p) => (typeof p === 'string' ? p : Object.assign(document.createElement('span'), { className: 'ctl', textContent: p.ctl })));
}

/** Nodes (and strings) for rich text: each user piece in its <bdi class="user">. */
function nodesOf(parts) {
  const out = [];
  for (const p of parts) {
    if (typeof p === 'string') out.push(...textNodes(p, HIDDEN_OWN));
    else if (p instanceof Node) out.push(p);
    else {
      const bdi = document.createElement('bdi');
      bdi.className = 'user';
      bdi.append(...textNodes(p.value, HIDDEN));
      out.push(bdi);
    }
  }
  return out;
}

/** Rich text as one string, for attributes and <option> labels (see above). */
export function plain(rich) {
  return flat(rich)
    .map((p) => {
      if (typeof p === 'string') return escaped(p, HIDDEN_OWN);
      const s = escaped(p.value, HIDDEN);
      return /^[\x20-\x7e]*$/.test(s) ? s : FSI + s + PDI;
    })
    .join('');
}

/** The DOM for rich text, which may hold elements here too: nodes and strings to append. */
export const render = (...rich) => nodesOf(flat(rich));

/** h('div', {class, text, onclick, ...attrs}, ...children): text and children may be rich text; a rich attribute value goes through plain(). */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') el.className = v;
    else if (k === 'text') el.append(...render(v));
    else if (k === 'style') throw new Error('inline styles are refused by the page CSP: use a class');
    else if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? '' : Array.isArray(v) || v instanceof UserText ? plain(v) : v);
  }
  el.append(...render(children));
  return el;
}

/** What each element's text was last set to by setText (its key). */
const shown = new WeakMap();

/** Sets el's content to rich text (no elements) unless it shows it already; true when it wrote. */
export function setText(el, rich) {
  const parts = flat(rich);
  const key = keyOf(parts);
  const text = textOf(parts);
  if (shown.get(el) === key && el.textContent === text) return false;
  shown.set(el, key);
  if (parts.length === 1 && typeof parts[0] === 'string' && text === parts[0]) el.textContent = text;
  else el.replaceChildren(...nodesOf(parts));
  return true;
}

export function setClass(el, cls) {
  if (el.className !== cls) el.className = cls;
}

/** A <dl> of [term, value] pairs (both rich text), rebuilt only when the pairs change. */
export function setFacts(dl, pairs) {
  const key = JSON.stringify(pairs.map(([k, v]) => [keyOf(flat(k)), keyOf(flat(v))]));
  if (dl.dataset.key === key) return;
  dl.dataset.key = key;
  dl.replaceChildren(...pairs.map(([k, v]) => h('div', null, h('dt', null, k), h('dd', null, v))));
}

/** An <option> of a <select>: its label (rich text) as plain(), the only text an option shows. */
export function option(value, label) {
  const o = h('option', { value });
  o.textContent = plain(label);
  return o;
}

/**
 * Replaces a <select>'s or <datalist>'s options when their key list changes;
 * keeps the choice. The values are the user's (mode names…): a select's
 * option shows plain(user(value)); a datalist suggestion gets that as its
 * label when it differs from the value.
 */
export function setOptions(sel, values, empty) {
  const key = JSON.stringify(values);
  if (sel.dataset.key === key) return;
  const keep = sel.value;
  sel.dataset.key = key;
  const datalist = (v) => {
    const label = plain(user(v));
    return h('option', { value: v, label: label === v ? null : label });
  };
  const opts = values.length ? values.map((v) => (sel.tagName === 'SELECT' ? option(v, user(v)) : datalist(v))) : empty ? [empty] : [];
  sel.replaceChildren(...opts);
  if (values.includes(keep)) sel.value = keep;
}

/**
 * Keeps the rows of tbody in sync with items, keyed, updating cells in place.
 * cellsOf(item) gives one entry a column: rich text, or {text, cls}; the first is a row header.
 * controlsOf(item), when given, gives the elements of a last controls cell (built once).
 */
export function syncRows(tbody, items, key, cellsOf, controlsOf) {
  const existing = new Map();
  for (const tr of tbody.rows) existing.set(tr.dataset.key, tr);
  const wanted = new Set(items.map(key));
  for (const [k, tr] of existing) if (!wanted.has(k)) tr.remove();
  let prev = null;
  for (const item of items) {
    const k = key(item);
    const cells = cellsOf(item);
    const tr = existing.get(k) || newRow(k, cells.length, controlsOf && controlsOf(item));
    cells.forEach((c, i) => {
      const cell = tr.cells[i];
      if (isRich(c) || c === null || c === undefined) setText(cell, c);
      else {
        setText(cell, c.text);
        setClass(cell, c.cls || '');
      }
    });
    const next = prev ? prev.nextSibling : tbody.firstChild;
    if (next !== tr) tbody.insertBefore(tr, next);
    prev = tr;
  }
}

function newRow(key, columns, controls) {
  const tr = h('tr', { 'data-key': key });
  for (let i = 0; i < columns; i++) tr.append(h(i === 0 ? 'th' : 'td', i === 0 ? { scope: 'row' } : null));
  if (controls) tr.append(h('td', { class: 'row-controls' }, ...controls));
  return tr;
}
