// api.js — owns talking to the JSON API under /api: one fetch wrapper (JSON in
// and out, failures as ApiError with the server's code, message and field),
// the bearer token (state.auth: kept in sessionStorage for this tab only and
// sent as an Authorization header, never in a URL), the token dialog shown
// once per page on a 401, and the two thread calls cards and detail share.

import { state } from './state.js';
import { exitText } from './format.js';

const TOKEN_KEY = 'runloopd.token';
state.auth.token = sessionStorage.getItem(TOKEN_KEY) || '';

export class ApiError extends Error {
  constructor(status, code, message, field) {
    super(message);
    this.status = status;
    this.code = code;
    this.field = field;
  }
}

/** A client-side refusal shown like a server error (field names the input). */
export const clientError = (message, field = null) => new ApiError(0, 'client', message, field);

/** Request headers with the token, when there is one. */
export function authHeaders(headers = {}) {
  return state.auth.token ? { ...headers, Authorization: 'Bearer ' + state.auth.token } : headers;
}

/** fn runs whenever a new token is entered (the event stream reconnects with it). */
export function onTokenChange(fn) {
  state.auth.listeners.push(fn);
}

/** Shows the token dialog; resolves true when a token was entered. */
export function askToken() {
  const auth = state.auth;
  if (auth.asking) return auth.asking;
  const dialog = document.getElementById('token-dialog');
  const form = document.getElementById('token-form');
  auth.asking = new Promise((resolve) => {
    const done = () => {
      dialog.removeEventListener('close', done);
      const value = dialog.returnValue === 'ok' ? form.elements.token.value.trim() : '';
      auth.asking = null;
      if (value) setToken(value);
      resolve(!!value);
    };
    dialog.addEventListener('close', done);
    form.elements.token.value = '';
    dialog.showModal();
  });
  return auth.asking;
}

function setToken(value) {
  state.auth.token = value;
  sessionStorage.setItem(TOKEN_KEY, value);
  for (const fn of state.auth.listeners) fn();
}

/** After a first 401: wait for a dialog already open, or ask once per page (the Token button asks again). */
async function tokenArrived() {
  if (state.auth.asking) return state.auth.asking;
  if (state.auth.prompted) return false;
  state.auth.prompted = true;
  return askToken();
}

/**
 * One exchange with the API, whatever its status: the JSON headers and the
 * token, the token dialog on a first 401 (then once more), and the answer as
 * {res, json} (json null when the body is empty or not JSON). Throws only
 * when the server cannot be reached. api() and the Experiments panel use it.
 */
export async function request(method, path, body) {
  for (let attempt = 0; ; attempt++) {
    const headers = authHeaders({ Accept: 'application/json', ...(body === undefined ? {} : { 'Content-Type': 'application/json' }) });
    let res;
    try {
      res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), cache: 'no-store' });
    } catch (e) {
      throw new ApiError(0, 'network', 'cannot reach the server (' + e.message + ')', null);
    }
    const json = parseJSON(await res.text());
    if (res.status === 401 && attempt === 0 && (await tokenArrived())) continue;
    return { res, json };
  }
}

export async function api(method, path, body) {
  const { res, json } = await request(method, path, body);
  if (!res.ok) throw errorOf(res, json);
  return json;
}

function parseJSON(text) {
  try {
    return text ? JSON.parse(text) : null;
  } catch {
    return null;
  }
}

function errorOf(res, data) {
  const e = data && data.error;
  let message = (e && e.message) || `HTTP ${res.status} ${res.statusText}`;
  if (res.status === 401) message += ' (set a token with the Token… button)';
  return new ApiError(res.status, (e && e.code) || 'http_' + res.status, message, (e && e.field) || null);
}

// ---- thread calls shared by the cards and the detail panel (base: /api/threads/<id>)

export const stopThread = async (base) => ['stop → ', exitText(await api('POST', base + '/stop'))];

export const wakeThread = async (base) => `woken (state ${(await api('POST', base + '/wakeup')).state})`;

export const threadPath = (id) => `/api/threads/${encodeURIComponent(id)}`;
