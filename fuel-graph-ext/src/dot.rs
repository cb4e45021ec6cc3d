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
use std::collections::BTreeMap;
use std::fmt::Write;

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
    let name = |id: NodeId| format!("v{}", num.number(id).unwrap_or(usize::MAX));
    let mut s = String::new();
    let _ = writeln!(s, "digraph {} {{", quote(&g.name));
    for note in g.notes() {
        let _ = writeln!(s, "  // {note}");
    }
    s.push_str("  compound=true;\n  rankdir=TB;\n  newrank=true;\n");
    s.push_str("  node [fontname=\"monospace\", fontsize=10, shape=box, style=\"rounded,filled\", fillcolor=white];\n");
    s.push_str("  edge [fontname=\"monospace\", fontsize=9];\n");
    if !g.notes().is_empty() {
        let _ = writeln!(
            s,
            "  labelloc=t;\n  labeljust=l;\n  label={};",
            quote(&(g.notes().join("\n") + "\n"))
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
    let node_decl = |s: &mut String, id: NodeId, indent: &str| {
        let Some(n) = g.node(id) else { return };
        let number = num.number(id).unwrap_or(0);
        let mut label = format!("%{number} {}", n.op.mnemonic());
        if let Op::Input { name, .. } = &n.op {
            let _ = write!(label, " \"{name}\"");
        }
        let parts = n.op.parts();
        if !parts.attrs.is_empty() || !parts.lists.is_empty() {
            let mut kv: Vec<String> =
                n.op.attrs()
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
        let shape = match &n.op {
            Op::Input { .. } => "shape=invhouse",
            Op::Copy { .. } => "shape=cds, fillcolor=\"#fff4c2\"",
            Op::Move { .. } => "shape=cds, fillcolor=\"#ffd9a8\", style=\"filled,dashed\"",
            op if op.is_collective() => "shape=hexagon, fillcolor=\"#e9dcf7\"",
            op if op.is_comm() => "shape=octagon, fillcolor=\"#e9dcf7\", style=\"filled,bold\"",
            op if op.is_driver_collective() => {
                "shape=hexagon, fillcolor=\"#c9e7f2\", style=\"filled,bold\""
            }
            _ => "shape=box",
        };
        let _ = writeln!(
            s,
            "{indent}{} [label={}, {shape}];",
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
    // Edges, in consumer order then operand order.
    for &id in &order {
        let Some(n) = g.node(id) else { continue };
        let here = n.op.device();
        let multi_operand = n.operands.len() > 1;
        for (slot, v) in n.operands.iter().enumerate() {
            if !g.contains(v.node) {
                continue;
            }
            let from = g.value_device(*v);
            let producer_multi = g.node(v.node).is_some_and(|p| p.op.is_multi_result());
            let mut attrs: Vec<String> = Vec::new();
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
            if let (Some(a), Some(b)) = (from, here) {
                if a != b {
                    let bytes = g.value_type(*v).map_or(0, |t| t.size_bytes());
                    if !label.is_empty() {
                        label.push(' ');
                    }
                    label.push_str(&human_bytes(bytes));
                    attrs.push("style=bold".into());
                    attrs.push("penwidth=2.5".into());
                }
            }
            if !label.is_empty() {
                attrs.push(format!("label={}", quote(&label)));
            }
            let attr_text = if attrs.is_empty() {
                String::new()
            } else {
                format!(" [{}]", attrs.join(", "))
            };
            let _ = writeln!(s, "  {} -> {}{attr_text};", name(v.node), name(id));
        }
    }
    // Outputs.
    s.push_str("  ret [label=\"return\", shape=doublecircle, fillcolor=\"#eeeeee\"];\n");
    for (k, v) in g.outputs().iter().enumerate() {
        if g.contains(v.node) {
            let _ = writeln!(
                s,
                "  {} -> ret [label={}, style=dotted];",
                name(v.node),
                quote(&format!("out {k}"))
            );
        }
    }
    s.push_str("}\n");
    s
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
            dot.contains("v1 [label=\"%1 copy\\ncuda:0 -> cpu:0\\nf32[1024]\", shape=cds"),
            "{dot}"
        );
        assert!(
            dot.contains("v0 -> v1 [style=bold, penwidth=2.5, label=\"4 KiB\"]"),
            "{dot}"
        );
        assert!(dot.contains("// why: because"));
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
    fn bytes_are_human() {
        assert_eq!(human_bytes(4096), "4 KiB");
        assert_eq!(human_bytes(100), "100 B");
        assert_eq!(human_bytes(3 << 19), "1.5 MiB");
    }
}
