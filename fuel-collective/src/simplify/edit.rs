//! The graph surgery of `simplify-collectives`: applies one [`Rewrite`]
//! the rules found, then removes the nodes it left without a use. The
//! errors are sentences for `PassError::Internal`.

use super::rules::{mean_casts, Rewrite};
use fuel_graph_ext::graph::{NodeId, ValueId};
use fuel_graph_ext::op::result_types;
use fuel_graph_ext::{Device, ElementwiseOp, Graph, Op, ReduceOp, TensorType};

fn node_operands(g: &Graph, id: NodeId) -> Result<Vec<ValueId>, String> {
    g.node(id)
        .map(|n| n.operands.to_vec())
        .ok_or_else(|| "a matched node vanished".to_string())
}

fn device_of(g: &Graph, v: ValueId) -> Result<Device, String> {
    g.value_device(v)
        .ok_or_else(|| "a matched value has no device".to_string())
}

fn type_of(g: &Graph, v: ValueId) -> Result<TensorType, String> {
    g.value_type(v)
        .cloned()
        .ok_or_else(|| "a matched value has no type".to_string())
}

fn value(node: NodeId, result: usize) -> ValueId {
    ValueId {
        node,
        result: result as u32,
    }
}

/// Adds a collective (or any op) over `operands`, typed by the typing
/// rule, each result typed where they differ; the error is the typing
/// rule's message.
pub(crate) fn add_collective(
    g: &mut Graph,
    op: Op,
    operands: &[ValueId],
) -> Result<NodeId, String> {
    let tys = operands
        .iter()
        .map(|v| type_of(g, *v))
        .collect::<Result<Vec<_>, _>>()?;
    let refs: Vec<&TensorType> = tys.iter().collect();
    let each = result_types(&op, &refs).map_err(|e| e.to_string())?;
    let ty = fuel_graph_ext::op::infer_type(&op, &refs).map_err(|e| e.to_string())?;
    let id = g.add_node(op, operands, ty);
    if let Some(each) = each {
        g.set_result_types(id, each);
    }
    Ok(id)
}

/// Applies `rw` to `g` with `reassociate=` as given; returns the nodes it
/// made unused, for [`sweep_dead`].
pub(super) fn apply(g: &mut Graph, rw: &Rewrite, reassociate: bool) -> Result<Vec<NodeId>, String> {
    match rw {
        Rewrite::Duplicate { keep, dup } => {
            let n = g.node(*dup).map_or(0, |x| x.num_results());
            for k in 0..n {
                g.replace_all_uses(value(*dup, k), value(*keep, k));
            }
            Ok(vec![*dup])
        }
        Rewrite::GatherOfScatter { ag, rs, op } => {
            let xs = node_operands(g, *rs)?;
            let ar = add_collective(g, Op::AllReduce { op: *op }, &xs)?;
            for k in 0..xs.len() {
                g.replace_all_uses(value(*ag, k), value(ar, k));
            }
            Ok(vec![*ag])
        }
        Rewrite::SlicedAllReduce {
            ar,
            op,
            slices,
            axis,
            split,
        } => {
            let xs = node_operands(g, *ar)?;
            let scatter = Op::ReduceScatter {
                op: *op,
                axis: *axis,
                split: split.clone(),
            };
            let rs = add_collective(g, scatter, &xs)?;
            for (k, s) in slices.iter().enumerate() {
                g.replace_all_uses(value(*s, 0), value(rs, k));
            }
            Ok(slices.clone())
        }
        Rewrite::SlicedGather { slice, operand } => {
            g.replace_all_uses(value(*slice, 0), *operand);
            Ok(vec![*slice])
        }
        Rewrite::MergeReduces { a, b, op, combines } => {
            let (xs, ys) = (node_operands(g, *a)?, node_operands(g, *b)?);
            let mut joined = Vec::with_capacity(xs.len());
            for (x, y) in xs.iter().zip(&ys) {
                let device = device_of(g, *x)?;
                let ty = type_of(g, *x)?;
                let kind = op.combiner();
                joined.push(g.add_value(Op::Elementwise { kind, device }, &[*x, *y], ty));
            }
            let ar = add_collective(g, Op::AllReduce { op: *op }, &joined)?;
            for (k, c) in combines.iter().enumerate() {
                g.replace_all_uses(value(*c, 0), value(ar, k));
            }
            Ok(combines.clone())
        }
        Rewrite::ReplicatedReduce { ar, op } => {
            let xs = node_operands(g, *ar)?;
            for (k, x) in xs.iter().enumerate() {
                let local = local_reduce(g, *op, *x, xs.len(), reassociate)?;
                g.replace_all_uses(value(*ar, k), local);
            }
            Ok(vec![*ar])
        }
        Rewrite::ReplicatedBroadcast { bc, replicas } => {
            for (k, r) in replicas.iter().enumerate() {
                g.replace_all_uses(value(*bc, k), *r);
            }
            Ok(vec![*bc])
        }
        Rewrite::AllToAllInverse { first, second } => {
            let xs = node_operands(g, *first)?;
            for (k, x) in xs.iter().enumerate() {
                g.replace_all_uses(value(*second, k), *x);
            }
            Ok(vec![*second])
        }
    }
}

