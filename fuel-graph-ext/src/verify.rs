//! The verifier: every rule a graph must satisfy, checked in one sweep.
//!
//! It collects all errors instead of stopping at the first, and renders them
//! under the offending line of the printed graph. Two levels:
//!
//! - [`Level::Structural`] holds for every graph, a pipeline's input too:
//!   the graph is acyclic; operands and outputs are defined; every declared
//!   type fits ([`TensorType::fits`]: at most 2^63 - 1 bytes, so no size
//!   computed from it overflows); each node's declared type is the one its
//!   op infers from its operands (equal shard types for the reducing
//!   collectives; all_gather concatenates shards that may differ along its
//!   axis; reduce_scatter splits as its `split` says, or evenly with the
//!   remainder on the last rank); attributes are in range (root, axis, slice
//!   bounds, `by`); inputs that share a name share a type; a moved value has
//!   no other use.
//! - [`Level::Placement`] adds the rules for a pipeline's output: the
//!   operands of a non-transfer, non-collective op live on its device, and
//!   every copy or move is one feasible hop per the [`Topology`]; a driver
//!   collective runs on a device kind whose driver the topology declares,
//!   and all its operands live on devices of that kind.

use crate::dtype::{TensorType, MAX_TENSOR_BYTES};
use crate::graph::{Graph, Node, NodeId, ValueId};
use crate::op::{infer_type, result_types_of, Op};
use crate::text::{excerpt, print_lines, Numbering};
use crate::topology::Topology;
use smallvec::SmallVec;
use std::collections::HashMap;
use std::fmt;

/// `f32[1], f32[2]`: types as a line declares them.
fn type_list(tys: &[TensorType]) -> String {
    let each: Vec<String> = tys.iter().map(ToString::to_string).collect();
    each.join(", ")
}

/// Which rules to check.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// Rules that hold for every graph.
    Structural,
    /// Structural rules plus placement rules (a pipeline's output).
    Placement,
}

/// One broken rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifyError {
    /// The node at fault, or `None` for graph-wide errors.
    pub node: Option<NodeId>,
    /// A sentence saying what is wrong and, where one exists, the fix.
    pub message: String,
}

/// All broken rules of one graph, with its rendering.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifyErrors {
    /// Each error.
    pub errors: Vec<VerifyError>,
    /// The printed graph with each error under its line.
    pub rendered: String,
}

impl fmt::Display for VerifyErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "verification failed with {} error(s):",
            self.errors.len()
        )?;
        f.write_str(&self.rendered)
    }
}

impl std::error::Error for VerifyErrors {}

/// Checks `g` at `level`; `Ok` if every rule holds.
pub fn verify(g: &Graph, level: Level, topo: &Topology) -> Result<(), VerifyErrors> {
    let errors = collect(g, level, topo);
    if errors.is_empty() {
        Ok(())
    } else {
        let rendered = render(g, &errors);
        Err(VerifyErrors { errors, rendered })
    }
}

fn collect(g: &Graph, level: Level, topo: &Topology) -> Vec<VerifyError> {
    let mut errs = Vec::new();
    let (order, acyclic) = g.topo_order_acyclic();
    let num = Numbering::from_order(&order);
    let mut push = |node: Option<NodeId>, message: String| errs.push(VerifyError { node, message });
    if !acyclic {
        push(
            None,
            "the graph has a cycle: a value is (indirectly) its own operand".into(),
        );
    }
    for (i, v) in g.outputs().iter().enumerate() {
        if !g.contains_value(*v) {
            push(None, format!("returned value {i} is not defined"));
        }
    }
    // Each input name's first declaration, in order.
    let mut inputs: HashMap<&str, (NodeId, &TensorType)> = HashMap::new();
    for id in order {
        let Some(n) = g.node(id) else { continue };
        if let Op::Input { name, .. } = &n.op {
            match inputs.get(name.as_str()) {
                Some((first, ty)) if *ty != &n.ty => push(
                    Some(id),
                    format!(
                        "input {} is declared {} here but {ty} by {}; inputs with one name are one tensor, so give them one type or different names",
                        excerpt::name(name),
                        n.ty,
                        num.name(
                            g,
                            ValueId {
                                node: *first,
                                result: 0
                            }
                        ),
                    ),
                ),
                Some(_) => {}
                None => {
                    inputs.insert(name, (id, &n.ty));
                }
            }
        }
        if !n.ty.fits() {
            push(
                Some(id),
                format!(
                    "type {} takes more than {MAX_TENSOR_BYTES} bytes (2^63 - 1), the most one tensor can address; use a smaller shape",
                    n.ty
                ),
            );
        }
        let mut defined = true;
        for (slot, v) in n.operands.iter().enumerate() {
            if !g.contains_value(*v) {
                push(Some(id), format!("operand {slot} is not defined"));
                defined = false;
            }
        }
        if !defined {
            continue;
        }
        check_type(g, id, n, &mut push);
        check_move(g, &num, id, n, &mut push);
        if level >= Level::Placement {
            check_placement(g, &num, topo, id, n, &mut push);
        }
    }
    errs
}

