//! The gradient of every collective: [`transpose`] records, into the same
//! graph, the collective that carries the cotangents of a collective's
//! results back to its operands (the transpose of a linear map, as
//! reverse-mode autodiff needs it).
//!
//! A cotangent is `Some(value)` or `None`, a symbolic zero (the IR has no
//! constants, so a zero is never materialised: a result nobody reads needs
//! no cotangent, and an operand whose cotangent is zero gets `None`). The
//! rules, with N the group size and `ct_j` the cotangent of result j:
//!
//! | forward | backward (per operand i) |
//! |---|---|
//! | `all_reduce.sum` | `all_reduce.sum` of the cts; when the cts are replicas of one value (the [`Replication`] lattice), N·ct folded locally, with no communication |
//! | `all_reduce.mean` | `all_reduce.mean` of the cts (the sum scaled by 1/N); replicated: folded locally |
//! | `reduce.sum` / `.mean` to root r | `broadcast` of the root's ct to every operand's device (`mean`: each divided by N) |
//! | `broadcast` of x | `reduce.sum` of the cts to x's device (a copy after it when x's device is not a target); replicated: folded locally |
//! | `all_gather` along a | `reduce_scatter.sum` along a, split as the operands' extents (uneven included); replicated: each rank slices its part and folds it locally |
//! | `reduce_scatter.sum` / `.mean` | `all_gather` of the cts along the axis (`mean`: divided by N) |
//! | `all_to_all` with pieces P | `all_to_all` with pieces Pᵀ (row i of P is what rank i sent; it is what rank i gets back) |
//! | `comm.*` (SPMD, one rank per graph) | the same rules, with `comm.all_reduce` / `comm.all_gather` / `comm.reduce_scatter` / `comm.all_to_all` (split transposed) on the same communicator; `comm.broadcast` becomes `comm.all_reduce.sum` on every rank, its value the root's cotangent and zero on the others ([`transpose_at`] says which rank the graph is); `comm.barrier` a barrier of the ct |
//! | `all_reduce.max` / `.min` | `eq(x_i, y_i) · s_i`: the mask of where operand i equals the extreme its rank got, times s_i, that rank's result of `all_reduce.sum` of the cts (replicated cts: N·ct folded locally) |
//! | `reduce.max` / `.min` to root r | `eq(x_i, b_i) · c_i`, with b and c the `broadcast`s of the root's result and of its ct to every operand's device |
//! | `reduce_scatter.max` / `.min` | `eq(x_i, e_i) · c_i`, with e and c the `all_gather`s (along the axis, so uneven splits join back) of the results and of the cts |
//! | `all_reduce.prod` / `reduce.prod` / `reduce_scatter.prod` | `o_i · s_i`: o_i the product of the other operands on operand i's device, s_i owed as for max and min (the rows above) |
//! | `comm.all_reduce.max` / `.min` / `.prod`, `comm.reduce_scatter.max` / `.min` / `.prod` | the same: the ct owed through `comm.all_reduce.sum` or `comm.all_gather` (same rank and split), times the mask against the rank's result (or its `comm.all_gather`), or times the others' product (`comm.all_gather` along axis 0, sliced, multiplied) |
//!
//! **Ties in max and min: every tied rank gets the whole cotangent.** Where
//! k ranks hold the extreme of an element, each of them gets the full
//! cotangent of that element (the mask is 1 on all k). That is the rule one
//! `eq` can express with no communication beyond the sum's (the lowest
//! tied rank alone would need each rank to know the masks of the ranks
//! before it), and it is each tied rank's derivative upward: raising one
//! tied operand alone raises the extreme by as much (`max`; lowering it,
//! for `min`). It is not the derivative of a simultaneous move (the k
//! ranks' gradients add up to k times the cotangent), and a central finite
//! difference at a tie sees neither (1/2 for two ties): where ties matter,
//! break them in the operands. The
//! extreme is compared as the forward computed it: a rank whose operand
//! is NaN never holds it (`max`/`min` let a number win), an element where
//! every operand is NaN sends nothing anywhere, and -0 ties with +0. The
//! mask multiplies the cotangent, so a cotangent that is infinite or NaN
//! at an element gives NaN (0 · ∞) to the ranks that do not hold it there.
//!
//! **`prod`** (`all_reduce`, `reduce`, `reduce_scatter`): operand i gets
//! the product of the *other* operands times the cotangent it is owed (as
//! for max and min: the sum of the cts, the root's ct broadcast, or the
//! cts gathered). The product of the others is multiplied out, never
//! divided out of the whole (x/x_i is wrong where x_i is 0): a chain of
//! copies carries the product of the ranks before each rank up from rank
//! 0, another the product of the ranks after it down from the last, and
//! each rank multiplies the two (2(N−1) copies of one shard;
//! `products.rs`). The SPMD `comm.all_reduce.prod` and
//! `comm.reduce_scatter.prod` gather every operand with `comm.all_gather`
//! along axis 0 and multiply the others' slices, so they need the graph's
//! rank ([`transpose_at`]) and an operand with an axis; a scalar, or no
//! rank, is [`GradError::Unsupported`], saying which.
//!
//! The graph's N results are N values: a loss that reads every rank's
//! result counts each, so the cotangent of a replicated `all_reduce.sum`
//! is N·ct on every rank (JAX's `psum` of a device-invariant value
//! transposes to a broadcast because it counts the value once; here the
//! same saving comes from folding the N replicas locally).
//!
//! `tests.rs` checks every rule by central finite differences against the
//! reference interpreter, for f32 and f64, groups of 2 to 4, even and
//! uneven splits.

