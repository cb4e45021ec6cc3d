//! Printing a graph as text IR.
//!
//! Each node line is spelled as its op's row of the op table
//! ([`crate::op::defs`]) says: mnemonic and variant, attributes in key
//! order, placement form.

use crate::device::Device;
use crate::dtype::TensorType;
use crate::graph::{Graph, NodeId, ValueId};
use crate::op::defs::{AttrValue, Placement};
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
        let mut s = String::new();
        self.push_name(&mut s, g, v);
        s
    }
    /// Appends [`Numbering::name`] to `out`.
    pub fn push_name(&self, out: &mut String, g: &Graph, v: ValueId) {
        match (self.number(v.node), g.node(v.node)) {
            (Some(n), Some(node)) => {
                out.push('%');
                push_num(out, n as u64);
                if node.op.is_multi_result() {
                    out.push('#');
                    push_num(out, u64::from(v.result));
                }
            }
            _ => {
                out.push_str("%?");
                push_num(out, v.node.0.index() as u64);
            }
        }
    }
}

/// Prints the whole graph.
pub fn print(g: &Graph) -> String {
    let order = g.topo_order();
    let num = Numbering::from_order(&order);
    // Lowered graphs print about 40 bytes per node: one allocation instead
    // of regrowing (and copying) the text.
    let notes: usize = g.notes().iter().map(|n| n.len() + 6).sum();
    let mut s = String::with_capacity(g.name.len() + notes + 48 * order.len() + 64);
    push_header(&mut s, g);
    s.push('\n');
    for note in g.notes() {
        push_note(&mut s, note);
        s.push('\n');
    }
    for id in order {
        if push_node_line(&mut s, g, &num, id) {
            s.push('\n');
        }
    }
    push_return(&mut s, g, &num);
    s.push_str("\n}\n");
    s
}

/// Prints the graph as lines, each tagged with the node it shows (if any),
/// so that the verifier can put errors under the offending line. The lines
/// are those of [`print()`].
pub fn print_lines(g: &Graph) -> Vec<(Option<NodeId>, String)> {
    let order = g.topo_order();
    let num = Numbering::from_order(&order);
    let mut lines = Vec::with_capacity(g.node_count() + 3 + g.notes().len());
    let mut header = String::new();
    push_header(&mut header, g);
    lines.push((None, header));
    for note in g.notes() {
        let mut line = String::new();
        push_note(&mut line, note);
        lines.push((None, line));
    }
    for id in order {
        let mut line = String::new();
        if push_node_line(&mut line, g, &num, id) {
            lines.push((Some(id), line));
        }
    }
    let mut ret = String::new();
    push_return(&mut ret, g, &num);
    lines.push((None, ret));
    lines.push((None, "}".into()));
    lines
}

fn push_header(out: &mut String, g: &Graph) {
    out.push_str("graph @");
    out.push_str(&g.name);
    out.push_str(" {");
}

fn push_note(out: &mut String, note: &str) {
    out.push_str("  // ");
    out.push_str(note);
}

fn push_return(out: &mut String, g: &Graph, num: &Numbering) {
    out.push_str("  return");
    for (i, v) in g.outputs().iter().enumerate() {
        out.push_str(if i == 0 { " " } else { ", " });
        num.push_name(out, g, *v);
    }
}

/// Appends a number in decimal, without going through `fmt`.
fn push_num(out: &mut String, n: u64) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    let mut n = n;
    loop {
        i -= 1;
        if let Some(b) = buf.get_mut(i) {
            *b = b'0' + (n % 10) as u8;
        }
        n /= 10;
        if n == 0 || i == 0 {
            break;
        }
    }
    for b in buf.iter().skip(i) {
        out.push(char::from(*b));
    }
}

fn push_device(out: &mut String, d: Device) {
    out.push_str(d.kind.as_str());
    out.push(':');
    push_num(out, u64::from(d.index));
}

