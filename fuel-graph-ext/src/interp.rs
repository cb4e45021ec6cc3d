//! The reference interpreter: what a graph means, computed on the host.
//!
//! It ignores placement (a copy or move is the identity) and evaluates every
//! op, collectives included, straight from its definition. Values are
//! [`HostTensor`]s that hold each dtype as itself, and the arithmetic
//! (`arith.rs`) is exact: integers wrap at their width and divide toward
//! zero, floats round once per step to their dtype as the devices do,
//! `Mean` sums in a wider type (`DType::mean_accumulator`). It is an oracle
//! for tests and tools, not a device: nothing here is ever scheduled or
//! timed. Collectives fold in rank order; `order.rs` says how far a float
//! fold in another order (a lowering's) may lie from it, and checks a
//! lowered graph against the original under that rule.

mod arith;
mod edges;
mod extern_ref;
mod host_tensor;
mod order;
mod ranks;

pub use edges::{edge_inputs, edge_values};
pub use extern_ref::{matmul_reference, matmul_shape, register_reference, ReferenceFn};
pub use host_tensor::HostTensor;
pub use order::{check_lowering, compare, fold_bounds, Agreement, Bounds};
pub use ranks::interpret_world;

use crate::dtype::{DType, TensorType};
use crate::graph::{Graph, ValueId};
use crate::op::{CommOp, Op, ReduceOp};
use std::collections::{BTreeMap, HashMap};

/// The input value for element `i` of the input called `name`: a small
/// integer from -4 to 4 (0 to 8 for the unsigned types; bool rounds it to 0
/// or 1), so that float sums of a few of them are exact in any order. The
/// rule: `h = FNV-1a(name)`, then `((h + 7*i) mod 9) - 4`.
pub fn deterministic_value(name: &str, dtype: DType, i: usize) -> f64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in name.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    let v = (h.wrapping_add((i as u64).wrapping_mul(7)) % 9) as f64;
    if dtype.is_unsigned() {
        v
    } else {
        v - 4.0
    }
}

/// [`deterministic_inputs`], with every buffer allocated fallibly: an
/// input the host cannot hold is an [`InterpError::OutOfMemory`] that says
/// what fits, not an abort. What tools that read graphs from users call.
pub fn try_deterministic_inputs(g: &Graph) -> Result<BTreeMap<String, HostTensor>, InterpError> {
    let mut out = BTreeMap::new();
    for (id, name) in g.inputs() {
        if let Some(n) = g.node(id) {
            let ty = n.ty.clone();
            let count = held_elements(&ty, name)?;
            let mut data: Vec<f64> = Vec::new();
            data.try_reserve_exact(count).map_err(|e| {
                out_of_memory(
                    &format!("input {}", crate::text::excerpt::name(name)),
                    &ty,
                    e,
                )
            })?;
            data.extend((0..count).map(|i| deterministic_value(name, ty.dtype, i)));
            out.insert(name.to_string(), HostTensor::new(ty, data));
        }
    }
    Ok(out)
}

/// How many elements the interpreter holds for a value of `ty`; a type
/// that does not fit ([`TensorType::fits`]) is refused.
fn held_elements(ty: &TensorType, what: &str) -> Result<usize, InterpError> {
    if !ty.fits() {
        return Err(InterpError::Invalid(format!(
            "{} has type {ty}, which takes more than {} bytes; the verifier refuses it",
            crate::text::excerpt::token(what),
            crate::dtype::MAX_TENSOR_BYTES
        )));
    }
    Ok(ty.num_elements())
}

/// Bytes the interpreter holds per element (it keeps every value as an
/// `f64`).
const HELD_BYTES: usize = std::mem::size_of::<f64>();

