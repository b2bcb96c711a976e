// dom.js — owns the generic DOM helpers: building elements (h), writing text
// and classes only when they change, key/value lists (setFacts) and keyed
// table rows updated in place (syncRows). No dashboard knowledge, no state.
// Nothing here writes a style attribute or HTML: the page's Content-Security-
// Policy (style-src 'self') would refuse inline styles, and h() says so.

/** h('div', {class, text, onclick, ...attrs}, ...children) */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') el.className = v;
    else if (k === 'text') el.textContent = v;
    else if (k === 'style') throw new Error('inline styles are refused by the page CSP: use a class');
    else if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? '' : v);
  }
  for (const c of children) if (c !== null && c !== undefined) el.append(c);
  return el;
}

export function setText(el, text) {
  text = String(text);
  if (el.textContent !== text) el.textContent = text;
}

export function setClass(el, cls) {
  if (el.className !== cls) el.className = cls;
}

/** A <dl> of [term, value] pairs, rebuilt only when the pairs change. */
export function setFacts(dl, pairs) {
  const key = JSON.stringify(pairs);
  if (dl.dataset.key === key) return;
  dl.dataset.key = key;
  dl.replaceChildren(...pairs.map(([k, v]) => h('div', null, h('dt', null, k), h('dd', null, String(v)))));
}

/** Replaces a <select>'s or <datalist>'s options when their key list changes; keeps the choice. */
export function setOptions(sel, values, empty) {
  const key = values.join(',');
  if (sel.dataset.key === key) return;
  const keep = sel.value;
  sel.dataset.key = key;
  const opts = values.length ? values.map((v) => h('option', { value: v }, sel.tagName === 'SELECT' ? v : null)) : empty ? [empty] : [];
  sel.replaceChildren(...opts);
  if (values.includes(keep)) sel.value = keep;
}

/**
 * Keeps the rows of tbody in sync with items, keyed, updating cells in place.
 * cellsOf(item) gives one entry a column: text, or {text, cls}; the first is a row header.
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
      if (typeof c === 'object' && c !== null) {
        setText(cell, c.text);
        setClass(cell, c.cls || '');
      } else setText(cell, c);
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
