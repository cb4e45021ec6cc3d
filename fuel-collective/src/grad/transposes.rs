//! The transpose rules of the single-process collectives (`all_reduce`,
//! `reduce`, `broadcast`, `all_gather`, `reduce_scatter`, `all_to_all`),
//! recorded into the graph; `mod.rs` checks the arguments, `spmd_forms.rs` holds
//! the SPMD forms.

use super::{extremes, products, GradError};
use crate::simplify::edit::{add_collective, local_reduce};
use crate::simplify::Replication;
use fuel_graph_ext::graph::{NodeId, ValueId};
use fuel_graph_ext::op::{all_to_all_pieces, scatter_extents};
use fuel_graph_ext::{Device, Graph, Op, ReduceOp, TensorType};

/// What every rule reads: the forward node, its mnemonic, operands and the
/// cotangents of its results (present ones only), and the lattice.
pub(super) struct Cx {
    pub node: NodeId,
    pub name: String,
    pub operands: Vec<ValueId>,
    pub cts: Vec<ValueId>,
    pub rep: Replication,
}

impl Cx {
    pub fn internal(&self, why: impl ToString) -> GradError {
        GradError::Internal {
            op: self.name.clone(),
            why: why.to_string(),
        }
    }

    pub fn unsupported(&self, why: &str) -> GradError {
        GradError::Unsupported {
            op: self.name.clone(),
            why: why.to_string(),
        }
    }

    pub fn ty(&self, g: &Graph, v: ValueId) -> Result<TensorType, GradError> {
        g.value_type(v)
            .cloned()
            .ok_or_else(|| self.internal("a value has no type"))
    }

    pub fn device(&self, g: &Graph, v: ValueId) -> Result<Device, GradError> {
        g.value_device(v)
            .ok_or_else(|| self.internal("a value has no device"))
    }

    /// Records `op` over `vs`, typed by the typing rule.
    pub fn record(&self, g: &mut Graph, op: Op, vs: &[ValueId]) -> Result<NodeId, GradError> {
        add_collective(g, op, vs).map_err(|e| self.internal(e))
    }

    /// Every result of `id`, as present cotangents.
    pub fn all(&self, g: &Graph, id: NodeId) -> Vec<Option<ValueId>> {
        let n = g.node(id).map_or(0, |x| x.num_results());
        (0..n as u32)
            .map(|result| Some(ValueId { node: id, result }))
            .collect()
    }

    /// `v` divided by `n` on its device (a `Mean`'s 1/N).
    pub fn scaled(&self, g: &mut Graph, v: ValueId, n: usize) -> Result<ValueId, GradError> {
        let device = self.device(g, v)?;
        let by = u64::try_from(n).map_err(|e| self.internal(e))?;
        let ty = self.ty(g, v)?;
        Ok(g.add_value(Op::Div { by, device }, &[v], ty))
    }

    /// Whether the cotangents are replicas of one value.
    pub fn replicated(&self) -> bool {
        self.cts.len() > 1 && self.rep.common_set(&self.cts).is_some()
    }
}

/// Which rule a reduction takes: the linear ones (sum, mean) go on, max
/// and min to `extremes.rs`, prod to `products.rs`.
enum Kind {
    Linear,
    Extreme,
    Product,
}

fn kind(op: ReduceOp) -> Kind {
    match op {
        ReduceOp::Sum | ReduceOp::Mean => Kind::Linear,
        ReduceOp::Max | ReduceOp::Min => Kind::Extreme,
        ReduceOp::Product => Kind::Product,
    }
}

pub(super) fn transpose(
    g: &mut Graph,
    cx: &Cx,
    op: &Op,
) -> Result<Vec<Option<ValueId>>, GradError> {
    let n = cx.operands.len();
    match op {
        Op::AllReduce { op } => {
            match kind(*op) {
                Kind::Extreme => return extremes::all_reduce(g, cx),
                Kind::Product => {
                    let others = products::others(g, cx)?;
                    let owed = extremes::owed_sum(g, cx)?;
                    return products::times(g, cx, others, &owed);
                }
                Kind::Linear => {}
            }
            if cx.replicated() {
                return cx
                    .cts
                    .iter()
                    .map(|ct| {
                        local_reduce(g, *op, *ct, n, false)
                            .map(Some)
                            .map_err(|e| cx.internal(e))
                    })
                    .collect();
            }
            let id = cx.record(g, Op::AllReduce { op: *op }, &cx.cts)?;
            Ok(cx.all(g, id))
        }
        Op::Reduce { op, .. } => {
            match kind(*op) {
                Kind::Extreme => return extremes::reduce(g, cx),
                Kind::Product => {
                    let others = products::others(g, cx)?;
                    let owed = extremes::owed_broadcast(g, cx)?;
                    return products::times(g, cx, others, &owed);
                }
                Kind::Linear => {}
            }
            let to = cx
                .operands
                .iter()
                .map(|v| cx.device(g, *v))
                .collect::<Result<_, _>>()?;
            let id = cx.record(g, Op::Broadcast { to }, &cx.cts)?;
            scale_mean(g, cx, *op, cx.all(g, id))
        }
        Op::Broadcast { to } => broadcast(g, cx, to),
        Op::AllGather { axis } => all_gather(g, cx, *axis),
        Op::ReduceScatter { op, axis, .. } => {
            match kind(*op) {
                Kind::Extreme => return extremes::reduce_scatter(g, cx, *axis),
                Kind::Product => {
                    let others = products::others(g, cx)?;
                    let owed = extremes::owed_gathered(g, cx, *axis)?;
                    return products::times(g, cx, others, &owed);
                }
                Kind::Linear => {}
            }
            let id = cx.record(g, Op::AllGather { axis: *axis }, &cx.cts)?;
            scale_mean(g, cx, *op, cx.all(g, id))
        }
        Op::AllToAll { axis, split } => {
            let tys = |vs: &[ValueId]| -> Result<Vec<TensorType>, GradError> {
                vs.iter().map(|v| cx.ty(g, *v)).collect()
            };
            let (fwd, back) = (tys(&cx.operands)?, tys(&cx.cts)?);
            let split = transposed_split(cx, split.as_deref(), *axis, &fwd, &back)?;
            let id = cx.record(g, Op::AllToAll { axis: *axis, split }, &cx.cts)?;
            Ok(cx.all(g, id))
        }
        _ => Err(GradError::NotCollective {
            op: cx.name.clone(),
        }),
    }
}

