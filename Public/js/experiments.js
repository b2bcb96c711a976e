// experiments.js — owns the rules of playing an experiment (the file format of
// docs/experiments.md, section C of the lab contract), in the page: reading a
// step, JSON paths (`a.b.0.c`, `list[key=value].field`), the expectation
// operators, `${var}` substitution, JSON text as the server writes it, and
// playing one step (repeats for `until`), and the rule that a step's path
// is an API path of this server. A mirror of the server's
// Sources/RunLoopServer/Lab/Experiment.swift (ExperimentPaths) and Player.swift:
// keep the two in step. No DOM, no state: the sender and the page's origin
// are passed in.

/** The steps of an experiment document, normalised like Experiment.step(). */
export function stepsOf(doc) {
  return (Array.isArray(doc && doc.steps) ? doc.steps : []).map((item, index) => {
    const s = isObject(item) ? item : {};
    const request = isObject(s.request) ? s.request : {};
    const expect = isObject(s.expect) ? s.expect : {};
    const capture = isObject(s.capture) ? s.capture : {};
    const json = isObject(expect.json) ? expect.json : {};
    const timeout = isObject(s.until) && typeof s.until.timeout === 'number' ? s.until.timeout : null;
    return {
      number: index + 1,
      say: typeof s.say === 'string' ? s.say : '',
      // what happens: shown once the step has answered (after a guess)
      then: typeof s.then === 'string' ? s.then : '',
      // played with the next step as one: Step never pauses between them
      withNext: s.withNext === true && index + 1 < doc.steps.length,
      method: (typeof request.method === 'string' ? request.method : 'GET').toUpperCase(),
      path: typeof request.path === 'string' ? request.path : '',
      body: Object.hasOwn(request, 'body') ? request.body : undefined,
      capture: sortedKeys(capture).filter((k) => typeof capture[k] === 'string').map((k) => [k, capture[k]]),
      status: Number.isInteger(expect.status) ? expect.status : null,
      json: sortedKeys(json).map((k) => [k, json[k]]),
      until: timeout,
      // a recorded session's pause before this step, and a step sent without waiting for its answer
      wait: typeof s.wait === 'number' && s.wait >= 0 && s.wait <= 60 ? s.wait : null,
      background: s.background === true && timeout === null,
    };
  });
}

/** The `${name}`s a step uses (path, body, expectations), as Player.names(in:). */
export function namesIn(step) {
  const text = step.path + JSON.stringify(step.body === undefined ? null : step.body) + JSON.stringify(step.json);
  return new Set([...text.matchAll(/\$\{([^}]*)\}/g)].map((m) => m[1]));
}

/** The thread a `POST /api/threads/{id}/run` step runs (variables filled in), else null. */
export function runThreadOf(step, vars) {
  if (step.method !== 'POST') return null;
  const m = /^\/api\/threads\/([^/?#]+)\/run(?:[?#]|$)/.exec(substitute(step.path, vars));
  return m ? m[1] : null;
}

// ---- JSON paths -----------------------------------------------------------

/** Splits `a.b[k=v].c` into `a`, `b`, `[k=v]`, `c` (dots inside brackets kept). */
export function segments(path) {
  const result = [];
  let current = '';
  let depth = 0;
  for (const ch of path) {
    if (ch === '[' && depth === 0) {
      if (current) result.push(current);
      current = '[';
      depth = 1;
    } else if (ch === ']' && depth === 1) {
      result.push(current + ']');
      current = '';
      depth = 0;
    } else if (ch === '.' && depth === 0) {
      if (current) result.push(current);
      current = '';
    } else current += ch;
  }
  if (current) result.push(current);
  return result;
}

/** The value at `path` in `value`, or undefined when there is none (a JSON null is a value). */
export function resolve(path, value) {
  let current = value;
  for (const segment of segments(path)) {
    current = stepInto(current, segment);
    if (current === undefined) return undefined;
  }
  return current;
}

function stepInto(value, segment) {
  if (segment.length >= 2 && segment.startsWith('[') && segment.endsWith(']')) {
    const inner = segment.slice(1, -1);
    if (!Array.isArray(value)) return undefined;
    const eq = inner.indexOf('=');
    if (eq >= 0) {
      const key = inner.slice(0, eq);
      const wanted = inner.slice(eq + 1);
      return value.find((item) => isObject(item) && Object.hasOwn(item, key) && sameText(text(item[key]), wanted));
    }
    return at(value, inner);
  }
  if (Array.isArray(value)) return at(value, segment);
  if (isObject(value)) return Object.hasOwn(value, segment) ? value[segment] : undefined;
  return undefined;
}

/** items[index] for a whole-number index text (Swift's Int(text)), else undefined. */
function at(items, indexText) {
  if (!/^[+-]?[0-9]+$/.test(indexText)) return undefined;
  const index = Number(indexText);
  return index >= 0 && index < items.length ? items[index] : undefined;
}

// ---- values as text -------------------------------------------------------

/** A scalar as text (`t1`, `3`, `true`); lists and objects as JSON text. */
export function text(value) {
  if (typeof value === 'string') return value;
  if (typeof value === 'number') return Number.isInteger(value) && Math.abs(value) < 1e15 ? String(value + 0) : swiftDouble(value);
  if (typeof value === 'boolean') return value ? 'true' : 'false';
  if (value === null) return 'null';
  return jsonText(value);
}

/** JSON text as the server writes it: compact, keys sorted, integers without a fraction. */
export function jsonText(value) {
  if (value === null || value === undefined) return 'null';
  if (typeof value === 'boolean') return value ? 'true' : 'false';
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) return 'null';
    return Number.isInteger(value) && Math.abs(value) < 1e15 ? String(value + 0) : swiftDouble(value);
  }
  if (typeof value === 'string') return quoted(value);
  if (Array.isArray(value)) return '[' + value.map(jsonText).join(',') + ']';
  return '{' + sortedKeys(value).map((k) => quoted(k) + ':' + jsonText(value[k])).join(',') + '}';
}

