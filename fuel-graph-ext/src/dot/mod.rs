//! The DOT writer: a deterministic picture of a graph for graphviz.
//!
//! One cluster per device, filled by vendor (CPU blue, CUDA green, Vulkan
//! red). Copies and moves are drawn as arrow-shaped nodes in their
//! destination's cluster; collectives, which span devices, sit outside every
//! cluster as hexagons. An edge whose producer and consumer are on different
//! devices is bold and labelled with the bytes it carries; one into a copy
//! that the plan runs by sharing its source's host buffer
//! ([`crate::plan::Work::Share`], or a Vulkan import of it) moves none, and
//! is dashed and labelled `shared, 0 B` (the copy's label says so too).
//! Graph notes (for example the cost model's reasons, or what `cse`
//! merged) become `//` comments and the legend.

use crate::device::{Device, DeviceKind};
use crate::graph::{Graph, NodeId};
use crate::op::Op;
use crate::text::Numbering;
use std::collections::{BTreeMap, BTreeSet, HashMap};
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
    // The other control characters are left out.
    crate::text::push_backslashed(&mut out, s, |out, c| {
        if !c.is_control() {
            out.push(c);
        }
    });
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
    let pic = Picture::new(g);
    let mut s = String::new();
    let _ = writeln!(s, "digraph {} {{", quote(&g.name));
    for note in g.notes() {
        let _ = writeln!(s, "  // {note}");
    }
    s.push_str("  compound=true;\n  rankdir=TB;\n  newrank=true;\n  nodesep=0.15;\n");
    s.push_str("  node [fontname=\"monospace\", fontsize=10, shape=box, style=\"rounded,filled\", fillcolor=white];\n");
    s.push_str("  edge [fontname=\"monospace\", fontsize=9];\n");
    write_legend(&mut s, g);
    pic.write_nodes(&mut s);
    write_edges(&mut s, &pic.edges());
    // Outputs.
    s.push_str("  ret [label=\"return\", shape=doublecircle, fillcolor=\"#eeeeee\"];\n");
    for (k, v) in g.outputs().iter().enumerate() {
        if g.contains(v.node) {
            let _ = writeln!(
                s,
                "  {} -> ret [xlabel={}, style=dotted];",
                pic.name(v.node),
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

/// The notes (the cost model's estimates, what a pass merged) as one
/// legend node, wrapped, instead of the graph's title, which is as wide
/// as the longest note.
fn write_legend(s: &mut String, g: &Graph) {
    if g.notes().is_empty() {
        return;
    }
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

/// What the picture of one graph is drawn from: its numbering and order,
/// the groups of like nodes drawn as one, each copy's transfer step, and
/// the copies that move no bytes.
struct Picture<'g> {
    g: &'g Graph,
    num: Numbering,
    order: Vec<NodeId>,
    groups: Vec<Vec<NodeId>>,
    drawn_as: HashMap<NodeId, usize>,
    steps: HashMap<NodeId, usize>,
    /// Copies that move no bytes as the plan runs them ([`moving_nothing`]).
    shared: BTreeSet<NodeId>,
}

/// The copies of `g` that the plan runs without moving bytes, with the
/// devices' capabilities assumed as `fuel-opt --emit plan` assumes them
/// (`plan::Caps::assumed`, default topology): a copy between host arenas
/// that shares its source's buffer ([`crate::plan::Work::Share`]), and a
/// host-to-Vulkan copy that imports it ([`crate::plan::Work::Import`]).
/// Empty for a graph the plan cannot be made of (collectives still in it)
/// and for one that does not verify: the plan's rules take verified types
/// (a `slice` along an axis past its operand's rank has no regions), and
/// a picture is drawn of any graph, a broken one included.
fn moving_nothing(g: &Graph) -> BTreeSet<NodeId> {
    use crate::plan::{Caps, Options, Schedule, Work};
    let topo = crate::topology::Topology::default();
    if crate::verify::verify(g, crate::verify::Level::Structural, &topo).is_err() {
        return BTreeSet::new();
    }
    let options = Options::default();
    let Ok(mut plan) = Schedule::new_with(g, &options) else {
        return BTreeSet::new();
    };
    plan.fit_to_devices(&options, |d| Caps::assumed(d, &topo));
    plan.steps
        .iter()
        .filter(|s| matches!(s.work, Work::Share { .. } | Work::Import { .. }))
        .map(|s| s.node)
        .collect()
}

impl<'g> Picture<'g> {
    fn new(g: &'g Graph) -> Picture<'g> {
        let order = g.topo_order();
        let groups = clusters::groups(g, &order);
        let mut drawn_as: HashMap<NodeId, usize> = HashMap::new();
        for (k, members) in groups.iter().enumerate() {
            for id in members {
                drawn_as.insert(*id, k);
            }
        }
        let shared = moving_nothing(g);
        Picture {
            g,
            num: Numbering::new(g),
            steps: clusters::steps(g, &order),
            order,
            groups,
            drawn_as,
            shared,
        }
    }

    fn number(&self, id: NodeId) -> usize {
        self.num.number(id).unwrap_or(usize::MAX)
    }

    /// The DOT name of `id`: its group's (named after the first member)
    /// where it is drawn as one.
    fn name(&self, id: NodeId) -> String {
        match self.drawn_as.get(&id).and_then(|k| self.groups.get(*k)) {
            Some(members) => format!(
                "g{}",
                members.first().map_or(usize::MAX, |m| self.number(*m))
            ),
            None => format!("v{}", self.number(id)),
        }
    }

    /// One node's label: number, op, attributes, a copy's route and step,
    /// the type.
    fn label_of(&self, id: NodeId) -> String {
        let g = self.g;
        let Some(n) = g.node(id) else {
            return String::new();
        };
        let mut label = format!("%{} {}", self.number(id), n.op.mnemonic());
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
                if let Some(step) = self.steps.get(&id) {
                    let _ = write!(label, "  step {step}");
                }
                if self.shared.contains(&id) {
                    label.push_str("\nshared, 0 B");
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
    }

    /// One node's declaration (a group's, where it is its first member;
    /// nothing for the group's other members).
    fn node_decl(&self, s: &mut String, id: NodeId, indent: &str) {
        let Some(n) = self.g.node(id) else { return };
        let label = match self.drawn_as.get(&id).and_then(|k| self.groups.get(*k)) {
            None => self.label_of(id),
            // A group is drawn once, where its first member is.
            Some(members) if members.first() == Some(&id) => group_label(
                self.g,
                members,
                &|id| self.number(id),
                (&self.steps, &self.shared),
            ),
            Some(_) => return,
        };
        let grouped = if self.drawn_as.contains_key(&id) {
            ", peripheries=2"
        } else {
            ""
        };
        let _ = writeln!(
            s,
            "{indent}{} [label={}, {}{grouped}];",
            self.name(id),
            quote(&label),
            shape_of(&n.op)
        );
    }

    /// One cluster per device with its nodes, then the nodes on no device.
    fn write_nodes(&self, s: &mut String) {
        let mut clusters: BTreeMap<Device, Vec<NodeId>> = BTreeMap::new();
        let mut loose = Vec::new();
        for &id in &self.order {
            match self.g.node(id).and_then(|n| n.op.device()) {
                Some(d) => clusters.entry(d).or_default().push(id),
                None => loose.push(id),
            }
        }
        for (i, (dev, ids)) in clusters.iter().enumerate() {
            let _ = writeln!(s, "  subgraph cluster_{i} {{");
            let _ = writeln!(s, "    label={};", quote(&dev.to_string()));
            let _ = writeln!(
                s,
                "    style=filled;\n    color=\"#8c8c8c\";\n    fillcolor={};",
                quote(vendor_color(dev.kind))
            );
            for &id in ids {
                self.node_decl(s, id, "    ");
            }
            s.push_str("  }\n");
        }
        for &id in &loose {
            self.node_decl(s, id, "  ");
        }
    }

    /// The drawn edges, in consumer order then operand order; edges between
    /// the same two drawn nodes (a group's) are drawn once, their labels
    /// joined. An edge across devices carries its bytes, or, into a copy
    /// that shares its source's buffer, says it moves none.
    fn edges(&self) -> Vec<((String, String), Edge)> {
        let g = self.g;
        let mut edges: Vec<((String, String), Edge)> = Vec::new();
        let mut edge_at: HashMap<(String, String), usize> = HashMap::new();
        for &id in &self.order {
            let Some(n) = g.node(id) else { continue };
            let here = n.op.device();
            let multi_operand = n.operands.len() > 1;
            for (slot, v) in n.operands.iter().enumerate() {
                if !g.contains(v.node) {
                    continue;
                }
                let key = (self.name(v.node), self.name(id));
                if key.0 == key.1 {
                    continue;
                }
                let mut label = Vec::new();
                if g.node(v.node).is_some_and(|p| p.op.is_multi_result()) {
                    label.push(format!("#{}", v.result));
                }
                if multi_operand {
                    label.push(format!("[{slot}]"));
                }
                let mut kind = Crossing::None;
                if let (Some(a), Some(b)) = (g.value_device(*v), here) {
                    if a != b && self.shared.contains(&id) {
                        label.push("shared, 0 B".into());
                        kind = Crossing::Shared;
                    } else if a != b {
                        let bytes = g.value_type(*v).map_or(0, |t| t.size_bytes());
                        label.push(human_bytes(bytes));
                        kind = Crossing::Moved;
                    }
                }
                let at = *edge_at.entry(key.clone()).or_insert_with(|| {
                    edges.push((key, Edge::default()));
                    edges.len() - 1
                });
                if let Some((_, e)) = edges.get_mut(at) {
                    e.add(label.join(" "), kind);
                }
            }
        }
        edges
    }
}

/// The shape and fill of a node for its op.
fn shape_of(op: &Op) -> &'static str {
    match op {
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
    }
}

/// The edges' lines: bold where bytes cross devices, dashed where a copy
/// crosses devices by sharing a host buffer (no bytes move).
fn write_edges(s: &mut String, edges: &[((String, String), Edge)]) {
    for ((from, to), e) in edges {
        let mut attrs: Vec<String> = Vec::new();
        match e.crossing {
            Crossing::Moved => {
                attrs.push("style=bold".into());
                attrs.push("penwidth=2.5".into());
            }
            Crossing::Shared => attrs.push("style=dashed".into()),
            Crossing::None => {}
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
}

/// The widest line of the legend, in characters.
const LEGEND_COLUMNS: usize = 100;

/// The widest line of a group's lists (its members, their sources).
const GROUP_COLUMNS: usize = 24;

/// How many labels one merged edge shows before `…`.
const EDGE_LABELS: usize = 3;

/// Whether an edge crosses devices, and how.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
enum Crossing {
    /// Producer and consumer on one device (or no device).
    #[default]
    None,
    /// Across devices by a shared host buffer: no bytes move.
    Shared,
    /// Across devices, bytes moving.
    Moved,
}

/// One drawn edge: the labels of the graph edges it stands for, and the
/// most any of them crosses (bytes moving outranks a shared buffer).
#[derive(Default)]
struct Edge {
    labels: Vec<String>,
    more: usize,
    crossing: Crossing,
}

impl Edge {
    fn add(&mut self, label: String, crossing: Crossing) {
        self.crossing = self.crossing.max(crossing);
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
    (steps, shared): (&HashMap<NodeId, usize>, &BTreeSet<NodeId>),
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
        match members.iter().filter(|id| shared.contains(id)).count() {
            0 => {}
            k if k == members.len() => label.push_str("\nall shared, 0 B"),
            k => {
                let _ = write!(label, "\n{k} shared, 0 B");
            }
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
    fn a_copy_that_shares_a_host_buffer_is_drawn_moving_nothing() {
        // cpu:1 -> cpu:0 feeds only the add, cpu:0 -> cpu:1 is returned:
        // the plan shares the buffer of both. cpu:0 -> cuda:0 moves.
        let src = "graph @s {\n  %0 = input \"a\" @cpu:0 : f32[256]\n  %1 = input \"b\" @cpu:1 : f32[256]\n  %2 = copy %1 -> cpu:0 : f32[256]\n  %3 = add %0, %2 @cpu:0 : f32[256]\n  %4 = copy %3 -> cpu:1 : f32[256]\n  %5 = copy %3 -> cuda:0 : f32[256]\n  return %3, %4, %5\n}\n";
        let dot = to_dot(&parse(src).unwrap());
        assert!(
            dot.contains("v1 -> v2 [style=dashed, xlabel=\"shared, 0 B\"]"),
            "{dot}"
        );
        assert!(dot.contains("step 1\\nshared, 0 B\\nf32[256]"), "{dot}");
        assert!(
            dot.contains("v3 -> v4 [style=dashed, xlabel=\"shared, 0 B\"]"),
            "{dot}"
        );
        assert!(
            dot.contains("v3 -> v5 [style=bold, penwidth=2.5, xlabel=\"1 KiB\"]"),
            "{dot}"
        );
        // A graph with its collectives still in it has no plan: drawn as
        // before, every crossing edge bold.
        let lazy = "graph @l {\n  %0 = input \"a\" @cpu:0 : f32[4]\n  %1 = copy %0 -> cpu:1 : f32[4]\n  %2 = input \"b\" @cpu:1 : f32[4]\n  %3:2 = all_reduce.sum %1, %2 : f32[4]\n  return %3#0\n}\n";
        let dot = to_dot(&parse(lazy).unwrap());
        assert!(!dot.contains("shared"), "{dot}");
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
                "g4 [label=\"3 x copy\\n%4 %5 %6\\ncpu:0 -> cpu:1  step 1\\nall shared, 0 B\\nf32[2] each\""
            ),
            "{dot}"
        );
        assert!(dot.contains("  v0 -> g1;\n  g1 -> g4 [style=dashed, xlabel=\"shared, 0 B\"];\n  g4 -> v7 [xlabel=\"[0], [1], [2]\"];\n"), "{dot}");
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

    /// A graph that does not verify is still drawn, and the plan (which
    /// takes verified types) is not asked about it: a `slice` along axis 5
    /// of a rank-2 tensor panicked in the plan's regions (found by the
    /// `parse` fuzzer, kept in `tests/fuzz/regressions/parse/`).
    #[test]
    fn an_unverified_graph_is_drawn_without_its_plan() {
        let src = "graph @g {
  %0 = input \"a\" @cpu:0 : i32[8,4]
  %1 = copy %0 -> cpu:1 : i32[8,4]
  %2 = slice %1 {axis=5, len=4, start=2} @cpu:1 : i32[4,4]
  return %2
}
";
        let g = crate::text::parse(src).unwrap();
        assert!(
            crate::verify::verify(&g, crate::verify::Level::Structural, &Default::default())
                .is_err()
        );
        let dot = to_dot(&g);
        assert!(dot.contains("slice"), "{dot}");
        assert!(!dot.contains("shared, 0 B"), "{dot}");
    }
}
