// pickers.js — owns the selector pickers: a <select> of the selectors from
// GET /api/selectors plus an argument form generated from the chosen one's
// JSON schema, mounted in each fieldset.picker-mount (state.pickers by its
// data-picker name), and the plain selector lists ([data-selector-list]).

import { state } from './state.js';
import { api, clientError } from './api.js';
import { h, setText } from './dom.js';

/** Reloads the selector list and refills every picker and list. */
export async function loadSelectors() {
  try {
    const data = await api('GET', '/api/selectors');
    state.selectors = (data.selectors || []).slice().sort((a, b) => a.name.localeCompare(b.name));
  } catch (e) {
    state.selectors = [];
    console.warn('selectors unavailable:', e.message);
  }
  for (const mount of document.querySelectorAll('.picker-mount')) {
    const p = state.pickers.get(mount.dataset.picker) || makePicker(mount);
    p.fill();
  }
  for (const sel of document.querySelectorAll('[data-selector-list]')) {
    sel.replaceChildren(...state.selectors.map((s) => h('option', { value: s.name }, s.name)));
  }
}

/** {selector, args} of the named picker, or null when an optional one is left empty. */
export const pickedCall = (name) => state.pickers.get(name).call();

function makePicker(mount) {
  const optional = mount.dataset.optional === 'true';
  const uid = 'pk' + ++state.pickerSeq;
  const select = h('select', { id: uid + '-sel', 'data-field': 'selector' });
  const label = h('label', { for: uid + '-sel' }, optional ? 'Selector (optional)' : 'Selector');
  const summary = h('p', { class: 'muted small-text picker-summary' });
  const argsBox = h('div', { class: 'picker-args' });
  mount.append(h('div', { class: 'picker-row' }, label, select), summary, argsBox);
  const picker = { select, argsBox, summary, optional, uid, inputs: [], json: null };
  picker.fill = () => {
    select.replaceChildren();
    if (optional) select.append(h('option', { value: '' }, '(none)'));
    for (const s of state.selectors) select.append(h('option', { value: s.name }, s.name));
    buildArgs(picker);
  };
  picker.call = () => readCall(picker);
  select.addEventListener('change', () => buildArgs(picker));
  state.pickers.set(mount.dataset.picker, picker);
  return picker;
}

/** One input per argument of the chosen selector (a JSON box when it takes any). */
function buildArgs(picker) {
  const { select, argsBox, summary, optional, uid } = picker;
  argsBox.replaceChildren();
  picker.inputs = [];
  picker.json = null;
  const s = state.selectors.find((x) => x.name === select.value);
  setText(summary, s ? s.summary : optional ? 'No action: the item just fires.' : '');
  if (!s) return;
  const props = (s.args && s.args.properties) || {};
  const required = new Set((s.args && s.args.required) || []);
  for (const [name, schema] of Object.entries(props)) {
    const id = `${uid}-${name}`;
    const { input, label } = schema.type === 'boolean' ? booleanArg(id, name, schema) : valueArg(id, name, schema, required.has(name));
    input.dataset.field = 'args.' + name;
    argsBox.append(label);
    picker.inputs.push({ name, schema, input });
  }
  if (s.args && s.args.additionalProperties) {
    const id = `${uid}-json`;
    picker.json = h('textarea', { id, rows: '2', placeholder: '{"any": "value"}', 'data-field': 'args' });
    argsBox.append(h('label', { for: id }, 'Arguments (JSON object)', picker.json));
  }
}

function booleanArg(id, name, schema) {
  const input = h('input', { type: 'checkbox', id });
  if (schema.default === true) input.checked = true;
  const label = h('label', { class: 'check', for: id }, input, ` ${name}`, h('span', { class: 'muted' }, ` – ${schema.description || ''}`));
  return { input, label };
}

function valueArg(id, name, schema, required) {
  const numeric = schema.type === 'integer' || schema.type === 'number';
  const attrs = { id, autocomplete: 'off' };
  if (numeric) {
    attrs.type = 'number';
    attrs.step = schema.type === 'integer' ? '1' : 'any';
    if (schema.minimum !== undefined) attrs.min = schema.minimum;
    if (schema.maximum !== undefined) attrs.max = schema.maximum;
  } else if (schema.maxLength !== undefined) attrs.maxlength = schema.maxLength;
  if (schema.default !== undefined) attrs.placeholder = String(schema.default);
  const input = h('input', attrs);
  const bounds = [
    schema.type,
    schema.minimum !== undefined ? `≥ ${schema.minimum}` : null,
    schema.maximum !== undefined && schema.type !== 'string' ? `≤ ${schema.maximum}` : null,
  ].filter(Boolean).join(', ');
  const label = h('label', { for: id }, `${name}${required ? ' *' : ''} `, h('span', { class: 'muted' }, `(${bounds}) ${schema.description || ''}`), input);
  return { input, label };
}

function readCall(picker) {
  if (!picker.select.value) return null;
  const args = {};
  if (picker.json && picker.json.value.trim()) Object.assign(args, readJSONArgs(picker.json.value));
  for (const { name, schema, input } of picker.inputs) {
    if (schema.type === 'boolean') {
      if (input.checked || schema.default !== undefined) args[name] = input.checked;
    } else if (input.value.trim() !== '') {
      const numeric = schema.type === 'integer' || schema.type === 'number';
      const v = numeric ? Number(input.value) : input.value;
      args[name] = Number.isNaN(v) ? input.value : v;
    }
  }
  return { selector: picker.select.value, args };
}

function readJSONArgs(text) {
  let extra;
  try {
    extra = JSON.parse(text);
  } catch (e) {
    throw clientError('arguments are not valid JSON: ' + e.message, 'args');
  }
  if (!extra || typeof extra !== 'object' || Array.isArray(extra)) throw clientError('arguments must be a JSON object', 'args');
  return extra;
}
