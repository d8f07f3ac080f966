// What the person on call reads first (docs/getting-started/dashboard.md#why-a-task-waits): a
// task row's customer-facing tags and one line saying why it waits or why it failed, a wide
// fan-in summarised by status, schedule times in the schedule's own time zone, and the use of
// each shared resource.  Ids stay opaque strings here (never Number(): they pass 2^53).

import { TERMINAL, fmtNum, h } from "./util.js";

/** Statuses whose message says what went wrong. */
export const UNSUCCESSFUL = new Set([...TERMINAL].filter((s) => s !== "succeeded"));

/** The tags a person put on a task (not cronoq's own `cronoq.*` ones), sorted by key. */
export function customerTags(tags) {
  return Object.entries(tags || {})
    .filter(([k]) => !k.startsWith("cronoq."))
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
}

/** The tags cell: up to `max` `key=value` chips, then "+n" (every tag in the title). */
export function tagCell(tags, max = 3) {
  const all = customerTags(tags);
  if (!all.length) return { title: "", children: ["–"] };
  const text = all.map(([k, v]) => `${k}=${v}`);
  const chips = text.slice(0, max).map((t) => h("span.tag", { text: t }));
  if (all.length > max) chips.push(h("span.muted", { text: ` +${all.length - max}` }));
  return { title: text.join("\n"), children: chips };
}

/** The first line of a message, for a one-line cell (the whole message goes in its title). */
export function firstLine(s) {
  return String(s || "").split("\n", 1)[0];
}

/**
 * The line under a task's status, or null: why an unsuccessful task ended (its message), or
 * why an unfinished one is not running (the server's `waiting`: "pool 'email' is paused",
 * "resource 'customer:42' at its limit (2 of 2 in use)", "waiting for capacity (8 of 8 slots
 * busy)", "blocked: waiting for 3 dependencies", ... including the server's own reasons).
 */
export function rowNote(r) {
  if (UNSUCCESSFUL.has(r.status) && r.message) return { kind: "failure", text: firstLine(r.message), title: r.message };
  if (!TERMINAL.has(r.status) && r.status !== "running" && r.waiting) return { kind: "waiting", text: r.waiting, title: r.waiting };
  return null;
}

/** "300 parents: 298 succeeded, 2 failed" from a status → count map (most first). */
export function fanSummary(total, counts, one, many) {
  const parts = Object.entries(counts || {})
    .map(([s, n]) => [s, Number(n)])
    .filter(([, n]) => n > 0)
    .sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1))
    .map(([s, n]) => `${fmtNum(n)} ${s.replace("_", " ")}`);
  const noun = total === 1 ? one : many;
  return parts.length ? `${fmtNum(total)} ${noun}: ${parts.join(", ")}` : `${fmtNum(total)} ${noun}`;
}

const ZONE_FORMATS = new Map();

/** `d` as the schedule's wall clock: "2026-12-05 03:00 CET" (UTC when `tz` is empty). */
export function fmtInZone(d, tz) {
  if (!d) return "–";
  const zone = tz || "UTC";
  let f = ZONE_FORMATS.get(zone);
  if (!f) {
    try {
      f = new Intl.DateTimeFormat("en-CA", {
        timeZone: zone,
        year: "numeric",
        month: "2-digit",
        day: "2-digit",
        hour: "2-digit",
        minute: "2-digit",
        second: "2-digit",
        hourCycle: "h23",
        timeZoneName: "short",
      });
    } catch {
      return `${d.toISOString().replace("T", " ").slice(0, 19)} UTC`; // a zone this browser does not know
    }
    ZONE_FORMATS.set(zone, f);
  }
  const p = Object.fromEntries(f.formatToParts(d).map((x) => [x.type, x.value]));
  const secs = p.second && p.second !== "00" ? `:${p.second}` : "";
  return `${p.year}-${p.month}-${p.day} ${p.hour}:${p.minute}${secs} ${p.timeZoneName}`;
}

/** The Resources table of the Pools view: per resource its use and the tasks it holds back. */
export function resourceRows(resources) {
  return (resources || []).map((r) => {
    const cap = Number(r.capacity || 0);
    const used = Number(r.in_use || 0);
    const waiting = Number(r.waiting || 0);
    return h(
      "tr",
      { dataset: { resource: r.name, full: String(cap > 0 && used >= cap) } },
      h("td.mono", { text: r.name }),
      h("td", { text: r.kind === "token_bucket" ? "token bucket" : r.kind || "–" }),
      h("td", { text: `${fmtNum(used)} of ${fmtNum(cap)}` }),
      h("td", { text: fmtNum(waiting), dataset: { waiting: String(waiting) } }),
    );
  });
}

/** The pool card's pending line: how many could run now, and how many wait for something. */
export function pendingSplit(p, total) {
  const ready = Number(p.ready || 0);
  return `${fmtNum(ready)} ready · ${fmtNum(Math.max(0, total - ready))} blocked, scheduled or retrying`;
}
