//! The page: the embedded JSON value and the HTML around it.
//!
//! Per step the data holds its index row (name, changed and why not, time,
//! node counts before and after), the text IR with the identity of each
//! line's node, the diff against the step before (runs of unchanged lines
//! folded to a count, past three lines of context), the nodes and edges by
//! identity (for the page's neighbourhood view) and the picture: the whole
//! graph, or, from [`super::LARGE_NODES`] on, the device bands collapsed
//! plus one picture per band.

use super::diff::{diff, Mark};
use super::json::{push_num, push_str, Obj};
use super::layout::layout;
use super::svg::{self, Part};
use super::{identity, Recording, LARGE_NODES};
use crate::graph::NodeId;
use crate::text::{print_lines, Numbering};
use std::collections::BTreeMap;

const CSS: &str = include_str!("viewer.css");
const JS: &str = include_str!("viewer.js");
/// Lines of context kept around each change in a diff.
const CONTEXT: usize = 3;
/// Who drew the pictures, as the page says.
const RENDERER: &str = "laid out and drawn in Rust (fuel-graph-ext html::layout), no graphviz";

/// The page's JSON value (see the module docs).
pub fn data(r: &Recording, pictures: bool) -> String {
    let graphs: Vec<&crate::Graph> = r.steps.iter().map(|s| &s.graph).collect();
    let orders: Vec<Vec<NodeId>> = graphs.iter().map(|g| g.topo_order()).collect();
    let vids = identity::assign(&graphs, &orders);
    let vid_at = |step: usize, id: NodeId| vids.get(step).and_then(|m| m.get(&id)).copied();
    let mut out = String::new();
    let mut top = Obj::object(&mut out);
    top.num("format", 1.0);
    top.str("title", &r.title);
    top.str("pipeline", &r.pipeline);
    top.str("renderer", RENDERER);
    top.num("large", LARGE_NODES as f64);
    let mut steps = Obj::array(top.key("steps"));
    let mut previous: Option<Vec<String>> = None;
    for (k, step) in r.steps.iter().enumerate() {
        let lines = print_lines(&step.graph);
        let text: Vec<String> = lines.iter().map(|(_, l)| l.clone()).collect();
        let empty = BTreeMap::new();
        let ids = vids.get(k).unwrap_or(&empty);
        let mut s = Obj::object(steps.item());
        s.str("name", &step.name);
        s.bool("changed", step.changed);
        s.str(
            "why",
            if k == 0 || step.changed {
                ""
            } else {
                super::why_unchanged(&step.name)
            },
        );
        s.num("us", step.elapsed.as_secs_f64() * 1e6);
        let before = k
            .checked_sub(1)
            .and_then(|p| r.steps.get(p))
            .map_or(step.graph.node_count(), |p| p.graph.node_count());
        s.num("before", before as f64);
        s.num("after", step.graph.node_count() as f64);
        let mut ir = Obj::array(s.key("ir"));
        for l in &text {
            push_str(ir.item(), l);
        }
        ir.end();
        let mut lv = Obj::array(s.key("lineV"));
        for (id, _) in &lines {
            let v = id.and_then(|id| ids.get(&id)).map_or(-1.0, |v| *v as f64);
            push_num(lv.item(), v);
        }
        lv.end();
        match &previous {
            Some(old) => push_diff(s.key("diff"), old, &text),
            None => s.key("diff").push_str("null"),
        }
        push_graph(&mut s, &step.graph, &orders[k], ids, pictures);
        s.end();
        previous = Some(text);
    }
    steps.end();
    let mut links = Obj::array(top.key("links"));
    for l in &r.links {
        let from = l.step.checked_sub(1).and_then(|p| vid_at(p, l.from));
        if let (Some(a), Some(b)) = (vid_at(l.step, l.node), from) {
            let mut pair = Obj::array(links.item());
            push_num(pair.item(), a as f64);
            push_num(pair.item(), b as f64);
            pair.end();
        }
    }
    links.end();
    let mut ds = Obj::array(top.key("decisions"));
    for d in &r.decisions {
        let mut o = Obj::object(ds.item());
        o.num("step", d.step as f64);
        let v = d.step.checked_sub(1).and_then(|p| vid_at(p, d.collective));
        o.num("v", v.map_or(-1.0, |v| v as f64));
        o.str("what", &d.what);
        let mut cs = Obj::array(o.key("cands"));
        for c in &d.candidates {
            let mut row = Obj::array(cs.item());
            push_str(row.item(), &c.name);
            push_str(row.item(), &c.estimate);
            row.item().push_str(if c.picked { "true" } else { "false" });
            row.end();
        }
        cs.end();
        o.str("pick", &d.pick);
        o.str("how", &d.how);
        o.str("costs", &d.costs);
        o.end();
    }
    ds.end();
    let last = r.steps.len().saturating_sub(1);
    match &r.timeline {
        Some(t) => push_timeline(top.key("timeline"), t, &|id| vid_at(last, id)),
        None => top.key("timeline").push_str("null"),
    }
    top.end();
    out
}

