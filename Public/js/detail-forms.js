// detail-forms.js — owns what the page's forms send: the Create-a-thread form
// and every control of the Detail panel (thread buttons, run, timer, source,
// port message, common mode, observer, perform, cancel, task-queue buttons,
// add task, execute). Each handler builds a request body from its inputs,
// calls the API for the selected thread and returns the text shown beside it.

import { state, applySnapshot, markDirty } from './state.js';
import { api, clientError, stopThread, wakeThread } from './api.js';
import { exitText, performText } from './format.js';
import { user, userList } from './dom.js';
import { bindForm, act, num, str, clean } from './forms.js';
import { pickedCall } from './pickers.js';
import { needThread, refreshDetailSoon, performOutcome } from './detail.js';
import { wirePredict, runBody, predictionForRun, showComparison } from './detail-predict.js';

const form = (id) => document.getElementById(id);

export function wireForms() {
  bindForm(form('create-form'), createThread);
  wirePredict();
  wireButtons('[data-d-action]', 'd-actions-error', 'd-actions-result', (b) => threadAction(b.dataset.dAction));
  wireButtons('[data-t-action]', 'tasks-row-error', null, (b) => taskQueueAction(b.dataset.tAction));
  const handlers = {
    'run-form': runOnce,
    'timer-form': addTimer,
    'source-form': addSource,
    'message-form': sendMessage,
    'common-form': addCommonMode,
    'observer-form': addObserver,
    'perform-form': perform,
    'cancel-perform-form': cancelDelayed,
    'task-form': addTask,
    'execute-form': executeTask,
  };
  for (const [id, handler] of Object.entries(handlers)) {
    bindForm(form(id), async (f) => {
      const out = await handler(f, f.elements);
      refreshDetailSoon();
      return out;
    });
  }
}

/** Buttons that each call fn(button), their outcome in the given elements, then refresh the panel. */
function wireButtons(selector, errorId, resultId, fn) {
  const errorEl = form(errorId);
  const resultEl = resultId && form(resultId);
  for (const b of document.querySelectorAll(selector)) {
    b.addEventListener('click', () => act(b, errorEl, resultEl, () => fn(b)).then(refreshDetailSoon));
  }
}

async function createThread(f) {
  const e = f.elements;
  const run = clean({ style: e.style.value, mode: str(e.mode), seconds: num(e.seconds), returnAfterSourceHandled: e.returnAfterSourceHandled.checked || undefined });
  const t = await api('POST', '/api/threads', clean({ name: str(e.name), keepAlive: e.keepAlive.value, run }));
  applySnapshot(t);
  return ['created ', user(t.name || t.id), ` (${t.id})`];
}

async function threadAction(what) {
  const base = needThread();
  if (what === 'stop') return stopThread(base);
  if (what === 'wakeup') return wakeThread(base);
  if (what === 'end') {
    const t = await api('DELETE', base);
    applySnapshot(t);
    return `thread ended (state ${t.state}, ${t.runs} runs)`;
  }
}

async function taskQueueAction(what) {
  const base = needThread() + '/tasks';
  if (what === 'clear') await api('DELETE', base);
  else await api('POST', `${base}/${what}`);
}

/** A run, with the prediction made for it just before (shown side by side once it returns). */
async function runOnce(f, e) {
  const base = needThread();
  const body = runBody(e);
  const predicted = await predictionForRun(base, body);
  const x = await api('POST', base + '/run', body);
  showComparison(predicted, x);
  return ['run → ', exitText(x)];
}

async function addTimer(f, e) {
  const body = clean({
    interval: num(e.interval),
    repeats: e.repeats.checked,
    delay: num(e.delay),
    tolerance: num(e.tolerance),
    mode: str(e.mode),
    maxFires: num(e.maxFires),
    action: pickedCall('timer-action') || undefined,
  });
  const t = await api('POST', needThread() + '/timers', body);
  return [`timer ${t.id} added (every ${t.interval} s in `, user(t.mode), ')'];
}

async function addSource(f, e) {
  const body = clean({ kind: e.kind.value, mode: str(e.mode), order: num(e.order), action: pickedCall('source-action') || undefined });
  const x = await api('POST', needThread() + '/sources', body);
  return [`source ${x.id} (${x.kind}) added in `, user(x.mode)];
}

async function sendMessage(f, e) {
  const sid = e.source.value;
  if (!sid) throw clientError('add a port source first');
  const x = await api('POST', needThread() + `/sources/${encodeURIComponent(sid)}/messages`, clean({ msgid: num(e.msgid), data: e.data.value }));
  return `message queued on ${x.id} (${x.queued} queued)`;
}

async function addCommonMode(f, e) {
  const m = await api('POST', needThread() + '/modes/common', clean({ mode: str(e.mode) }));
  return ['common set: ', userList(m.common)];
}

async function addObserver(f, e) {
  const acts = [...f.querySelectorAll('input[name=act]:checked')].map((x) => x.value);
  const body = clean({ activities: acts.length ? acts : 'all', repeats: e.repeats.checked, mode: str(e.mode), order: num(e.order) });
  const o = await api('POST', needThread() + '/observers', body);
  const m = state.threads.get(state.selectedId);
  if (m) {
    m.observed = true;
    markDirty(m.id);
  }
  return `observer ${o.id} added (${o.activities.join(', ')})`;
}

async function perform(f, e) {
  const call = pickedCall('perform');
  const wait = e.waitUntilDone.checked;
  const modes = str(e.modes) ? e.modes.value.split(',').map((x) => x.trim()).filter(Boolean) : undefined;
  // via: the selector path (the API's default, left out) or a block.
  const via = e.via && e.via.value === 'block' ? 'block' : undefined;
  const body = clean({ selector: call.selector, args: call.args, waitUntilDone: wait, modes, afterDelay: num(e.afterDelay), timeout: num(e.timeout), via });
  const r = await api('POST', needThread() + '/perform', body);
  if (wait) return { text: performText(r), bad: !r.ok };
  return performOutcome(r.performId, f.querySelector('.form-result')) || [`${r.performId} queued${r.via === 'block' ? ' as a block' : ''} (`, user(r.selector), ' in ', userList(r.modes), '); result appears when it runs'];
}

async function cancelDelayed(f, e) {
  const r = await api('DELETE', needThread() + '/perform?selector=' + encodeURIComponent(e.selector.value));
  return [`${r.cancelled} delayed `, user(r.selector), ' perform(s) cancelled'];
}

async function addTask(f, e) {
  const call = pickedCall('task');
  const q = await api('POST', needThread() + '/tasks', { id: e.id.value.trim(), selector: call.selector, args: call.args });
  return `queued: ${q.count} / ${q.capacity}`;
}

async function executeTask(f) {
  const r = await api('POST', needThread() + '/tasks/execute', pickedCall('execute'));
  return performOutcome(r.performId, f.querySelector('.form-result')) || `${r.performId} executing…`;
}
