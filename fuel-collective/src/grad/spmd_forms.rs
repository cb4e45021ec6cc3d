//! The transpose rules of the SPMD `comm.*` forms: each rank's graph holds
//! its own part, so the backward is one `comm.*` node on the same
//! communicator, recorded on every rank alike (the ranks must meet at the
//! same collectives in the same order).

use super::transposes::Cx;
use super::{extremes, products, GradError};
use fuel_graph_ext::graph::ValueId;
use fuel_graph_ext::op::CommOp;
use fuel_graph_ext::{Graph, Op, ReduceOp, TensorType};

pub(super) fn transpose(
    g: &mut Graph,
    cx: &Cx,
    op: &Op,
    my_rank: Option<usize>,
) -> Result<Vec<Option<ValueId>>, GradError> {
    let Op::Comm {
        kind,
        comm,
        ranks,
        device,
        rank,
        split,
    } = op
    else {
        return Err(GradError::NotCollective {
            op: cx.name.clone(),
        });
    };
    let ct = *cx.cts.first().ok_or_else(|| cx.internal("no cotangent"))?;
    let x = *cx
        .operands
        .first()
        .ok_or_else(|| cx.internal("no operand"))?;
    let node = |kind: CommOp, rank: Option<usize>, split: Option<Vec<usize>>| Op::Comm {
        kind,
        comm: *comm,
        ranks: *ranks,
        device: *device,
        rank,
        split,
    };
    let (back, mean) = match kind {
        CommOp::AllReduce(r @ (ReduceOp::Sum | ReduceOp::Mean)) => {
            (node(CommOp::AllReduce(*r), None, None), false)
        }
        // An uneven all_gather's split (every rank's extent along the
        // axis, with this graph's rank) is the reduce_scatter's, and the
        // other way round.
        CommOp::AllGather { axis } => (
            node(
                CommOp::ReduceScatter {
                    op: ReduceOp::Sum,
                    axis: *axis,
                },
                *rank,
                split.clone(),
            ),
            false,
        ),
        CommOp::ReduceScatter {
            op: r @ (ReduceOp::Sum | ReduceOp::Mean),
            axis,
        } => (
            node(CommOp::AllGather { axis: *axis }, *rank, split.clone()),
            *r == ReduceOp::Mean,
        ),
        CommOp::Barrier => (node(CommOp::Barrier, None, None), false),
        CommOp::Broadcast { root } => {
            let me = my_rank.or(*rank).ok_or_else(|| {
                cx.unsupported("comm.broadcast gives a cotangent to the root only, and this graph does not say its rank; call transpose_at with the rank")
            })?;
            let sum = cx.record(g, node(CommOp::AllReduce(ReduceOp::Sum), None, None), &[ct])?;
            let v = ValueId {
                node: sum,
                result: 0,
            };
            return Ok(vec![(me == *root).then_some(v)]);
        }
        CommOp::AllToAll { axis } => {
            let back_split = match (split, rank) {
                (Some(s), Some(r)) => {
                    let n = *ranks;
                    let t: Vec<usize> = (0..n * n).map(|k| s[(k % n) * n + k / n]).collect();
                    Some((Some(*r), Some(t)))
                }
                _ => None,
            };
            let (r, s) = back_split.unwrap_or((None, None));
            (node(CommOp::AllToAll { axis: *axis }, r, s), false)
        }
        CommOp::AllReduce(_) | CommOp::ReduceScatter { .. } => {
            let at = Place {
                ranks: *ranks,
                rank: *rank,
                split: split.as_deref(),
                me: my_rank.or(*rank),
            };
            return reductions(g, cx, kind, &at, &node);
        }
    };
    let id = cx.record(g, back, &[ct])?;
    let mut v = ValueId {
        node: id,
        result: 0,
    };
    if mean {
        v = cx.scaled(g, v, *ranks)?;
    }
    let want: Option<TensorType> = g.value_type(x).cloned();
    if g.value_type(v).cloned() != want {
        return Err(cx.internal("the backward's type differs from the operand's"));
    }
    Ok(vec![Some(v)])
}

/// Where an SPMD reduction runs: its group size, the rank and split its
/// node carries, and the rank of the graph (`transpose_at`'s or the
/// node's).
struct Place<'a> {
    ranks: usize,
    rank: Option<usize>,
    split: Option<&'a [usize]>,
    me: Option<usize>,
}

/// `comm.all_reduce` and `comm.reduce_scatter` of `max`, `min` and `prod`:
/// the cotangent owed (`comm.all_reduce.sum` of it, or its
/// `comm.all_gather` with the forward's rank and split) times the rank's
/// mask against the extreme (`extremes.rs`) or the other ranks' product
/// (`products.rs`). Every rank records the same nodes in the same order.
fn reductions(
    g: &mut Graph,
    cx: &Cx,
    kind: &CommOp,
    at: &Place,
    back: &dyn Fn(CommOp, Option<usize>, Option<Vec<usize>>) -> Op,
) -> Result<Vec<Option<ValueId>>, GradError> {
    let ct = *cx.cts.first().ok_or_else(|| cx.internal("no cotangent"))?;
    let x = *cx
        .operands
        .first()
        .ok_or_else(|| cx.internal("no operand"))?;
    let first = |id| ValueId {
        node: id,
        result: 0,
    };
    let gather = |axis| {
        back(
            CommOp::AllGather { axis },
            at.rank,
            at.split.map(<[usize]>::to_vec),
        )
    };
    let (op, axis) = match kind {
        CommOp::AllReduce(op) => (*op, None),
        CommOp::ReduceScatter { op, axis } => (*op, Some(*axis)),
        _ => return Err(cx.internal("not a reduction")),
    };
    let owed = match axis {
        None => back(CommOp::AllReduce(ReduceOp::Sum), None, None),
        Some(a) => gather(a),
    };
    let owed = first(cx.record(g, owed, &[ct])?);
    if op == ReduceOp::Product {
        let plain = |k| back(k, None, None);
        let others = products::comm_others(g, cx, at.ranks, at.me, &plain)?;
        let dx = match others {
            None => owed,
            Some(o) => extremes::masked_by(g, cx, o, owed)?,
        };
        return Ok(vec![Some(dx)]);
    }
    let y = first(cx.node);
    let extreme = match axis {
        None => y,
        Some(a) => first(cx.record(g, gather(a), &[y])?),
    };
    Ok(vec![Some(extremes::masked(g, cx, x, extreme, owed)?)])
}