/// The diff of `new` against `old`, unchanged runs folded.
fn push_diff(out: &mut String, old: &[String], new: &[String]) {
    let old: Vec<&str> = old.iter().map(String::as_str).collect();
    let new: Vec<&str> = new.iter().map(String::as_str).collect();
    let d = diff(&old, &new);
    let mut arr = Obj::array(out);
    let mut i = 0;
    while i < d.len() {
        let run = d[i..].iter().take_while(|(m, _)| *m == Mark::Same).count();
        if run == 0 {
            let (m, l) = d[i];
            let mut row = Obj::array(arr.item());
            push_str(row.item(), m.tag());
            push_str(row.item(), l);
            row.end();
            i += 1;
            continue;
        }
        let head = if i == 0 { 0 } else { CONTEXT.min(run) };
        let tail = if i + run == d.len() {
            0
        } else {
            CONTEXT.min(run - head)
        };
        for (k, (m, l)) in d[i..i + run].iter().enumerate() {
            if k < head || k >= run - tail {
                let mut row = Obj::array(arr.item());
                push_str(row.item(), m.tag());
                push_str(row.item(), l);
                row.end();
            } else if k == head {
                let mut row = Obj::array(arr.item());
                push_str(row.item(), "=");
                push_str(
                    row.item(),
                    &format!("… {} unchanged lines", run - head - tail),
                );
                row.end();
            }
        }
        i += run;
    }
    arr.end();
}

/// The nodes, edges, bands and pictures of one step.
fn push_graph(
    s: &mut Obj<'_>,
    g: &crate::Graph,
    order: &[NodeId],
    ids: &BTreeMap<NodeId, usize>,
    pictures: bool,
) {
    let l = layout(g, order);
    let num = Numbering::from_order(order);
    let vid = |id: NodeId| ids.get(&id).map_or(-1.0, |v| *v as f64);
    let mut nodes = Obj::array(s.key("nodes"));
    for p in &l.nodes {
        let (first, second) = svg::label(g, &num, p.id);
        let mut row = Obj::array(nodes.item());
        push_num(row.item(), vid(p.id));
        push_str(row.item(), &first);
        push_str(row.item(), &second);
        push_num(row.item(), p.band as f64);
        row.end();
    }
    nodes.end();
    let mut edges = Obj::array(s.key("edges"));
    for &(a, b) in &l.edges {
        if let (Some(p), Some(q)) = (l.nodes.get(a), l.nodes.get(b)) {
            let mut row = Obj::array(edges.item());
            push_num(row.item(), vid(p.id));
            push_num(row.item(), vid(q.id));
            row.end();
        }
    }
    edges.end();
    let mut bands = Obj::array(s.key("bands"));
    for b in &l.bands {
        let name = b.device.map_or("not placed".to_string(), |d| d.to_string());
        push_str(bands.item(), &name);
    }
    bands.end();
    let large = g.node_count() >= LARGE_NODES;
    s.bool("collapsed", large);
    if !pictures {
        return;
    }
    if large {
        s.str("svg", &svg::collapsed(&l));
        let mut each = Obj::array(s.key("bandSvg"));
        for k in 0..l.bands.len() {
            push_str(each.item(), &svg::render(g, &l, &num, ids, Part::Band(k)));
        }
        each.end();
    } else {
        s.str("svg", &svg::render(g, &l, &num, ids, Part::All));
    }
}

