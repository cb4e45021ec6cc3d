//! The transposes of the `max` and `min` reductions: the cotangent flows to
//! the rank(s) whose operand equals the reduced extreme. Each rank masks
//! with `eq` (1 where its operand equals the extreme it sees, else 0) and
//! multiplies the cotangent it is owed by the mask, so **every tied rank
//! gets the whole cotangent** (`mod.rs` says why that rule). The extreme
//! comes from the forward's own results (an `all_reduce`'s are already on
//! every rank; a `reduce`'s is broadcast, a `reduce_scatter`'s gathered), so
//! the backward compares against exactly the bits the forward produced.
//! What each operand is owed (`owed_*`) is shared with `products.rs`.

use super::transposes::Cx;
use super::GradError;
use crate::simplify::edit::local_reduce;
use fuel_graph_ext::graph::{NodeId, ValueId};
use fuel_graph_ext::op::DeviceList;
use fuel_graph_ext::{ElementwiseOp, Graph, Op, ReduceOp};

/// Result `k` of `node`.
fn result(node: NodeId, k: usize) -> ValueId {
    ValueId {
        node,
        result: k as u32,
    }
}

/// `a * b` on `a`'s device.
pub(super) fn masked_by(
    g: &mut Graph,
    cx: &Cx,
    a: ValueId,
    b: ValueId,
) -> Result<ValueId, GradError> {
    let device = cx.device(g, a)?;
    let mul = Op::Elementwise {
        kind: ElementwiseOp::Mul,
        device,
    };
    Ok(result(cx.record(g, mul, &[a, b])?, 0))
}

/// `mask(x == extreme) * ct` on `x`'s device: the cotangent where `x`
/// holds the extreme, 0 elsewhere.
pub(super) fn masked(
    g: &mut Graph,
    cx: &Cx,
    x: ValueId,
    extreme: ValueId,
    ct: ValueId,
) -> Result<ValueId, GradError> {
    let device = cx.device(g, x)?;
    let eq = Op::Elementwise {
        kind: ElementwiseOp::Eq,
        device,
    };
    let mask = cx.record(g, eq, &[x, extreme])?;
    masked_by(g, cx, result(mask, 0), ct)
}

/// What each operand of an `all_reduce` is owed: the sum of every rank's
/// cotangent, by an `all_reduce.sum`, or folded locally when the
/// cotangents are replicas of one value.
pub(super) fn owed_sum(g: &mut Graph, cx: &Cx) -> Result<Vec<ValueId>, GradError> {
    let n = cx.operands.len();
    if cx.replicated() {
        return cx
            .cts
            .iter()
            .map(|ct| local_reduce(g, ReduceOp::Sum, *ct, n, false).map_err(|e| cx.internal(e)))
            .collect();
    }
    let sum = cx.record(g, Op::AllReduce { op: ReduceOp::Sum }, &cx.cts)?;
    Ok((0..n).map(|k| result(sum, k)).collect())
}

/// The operands' devices, as a broadcast's targets.
fn targets(g: &Graph, cx: &Cx) -> Result<DeviceList, GradError> {
    cx.operands.iter().map(|v| cx.device(g, *v)).collect()
}

/// What each operand of a `reduce` is owed: the root's cotangent,
/// broadcast to every operand's device.
pub(super) fn owed_broadcast(g: &mut Graph, cx: &Cx) -> Result<Vec<ValueId>, GradError> {
    let ct = *cx.cts.first().ok_or_else(|| cx.internal("no cotangent"))?;
    let to = targets(g, cx)?;
    let n = to.len();
    let owed = cx.record(g, Op::Broadcast { to }, &[ct])?;
    Ok((0..n).map(|k| result(owed, k)).collect())
}

/// What each operand of a `reduce_scatter` is owed: every rank's slice of
/// the cotangent, gathered back along the axis.
pub(super) fn owed_gathered(
    g: &mut Graph,
    cx: &Cx,
    axis: usize,
) -> Result<Vec<ValueId>, GradError> {
    let owed = cx.record(g, Op::AllGather { axis }, &cx.cts)?;
    Ok((0..cx.operands.len()).map(|k| result(owed, k)).collect())
}

/// Each operand masked against `extreme[i]`, times `owed[i]`.
fn each_masked(
    g: &mut Graph,
    cx: &Cx,
    extreme: &[ValueId],
    owed: &[ValueId],
) -> Result<Vec<Option<ValueId>>, GradError> {
    (0..cx.operands.len())
        .map(|i| masked(g, cx, cx.operands[i], extreme[i], owed[i]).map(Some))
        .collect()
}

/// `all_reduce.max`/`.min`: every rank's result is the extreme.
pub(super) fn all_reduce(g: &mut Graph, cx: &Cx) -> Result<Vec<Option<ValueId>>, GradError> {
    let owed = owed_sum(g, cx)?;
    let extreme: Vec<ValueId> = (0..cx.operands.len()).map(|k| result(cx.node, k)).collect();
    each_masked(g, cx, &extreme, &owed)
}

/// `reduce.max`/`.min` to a root: the root's result is broadcast to every
/// operand's device beside its cotangent.
pub(super) fn reduce(g: &mut Graph, cx: &Cx) -> Result<Vec<Option<ValueId>>, GradError> {
    let to = targets(g, cx)?;
    let n = to.len();
    let bc = cx.record(g, Op::Broadcast { to }, &[result(cx.node, 0)])?;
    let extreme: Vec<ValueId> = (0..n).map(|k| result(bc, k)).collect();
    let owed = owed_broadcast(g, cx)?;
    each_masked(g, cx, &extreme, &owed)
}

/// `reduce_scatter.max`/`.min`: the ranks' slices of the extreme are
/// gathered back along the axis (with the forward's split: an
/// `all_gather` joins shards of any extents) beside the cotangents'.
pub(super) fn reduce_scatter(
    g: &mut Graph,
    cx: &Cx,
    axis: usize,
) -> Result<Vec<Option<ValueId>>, GradError> {
    let n = cx.operands.len();
    let ys: Vec<ValueId> = (0..n).map(|k| result(cx.node, k)).collect();
    let gathered = cx.record(g, Op::AllGather { axis }, &ys)?;
    let extreme: Vec<ValueId> = (0..n).map(|k| result(gathered, k)).collect();
    let owed = owed_gathered(g, cx, axis)?;
    each_masked(g, cx, &extreme, &owed)
}
