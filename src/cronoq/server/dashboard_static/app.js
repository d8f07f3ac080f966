// cronoq dashboard (docs/reference/behaviour.md#dashboard): pools, tasks, workers and recurring schedules of
// `cronoq serve`, live over /v1/events and /v1/snapshot.  Only the public HTTP API is used (api.js).

import { api, ApiError, EventStream, getToken, onUnauthorized, setToken, taskPath } from "./api.js";
import { TimeChart } from "./chart.js";
import {
  $,
  $$,
  CLASSES,
  STATUSES,
  TERMINAL,
  cmpId,
  decodeBase64Preview,
  fmtNum,
  fmtPct,
  fmtRel,
  fmtSecs,
  fmtTime,
  frameScheduler,
  h,
  nsDate,
  preview,
} from "./util.js";

const SNAPSHOT_MS = 1000;
const WORKERS_MS = 2000;
const RECURRING_MS = 5000;
const LIVE_REFRESH_MS = 1000;
const HISTORY_TASKS = 20000; // tasks whose event history is kept in memory
const HISTORY_PER_TASK = 64;
const MAX_LIST = 1000; // the server's default limits.max_list

const state = {
  view: "pools",
  pools: [], // names, from the snapshot
  poolCards: new Map(), // name → {card, charts, fields}
  chartWindow: 300000,
  history: new Map(), // id → [{status, attempt, at, message}]
  queue: [], // events not yet applied (flushed once per frame)
  evCount: 0,
  maxId: "0", // highest task id seen
  tasks: {
    rows: [], // displayed tasks (TaskInfo-like), newest first
    byId: new Map(),
    live: true, // showing the newest page, new tasks are inserted as they arrive
    pool: "",
    status: "",
    size: 50,
    loading: false,
    gen: 0, // bumps on every (re)load: late answers of older loads are dropped
    hasOlder: false,
    hasNewer: false,
    dirtyRows: new Set(),
    reorder: false,
    needRefresh: false,
    lastRefresh: 0,
  },
  detail: null, // {id, info, result}
  notAdmin: false,
  tokenPrompted: false,
};

// ------------------------------------------------------------------------------------------
// views (hash routing)

const VIEWS = ["pools", "tasks", "workers", "recurring"];