/// A node's declared type against the one its op infers (a type too large
/// to address is reported by the caller, once).
fn check_type(g: &Graph, id: NodeId, n: &Node, push: &mut impl FnMut(Option<NodeId>, String)) {
    if !matches!(n.op, Op::Input { .. }) && n.ty.fits() {
        let tys: SmallVec<[&TensorType; 8]> =
            n.operands.iter().filter_map(|v| g.value_type(*v)).collect();
        match infer_type(&n.op, &tys) {
            Ok(t) => {
                // One type for every result, or one per result where
                // they differ (an uneven reduce_scatter).
                let want = result_types_of(&n.op, &tys, &t).ok().flatten();
                let ok = match &want {
                    None => t == n.ty && n.result_tys.is_empty(),
                    Some(each) => *each == n.result_tys,
                };
                if !ok {
                    let want = want.unwrap_or_else(|| vec![t]);
                    let declared = if n.result_tys.is_empty() {
                        std::slice::from_ref(&n.ty)
                    } else {
                        &n.result_tys
                    };
                    let (d, w) = (type_list(declared), type_list(&want));
                    push(
                        Some(id),
                        format!("declared type {d} but the operands give {w}; declare {w}"),
                    );
                }
            }
            Err(e) => push(Some(id), e.to_string()),
        }
    }
}

/// A move consumes its source.
fn check_move(
    g: &Graph,
    num: &Numbering,
    id: NodeId,
    n: &Node,
    push: &mut impl FnMut(Option<NodeId>, String),
) {
    if let Op::Move { .. } = n.op {
        if let Some(src) = n.operands.first() {
            if g.use_count(*src) > 1 {
                push(
                    Some(id),
                    format!(
                        "`move` consumes {} but it has other uses; use `copy` instead",
                        num.name(g, *src)
                    ),
                );
            }
        }
    }
}

/// The placement rules of one node (a pipeline's output).
fn check_placement(
    g: &Graph,
    num: &Numbering,
    topo: &Topology,
    id: NodeId,
    n: &Node,
    push: &mut impl FnMut(Option<NodeId>, String),
) {
    match &n.op {
        Op::Copy { to } | Op::Move { to } => {
            let Some(src) = n.operands.first().and_then(|v| g.value_device(*v)) else {
                return;
            };
            if !topo.is_direct(src, *to) {
                push(
                    Some(id),
                    format!(
                        "{src} -> {to} has no direct copy path; run `split-cross-vendor-copies` to stage it through {}",
                        topo.staging
                    ),
                );
            }
        }
        Op::DriverAllReduce { rank, device, .. } => {
            let kind = device.kind;
            if kind == crate::device::DeviceKind::Vulkan {
                push(
                    Some(id),
                    "no collective driver exists for vulkan devices; lower this collective with copy chains instead".into(),
                );
            } else if !topo.drivers.contains(&kind) {
                push(
                    Some(id),
                    format!(
                        "the topology has no collective driver for {kind}; add `driver {kind}` to the topology file, or lower without a driver"
                    ),
                );
            }
            for (slot, v) in n.operands.iter().enumerate() {
                let Some(d) = g.value_device(*v) else {
                    continue;
                };
                if slot == *rank && d != *device {
                    push(
                        Some(id),
                        format!("rank {rank}'s operand ({}) is on {d}, but the result is placed on {device}; they must match", num.name(g, *v)),
                    );
                } else if d.kind != kind {
                    push(
                        Some(id),
                        format!(
                            "operand {slot} ({}) is on {d}, but a {kind} driver only reaches {kind} devices; stage it with copies first",
                            num.name(g, *v)
                        ),
                    );
                }
            }
        }
        op if op.is_collective() => {}
        op => {
            let Some(dev) = op.device() else { return };
            for (slot, v) in n.operands.iter().enumerate() {
                if let Some(d) = g.value_device(*v) {
                    if d != dev {
                        push(
                            Some(id),
                            format!(
                                "operand {slot} ({}) is on {d} but `{}` runs on {dev}; run `insert-cross-device-copies`",
                                num.name(g, *v),
                                op.mnemonic()
                            ),
                        );
                    }
                }
            }
        }
    }
}

