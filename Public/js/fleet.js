// fleet.js — owns the Fleet tab of the History panel (#history, history.js
// mounts it): the instances that share this runloopd's history store
// (GET /api/fleet), each with its health (up / stopped / lost), version,
// host, start and last heartbeat (as "12 s ago"), a link to its own
// dashboard (a new tab) and a History button that shows the events of that
// instance only. Also the plain helpers history.js shares: the fleet call and
// relative times. Items are keyed by instance id and updated in place, so a
// refresh every few seconds keeps the focus where it is.

import { api } from './api.js';
import { h, setText, setClass, user, plain } from './dom.js';
import { fmtTime, plural } from './format.js';

/** GET /api/fleet: {self, store, instances[]}. */
export const fetchFleet = () => api('GET', '/api/fleet');

/** "4 s ago", "12 min ago", "3 h ago", "2 d ago" (from now; "in …" when ahead). */
export function ago(iso, now = Date.now()) {
  const t = Date.parse(iso || '');
  if (isNaN(t)) return '–';
  const s = Math.round((now - t) / 1000);
  const a = Math.abs(s);
  const text = a < 90 ? `${a} s` : a < 5400 ? `${Math.round(a / 60)} min` : a < 172800 ? `${Math.round(a / 3600)} h` : `${Math.round(a / 86400)} d`;
  return s >= -1 ? (a <= 1 ? 'just now' : text + ' ago') : 'in ' + text;
}

/** A date and time: the clock time when it is today, else the day before it. */
export function fmtWhen(iso) {
  if (!iso) return '–';
  const d = new Date(iso);
  if (isNaN(d)) return user(iso);
  const today = new Date().toDateString() === d.toDateString();
  return (today ? '' : d.toLocaleDateString([], { month: 'short', day: 'numeric' }) + ' ') + fmtTime(iso);
}

const HEALTH_CLASS = { up: 'st-running', stopped: 'st-idle', lost: 'st-exited' };

/** What the store kind means for the fleet, in one sentence. */
export function fleetNote(fleet) {
  const n = (fleet.instances || []).length;
  if (fleet.store === 'none') return 'No history store (--no-store): a fleet of one — this instance, with nothing kept.';
  if (fleet.store === 'sqlite')
    return `SQLite store: ${plural(n, 'instance')} that used this data directory (one at a time). A fleet shares one PostgreSQL store (--store postgres://…); with SQLite it is a fleet of one.`;
  return `${plural(n, 'instance')} sharing the ${fleet.store} store: each one's history is readable from every dashboard.`;
}

/**
 * Shows fleet in the list ul (keyed by instance id: existing items are
 * updated in place). onHistory(id) runs when an instance's History button is
 * pressed.
 */
export function renderFleet(ul, fleet, onHistory) {
  const instances = [...(fleet.instances || [])].sort((a, b) => b.self - a.self || Date.parse(b.startedAt) - Date.parse(a.startedAt));
  const existing = new Map([...ul.children].map((li) => [li.dataset.instance, li]));
  const wanted = new Set(instances.map((i) => i.id));
  for (const [id, li] of existing) if (!wanted.has(id)) li.remove();
  let prev = null;
  for (const inst of instances) {
    const li = existing.get(inst.id) || fleetItem(inst, onHistory);
    updateItem(li, inst, fleet.store);
    const next = prev ? prev.nextSibling : ul.firstChild;
    if (next !== li) ul.insertBefore(li, next);
    prev = li;
  }
}

function fleetItem(inst, onHistory) {
  const field = (name) => h('dd', { 'data-field': name });
  const fact = (label, name) => h('div', null, h('dt', null, label), field(name));
  const link = h('a', { class: 'fleet-link', 'data-field': 'link', target: '_blank', rel: 'noopener noreferrer' });
  return h(
    'li',
    { class: 'fleet-item', 'data-instance': inst.id },
    h(
      'div',
      { class: 'fleet-head' },
      h('h3', { class: 'mono fleet-id' }, user(inst.id)),
      h('span', { class: 'badge', 'data-field': 'health' }),
      h('span', { class: 'badge fleet-self', 'data-field': 'self' }, 'this instance'),
    ),
    h(
      'dl',
      { class: 'facts fleet-facts' },
      fact('version', 'version'),
      fact('host · pid', 'host'),
      fact('boot (start #)', 'boot'),
      fact('started', 'startedAt'),
      fact('last heartbeat', 'heartbeatAt'),
      fact('stopped', 'stoppedAt'),
    ),
    h(
      'div',
      { class: 'btn-row fleet-actions' },
      link,
      h('button', { type: 'button', class: 'small', 'data-action': 'history', onclick: () => onHistory(inst.id) }, 'History', h('span', { class: 'sr-only' }, ' of ', user(inst.id))),
    ),
  );
}

function updateItem(li, inst, store) {
  const f = (name) => li.querySelector(`[data-field="${name}"]`);
  li.dataset.health = inst.health;
  li.dataset.self = String(!!inst.self);
  setClass(li, 'fleet-item fleet-' + inst.health + (inst.self ? ' fleet-is-self' : ''));
  const health = f('health');
  setText(health, inst.health);
  setClass(health, 'badge fleet-health ' + (HEALTH_CLASS[inst.health] || ''));
  f('self').hidden = !inst.self;
  setText(f('version'), inst.version ? user(inst.version) : '–');
  setText(f('host'), [inst.host ? user(inst.host) : '–', ` · ${inst.pid ?? '–'}`]);
  setText(f('boot'), inst.boot ? String(inst.boot) : '– (no store)');
  li.querySelector('[data-action="history"]').hidden = store === 'none';
  setText(f('startedAt'), fmtWhen(inst.startedAt));
  const beat = f('heartbeatAt');
  setText(beat, ago(inst.heartbeatAt));
  beat.title = plain(user(inst.heartbeatAt));
  setText(f('stoppedAt'), inst.stoppedAt ? fmtWhen(inst.stoppedAt) : '–');
  const link = f('link');
  const url = inst.dashboard || inst.url || '';
  if (/^https?:\/\//i.test(url)) {
    link.href = url;
    link.hidden = false;
    if (!link.firstChild || link.dataset.url !== url) {
      link.dataset.url = url;
      link.replaceChildren(inst.self ? 'Its dashboard (this page)' : 'Open its dashboard', h('span', { class: 'sr-only' }, ' ', user(url), ' (opens in a new tab)'));
    }
  } else link.hidden = true;
}
