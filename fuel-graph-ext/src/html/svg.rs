//! SVG pictures of a laid-out graph ([`super::layout`]): the whole graph,
//! one device band of it, or the bands collapsed to one box each.
//!
//! Every node is a `<g class="n" data-v="V">`, `V` being its identity
//! across steps ([`super::identity`]), which is what the page's script
//! highlights. All text from the graph (input names, types) is cut with
//! [`crate::text::excerpt`] and escaped for XML here, so a name cannot add
//! markup to the page.

use super::layout::{Layout, NODE_H, NODE_W};
use crate::dot::vendor_color;
use crate::graph::{Graph, NodeId};
use crate::op::Op;
use crate::text::excerpt::excerpt;
use crate::text::Numbering;
use std::collections::BTreeMap;
use std::fmt::Write;

/// The most characters of a label line drawn in a box (the full label is
/// in the node's tooltip, itself cut at [`TIP_CHARS`]).
const LINE_CHARS: usize = 26;
const TIP_CHARS: usize = 200;

/// Appends `s` escaped for XML text and attribute values.
pub fn push_xml(out: &mut String, s: &str) {
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if c.is_control() => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
}

/// The two lines of a node's label: `%N op "name"`, and its type or, for
/// a copy, where it goes.
pub fn label(g: &Graph, num: &Numbering, id: NodeId) -> (String, String) {
    let Some(n) = g.node(id) else {
        return (String::new(), String::new());
    };
    let number = num.number(id).map_or("?".to_string(), |k| k.to_string());
    let mut first = format!("%{number} {}", n.op.mnemonic());
    if let Op::Input { name, .. } = &n.op {
        let _ = write!(first, " \"{}\"", excerpt(name, TIP_CHARS));
    }
    let second = match &n.op {
        Op::Copy { to } | Op::Move { to } => {
            let from = n.operands.first().and_then(|v| g.value_device(*v));
            format!(
                "{} -> {to}",
                from.map_or("?".to_string(), |d| d.to_string())
            )
        }
        _ => n.ty.to_string(),
    };
    (first, second)
}

fn cut(s: &str) -> String {
    excerpt(s, LINE_CHARS)
}

fn fill(op: &Op) -> (&'static str, bool) {
    match op {
        Op::Input { .. } => ("#ffffff", false),
        Op::Copy { .. } => ("#fff4c2", false),
        Op::Move { .. } => ("#ffd9a8", false),
        op if op.is_collective() => ("#e9dcf7", true),
        op if op.is_driver_collective() || op.is_comm() => ("#c9e7f2", true),
        _ => ("#ffffff", false),
    }
}

/// What to draw: every node, or only the nodes of one band.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    /// The whole graph.
    All,
    /// Band `k` only, with its own edges.
    Band(usize),
}

/// The SVG of `l` (or of one band of it). `vid` gives each node's identity.
pub fn render(
    g: &Graph,
    l: &Layout,
    num: &Numbering,
    vid: &BTreeMap<NodeId, usize>,
    part: Part,
) -> String {
    let keep = |band: usize| part == Part::All || part == Part::Band(band);
    let (x0, width) = match part {
        Part::All => (0.0, l.width),
        Part::Band(b) => l
            .bands
            .get(b)
            .map_or((0.0, l.width), |b| (b.x - 8.0, b.w + 16.0)),
    };
    let mut s = String::with_capacity(256 * l.nodes.len() + 512);
    let _ = write!(
        s,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"graph\" width=\"{width:.0}\" height=\"{:.0}\" viewBox=\"{x0:.0} 0 {width:.0} {:.0}\" font-family=\"monospace\" font-size=\"10\">",
        l.height, l.height
    );
    for (k, b) in l.bands.iter().enumerate().filter(|(k, _)| keep(*k)) {
        let (color, name) = match b.device {
            Some(d) => (vendor_color(d.kind), d.to_string()),
            None => ("#f4f0fa", "not placed (collectives)".to_string()),
        };
        let _ = write!(
            s,
            "<g class=\"band\" data-b=\"{k}\"><rect x=\"{:.0}\" y=\"4\" width=\"{:.0}\" height=\"{:.0}\" rx=\"6\" fill=\"{color}\" stroke=\"#8c8c8c\"/><text x=\"{:.0}\" y=\"19\" font-size=\"12\" font-weight=\"bold\">",
            b.x, b.w, l.height - 8.0, b.x + 8.0
        );
        push_xml(&mut s, &format!("{name} ({} nodes)", b.count));
        s.push_str("</text></g>");
    }
    s.push_str("<g class=\"edges\" fill=\"none\" stroke=\"#555\">");
    for &(a, b) in &l.edges {
        let (Some(p), Some(q)) = (l.nodes.get(a), l.nodes.get(b)) else {
            continue;
        };
        if !keep(p.band) || !keep(q.band) {
            continue;
        }
        let (x1, y1) = (p.x + NODE_W / 2.0, p.y + NODE_H);
        let (x2, y2) = (q.x + NODE_W / 2.0, q.y);
        let my = (y1 + y2) / 2.0;
        let cross = if p.band != q.band {
            " stroke-width=\"2\""
        } else {
            ""
        };
        let _ = write!(
            s,
            "<path d=\"M{x1:.0} {y1:.0}C{x1:.0} {my:.0} {x2:.0} {my:.0} {x2:.0} {y2:.0}\"{cross} data-a=\"{}\" data-b=\"{}\"/>",
            vid.get(&p.id).copied().unwrap_or(usize::MAX),
            vid.get(&q.id).copied().unwrap_or(usize::MAX)
        );
    }
    s.push_str("</g><g class=\"nodes\">");
    for p in l.nodes.iter().filter(|p| keep(p.band)) {
        let Some(n) = g.node(p.id) else { continue };
        let (first, second) = label(g, num, p.id);
        let (color, hex) = fill(&n.op);
        let _ = write!(
            s,
            "<g class=\"n\" data-v=\"{}\" transform=\"translate({:.0},{:.0})\"><title>",
            vid.get(&p.id).copied().unwrap_or(usize::MAX),
            p.x,
            p.y
        );
        push_xml(&mut s, &format!("{first}\n{second}"));
        s.push_str("</title>");
        if hex {
            let _ = write!(
                s,
                "<polygon points=\"10,0 {w1:.0},0 {w:.0},{h2:.0} {w1:.0},{h:.0} 10,{h:.0} 0,{h2:.0}\" fill=\"{color}\" stroke=\"#333\"/>",
                w1 = NODE_W - 10.0,
                w = NODE_W,
                h = NODE_H,
                h2 = NODE_H / 2.0
            );
        } else {
            let _ = write!(
                s,
                "<rect width=\"{NODE_W:.0}\" height=\"{NODE_H:.0}\" rx=\"5\" fill=\"{color}\" stroke=\"#333\"/>"
            );
        }
        s.push_str("<text x=\"8\" y=\"14\">");
        push_xml(&mut s, &cut(&first));
        s.push_str("</text><text x=\"8\" y=\"27\" fill=\"#444\">");
        push_xml(&mut s, &cut(&second));
        s.push_str("</text></g>");
    }
    s.push_str("</g></svg>");
    s
}