fn out_of_memory(what: &str, ty: &TensorType, e: std::collections::TryReserveError) -> InterpError {
    let fits = crate::limits::host().map_or(String::new(), |c| {
        format!(
            "; this process may hold at most {} ({})",
            crate::limits::Bytes(c.total.bytes),
            c.total.what
        )
    });
    InterpError::OutOfMemory {
        what: what.to_string(),
        ty: ty.clone(),
        bytes: ty.num_elements().saturating_mul(HELD_BYTES),
        reason: format!("{e}{fits}"),
    }
}

/// Deterministic data for every input of `g`, keyed by input name. Aborts,
/// as any `Vec` does, if the host cannot hold them; see
/// [`try_deterministic_inputs`] for input from users.
pub fn deterministic_inputs(g: &Graph) -> BTreeMap<String, HostTensor> {
    let mut out = BTreeMap::new();
    for (id, name) in g.inputs() {
        if let Some(n) = g.node(id) {
            let ty = n.ty.clone();
            let data = (0..ty.num_elements())
                .map(|i| deterministic_value(name, ty.dtype, i))
                .collect();
            out.insert(name.to_string(), HostTensor::new(ty, data));
        }
    }
    out
}

/// Why interpretation failed.
#[derive(Clone, PartialEq, Eq, thiserror::Error)]
pub enum InterpError {
    /// No data was given for an input.
    #[error("no data for input \"{0}\"; pass one tensor per input name")]
    MissingInput(String),
    /// Data of the wrong type was given.
    #[error("input \"{name}\" is declared {want} but the data is {got}; pass a tensor of the declared type")]
    InputType {
        name: String,
        want: TensorType,
        got: TensorType,
    },
    /// Data of the right type but the wrong number of elements.
    #[error("input \"{name}\" is declared {ty}, which has {want} element(s), but the data has {got}; give one value per element")]
    InputLength {
        name: String,
        ty: TensorType,
        want: usize,
        got: usize,
    },
    /// An SPMD collective over several ranks needs their graphs too.
    #[error(
        "`{op}` meets {ranks} ranks; evaluate every rank's graph together with interpret_world"
    )]
    NeedsWorld { op: String, ranks: usize },
    /// The ranks' graphs do not meet at matching collectives.
    #[error(
        "the ranks do not meet: {0}; every rank must record the same collectives in the same order"
    )]
    WorldMismatch(String),
    /// A value the host cannot hold (the interpreter keeps each element as
    /// an `f64`).
    #[error("the interpreter cannot hold {what} ({ty}, {} as it keeps them): {reason}; interpret smaller tensors", crate::limits::Bytes(*.bytes))]
    OutOfMemory {
        what: String,
        ty: TensorType,
        bytes: usize,
        reason: String,
    },
    /// An `extern` op whose name has no reference function.
    #[error("no reference function is registered for `extern \"{0}\"`; register one with fuel_graph_ext::interp::register_reference before interpreting")]
    NoReference(String),
    /// An `extern` op's reference function failed.
    #[error("`extern \"{name}\"` failed: {message}")]
    Extern { name: String, message: String },
    /// The graph is malformed; run the verifier for the full report.
    #[error("cannot interpret an invalid graph: {0}; run the verifier for details")]
    Invalid(String),
}

