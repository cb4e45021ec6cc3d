//! The transposes of the `max` and `min` reductions: the cotangent flows to
//! the rank(s) whose operand equals the reduced extreme. Each rank masks
//! with `eq` (1 where its operand equals the extreme it sees, else 0) and
//! multiplies the cotangent it is owed by the mask, so **every tied rank
//! gets the whole cotangent** (`mod.rs` says why that rule). The extreme
//! comes from the forward's own results (an `all_reduce`'s are already on
//! every rank; a `reduce`'s is broadcast, a `reduce_scatter`'s gathered), so
//! the backward compares against exactly the bits the forward produced.

use super::transposes::Cx;
use super::GradError;
use crate::simplify::edit::local_reduce;
use fuel_graph_ext::graph::{NodeId, ValueId};
use fuel_graph_ext::op::CommOp;
use fuel_graph_ext::{ElementwiseOp, Graph, Op, ReduceOp};

/// Result `k` of `node`.
fn result(node: NodeId, k: usize) -> ValueId {
    ValueId {
        node,
        result: k as u32,
    }
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
    let mul = Op::Elementwise {
        kind: ElementwiseOp::Mul,
        device,
    };
    let dx = cx.record(g, mul, &[result(mask, 0), ct])?;
    Ok(result(dx, 0))
}

/// `all_reduce.max`/`.min`: every rank's result is the extreme, and
/// operand i is owed the sum of every rank's cotangent (folded locally
/// when the cotangents are replicas of one value).
pub(super) fn all_reduce(g: &mut Graph, cx: &Cx) -> Result<Vec<Option<ValueId>>, GradError> {
    let n = cx.operands.len();
    let owed: Vec<ValueId> = if cx.replicated() {
        cx.cts
            .iter()
            .map(|ct| local_reduce(g, ReduceOp::Sum, *ct, n, false).map_err(|e| cx.internal(e)))
            .collect::<Result<_, _>>()?
    } else {
        let sum = cx.record(g, Op::AllReduce { op: ReduceOp::Sum }, &cx.cts)?;
        (0..n).map(|k| result(sum, k)).collect()
    };
    (0..n)
        .map(|i| masked(g, cx, cx.operands[i], result(cx.node, i), owed[i]).map(Some))
        .collect()
}

/// `reduce.max`/`.min` to a root: the root's result and its cotangent are
/// broadcast to every operand's device, and each operand masks with it.
pub(super) fn reduce(g: &mut Graph, cx: &Cx) -> Result<Vec<Option<ValueId>>, GradError> {
    let ct = *cx.cts.first().ok_or_else(|| cx.internal("no cotangent"))?;
    let to = cx
        .operands
        .iter()
        .map(|v| cx.device(g, *v))
        .collect::<Result<_, _>>()?;
    let extreme = cx.record(
        g,
        Op::Broadcast {
            to: Clone::clone(&to),
        },
        &[result(cx.node, 0)],
    )?;
    let owed = cx.record(g, Op::Broadcast { to }, &[ct])?;
    (0..cx.operands.len())
        .map(|i| masked(g, cx, cx.operands[i], result(extreme, i), result(owed, i)).map(Some))
        .collect()
}

/// `reduce_scatter.max`/`.min`: the ranks' slices of the extreme and of
/// the cotangent are gathered back along the axis (with the forward's
/// split: an `all_gather` joins shards of any extents), and each operand
/// masks with the whole.
pub(super) fn reduce_scatter(
    g: &mut Graph,
    cx: &Cx,
    axis: usize,
) -> Result<Vec<Option<ValueId>>, GradError> {
    let n = cx.operands.len();
    let ys: Vec<ValueId> = (0..n).map(|k| result(cx.node, k)).collect();
    let extreme = cx.record(g, Op::AllGather { axis }, &ys)?;
    let owed = cx.record(g, Op::AllGather { axis }, &cx.cts)?;
    (0..n)
        .map(|i| masked(g, cx, cx.operands[i], result(extreme, i), result(owed, i)).map(Some))
        .collect()
}

/// The SPMD forms: `comm.all_reduce.max`/`.min` (the rank's result is the
/// extreme; it is owed the `comm.all_reduce.sum` of the cotangents) and
/// `comm.reduce_scatter.max`/`.min` (the result and the cotangent are
/// gathered with `comm.all_gather`, with the same rank and split).
/// `back(kind, rank, split)` is a `comm.*` op on the forward's
/// communicator.
pub(super) fn comm(
    g: &mut Graph,
    cx: &Cx,
    kind: &CommOp,
    rank: Option<usize>,
    split: Option<&[usize]>,
    back: &dyn Fn(CommOp, Option<usize>, Option<Vec<usize>>) -> Op,
) -> Result<Vec<Option<ValueId>>, GradError> {
    let ct = *cx.cts.first().ok_or_else(|| cx.internal("no cotangent"))?;
    let x = *cx
        .operands
        .first()
        .ok_or_else(|| cx.internal("no operand"))?;
    let y = result(cx.node, 0);
    let (extreme, owed) = match kind {
        CommOp::AllReduce(_) => {
            let sum = cx.record(g, back(CommOp::AllReduce(ReduceOp::Sum), None, None), &[ct])?;
            (y, result(sum, 0))
        }
        CommOp::ReduceScatter { axis, .. } => {
            let gather = || {
                back(
                    CommOp::AllGather { axis: *axis },
                    rank,
                    split.map(<[usize]>::to_vec),
                )
            };
            let e = cx.record(g, gather(), &[y])?;
            let o = cx.record(g, gather(), &[ct])?;
            (result(e, 0), result(o, 0))
        }
        _ => return Err(cx.internal("not a max or min reduction")),
    };
    Ok(vec![Some(masked(g, cx, x, extreme, owed)?)])
}