function showView(name) {
  if (!VIEWS.includes(name)) name = "pools";
  state.view = name;
  for (const v of VIEWS) $(`#view-${v}`).hidden = v !== name;
  for (const a of $$(".top nav a")) {
    if (a.dataset.view === name) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  document.title = `${name[0].toUpperCase()}${name.slice(1)} · cronoq`;
  if (name === "workers") loadWorkers();
  if (name === "recurring") loadRecurring();
  if (name === "pools") {
    for (const pc of state.poolCards.values()) pc.charts.forEach((c) => (c.dirty = true));
    scheduleDraw();
  }
}

function route() {
  const hash = location.hash.replace(/^#/, "");
  const [view, arg] = hash.split("/");
  showView(view || "pools");
  if (view === "tasks" && arg) openTask(decodeURIComponent(arg));
}

// ------------------------------------------------------------------------------------------
// errors, banner, token

function banner(msg) {
  const b = $("#banner");
  b.textContent = msg || "";
  b.hidden = !msg;
}

function note(id, msg) {
  const n = $(id);
  n.textContent = msg || "";
  n.hidden = !msg;
}

function explain(e, what) {
  if (!(e instanceof ApiError)) return `${what}: ${e && e.message ? e.message : e}`;
  if (e.status === 401) return `${what}: a token is needed (use the Token button).`;
  if (e.status === 403) return `${what}: this token is not allowed (${e.message}).`;
  if (e.status === 503) return `${what}: the server is unavailable (${e.message}).`;
  if (e.status === 0) return `${what}: the server cannot be reached.`;
  return `${what}: ${e.message}`;
}

function promptToken(message) {
  const dlg = $("#token-dialog");
  $("#token-error").textContent = message || "";
  $("#token-input").value = getToken();
  if (!dlg.open) dlg.showModal();
  $("#token-input").focus();
}

onUnauthorized((err) => {
  const tok = getToken();
  banner(tok ? `The token was refused: ${err.message}` : "This server needs an API token (use the Token button).");
  // ask once per token: polling must not reopen a prompt the user dismissed
  if ($("#token-dialog").open || state.tokenPrompted) return;
  state.tokenPrompted = true;
  promptToken(tok ? `The token was refused: ${err.message}` : "");
});

function applyToken(tok) {
  setToken(tok);
  state.notAdmin = false;
  state.tokenPrompted = false;
  $("#recurring-box").hidden = false;
  $("#token-btn").textContent = tok ? "Token ✓" : "Token";
  $("#token-btn").setAttribute("aria-label", tok ? "API token (set)" : "API token (not set)");
  banner("");
  stream.restart();
  refreshAll();
}

function setupToken() {
  const tok = getToken();
  $("#token-btn").textContent = tok ? "Token ✓" : "Token";
  $("#token-btn").setAttribute("aria-label", tok ? "API token (set)" : "API token (not set)");
  $("#token-btn").addEventListener("click", () => promptToken(""));
  $("#token-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const v = $("#token-input").value.trim();
    if (!v) {
      $("#token-error").textContent = "Enter a token.";
      return;
    }
    $("#token-dialog").close();
    applyToken(v);
  });
  $("#token-forget").addEventListener("click", () => {
    $("#token-dialog").close();
    applyToken("");
  });
  $("#token-cancel").addEventListener("click", () => $("#token-dialog").close());
}

// ------------------------------------------------------------------------------------------
// pools: snapshot polling and charts

let snapshotBusy = false;

async function pollSnapshot() {
  if (snapshotBusy) return;
  snapshotBusy = true;
  try {
    const snap = await api("GET", "/v1/snapshot");
    note("#pools-note", "");
    banner("");
    renderSnapshot(snap);
  } catch (e) {
    note("#pools-note", explain(e, "Pools"));
    if (e.status === 403 && state.pools.length === 0) {
      // a client token cannot read the snapshot: learn pool names from the task list instead
      learnPools([]);
    }
  } finally {
    snapshotBusy = false;
  }
}

function learnPools(names) {
  const sorted = [...new Set(names)].sort();
  if (sorted.join("\n") === state.pools.join("\n")) return;
  state.pools = sorted;
  for (const sel of [$("#f-pool"), $("#s-pool"), $("#r-pool")]) {
    const keep = sel.value;
    const first = sel.id === "f-pool" ? [h("option", { value: "", text: "all pools" })] : [];
    sel.replaceChildren(...first, ...sorted.map((p) => h("option", { value: p, text: p })));
    if (keep && sorted.includes(keep)) sel.value = keep;
  }
}

const TOTALS = [
  ["live_tasks", "Live tasks"],
  ["running", "Running"],
  ["pending", "Pending"],
  ["workers_connected", "Workers"],
  ["t.submitted", "Submitted"],
  ["t.succeeded", "Succeeded"],
  ["t.failed", "Failed"],
  ["t.dead_lettered", "Dead-lettered"],
  ["t.cancelled", "Cancelled"],
  ["t.retries", "Retries"],
];

function renderSnapshot(snap) {
  learnPools((snap.pools || []).map((p) => p.name));
  const totals = $("#totals");
  if (!totals.children.length) {
    for (const [k, label] of TOTALS) {
      totals.append(h("div", null, h("dt", { text: label }), h("dd", { dataset: { k } })));
    }
  }
  for (const dd of $$("dd", totals)) {
    const k = dd.dataset.k;
    const v = k.startsWith("t.") ? (snap.totals || {})[k.slice(2)] : snap[k];
    dd.textContent = fmtNum(v);
  }
  const now = Date.now();
  const grid = $("#pools-grid");
  const seen = new Set();
  for (const p of snap.pools || []) {
    seen.add(p.name);
    let pc = state.poolCards.get(p.name);
    if (!pc) {
      pc = makePoolCard(p.name);
      state.poolCards.set(p.name, pc);
      grid.append(pc.card);
    }
    updatePoolCard(pc, p, now);
  }
  for (const [name, pc] of state.poolCards) {
    if (!seen.has(name)) {
      pc.charts.forEach((c) => c.destroy());
      pc.card.remove();
      state.poolCards.delete(name);
    }
  }
  if (!grid.children.length) grid.append(h("p.muted", { text: "No pools." }));
  else $$("p.muted", grid).forEach((x) => x.remove());
  scheduleDraw();
}

const POOL_STATS = [
  ["capacity", "Capacity", fmtNum],
  ["desired", "Desired", fmtNum],
  ["busy", "Busy", fmtNum],
  ["held", "Held", fmtNum],
  ["workers_connected", "Workers", fmtNum],
  ["utilization", "Utilization", fmtPct],
  ["wait_p50_s", "Wait p50", fmtSecs],
  ["wait_p90_s", "Wait p90", fmtSecs],
  ["wait_p99_s", "Wait p99", fmtSecs],
  ["cost", "Cost", (v) => fmtNum(v, 2)],
  ["dispatched", "Dispatched (60 s)", fmtNum],
  ["succeeded", "Succeeded (60 s)", fmtNum],
  ["failed", "Failed (60 s)", fmtNum],
  ["priority_adherence", "Priority adherence", fmtPct],
];

function makePoolCard(name) {
  const slug = name.replace(/[^A-Za-z0-9_-]/g, "_");
  const fields = {};
  const stats = h(
    "dl.stats",
    { "aria-label": `Figures of pool ${name}` },
    POOL_STATS.map(([k, label]) => {
      fields[k] = h("dd", { text: "–", dataset: { stat: k } });
      return h("div", null, h("dt", { text: label }), fields[k]);
    }),
  );
  const pendingText = h("span.mono", { dataset: { stat: "pending" } });
  const classbar = h("div.classbar", { "aria-hidden": "true" });
  const capCanvas = h("canvas.chart", { id: `chart-cap-${slug}`, dataset: { pool: name, chart: "capacity" } });
  const pendCanvas = h("canvas.chart.small", { id: `chart-pend-${slug}`, dataset: { pool: name, chart: "pending" } });
  const card = h(
    "article.card.pool",
    { "aria-labelledby": `pool-h-${slug}`, dataset: { pool: name } },
    h("div.pool-head", null, h("h3", { id: `pool-h-${slug}`, text: name }), h("span.muted", null, "pending ", pendingText)),
    stats,
    h(
      "div.chart-title",
      null,
      h("span", { text: "Workers:" }),
      ...["capacity", "desired", "busy", "held"].map((k) => h("span.legend", null, h(`span.swatch.sw-${k}`), k)),
    ),
    capCanvas,
    h(
      "div.chart-title",
      null,
      h("span", { text: "Pending by class:" }),
      ...CLASSES.map((k) => h("span.legend", null, h(`span.swatch.sw-${k}`), k)),
    ),
    classbar,
    pendCanvas,
  );
  const cap = new TimeChart(capCanvas, {
    title: `Pool ${name} workers`,
    windowMs: state.chartWindow,
    series: [
      { key: "capacity", label: "capacity", color: "--c-capacity", width: 2.5 },
      { key: "desired", label: "desired", color: "--c-desired", dash: [5, 4] },
      { key: "busy", label: "busy", color: "--c-busy" },
      { key: "held", label: "held", color: "--c-held" },
    ],
  });
  const pend = new TimeChart(pendCanvas, {
    title: `Pool ${name} pending`,
    windowMs: state.chartWindow,
    stacked: true,
    series: CLASSES.map((k) => ({ key: k, label: k, color: `--c-${k}` })),
  });
  return { card, charts: [cap, pend], fields, pendingText, classbar };
}

function updatePoolCard(pc, p, now) {
  for (const [k, , fmt] of POOL_STATS) pc.fields[k].textContent = fmt(p[k]);
  const pend = p.pending_by_class || [];
  const row = Object.fromEntries(CLASSES.map((k, i) => [k, Number(pend[i] || 0)]));
  const total = CLASSES.reduce((s, k) => s + row[k], 0);
  pc.pendingText.textContent = `${fmtNum(total)} (${CLASSES.map((k) => `${k[0]}:${fmtNum(row[k])}`).join(" ")})`;
  pc.classbar.replaceChildren(
    ...CLASSES.filter((k) => row[k] > 0).map((k) => {
      const s = h(`span.sw-${k}`);
      s.style.width = `${(100 * row[k]) / total}%`;
      return s;
    }),
  );
  pc.charts[0].push(now, p);
  pc.charts[1].push(now, row);
}

const scheduleDraw = frameScheduler(() => {
  if (state.view !== "pools") return;
  for (const pc of state.poolCards.values()) pc.charts.forEach((c) => c.draw());
});

// ------------------------------------------------------------------------------------------
// tasks: server-side paging, newest first

function bigMax(a, b) {
  return cmpId(a, b) >= 0 ? a : b;
}

function noteId(id) {
  if (cmpId(id, state.maxId) > 0) state.maxId = id;
}

function listQuery(after, limit) {
  const t = state.tasks;
  return { pool: t.pool || undefined, status: t.status || undefined, after: String(after), limit };
}

/** The highest task id (galloping + binary search with limit=1 probes; ids are uint64). */
async function findMaxId() {
  const first = await api("GET", "/v1/tasks", { query: { after: "0", limit: 1 } });
  if (!first.tasks.length) return "0";
  let lo = BigInt(first.tasks[0].id); // an existing id
  let step = 1024n;
  let hi = null; // no id >= hi
  const LIMIT = (1n << 64n) - 1n;
  for (let i = 0; i < 200; i++) {
    if (hi !== null && hi - lo <= BigInt(MAX_LIST)) break;
    const probe = hi === null ? lo + step : lo + (hi - lo) / 2n;
    if (probe >= LIMIT) {
      hi = LIMIT;
      continue;
    }
    const r = await api("GET", "/v1/tasks", { query: { after: String(probe), limit: 1 } });
    if (r.tasks.length) {
      lo = BigInt(r.tasks[0].id);
      if (hi === null) step *= 4n;
    } else {
      hi = probe + 1n;
    }
  }
  let after = lo - 1n;
  let max = lo;
  for (let i = 0; i < 50; i++) {
    const r = await api("GET", "/v1/tasks", { query: { after: String(after), limit: MAX_LIST } });
    if (r.tasks.length) max = BigInt(r.tasks[r.tasks.length - 1].id);
    if (r.next_after === "0" || !r.tasks.length) break;
    after = BigInt(r.next_after);
  }
  return String(max);
}

/**
 * The last `n` tasks (matching the filters) with ids < `before` (exclusive; null = no bound),
 * newest first, and whether older ones exist.  Windows of ids below the bound grow until
 * they hold `n` matches or reach id 0; each window is read with `after` paging.
 */
async function fetchBefore(before, n) {
  let bound = before === null ? null : BigInt(before);
  let top = bound === null ? BigInt(state.maxId) + 1n : bound;
  let window = BigInt(Math.max(n * 2, 64));
  let requests = 0;
  for (;;) {
    const after = top - window > 0n ? top - window : 0n;
    const found = [];
    let cursor = after;
    let truncated = false;
    for (;;) {
      const r = await api("GET", "/v1/tasks", { query: listQuery(cursor, MAX_LIST) });
      requests++;
      let stop = false;
      for (const t of r.tasks) {
        if (bound !== null && BigInt(t.id) >= bound) {
          stop = true;
          break;
        }
        noteId(t.id);
        found.push(t);
      }
      if (stop || r.next_after === "0" || !r.tasks.length) break;
      cursor = BigInt(r.next_after);
      if (requests > 40) {
        truncated = true;
        break;
      }
    }
    if (found.length >= n || after === 0n || truncated || requests > 40) {
      const rows = found.slice(-n).reverse();
      const hasOlder = found.length > n || (after > 0n && rows.length > 0) || truncated;
      return { rows, hasOlder };
    }
    window *= 8n;
  }
}

/** The first `n` matching tasks with ids > `after`, newest first, and whether newer exist. */
async function fetchAfter(after, n) {
  const r = await api("GET", "/v1/tasks", { query: listQuery(after, n) });
  r.tasks.forEach((t) => noteId(t.id));
  return { rows: r.tasks.slice().reverse(), hasNewer: r.next_after !== "0" };
}

async function loadTasks(mode) {
  const t = state.tasks;
  const gen = ++t.gen;
  t.loading = true;
  $("#tasks-table").setAttribute("aria-busy", "true");
  try {
    let rows;
    if (mode === "newest") {
      if (state.maxId === "0") state.maxId = bigMax(state.maxId, await findMaxId());
      const r = await fetchBefore(null, t.size);
      rows = r.rows;
      t.live = true;
      t.hasOlder = r.hasOlder;
      t.hasNewer = false;
    } else if (mode === "older") {
      const oldest = t.rows.length ? t.rows[t.rows.length - 1].id : null;
      if (oldest === null) return;
      const r = await fetchBefore(oldest, t.size);
      if (!r.rows.length) {
        t.hasOlder = false;
        renderPager();
        return;
      }
      rows = r.rows;
      t.live = false;
      t.hasOlder = r.hasOlder;
      t.hasNewer = true;
    } else {
      // newer
      const newest = t.rows.length ? t.rows[0].id : "0";
      const r = await fetchAfter(newest, t.size);
      if (!r.hasNewer) {
        t.loading = false;
        return loadTasks("newest");
      }
      rows = r.rows;
      t.live = false;
      t.hasNewer = true;
      t.hasOlder = true;
    }
    if (gen !== t.gen) return;
    setRows(rows);
    note("#tasks-note", "");
    banner("");
  } catch (e) {
    if (gen === t.gen) note("#tasks-note", explain(e, "Tasks"));
  } finally {
    if (gen === t.gen) {
      t.loading = false;
      t.lastRefresh = performance.now();
      $("#tasks-table").setAttribute("aria-busy", "false");
      renderPager();
    }
  }
}

function setRows(rows) {
  const t = state.tasks;
  t.rows = rows;
  t.byId = new Map(rows.map((r) => [r.id, r]));
  renderTaskTable();
}

const rowEls = new Map(); // id → <tr>

function renderTaskTable() {
  const t = state.tasks;
  const body = $("#tasks-body");
  const keep = new Set(t.rows.map((r) => r.id));
  for (const id of rowEls.keys()) if (!keep.has(id)) rowEls.delete(id);
  const trs = t.rows.map((r) => {
    let tr = rowEls.get(r.id);
    if (!tr) {
      tr = buildRow(r);
      rowEls.set(r.id, tr);
    } else if (t.dirtyRows.has(r.id)) {
      fillRow(tr, r);
    }
    return tr;
  });
  t.dirtyRows.clear();
  if (!trs.length) {
    const msg = t.loading ? "Loading…" : "No tasks.";
    body.replaceChildren(h("tr", null, h("td.empty", { colspan: 9, text: msg })));
    return;
  }
  // move only what is out of place (keeps focus and avoids relayout of unchanged rows)
  let cur = body.firstElementChild;
  for (const tr of trs) {
    if (cur === tr) cur = cur.nextElementSibling;
    else body.insertBefore(tr, cur);
  }
  while (cur) {
    const next = cur.nextElementSibling;
    cur.remove();
    cur = next;
  }
}

function buildRow(r) {
  const tr = h("tr", { dataset: { id: r.id } });
  fillRow(tr, r);
  return tr;
}

function fillRow(tr, r) {
  const created = nsDate(r.created_unix_ns);
  const cancellable = !TERMINAL.has(r.status);
  tr.dataset.status = r.status;
  tr.dataset.key = r.key || "";
  tr.replaceChildren(
    h("td", null, h("button.link", { type: "button", "aria-label": `Open task ${r.id}`, onclick: () => openTask(r.id), text: r.id })),
    h("td.key", { title: r.key || "", text: r.key || "" }),
    h("td", { text: r.pool || "" }),
    h("td.c-kind", { text: r.kind || "" }),
    h("td.c-prio", { text: r.priority || "" }),
    h("td", null, h(`span.status.st-${r.status}`, { text: r.status })),
    h("td.c-attempt", { text: r.max_attempts ? `${r.attempt}/${r.max_attempts}` : String(r.attempt ?? "") }),
    h("td", { title: created ? created.toISOString() : "", text: created ? fmtTime(created) : "" }),
    h(
      "td",
      null,
      cancellable
        ? h("button.danger", {
            type: "button",
            "aria-label": `Cancel task ${r.id}`,
            text: "Cancel",
            onclick: () => cancelTask(r.id),
          })
        : null,
    ),
  );
}

function renderPager() {
  const t = state.tasks;
  $("#p-newest").disabled = t.live;
  $("#p-newer").disabled = t.live || !t.hasNewer;
  $("#p-older").disabled = !t.hasOlder;
  const mode = $("#tasks-mode");
  mode.textContent = t.live ? "live · newest first" : "paused · older page";
  mode.dataset.state = t.live ? "live" : "connecting";
  const n = t.rows.length;
  $("#p-info").textContent = n ? `ids ${t.rows[n - 1].id} – ${t.rows[0].id} (${n} shown)` : "";
}

function matchesFilter(ev) {
  const t = state.tasks;
  if (t.pool && ev.pool !== t.pool) return false;
  if (t.status && ev.status !== t.status) return false;
  return true;
}

/** Apply a batch of events to the visible rows (called once per animation frame). */
function applyEventsToTasks(events) {
  const t = state.tasks;
  let inserted = false;
  for (const ev of events) {
    const row = t.byId.get(ev.id);
    if (row) {
      row.status = ev.status;
      row.attempt = ev.attempt;
      if (ev.message) row.message = ev.message;
      t.dirtyRows.add(ev.id);
      continue;
    }
    if (!t.live || !matchesFilter(ev)) continue;
    const oldest = t.rows.length ? t.rows[t.rows.length - 1].id : null;
    if (t.rows.length >= t.size && oldest !== null && cmpId(ev.id, oldest) <= 0) continue;
    const r = {
      id: ev.id,
      key: ev.key,
      pool: ev.pool,
      status: ev.status,
      attempt: ev.attempt,
      kind: "",
      priority: "",
      max_attempts: 0,
      created_unix_ns: ev.at ? ev.at * 1e9 : null,
      message: ev.message,
      partial: true,
    };
    t.rows.push(r);
    t.byId.set(r.id, r);
    inserted = true;
    t.needRefresh = true;
  }
  if (inserted) {
    t.rows.sort((a, b) => cmpId(b.id, a.id));
    while (t.rows.length > t.size) {
      const gone = t.rows.pop();
      t.byId.delete(gone.id);
      t.hasOlder = true;
    }
  }
  if (inserted || t.dirtyRows.size) {
    renderTaskTable();
    if (inserted) {
      for (const r of t.rows) if (r.partial && !r.flashed) {
        r.flashed = true;
        const tr = rowEls.get(r.id);
        if (tr) tr.classList.add("flash");
      }
      renderPager();
    }
  }
}

/** In live mode, re-read the newest page (full fields for rows made from events), throttled. */
function maybeRefreshLive() {
  const t = state.tasks;
  if (!t.live || !t.needRefresh || t.loading) return;
  if (performance.now() - t.lastRefresh < LIVE_REFRESH_MS) return;
  t.needRefresh = false;
  refreshLive();
}

async function refreshLive() {
  const t = state.tasks;
  const gen = t.gen;
  t.lastRefresh = performance.now();
  try {
    const r = await fetchBefore(null, t.size);
    if (gen !== t.gen || !t.live) return;
    // keep statuses newer than the answer (events applied while it was in flight)
    for (const row of r.rows) {
      const old = t.byId.get(row.id);
      if (old && !old.partial && statusRank(old.status) > statusRank(row.status)) row.status = old.status;
      row.flashed = old ? old.flashed : false;
      t.dirtyRows.add(row.id);
    }
    t.hasOlder = r.hasOlder;
    setRows(r.rows);
    renderPager();
  } catch {
    /* the next event or poll tries again */
  }
}

function statusRank(s) {
  return TERMINAL.has(s) ? 2 : s === "running" ? 1 : 0;
}

async function cancelTask(id) {
  if (!window.confirm(`Cancel task ${id}?`)) return;
  try {
    const r = await api("POST", taskPath(id, "cancel"));
    if (!r.cancelled) note("#tasks-note", `Task ${id} was already finished.`);
    await refreshTaskRow(id);
    if (state.detail && state.detail.id === id) openTask(id);
  } catch (e) {
    note("#tasks-note", explain(e, `Cancel task ${id}`));
  }
}

async function refreshTaskRow(id) {
  const t = state.tasks;
  const info = await api("GET", taskPath(id));
  const row = t.byId.get(id);
  if (row) {
    Object.assign(row, info, { partial: false });
    t.dirtyRows.add(id);
    renderTaskTable();
  }
  return info;
}

function setupTasks() {
  const sel = $("#f-status");
  for (const s of STATUSES) sel.append(h("option", { value: s, text: s }));
  const reload = () => {
    const t = state.tasks;
    t.pool = $("#f-pool").value;
    t.status = $("#f-status").value;
    t.size = Number($("#f-size").value) || 50;
    rowEls.clear();
    loadTasks("newest");
  };
  $("#f-pool").addEventListener("change", reload);
  $("#f-status").addEventListener("change", reload);
  $("#f-size").addEventListener("change", reload);
  $("#task-filters").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const q = $("#f-search").value.trim();
    if (!q) return reload();
    try {
      let info;
      try {
        info = await api("GET", taskPath(q));
      } catch (e) {
        if (!(e instanceof ApiError) || e.status !== 404 || !/^[0-9]+$/.test(q)) throw e;
        info = await api("GET", "/v1/tasks/-", { query: { key: q } }); // a digits-only key
      }
      note("#tasks-note", "");
      openTask(info.id, info);
    } catch (e) {
      note("#tasks-note", e.status === 404 ? `No task with key or id “${q}”.` : explain(e, "Find"));
    }
  });
  $("#p-newest").addEventListener("click", () => loadTasks("newest"));
  $("#p-older").addEventListener("click", () => loadTasks("older"));
  $("#p-newer").addEventListener("click", () => loadTasks("newer"));
  $("#submit-form").addEventListener("submit", submitTask);
}

