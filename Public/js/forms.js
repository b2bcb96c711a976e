// forms.js — owns the generic form and button plumbing: bindForm (submit →
// handler → its result text or the server's error beside the button, the
// named field marked aria-invalid and focused), act (the same for a single
// button) and the readers that turn inputs into request bodies (num, str,
// clean). No dashboard knowledge.

import { setText, isRich, user } from './dom.js';

export const num = (input) => {
  if (!input || input.value.trim() === '') return undefined;
  const v = Number(input.value);
  return Number.isNaN(v) ? input.value : v; // let the server judge odd values
};

export const str = (input) => (input && input.value.trim() !== '' ? input.value.trim() : undefined);

/** Drops the undefined members (fields left empty). */
export function clean(obj) {
  for (const k of Object.keys(obj)) if (obj[k] === undefined) delete obj[k];
  return obj;
}

function fieldFor(form, field) {
  if (!field) return null;
  return form.querySelector(`[data-field="${CSS.escape(field)}"]`) || form.querySelector(`[name="${CSS.escape(field)}"]`);
}

function markInvalid(form, field) {
  const input = fieldFor(form, field);
  if (!input) return;
  input.setAttribute('aria-invalid', 'true');
  input.focus();
}

/** Wires a form: handler(form) returns a result text, rich (dom.js), or {text, bad}; errors appear beside the button (the message as user text: the server's may quote a name). */
export function bindForm(form, handler) {
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
      const text = out === null || out === undefined || isRich(out) ? out : out.text;
      setText(resultEl, text || 'done');
      resultEl.classList.toggle('bad', !!(out && out.bad));
    } catch (e) {
      setText(resultEl, '');
      setText(errorEl, user(e.message));
      markInvalid(form, e.field);
    } finally {
      if (button) button.disabled = false;
    }
  });
}

/** Runs fn for a button, showing its text (rich) or error in the given elements (resultEl may be null). */
export async function act(button, errorEl, resultEl, fn) {
  setText(errorEl, '');
  if (resultEl) setText(resultEl, '…');
  button.disabled = true;
  try {
    const text = await fn();
    if (resultEl) setText(resultEl, text || 'done');
  } catch (e) {
    if (resultEl) setText(resultEl, '');
    setText(errorEl, user(e.message));
  } finally {
    button.disabled = false;
  }
}
