//! Printing a graph as text IR.

use crate::graph::{Graph, NodeId, ValueId};
use crate::op::Op;
use std::fmt::Write;

/// The dense `%N` numbering used by one print of a graph.
#[derive(Clone, Debug, Default)]
pub struct Numbering {
    /// Number by node index; `usize::MAX` for a node not numbered.
    map: Vec<usize>,
}

impl Numbering {
    /// Numbers nodes in the graph's deterministic topological order.
    pub fn new(g: &Graph) -> Numbering {
        Numbering::from_order(&g.topo_order())
    }
    /// Numbers nodes in the given order (for a caller that already has
    /// [`Graph::topo_order`]).
    pub fn from_order(order: &[NodeId]) -> Numbering {
        let bound = order.iter().map(|n| n.0.index() + 1).max().unwrap_or(0);
        let mut map = vec![usize::MAX; bound];
        for (i, n) in order.iter().enumerate() {
            if let Some(slot) = map.get_mut(n.0.index()) {
                *slot = i;
            }
        }
        Numbering { map }
    }
    /// The number of a node.
    pub fn number(&self, id: NodeId) -> Option<usize> {
        self.map
            .get(id.0.index())
            .copied()
            .filter(|n| *n != usize::MAX)
    }
    /// The text name of a value: `%N`, `%N#i`, or `%?` for a dangling one.
    pub fn name(&self, g: &Graph, v: ValueId) -> String {
        match (self.number(v.node), g.node(v.node)) {
            (Some(n), Some(node)) if node.op.is_multi_result() => format!("%{n}#{}", v.result),
            (Some(n), Some(_)) => format!("%{n}"),
            _ => format!("%?{}", v.node.0.index()),
        }
    }
}

/// Prints the whole graph.
pub fn print(g: &Graph) -> String {
    let mut s = String::new();
    for (_, line) in print_lines(g) {
        s.push_str(&line);
        s.push('\n');
    }
    s
}

/// Prints the graph as lines, each tagged with the node it shows (if any),
/// so that the verifier can put errors under the offending line.
pub fn print_lines(g: &Graph) -> Vec<(Option<NodeId>, String)> {
    let order = g.topo_order();
    let num = Numbering::from_order(&order);
    let mut lines = Vec::with_capacity(g.node_count() + 3 + g.notes().len());
    lines.push((None, format!("graph @{} {{", g.name)));
    for note in g.notes() {
        lines.push((None, format!("  // {note}")));
    }
    for id in order {
        if let Some(line) = node_line(g, &num, id) {
            lines.push((Some(id), line));
        }
    }
    let mut ret = String::from("  return");
    for (i, v) in g.outputs().iter().enumerate() {
        ret.push_str(if i == 0 { " " } else { ", " });
        ret.push_str(&num.name(g, *v));
    }
    lines.push((None, ret));
    lines.push((None, "}".into()));
    lines
}

fn node_line(g: &Graph, num: &Numbering, id: NodeId) -> Option<String> {
    let n = g.node(id)?;
    let mut s = format!("  %{}", num.number(id)?);
    if n.op.is_multi_result() {
        let _ = write!(s, ":{}", n.num_results());
    }
    let _ = write!(s, " = {}", n.op.mnemonic());
    if let Op::Input { name, .. } = &n.op {
        let _ = write!(s, " \"{}\"", escape(name));
    }
    for (i, v) in n.operands.iter().enumerate() {
        s.push_str(if i == 0 { " " } else { ", " });
        s.push_str(&num.name(g, *v));
    }
    let attrs = n.op.attrs();
    if !attrs.is_empty() {
        s.push_str(" {");
        for (i, (k, v)) in attrs.iter().enumerate() {
            if i > 0 {
                s.push_str(", ");
            }
            let _ = write!(s, "{k}={v}");
        }
        s.push('}');
    }
    match &n.op {
        Op::Copy { to } | Op::Move { to } => {
            let _ = write!(s, " -> {to}");
        }
        Op::Broadcast { to } => {
            s.push_str(" -> [");
            for (i, d) in to.iter().enumerate() {
                if i > 0 {
                    s.push_str(", ");
                }
                let _ = write!(s, "{d}");
            }
            s.push(']');
        }
        op => {
            if let Some(d) = op.device() {
                let _ = write!(s, " @{d}");
            }
        }
    }
    let _ = write!(s, " : {}", n.ty);
    Some(s)
}

/// Escapes `"` and `\` (and control characters) in an input name.
pub(crate) fn escape(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    out
}