function parseJsonField(text, what) {
  if (!text.trim()) return undefined;
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new Error(`${what} is not valid JSON: ${e.message}`);
  }
}

async function submitTask(ev) {
  ev.preventDefault();
  const f = ev.target;
  const out = $("#submit-out");
  const body = { pool: f.pool.value || undefined, priority: f.priority.value };
  if (f.kind.value.trim()) body.kind = f.kind.value.trim();
  if (f.key.value.trim()) body.key = f.key.value.trim();
  if (f.start_in_s.value) body.start_in_s = Number(f.start_in_s.value);
  if (f.timeout_s.value) body.timeout_s = Number(f.timeout_s.value);
  try {
    const payload = parseJsonField(f.payload.value, "Payload");
    if (payload !== undefined) body.payload = payload;
    const r = await api("POST", "/v1/tasks", { body });
    noteId(r.id);
    out.replaceChildren(
      r.duplicate ? "Duplicate key: existing task " : "Submitted task ",
      h("button.link", { type: "button", text: r.id, "aria-label": `Open task ${r.id}`, onclick: () => openTask(r.id) }),
    );
    f.key.value = "";
  } catch (e) {
    out.textContent = explain(e, "Submit");
  }
}

// ------------------------------------------------------------------------------------------
// task detail

async function openTask(id, info) {
  const dlg = $("#task-dialog");
  state.detail = { id: String(id), info: info || null, result: null };
  if (!dlg.open) dlg.showModal();
  renderDetail();
  try {
    const i = info || (await api("GET", taskPath(id)));
    if (!state.detail || state.detail.id !== String(id)) return;
    state.detail.id = i.id;
    state.detail.info = i;
    renderDetail();
    if (TERMINAL.has(i.status)) loadResult(i.id);
  } catch (e) {
    if (state.detail && state.detail.id === String(id)) {
      $("#task-detail").replaceChildren(h("p.error", { text: explain(e, `Task ${id}`) }));
    }
  }
}

