// The public HTTP/JSON API of `cronoq serve` (docs/reference/http.md#conventions): same origin only, bearer
// token from session storage, errors as ApiError {status, code, message}, and the /v1/events stream.

const TOKEN_KEY = "cronoq.token";

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message || `HTTP ${status}`);
    this.status = status;
    this.code = code || "";
  }
}

export function getToken() {
  try {
    return sessionStorage.getItem(TOKEN_KEY) || "";
  } catch {
    return "";
  }
}

export function setToken(token) {
  try {
    if (token) sessionStorage.setItem(TOKEN_KEY, token);
    else sessionStorage.removeItem(TOKEN_KEY);
  } catch {
    /* storage disabled: the token lives for this page only */
  }
  memoryToken = token || "";
}

let memoryToken = "";
function token() {
  return getToken() || memoryToken;
}

function headers(extra) {
  const h = { accept: "application/json", ...(extra || {}) };
  const t = token();
  if (t) h.authorization = `Bearer ${t}`;
  return h;
}

/** Listeners told about 401 answers (the page then asks for a token). */
const unauthorizedListeners = new Set();
export function onUnauthorized(fn) {
  unauthorizedListeners.add(fn);
}

/** One API call; resolves with the decoded JSON body, rejects with ApiError. */
export async function api(method, path, { body, query, signal } = {}) {
  let url = path;
  if (query) {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(query)) {
      if (v === undefined || v === null || v === "") continue;
      if (Array.isArray(v)) v.forEach((x) => q.append(k, x));
      else q.append(k, String(v));
    }
    const s = q.toString();
    if (s) url += (url.includes("?") ? "&" : "?") + s;
  }
  const init = { method, headers: headers(), credentials: "omit", cache: "no-store", signal };
  if (body !== undefined) {
    init.body = JSON.stringify(body);
    init.headers["content-type"] = "application/json";
  }
  let resp;
  try {
    resp = await fetch(url, init);
  } catch (e) {
    if (e && e.name === "AbortError") throw e;
    throw new ApiError(0, "unavailable", "the server cannot be reached");
  }
  let data = null;
  const text = await resp.text();
  if (text) {
    try {
      data = JSON.parse(text);
    } catch {
      data = null;
    }
  }
  if (!resp.ok) {
    const err = new ApiError(
      resp.status,
      data && data.code,
      (data && data.error) || `${resp.status} ${resp.statusText}`,
    );
    if (resp.status === 401) unauthorizedListeners.forEach((fn) => fn(err));
    throw err;
  }
  return data;
}

/** `/v1/tasks/{ref}` path of a task id (digits) or key (URL-encoded). */
export function taskPath(ref, sub) {
  const s = String(ref);
  const base = /^[0-9]+$/.test(s) ? `/v1/tasks/${s}` : `/v1/tasks/${encodeURIComponent(s)}`;
  return sub ? `${base}/${sub}` : base;
}

/** Whether an error means "this server has no such route" (an older server or an unmerged feature). */
export function isMissingRoute(e) {
  return e instanceof ApiError && (e.status === 404 || e.status === 405) && /^no such route/.test(e.message);
}

/**
 * What this server offers, from its OpenAPI document (no token needed): the dashboard shows only
 * the controls whose endpoints exist, so it works against older servers too.
 */
export async function detectFeatures() {
  let doc;
  try {
    doc = await api("GET", "/openapi.json");
  } catch {
    doc = null;
  }
  const paths = (doc && doc.paths) || {};
  const has = (p, m) => Boolean(paths[p] && paths[p][m]);
  const params = (p, m) => ((paths[p] && paths[p][m] && paths[p][m].parameters) || []).map((x) => x.name);
  const info = (((doc && doc.components) || {}).schemas || {}).TaskInfo || {};
  const taskProps = new Set(Object.keys(info.properties || {}));
  const known = doc !== null;
  return {
    known,
    history: !known || has("/v1/history", "get"),
    listFilters: !known || params("/v1/tasks", "get").includes("kind"),
    // true: documented; undefined: not documented, the data may still show it (app.js hints)
    pausePool: has("/v1/pools/{name}/pause", "post") || undefined,
    pauseRecurring: has("/v1/recurring/{name}/pause", "post") || undefined,
    runRecurring: has("/v1/recurring/{name}/run", "post") || undefined,
    replay: has("/v1/tasks/{ref}/replay", "post") || taskProps.has("replay_of") || undefined,
    bulkCancel: has("/v1/tasks:cancel", "post") || undefined,
    bulkReplay: has("/v1/tasks:replay", "post") || undefined,
    progress: taskProps.has("progress"),
    attempts: taskProps.has("attempts"),
    deps: taskProps.has("parents"),
  };
}

/**
 * The live event stream (`/v1/events?all_transitions=true`).
 *
 * EventSource cannot send an Authorization header, so with a token the stream is read with
 * fetch() and a ReadableStream SSE parser; without one EventSource is used.  Either way
 * `onEvent(eventObject)` gets each status event, `onState("live"|"connecting"|"down", why)`
 * the connection state; the stream reconnects with backoff until `close()`.
 */