/// Divides each cotangent by N for a `Mean`.
fn scale_mean(
    g: &mut Graph,
    cx: &Cx,
    op: ReduceOp,
    cts: Vec<Option<ValueId>>,
) -> Result<Vec<Option<ValueId>>, GradError> {
    if op != ReduceOp::Mean {
        return Ok(cts);
    }
    cts.into_iter()
        .map(|ct| ct.map(|v| cx.scaled(g, v, cx.operands.len())).transpose())
        .collect()
}

/// The N×N pieces of the backward `all_to_all`: the forward's transposed,
/// `None` when that is the default cut of the cotangents.
fn refs(t: &[TensorType]) -> Vec<&TensorType> {
    t.iter().collect()
}

fn transposed_split(
    cx: &Cx,
    split: Option<&[usize]>,
    axis: usize,
    fwd: &[TensorType],
    back: &[TensorType],
) -> Result<Option<Vec<usize>>, GradError> {
    let p = all_to_all_pieces(split, axis, &refs(fwd)).map_err(|e| cx.internal(e))?;
    let n = p.len();
    let t: Vec<usize> = (0..n * n).map(|k| p[k % n][k / n]).collect();
    let default = all_to_all_pieces(None, axis, &refs(back)).ok();
    let default_flat = default.map(|d| d.concat());
    Ok((default_flat.as_ref() != Some(&t)).then_some(t))
}

fn broadcast(g: &mut Graph, cx: &Cx, to: &[Device]) -> Result<Vec<Option<ValueId>>, GradError> {
    let x = *cx
        .operands
        .first()
        .ok_or_else(|| cx.internal("no operand"))?;
    let home = cx.device(g, x)?;
    if cx.replicated() {
        if let Some(r) = cx.cts.first().and_then(|c| cx.rep.replica_on(*c, home)) {
            let sum =
                local_reduce(g, ReduceOp::Sum, r, to.len(), false).map_err(|e| cx.internal(e))?;
            return Ok(vec![Some(sum)]);
        }
    }
    let root = to.iter().position(|d| *d == home).unwrap_or(0);
    let id = cx.record(
        g,
        Op::Reduce {
            op: ReduceOp::Sum,
            root,
        },
        &cx.cts,
    )?;
    let sum = ValueId {
        node: id,
        result: 0,
    };
    if to.get(root) == Some(&home) {
        return Ok(vec![Some(sum)]);
    }
    let ty = cx.ty(g, sum)?;
    Ok(vec![Some(g.add_value(Op::Copy { to: home }, &[sum], ty))])
}

fn all_gather(g: &mut Graph, cx: &Cx, axis: usize) -> Result<Vec<Option<ValueId>>, GradError> {
    let n = cx.operands.len();
    let extents = cx
        .operands
        .iter()
        .map(|v| Ok(cx.ty(g, *v)?.shape.get(axis).copied().unwrap_or(0)))
        .collect::<Result<Vec<usize>, GradError>>()?;
    if cx.replicated() {
        let mut start = 0;
        let mut out = Vec::with_capacity(n);
        for (ct, len) in cx.cts.iter().zip(&extents) {
            let device = cx.device(g, *ct)?;
            let ty = cx.ty(g, *ct)?.with_dim(axis, *len);
            let part = g.add_value(
                Op::Slice {
                    axis,
                    start,
                    len: *len,
                    device,
                },
                &[*ct],
                ty,
            );
            let sum = local_reduce(g, ReduceOp::Sum, part, n, false).map_err(|e| cx.internal(e))?;
            out.push(Some(sum));
            start += len;
        }
        return Ok(out);
    }
    let total: usize = extents.iter().sum();
    let even = scatter_extents(None, axis, total, n).map_err(|e| cx.internal(e))?;
    let split = (even != extents).then_some(extents);
    let id = cx.record(
        g,
        Op::ReduceScatter {
            op: ReduceOp::Sum,
            axis,
            split,
        },
        &cx.cts,
    )?;
    Ok(cx.all(g, id))
}