async function loadResult(id) {
  try {
    const r = await api("GET", taskPath(id, "result"), { query: { timeout: 0 } });
    if (state.detail && state.detail.id === id) {
      state.detail.result = r;
      renderDetail();
    }
  } catch {
    /* no result (yet) */
  }
}

function renderDetail() {
  const d = state.detail;
  if (!d) return;
  const i = d.info;
  $("#task-title").textContent = i ? `Task ${i.id}${i.key ? ` · ${i.key}` : ""}` : `Task ${d.id}`;
  const box = $("#task-detail");
  if (!i) {
    box.replaceChildren(h("p.muted", { text: "Loading…" }));
    return;
  }
  const created = nsDate(i.created_unix_ns);
  const started = nsDate(i.started_unix_ns);
  const finished = nsDate(i.finished_unix_ns);
  const secs = (a, b) => (a && b ? fmtSecs((b - a) / 1000) : "–");
  const kv = [
    ["Status", h(`span.status.st-${i.status}`, { text: i.status, id: "detail-status" })],
    ["Pool", i.pool],
    ["Key", i.key || "–"],
    ["Kind", i.kind || "–"],
    ["Priority", i.priority || "–"],
    ["Attempt", `${i.attempt} of ${i.max_attempts}`],
    ["Tenant", i.tenant || "–"],
    ["Created", created ? `${fmtTime(created)} (${fmtRel(created)})` : "–"],
    ["Started", started ? `${fmtTime(started)} · waited ${secs(created, started)}` : "–"],
    ["Finished", finished ? `${fmtTime(finished)} · ran ${secs(started, finished)}` : "–"],
    ["Message", i.message || "–"],
  ];
  const hist = (state.history.get(i.id) || []).slice();
  const items = [];
  if (created) items.push(h("li", null, h("strong", { text: "submitted" }), ` · ${fmtTime(created)}`));
  for (const e of hist) {
    const at = e.at ? new Date(e.at * 1000) : null;
    items.push(
      h(
        "li",
        null,
        h(`span.status.st-${e.status}`, { text: e.status }),
        e.attempt ? ` · attempt ${e.attempt}` : "",
        at ? ` · ${fmtTime(at)}` : "",
        e.message ? ` · ${e.message}` : "",
      ),
    );
  }
  if (!hist.length) {
    items.push(h("li.muted", { text: "No transitions seen by this page yet (history comes from live events)." }));
  }
  const parts = [
    h("dl.kv", null, kv.map(([k, v]) => [h("dt", { text: k }), h("dd", null, v)])),
    h("h3", { text: "Status history" }),
    h("ol.history", { "aria-label": "Status history" }, items),
  ];
  const r = d.result;
  if (r) {
    parts.push(h("h3", { text: "Output" }));
    if (!r.output_available) parts.push(h("p.muted", { text: "No output retained." }));
    else {
      const text =
        r.output !== undefined
          ? preview(r.output)
          : r.output_base64 !== undefined
            ? decodeBase64Preview(r.output_base64)
            : "";
      parts.push(h("p.muted", { text: r.content_type ? `content type ${r.content_type}` : "empty content type" }));
      parts.push(h("pre.output", { role: "region", tabindex: 0, "aria-label": "Output preview", text: text || "(empty)" }));
    }
  }
  const actions = h("div.actions");
  if (!TERMINAL.has(i.status)) {
    actions.append(
      h("button.danger", { type: "button", text: "Cancel task", "aria-label": `Cancel task ${i.id}`, onclick: () => cancelTask(i.id) }),
    );
  }
  actions.append(h("button", { type: "button", text: "Refresh", "aria-label": "Refresh task details", onclick: () => openTask(i.id) }));
  parts.push(actions);
  box.replaceChildren(...parts);
}

