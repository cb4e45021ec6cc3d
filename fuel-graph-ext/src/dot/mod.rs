//! The DOT writer: a deterministic picture of a graph for graphviz.
//!
//! One cluster per device, filled by vendor (CPU blue, CUDA green, Vulkan
//! red). Copies and moves are drawn as arrow-shaped nodes in their
//! destination's cluster; collectives, which span devices, sit outside every
//! cluster as hexagons. An edge whose producer and consumer are on different
//! devices is bold and labelled with the bytes it carries. Graph notes (for
//! example the cost model's reasons) become `//` comments and the caption.

use crate::device::{Device, DeviceKind};
use crate::graph::{Graph, NodeId};
use crate::op::Op;
use crate::text::Numbering;
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write;

pub mod clusters;

/// The fill colour of a device's cluster.
pub fn vendor_color(kind: DeviceKind) -> &'static str {
    match kind {
        DeviceKind::Cpu => "#dbe7f7",
        DeviceKind::Cuda => "#dcf2d0",
        DeviceKind::Vulkan => "#f7dada",
    }
}

fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A human-readable byte count: `4096 B`, `64 KiB`, `1.5 MiB`.
pub fn human_bytes(b: usize) -> String {
    const UNITS: [&str; 4] = ["B", "KiB", "MiB", "GiB"];
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{b} B")
    } else if v.fract() == 0.0 {
        format!("{v:.0} {}", UNITS[u])
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// Renders `g` as DOT text.
pub fn to_dot(g: &Graph) -> String {
    let num = Numbering::new(g);
    let order = g.topo_order();
    let number = |id: NodeId| num.number(id).unwrap_or(usize::MAX);
    // Each grouped node is drawn as its group, named after its first member.
    let groups = clusters::groups(g, &order);
    let mut drawn_as: HashMap<NodeId, usize> = HashMap::new();
    for (k, members) in groups.iter().enumerate() {
        for id in members {
            drawn_as.insert(*id, k);
        }
    }
    let steps = clusters::steps(g, &order);
    let name = |id: NodeId| match drawn_as.get(&id).and_then(|k| groups.get(*k)) {
        Some(members) => format!("g{}", members.first().map_or(usize::MAX, |m| number(*m))),
        None => format!("v{}", number(id)),
    };
    let mut s = String::new();
    let _ = writeln!(s, "digraph {} {{", quote(&g.name));
    for note in g.notes() {
        let _ = writeln!(s, "  // {note}");
    }
    s.push_str("  compound=true;\n  rankdir=TB;\n  newrank=true;\n  nodesep=0.15;\n");
    s.push_str("  node [fontname=\"monospace\", fontsize=10, shape=box, style=\"rounded,filled\", fillcolor=white];\n");
    s.push_str("  edge [fontname=\"monospace\", fontsize=9];\n");
    if !g.notes().is_empty() {
        // The notes (the cost model's estimates) go into one legend node,
        // wrapped, instead of the graph's title, which is as wide as the
        // longest note.
        let mut text = String::new();
        for note in g.notes() {
            for line in wrap(note, LEGEND_COLUMNS) {
                text.push_str(&line);
                text.push_str("\\l");
            }
        }
        let _ = writeln!(
            s,
            "  legend [label=\"{}\", shape=note, fontsize=9, fillcolor=\"#fffdf0\"];",
            escape_label(&text)
        );
    }
    let mut clusters: BTreeMap<Device, Vec<NodeId>> = BTreeMap::new();
    let mut loose = Vec::new();
    for &id in &order {
        match g.node(id).and_then(|n| n.op.device()) {
            Some(d) => clusters.entry(d).or_default().push(id),
            None => loose.push(id),
        }
    }
    let label_of = |id: NodeId| -> String {
        let Some(n) = g.node(id) else {
            return String::new();
        };
        let mut label = format!("%{} {}", number(id), n.op.mnemonic());
        match &n.op {
            Op::Input { name, .. } => {
                let _ = write!(label, " \"{name}\"");
            }
            Op::Extern(x) => {
                let _ = write!(label, " \"{}\" {}", x.name, x.attr_text());
            }
            _ => {}
        }
        let parts = n.op.parts();
        if parts.has_attrs() {
            let mut kv: Vec<String> = parts
                .ints()
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            for (k, list) in &parts.lists {
                let each: Vec<String> = list.iter().map(u64::to_string).collect();
                kv.push(format!("{k}=[{}]", each.join(", ")));
            }
            let _ = write!(label, " {{{}}}", kv.join(", "));
        }
        match &n.op {
            Op::Copy { to } | Op::Move { to } => {
                let from = n.operands.first().and_then(|v| g.value_device(*v));
                let from = from.map_or("?".to_string(), |d| d.to_string());
                let _ = write!(label, "\n{from} -> {to}");
                if let Some(step) = steps.get(&id) {
                    let _ = write!(label, "  step {step}");
                }
            }
            Op::Broadcast { to } => {
                let ds: Vec<String> = to.iter().map(|d| d.to_string()).collect();
                let _ = write!(label, "\n-> [{}]", ds.join(", "));
            }
            _ => {}
        }
        if n.result_tys.is_empty() {
            let _ = write!(label, "\n{}", n.ty);
        } else {
            let each: Vec<String> = n.result_tys.iter().map(ToString::to_string).collect();
            let _ = write!(label, "\n{}", each.join(", "));
        }
        label
    };
    let shape_of = |op: &Op| match op {
        Op::Input { .. } => "shape=invhouse",
        Op::Extern(_) => "shape=component, fillcolor=\"#dff0d8\"",
        Op::Copy { .. } => "shape=cds, fillcolor=\"#fff4c2\"",
        Op::Move { .. } => "shape=cds, fillcolor=\"#ffd9a8\", style=\"filled,dashed\"",
        op if op.is_collective() => "shape=hexagon, fillcolor=\"#e9dcf7\"",
        op if op.is_comm() => "shape=octagon, fillcolor=\"#e9dcf7\", style=\"filled,bold\"",
        op if op.is_driver_collective() => {
            "shape=hexagon, fillcolor=\"#c9e7f2\", style=\"filled,bold\""
        }
        _ => "shape=box",
    };
    let node_decl = |s: &mut String, id: NodeId, indent: &str| {
        let Some(n) = g.node(id) else { return };
        let label = match drawn_as.get(&id).and_then(|k| groups.get(*k)) {
            None => label_of(id),
            // A group is drawn once, where its first member is.
            Some(members) if members.first() == Some(&id) => {
                group_label(g, members, &number, &steps)
            }
            Some(_) => return,
        };
        let shape = shape_of(&n.op);
        let grouped = if drawn_as.contains_key(&id) {
            ", peripheries=2"
        } else {
            ""
        };
        let _ = writeln!(
            s,
            "{indent}{} [label={}, {shape}{grouped}];",
            name(id),
            quote(&label)
        );
    };
    for (i, (dev, ids)) in clusters.iter().enumerate() {
        let _ = writeln!(s, "  subgraph cluster_{i} {{");
        let _ = writeln!(s, "    label={};", quote(&dev.to_string()));
        let _ = writeln!(
            s,
            "    style=filled;\n    color=\"#8c8c8c\";\n    fillcolor={};",
            quote(vendor_color(dev.kind))
        );
        for &id in ids {
            node_decl(&mut s, id, "    ");
        }
        s.push_str("  }\n");
    }
    for &id in &loose {
        node_decl(&mut s, id, "  ");
    }
    // Edges, in consumer order then operand order; edges between the same
    // two drawn nodes (a group's) are drawn once, their labels joined.
    let mut edges: Vec<((String, String), Edge)> = Vec::new();
    let mut edge_at: HashMap<(String, String), usize> = HashMap::new();
    for &id in &order {
        let Some(n) = g.node(id) else { continue };
        let here = n.op.device();
        let multi_operand = n.operands.len() > 1;
        for (slot, v) in n.operands.iter().enumerate() {
            if !g.contains(v.node) {
                continue;
            }
            let (from_name, to_name) = (name(v.node), name(id));
            if from_name == to_name {
                continue;
            }
            let from = g.value_device(*v);
            let producer_multi = g.node(v.node).is_some_and(|p| p.op.is_multi_result());
            let mut label = String::new();
            if producer_multi {
                let _ = write!(label, "#{}", v.result);
            }
            if multi_operand {
                if !label.is_empty() {
                    label.push(' ');
                }
                let _ = write!(label, "[{slot}]");
            }
            let mut bold = false;
            if let (Some(a), Some(b)) = (from, here) {
                if a != b {
                    let bytes = g.value_type(*v).map_or(0, |t| t.size_bytes());
                    if !label.is_empty() {
                        label.push(' ');
                    }
                    label.push_str(&human_bytes(bytes));
                    bold = true;
                }
            }
            let key = (from_name, to_name);
            match edge_at.get(&key) {
                Some(&k) => {
                    if let Some((_, e)) = edges.get_mut(k) {
                        e.add(label, bold);
                    }
                }
                None => {
                    edge_at.insert(key.clone(), edges.len());
                    let mut e = Edge::default();
                    e.add(label, bold);
                    edges.push((key, e));
                }
            }
        }
    }
    for ((from, to), e) in &edges {
        let mut attrs: Vec<String> = Vec::new();
        if e.bold {
            attrs.push("style=bold".into());
            attrs.push("penwidth=2.5".into());
        }
        let label = e.label();
        if !label.is_empty() {
            // An external label is placed after layout: plain labels are
            // laid out as nodes of their own and widen a big picture.
            attrs.push(format!("xlabel={}", quote(&label)));
        }
        let attr_text = if attrs.is_empty() {
            String::new()
        } else {
            format!(" [{}]", attrs.join(", "))
        };
        let _ = writeln!(s, "  {from} -> {to}{attr_text};");
    }
    // Outputs.
    s.push_str("  ret [label=\"return\", shape=doublecircle, fillcolor=\"#eeeeee\"];\n");
    for (k, v) in g.outputs().iter().enumerate() {
        if g.contains(v.node) {
            let _ = writeln!(
                s,
                "  {} -> ret [xlabel={}, style=dotted];",
                name(v.node),
                quote(&format!("out {k}"))
            );
        }
    }
    // The legend sits at the bottom beside `return`, not beside the inputs.
    if !g.notes().is_empty() {
        s.push_str("  { rank=sink; legend; ret }\n");
    }
    s.push_str("}\n");
    s
}

/// The widest line of the legend, in characters.
const LEGEND_COLUMNS: usize = 100;

/// The widest line of a group's lists (its members, their sources).
const GROUP_COLUMNS: usize = 24;

/// How many labels one merged edge shows before `…`.
const EDGE_LABELS: usize = 3;

/// One drawn edge: the labels of the graph edges it stands for.
#[derive(Default)]
struct Edge {
    labels: Vec<String>,
    more: usize,
    bold: bool,
}

impl Edge {
    fn add(&mut self, label: String, bold: bool) {
        self.bold |= bold;
        if label.is_empty() || self.labels.contains(&label) {
            return;
        }
        if self.labels.len() < EDGE_LABELS {
            self.labels.push(label);
        } else {
            self.more += 1;
        }
    }

    fn label(&self) -> String {
        let mut l = self.labels.join(", ");
        if self.more > 0 {
            let _ = write!(l, ", +{}", self.more);
        }
        l
    }
}

/// A group's label: how many of which op, their numbers, and what they
/// have in common (where each copy comes from, each one's type).
fn group_label(
    g: &Graph,
    members: &[NodeId],
    number: &dyn Fn(NodeId) -> usize,
    steps: &HashMap<NodeId, usize>,
) -> String {
    let first = members.first().and_then(|id| g.node(*id));
    let kind = first.map_or(String::new(), |n| n.op.mnemonic());
    let kind = kind.split(' ').next().unwrap_or("").to_string();
    let numbers: Vec<String> = members
        .iter()
        .map(|id| format!("%{}", number(*id)))
        .collect();
    let mut label = format!(
        "{} x {kind}\n{}",
        members.len(),
        wrap(&numbers.join(" "), GROUP_COLUMNS).join("\n")
    );
    if let Some(Op::Copy { to } | Op::Move { to }) = first.map(|n| &n.op) {
        let mut from: Vec<String> = Vec::new();
        for id in members {
            let src = g.node(*id).and_then(|n| n.operands.first().copied());
            if let Some(d) = src.and_then(|v| g.value_device(v)) {
                let d = d.to_string();
                if !from.contains(&d) {
                    from.push(d);
                }
            }
        }
        let _ = write!(
            label,
            "\n{} -> {to}",
            wrap(&from.join(", "), GROUP_COLUMNS).join("\n")
        );
        let mut st: Vec<usize> = members
            .iter()
            .filter_map(|id| steps.get(id))
            .copied()
            .collect();
        st.sort_unstable();
        st.dedup();
        match (st.first(), st.last()) {
            (Some(a), Some(b)) if a == b => {
                let _ = write!(label, "  step {a}");
            }
            (Some(a), Some(b)) => {
                let _ = write!(label, "  steps {a}-{b}");
            }
            _ => {}
        }
    }
    let mut tys: Vec<String> = Vec::new();
    for id in members {
        if let Some(t) = g.node(*id).map(|n| n.ty.to_string()) {
            if !tys.contains(&t) {
                tys.push(t);
            }
        }
    }
    let _ = write!(label, "\n{} each", tys.join(", "));
    label
}

/// `text` cut into lines of at most `width` characters at spaces (a word
/// longer than that stays whole).
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split(' ') {
        if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

/// `s` for inside a DOT string whose line ends (`\\l`) are already written:
/// quotes and backslashes other than those escaped, control characters
/// dropped.
fn escape_label(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find("\\l") {
        out.push_str(&quote_inner(&rest[..i]));
        out.push_str("\\l");
        rest = &rest[i + 2..];
    }
    out.push_str(&quote_inner(rest));
    out
}

/// [`quote`] without the surrounding quotes.
fn quote_inner(s: &str) -> String {
    let q = quote(s);
    q[1..q.len() - 1].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::parse;

    #[test]
    fn clusters_copies_and_bold_edges() {
        let src = "graph @d {\n  // why: because\n  %0 = input \"a\" @cuda:0 : f32[1024]\n  %1 = copy %0 -> cpu:0 : f32[1024]\n  %2 = copy %1 -> vulkan:0 : f32[1024]\n  return %2\n}\n";
        let dot = to_dot(&parse(src).unwrap());
        assert!(dot.contains("label=\"cuda:0\""));
        assert!(dot.contains("fillcolor=\"#dcf2d0\""));
        assert!(
            dot.contains("v1 [label=\"%1 copy\\ncuda:0 -> cpu:0  step 1\\nf32[1024]\", shape=cds"),
            "{dot}"
        );
        // A hop staged through the CPU is one step.
        assert!(dot.contains("cpu:0 -> vulkan:0  step 1"), "{dot}");
        assert!(
            dot.contains("v0 -> v1 [style=bold, penwidth=2.5, xlabel=\"4 KiB\"]"),
            "{dot}"
        );
        assert!(dot.contains("// why: because"));
        // The notes are a legend at the bottom, not the title.
        assert!(
            dot.contains("legend [label=\"why: because\\l\", shape=note"),
            "{dot}"
        );
        assert!(dot.contains("{ rank=sink; legend; ret }"), "{dot}");
        assert!(!dot.contains("\n  label="), "{dot}");
        assert_eq!(dot, to_dot(&parse(src).unwrap()));
    }

    #[test]
    fn a_split_and_its_result_types_show() {
        let src = "graph @d {\n  %0 = input \"a\" @cpu:0 : f32[4]\n  %1 = input \"b\" @cpu:1 : f32[4]\n  %2:2 = reduce_scatter.sum %0, %1 {axis=0, split=[4, 0]} : f32[4], f32[0]\n  return %2#0, %2#1\n}\n";
        let g = parse(src).unwrap();
        assert_eq!(crate::text::print(&g), src);
        let dot = to_dot(&g);
        assert!(
            dot.contains("%2 reduce_scatter.sum {axis=0, split=[4, 0]}\\nf32[4], f32[0]"),
            "{dot}"
        );
    }

    #[test]
    fn like_nodes_are_drawn_as_one() {
        // Three slices of one input (a fan-out) and the three copies of
        // them onto cpu:1 in one step become one node each; the concat's
        // three operand edges become one edge.
        let src = "graph @d {\n  %0 = input \"a\" @cpu:0 : f32[6]\n  %1 = slice %0 {axis=0, len=2, start=0} @cpu:0 : f32[2]\n  %2 = slice %0 {axis=0, len=2, start=2} @cpu:0 : f32[2]\n  %3 = slice %0 {axis=0, len=2, start=4} @cpu:0 : f32[2]\n  %4 = copy %1 -> cpu:1 : f32[2]\n  %5 = copy %2 -> cpu:1 : f32[2]\n  %6 = copy %3 -> cpu:1 : f32[2]\n  %7 = concat %4, %5, %6 {axis=0} @cpu:1 : f32[6]\n  return %7\n}\n";
        let g = parse(src).unwrap();
        assert_eq!(crate::text::print(&g), src);
        let dot = to_dot(&g);
        assert!(
            dot.contains(
                "g1 [label=\"3 x slice\\n%1 %2 %3\\nf32[2] each\", shape=box, peripheries=2]"
            ),
            "{dot}"
        );
        assert!(
            dot.contains(
                "g4 [label=\"3 x copy\\n%4 %5 %6\\ncpu:0 -> cpu:1  step 1\\nf32[2] each\""
            ),
            "{dot}"
        );
        assert!(dot.contains("  v0 -> g1;\n  g1 -> g4 [style=bold, penwidth=2.5, xlabel=\"8 B\"];\n  g4 -> v7 [xlabel=\"[0], [1], [2]\"];\n"), "{dot}");
        assert!(!dot.contains("v4"), "{dot}");
    }

    #[test]
    fn wrap_cuts_at_spaces() {
        assert_eq!(wrap("ab cd ef", 5), ["ab cd", "ef"]);
        assert_eq!(wrap("abcdefgh ij", 4), ["abcdefgh", "ij"]);
        assert_eq!(wrap("", 4), Vec::<String>::new());
    }

    #[test]
    fn bytes_are_human() {
        assert_eq!(human_bytes(4096), "4 KiB");
        assert_eq!(human_bytes(100), "100 B");
        assert_eq!(human_bytes(3 << 19), "1.5 MiB");
    }
}