/** A string literal escaped as the server does: quote, backslash, \n \r \t, other controls as \u00XX. */
function quoted(s) {
  let out = '"';
  for (const ch of s) {
    const c = ch.codePointAt(0);
    if (ch === '"') out += '\\"';
    else if (ch === '\\') out += '\\\\';
    else if (ch === '\n') out += '\\n';
    else if (ch === '\r') out += '\\r';
    else if (ch === '\t') out += '\\t';
    else if (c < 0x20) out += '\\u00' + c.toString(16).padStart(2, '0');
    else out += ch;
  }
  return out + '"';
}

/** Swift's Double description: exponential below 1e-4 and above 2^53 (`1e-05`, `1e+16`), else `1.5`, `1e15` as `1000000000000000.0`. */
function swiftDouble(d) {
  const a = Math.abs(d);
  if (a > 2 ** 53 || (a !== 0 && a < 1e-4)) return d.toExponential().replace(/e([+-])(\d)$/, 'e$10$2');
  const s = String(d);
  return s.includes('.') ? s : s + '.0';
}

// ---- expectations ---------------------------------------------------------

/** Whether `actual` (undefined: missing) meets `expected`: a literal (deep equality) or an operator object. */
export function matches(actual, expected) {
  if (isObject(expected)) {
    const ops = Object.keys(expected);
    if (ops.length > 0 && ops.every((k) => k.startsWith('$'))) return ops.every((op) => check(op, actual, expected[op]));
  }
  if (actual === undefined) return false;
  return same(actual, expected);
}

function check(op, actual, operand) {
  switch (op) {
    case '$exists':
      return (actual !== undefined && actual !== null) === (typeof operand === 'boolean' ? operand : true);
    case '$ne':
      return actual === undefined || !same(actual, operand);
    case '$in':
      return Array.isArray(operand) && actual !== undefined && operand.some((o) => same(actual, o));
    case '$contains':
      if (Array.isArray(actual)) return actual.some((item) => same(item, operand));
      if (typeof actual === 'string') return typeof operand === 'string' && nfc(actual).includes(nfc(operand));
      if (isObject(actual)) return typeof operand === 'string' && Object.hasOwn(actual, operand);
      return false;
    case '$gte':
    case '$lte':
    case '$gt':
    case '$lt': {
      if (typeof actual !== 'number' || typeof operand !== 'number') return false;
      if (op === '$gte') return actual >= operand;
      if (op === '$lte') return actual <= operand;
      if (op === '$gt') return actual > operand;
      return actual < operand;
    }
    default:
      return false;
  }
}

/** JSON values equal: numbers by value, strings as Swift compares them, objects whatever their key order. */
export function same(a, b) {
  if (typeof a === 'string' && typeof b === 'string') return sameText(a, b);
  if (a === null || b === null || typeof a !== 'object' || typeof b !== 'object') return a === b;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a)) return a.length === b.length && a.every((x, i) => same(x, b[i]));
  const ka = Object.keys(a);
  return ka.length === Object.keys(b).length && ka.every((k) => Object.hasOwn(b, k) && same(a[k], b[k]));
}

const nfc = (s) => s.normalize('NFC');
const sameText = (a, b) => a === b || nfc(a) === nfc(b);

// ---- ${var} substitution --------------------------------------------------

/** `${name}` in every string of a JSON value replaced by the variables' text (unknown names stay; keys untouched). */
export function substitute(value, vars) {
  if (typeof value === 'string') {
    if (!value.includes('${')) return value;
    let result = value;
    for (const [name, v] of Object.entries(vars)) result = result.split('${' + name + '}').join(v);
    return result;
  }
  if (Array.isArray(value)) return value.map((x) => substitute(x, vars));
  if (isObject(value)) return Object.fromEntries(Object.entries(value).map(([k, x]) => [k, substitute(x, vars)]));
  return value;
}

// ---- request paths ----------------------------------------------------------

/**
 * Why `path` is not an API path, or null: it must begin with /api/ and hold
 * no backslash, no control, format or space character and no `.` or `..`
 * segment (`%2e` counts as a dot), so that nothing resolves it to another
 * host or outside /api/. Experiment.apiPathProblem, the server's rule, word
 * for word: checked on the path as sent (variables filled in).
 */
