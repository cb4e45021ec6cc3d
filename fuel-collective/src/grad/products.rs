//! The transposes of the `prod` reductions: operand i's gradient is the
//! product of the *other* operands times the cotangent it is owed. It is
//! computed as that product, never as the whole product divided by x_i
//! (which is wrong, not merely inexact, where x_i is 0): rank i multiplies
//! the product of the ranks before it, which arrives along a chain of
//! copies from rank 0 up, by the product of the ranks after it, which
//! arrives along a chain from the last rank down. That is 2(N−1) copies of
//! one shard each, N−1 of them in a row, and at most three multiplies per
//! rank. Each chain multiplies in its own order, so the other operands'
//! product may round differently from a rank-order fold (a gradient is
//! never bit-exact against a finite difference anyway); a zero operand
//! makes exactly the gradients it should zero.
//!
//! The SPMD form (`comm.all_reduce.prod`, `comm.reduce_scatter.prod`) has
//! no copies to chain: each rank gathers every operand with
//! `comm.all_gather` along axis 0, slices out the others' and multiplies
//! them, so it needs its rank and an operand with an axis.

use super::extremes::masked_by;
use super::transposes::Cx;
use super::GradError;
use fuel_graph_ext::graph::ValueId;
use fuel_graph_ext::op::CommOp;
use fuel_graph_ext::{Device, ElementwiseOp, Graph, Op};

/// `vs` multiplied on `device` (one value is itself).
fn product(
    g: &mut Graph,
    cx: &Cx,
    device: Device,
    vs: &[ValueId],
) -> Result<Option<ValueId>, GradError> {
    match vs {
        [] => Ok(None),
        [v] => Ok(Some(*v)),
        _ => {
            let kind = ElementwiseOp::Mul;
            let id = cx.record(g, Op::Elementwise { kind, device }, vs)?;
            Ok(Some(ValueId {
                node: id,
                result: 0,
            }))
        }
    }
}

/// `v` on `to`: itself when it is there, else a copy.
fn onto(g: &mut Graph, cx: &Cx, v: ValueId, to: Device) -> Result<ValueId, GradError> {
    if cx.device(g, v)? == to {
        return Ok(v);
    }
    let id = cx.record(g, Op::Copy { to }, &[v])?;
    Ok(ValueId {
        node: id,
        result: 0,
    })
}

/// For each operand i of a single-process collective, the product of the
/// other operands on operand i's device (`None` for a group of one: the
/// empty product, 1).
pub(super) fn others(g: &mut Graph, cx: &Cx) -> Result<Vec<Option<ValueId>>, GradError> {
    let xs = &cx.operands;
    let n = xs.len();
    let devices: Vec<Device> = xs
        .iter()
        .map(|x| cx.device(g, *x))
        .collect::<Result<_, _>>()?;
    // before[i]: x_0 ⋯ x_{i-1} on device i; after[i]: x_{i+1} ⋯ x_{n-1}.
    let mut before: Vec<Option<ValueId>> = vec![None; n];
    let mut after: Vec<Option<ValueId>> = vec![None; n];
    let mut carried: Option<ValueId> = None;
    for i in 0..n {
        if let Some(c) = carried {
            before[i] = Some(onto(g, cx, c, devices[i])?);
        }
        if i + 1 < n {
            let parts: Vec<ValueId> = before[i].into_iter().chain([xs[i]]).collect();
            carried = product(g, cx, devices[i], &parts)?;
        }
    }
    carried = None;
    for i in (0..n).rev() {
        if let Some(c) = carried {
            after[i] = Some(onto(g, cx, c, devices[i])?);
        }
        if i > 0 {
            let parts: Vec<ValueId> = [xs[i]].into_iter().chain(after[i]).collect();
            carried = product(g, cx, devices[i], &parts)?;
        }
    }
    (0..n)
        .map(|i| {
            let parts: Vec<ValueId> = before[i].into_iter().chain(after[i]).collect();
            product(g, cx, devices[i], &parts)
        })
        .collect()
}

/// The gradients: each operand's `others` times the cotangent `owed` it.
pub(super) fn times(
    g: &mut Graph,
    cx: &Cx,
    others: Vec<Option<ValueId>>,
    owed: &[ValueId],
) -> Result<Vec<Option<ValueId>>, GradError> {
    others
        .into_iter()
        .zip(owed)
        .map(|(o, ct)| match o {
            None => Ok(Some(*ct)),
            Some(o) => masked_by(g, cx, o, *ct).map(Some),
        })
        .collect()
}

/// The SPMD form: this rank's operand gathered with every rank's along
/// axis 0 (`gather` records the `comm.all_gather`), the others' slices
/// multiplied.
pub(super) fn comm_others(
    g: &mut Graph,
    cx: &Cx,
    ranks: usize,
    me: Option<usize>,
    gather: &dyn Fn(CommOp) -> Op,
) -> Result<Option<ValueId>, GradError> {
    let x = *cx
        .operands
        .first()
        .ok_or_else(|| cx.internal("no operand"))?;
    let ty = cx.ty(g, x)?;
    let device = cx.device(g, x)?;
    let me = me.ok_or_else(|| {
        cx.unsupported("the product of the other ranks' operands needs this graph's rank; call transpose_at with the rank")
    })?;
    let Some(&len) = ty.shape.first() else {
        return Err(cx.unsupported(
            "the other ranks' operands are gathered along axis 0, and a scalar has none; reshape it to one element",
        ));
    };
    if ranks < 2 {
        return Ok(None);
    }
    let all = cx.record(g, gather(CommOp::AllGather { axis: 0 }), &[x])?;
    let all = ValueId {
        node: all,
        result: 0,
    };
    let mut parts = Vec::with_capacity(ranks - 1);
    for r in (0..ranks).filter(|r| *r != me) {
        let slice = Op::Slice {
            axis: 0,
            start: r * len,
            len,
            device,
        };
        let id = cx.record(g, slice, &[all])?;
        parts.push(ValueId {
            node: id,
            result: 0,
        });
    }
    product(g, cx, device, &parts)
}
