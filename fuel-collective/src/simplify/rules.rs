//! The rules of `simplify-collectives`, as pure matchers: each reads the
//! graph (and the replication lattice) and says what it would rewrite,
//! without touching it. `edit.rs` applies what they find; the pass
//! decides which to apply (the cost model, `reassociate=`).

use super::lattice::Replication;
use fuel_graph_ext::graph::{NodeId, ValueId};
use fuel_graph_ext::op::{all_to_all_pieces, scatter_extents};
use fuel_graph_ext::{DType, ElementwiseOp, Graph, Op, ReduceOp, TensorType};

/// One rewrite a rule found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Rewrite {
    /// `dup` is the same collective as `keep` over the same operands.
    Duplicate { keep: NodeId, dup: NodeId },
    /// `all_gather` `ag` joins every result of `reduce_scatter` `rs`, in
    /// rank order, along the axis it cut: an `all_reduce` of its operands.
    GatherOfScatter {
        ag: NodeId,
        rs: NodeId,
        op: ReduceOp,
    },
    /// Every result of `all_reduce` `ar` is used only by a `slice` of its
    /// own rank's part (`slices[r]`), the parts tiling the axis: a
    /// `reduce_scatter` with that split.
    SlicedAllReduce {
        ar: NodeId,
        op: ReduceOp,
        slices: Vec<NodeId>,
        axis: usize,
        split: Option<Vec<usize>>,
    },
    /// `slice` takes, on rank `r`'s device, exactly rank `r`'s part of an
    /// `all_gather` result: that rank's operand.
    SlicedGather { slice: NodeId, operand: ValueId },
    /// On every rank `combines[r]` folds result `r` of the all_reduces `a`
    /// and `b` (same group, op and type) with the op they reduce with.
    MergeReduces {
        a: NodeId,
        b: NodeId,
        op: ReduceOp,
        combines: Vec<NodeId>,
    },
    /// An `all_reduce` whose operands are replicas of one value.
    ReplicatedReduce { ar: NodeId, op: ReduceOp },
    /// A `broadcast` of a value already replicated on every target.
    ReplicatedBroadcast { bc: NodeId, replicas: Vec<ValueId> },
    /// `second` is the inverse `all_to_all` of `first`, over its results.
    AllToAllInverse { first: NodeId, second: NodeId },
}

impl Rewrite {
    /// The rule's name, as the notes and `docs/lowering.md` call it.
    pub fn rule(&self) -> &'static str {
        match self {
            Rewrite::Duplicate { .. } => "duplicate",
            Rewrite::GatherOfScatter { .. } => "gather-of-scatter",
            Rewrite::SlicedAllReduce { .. } => "sliced-all-reduce",
            Rewrite::SlicedGather { .. } => "sliced-gather",
            Rewrite::MergeReduces { .. } => "merge-reduces",
            Rewrite::ReplicatedReduce { .. } => "replicated-reduce",
            Rewrite::ReplicatedBroadcast { .. } => "replicated-broadcast",
            Rewrite::AllToAllInverse { .. } => "all-to-all-inverse",
        }
    }

    /// The nodes the rewrite reads or replaces; two rewrites of one sweep
    /// must not share any.
    pub fn touches(&self) -> Vec<NodeId> {
        match self {
            Rewrite::Duplicate { keep, dup } => vec![*keep, *dup],
            Rewrite::GatherOfScatter { ag, rs, .. } => vec![*ag, *rs],
            Rewrite::SlicedAllReduce { ar, slices, .. } => {
                let mut v = slices.clone();
                v.push(*ar);
                v
            }
            Rewrite::SlicedGather { slice, operand } => vec![*slice, operand.node],
            Rewrite::MergeReduces { a, b, combines, .. } => {
                let mut v = combines.clone();
                v.extend([*a, *b]);
                v
            }
            Rewrite::ReplicatedReduce { ar, .. } => vec![*ar],
            Rewrite::ReplicatedBroadcast { bc, replicas } => {
                let mut v: Vec<NodeId> = replicas.iter().map(|r| r.node).collect();
                v.push(*bc);
                v
            }
            Rewrite::AllToAllInverse { first, second } => vec![*first, *second],
        }
    }
}

/// Whether reducing with `op` over `dtype` gives the same bits in any
/// order: integer sums and products wrap, which is associative; `max` and
/// `min` order every value (a NaN loses, -0 is below +0). Float sums and
/// products round at every step, so another order may round differently.
pub(super) fn order_free(op: ReduceOp, dtype: DType) -> bool {
    match op {
        ReduceOp::Max | ReduceOp::Min => true,
        ReduceOp::Sum | ReduceOp::Product => !dtype.is_float() && dtype != DType::Bool,
        ReduceOp::Mean => false,
    }
}

fn results(id: NodeId, n: usize) -> impl Iterator<Item = ValueId> {
    (0..n as u32).map(move |result| ValueId { node: id, result })
}