mod extremes;
mod products;
mod spmd_forms;
#[cfg(test)]
mod tests;
mod transposes;

use crate::simplify::Replication;
use fuel_graph_ext::graph::{NodeId, ValueId};
use fuel_graph_ext::{Graph, Op, TensorType};

/// Why a transpose could not be recorded.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum GradError {
    /// The node is not in the graph.
    #[error("transpose: the node is not in the graph; pass a collective node of this graph")]
    NoNode,
    /// The node is not a collective with a transpose rule.
    #[error("transpose: `{op}` is not a collective; transpose only collectives (all_reduce, reduce, broadcast, all_gather, reduce_scatter, all_to_all, comm.*), and differentiate local ops with their own rules")]
    NotCollective {
        /// The node's mnemonic.
        op: String,
    },
    /// The number of cotangents differs from the number of results.
    #[error("transpose: `{op}` has {results} result(s) but {given} cotangent(s) were given; give one per result, `None` for a zero")]
    Count {
        /// The node's mnemonic.
        op: String,
        /// Its results.
        results: usize,
        /// Cotangents given.
        given: usize,
    },
    /// A cotangent's type differs from its result's.
    #[error("transpose: the cotangent of result {result} of `{op}` is {found}, the result is {want}; give a cotangent of the result's type on its device")]
    Type {
        /// The node's mnemonic.
        op: String,
        /// Which result.
        result: usize,
        /// The cotangent's type.
        found: String,
        /// The result's type.
        want: String,
    },
    /// Some cotangents are zero and others not, for a rule that needs one
    /// on every rank.
    #[error("transpose: `{op}` needs a cotangent on every rank or none at all, and result {result} has none; record a zero tensor on that device as an input and pass it")]
    PartialZero {
        /// The node's mnemonic.
        op: String,
        /// The first result without one.
        result: usize,
    },
    /// The transpose cannot be recorded as asked: an SPMD rule needs the
    /// graph's rank and was not given it (`comm.broadcast`, `comm.*.prod`),
    /// or a `comm.*.prod` operand has no axis to gather along.
    #[error("transpose: `{op}` has no transpose here: {why}")]
    Unsupported {
        /// The node's mnemonic.
        op: String,
        /// Why, and what to do instead.
        why: String,
    },
    /// Recording the backward node failed a typing rule (a bug here).
    #[error("transpose: recording the backward of `{op}` failed: {why}")]
    Internal {
        /// The node's mnemonic.
        op: String,
        /// The typing error.
        why: String,
    },
}

