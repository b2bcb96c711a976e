// history-markup.js — the History panel's markup (history.js owns its
// behaviour): the tabs Events, Threads and Fleet, the event filters (thread,
// instance, time range, page size, event types), the lists and the paging
// buttons, all built into the empty <section id="history"> of index.html.

import { h, render, user } from './dom.js';

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

/** Builds the panel's markup into `panel` (its children are replaced). */
export function buildHistoryPanel(panel) {
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

/** The store status line: kind, location, health and counts (GET /api/store). */
export function renderStoreStatus(line, s) {
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