export function apiPathProblem(path) {
  if (typeof path !== 'string' || !path.startsWith('/api/')) return 'it must begin with /api/';
  if (path.includes('\\')) return 'it must not hold a backslash';
  if (/[\p{Cc}\p{Cf}\p{Z}]/u.test(path)) return 'it must not hold a control, format or space character';
  const pathPart = path.split(/[?#]/, 1)[0];
  for (const segment of pathPart.split('/')) {
    const s = segment.toLowerCase().replaceAll('%2e', '.');
    if (s === '.' || s === '..') return 'it must not hold a . or .. segment';
  }
  return null;
}

/**
 * Why the page must not send a step's request to `path`, or null: besides
 * apiPathProblem, the URL it resolves to (the browser's own reading) must be
 * on `origin` (the page's) with a pathname under /api/.
 */
export function pagePathProblem(path, origin) {
  const problem = apiPathProblem(path);
  if (problem) return problem;
  let url;
  try {
    url = new URL(path, origin);
  } catch {
    return 'it is not a URL path';
  }
  if (url.origin !== origin) return `it leads to ${url.origin}, not this server`;
  if (!url.pathname.startsWith('/api/')) return `it resolves to ${url.pathname}, outside /api/`;
  return null;
}

// ---- playing --------------------------------------------------------------

/**
 * Plays one step: sends its request (variables filled in) through
 * `send(method, path, body) → {status, json}` (it throws {message} when there
 * is no answer), compares, repeats a GET with `until` (10 → 100 ms pauses)
 * until the expectation holds or the timeout passes, then captures into `vars`
 * (only when it passed). `cancelled()` ends the repeats early (result null).
 * A path that is not an API path of `origin` (pagePathProblem) is never sent:
 * the report says why in `refused` and as its one difference.
 * Returns {number, say, method, path, body, status, differences[{what, expected, actual}],
 * seconds, json, tries, captured{}, refused}.
 */
export async function playStep(step, vars, send, origin, cancelled = () => false) {
  const started = performance.now();
  const path = substitute(step.path, vars);
  const body = step.body === undefined ? undefined : substitute(step.body, vars);
  const deadline = started + (step.until || 0) * 1000;
  const report = { number: step.number, say: step.say, method: step.method, path, body, status: 0, differences: [], seconds: 0, json: null, tries: 0, captured: {}, refused: null };
  const problem = pagePathProblem(path, origin);
  if (problem) {
    report.refused = `not sent: request.path is not an API path of this server (${problem})`;
    report.differences = [{ what: 'request.path', expected: 'a path of this server under /api/', actual: report.refused }];
    return report;
  }
  let pause = 10;
  for (;;) {
    report.tries++;
    let response;
    try {
      response = await send(step.method, path, body);
    } catch (e) {
      report.differences = [{ what: 'answer', expected: 'an HTTP answer', actual: String((e && e.message) || e) }];
      report.seconds = (performance.now() - started) / 1000;
      return report;
    }
    if (cancelled()) return null;
    const differences = compare(step, response, vars);
    if (differences.length === 0 || step.until === null || performance.now() >= deadline) {
      if (differences.length === 0) {
        for (const [name, jsonPath] of step.capture) {
          const value = resolve(substitute(jsonPath, vars), response.json);
          if (value !== undefined && value !== null) {
            vars[name] = text(value);
            report.captured[name] = vars[name];
          } else differences.push({ what: 'capture ' + name, expected: jsonPath, actual: 'missing' });
        }
      }
      report.status = response.status;
      report.differences = differences;
      report.json = response.json;
      report.seconds = (performance.now() - started) / 1000;
      return report;
    }
    // A condition with a deadline (`until`): ask again, a little later each time.
    await new Promise((resolve) => setTimeout(resolve, pause));
    if (cancelled()) return null;
    pause = Math.min(pause * 2, 100);
  }
}

function compare(step, response, vars) {
  const differences = [];
  if (step.status !== null && step.status !== response.status) {
    differences.push({ what: 'status', expected: String(step.status), actual: String(response.status) });
  }
  for (const [rawPath, expected] of step.json) {
    // Paths may hold ${var} too (a filter on a captured id: items[id=${t}]).
    const path = substitute(rawPath, vars);
    const wanted = substitute(expected, vars);
    const actual = resolve(path, response.json);
    if (!matches(actual, wanted)) {
      differences.push({ what: path, expected: jsonText(wanted), actual: actual === undefined ? 'missing' : jsonText(actual) });
    }
  }
  return differences;
}

// ---- helpers --------------------------------------------------------------

function isObject(v) {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

/** Keys in the order the server sorts them (by Unicode scalars, as Swift's String <). */
function sortedKeys(o) {
  return Object.keys(o).sort((a, b) => {
    const x = [...a];
    const y = [...b];
    for (let i = 0; i < Math.min(x.length, y.length); i++) {
      const d = x[i].codePointAt(0) - y[i].codePointAt(0);
      if (d) return d;
    }
    return x.length - y.length;
  });
}
