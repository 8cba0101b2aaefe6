// The /status page: plain HTML, CSS and a small script that polls /status.json. Nothing is
// loaded from elsewhere.
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
 header span{opacity:.8}
 main{padding:16px 20px}
 h2{font-size:15px;margin:18px 0 8px}
 table{border-collapse:collapse;background:#fff;box-shadow:0 1px 2px #0002;width:100%}
 th,td{padding:6px 10px;border-bottom:1px solid #e3e6eb;text-align:left;vertical-align:middle}
 th{background:#eef0f4;font-weight:600}
 td.num{text-align:right;font-variant-numeric:tabular-nums}
 code{font-size:12px}
 td:first-child,td:nth-child(3){white-space:nowrap}
 .note{color:#667;font-size:12px;margin-top:6px}
 .state{padding:2px 8px;border-radius:10px;font-size:12px;white-space:nowrap}
 .reading{background:#d7f5dd;color:#125c22}
 .ended{background:#e4e4e4;color:#444}
 .waiting{background:#fff1c7;color:#6b5200}
 .unassigned{background:#fde0dd;color:#8a1c12}
 .handing{background:#dde8fd;color:#123e8a}
 .stalled{background:#c62828;color:#fff;margin-left:4px}
 .self{font-weight:600}
 .ok{color:#1a7f37}.bad{color:#c62828}
 #error{color:#c62828}
 svg{display:block}
</style></head>
<body>
<header><h1>kcl-cpp</h1>
 <span>application <b id="app">-</b></span><span>stream <b id="stream">-</b></span>
 <span>this worker <b id="self">-</b></span><span id="health">-</span>
 <span id="updated">loading...</span></header>
<main>
<div id="error"></div>
<h2>Workers</h2>
<table id="workers"><thead><tr><th>Worker</th><th>Leases</th></tr></thead><tbody></tbody></table>
<h2>Shards</h2>
<table id="shards"><thead><tr><th>Shard</th><th>State</th><th>Owner</th><th>Checkpoint</th>
<th>Parents</th><th>Children</th><th>Behind latest</th><th>Records/s (last minutes)</th></tr></thead>
<tbody></tbody></table>
<p class="note">From the lease table, read by this worker every few seconds. Lag and records/s
are known for this worker's shards; open another worker's /status for its own.</p>
</main>
<script>
"use strict";
function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = text;
  if (cls) e.className = cls;
  return e;
}
function spark(values) {
  const w = 160, h = 28, ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("width", w); svg.setAttribute("height", h);
  svg.setAttribute("class", "spark");
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
function render(s) {
  document.getElementById("app").textContent = s.application;
  document.getElementById("stream").textContent = s.stream;
  document.getElementById("self").textContent = s.worker_id;
  const hl = document.getElementById("health");
  const warnings = s.health.warnings || [];
  hl.textContent = (s.health.live ? "live" : "FAILED") + ", " + (s.health.ready ? "ready" : "not ready") +
    (warnings.length ? "; " + warnings.join("; ") : "");
  hl.className = s.health.live && s.health.ready && !warnings.length ? "ok" : "bad";
  document.getElementById("updated").textContent =
    "updated " + new Date(s.generated_at_ms).toLocaleTimeString();
  document.getElementById("error").textContent = s.error || "";
  const wb = document.querySelector("#workers tbody");
  wb.replaceChildren();
  for (const w of s.workers) {
    const tr = el("tr"); tr.dataset.worker = w.worker_id;
    tr.appendChild(el("td", w.worker_id + (w.self ? " (this worker)" : ""), w.self ? "self" : ""));
    tr.appendChild(el("td", String(w.leases), "num"));
    wb.appendChild(tr);
  }
  const sb = document.querySelector("#shards tbody");
  sb.replaceChildren();
  for (const sh of s.shards) {
    const tr = el("tr"); tr.dataset.shard = sh.shard_id; tr.dataset.owner = sh.owner;
    tr.appendChild(el("td", sh.shard_id));
    const st = el("td"); st.appendChild(el("span", sh.state, "state " + sh.state.split(" ")[0]));
    if (sh.stalled) {
      const x = el("span", "stalled: " + sh.stalled.cause, "state stalled");
      x.title = sh.stalled.detail + " (since " + new Date(sh.stalled.since_ms).toISOString() + ")";
      st.appendChild(x);
    }
    tr.appendChild(st);
    tr.appendChild(el("td", (sh.owner || "-") + (sh.handoff_to ? " \u2192 " + sh.handoff_to : ""),
                      sh.owner === s.worker_id ? "self" : ""));
    const cp = el("td"); cp.appendChild(el("code", sh.checkpoint)); tr.appendChild(cp);
    tr.appendChild(el("td", sh.parents.join(", ") || "-"));
    tr.appendChild(el("td", sh.children.join(", ") || "-"));
    tr.appendChild(el("td", sh.millis_behind === null ? "-" : sh.millis_behind + " ms", "num"));
    const rt = el("td");
    const r = sh.records_per_second;
    rt.appendChild(spark(r));
    if (r.length) rt.appendChild(el("span", r[r.length - 1].toFixed(1) + "/s"));
    tr.appendChild(rt);
    sb.appendChild(tr);
  }
  document.body.dataset.generated = String(s.generated_at_ms);
}
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
