// The pass viewer's script (fuel-graph-ext/src/html/viewer.js), compiled into
// every page. It reads the JSON in #fuel-data and builds the page; text from
// the graph only ever reaches the page through textContent, and the SVG
// pictures were escaped when Rust drew them.
"use strict";
(function () {
  const D = JSON.parse(document.getElementById("fuel-data").textContent);
  const $ = (id) => document.getElementById(id);
  const el = (tag, cls, text) => {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  };
  const SVGNS = "http://www.w3.org/2000/svg";
  const S = { step: 0, v: -1, sel: new Set(), src: new Set(), zoom: 1, view: "whole", band: -1, tab: "ir" };
  // Lowering links: made node -> source, and source -> made nodes.
  const from = new Map(), made = new Map();
  for (const [a, b] of D.links) {
    from.set(a, b);
    if (!made.has(b)) made.set(b, []);
    made.get(b).push(a);
  }
  const stepNodes = D.steps.map((s) => new Map(s.nodes.map((n) => [n[0], n])));

  function fmtUs(us) {
    if (us >= 1000) return (us / 1000).toFixed(2) + " ms";
    return us.toFixed(0) + " µs";
  }

  function buildIndex() {
    const body = $("index").tBodies[0];
    D.steps.forEach((s, k) => {
      const tr = el("tr", "step");
      tr.dataset.k = k;
      tr.appendChild(el("td", "", String(k)));
      tr.appendChild(el("td", "", s.name));
      const res = k === 0 ? el("td", "un", "input") :
        s.changed ? el("td", "ch", "changed") : el("td", "un", "unchanged: " + s.why);
      tr.appendChild(res);
      tr.appendChild(el("td", "", k === 0 ? "" : fmtUs(s.us)));
      tr.appendChild(el("td", "", k === 0 ? String(s.after) : s.before + " → " + s.after));
      const b = el("td");
      b.appendChild(el("span", "badge zero", "0"));
      tr.appendChild(b);
      tr.addEventListener("click", () => selectStep(k));
      body.appendChild(tr);
    });
  }

  // What clicking value v highlights: v itself, what it was lowered into,
  // and (marked apart) the collective it came from.
  function related(v) {
    const sel = new Set([v]), src = new Set();
    for (const m of made.get(v) || []) sel.add(m);
    if (from.has(v)) src.add(from.get(v));
    return [sel, src];
  }

  function selectNode(v) {
    S.v = v;
    [S.sel, S.src] = v < 0 ? [new Set(), new Set()] : related(v);
    $("hood").disabled = v < 0;
    paintMarks();
    showInfo();
    updateHash();
  }

  function paintMarks() {
    document.querySelectorAll("#canvas g.n").forEach((g) => {
      const v = Number(g.dataset.v);
      g.classList.toggle("hl", S.sel.has(v));
      g.classList.toggle("src", S.src.has(v));
    });
    document.querySelectorAll("#canvas path").forEach((p) => {
      p.classList.toggle("hl", S.sel.has(Number(p.dataset.a)) && S.sel.has(Number(p.dataset.b)));
    });
    document.querySelectorAll("#pane-ir .line").forEach((l) => {
      l.classList.toggle("hl", S.sel.has(Number(l.dataset.v)) || S.src.has(Number(l.dataset.v)));
    });
    document.querySelectorAll(".dec").forEach((d) => d.classList.toggle("hl", S.sel.has(Number(d.dataset.v)) || S.src.has(Number(d.dataset.v))));
    document.querySelectorAll(".bar").forEach((b) => b.classList.toggle("hl", S.sel.has(Number(b.dataset.v))));
    const rows = $("index").tBodies[0].rows;
    D.steps.forEach((s, k) => {
      let n = 0;
      for (const v of S.sel) if (stepNodes[k].has(v)) n++;
      for (const v of S.src) if (stepNodes[k].has(v)) n++;
      const b = rows[k].cells[5].firstChild;
      b.textContent = String(n);
      b.className = n ? "badge" : "badge zero";
    });
  }

  function showInfo() {
    const info = $("info");
    info.textContent = "";
    if (S.v < 0) { info.textContent = "Click a node in the picture or a line of the IR."; return; }
    let node = null;
    for (const m of stepNodes) if (m.has(S.v)) { node = m.get(S.v); break; }
    if (node) { info.appendChild(el("div", "", node[1])); info.appendChild(el("div", "", node[2])); }
    const present = [];
    D.steps.forEach((s, k) => { if (stepNodes[k].has(S.v)) present.push(k); });
    const p = el("div", "", "in steps: ");
    for (const k of present) {
      const a = el("a", "", String(k) + " ");
      a.addEventListener("click", () => selectStep(k));
      p.appendChild(a);
    }
    info.appendChild(p);
    if (from.has(S.v)) info.appendChild(el("div", "", "lowered from a collective (marked purple in earlier steps)"));
    if (made.has(S.v)) info.appendChild(el("div", "", "lowered into " + made.get(S.v).length + " nodes (highlighted in later steps)"));
  }

  function setZoom(z) {
    S.zoom = Math.max(0.05, Math.min(4, z));
    const svg = $("canvas").querySelector("svg");
    if (svg) svg.style.transform = "scale(" + S.zoom + ")";
  }

  function fit() {
    const svg = $("canvas").querySelector("svg");
    if (!svg) return;
    const w = Number(svg.getAttribute("width")) || 1;
    setZoom(Math.max(0.6, Math.min(1, ($("canvas").clientWidth - 8) / w)));
  }

  function drawPicture() {
    const s = D.steps[S.step], c = $("canvas");
    let note = "";
    if (S.view === "hood" && S.v >= 0 && stepNodes[S.step].has(S.v)) {
      c.textContent = "";
      c.appendChild(neighbourhood(s, S.v));
      note = "radius-2 neighbourhood of the selected node";
    } else if (s.collapsed && S.band >= 0 && s.bandSvg) {
      c.innerHTML = s.bandSvg[S.band];
      note = "device " + s.bands[S.band] + " (whole graph: back to the bands)";
    } else {
      c.innerHTML = s.svg || "";
      note = s.collapsed ? s.after + " nodes: devices collapsed, click one to open it, or use the neighbourhood view" : "";
    }
    $("picnote").textContent = note + (note ? " · " : "") + D.renderer;
    setZoom(S.zoom);
    paintMarks();
  }

  // The selected node and everything within two edges of it, in five rows
  // by signed distance (operands above, users below).
  function neighbourhood(s, v) {
    const ins = new Map(), outs = new Map();
    for (const [a, b] of s.edges) {
      if (!outs.has(a)) outs.set(a, []); outs.get(a).push(b);
      if (!ins.has(b)) ins.set(b, []); ins.get(b).push(a);
    }
    const level = new Map([[v, 0]]);
    let ring = [v];
    for (let d = 1; d <= 2; d++) {
      const next = [];
      for (const x of ring) {
        for (const y of ins.get(x) || []) if (!level.has(y)) { level.set(y, -d); next.push(y); }
        for (const y of outs.get(x) || []) if (!level.has(y)) { level.set(y, d); next.push(y); }
      }
      ring = next;
    }
    const rows = new Map();
    for (const [x, l] of level) { if (!rows.has(l)) rows.set(l, []); rows.get(l).push(x); }
    const W = 190, H = 34, pos = new Map();
    let width = 0;
    for (let l = -2; l <= 2; l++) {
      const r = (rows.get(l) || []).sort((a, b) => a - b);
      r.forEach((x, i) => pos.set(x, [10 + i * W, 10 + (l + 2) * 70]));
      width = Math.max(width, r.length * W + 20);
    }
    const svg = document.createElementNS(SVGNS, "svg");
    svg.setAttribute("width", width); svg.setAttribute("height", 370);
    svg.setAttribute("font-family", "monospace"); svg.setAttribute("font-size", "10");
    const nodes = stepNodes[S.step];
    for (const [a, b] of s.edges) {
      if (!pos.has(a) || !pos.has(b)) continue;
      const [x1, y1] = pos.get(a), [x2, y2] = pos.get(b);
      const p = document.createElementNS(SVGNS, "path");
      p.setAttribute("d", "M" + (x1 + 85) + " " + (y1 + H) + "L" + (x2 + 85) + " " + y2);
      p.setAttribute("stroke", "#555"); p.dataset.a = a; p.dataset.b = b;
      svg.appendChild(p);
    }
    for (const [x, [px, py]] of pos) {
      const n = nodes.get(x);
      const g = document.createElementNS(SVGNS, "g");
      g.setAttribute("class", "n"); g.dataset.v = x;
      g.setAttribute("transform", "translate(" + px + "," + py + ")");
      const r = document.createElementNS(SVGNS, "rect");
      r.setAttribute("width", 170); r.setAttribute("height", H); r.setAttribute("rx", 5);
      r.setAttribute("fill", "#fff"); r.setAttribute("stroke", "#333");
      g.appendChild(r);
      [[14, n[1]], [27, n[2] + " @" + s.bands[n[3]]]].forEach(([y, t]) => {
        const tx = document.createElementNS(SVGNS, "text");
        tx.setAttribute("x", 8); tx.setAttribute("y", y);
        tx.textContent = t.length > 26 ? t.slice(0, 25) + "…" : t;
        g.appendChild(tx);
      });
      const title = document.createElementNS(SVGNS, "title");
      title.textContent = n[1] + "\n" + n[2];
      g.appendChild(title);
      svg.appendChild(g);
    }
    return svg;
  }

  function fillIr() {
    const s = D.steps[S.step], pane = $("pane-ir"), frag = document.createDocumentFragment();
    s.ir.forEach((line, i) => {
      const d = el("div", "line", line);
      d.dataset.v = s.lineV[i];
      frag.appendChild(d);
    });
    pane.textContent = "";
    pane.appendChild(frag);
  }

  function fillDiff() {
    const s = D.steps[S.step], pane = $("pane-diff");
    pane.textContent = "";
    if (!s.diff) { pane.appendChild(el("div", "", "The input: no step before it.")); return; }
    if (!s.changed) pane.appendChild(el("div", "d-fold", "This pass changed nothing: " + s.why + "."));
    const cls = { "+": "d-add", "-": "d-del", "<": "d-from", ">": "d-to", "=": "d-fold", " ": "" };
    const frag = document.createDocumentFragment();
    for (const [tag, text] of s.diff) frag.appendChild(el("div", "line " + (cls[tag] || ""), (tag === "=" ? "  " : tag + " ") + text));
    pane.appendChild(frag);
  }

  function fillDecisions() {
    const pane = $("pane-dec");
    pane.textContent = "";
    if (!D.decisions.length) { pane.appendChild(el("div", "", "No decisions recorded (no collective was lowered).")); return; }
    for (const d of D.decisions) {
      const box = el("div", "dec");
      box.dataset.v = d.v;
      const head = el("div", "", "step " + d.step + ": " + d.what);
      head.style.fontWeight = "bold";
      head.style.cursor = "pointer";
      head.addEventListener("click", () => { if (d.v >= 0) { selectStep(d.step - 1); selectNode(d.v); } });
      box.appendChild(head);
      box.appendChild(el("div", "", "picked " + d.pick + " (" + d.how + ")"));
      const t = el("table");
      for (const [name, est, picked] of d.cands) {
        const tr = el("tr", picked ? "pick" : "");
        tr.appendChild(el("td", "", picked ? "✔ " + name : name));
        tr.appendChild(el("td", "", est));
        t.appendChild(tr);
      }
      box.appendChild(t);
      box.appendChild(el("div", "", "costs: " + d.costs));
      pane.appendChild(box);
    }
  }

  function fillTimeline() {
    const pane = $("pane-time"), T = D.timeline;
    pane.textContent = "";
    if (!T) { pane.appendChild(el("div", "", "No run recorded: `fuel-opt demo` or `--run` with `--dump-html` adds one.")); return; }
    pane.appendChild(el("div", "", T.source));
    pane.appendChild(el("div", "", "measured " + fmtUs(T.measured) + (T.estimate === null ? "" : ", model's estimate " + fmtUs(T.estimate))));
    let end = 1;
    for (const l of T.lanes) for (const e of l.events) end = Math.max(end, e[2] + e[3]);
    const W = 520, scale = W / end, svg = document.createElementNS(SVGNS, "svg");
    svg.setAttribute("width", W + 90); svg.setAttribute("height", 24 * T.lanes.length + 10);
    svg.setAttribute("class", "lane"); svg.setAttribute("font-size", "11");
    T.lanes.forEach((l, i) => {
      const t = document.createElementNS(SVGNS, "text");
      t.setAttribute("x", 0); t.setAttribute("y", 24 * i + 16); t.textContent = l.name;
      svg.appendChild(t);
      for (const e of l.events) {
        const r = document.createElementNS(SVGNS, "rect");
        r.setAttribute("class", "bar"); r.dataset.v = e[1];
        r.setAttribute("x", 90 + e[2] * scale); r.setAttribute("y", 24 * i + 4);
        r.setAttribute("width", Math.max(1, e[3] * scale)); r.setAttribute("height", 16);
        const tt = document.createElementNS(SVGNS, "title");
        tt.textContent = e[0] + ": " + fmtUs(e[3]) + (e[4] === null ? "" : " (model " + fmtUs(e[4]) + ")");
        r.appendChild(tt);
        r.addEventListener("click", () => { if (e[1] >= 0) { selectStep(D.steps.length - 1); selectNode(e[1]); } });
        svg.appendChild(r);
      }
    });
    pane.appendChild(svg);
    const t = el("table");
    const hd = el("tr");
    ["lane", "step", "start", "measured", "model"].forEach((h) => hd.appendChild(el("th", "", h)));
    t.appendChild(hd);
    for (const l of T.lanes) for (const e of l.events) {
      const tr = el("tr");
      [l.name, e[0], fmtUs(e[2]), fmtUs(e[3]), e[4] === null ? "" : fmtUs(e[4])].forEach((x) => tr.appendChild(el("td", "", x)));
      t.appendChild(tr);
    }
    pane.appendChild(t);
  }

  function selectStep(k) {
    if (k < 0 || k >= D.steps.length) return;
    S.step = k; S.band = -1;
    if (S.view === "hood" && !stepNodes[k].has(S.v)) S.view = "whole";
    const rows = $("index").tBodies[0].rows;
    for (let i = 0; i < rows.length; i++) rows[i].classList.toggle("cur", i === k);
    fillIr(); fillDiff();
    drawPicture();
    updateHash();
  }

  function updateHash() {
    const h = "#step=" + S.step + (S.v >= 0 ? "&v=" + S.v : "");
    if (location.hash !== h) history.replaceState(null, "", h);
  }

  function wire() {
    $("canvas").addEventListener("click", (ev) => {
      const n = ev.target.closest("g.n");
      if (n) { selectNode(Number(n.dataset.v)); return; }
      const b = ev.target.closest("g.band.collapsed");
      if (b) { S.band = Number(b.dataset.b); drawPicture(); }
    });
    $("pane-ir").addEventListener("click", (ev) => {
      const l = ev.target.closest(".line");
      if (l && Number(l.dataset.v) >= 0) selectNode(Number(l.dataset.v));
    });
    $("fit").addEventListener("click", fit);
    $("zoomin").addEventListener("click", () => setZoom(S.zoom * 1.25));
    $("zoomout").addEventListener("click", () => setZoom(S.zoom / 1.25));
    $("whole").addEventListener("click", () => { S.view = "whole"; S.band = -1; drawPicture(); });
    $("hood").addEventListener("click", () => { S.view = "hood"; drawPicture(); });
    document.querySelectorAll("#tabs button").forEach((b) => b.addEventListener("click", () => {
      document.querySelectorAll("#tabs button").forEach((x) => x.classList.toggle("on", x === b));
      document.querySelectorAll(".pane").forEach((p) => p.classList.toggle("on", p.id === "pane-" + b.dataset.tab));
    }));
  }

  document.title = D.title + " · fuel pass viewer";
  $("title").textContent = D.title;
  $("meta").textContent = "pipeline: " + D.pipeline + " · " + D.steps.length + " steps";
  buildIndex();
  fillDecisions();
  fillTimeline();
  wire();
  const m = /^#step=(\d+)(?:&v=(\d+))?$/.exec(location.hash);
  selectStep(m ? Number(m[1]) : Math.max(0, D.steps.length - 1));
  if (m && m[2] !== undefined) selectNode(Number(m[2]));
  fit();
  window.fuelViewer = { ready: performance.now(), data: D, state: S };
})();