fn is_output(g: &Graph, v: ValueId) -> bool {
    g.outputs().contains(&v)
}

/// Every rewrite the rules find in `g`, in topological order of the node
/// each one starts from. A rewrite that overlaps an earlier one is left
/// for the next sweep.
pub(super) fn find(g: &Graph, rep: &Replication) -> Vec<Rewrite> {
    let mut out = Vec::new();
    let mut seen: rustc_hash::FxHashMap<(Op, Vec<ValueId>), NodeId> = Default::default();
    for id in g.topo_order() {
        let Some(n) = g.node(id) else { continue };
        if n.op.is_collective() && !n.op.is_comm() && !n.op.is_driver_collective() {
            let key = (n.op.clone(), n.operands.to_vec());
            match seen.get(&key) {
                Some(&keep) => {
                    out.push(Rewrite::Duplicate { keep, dup: id });
                    continue;
                }
                None => {
                    seen.insert(key, id);
                }
            }
        }
        let found = match &n.op {
            Op::AllGather { axis } => gather_of_scatter(g, id, *axis),
            Op::AllReduce { op } => {
                replicated_reduce(g, id, *op, rep).or_else(|| sliced_all_reduce(g, id, *op))
            }
            Op::Slice { .. } => sliced_gather(g, id),
            Op::Elementwise { kind, .. } => merge_reduces(g, id, *kind),
            Op::Broadcast { .. } => replicated_broadcast(g, id, rep),
            Op::AllToAll { .. } => all_to_all_inverse(g, id),
            _ => None,
        };
        out.extend(found);
    }
    out
}

/// The node whose results `vs` are, all of them in order, if there is one.
fn all_results_of(g: &Graph, vs: &[ValueId]) -> Option<NodeId> {
    let first = vs.first()?.node;
    let n = g.node(first)?;
    (n.num_results() == vs.len()
        && vs
            .iter()
            .enumerate()
            .all(|(k, v)| v.node == first && v.result as usize == k))
    .then_some(first)
}

fn gather_of_scatter(g: &Graph, ag: NodeId, axis: usize) -> Option<Rewrite> {
    let rs = all_results_of(g, &g.node(ag)?.operands)?;
    match g.node(rs)?.op {
        Op::ReduceScatter { op, axis: a, .. } if a == axis => {
            Some(Rewrite::GatherOfScatter { ag, rs, op })
        }
        _ => None,
    }
}

fn sliced_all_reduce(g: &Graph, ar: NodeId, op: ReduceOp) -> Option<Rewrite> {
    let n = g.node(ar)?;
    let ranks = n.operands.len();
    if n.ty.shape.is_empty() || ranks < 2 {
        return None;
    }
    let mut slices = Vec::with_capacity(ranks);
    let mut lens = Vec::with_capacity(ranks);
    let mut axis = None;
    let mut next = 0usize;
    for v in results(ar, ranks) {
        let users = g.users(v);
        if users.len() != 1 || is_output(g, v) {
            return None;
        }
        let (s, _) = users[0];
        let Op::Slice {
            axis: a,
            start,
            len,
            ..
        } = g.node(s)?.op
        else {
            return None;
        };
        if *axis.get_or_insert(a) != a || start != next {
            return None;
        }
        next = start.checked_add(len)?;
        slices.push(s);
        lens.push(len);
    }
    let axis = axis?;
    let extent = *n.ty.shape.get(axis)?;
    if next != extent {
        return None;
    }
    let even = scatter_extents(None, axis, extent, ranks).ok()?;
    let split = (lens != even).then_some(lens);
    Some(Rewrite::SlicedAllReduce {
        ar,
        op,
        slices,
        axis,
        split,
    })
}

fn sliced_gather(g: &Graph, slice: NodeId) -> Option<Rewrite> {
    let s = g.node(slice)?;
    let Op::Slice {
        axis, start, len, ..
    } = s.op
    else {
        return None;
    };
    let v = *s.operands.first()?;
    let ag = g.node(v.node)?;
    if ag.op != (Op::AllGather { axis }) {
        return None;
    }
    let r = v.result as usize;
    let before: usize = ag.operands[..r]
        .iter()
        .map(|o| g.value_type(*o).and_then(|t| t.shape.get(axis).copied()))
        .sum::<Option<usize>>()?;
    let operand = *ag.operands.get(r)?;
    let own = g.value_type(operand)?.shape.get(axis).copied()?;
    (start == before && len == own && g.value_device(operand) == g.value_device(v))
        .then_some(Rewrite::SlicedGather { slice, operand })
}

/// The all_reduce result `v` is, with its reduce op.
fn reduce_result(g: &Graph, v: ValueId) -> Option<ReduceOp> {
    match g.node(v.node)?.op {
        Op::AllReduce { op } => Some(op),
        _ => None,
    }
}

