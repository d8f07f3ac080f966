// cronoq dashboard (docs/reference/behaviour.md#dashboard): pools, tasks, workers and recurring schedules of
// `cronoq serve`, live over /v1/events and /v1/snapshot.  Only the public HTTP API is used (api.js).

import {
  api,
  ApiError,
  detectFeatures,
  EventStream,
  getToken,
  isMissingRoute,
  onUnauthorized,
  setToken,
  taskPath,
} from "./api.js";
import { TimeChart } from "./chart.js";
import { renderResources } from "./resources.js";
import { fanSummary, fmtInZone, pendingSplit, resourceRows, rowNote, tagCell } from "./oncall.js";
import {
  $,
  $$,
  CLASSES,
  STATUSES,
  TERMINAL,
  cmpId,
  debounce,
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
const COUNT_PAGES = 100; // "select all matching": count at most this many pages of MAX_LIST
const FALLBACK_MAX = 10000; // per-task bulk actions (no bulk endpoint) act on at most this many
const PARALLEL = 6; // concurrent per-task calls of a bulk action
const DEPS_MAX = 12; // parents / children whose status the detail fetches

const state = {
  view: "pools",
  pools: [], // names, from the snapshot
  poolCards: new Map(), // name → {card, charts, fields}
  chartWindow: 1800000,
  features: {}, // what the server offers (api.js detectFeatures)
  historyLoaded: false,
  progress: new Map(), // id → {done, total, message, at, attempt} (latest reported)
  sel: new Set(), // selected task ids
  selAll: false, // "all tasks matching the filter" selected
  editing: null, // name of the recurring schedule being edited
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
    kind: "",
    tags: [], // ["k=v", ...]
    after: null, // Unix seconds
    before: null,
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
    // a sharded server merges every shard's pools; the shards that did not answer are named
    const gone = snap.unavailable_shards || [];
    note("#pools-note", gone.length ? `Unavailable shards (their pools are not shown): ${gone.join(", ")}` : "");
    banner("");
    renderSnapshot(snap);
    renderResources(snap);
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
  const res = snap.resources || [];
  $("#resources").hidden = !res.length;
  $("#resources-body").replaceChildren(...resourceRows(res));
  if (!state.historyLoaded && state.poolCards.size) loadHistory();
  scheduleDraw();
}

/** The last 30 minutes of the server's own per-second history into the charts (once). */
async function loadHistory() {
  state.historyLoaded = true;
  if (state.features.history === false) return;
  let r;
  try {
    r = await api("GET", "/v1/history", { query: { seconds: 1800 } });
  } catch (e) {
    if (isMissingRoute(e)) state.features.history = false;
    else state.historyLoaded = false; // e.g. a standby: try again with the next snapshot
    return;
  }
  for (const [name, pc] of state.poolCards) {
    const caps = [];
    const pend = [];
    for (const pt of r.points || []) {
      const p = (pt.pools || {})[name];
      if (!p) continue;
      const t = pt.at * 1000;
      caps.push({ t, row: p });
      const byClass = p.pending_by_class || [];
      pend.push({ t, row: Object.fromEntries(CLASSES.map((k, i) => [k, Number(byClass[i] || 0)])) });
    }
    pc.charts[0].load(caps);
    pc.charts[1].load(pend);
  }
  scheduleDraw();
}

async function togglePause(name, paused) {
  const verb = paused ? "resume" : "pause";
  try {
    await api("POST", `/v1/pools/${encodeURIComponent(name)}/${verb}`);
    note("#pools-note", "");
  } catch (e) {
    if (isMissingRoute(e)) {
      state.features.pausePool = false;
      for (const pc of state.poolCards.values()) pc.pauseBtn.hidden = true;
      note("#pools-note", "This server cannot pause pools.");
    } else if (e instanceof ApiError && e.status === 403) {
      note("#pools-note", `Pausing and resuming pools needs an admin token (${e.message}).`);
    } else note("#pools-note", explain(e, `${verb[0].toUpperCase()}${verb.slice(1)} pool ${name}`));
  }
  pollSnapshot();
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
  const splitText = h("div.pending-split", { dataset: { stat: "pending-split" } });
  const classbar = h("div.classbar", { "aria-hidden": "true" });
  const capCanvas = h("canvas.chart", { id: `chart-cap-${slug}`, dataset: { pool: name, chart: "capacity" } });
  const pendCanvas = h("canvas.chart.small", { id: `chart-pend-${slug}`, dataset: { pool: name, chart: "pending" } });
  const badge = h("span.badge.paused", { text: "paused", hidden: true, dataset: { badge: "paused" } });
  const pc = { paused: false };
  const pauseBtn = h("button.small", {
    type: "button",
    text: "Pause",
    "aria-label": `Pause pool ${name}`,
    hidden: !state.features.pausePool,
    onclick: () => togglePause(name, pc.paused),
  });
  const card = h(
    "article.card.pool",
    { "aria-labelledby": `pool-h-${slug}`, dataset: { pool: name } },
    h(
      "div.pool-head",
      null,
      h("h3", { id: `pool-h-${slug}`, text: name }),
      badge,
      h("span.muted", null, "pending ", pendingText),
      pauseBtn,
    ),
    splitText,
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
  return Object.assign(pc, { card, charts: [cap, pend], fields, pendingText, splitText, classbar, badge, pauseBtn, name });
}

function updatePoolCard(pc, p, now) {
  for (const [k, , fmt] of POOL_STATS) pc.fields[k].textContent = fmt(p[k]);
  pc.paused = Boolean(p.paused);
  pc.badge.hidden = !pc.paused;
  pc.card.dataset.paused = String(pc.paused);
  if ("paused" in p) hint("pausePool");
  pc.pauseBtn.hidden = !state.features.pausePool;
  pc.pauseBtn.textContent = pc.paused ? "Resume" : "Pause";
  pc.pauseBtn.setAttribute("aria-label", `${pc.paused ? "Resume" : "Pause"} pool ${pc.name}`);
  const pend = p.pending_by_class || [];
  const row = Object.fromEntries(CLASSES.map((k, i) => [k, Number(pend[i] || 0)]));
  const total = CLASSES.reduce((s, k) => s + row[k], 0);
  pc.pendingText.textContent = `${fmtNum(total)} (${CLASSES.map((k) => `${k[0]}:${fmtNum(row[k])}`).join(" ")})`;
  pc.pendingText.title = pendingSplit(p, total);
  pc.splitText.textContent = pendingSplit(p, total);
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
  return {
    pool: t.pool || undefined,
    status: t.status || undefined,
    kind: t.kind || undefined,
    tag: t.tags.length ? t.tags : undefined,
    created_after: t.after ?? undefined,
    created_before: t.before ?? undefined,
    after: String(after),
    limit,
  };
}

/** Filters the events cannot be checked against (kind, tags, creation range): the server decides. */
function serverFilter() {
  const t = state.tasks;
  return Boolean(t.kind || t.tags.length || t.after !== null || t.before !== null);
}

/** The bulk endpoints' filter object for the current filters. */
function bulkFilter() {
  const t = state.tasks;
  const f = {};
  if (t.pool) f.pools = [t.pool];
  if (t.status) f.statuses = [t.status];
  if (t.kind) f.kinds = t.kind.split(",").map((k) => k.trim()).filter(Boolean);
  if (t.tags.length) f.tags = Object.fromEntries(t.tags.map((kv) => [kv.slice(0, kv.indexOf("=")), kv.slice(kv.indexOf("=") + 1)]));
  if (t.after !== null) f.created_after = t.after;
  if (t.before !== null) f.created_before = t.before;
  return f;
}

function describeFilter() {
  const t = state.tasks;
  const parts = [];
  if (t.pool) parts.push(`pool ${t.pool}`);
  if (t.status) parts.push(`status ${t.status}`);
  if (t.kind) parts.push(`kind ${t.kind}`);
  for (const kv of t.tags) parts.push(`tag ${kv}`);
  if (t.after !== null) parts.push(`created after ${new Date(t.after * 1000).toLocaleString()}`);
  if (t.before !== null) parts.push(`created before ${new Date(t.before * 1000).toLocaleString()}`);
  return parts.length ? parts.join(", ") : "no filter (every task)";
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
      if (!t.rows.length) renderTaskTable(); // "Loading…" → "No tasks."
      renderPager();
    }
  }
}