/// The bands collapsed: one box per band with its node count, and one
/// arrow per pair of bands that an edge joins, labelled with how many.
/// Each box is a `<g class="band" data-b="K">` the page expands on click.
pub fn collapsed(l: &Layout) -> String {
    const W: f64 = 200.0;
    const H: f64 = 56.0;
    const STEP: f64 = 260.0;
    let mut pairs: BTreeMap<(usize, usize), usize> = BTreeMap::new();
    for &(a, b) in &l.edges {
        if let (Some(p), Some(q)) = (l.nodes.get(a), l.nodes.get(b)) {
            if p.band != q.band {
                *pairs.entry((p.band, q.band)).or_default() += 1;
            }
        }
    }
    let n = l.bands.len() as f64;
    let width = n * STEP + 40.0;
    let height = 120.0 + 18.0 * pairs.len() as f64;
    let mut s = String::new();
    let _ = write!(
        s,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"graph\" width=\"{width:.0}\" height=\"{height:.0}\" font-family=\"monospace\" font-size=\"11\">"
    );
    let cx = |k: usize| 20.0 + k as f64 * STEP + W / 2.0;
    for (i, ((a, b), count)) in pairs.iter().enumerate() {
        let y = 90.0 + 18.0 * i as f64;
        let _ = write!(
            s,
            "<path d=\"M{:.0} {:.0}V{y:.0}H{:.0}V{:.0}\" fill=\"none\" stroke=\"#555\"/><text x=\"{:.0}\" y=\"{:.0}\">{count} edge{}</text>",
            cx(*a),
            20.0 + H,
            cx(*b),
            20.0 + H,
            (cx(*a) + cx(*b)) / 2.0,
            y - 3.0,
            if *count == 1 { "" } else { "s" }
        );
    }
    for (k, b) in l.bands.iter().enumerate() {
        let (color, name) = match b.device {
            Some(d) => (vendor_color(d.kind), d.to_string()),
            None => ("#f4f0fa", "not placed".to_string()),
        };
        let _ = write!(
            s,
            "<g class=\"band collapsed\" data-b=\"{k}\"><rect x=\"{:.0}\" y=\"20\" width=\"{W:.0}\" height=\"{H:.0}\" rx=\"8\" fill=\"{color}\" stroke=\"#333\" stroke-width=\"2\"/><text x=\"{:.0}\" y=\"42\" font-weight=\"bold\">",
            20.0 + k as f64 * STEP,
            30.0 + k as f64 * STEP
        );
        push_xml(&mut s, &name);
        let _ = write!(
            s,
            "</text><text x=\"{:.0}\" y=\"62\">{} nodes: click to open</text></g>",
            30.0 + k as f64 * STEP,
            b.count
        );
    }
    s.push_str("</svg>");
    s
}