/// Appends the line of node `id` (without its newline); false, with nothing
/// appended, for a missing or unnumbered node.
fn push_node_line(s: &mut String, g: &Graph, num: &Numbering, id: NodeId) -> bool {
    let (Some(n), Some(number)) = (g.node(id), num.number(id)) else {
        return false;
    };
    s.push_str("  %");
    push_num(s, number as u64);
    if n.op.is_multi_result() {
        s.push(':');
        push_num(s, n.num_results() as u64);
    }
    s.push_str(" = ");
    // The op's row of the table says how its line is spelled.
    let parts = n.op.parts();
    s.push_str(parts.def.mnemonic);
    if let Some(v) = parts.variant {
        s.push('.');
        s.push_str(v.as_str());
    }
    let quoted = match &n.op {
        Op::Input { name, .. } => Some(name),
        Op::Extern(x) => Some(&x.name),
        _ => None,
    };
    if let Some(name) = quoted {
        s.push_str(" \"");
        push_escaped(s, name);
        s.push('"');
    }
    for (i, v) in n.operands.iter().enumerate() {
        s.push_str(if i == 0 { " " } else { ", " });
        num.push_name(s, g, *v);
    }
    if let Op::Extern(x) = &n.op {
        let block = x.attr_text();
        if !block.is_empty() {
            s.push(' ');
            s.push_str(&block);
        }
    }
    if parts.has_attrs() {
        s.push_str(" {");
        let ints = parts.ints();
        for (i, (k, v)) in ints.iter().enumerate() {
            if i > 0 {
                s.push_str(", ");
            }
            s.push_str(k);
            s.push('=');
            match v {
                AttrValue::Int(n) => push_num(s, *n),
                AttrValue::DType(d) => s.push_str(d.as_str()),
            }
        }
        for (i, (k, list)) in parts.lists.iter().enumerate() {
            if i > 0 || !ints.is_empty() {
                s.push_str(", ");
            }
            s.push_str(k);
            s.push_str("=[");
            for (j, v) in list.iter().enumerate() {
                if j > 0 {
                    s.push_str(", ");
                }
                push_num(s, *v);
            }
            s.push(']');
        }
        s.push('}');
    }
    match parts.def.placement {
        Placement::At => {
            if let Some(d) = n.op.device() {
                s.push_str(" @");
                push_device(s, d);
            }
        }
        Placement::To => {
            if let Some(d) = n.op.device() {
                s.push_str(" -> ");
                push_device(s, d);
            }
        }
        Placement::ToList => {
            s.push_str(" -> [");
            for (i, d) in n.op.targets().unwrap_or_default().iter().enumerate() {
                if i > 0 {
                    s.push_str(", ");
                }
                push_device(s, *d);
            }
            s.push(']');
        }
        Placement::Operands => {}
    }
    s.push_str(" : ");
    if n.result_tys.is_empty() {
        push_type(s, &n.ty);
    } else {
        for (i, t) in n.result_tys.iter().enumerate() {
            if i > 0 {
                s.push_str(", ");
            }
            push_type(s, t);
        }
    }
    true
}

/// `f32[2,3]`.
fn push_type(s: &mut String, t: &TensorType) {
    s.push_str(t.dtype.as_str());
    s.push('[');
    for (i, d) in t.shape.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        push_num(s, *d as u64);
    }
    s.push(']');
}

/// Escapes `"` and `\` (and control characters) in an input name.
pub(crate) fn push_escaped(out: &mut String, name: &str) {
    push_backslashed(out, name, |out, c| match c {
        '\t' => out.push_str("\\t"),
        c if c.is_control() => {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        }
        c => out.push(c),
    });
}

/// Appends `s` with `"`, `\` and newlines backslash-escaped, as the text
/// IR's, DOT's (`dot`) and JSON's (`html::json`) string literals all write
/// them, and every other character as `other` writes it: where the three
/// differ (tabs, the other control characters, what HTML must not see).
pub(crate) fn push_backslashed(
    out: &mut String,
    s: &str,
    mut other: impl FnMut(&mut String, char),
) {
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c => other(out, c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_print_like_display() {
        for n in [0, 7, 10, 1024, 999_999, u64::from(u32::MAX), u64::MAX] {
            let mut s = String::from("x");
            push_num(&mut s, n);
            assert_eq!(s, format!("x{n}"));
        }
    }
}
