// Small DOM and formatting helpers (no framework).

/** h("tag.class", {attr: value, onclick: fn}, ...children) → Element. Text is never parsed as HTML. */
export function h(spec, attrs, ...children) {
  const [tag, ...classes] = spec.split(".");
  const el = document.createElement(tag || "div");
  if (classes.length) el.className = classes.join(" ");
  if (attrs) {
    for (const [k, v] of Object.entries(attrs)) {
      if (v === undefined || v === null || v === false) continue;
      if (k.startsWith("on") && typeof v === "function") el.addEventListener(k.slice(2), v);
      else if (k === "text") el.textContent = v;
      else if (k === "dataset") Object.assign(el.dataset, v);
      else if (k === "value") el.value = v;
      else el.setAttribute(k, v === true ? "" : String(v));
    }
  }
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

export const $ = (sel, root = document) => root.querySelector(sel);
export const $$ = (sel, root = document) => Array.from(root.querySelectorAll(sel));

// the engine's status names and priority classes, served from its tables (dashboard.py)
export { CLASSES, STATUSES, TERMINAL } from "./tables.js";

/** Compare two id strings (uint64) numerically. */
export function cmpId(a, b) {
  if (a.length !== b.length) return a.length - b.length;
  return a < b ? -1 : a > b ? 1 : 0;
}

export function fmtNum(n, digits = 0) {
  if (n === null || n === undefined || Number.isNaN(n)) return "–";
  return Number(n).toLocaleString(undefined, { maximumFractionDigits: digits, minimumFractionDigits: 0 });
}

export function fmtPct(x) {
  if (x === null || x === undefined || Number.isNaN(x)) return "–";
  return `${(x * 100).toFixed(x >= 0.995 || x === 0 ? 0 : 1)} %`;
}

export function fmtSecs(s) {
  if (s === null || s === undefined || Number.isNaN(s)) return "–";
  const a = Math.abs(s);
  if (a < 0.001) return `${(s * 1e6).toFixed(0)} µs`;
  if (a < 1) return `${(s * 1000).toFixed(a < 0.01 ? 1 : 0)} ms`;
  if (a < 60) return `${s.toFixed(a < 10 ? 2 : 1)} s`;
  if (a < 3600) return `${Math.floor(s / 60)} m ${Math.round(s % 60)} s`;
  if (a < 86400) return `${Math.floor(s / 3600)} h ${Math.round((s % 3600) / 60)} m`;
  return `${Math.floor(s / 86400)} d ${Math.round((s % 86400) / 3600)} h`;
}

/** Unix ns (number; sub-µs precision does not matter here) → Date, or null. */
export function nsDate(ns) {
  if (ns === null || ns === undefined || ns === "") return null;
  return new Date(Number(ns) / 1e6);
}

export function fmtTime(d) {
  if (!d) return "–";
  const now = new Date();
  const same = d.toDateString() === now.toDateString();
  const t = d.toLocaleTimeString(undefined, { hour12: false });
  return same ? t : `${d.toLocaleDateString()} ${t}`;
}

/** "in 5 s" / "3 m ago" relative to now. */
export function fmtRel(d) {
  if (!d) return "";
  const s = (d.getTime() - Date.now()) / 1000;
  if (Math.abs(s) < 1) return "now";
  return s > 0 ? `in ${fmtSecs(s)}` : `${fmtSecs(-s)} ago`;
}

export function debounce(fn, ms) {
  let t = null;
  return (...args) => {
    clearTimeout(t);
    t = setTimeout(() => fn(...args), ms);
  };
}

/** Calls fn at most once per animation frame (falls back to a timer while the tab is hidden). */
export function frameScheduler(fn) {
  let pending = false;
  const run = () => {
    if (!pending) return;
    pending = false;
    fn();
  };
  return () => {
    if (pending) return;
    pending = true;
    if (document.hidden) setTimeout(run, 250);
    else {
      requestAnimationFrame(run);
      setTimeout(run, 500); // rAF is throttled in background/occluded windows
    }
  };
}

/** Pretty text for a JSON value or base64 bytes, cut to `max` characters. */
export function preview(value, max = 4000) {
  let s = typeof value === "string" ? value : JSON.stringify(value, null, 2);
  if (s === undefined) s = "";
  return s.length > max ? `${s.slice(0, max)}\n… (${s.length - max} more characters)` : s;
}

export function decodeBase64Preview(b64, max = 4000) {
  try {
    const bin = atob(b64);
    const bytes = Uint8Array.from(bin, (c) => c.charCodeAt(0));
    const text = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
    return preview(text, max);
  } catch {
    return `${b64.length * 0.75 | 0} bytes (binary): ${b64.slice(0, 120)}${b64.length > 120 ? "…" : ""}`;
  }
}
