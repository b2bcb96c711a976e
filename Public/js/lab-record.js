// lab-record.js — the Experiments panel's "Record a session": from the first
// press, every POST and DELETE the server answers (its journal) is kept; the
// second press downloads them as an experiment file that
// `runloopd play FILE --diff` replays. lab.js wires the button.

import { state } from './state.js';
import { api } from './api.js';
import { setText, user } from './dom.js';
import { plural } from './format.js';

const $ = (id) => document.getElementById(id);

const JOURNAL_LIMIT = 10000; // GET /api/journal's largest limit

export async function startRecording() {
  const button = $('lab-record');
  button.setAttribute('aria-disabled', 'true');
  try {
    const doc = await api('GET', '/api/journal?limit=1&since=' + Number.MAX_SAFE_INTEGER);
    state.lab.recordFrom = Number(doc.journalSeq) || 0;
    button.setAttribute('aria-pressed', 'true');
    setText(button, 'Stop and download');
    setText($('lab-record-status'), 'Recording: every POST and DELETE this server answers from now on (yours and any other client’s).');
  } catch (e) {
    setText($('lab-record-status'), ['Cannot start recording: ', user(e.message)]);
  } finally {
    button.setAttribute('aria-disabled', 'false');
  }
}

export async function stopRecording() {
  const button = $('lab-record');
  button.setAttribute('aria-disabled', 'true');
  try {
    const doc = await api('GET', `/api/journal?limit=${JOURNAL_LIMIT}&since=${state.lab.recordFrom}`);
    const steps = (doc.steps || []).length;
    state.lab.recordFrom = null;
    button.setAttribute('aria-pressed', 'false');
    setText(button, 'Record a session');
    if (state.lab.recordUrl) URL.revokeObjectURL(state.lab.recordUrl);
    state.lab.recordUrl = URL.createObjectURL(new Blob([JSON.stringify(doc, null, 2) + '\n'], { type: 'application/json' }));
    const name = `runloopd-session-${new Date().toISOString().replace(/[:.]/g, '-')}.json`;
    const link = $('lab-record-download');
    link.href = state.lab.recordUrl;
    link.download = name;
    link.dataset.steps = String(steps);
    link.hidden = false;
    link.click();
    // The journal's bounds (--journal-size, --journal-bytes) may have dropped the session's first requests.
    const missed = Number(doc.missed) || 0;
    const lost = missed ? ` The first ${plural(missed, 'request')} of the session had already left the journal (its --journal-size and --journal-bytes bounds): the file does not hold them.` : '';
    setText($('lab-record-status'), `Recorded ${plural(steps, 'request')}, downloaded as ${name}. Replay it with: runloopd play ${name} --diff.${lost}`);
  } catch (e) {
    setText($('lab-record-status'), ['Cannot export the recording (still recording): ', user(e.message)]);
  } finally {
    button.setAttribute('aria-disabled', 'false');
  }
}