function setupDetail() {
  const dlg = $("#task-dialog");
  $("#task-close").addEventListener("click", () => dlg.close());
  dlg.addEventListener("close", () => {
    state.detail = null;
    if (location.hash.startsWith("#tasks/")) history.replaceState(null, "", "#tasks");
  });
  dlg.addEventListener("click", (ev) => {
    if (ev.target === dlg) dlg.close(); // a click on the backdrop
  });
}

// ------------------------------------------------------------------------------------------
// events: batched per animation frame

function recordHistory(ev) {
  let list = state.history.get(ev.id);
  if (!list) {
    if (state.history.size >= HISTORY_TASKS) {
      const oldest = state.history.keys().next().value;
      state.history.delete(oldest);
    }
    list = [];
    state.history.set(ev.id, list);
  }
  list.push({ status: ev.status, attempt: ev.attempt, at: ev.at, message: ev.message });
  if (list.length > HISTORY_PER_TASK) list.splice(0, list.length - HISTORY_PER_TASK);
}

// read-only counters for diagnostics (and the browser tests): events received vs. batches applied
const stats = { events: 0, flushes: 0, maxBatch: 0 };
window.cronoqDashboard = Object.freeze({ stats });

const flushEvents = frameScheduler(() => {
  const batch = state.queue;
  state.queue = [];
  if (!batch.length) return;
  stats.flushes++;
  stats.maxBatch = Math.max(stats.maxBatch, batch.length);
  for (const ev of batch) {
    noteId(ev.id);
    recordHistory(ev);
  }
  applyEventsToTasks(batch);
  const d = state.detail;
  if (d && d.info) {
    const mine = batch.filter((e) => e.id === d.info.id);
    if (mine.length) {
      const last = mine[mine.length - 1];
      d.info.status = last.status;
      d.info.attempt = last.attempt;
      if (TERMINAL.has(last.status)) openTask(d.info.id);
      else renderDetail();
    }
  }
  maybeRefreshLive();
});

