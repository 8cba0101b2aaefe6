// The /status page: plain HTML, CSS and a small script that polls /status.json (the fleet
// view) and draws the workers' health and every shard, grouped (by worker, stream or state),
// sortable by any column, laggiest first. Nothing is loaded from elsewhere.
#include "observability/status_server.h"

namespace kcl::observability {

std::string_view status_page_html() {
  static constexpr std::string_view kPage = R"HTML(<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>kcl-cpp status</title>
<style>
 body{font:14px/1.4 system-ui,sans-serif;margin:0;background:#f6f7f9;color:#1d2330}
 header{background:#1d2330;color:#fff;padding:12px 20px;display:flex;gap:24px;align-items:baseline;flex-wrap:wrap}
 header h1{font-size:18px;margin:0}
 header span{opacity:.85}
 main{padding:16px 20px}
 h2{font-size:15px;margin:18px 0 8px}
 table{border-collapse:collapse;background:#fff;box-shadow:0 1px 2px #0002;width:100%}
 th,td{padding:5px 10px;border-bottom:1px solid #e3e6eb;text-align:left;vertical-align:middle}
 th{background:#eef0f4;font-weight:600;cursor:pointer;user-select:none;white-space:nowrap}
 th.sorted::after{content:" \25BC";font-size:10px}
 th.sorted.asc::after{content:" \25B2"}
 td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
 code{font-size:12px}
 td.id{white-space:nowrap}
 tr.group td{background:#e8ecf3;font-weight:600;cursor:pointer}
 tr.group td span{font-weight:400;color:#445;margin-left:14px}
 .controls{display:flex;gap:16px;align-items:center;margin:8px 0;flex-wrap:wrap}
 .note{color:#667;font-size:12px;margin-top:6px}
 .state{padding:2px 8px;border-radius:10px;font-size:12px;white-space:nowrap}
 .reading{background:#d7f5dd;color:#125c22}
 .ended{background:#e4e4e4;color:#444}
 .waiting{background:#fff1c7;color:#6b5200}
 .unassigned{background:#fde0dd;color:#8a1c12}
 .handing{background:#dde8fd;color:#123e8a}
 .stalled{background:#c62828;color:#fff;margin-left:4px}
 .self{font-weight:600}
 .ok{color:#1a7f37}.bad{color:#c62828}.warn{color:#a05a00}
 #error{color:#c62828}
 svg{display:inline-block;vertical-align:middle;margin-right:6px}
 td.rate{white-space:nowrap}
</style></head>
<body>
<header><h1>kcl-cpp</h1>
 <span>application <b id="app">-</b></span><span>stream <b id="stream">-</b></span>
 <span>this worker <b id="self">-</b></span><span id="health">-</span>
 <span id="fleet">-</span><span id="updated">loading...</span></header>
<main>
<div id="error"></div>
<h2>Workers</h2>
<table id="workers"><thead><tr><th data-key="worker_id">Worker</th><th data-key="leases">Leases</th>
<th data-key="health">Health</th><th data-key="cpu">CPU</th><th data-key="rss">RSS</th>
<th data-key="threads">Threads</th><th data-key="version">Version</th><th data-key="age">Report age</th>
<th data-key="url">Endpoint</th></tr></thead><tbody></tbody></table>
<h2>Shards</h2>
<div class="controls">
 <label>Group by <select id="group"><option value="owner">worker</option>
  <option value="stream">stream</option><option value="state">state</option>
  <option value="">nothing</option></select></label>
 <label>Filter <input id="filter" placeholder="shard, worker or state" size="24"></label>
 <span class="note" id="counts"></span>
</div>
<table id="shards"><thead><tr><th data-key="shard_id">Shard</th><th data-key="state">State</th>
<th data-key="owner">Owner</th><th data-key="lag">Behind latest</th><th data-key="rate">Records/s (last minutes)</th>
<th data-key="progress">Last progress</th><th data-key="consumer_state">Consumer</th>
<th data-key="parents">Parents</th><th data-key="children">Children</th><th data-key="checkpoint">Checkpoint</th>
<th data-key="dead_lettered">Dead-lettered</th></tr></thead></table>
<p class="note">Shards and owners from the lease table; lag, records/s, last progress and
consumer state as each shard's owner reports them; health as each worker reports it
(<span id="directory">-</span>). Click a column to sort, a group to fold it.</p>
</main>
<script>
"use strict";
let last = null;
const ui = {shardKey: "lag", shardAsc: false, workerKey: "worker_id", workerAsc: true, folded: new Set()};
function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = text;
  if (cls) e.className = cls;
  return e;
}
function spark(values) {
  const w = 140, h = 24, ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("width", w); svg.setAttribute("height", h);
  if (!values || values.length < 2) return svg;
  const max = Math.max(1, ...values);
  const pts = values.map((v, i) =>
    (i * w / (values.length - 1)).toFixed(1) + "," + (h - 2 - (v / max) * (h - 4)).toFixed(1));
  const line = document.createElementNS(ns, "polyline");
  line.setAttribute("points", pts.join(" "));
  line.setAttribute("fill", "none"); line.setAttribute("stroke", "#2f6fdf");
  line.setAttribute("stroke-width", "1.5");
  svg.appendChild(line);
  return svg;
}
function ms(v) {
  if (v === null || v === undefined) return "-";
  return v < 1000 ? v + " ms" : v < 60000 ? (v / 1000).toFixed(1) + " s" : (v / 60000).toFixed(1) + " min";
}
function mib(b) { return b ? (b / 1048576).toFixed(0) + " MiB" : "-"; }
function rate(sh) { const r = sh.records_per_second || []; return r.length ? r[r.length - 1] : null; }
function shardValue(sh, key, now) {
  switch (key) {
    case "lag": return sh.millis_behind;
    case "rate": return rate(sh);
    case "progress": return sh.last_progress_ms ? now - sh.last_progress_ms : null;
    case "parents": return (sh.parents || []).join(",");
    case "children": return (sh.children || []).join(",");
    default: return sh[key] === undefined ? null : sh[key];
  }
}
function workerValue(w, key) {
  const p = w.health ? w.health.process : null;
  switch (key) {
    case "health": return w.health ? (w.health.live ? 1 : 0) + (w.health.ready ? 1 : 0) : -1;
    case "cpu": return p ? p.cpu_percent : null;
    case "rss": return p ? p.rss_bytes : null;
    case "threads": return p ? p.threads : null;
    case "version": return w.health ? w.health.version : null;
    case "age": return w.age_ms === undefined ? null : w.age_ms;
    case "url": return w.status_url;
    default: return w[key];
  }
}
// Sorts by `value`; missing values last whatever the direction.
function sortBy(list, value, asc) {
  return list.slice().sort((a, b) => {
    const x = value(a), y = value(b);
    if (x === y) return 0;
    if (x === null || x === undefined) return 1;
    if (y === null || y === undefined) return -1;
    const c = typeof x === "number" && typeof y === "number" ? x - y : String(x).localeCompare(String(y), undefined, {numeric: true});
    return asc ? c : -c;
  });
}
function markSorted(table, key, asc) {
  for (const th of document.querySelectorAll(table + " th")) {
    th.className = th.dataset.key === key ? "sorted" + (asc ? " asc" : "") : "";
  }
}
function renderHeader(s) {
  document.getElementById("app").textContent = s.application;
  document.getElementById("stream").textContent = s.stream;
  document.getElementById("self").textContent = s.worker_id;
  const hl = document.getElementById("health");
  const warnings = s.health.warnings || [];
  hl.textContent = (s.health.live ? "live" : "FAILED") + ", " + (s.health.ready ? "ready" : "not ready") +
    (warnings.length ? "; " + warnings.join("; ") : "");
  hl.className = s.health.live && s.health.ready && !warnings.length ? "ok" : "bad";
  const f = s.fleet || {};
  const fl = document.getElementById("fleet");
  fl.textContent = (f.workers_reachable || 0) + "/" + (f.workers || 0) + " workers reporting, " +
    (f.shards_with_figures || 0) + "/" + (f.shards || 0) + " shards with figures, oldest report " + ms(f.oldest_report_ms);
  fl.className = f.workers_reachable === f.workers ? "" : "warn";
  document.getElementById("directory").textContent = "peers from " + (f.directory || "-");
  document.getElementById("updated").textContent = "updated " + new Date(s.generated_at_ms).toLocaleTimeString();
  document.getElementById("error").textContent = s.error || "";
}
function renderWorkers(s) {
  const wb = document.querySelector("#workers tbody");
  wb.replaceChildren();
  for (const w of sortBy(s.workers, x => workerValue(x, ui.workerKey), ui.workerAsc)) {
    const tr = el("tr"); tr.dataset.worker = w.worker_id;
    tr.appendChild(el("td", w.worker_id + (w.self ? " (this worker)" : ""), w.self ? "self id" : "id"));
    tr.appendChild(el("td", String(w.leases), "num"));
    const h = w.health, p = h ? h.process : null;
    if (h) {
      const warn = (h.warnings || []).length;
      tr.appendChild(el("td", (h.live ? "live" : "FAILED") + ", " + (h.ready ? "ready" : "not ready") +
        (warn ? ", " + warn + " warning(s): " + h.warnings.join("; ") : ""), h.live && h.ready && !warn ? "ok" : "bad"));
    } else {
      tr.appendChild(el("td", "unreachable: " + (w.error || "?"), "bad"));
    }
    tr.appendChild(el("td", p && p.cpu_percent !== null ? p.cpu_percent.toFixed(0) + " %" : "-", "num"));
    tr.appendChild(el("td", p ? mib(p.rss_bytes) : "-", "num"));
    tr.appendChild(el("td", p ? String(p.threads) : "-", "num"));
    tr.appendChild(el("td", h ? h.version : "-"));
    tr.appendChild(el("td", w.age_ms === undefined ? "-" : ms(w.age_ms), "num"));
    tr.appendChild(el("td", w.status_url || "-"));
    wb.appendChild(tr);
  }
  markSorted("#workers", ui.workerKey, ui.workerAsc);
}
function shardRow(s, sh, now) {
  const tr = el("tr"); tr.dataset.shard = sh.shard_id; tr.dataset.owner = sh.owner;
  tr.appendChild(el("td", sh.shard_id, "id"));
  const st = el("td"); st.appendChild(el("span", sh.state, "state " + sh.state.split(" ")[0]));
  if (sh.stalled) {
    const x = el("span", "stalled: " + sh.stalled.cause, "state stalled");
    x.title = sh.stalled.detail + " (since " + new Date(sh.stalled.since_ms).toISOString() + ")";
    st.appendChild(x);
  }
  tr.appendChild(st);
  tr.appendChild(el("td", (sh.owner || "-") + (sh.handoff_to ? " \u2192 " + sh.handoff_to : ""),
                    sh.owner === s.worker_id ? "self id" : "id"));
  tr.appendChild(el("td", sh.millis_behind === null || sh.millis_behind === undefined ? "-" : sh.millis_behind + " ms", "num"));
  const rt = el("td", null, "rate");
  rt.appendChild(spark(sh.records_per_second));
  const r = rate(sh);
  if (r !== null) rt.appendChild(el("span", r.toFixed(1) + "/s"));
  tr.appendChild(rt);
  tr.appendChild(el("td", sh.last_progress_ms ? ms(Math.max(0, now - sh.last_progress_ms)) + " ago" : "-", "num"));
  tr.appendChild(el("td", sh.consumer_state || "-"));
  tr.appendChild(el("td", (sh.parents || []).join(", ") || "-"));
  tr.appendChild(el("td", (sh.children || []).join(", ") || "-"));
  const cp = el("td"); cp.appendChild(el("code", sh.checkpoint)); tr.appendChild(cp);
  tr.appendChild(el("td", sh.dead_lettered ? String(sh.dead_lettered) : "-", sh.dead_lettered ? "num bad" : "num"));
  return tr;
}
function groupRow(name, rows, cols) {
  const tr = el("tr", null, "group"); tr.dataset.group = name;
  const td = el("td"); td.colSpan = cols;
  td.appendChild(document.createTextNode((ui.folded.has(name) ? "\u25B8 " : "\u25BE ") + (name || "(none)")));
  const lags = rows.map(x => x.millis_behind).filter(v => v !== null && v !== undefined);
  const total = rows.reduce((a, x) => a + (rate(x) || 0), 0);
  td.appendChild(el("span", rows.length + " shards, max behind " + (lags.length ? Math.max(...lags) + " ms" : "-") +
                    ", " + total.toFixed(1) + " records/s"));
  tr.appendChild(td);
  tr.onclick = () => { ui.folded.has(name) ? ui.folded.delete(name) : ui.folded.add(name); render(last); };
  return tr;
}
function renderShards(s) {
  const table = document.getElementById("shards");
  for (const b of table.querySelectorAll("tbody")) b.remove();
  const now = s.generated_at_ms, q = document.getElementById("filter").value.trim().toLowerCase();
  const shown = s.shards.filter(sh => !q || [sh.shard_id, sh.owner, sh.state, sh.stream || ""].some(v => (v || "").toLowerCase().includes(q)));
  const sorted = sortBy(shown, x => shardValue(x, ui.shardKey, now), ui.shardAsc);
  const by = document.getElementById("group").value;
  const groups = new Map();
  for (const sh of sorted) {
    const g = by ? (sh[by] || "") : "";
    if (!groups.has(g)) groups.set(g, []);
    groups.get(g).push(sh);
  }
  // Groups in the order of their first (most urgent) shard.
  for (const [name, rows] of groups) {
    const body = el("tbody");
    if (by) body.appendChild(groupRow(name, rows, 11));
    if (!by || !ui.folded.has(name)) for (const sh of rows) body.appendChild(shardRow(s, sh, now));
    table.appendChild(body);
  }
  document.getElementById("counts").textContent = shown.length + " of " + s.shards.length + " shards";
  markSorted("#shards", ui.shardKey, ui.shardAsc);
}
function render(s) {
  if (!s) return;
  last = s;
  renderHeader(s);
  renderWorkers(s);
  renderShards(s);
  document.body.dataset.generated = String(s.generated_at_ms);
}
function sortable(table, keyName, ascName, numericDesc) {
  document.querySelector(table + " thead").addEventListener("click", e => {
    const k = e.target.dataset.key; if (!k) return;
    if (ui[keyName] === k) ui[ascName] = !ui[ascName];
    else { ui[keyName] = k; ui[ascName] = !numericDesc.includes(k); }
    render(last);
  });
}
sortable("#shards", "shardKey", "shardAsc", ["lag", "rate", "progress", "dead_lettered"]);
sortable("#workers", "workerKey", "workerAsc", ["leases", "cpu", "rss", "threads", "age"]);
document.getElementById("group").onchange = () => render(last);
document.getElementById("filter").oninput = () => render(last);
let interval = 3000;
async function poll() {
  try {
    const r = await fetch("status.json", {cache: "no-store"});
    const s = await r.json();
    render(s);
    interval = Math.max(1000, Math.min(5000, s.refresh_interval_ms || 3000));
  } catch (e) {
    document.getElementById("error").textContent = "cannot reach the worker: " + e;
  }
  setTimeout(poll, interval);
}
poll();
</script>
</body></html>
)HTML";
  return kPage;
}

}  // namespace kcl::observability
