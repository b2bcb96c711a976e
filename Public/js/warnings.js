// warnings.js — owns the Warnings panel (#warnings): every warning of every
// thread (GET /api/warnings at start and every few seconds, then `warning`
// events as they come), active ones first, each with its severity, thread,
// message and count. A card shows its own thread's active count (cards.js).

import { state, queueFrame } from './state.js';
import { api } from './api.js';
import { h, setText, user } from './dom.js';
import { fmtTime } from './format.js';

const keyOf = (w) => `${w.code}|${w.thread}|${w.subjects.join(',')}`;

/** A `warning` event: one warning appeared, changed or was resolved. */
export function warningEvent(w) {
  state.warnings.set(keyOf(w), w);
  const m = state.threads.get(w.thread);
  if (m && m.snap) {
    const list = (m.snap.warnings || []).filter((x) => keyOf(x) !== keyOf(w));
    m.snap = { ...m.snap, warnings: [...list, w] };
    state.dirty.add(m.id);
  }
  state.warningsDirty = true;
  queueFrame();
}

export async function loadWarnings() {
  try {
    const data = await api('GET', '/api/warnings');
    state.warnings.clear();
    for (const w of data.warnings || []) state.warnings.set(keyOf(w), w);
    state.warningsDirty = true;
    queueFrame();
  } catch {
    /* the connection badge shows problems */
  }
}

/** Redraws the panel when something changed (called from the frame render). */
export function renderWarnings() {
  if (!state.warningsDirty) return;
  state.warningsDirty = false;
  const all = [...state.warnings.values()].sort((a, b) => (b.active - a.active) || Date.parse(b.lastAt) - Date.parse(a.lastAt));
  const active = all.filter((w) => w.active).length;
  setText(document.getElementById('warnings-count'), all.length ? `${active} active, ${all.length} in all` : '');
  document.getElementById('no-warnings').hidden = all.length > 0;
  const list = document.getElementById('warnings-list');
  list.replaceChildren(
    ...all.slice(0, 50).map((w) =>
      h(
        'li',
        { class: 'warning' + (w.active ? ' active' : ' resolved'), 'data-code': w.code, 'data-thread': w.thread },
        h('span', { class: 'badge sev sev-' + w.severity }, w.severity),
        ' ',
        h('strong', { class: 'mono' }, w.code),
        ' ',
        h('span', { class: 'mono muted' }, w.thread),
        h('span', { class: 'warning-msg' }, user(w.message)),
        h('span', { class: 'muted small-text' }, `${w.active ? 'active' : 'resolved'} · seen ${w.count}× · last ${fmtTime(w.lastAt)}`),
      ),
    ),
  );
}