export class EventStream {
  constructor({ onEvent, onState, onProgress, query }) {
    this.onEvent = onEvent;
    this.onProgress = onProgress || (() => {});
    this.onState = onState || (() => {});
    this.query = query || { all_transitions: "true" };
    this.closed = false;
    this.backoff = 500;
    this.timer = null;
    this.source = null;
    this.abort = null;
  }

  start() {
    this.closed = false;
    this._connect();
  }

  restart() {
    this._teardown();
    this.backoff = 500;
    this._connect();
  }

  close() {
    this.closed = true;
    this._teardown();
  }

  _teardown() {
    clearTimeout(this.timer);
    this.timer = null;
    if (this.source) this.source.close();
    this.source = null;
    if (this.abort) this.abort.abort();
    this.abort = null;
  }

  _url() {
    return `/v1/events?${new URLSearchParams(this.query).toString()}`;
  }

  _retry(why) {
    this._teardown();
    if (this.closed) return;
    this.onState("connecting", why);
    const wait = this.backoff;
    this.backoff = Math.min(this.backoff * 2, 10000);
    this.timer = setTimeout(() => this._connect(), wait);
  }

  _live() {
    this.backoff = 500;
    this.onState("live");
  }

  _dispatch(event, data) {
    if (event === "status") {
      let ev;
      try {
        ev = JSON.parse(data);
      } catch {
        return;
      }
      this.onEvent(ev);
    } else if (event === "progress") {
      let ev;
      try {
        ev = JSON.parse(data);
      } catch {
        return;
      }
      this.onProgress(ev);
    } else if (event === "error") {
      let why = "stream ended";
      try {
        const d = JSON.parse(data);
        why = d.code || d.error || why;
      } catch {
        /* keep the default */
      }
      this._retry(why);
    }
  }

  _connect() {
    if (this.closed) return;
    this.onState("connecting");
    if (!token() && typeof EventSource !== "undefined") this._connectEventSource();
    else this._connectFetch();
  }

  _connectEventSource() {
    const es = new EventSource(this._url());
    this.source = es;
    es.onopen = () => this._live();
    es.addEventListener("status", (m) => this._dispatch("status", m.data));
    es.addEventListener("progress", (m) => this._dispatch("progress", m.data));
    es.addEventListener("error", (m) => {
      if (m && typeof m.data === "string") this._dispatch("error", m.data);
      else this._probeThenRetry();
    });
  }

  // EventSource hides the HTTP status of a failed connection: ask the API once (so a 401
  // reaches the token prompt), then reconnect with backoff.
  async _probeThenRetry() {
    this._teardown();
    try {
      await api("GET", "/v1/tasks", { query: { limit: 1 } });
      this._retry("disconnected");
    } catch (e) {
      this._retry(e.message);
    }
  }

  async _connectFetch() {
    const ctrl = new AbortController();
    this.abort = ctrl;
    let resp;
    try {
      resp = await fetch(this._url(), {
        headers: headers({ accept: "text/event-stream" }),
        credentials: "omit",
        cache: "no-store",
        signal: ctrl.signal,
      });
    } catch (e) {
      if (ctrl.signal.aborted) return;
      this._retry("the server cannot be reached");
      return;
    }
    if (!resp.ok || !resp.body) {
      let msg = `HTTP ${resp.status}`;
      try {
        const d = await resp.json();
        msg = d.error || msg;
        if (resp.status === 401) {
          unauthorizedListeners.forEach((fn) => fn(new ApiError(401, d.code, msg)));
        }
      } catch {
        /* not JSON */
      }
      if (resp.status === 401 || resp.status === 403) {
        this._teardown();
        this.onState("down", msg);
        return;
      }
      this._retry(msg);
      return;
    }
    this._live();
    const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
    const parser = new SSEParser((event, data) => this._dispatch(event, data));
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        parser.push(value);
        if (this.abort !== ctrl) return; // torn down by an `event: error`
      }
    } catch {
      if (ctrl.signal.aborted) return;
    }
    if (this.abort === ctrl) this._retry("stream ended");
  }
}

/** Incremental text/event-stream parser (the WHATWG algorithm, minus `id`/`retry`). */
export class SSEParser {
  constructor(onMessage) {
    this.onMessage = onMessage;
    this.buf = "";
    this.event = "";
    this.data = [];
  }

  push(chunk) {
    this.buf += chunk;
    let start = 0;
    for (;;) {
      const end = this.buf.indexOf("\n", start);
      if (end < 0) break;
      let line = this.buf.slice(start, end);
      if (line.endsWith("\r")) line = line.slice(0, -1);
      start = end + 1;
      this._line(line);
    }
    if (start) this.buf = this.buf.slice(start);
  }

  _line(line) {
    if (line === "") {
      if (this.data.length) this.onMessage(this.event || "message", this.data.join("\n"));
      this.event = "";
      this.data = [];
      return;
    }
    if (line.startsWith(":")) return;
    const i = line.indexOf(":");
    const field = i < 0 ? line : line.slice(0, i);
    let value = i < 0 ? "" : line.slice(i + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "event") this.event = value;
    else if (field === "data") this.data.push(value);
  }
}