/// The reduction `op` of `n` replicas of `x`, computed on `x`'s device as
/// the interpreter defines the collective: a left fold in rank order
/// (for `Mean`, in its accumulator, then divided and cast back). With
/// `reassociate`, a `Mean` is `x` itself.
pub(crate) fn local_reduce(
    g: &mut Graph,
    op: ReduceOp,
    x: ValueId,
    n: usize,
    reassociate: bool,
) -> Result<ValueId, String> {
    let device = device_of(g, x)?;
    let ty = type_of(g, x)?;
    let fold = |g: &mut Graph, kind: ElementwiseOp, v: ValueId, ty: &TensorType| {
        if n < 2 {
            v
        } else {
            g.add_value(Op::Elementwise { kind, device }, &vec![v; n], ty.clone())
        }
    };
    Ok(match op {
        ReduceOp::Max | ReduceOp::Min => x,
        ReduceOp::Sum => fold(g, ElementwiseOp::Add, x, &ty),
        ReduceOp::Product => fold(g, ElementwiseOp::Mul, x, &ty),
        ReduceOp::Mean if reassociate || n < 2 => x,
        ReduceOp::Mean => {
            let casts = mean_casts(ty.dtype).ok_or("a mean with no accumulator cast")?;
            let (wide, acc_ty) = match casts {
                Some(acc) => {
                    let acc_ty = TensorType::new(acc, &ty.shape);
                    let c = g.add_value(Op::Cast { to: acc, device }, &[x], acc_ty.clone());
                    (c, acc_ty)
                }
                None => (x, ty.clone()),
            };
            let sum = fold(g, ElementwiseOp::Add, wide, &acc_ty);
            let by = u64::try_from(n).map_err(|_| "a group too large to divide by")?;
            let mean = g.add_value(Op::Div { by, device }, &[sum], acc_ty);
            match casts {
                Some(_) => g.add_value(
                    Op::Cast {
                        to: ty.dtype,
                        device,
                    },
                    &[mean],
                    ty,
                ),
                None => mean,
            }
        }
    })
}

/// Removes the nodes of `start` that nothing uses, then the producers
/// that this left unused, and so on; inputs stay. Returns what it removed.
pub(super) fn sweep_dead(g: &mut Graph, start: Vec<NodeId>) -> Vec<NodeId> {
    let mut work = start;
    let mut removed = Vec::new();
    while let Some(id) = work.pop() {
        let Some(n) = g.node(id) else { continue };
        if matches!(n.op, Op::Input { .. }) {
            continue;
        }
        let results = n.num_results();
        if (0..results).any(|k| g.use_count(value(id, k)) > 0) {
            continue;
        }
        let producers: Vec<NodeId> = n.operands.iter().map(|v| v.node).collect();
        g.remove_node(id);
        removed.push(id);
        work.extend(producers);
    }
    removed
}