/// Records in `g` the backward of the collective `node` given the
/// cotangents of its results (one per result, `None` for zero), and returns
/// the cotangent of each of its operands (`None` for zero). Reads the
/// [`Replication`] lattice of `g` once, to skip communication a replicated
/// cotangent does not need.
///
/// ```
/// use fuel_collective::grad::transpose;
/// use fuel_graph_ext::{DType, Device, Graph, Op, ReduceOp, TensorType};
/// use fuel_graph_ext::graph::ValueId;
///
/// let ty = TensorType::new(DType::F32, &[4]);
/// let mut g = Graph::new("g");
/// let x: Vec<ValueId> = (0..2).map(|i| g.add_value(Op::Input { name: format!("x{i}"), device: Device::cpu(i) }, &[], ty.clone())).collect();
/// let ct: Vec<ValueId> = (0..2).map(|i| g.add_value(Op::Input { name: format!("ct{i}"), device: Device::cpu(i) }, &[], ty.clone())).collect();
/// let y = g.add_node(Op::AllReduce { op: ReduceOp::Sum }, &x, ty.clone());
/// let dx = transpose(&mut g, y, &[Some(ct[0]), Some(ct[1])])?;
/// assert_eq!(dx.len(), 2); // one per operand: an all_reduce.sum of the cotangents
/// # Ok::<(), fuel_collective::grad::GradError>(())
/// ```
pub fn transpose(
    g: &mut Graph,
    node: NodeId,
    cotangents: &[Option<ValueId>],
) -> Result<Vec<Option<ValueId>>, GradError> {
    transpose_at(g, node, cotangents, None)
}

/// [`transpose`] for an SPMD graph that knows its rank: `comm.broadcast`
/// needs it, as only the root's operand gets a cotangent.
pub fn transpose_at(
    g: &mut Graph,
    node: NodeId,
    cotangents: &[Option<ValueId>],
    rank: Option<usize>,
) -> Result<Vec<Option<ValueId>>, GradError> {
    let n = g.node(node).ok_or(GradError::NoNode)?;
    let op = n.op.clone();
    let name = op.mnemonic();
    if !(op.is_collective() || op.is_comm()) || op.is_driver_collective() {
        return Err(GradError::NotCollective { op: name });
    }
    let operands = n.operands.to_vec();
    let results = n.num_results();
    if cotangents.len() != results {
        return Err(GradError::Count {
            op: name,
            results,
            given: cotangents.len(),
        });
    }
    for (k, ct) in cotangents.iter().enumerate() {
        let Some(ct) = ct else { continue };
        let want = g.value_type(ValueId {
            node,
            result: k as u32,
        });
        let found = g.value_type(*ct);
        if want != found || found.is_none() {
            return Err(GradError::Type {
                op: name,
                result: k,
                found: found.map_or("no value".into(), TensorType::to_string),
                want: want.map_or("no value".into(), TensorType::to_string),
            });
        }
    }
    if cotangents.iter().all(Option::is_none) {
        return Ok(vec![None; operands.len()]);
    }
    let cts = match cotangents.iter().position(Option::is_none) {
        Some(result) if !matches!(op, Op::Reduce { .. }) => {
            return Err(GradError::PartialZero { op: name, result });
        }
        _ => cotangents.iter().flatten().copied().collect::<Vec<_>>(),
    };
    let rep = Replication::of(g);
    let cx = transposes::Cx {
        node,
        name,
        operands,
        cts,
        rep,
    };
    match op {
        Op::Comm { .. } => spmd_forms::transpose(g, &cx, &op, rank),
        _ => transposes::transpose(g, &cx, &op),
    }
}