/// Evaluates `g` and returns its outputs in return order.
pub fn interpret(
    g: &Graph,
    inputs: &BTreeMap<String, HostTensor>,
) -> Result<Vec<HostTensor>, InterpError> {
    let (order, acyclic) = g.topo_order_acyclic();
    if !acyclic {
        return Err(InterpError::Invalid("the graph has a cycle".into()));
    }
    let mut env: HashMap<ValueId, HostTensor> = HashMap::new();
    for id in order {
        let Some(n) = g.node(id) else { continue };
        // Room for the node's results, checked before `eval` allocates
        // them (a probe, released at once): a value the host cannot hold
        // is an error, not an abort.
        let what = || format!("the result of `{}`", n.op.mnemonic());
        let count = held_elements(&n.ty, &what())?;
        let results = n.num_results().max(1);
        let mut probe: Vec<f64> = Vec::new();
        probe
            .try_reserve_exact(count.saturating_mul(results))
            .map_err(|e| out_of_memory(&what(), &n.ty, e))?;
        drop(probe);
        let args = n
            .operands
            .iter()
            .map(|v| {
                env.get(v).ok_or_else(|| {
                    let name = crate::text::Numbering::new(g).name(g, *v);
                    InterpError::Invalid(format!("operand {name} is undefined"))
                })
            })
            .collect::<Result<Vec<&HostTensor>, _>>()?;
        let results = eval(&n.op, &n.ty, &args, inputs)?;
        for (i, r) in results.into_iter().enumerate() {
            env.insert(
                ValueId {
                    node: id,
                    result: i as u32,
                },
                r,
            );
        }
    }
    g.outputs()
        .iter()
        .map(|v| {
            env.get(v)
                .cloned()
                .ok_or_else(|| InterpError::Invalid("a returned value is undefined".into()))
        })
        .collect()
}

/// The reduction `op` of `args`, which all have type `ty`.
fn reduce_all(
    op: ReduceOp,
    ty: &TensorType,
    args: &[&HostTensor],
) -> Result<HostTensor, InterpError> {
    tensor(ty, arith::reduce(op, ty.dtype, args))
}

/// A tensor of `ty` from bytes the interpreter computed for it (their
/// length is checked, though every op here computes a whole tensor).
fn tensor(ty: &TensorType, bytes: Vec<u8>) -> Result<HostTensor, InterpError> {
    HostTensor::from_bytes(ty.clone(), bytes).map_err(|e| InterpError::Invalid(e.to_string()))
}

/// `len` entries of `axis` from `start`, as bytes.
fn slice_data(t: &HostTensor, axis: usize, start: usize, len: usize) -> Vec<u8> {
    let size = t.ty.dtype.size_bytes();
    let (outer, extent, inner) = crate::plan::region::around(&t.ty.shape, axis);
    let row = inner * size;
    let mut out = Vec::with_capacity(outer * len * row);
    for o in 0..outer {
        let base = (o * extent + start) * row;
        out.extend_from_slice(&t.bytes()[base..base + len * row]);
    }
    out
}

/// `parts` joined along `axis`, as bytes.
fn concat_data(parts: &[&HostTensor], axis: usize) -> Vec<u8> {
    let size = parts[0].ty.dtype.size_bytes();
    // The rows are counted on a part with entries along the axis; with
    // none, the join is empty.
    let Some(full) = parts.iter().find(|p| p.ty.shape[axis] > 0) else {
        return Vec::new();
    };
    let (outer, _, inner) = crate::plan::region::around(&full.ty.shape, axis);
    let row = inner * size;
    let mut out = Vec::new();
    for o in 0..outer {
        for p in parts {
            let e = p.ty.shape[axis];
            out.extend_from_slice(&p.bytes()[o * e * row..(o + 1) * e * row]);
        }
    }
    out
}

/// The data given for input `name`, checked against its type `ty`.
fn input_value(
    name: &str,
    ty: &TensorType,
    inputs: &BTreeMap<String, HostTensor>,
) -> Result<HostTensor, InterpError> {
    let t = inputs
        .get(name)
        .ok_or_else(|| InterpError::MissingInput(name.to_string()))?;
    if t.ty != *ty {
        return Err(InterpError::InputType {
            name: name.to_string(),
            want: ty.clone(),
            got: t.ty.clone(),
        });
    }
    if t.len() != ty.num_elements() || t.bytes().len() != ty.size_bytes() {
        return Err(InterpError::InputLength {
            name: name.to_string(),
            ty: ty.clone(),
            want: ty.num_elements(),
            got: t.len(),
        });
    }
    Ok(t.clone())
}