/// Prints the graph with `// ^ error: ...` lines under each offending line,
/// and graph-wide errors at the end. Lines are shown as error messages show
/// input ([`excerpt::excerpt`]): hidden characters (in notes) escaped, and
/// lines past [`excerpt::LINE_CHARS`] characters cut.
pub fn render(g: &Graph, errors: &[VerifyError]) -> String {
    let mut out = String::new();
    for (node, line) in print_lines(g) {
        out.push_str(&excerpt::excerpt(&line, excerpt::LINE_CHARS));
        out.push('\n');
        if let Some(id) = node {
            let indent = line.len() - line.trim_start().len();
            for e in errors.iter().filter(|e| e.node == Some(id)) {
                out.push_str(&" ".repeat(indent));
                out.push_str("// ^ error: ");
                out.push_str(&e.message);
                out.push('\n');
            }
        }
    }
    for e in errors.iter().filter(|e| e.node.is_none()) {
        out.push_str("// error: ");
        out.push_str(&e.message);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::parse;

    #[test]
    fn collects_every_error_under_its_line() {
        let src = "graph @bad {\n  %0 = input \"a\" @cuda:0 : f32[4]\n  %1 = input \"b\" @vulkan:0 : f32[6]\n  %2 = add %0, %1 @cuda:0 : f32[4]\n  %3 = copy %1 -> cuda:0 : f32[6]\n  %4 = reduce.sum %0, %0 {root=2} : f32[4]\n  return %2, %3, %4\n}\n";
        let g = parse(src).unwrap();
        assert!(verify(&g, Level::Structural, &Topology::default()).is_err());
        let e = verify(&g, Level::Placement, &Topology::default()).unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains("operand 1 of `add` has type f32[6]"),
            "{text}"
        );
        assert!(text.contains("root 2 is out of range"), "{text}");
        assert!(text.contains("run `split-cross-vendor-copies`"), "{text}");
        assert!(text.contains("run `insert-cross-device-copies`"), "{text}");
        assert!(
            text.contains("  %2 = add %0, %1 @cuda:0 : f32[4]\n  // ^ error:"),
            "{text}"
        );
    }

    #[test]
    fn sizes_that_overflow_and_inputs_that_disagree() {
        let half = 1usize << 63;
        let src = format!("graph @big {{\n  %0 = input \"a\" @cpu:0 : f32[{half}]\n  %1 = input \"a\" @cpu:0 : u8[{half}]\n  %2 = input \"b\" @cpu:0 : u8[4611686018427387904]\n  %3 = concat %2, %2 {{axis=0}} @cpu:0 : u8[9223372036854775808]\n  %4 = input \"a\" @cpu:1 : f32[{half}]\n  return %0, %1, %3, %4\n}}\n");
        let g = parse(&src).unwrap();
        let e = verify(&g, Level::Structural, &Topology::default()).unwrap_err();
        let text = e.to_string();
        // Both `a`s and the concat are too large; `b` (2^62 bytes) fits.
        assert_eq!(
            text.matches("takes more than 9223372036854775807 bytes (2^63 - 1)")
                .count(),
            4,
            "{text}"
        );
        assert!(
            text.contains("input \"a\" is declared u8[9223372036854775808] here but f32[9223372036854775808] by %0"),
            "{text}"
        );
        // Same name and type on two devices is one tensor: no error.
        assert_eq!(text.matches("is declared").count(), 1, "{text}");
        // A concat whose declared type fits but whose operands add up past
        // the limit (the old saturating sum gave 2^64 - 1).
        let src = src.replace(": u8[9223372036854775808]\n  %4", ": u8[4]\n  %4");
        let text = verify(
            &parse(&src).unwrap(),
            Level::Structural,
            &Topology::default(),
        )
        .unwrap_err()
        .to_string();
        assert!(
            text.contains(
                "`concat` along axis 0 gives a result of more than 9223372036854775807 bytes"
            ),
            "{text}"
        );
    }

    #[test]
    fn cycles_and_double_moves() {
        let src = "graph @c {\n  %0 = input \"a\" @cpu:0 : f32[4]\n  %1 = add %0, %2 @cpu:0 : f32[4]\n  %2 = add %0, %1 @cpu:0 : f32[4]\n  %3 = move %0 -> cpu:1 : f32[4]\n  return %3\n}\n";
        let g = parse(src).unwrap();
        let text = verify(&g, Level::Structural, &Topology::default())
            .unwrap_err()
            .to_string();
        assert!(text.contains("has a cycle"), "{text}");
        assert!(
            text.contains("`move` consumes %0 but it has other uses"),
            "{text}"
        );
    }
}
