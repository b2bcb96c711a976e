// sse.js — owns the Server-Sent Events wire format and one stream's life, with
// no dashboard knowledge. SSEParser turns text, however it is chunked, into
// events the way EventSource does (HTML "server-sent events": event/data/id/
// retry fields, multi-line data, comment lines such as heartbeats ignored,
// LF, CR or CRLF line ends). EventStream reads it through fetch(), so the
// request can carry headers (Authorization) instead of putting a token in the
// URL, and reconnects with exponential backoff until closed.

export class SSEParser {
  /** onEvent({type, data, lastEventId}) runs for each complete event. */
  constructor(onEvent, lastEventId = '') {
    this.onEvent = onEvent;
    this.lastEventId = lastEventId; // kept across reconnections, sent as Last-Event-ID
    this.retry = null; // ms, from the last valid retry: field
    this.idBuffer = lastEventId;
    this.type = '';
    this.data = '';
    this.carry = ''; // an unfinished line
    this.skipLF = false; // the last chunk ended in CR: a leading LF belongs to it
  }

  /** Feeds decoded text. */
  feed(chunk) {
    if (!chunk) return;
    let start = this.skipLF && chunk.charCodeAt(0) === 10 ? 1 : 0;
    this.skipLF = false;
    for (let i = start; i < chunk.length; i++) {
      const c = chunk.charCodeAt(i);
      if (c !== 10 && c !== 13) continue;
      this.line(this.carry + chunk.slice(start, i));
      this.carry = '';
      if (c === 13) {
        if (i + 1 === chunk.length) this.skipLF = true;
        else if (chunk.charCodeAt(i + 1) === 10) i++;
      }
      start = i + 1;
    }
    this.carry += chunk.slice(start);
  }

  /** The stream ended: an unfinished event is dropped (as EventSource does). */
  end() {
    this.carry = '';
    this.type = '';
    this.data = '';
    this.skipLF = false;
  }

  line(line) {
    if (line === '') return this.dispatch();
    if (line[0] === ':') return; // a comment: heartbeats
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? '' : line.slice(colon + 1);
    if (value[0] === ' ') value = value.slice(1);
    if (field === 'event') this.type = value;
    else if (field === 'data') this.data += value + '\n';
    else if (field === 'id' && !value.includes('\0')) this.idBuffer = value;
    else if (field === 'retry' && /^\d+$/.test(value)) this.retry = Number(value);
  }

  dispatch() {
    this.lastEventId = this.idBuffer;
    const { type, data } = this;
    this.type = '';
    this.data = '';
    if (data === '') return; // no data: nothing to dispatch
    this.onEvent({ type: type || 'message', data: data.slice(0, -1), lastEventId: this.lastEventId });
  }
}

/**
 * A reconnecting event stream over fetch.
 * hooks: headers() -> extra request headers; onConnecting(retries); onEvent(event);
 * onDown({status, delay, retries}) after a failure or an end, before the retry.
 */
export class EventStream {
  #controller = null;
  #timer = null;
  #retries = 0;
  #lastEventId = '';
  #retryMs = null;
  #parser = null;

  constructor(url, hooks, { baseDelay = 500, maxDelay = 10000 } = {}) {
    this.url = url;
    this.hooks = hooks;
    this.baseDelay = baseDelay;
    this.maxDelay = maxDelay;
  }

  get retries() {
    return this.#retries;
  }

  /** (Re)opens now, aborting a stream under way (and resuming after its last event id). */
  open() {
    if (this.#parser) this.#lastEventId = this.#parser.lastEventId;
    this.close();
    const controller = new AbortController();
    this.#controller = controller;
    this.hooks.onConnecting?.(this.#retries);
    this.#read(controller);
  }

  /** Aborts the stream and any retry; open() starts again. */
  close() {
    clearTimeout(this.#timer);
    this.#timer = null;
    this.#controller?.abort();
    this.#controller = null;
  }

  async #read(controller) {
    const live = () => this.#controller === controller;
    const parser = new SSEParser((event) => {
      if (!live()) return;
      this.#retries = 0; // events flow again
      this.hooks.onEvent(event);
    }, this.#lastEventId);
    this.#parser = parser;
    let status = 0;
    try {
      const res = await fetch(this.url, { headers: this.#headers(), cache: 'no-store', signal: controller.signal });
      status = res.status;
      const type = res.headers.get('Content-Type') || '';
      if (!res.ok || !/^text\/event-stream\b/i.test(type) || !res.body) throw new Error(`HTTP ${status} ${type}`);
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      for (;;) {
        const { value, done } = await reader.read();
        if (done || !live()) break;
        parser.feed(value);
      }
    } catch {
      /* a refused, failed or aborted stream: below */
    }
    parser.end();
    if (!live()) return; // closed or replaced (open() kept its last event id)
    this.#lastEventId = parser.lastEventId;
    if (parser.retry !== null) this.#retryMs = parser.retry;
    this.#controller = null;
    this.#retries++;
    const delay = Math.min(this.maxDelay, (this.#retryMs ?? this.baseDelay) * 2 ** Math.min(this.#retries - 1, 5));
    this.hooks.onDown?.({ status, delay, retries: this.#retries });
    this.#timer = setTimeout(() => this.open(), delay);
  }

  #headers() {
    const headers = { Accept: 'text/event-stream', ...(this.hooks.headers?.() || {}) };
    if (this.#lastEventId) headers['Last-Event-ID'] = this.#lastEventId;
    return headers;
  }
}