/// Each result of an `all_to_all` along `axis`, as its split says.
fn all_to_all(
    ty: &TensorType,
    args: &[&HostTensor],
    axis: usize,
    split: Option<&[usize]>,
) -> Result<Vec<HostTensor>, InterpError> {
    let tys: Vec<&TensorType> = args.iter().map(|a| &a.ty).collect();
    let pieces = crate::op::all_to_all_pieces(split, axis, &tys)
        .map_err(|e| InterpError::Invalid(e.to_string()))?;
    // Piece (i, j) starts where the pieces of operand i before j end.
    let cut = |i: usize, j: usize| -> Result<HostTensor, InterpError> {
        let start: usize = pieces[i][..j].iter().sum();
        let len = pieces[i][j];
        tensor(
            &args[i].ty.with_dim(axis, len),
            slice_data(args[i], axis, start, len),
        )
    };
    (0..args.len())
        .map(|j| {
            let parts = (0..args.len())
                .map(|i| cut(i, j))
                .collect::<Result<Vec<_>, _>>()?;
            let refs: Vec<&HostTensor> = parts.iter().collect();
            let len = parts.iter().map(|p| p.ty.shape[axis]).sum();
            tensor(&ty.with_dim(axis, len), concat_data(&refs, axis))
        })
        .collect()
}

/// Each rank's slice of a `reduce_scatter` along `axis`.
fn reduce_scatter(
    op: ReduceOp,
    ty: &TensorType,
    args: &[&HostTensor],
    axis: usize,
    split: Option<&[usize]>,
) -> Result<Vec<HostTensor>, InterpError> {
    let full = reduce_all(op, &args[0].ty, args)?;
    // Rank i's slice: `split[i]` entries, or the default partition.
    let extents = crate::op::scatter_extents(split, axis, full.ty.shape[axis], args.len())
        .map_err(|e| InterpError::Invalid(e.to_string()))?;
    let mut start = 0;
    extents
        .iter()
        .map(|len| {
            let t = tensor(
                &ty.with_dim(axis, *len),
                slice_data(&full, axis, start, *len),
            );
            start += len;
            t
        })
        .collect()
}

fn eval(
    op: &Op,
    ty: &TensorType,
    args: &[&HostTensor],
    inputs: &BTreeMap<String, HostTensor>,
) -> Result<Vec<HostTensor>, InterpError> {
    let typed = |ts: &[&HostTensor]| -> Result<(), InterpError> {
        let want: Vec<TensorType> = ts.iter().map(|t| t.ty.clone()).collect();
        match crate::op::infer_type(op, &want.iter().collect::<Vec<_>>()) {
            Ok(t) if t == *ty => Ok(()),
            Ok(t) => Err(InterpError::Invalid(format!(
                "`{}` declared {ty} but computes {t}",
                op.mnemonic()
            ))),
            Err(e) => Err(InterpError::Invalid(e.to_string())),
        }
    };
    let one = |bytes: Vec<u8>| Ok(vec![tensor(ty, bytes)?]);
    // Indexing below (`args[0]`, `shape[axis]`, data ranges) cannot panic:
    // `typed` ran `infer_type`, which checks operand counts, axes and slice
    // bounds, and inputs were checked to hold one value per element.
    if !matches!(op, Op::Input { .. }) {
        typed(args)?;
    }
    match op {
        Op::Input { name, .. } => Ok(vec![input_value(name, ty, inputs)?]),
        Op::Copy { .. } | Op::Move { .. } => Ok(vec![args[0].clone()]),
        Op::Extern(x) => Ok(vec![extern_ref::eval_extern(x, args)?]),
        Op::Elementwise { kind, .. } => one(arith::fold(*kind, ty.dtype, args)),
        Op::Div { by, .. } => one(arith::divide(args[0], *by)),
        Op::Cast { to, .. } => one(arith::cast(args[0], *to)),
        Op::Slice {
            axis, start, len, ..
        } => one(slice_data(args[0], *axis, *start, *len)),
        Op::Concat { axis, .. } => one(concat_data(args, *axis)),
        Op::AllReduce { op } => {
            let r = reduce_all(*op, ty, args)?;
            Ok(args.iter().map(|_| r.clone()).collect())
        }
        Op::Reduce { op, .. } | Op::DriverAllReduce { op, .. } => {
            Ok(vec![reduce_all(*op, ty, args)?])
        }
        Op::Broadcast { to } => Ok(to.iter().map(|_| args[0].clone()).collect()),
        Op::Comm {
            kind, ranks, split, ..
        } => {
            if *ranks != 1 {
                return Err(InterpError::NeedsWorld {
                    op: op.mnemonic(),
                    ranks: *ranks,
                });
            }
            Ok(vec![comm_result(kind, split.as_deref(), ty, args, 0)?])
        }
        Op::AllGather { axis } => {
            let d = tensor(ty, concat_data(args, *axis))?;
            Ok(args.iter().map(|_| d.clone()).collect())
        }
        Op::AllToAll { axis, split } => all_to_all(ty, args, *axis, split.as_deref()),
        Op::ReduceScatter { op, axis, split } => {
            reduce_scatter(*op, ty, args, *axis, split.as_deref())
        }
    }
}

