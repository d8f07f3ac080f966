// Keyed resources on the pools view (docs/concepts/resources.md#keyed-resources): one row per
// keyed resource from the snapshot's gauges (live keys, waiting and running units), and on
// demand the busiest keys of one (GET /v1/resources/{name}/keys?top=10).  Self-contained: the
// pools view calls renderResources(snapshot) after each poll.

import { api } from "./api.js";
import { $, fmtNum, h } from "./util.js";

const TOP = 10;
let open = null; // the resource whose busiest keys are shown

export function renderResources(snap) {
  const panel = $("#resources-panel");
  if (!panel) return;
  const rows = (snap.resources || []).filter((r) => r.per_key); // (every resource: oncall.js's table)
  panel.hidden = rows.length === 0;
  if (!rows.length) return;
  const head = h("tr", null, ["Resource", "Kind", "Live keys", "Waiting", "In use", ""].map((t) => h("th", { scope: "col", text: t })));
  const body = rows.map((r) =>
    h(
      "tr",
      null,
      h("td", { text: r.name }),
      h("td", { text: `${r.kind} per key` }),
      h("td.num", { text: fmtNum(Number(r.keys)) }),
      h("td.num", { text: fmtNum(Number(r.waiting)) }),
      h("td.num", { text: fmtNum(Number(r.in_use)) }),
      h("td", null, h("button.link-like", { type: "button", text: "Busiest keys", onclick: () => showKeys(r.name) })),
    ),
  );
  const table = panel.querySelector("table.res-gauges") || h("table.grid.res-gauges", { "aria-label": "Keyed resources" });
  table.replaceChildren(h("thead", null, head), h("tbody", null, body));
  if (!table.parentNode) panel.append(h("h3", { text: "Keyed resources" }), table, h("div", { id: "resource-keys" }));
  if (open) showKeys(open);
}

async function showKeys(name) {
  open = name;
  const out = $("#resource-keys");
  try {
    const r = await api("GET", `/v1/resources/${encodeURIComponent(name)}/keys`, { query: { top: TOP } });
    const keys = r.keys || [];
    const rows = keys.length
      ? keys.map((k) =>
          h("tr", null, h("td", { text: k.key }), ...[k.running, k.waiting, k.limit].map((n) => h("td.num", { text: fmtNum(Number(n)) }))),
        )
      : [h("tr", null, h("td.empty", { colspan: 4, text: "No key has tasks." }))];
    out.replaceChildren(
      h("h4", { text: `Busiest keys of ${name} (top ${TOP} by waiting)` }),
      h(
        "table.grid",
        { "aria-label": `Busiest keys of ${name}` },
        h("thead", null, h("tr", null, ["Key", "Running", "Waiting", "Limit"].map((t) => h("th", { scope: "col", text: t })))),
        h("tbody", null, rows),
      ),
    );
  } catch (e) {
    out.replaceChildren(h("p.note", { text: `Busiest keys of ${name}: ${e.message || e}` }));
  }
}