function onEvent(ev) {
  state.queue.push(ev);
  state.evCount++;
  stats.events++;
  flushEvents();
}

function onStreamState(s, why) {
  const el = $("#conn");
  el.dataset.state = s;
  el.textContent = s === "live" ? "live" : s === "connecting" ? "reconnecting…" : `offline${why ? `: ${why}` : ""}`;
  if (s === "live") {
    // anything may have been missed while disconnected
    if (state.tasks.live && !state.tasks.loading && state.tasks.lastRefresh) state.tasks.needRefresh = true;
  }
}

const stream = new EventStream({ onEvent, onState: onStreamState });

// ------------------------------------------------------------------------------------------
// workers

async function loadWorkers() {
  try {
    const r = await api("GET", "/v1/workers");
    note("#workers-note", "");
    const ws = r.workers || [];
    $("#workers-count").textContent = `${ws.length} connected`;
    const body = $("#workers-body");
    if (!ws.length) {
      body.replaceChildren(h("tr", null, h("td.empty", { colspan: 7, text: "No workers connected." })));
      return;
    }
    body.replaceChildren(
      ...ws.map((w) => {
        const since = nsDate(w.connected_unix_ns);
        return h(
          "tr",
          { dataset: { id: w.id } },
          h("td", { text: w.name || "–" }),
          h("td.mono", { text: w.id }),
          h("td", { text: w.pool }),
          h(
            "td.labels",
            null,
            Object.entries(w.labels || {}).map(([k, v]) => h("code", { text: `${k}=${v}` })),
          ),
          h("td", { text: fmtNum(w.slots) }),
          h("td", { text: fmtNum(w.busy) }),
          h("td", { title: since ? since.toISOString() : "", text: since ? `${fmtTime(since)} (${fmtRel(since)})` : "–" }),
        );
      }),
    );
  } catch (e) {
    note("#workers-note", explain(e, "Workers"));
  }
}