function setRows(rows) {
  const t = state.tasks;
  if (rows.length) hintFromTask(rows[0]);
  t.rows = rows;
  t.byId = new Map(rows.map((r) => [r.id, r]));
  renderTaskTable();
  renderBulkBar();
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
    body.replaceChildren(h("tr", null, h("td.empty", { colspan: 12, text: msg })));
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

/** A progress bar (or null): `p` is {done, total, message}. */
function progressBar(p, label) {
  if (!p) return null;
  const frac = p.total ? Math.min(1, Math.max(0, p.done / p.total)) : null;
  const text = frac !== null ? `${Math.round(frac * 100)} %` : fmtNum(p.done, 2);
  const title = `${fmtNum(p.done, 2)}${p.total ? ` of ${fmtNum(p.total, 2)}` : ""}${p.message ? ` · ${p.message}` : ""}`;
  const bar = h(
    "span.pbar",
    {
      role: "progressbar",
      "aria-label": label,
      "aria-valuemin": 0,
      "aria-valuemax": p.total || undefined,
      "aria-valuenow": p.done,
      "aria-valuetext": title,
      title,
      dataset: { indeterminate: String(frac === null) },
    },
    h("span.pfill"),
  );
  bar.firstChild.style.width = `${frac === null ? 100 : frac * 100}%`;
  return h("span.progress", null, bar, h("span.ptext", { text }));
}

function rowProgress(r) {
  if (r.status !== "running") return null;
  return state.progress.get(r.id) || normProgress(r.progress);
}

/** TaskInfo.progress (proto names) or an SSE progress event → {done, total, message, at, attempt}. */
function normProgress(p) {
  if (!p) return null;
  const at = p.at !== undefined ? p.at : p.at_unix_ns ? Number(p.at_unix_ns) / 1e9 : null;
  return { done: Number(p.done) || 0, total: p.total ?? null, message: p.message || "", at, attempt: p.attempt };
}

function fillRow(tr, r) {
  const created = nsDate(r.created_unix_ns);
  const cancellable = !TERMINAL.has(r.status);
  tr.dataset.status = r.status;
  tr.dataset.key = r.key || "";
  const selected = state.selAll || state.sel.has(r.id);
  tr.classList.toggle("selected", selected);
  const pending = r.partial ? "…" : "";
  const prog = rowProgress(r);
  const note = rowNote(r);
  tr.replaceChildren(
    h(
      "td.c-sel",
      null,
      h("input", {
        type: "checkbox",
        checked: selected,
        disabled: state.selAll,
        "aria-label": `Select task ${r.id}`,
        onchange: (ev) => toggleSelect(r.id, ev.target.checked),
      }),
    ),
    h("td", null, h("button.link", { type: "button", "aria-label": `Open task ${r.id}`, onclick: () => openTask(r.id), text: r.id })),
    h("td.key", { title: r.key || "", text: r.key || "–" }),
    h("td.c-name", { title: r.name ? `named task ${r.name}` : "" }, r.name ? [h("span.badge.name", { text: "named" }), " ", r.name] : "–"),
    (({ title, children }) => h("td.c-tags", { title }, children))(tagCell(r.tags)),
    h("td", { text: r.pool || "" }),
    h("td.c-kind", { text: r.kind || pending }),
    h("td.c-prio", { text: r.priority || pending }),
    h(
      "td.c-status",
      null,
      h(`span.status.st-${r.status}`, { text: r.status }),
      prog ? [" ", progressBar(prog, `Progress of task ${r.id}`)] : null,
      (note ? h(`div.row-note.${note.kind}`, { text: note.text, title: note.title, dataset: { note: note.kind } }) : null),
    ),
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

/** Kind, priority, name... of rows made from live events (events carry neither), in one call. */
const fillPartials = debounce(async () => {
  const t = state.tasks;
  const ids = t.rows.filter((r) => r.partial && !r.filling).map((r) => r.id);
  if (!ids.length) return;
  let lo = BigInt(ids[0]);
  let hi = lo;
  for (const id of ids) {
    const b = BigInt(id);
    if (b < lo) lo = b;
    if (b > hi) hi = b;
  }
  const rows = ids.map((id) => t.byId.get(id));
  rows.forEach((r) => (r.filling = true));
  try {
    const span = Number(hi - lo) + 1;
    const q = { after: String(lo - 1n), limit: Math.min(span, MAX_LIST), pool: t.pool || undefined };
    const r = await api("GET", "/v1/tasks", { query: q });
    for (const info of r.tasks) mergeInfo(info);
  } catch {
    /* the live refresh fills them */
  } finally {
    rows.forEach((r) => (r.filling = false));
  }
}, 30);

function mergeInfo(info) {
  const t = state.tasks;
  const row = t.byId.get(info.id);
  if (!row) return;
  const status = statusRank(row.status) > statusRank(info.status) ? row.status : info.status;
  const attempt = Math.max(row.attempt || 0, info.attempt || 0);
  Object.assign(row, info, { status, attempt, partial: false });
  t.dirtyRows.add(info.id);
  renderTaskTable();
}

/** Apply a batch of events to the visible rows (called once per animation frame). */
function applyEventsToTasks(events) {
  const t = state.tasks;
  let inserted = false;
  for (const ev of events) {
    const row = t.byId.get(ev.id);
    if (row) {
      if (row.status !== ev.status) row.waiting = ""; // said for the old status
      row.status = ev.status;
      row.attempt = ev.attempt;
      if (ev.message) row.message = ev.message;
      t.dirtyRows.add(ev.id);
      continue;
    }
    if (!t.live || !matchesFilter(ev)) continue;
    if (serverFilter()) {
      t.needRefresh = true; // only the server knows whether it matches
      continue;
    }
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
  if (inserted) fillPartials();
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

// ------------------------------------------------------------------------------------------
// selection and bulk actions

function toggleSelect(id, on) {
  if (on) state.sel.add(id);
  else state.sel.delete(id);
  const tr = rowEls.get(id);
  if (tr) tr.classList.toggle("selected", on);
  renderBulkBar();
}

function clearSelection() {
  state.sel.clear();
  state.selAll = false;
  for (const id of rowEls.keys()) state.tasks.dirtyRows.add(id);
  renderTaskTable();
  renderBulkBar();
}

function renderBulkBar() {
  const n = state.sel.size;
  const bar = $("#bulk-bar");
  bar.hidden = !n && !state.selAll;
  $("#bulk-count").textContent = state.selAll
    ? `All tasks matching the filter are selected (${describeFilter()})`
    : `${fmtNum(n)} selected`;
  $("#bulk-all").hidden = state.selAll;
  const f = state.features;
  $("#bulk-replay").hidden = !(f.replay || f.bulkReplay);
  const page = $("#sel-page");
  const rows = state.tasks.rows;
  page.checked = state.selAll || (rows.length > 0 && rows.every((r) => state.sel.has(r.id)));
  page.indeterminate = !page.checked && rows.some((r) => state.sel.has(r.id));
}

function bulkOut(msg) {
  const o = $("#bulk-out");
  o.textContent = msg || "";
  o.hidden = !msg;
}

function requestKey() {
  try {
    return crypto.randomUUID();
  } catch {
    return `dash-${Date.now()}-${Math.random().toString(36).slice(2)}`;
  }
}

/** The ids matching the filters (paging the list) that `keep` accepts, up to `max`; `more` when
 * there are more. */
async function matchingIds(max, keep) {
  const ids = [];
  let after = "0";
  for (let page = 0; page < COUNT_PAGES; page++) {
    const r = await api("GET", "/v1/tasks", { query: listQuery(after, MAX_LIST) });
    for (const t of r.tasks) {
      if (!keep(t)) continue;
      if (ids.length >= max) return { ids, more: true };
      ids.push(t.id);
    }
    if (r.next_after === "0" || !r.tasks.length) return { ids, more: false };
    after = r.next_after;
  }
  return { ids, more: true };
}

/** Per-task calls, PARALLEL at a time: {ok, refused, failed}. */
async function eachTask(ids, call) {
  const out = { ok: 0, refused: 0, failed: 0, firstError: "" };
  let next = 0;
  async function lane() {
    while (next < ids.length) {
      const id = ids[next++];
      try {
        if (await call(id)) out.ok++;
        else out.refused++;
      } catch (e) {
        if (e instanceof ApiError && (e.status === 400 || e.status === 409 || e.status === 412)) out.refused++;
        else out.failed++;
        if (!out.firstError) out.firstError = e.message;
      }
    }
  }
  await Promise.all(Array.from({ length: Math.min(PARALLEL, ids.length) }, lane));
  return out;
}

async function bulkAction(kind) {
  const cancel = kind === "cancel";
  const verb = cancel ? "Cancel" : "Replay";
  const f = state.features;
  const useBulk = state.selAll && (cancel ? f.bulkCancel : f.bulkReplay);
  let ids = null;
  try {
    if (state.selAll) {
      const filter = bulkFilter();
      if (useBulk && !Object.keys(filter).length) {
        bulkOut("Choose a filter first: a bulk action needs at least one criterion.");
        return;
      }
      bulkOut("Counting the matching tasks…");
      // count only the tasks the action applies to: a finished task is not cancelled again, a
      // task that has a replay is not replayed again
      const keep = cancel
        ? (t) => !TERMINAL.has(t.status)
        : (t) => TERMINAL.has(t.status) && t.status !== "succeeded" && !t.replayed_by;
      const m = await matchingIds(useBulk ? COUNT_PAGES * MAX_LIST : FALLBACK_MAX, keep);
      const count = `${m.more ? "at least " : ""}${fmtNum(m.ids.length)}`;
      const what = cancel ? "unfinished" : "finished without success";
      if (!window.confirm(`${verb} ${count} ${what} task(s) matching ${describeFilter()}?`)) {
        bulkOut("");
        return;
      }
      if (useBulk) {
        const r = await api("POST", `/v1/tasks:${kind}`, { body: { filter, request_key: requestKey() } });
        bulkOut(`${fmtNum(r.matched)} matched, ${fmtNum(r.acted)} ${cancel ? "cancelled" : "replayed"}.`);
      } else ids = m.ids;
    } else {
      ids = [...state.sel];
      if (!window.confirm(`${verb} ${fmtNum(ids.length)} selected task(s)?`)) return;
    }
    if (ids) {
      bulkOut(`${cancel ? "Cancelling" : "Replaying"} ${fmtNum(ids.length)} task(s)…`);
      const r = await eachTask(ids, async (id) =>
        cancel ? (await api("POST", taskPath(id, "cancel"))).cancelled : Boolean((await api("POST", taskPath(id, "replay"), { body: {} })).id),
      );
      const skipped = cancel ? "already finished" : "refused";
      bulkOut(
        `${fmtNum(r.ok)} ${cancel ? "cancelled" : "replayed"}, ${fmtNum(r.refused)} ${skipped}` +
          (r.failed ? `, ${fmtNum(r.failed)} failed (${r.firstError})` : "") +
          (!cancel && r.refused && r.firstError ? ` (e.g. ${r.firstError})` : "") +
          ".",
      );
    }
    clearSelection();
  } catch (e) {
    if (isMissingRoute(e)) {
      if (cancel) f.bulkCancel = false;
      else f.bulkReplay = f.replay = false;
      renderBulkBar();
      bulkOut(`${verb}: this server does not offer it.`);
    } else bulkOut(explain(e, verb));
  }
  loadTasks("newest");
}

function setupBulk() {
  $("#sel-page").addEventListener("change", (ev) => {
    state.selAll = false;
    for (const r of state.tasks.rows) {
      if (ev.target.checked) state.sel.add(r.id);
      else state.sel.delete(r.id);
      state.tasks.dirtyRows.add(r.id);
    }
    renderTaskTable();
    renderBulkBar();
  });
  $("#bulk-all").addEventListener("click", () => {
    state.selAll = true;
    state.sel.clear();
    for (const id of rowEls.keys()) state.tasks.dirtyRows.add(id);
    renderTaskTable();
    renderBulkBar();
  });
  $("#bulk-clear").addEventListener("click", clearSelection);
  $("#bulk-cancel").addEventListener("click", () => bulkAction("cancel"));
  $("#bulk-replay").addEventListener("click", () => bulkAction("replay"));
}

/** datetime-local value (local time) → Unix seconds, or null. */
function localSeconds(v) {
  if (!v) return null;
  const ms = new Date(v).getTime();
  return Number.isNaN(ms) ? null : ms / 1000;
}

function setupTasks() {
  const sel = $("#f-status");
  for (const s of STATUSES) sel.append(h("option", { value: s, text: s }));
  const reload = () => {
    const t = state.tasks;
    t.pool = $("#f-pool").value;
    t.status = $("#f-status").value;
    t.size = Number($("#f-size").value) || 50;
    t.kind = $("#f-kind").value.trim();
    const tags = $("#f-tag").value.split(",").map((x) => x.trim()).filter(Boolean);
    const bad = tags.find((x) => x.indexOf("=") < 1);
    $("#f-tag").setCustomValidity(bad ? `“${bad}” is not key=value` : "");
    if (bad) {
      note("#tasks-note", `Tag filter: “${bad}” is not key=value.`);
      return;
    }
    t.tags = tags;
    t.after = localSeconds($("#f-after").value);
    t.before = localSeconds($("#f-before").value);
    if (state.selAll) state.selAll = false; // the filter it meant changed
    renderBulkBar();
    rowEls.clear();
    loadTasks("newest");
  };
  $("#f-pool").addEventListener("change", reload);
  $("#f-status").addEventListener("change", reload);
  $("#f-size").addEventListener("change", reload);
  for (const id of ["#f-kind", "#f-tag", "#f-after", "#f-before"]) $(id).addEventListener("change", reload);
  $("#f-clear").addEventListener("click", () => {
    for (const id of ["#f-kind", "#f-tag", "#f-after", "#f-before", "#f-search"]) $(id).value = "";
    $("#f-pool").value = "";
    $("#f-status").value = "";
    reload();
  });
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
    hintFromTask(i);
    state.detail.id = i.id;
    state.detail.info = i;
    renderDetail();
    if (TERMINAL.has(i.status)) loadResult(i.id);
    loadDeps(i);
  } catch (e) {
    if (state.detail && state.detail.id === String(id)) {
      $("#task-detail").replaceChildren(h("p.error", { text: explain(e, `Task ${id}`) }));
    }
  }
}

/** The statuses of a task's parents and children (at most DEPS_MAX of each) for the graph. */
async function loadDeps(i) {
  const ids = [...(i.parents || []).slice(0, DEPS_MAX), ...(i.children || []).slice(0, DEPS_MAX)].map(String);
  if (!ids.length) return;
  const got = await Promise.all(ids.map((id) => api("GET", taskPath(id)).catch(() => null)));
  if (!state.detail || state.detail.id !== i.id) return;
  state.detail.deps = new Map(got.filter(Boolean).map((x) => [x.id, x]));
  renderDetail();
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
  const why = rowNote(i);
  if (why && why.kind === "waiting") kv.splice(1, 0, ["Why not running", h("span", { id: "detail-waiting", text: why.text })]);
  const tags = tagCell(i.tags, 20);
  if (tags.title) kv.push(["Tags", h("span", { title: tags.title }, tags.children)]);
  if (i.name) kv.splice(2, 0, ["Name", i.name]);
  const link = (id, label) => h("button.link", { type: "button", text: id, "aria-label": `${label} ${id}`, onclick: () => openTask(id) });
  if (i.replay_of && i.replay_of !== "0") kv.push(["Replay of", link(String(i.replay_of), "Open the original task")]);
  if (i.replayed_by && i.replayed_by !== "0") kv.push(["Replayed by", link(String(i.replayed_by), "Open the replay task")]);
  const prog = state.progress.get(i.id) || normProgress(i.progress);
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
  const parts = [h("dl.kv", null, kv.map(([k, v]) => [h("dt", { text: k }), h("dd", null, v)]))];
  if (prog) {
    const at = prog.at ? new Date(prog.at * 1000) : null;
    parts.push(
      h("h3", { text: "Progress" }),
      h(
        "div.detail-progress",
        { id: "detail-progress" },
        progressBar(prog, `Progress of task ${i.id}`),
        h(
          "span.muted",
          null,
          `${fmtNum(prog.done, 2)}${prog.total ? ` of ${fmtNum(prog.total, 2)}` : ""}`,
          prog.message ? ` · ${prog.message}` : "",
          prog.attempt ? ` · attempt ${prog.attempt}` : "",
          at ? ` · ${fmtRel(at)}` : "",
        ),
      ),
    );
  }
  if (Array.isArray(i.attempts) && i.attempts.length) parts.push(h("h3", { text: "Attempts" }), attemptTimeline(i));
  if ((i.parents && i.parents.length) || (i.children && i.children.length)) {
    parts.push(h("h3", { text: "Dependencies" }), depGraph(i, d.deps || new Map()));
    if ((i.parents && i.parents.length) || (i.parent_outcomes && i.parent_outcomes.length)) {
      parts.push(parentOutcomes(i, d.deps || new Map(), link));
    }
    if (i.arguments && i.arguments.length) {
      const args = i.arguments.map((a) =>
        h("li", null, h("code", { text: a.path || "(payload)" }), ` ← ${a.mode} of `, link(String(a.task_id), "Open parent task")),
      );
      parts.push(h("ul.arguments", { "aria-label": "Arguments taken from parents" }, args));
    }
  }
  parts.push(h("h3", { text: "Status history" }), h("ol.history", { "aria-label": "Status history" }, items));
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
  if (state.features.replay && TERMINAL.has(i.status)) {
    const force = i.status === "succeeded";
    actions.append(
      h("button", {
        type: "button",
        text: force ? "Replay (force)" : "Replay",
        "aria-label": `Replay task ${i.id}`,
        onclick: () => replayTask(i.id, force),
      }),
    );
  }
  actions.append(h("button", { type: "button", text: "Refresh", "aria-label": "Refresh task details", onclick: () => openTask(i.id) }));
  actions.append(h("span#detail-out", { role: "status", "aria-live": "polite" }));
  parts.push(actions);
  box.replaceChildren(...parts);
}

async function replayTask(id, force) {
  const msg = force ? `Task ${id} succeeded. Replay it anyway?` : `Replay task ${id} (a new task with the same spec and payload)?`;
  if (!window.confirm(msg)) return;
  try {
    const r = await api("POST", taskPath(id, "replay"), { body: force ? { force: true } : {} });
    noteId(r.id);
    openTask(r.id);
  } catch (e) {
    if (isMissingRoute(e)) {
      state.features.replay = false;
      renderDetail();
    }
    const out = $("#detail-out");
    if (out) out.textContent = explain(e, `Replay task ${id}`);
  }
}

const SVG = "http://www.w3.org/2000/svg";
function svgEl(tag, attrs, ...children) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null) continue;
    if (k.startsWith("on") && typeof v === "function") el.addEventListener(k.slice(2), v);
    else if (k === "text") el.textContent = v;
    else el.setAttribute(k, String(v));
  }
  for (const c of children.flat()) if (c) el.append(c);
  return el;
}

/** Each attempt's start, end, worker, outcome and message: bars on a time axis, then a table. */
function attemptTimeline(i) {
  const atts = i.attempts;
  const now = Date.now();
  const t = (ns) => (ns === null || ns === undefined ? null : Number(ns) / 1e6);
  const starts = atts.map((a) => t(a.started_unix_ns)).filter((x) => x !== null);
  const ends = atts.map((a) => t(a.ended_unix_ns) ?? now);
  const t0 = starts.length ? Math.min(...starts) : now;
  const t1 = Math.max(t0 + 1, ...ends);
  const W = 640;
  const rowH = 18;
  const padL = 70;
  const svg = svgEl("svg", {
    class: "timeline",
    viewBox: `0 0 ${W} ${atts.length * rowH + 18}`,
    role: "img",
    "aria-label": `Attempt timeline: ${atts.length} attempt(s) over ${fmtSecs((t1 - t0) / 1000)}`,
  });
  atts.forEach((a, k) => {
    const st = t(a.started_unix_ns);
    const en = t(a.ended_unix_ns);
    const x0 = padL + ((st ?? t0) - t0) / (t1 - t0) * (W - padL - 6);
    const x1 = padL + ((en ?? now) - t0) / (t1 - t0) * (W - padL - 6);
    const y = k * rowH + 2;
    svg.append(
      svgEl("text", { x: 0, y: y + 12, class: "tl-label", text: `#${a.number}` }),
      svgEl("rect", {
        x: x0,
        y,
        width: Math.max(2, x1 - x0),
        height: rowH - 6,
        rx: 3,
        class: `tl-bar oc-${(a.outcome || (en ? "done" : "running")).replace(/[^a-z_]/g, "")}`,
      }, svgEl("title", { text: `attempt ${a.number}: ${a.outcome || "running"}${a.message ? ` · ${a.message}` : ""}` })),
    );
  });
  svg.append(
    svgEl("text", { x: padL, y: atts.length * rowH + 14, class: "tl-axis", text: fmtTime(new Date(t0)) }),
    svgEl("text", { x: W - 6, y: atts.length * rowH + 14, class: "tl-axis", "text-anchor": "end", text: `+${fmtSecs((t1 - t0) / 1000)}` }),
  );
  const table = h(
    "table.grid.attempts",
    { "aria-label": "Attempts" },
    h("thead", null, h("tr", null, ["#", "Started", "Ended", "Ran", "Worker", "Outcome", "Message"].map((x) => h("th", { scope: "col", text: x })))),
    h(
      "tbody",
      null,
      atts.map((a) => {
        const st = nsDate(a.started_unix_ns);
        const en = nsDate(a.ended_unix_ns);
        return h(
          "tr",
          { dataset: { attempt: a.number } },
          h("td", { text: a.number }),
          h("td", { text: st ? fmtTime(st) : "–" }),
          h("td", { text: en ? fmtTime(en) : st ? "running" : "–" }),
          h("td", { text: st ? fmtSecs(((en ? en.getTime() : now) - st.getTime()) / 1000) : "–" }),
          h("td", { text: a.worker || "–" }),
          h("td", null, h(`span.status.st-${a.outcome || "running"}`, { text: a.outcome || "running" })),
          h("td.msg", { text: a.message || "", title: a.message || "" }),
        );
      }),
    ),
  );
  return h("div.attempts-box", null, svg, h("div.table-wrap", null, table));
}

/** How each parent ended: the outcomes the task received (its ctx.parents, and the values of
 * its placeholder arguments). */
function parentOutcomes(i, known, link) {
  // `parent_outcomes`: one per edge in edge order, kept after the task ended (GET /v1/tasks/{ref})
  const given = i.parent_outcomes || [];
  if (given.length) {
    const rows = given.slice(0, DEPS_MAX).map((p) => {
      const how = `${p.status}${p.message ? ` · ${p.message}` : ""}`;
      return h("li", null, link(String(p.id), "Open parent task"), ` ${how}`);
    });
    return h("ul.outcomes", { "aria-label": "Outcomes received from the parents" }, rows);
  }
  const rows = (i.parents || []).slice(0, DEPS_MAX).map((raw) => {
    const id = String(raw);
    const p = known.get(id);
    const how = p ? `${p.status}${p.message ? ` · ${p.message}` : ""}` : "…";
    return h("li", null, link(id, "Open parent task"), ` ${how}`);
  });
  return h("ul.outcomes", { "aria-label": "Outcomes received from the parents" }, rows);
}

/** Parents → this task → children, with statuses; every other node opens its task. */
/** `s` cut to `n` characters with an ellipsis. */
function clip(s, n) {
  return s.length > n ? `${s.slice(0, n - 1)}…` : s;
}

function depGraph(i, known) {
  const parents = (i.parents || []).slice(0, DEPS_MAX).map(String);
  const children = (i.children || []).slice(0, DEPS_MAX).map(String);
  const rows = Math.max(parents.length, children.length, 1);
  const W = 640;
  const nodeW = 150;
  const nodeH = 30;
  const gap = 10;
  const top = 16; // the column headings
  const H = top + rows * (nodeH + gap) + gap;
  const col = [10, (W - nodeW) / 2, W - nodeW - 10];
  const yOf = (k, n) => top + gap + k * (nodeH + gap) + ((rows - n) * (nodeH + gap)) / 2;
  const svg = svgEl("svg", {
    class: "depgraph",
    viewBox: `0 0 ${W} ${H}`,
    role: "group",
    "aria-label": `Dependencies: ${parents.length} parent(s), ${children.length} child(ren)`,
  });
  const cy = yOf(0, 1);
  svg.append(
    svgEl("text", { x: col[0], y: 12, class: "tl-axis", text: parents.length ? "depends on" : "" }),
    svgEl("text", { x: col[2], y: 12, class: "tl-axis", text: children.length ? "needed by" : "" }),
  );
  const node = (id, x, y, self) => {
    const info = self ? i : known.get(id);
    const status = info ? info.status : "";
    const name = info ? info.key || info.name || "" : "";
    const label = `${self ? "this task" : `task ${id}`}${name ? ` (${name})` : ""}${status ? ` · ${status}` : ""}`;
    const g = svgEl(
      "g",
      {
        class: `dep-node${self ? " self" : ""} st-${status || "unknown"}`,
        transform: `translate(${x},${y})`,
        tabindex: self ? undefined : 0,
        role: self ? undefined : "button",
        "aria-label": self ? undefined : `Open task ${id} (${status || "status unknown"})`,
        "data-id": id,
        onclick: self ? undefined : () => openTask(id),
        onkeydown: self
          ? undefined
          : (ev) => {
              if (ev.key === "Enter" || ev.key === " ") {
                ev.preventDefault();
                openTask(id);
              }
            },
      },
      svgEl("rect", { width: nodeW, height: nodeH, rx: 6 }),
      svgEl("text", { x: 8, y: 13, class: "dep-id", text: clip(name || `#${id}`, 22) }),
      svgEl("text", { x: 8, y: 25, class: `dep-status st-${status}`, text: status || "…" }),
      svgEl("title", { text: label }),
    );
    return g;
  };
  parents.forEach((id, k) => {
    const y = yOf(k, parents.length);
    svg.append(svgEl("path", { class: "dep-edge", d: `M${col[0] + nodeW},${y + nodeH / 2} C${col[1] - 30},${y + nodeH / 2} ${col[0] + nodeW + 30},${cy + nodeH / 2} ${col[1]},${cy + nodeH / 2}` }));
  });
  children.forEach((id, k) => {
    const y = yOf(k, children.length);
    svg.append(svgEl("path", { class: "dep-edge", d: `M${col[1] + nodeW},${cy + nodeH / 2} C${col[2] - 30},${cy + nodeH / 2} ${col[1] + nodeW + 30},${y + nodeH / 2} ${col[2]},${y + nodeH / 2}` }));
  });
  parents.forEach((id, k) => svg.append(node(id, col[0], yOf(k, parents.length), false)));
  svg.append(node(i.id, col[1], cy, true));
  children.forEach((id, k) => svg.append(node(id, col[2], yOf(k, children.length), false)));
  // a wide fan-in or fan-out is summarised by status (the server counts them all); the graph
  // draws the first DEPS_MAX of each side
  const sums = [];
  const np = (i.parents || []).length;
  const nc = (i.children || []).length;
  if (np > 1) sums.push(h("p.dep-summary", { dataset: { side: "parents" }, text: fanSummary(np, i.parent_statuses, "parent", "parents") + (np > DEPS_MAX ? ` (${DEPS_MAX} drawn)` : "") }));
  if (nc > 1) sums.push(h("p.dep-summary", { dataset: { side: "children" }, text: fanSummary(nc, i.child_statuses, "child", "children") + (nc > DEPS_MAX ? ` (${DEPS_MAX} drawn)` : "") }));
  return h("div.deps-box", null, sums, svg);
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
window.cronoqDashboard = Object.freeze({ stats, features: () => ({ ...state.features }) });

const flushEvents = frameScheduler(() => {
  const batch = state.queue;
  state.queue = [];
  if (!batch.length) return;
  stats.flushes++;
  stats.maxBatch = Math.max(stats.maxBatch, batch.length);
  for (const ev of batch) {
    noteId(ev.id);
    recordHistory(ev);
    const p = state.progress.get(ev.id);
    // progress belongs to one attempt: it resets on a new one and ends with it
    if (p && (ev.status !== "running" || (p.attempt && ev.attempt > p.attempt))) state.progress.delete(ev.id);
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

const progressDirty = new Set();
const flushProgress = frameScheduler(() => {
  const t = state.tasks;
  let detail = false;
  for (const id of progressDirty) {
    if (t.byId.has(id)) t.dirtyRows.add(id);
    if (state.detail && state.detail.id === id) detail = true;
  }
  progressDirty.clear();
  if (t.dirtyRows.size) renderTaskTable();
  if (detail) renderDetail();
});

function onProgress(ev) {
  if (!ev || !ev.id) return;
  if (state.progress.size >= HISTORY_TASKS) state.progress.delete(state.progress.keys().next().value);
  state.progress.set(String(ev.id), normProgress(ev));
  progressDirty.add(String(ev.id));
  flushProgress();
}

const stream = new EventStream({
  onEvent,
  onState: onStreamState,
  onProgress,
  // progress=1 adds `event: progress` on servers that have it (others ignore the parameter)
  query: { all_transitions: "true", progress: "1" },
});

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

async function loadRecurring(force) {
  if (state.editing && !force) return; // polling must not wipe an open edit form
  try {
    const r = await api("GET", "/v1/recurring");
    note("#recurring-note", "");
    const list = r.schedules || [];
    const body = $("#recurring-body");
    if (!list.length) {
      body.replaceChildren(h("tr", null, h("td.empty", { colspan: 10, text: "No recurring schedules." })));
      return;
    }
    if (list.some((x) => "paused" in x)) hint("pauseRecurring", "runRecurring");
    state.recurring = new Map(list.map((x) => [x.name, x]));
    body.replaceChildren(...list.flatMap((x) => recurringRows(x)));
  } catch (e) {
    note("#recurring-note", explain(e, "Recurring schedules"));
  }
}

function recurringRows(sc) {
  const next = nsDate(sc.next_unix_ns);
  const f = state.features;
  const admin = !state.notAdmin;
  const paused = Boolean(sc.paused);
  const stateCell = paused
    ? [h("span.badge.paused", { text: "paused" }), sc.skipped_paused ? ` ${fmtNum(sc.skipped_paused)} skipped` : ""]
    : "active";
  const btn = (text, label, fn, cls = "") =>
    h(`button.small${cls}`, { type: "button", text, "aria-label": `${label} ${sc.name}`, onclick: fn });
  const tr = h(
    "tr",
    { dataset: { name: sc.name, paused: String(paused) } },
    h("td", { text: sc.name }),
    h("td.mono", { text: sc.cron }),
    h("td", { text: sc.tz || "UTC" }),
    h("td", { text: sc.pool }),
    h("td", { text: sc.kind || "–" }),
    h("td", { text: sc.overlap || "skip" }),
    h("td", null, stateCell),
    h("td.c-next", {
      title: next ? `${fmtTime(next)} in this browser's time zone (${next.toISOString()})` : "",
      text: paused ? "–" : next ? `${fmtInZone(next, sc.tz)} (${fmtRel(next)})` : "–",
    }),
    h(
      "td",
      null,
      sc.last_task_id
        ? h("button.link", {
            type: "button",
            text: String(sc.last_task_id),
            "aria-label": `Open the next occurrence of ${sc.name}, task ${sc.last_task_id}`,
            onclick: () => openTask(String(sc.last_task_id)),
          })
        : "–",
    ),
    h(
      "td.row-actions",
      null,
      admin && f.pauseRecurring
        ? btn(paused ? "Resume" : "Pause", paused ? "Resume schedule" : "Pause schedule", () => recurringVerb(sc.name, paused ? "resume" : "pause"))
        : null,
      admin && f.runRecurring ? btn("Run now", "Run now", () => recurringVerb(sc.name, "run")) : null,
      admin ? btn("Edit", "Edit schedule", () => editRecurring(sc.name)) : null,
      admin ? btn("Remove", "Remove schedule", () => removeRecurring(sc.name), ".danger") : null,
    ),
  );
  if (state.editing !== sc.name) return [tr];
  return [tr, editRow(sc)];
}

async function recurringVerb(name, verb) {
  try {
    const r = await api("POST", `/v1/recurring/${encodeURIComponent(name)}/${verb}`);
    await loadRecurring(true); // (clears the note: the outcome is written after it)
    if (verb === "run") {
      noteId(r.id);
      $("#recurring-note").replaceChildren(
        `Started “${name}” now: task `,
        h("button.link", { type: "button", text: r.id, "aria-label": `Open task ${r.id}`, onclick: () => openTask(r.id) }),
      );
      $("#recurring-note").hidden = false;
    } else note("#recurring-note", "");
  } catch (e) {
    let msg;
    if (isMissingRoute(e)) {
      if (verb === "run") state.features.runRecurring = false;
      else state.features.pauseRecurring = false;
      msg = "This server does not offer that action.";
    } else msg = forbidden(e) || explain(e, `${verb} ${name}`);
    await loadRecurring(true);
    note("#recurring-note", msg);
  }
}

function editRecurring(name) {
  state.editing = state.editing === name ? null : name;
  loadRecurring(true);
}

/** Client-side checks; the server's errors land on the same fields. */
function cronProblem(cron) {
  const c = cron.trim();
  if (!c) return "Enter a cron expression.";
  if (c.startsWith("@")) return null;
  const n = c.split(/\s+/).length;
  if (n < 5 || n > 6) return `A cron expression has 5 fields (minute hour day month weekday), not ${n}.`;
  return null;
}

function editRow(sc) {
  const err = (field) => h("span.field-error", { id: `edit-err-${field}`, role: "alert" });
  const form = h(
    "form.edit-form",
    { "aria-label": `Edit schedule ${sc.name}`, novalidate: true },
    h("label", null, "Cron", h("input", { name: "cron", value: sc.cron, spellcheck: "false", autocomplete: "off", "aria-describedby": "edit-err-cron" }), err("cron")),
    h("label", null, "Time zone", h("input", { name: "tz", value: sc.tz || "", placeholder: "UTC", spellcheck: "false", autocomplete: "off", "aria-describedby": "edit-err-tz" }), err("tz")),
    h(
      "label",
      null,
      "Overlap",
      h(
        "select",
        { name: "overlap", "aria-describedby": "edit-err-overlap" },
        ["skip", "allow", "queue", "queue_on_success"].map((o) => {
          const opt = h("option", { value: o, text: o });
          if (o === (sc.overlap || "skip")) opt.selected = true;
          return opt;
        }),
      ),
      err("overlap"),
    ),
    h("label.wide", null, "Payload (JSON)", h("textarea", { name: "payload", rows: 2, spellcheck: "false" })),
    h("p.muted.wide", {
      text: "Saving replaces the schedule: its pool and kind stay, the payload is what you enter here (other task fields of the template return to their defaults).",
    }),
    h(
      "div.actions.wide",
      null,
      h("button.primary", { type: "submit", text: "Save", "aria-label": `Save schedule ${sc.name}` }),
      h("button", { type: "button", text: "Cancel", "aria-label": `Cancel editing ${sc.name}`, onclick: () => editRecurring(sc.name) }),
      h("span.field-error", { id: "edit-err-form", role: "alert" }),
    ),
  );
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    saveEdit(sc, form);
  });
  return h("tr.edit-row", { dataset: { edit: sc.name } }, h("td", { colspan: 10 }, form));
}

function showFieldError(form, field, msg) {
  for (const el of $$(".field-error", form)) if (!field || el.id === `edit-err-${field}`) el.textContent = "";
  const el = $(`#edit-err-${field}`, form);
  if (el) el.textContent = msg || "";
  const input = form.elements[field];
  if (input) input.setAttribute("aria-invalid", msg ? "true" : "false");
}

async function saveEdit(sc, form) {
  for (const el of $$(".field-error", form)) el.textContent = "";
  for (const el of $$("[aria-invalid]", form)) el.setAttribute("aria-invalid", "false");
  const cron = form.elements.cron.value.trim();
  const tz = form.elements.tz.value.trim();
  const problem = cronProblem(cron);
  if (problem) return showFieldError(form, "cron", problem);
  const body = { cron, overlap: form.elements.overlap.value, task: { pool: sc.pool } };
  if (tz) body.tz = tz;
  if (sc.kind) body.task.kind = sc.kind;
  try {
    const payload = parseJsonField(form.elements.payload.value, "Payload");
    if (payload !== undefined) body.task.payload = payload;
  } catch (e) {
    return showFieldError(form, "form", e.message);
  }
  try {
    await api("PUT", `/v1/recurring/${encodeURIComponent(sc.name)}`, { body });
    state.editing = null;
    note("#recurring-note", `Saved “${sc.name}”.`);
    loadRecurring(true);
  } catch (e) {
    const msg = forbidden(e) || (e instanceof ApiError ? e.message : String(e));
    const field = /time zone|\btz\b|timezone/i.test(msg) ? "tz" : /overlap/i.test(msg) ? "overlap" : /cron/i.test(msg) ? "cron" : "form";
    showFieldError(form, field, msg);
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
  if (state.editing === name) state.editing = null;
  loadRecurring(true);
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
    loadRecurring(true);
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

/**
 * Data showing what the server has although its OpenAPI document does not say so (a pool
 * snapshot with `paused`, a task with `replay_of`): the feature is on unless an endpoint already
 * answered "no such route" (false).
 */
function hint(...names) {
  let changed = false;
  for (const n of names) {
    if (state.features[n] === undefined) {
      state.features[n] = true;
      changed = true;
    }
  }
  if (changed) applyFeatures();
}

function hintFromTask(info) {
  if (info && "replay_of" in info) hint("replay", "bulkCancel", "bulkReplay");
}

function applyFeatures() {
  const f = state.features;
  for (const el of $$(".list-filter")) el.hidden = !f.listFilters;
  for (const pc of state.poolCards.values()) pc.pauseBtn.hidden = !f.pausePool;
  document.body.dataset.features = Object.keys(f)
    .filter((k) => f[k] === true)
    .sort()
    .join(" ");
  renderBulkBar();
}

async function main() {
  setupToken();
  setupTasks();
  setupBulk();
  setupDetail();
  state.features = await detectFeatures();
  applyFeatures();
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