/// Rank `rank`'s result of an SPMD collective, given every rank's operand
/// (`args[r]` is rank r's; callers check there are `ranks` of them) and,
/// for an uneven `all_to_all`, its N×N split.
fn comm_result(
    kind: &CommOp,
    split: Option<&[usize]>,
    ty: &TensorType,
    args: &[&HostTensor],
    rank: usize,
) -> Result<HostTensor, InterpError> {
    let own = |i: usize| {
        args.get(i).map_or_else(
            || Err(InterpError::Invalid(format!("no operand from rank {i}"))),
            |t| Ok((*t).clone()),
        )
    };
    match kind {
        CommOp::AllReduce(op) => reduce_all(*op, ty, args),
        CommOp::Broadcast { root } => own(*root),
        CommOp::AllGather { axis } => tensor(ty, concat_data(args, *axis)),
        CommOp::ReduceScatter { op, axis } => {
            let full = reduce_all(*op, &args[0].ty, args)?;
            let len = ty.shape[*axis];
            // Equal slices, or the split's: this rank's starts after the
            // slices of the ranks before it.
            let start = split.map_or(rank * len, |s| s[..rank].iter().sum());
            tensor(ty, slice_data(&full, *axis, start, len))
        }
        CommOp::Barrier => own(rank),
        CommOp::AllToAll { axis } => {
            // Piece `rank` of every operand, in rank order: equal pieces,
            // or rank i's piece for this rank where row i of the split
            // puts it.
            let n = args.len().max(1);
            let even = ty.shape[*axis] / n;
            let piece = |i: usize| -> (usize, usize) {
                match split {
                    Some(s) => {
                        let row = &s[i * n..(i + 1) * n];
                        (row[..rank].iter().sum(), row[rank])
                    }
                    None => (rank * even, even),
                }
            };
            let parts = args
                .iter()
                .enumerate()
                .map(|(i, a)| {
                    let (start, len) = piece(i);
                    tensor(&a.ty.with_dim(*axis, len), slice_data(a, *axis, start, len))
                })
                .collect::<Result<Vec<_>, _>>()?;
            let refs: Vec<&HostTensor> = parts.iter().collect();
            tensor(ty, concat_data(&refs, *axis))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::parse;

    #[test]
    fn collectives_by_definition() {
        let src = "graph @g {\n  %0 = input \"a\" @cpu:0 : i32[4]\n  %1 = input \"b\" @cpu:1 : i32[4]\n  %2:2 = reduce_scatter.sum %0, %1 {axis=0} : i32[2]\n  %3:2 = all_gather %0, %1 {axis=0} : i32[8]\n  %4 = reduce.mean %0, %1 {root=1} : i32[4]\n  return %2#1, %3#0, %4\n}\n";
        let g = parse(src).unwrap();
        let mut inputs = BTreeMap::new();
        let ty = TensorType::new(DType::I32, &[4]);
        inputs.insert(
            "a".into(),
            HostTensor::new(ty.clone(), vec![1.0, 2.0, 3.0, -3.0]),
        );
        inputs.insert("b".into(), HostTensor::new(ty, vec![10.0, 20.0, 30.0, 0.0]));
        let out = interpret(&g, &inputs).unwrap();
        assert_eq!(out[0].to_f64(), vec![33.0, -3.0]);
        assert_eq!(
            out[1].to_f64(),
            vec![1.0, 2.0, 3.0, -3.0, 10.0, 20.0, 30.0, 0.0]
        );
        assert_eq!(out[2].to_f64(), vec![5.0, 11.0, 16.0, -1.0]);
        inputs.remove("b");
        assert_eq!(
            interpret(&g, &inputs).unwrap_err(),
            InterpError::MissingInput("b".into())
        );
    }

    #[test]
    fn spmd_worlds_meet_at_their_collectives() {
        let rank = |r: usize| {
            let src = format!(
                "graph @rank{r} {{\n  %0 = input \"x\" @cpu:{r} : i32[4]\n  %1 = comm.all_reduce.sum %0 {{comm=7, ranks=2}} @cpu:{r} : i32[4]\n  %2 = comm.all_gather %1 {{axis=0, comm=7, ranks=2}} @cpu:{r} : i32[8]\n  %3 = comm.reduce_scatter.max %0 {{axis=0, comm=7, ranks=2}} @cpu:{r} : i32[2]\n  %4 = comm.broadcast %0 {{comm=7, ranks=2, root=1}} @cpu:{r} : i32[4]\n  return %2, %3, %4\n}}\n"
            );
            let g = parse(&src).unwrap();
            assert_eq!(crate::text::print(&g), src, "comm ops round-trip");
            g
        };
        let ty = TensorType::new(DType::I32, &[4]);
        let ins = |v: [f64; 4]| {
            BTreeMap::from([("x".to_string(), HostTensor::new(ty.clone(), v.to_vec()))])
        };
        let graphs = [rank(0), rank(1)];
        let out = interpret_world(
            &graphs,
            &[ins([1.0, 2.0, 3.0, 4.0]), ins([10.0, 0.0, 30.0, 0.0])],
        )
        .unwrap();
        assert_eq!(
            out[0][0].to_f64(),
            vec![11.0, 2.0, 33.0, 4.0, 11.0, 2.0, 33.0, 4.0]
        );
        assert_eq!(out[0][1].to_f64(), vec![10.0, 2.0]);
        assert_eq!(out[1][1].to_f64(), vec![30.0, 4.0]);
        assert_eq!(out[0][2].to_f64(), vec![10.0, 0.0, 30.0, 0.0]);
        // One rank alone cannot be interpreted, and mismatched worlds fail.
        let e = interpret(&graphs[0], &ins([0.0; 4])).unwrap_err();
        assert!(e.to_string().contains("interpret_world"), "{e}");
        let e = interpret_world(&graphs[..1], &[ins([0.0; 4])]).unwrap_err();
        assert!(e.to_string().contains("do not meet"), "{e}");
    }

    #[test]
    fn deterministic_values_are_small_and_stable() {
        for i in 0..100 {
            let v = deterministic_value("x", DType::F32, i);
            assert!((-4.0..=4.0).contains(&v));
            assert_eq!(v, deterministic_value("x", DType::F32, i));
            assert!((0.0..=8.0).contains(&deterministic_value("x", DType::U8, i)));
        }
        assert_ne!(
            (0..9)
                .map(|i| deterministic_value("x", DType::F32, i))
                .collect::<Vec<_>>(),
            (0..9)
                .map(|i| deterministic_value("y", DType::F32, i))
                .collect::<Vec<_>>()
        );
    }
}