// ------------------------------------------------------------------------------------------
// recurring schedules

async function loadRecurring() {
  try {
    const r = await api("GET", "/v1/recurring");
    note("#recurring-note", "");
    const list = r.schedules || [];
    const body = $("#recurring-body");
    if (!list.length) {
      body.replaceChildren(h("tr", null, h("td.empty", { colspan: 9, text: "No recurring schedules." })));
      return;
    }
    body.replaceChildren(
      ...list.map((s) => {
        const next = nsDate(s.next_unix_ns);
        return h(
          "tr",
          { dataset: { name: s.name } },
          h("td", { text: s.name }),
          h("td.mono", { text: s.cron }),
          h("td", { text: s.tz || "UTC" }),
          h("td", { text: s.pool }),
          h("td", { text: s.kind || "–" }),
          h("td", { text: s.overlap || "skip" }),
          h("td", { title: next ? next.toISOString() : "", text: next ? `${fmtTime(next)} (${fmtRel(next)})` : "–" }),
          h(
            "td",
            null,
            s.last_task_id
              ? h("button.link", {
                  type: "button",
                  text: s.last_task_id,
                  "aria-label": `Open task ${s.last_task_id}`,
                  onclick: () => openTask(s.last_task_id),
                })
              : "–",
          ),
          h(
            "td",
            null,
            state.notAdmin
              ? null
              : h("button.danger", {
                  type: "button",
                  text: "Remove",
                  "aria-label": `Remove schedule ${s.name}`,
                  onclick: () => removeRecurring(s.name),
                }),
          ),
        );
      }),
    );
  } catch (e) {
    note("#recurring-note", explain(e, "Recurring schedules"));
  }
}