fn push_timeline(out: &mut String, t: &super::Timeline, vid: &dyn Fn(NodeId) -> Option<usize>) {
    let mut o = Obj::object(out);
    o.str("source", &t.source);
    o.num("measured", t.measured_us);
    o.num("estimate", t.estimate_us.unwrap_or(f64::NAN));
    let est: BTreeMap<NodeId, f64> = t.node_estimates.iter().copied().collect();
    let mut lanes = Obj::array(o.key("lanes"));
    for (name, events) in &t.lanes {
        let mut lane = Obj::object(lanes.item());
        lane.str("name", name);
        let mut es = Obj::array(lane.key("events"));
        for e in events {
            let mut row = Obj::array(es.item());
            push_str(row.item(), &e.label);
            push_num(row.item(), e.node.and_then(vid).map_or(-1.0, |v| v as f64));
            push_num(row.item(), e.start_us);
            push_num(row.item(), e.dur_us);
            let guess = e.node.and_then(|n| est.get(&n).copied());
            push_num(row.item(), guess.unwrap_or(f64::NAN));
            row.end();
        }
        es.end();
        lane.end();
    }
    lanes.end();
    o.end();
}

/// The whole page: style, skeleton, data, script.
pub fn html(r: &Recording) -> String {
    let data = data(r, true);
    let mut s = String::with_capacity(data.len() + CSS.len() + JS.len() + 2048);
    s.push_str("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n");
    s.push_str("<meta name=\"generator\" content=\"fuel-graph-ext pass viewer\">\n");
    s.push_str("<title>fuel pass viewer</title>\n<style>\n");
    s.push_str(CSS);
    s.push_str("</style></head>\n<body>\n");
    s.push_str(SKELETON);
    s.push_str("<script type=\"application/json\" id=\"fuel-data\">");
    s.push_str(&data);
    s.push_str("</script>\n<script>\n");
    s.push_str(JS);
    s.push_str("</script>\n</body></html>\n");
    s
}

const SKELETON: &str = r#"<header><h1 id="title">fuel pass viewer</h1><span id="meta"></span>
<noscript>This page needs JavaScript (it runs offline, from this file alone).</noscript></header>
<div id="app">
<nav id="side"><h2>Passes</h2><table id="index"><thead><tr><th>#</th><th>pass</th><th>result</th><th>time</th><th>nodes</th><th title="highlighted nodes in this step">sel</th></tr></thead><tbody></tbody></table>
<h2>Selected node</h2><div id="info">Click a node in the picture or a line of the IR.</div></nav>
<main id="pic"><div id="pictools"><button id="fit">fit</button><button id="zoomin">+</button><button id="zoomout">−</button><button id="whole">whole graph</button><button id="hood" disabled>neighbourhood (radius 2)</button><span id="picnote"></span></div><div id="canvas"></div></main>
<section id="right"><div id="tabs"><button data-tab="ir" class="on">IR</button><button data-tab="diff">diff vs previous</button><button data-tab="dec">decisions</button><button data-tab="time">timeline</button></div>
<div id="pane-ir" class="pane on"></div><div id="pane-diff" class="pane"></div><div id="pane-dec" class="pane"></div><div id="pane-time" class="pane"></div></section>
</div>
"#;
