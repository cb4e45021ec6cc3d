// Drives the pass viewer as a person would, inside headless Chromium, for
// tests/viewer_browser.rs: the test appends this script to a copy of the
// page and reads what it writes into <pre id="driver-result"> from the
// DOM Chromium dumps. Every action is a click event on the page's own
// elements, handled by the page's own listeners.
"use strict";
(function () {
  const out = [];
  const put = (k, v) => out.push(k + "=" + v);
  const click = (e) => e.dispatchEvent(new MouseEvent("click", { bubbles: true, cancelable: true, view: window }));
  const count = (sel) => document.querySelectorAll(sel).length;
  const V = window.fuelViewer;
  put("ready_ms", V ? V.ready.toFixed(1) : "none");
  put("pwned", typeof window.pwned);
  put("scripts", document.scripts.length);
  put("title_chars", document.getElementById("title").textContent.length);
  const rows = Array.from(document.querySelectorAll("#index tbody tr"));
  put("rows", rows.length);
  put("names", rows.map((r) => r.cells[1].textContent).join(","));
  put("results", rows.map((r) => r.cells[2].textContent.split(":")[0]).join(","));
  if (!V) { finish(); return; }
  const k = rows.findIndex((r) => r.cells[1].textContent === "lower-collectives");
  click(rows[k]);
  put("current", rows.findIndex((r) => r.classList.contains("cur")));
  const made = new Set(V.data.links.map((l) => l[0]));
  const t0 = performance.now();
  const band = document.querySelector("#canvas g.band.collapsed");
  put("collapsed_bands", count("#canvas g.band.collapsed"));
  if (band) click(band.querySelector("rect"));
  put("open_band_ms", (performance.now() - t0).toFixed(1));
  const node = Array.from(document.querySelectorAll("#canvas g.n")).find((g) => made.has(Number(g.dataset.v)));
  put("pictured_nodes", count("#canvas g.n"));
  if (node) click(node.querySelector("rect, polygon"));
  put("clicked", node ? node.dataset.v : "none");
  put("hl_here", count("#canvas g.n.hl"));
  put("badges", rows.map((r) => r.cells[5].textContent).join(","));
  const t1 = performance.now();
  click(document.getElementById("hood"));
  put("hood_nodes", count("#canvas g.n"));
  put("hood_ms", (performance.now() - t1).toFixed(1));
  click(document.getElementById("whole"));
  click(rows[0]);
  put("marked_in_input", count("#canvas g.n.src, #canvas g.n.hl"));
  put("ir_marked_in_input", count("#pane-ir .line.hl"));
  click(rows[rows.length - 1]);
  put("hl_last", count("#canvas g.n.hl"));
  const line = Array.from(document.querySelectorAll("#pane-ir .line")).find((l) => Number(l.dataset.v) >= 0 && !l.classList.contains("hl"));
  if (line) click(line);
  put("ir_click_selects", line ? String(V.state.v === Number(line.dataset.v)) : "none");
  put("decisions", count("#pane-dec .dec"));
  put("picked", count("#pane-dec tr.pick"));
  click(rows[k]);
  click(document.querySelector('#tabs button[data-tab="diff"]'));
  put("diff_shown", String(document.getElementById("pane-diff").classList.contains("on")));
  put("diff_marked", count("#pane-diff .d-add, #pane-diff .d-del, #pane-diff .d-from, #pane-diff .d-to"));
  put("timeline_bars", count("#pane-time .bar"));
  finish();
  function finish() {
    const pre = document.createElement("pre");
    pre.id = "driver-result";
    pre.textContent = "\n" + out.join("\n") + "\n";
    document.body.appendChild(pre);
  }
})();