function forbidden(e) {
  if (e instanceof ApiError && e.status === 403) {
    state.notAdmin = true;
    $("#recurring-box").hidden = true;
    return "Adding and removing schedules needs an admin token.";
  }
  return null;
}

async function removeRecurring(name) {
  if (!window.confirm(`Remove the recurring schedule “${name}”?`)) return;
  try {
    await api("DELETE", `/v1/recurring/${encodeURIComponent(name)}`);
    note("#recurring-note", "");
  } catch (e) {
    note("#recurring-note", forbidden(e) || explain(e, `Remove ${name}`));
  }
  loadRecurring();
}

async function saveRecurring(ev) {
  ev.preventDefault();
  const f = ev.target;
  const out = $("#recurring-out");
  const name = f.name.value.trim();
  const body = { cron: f.cron.value.trim(), overlap: f.overlap.value, task: { pool: f.pool.value || undefined } };
  if (f.tz.value.trim()) body.tz = f.tz.value.trim();
  if (f.kind.value.trim()) body.task.kind = f.kind.value.trim();
  try {
    const payload = parseJsonField(f.payload.value, "Payload");
    if (payload !== undefined) body.task.payload = payload;
    const r = await api("PUT", `/v1/recurring/${encodeURIComponent(name)}`, { body });
    const next = nsDate(r.next_unix_ns);
    out.textContent = `Saved “${r.name}”${next ? `; next run ${fmtTime(next)}` : ""}.`;
    loadRecurring();
  } catch (e) {
    out.textContent = forbidden(e) || explain(e, "Save schedule");
  }
}

// ------------------------------------------------------------------------------------------
// start

function refreshAll() {
  pollSnapshot();
  rowEls.clear();
  loadTasks("newest");
  if (state.view === "workers") loadWorkers();
  if (state.view === "recurring") loadRecurring();
}

function tickRate() {
  const el = $("#rate");
  el.textContent = `${fmtNum(state.evCount)} ev/s`;
  state.evCount = 0;
}

function main() {
  setupToken();
  setupTasks();
  setupDetail();
  $("#recurring-form").addEventListener("submit", saveRecurring);
  $("#chart-window").addEventListener("change", (ev) => {
    state.chartWindow = Number(ev.target.value);
    for (const pc of state.poolCards.values()) pc.charts.forEach((c) => c.setWindow(state.chartWindow));
    scheduleDraw();
  });
  window.addEventListener("hashchange", route);
  window.addEventListener("resize", scheduleDraw);
  route();
  stream.start();
  refreshAll();
  setInterval(pollSnapshot, SNAPSHOT_MS);
  setInterval(() => {
    if (state.view === "workers" && !document.hidden) loadWorkers();
  }, WORKERS_MS);
  setInterval(() => {
    if (state.view === "recurring" && !document.hidden) loadRecurring();
  }, RECURRING_MS);
  setInterval(() => {
    tickRate();
    maybeRefreshLive();
    scheduleDraw(); // the time axis slides even without new samples
  }, 1000);
}

main();