fn merge_reduces(g: &Graph, combine: NodeId, kind: ElementwiseOp) -> Option<Rewrite> {
    let c = g.node(combine)?;
    let [x, y] = c.operands[..] else { return None };
    let (op, op_b) = (reduce_result(g, x)?, reduce_result(g, y)?);
    if op != op_b
        || x.node == y.node
        || x.result != y.result
        || op.combiner() != kind
        || !matches!(op, ReduceOp::Sum | ReduceOp::Max | ReduceOp::Min)
    {
        return None;
    }
    let (a, b) = (g.node(x.node)?, g.node(y.node)?);
    let devices = |n: &fuel_graph_ext::graph::Node| -> Option<Vec<_>> {
        n.operands.iter().map(|v| g.value_device(*v)).collect()
    };
    if a.ty != b.ty || devices(a)? != devices(b)? {
        return None;
    }
    // The same fold of a#r and b#r on every rank.
    let mut combines = Vec::with_capacity(a.operands.len());
    for (va, vb) in results(x.node, a.operands.len()).zip(results(y.node, b.operands.len())) {
        let found = g.users(va).into_iter().map(|(u, _)| u).find(|u| {
            g.node(*u).is_some_and(|m| {
                matches!(m.op, Op::Elementwise { kind: k, .. } if k == kind)
                    && m.operands[..] == [va, vb]
            })
        })?;
        combines.push(found);
    }
    // Start only from rank 0's fold, so each pair is found once.
    (combines.first() == Some(&combine)).then_some(Rewrite::MergeReduces {
        a: x.node,
        b: y.node,
        op,
        combines,
    })
}

fn replicated_reduce(g: &Graph, ar: NodeId, op: ReduceOp, rep: &Replication) -> Option<Rewrite> {
    let n = g.node(ar)?;
    rep.common_set(&n.operands)?;
    if op == ReduceOp::Mean && mean_casts(n.ty.dtype).is_none() {
        return None;
    }
    Some(Rewrite::ReplicatedReduce { ar, op })
}

/// The casts a `Mean` of `dtype` sums between (to its accumulator and
/// back), `Some(None)` when it sums in its own dtype, `None` when the IR
/// has no such cast.
pub(super) fn mean_casts(dtype: DType) -> Option<Option<DType>> {
    let acc = dtype.mean_accumulator();
    if acc == dtype {
        return Some(None);
    }
    let defined = fuel_graph_ext::op::cast_defined(dtype, acc).is_ok()
        && fuel_graph_ext::op::cast_defined(acc, dtype).is_ok();
    defined.then_some(Some(acc))
}

fn replicated_broadcast(g: &Graph, bc: NodeId, rep: &Replication) -> Option<Rewrite> {
    let n = g.node(bc)?;
    let Op::Broadcast { to } = &n.op else {
        return None;
    };
    let src = *n.operands.first()?;
    // Replicated before this broadcast: on two devices or more without
    // its own results (a broadcast onto its operand's device alone is
    // the lowering's business, and moves nothing there either).
    let before = rep.replicas(src).iter().filter(|r| r.node != bc).count();
    if before < 2 {
        return None;
    }
    let replicas = to
        .iter()
        .map(|d| rep.replica_on(src, *d).filter(|r| r.node != bc))
        .collect::<Option<Vec<ValueId>>>()?;
    Some(Rewrite::ReplicatedBroadcast { bc, replicas })
}

/// The N×N pieces of an `all_to_all` over operands of these types.
fn pieces(split: Option<&[usize]>, axis: usize, tys: &[&TensorType]) -> Option<Vec<Vec<usize>>> {
    all_to_all_pieces(split, axis, tys).ok()
}

fn all_to_all_inverse(g: &Graph, second: NodeId) -> Option<Rewrite> {
    let s = g.node(second)?;
    let Op::AllToAll { axis, split } = &s.op else {
        return None;
    };
    let first = all_results_of(g, &s.operands)?;
    let f = g.node(first)?;
    let Op::AllToAll {
        axis: a1,
        split: s1,
    } = &f.op
    else {
        return None;
    };
    if a1 != axis {
        return None;
    }
    let tys = |vs: &[ValueId]| -> Option<Vec<TensorType>> {
        vs.iter().map(|v| g.value_type(*v).cloned()).collect()
    };
    let (t1, t2) = (tys(&f.operands)?, tys(&s.operands)?);
    let p1 = pieces(s1.as_deref(), *axis, &t1.iter().collect::<Vec<_>>())?;
    let p2 = pieces(split.as_deref(), *axis, &t2.iter().collect::<Vec<_>>())?;
    let n = p1.len();
    let inverse = (0..n).all(|j| {
        (0..n).all(|k| p2.get(j).and_then(|r| r.get(k)) == p1.get(k).and_then(|r| r.get(j)))
    });
    inverse.then_some(Rewrite::AllToAllInverse { first, second })
}
