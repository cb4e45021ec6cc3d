//! The reference interpreter: what a graph means, computed on the host.
//!
//! It ignores placement (a copy or move is the identity) and evaluates every
//! op, collectives included, straight from its definition. Values are held as
//! `f64` and rounded to the dtype after every step. Integer ops compute in
//! `i128` and wrap to the dtype like the hardware, so every integer dtype up
//! to 32 bits is exact; i64 and u64 are exact while values stay within
//! 2^53, beyond which `f64` cannot hold them. Floats are exact for the small
//! integers that [`deterministic_inputs`] feeds. It is an oracle for tests and tools, not a
//! device: nothing here is ever scheduled or timed.

use crate::dtype::{DType, TensorType};
use crate::graph::NodeId;
use crate::graph::{Graph, ValueId};
use crate::op::{CommOp, ElementwiseOp, Op, ReduceOp};
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write;

/// A host tensor for the interpreter and for checking device results.
#[derive(Clone, Debug, PartialEq)]
pub struct HostTensor {
    /// Its type.
    pub ty: TensorType,
    /// Row-major elements, already rounded to `ty.dtype`.
    pub data: Vec<f64>,
}

impl HostTensor {
    /// A tensor from exact values (rounded to the dtype here).
    pub fn new(ty: TensorType, data: Vec<f64>) -> HostTensor {
        let dtype = ty.dtype;
        HostTensor {
            ty,
            data: data.into_iter().map(|x| dtype.round(x)).collect(),
        }
    }

    /// A stable digest: a 64-bit FNV-1a hash of the elements plus the first
    /// four of them. Equal values give equal digests.
    pub fn digest(&self) -> String {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for x in &self.data {
            let x = if *x == 0.0 {
                0.0
            } else if x.is_nan() {
                f64::NAN
            } else {
                *x
            };
            for b in x.to_bits().to_le_bytes() {
                h ^= u64::from(b);
                h = h.wrapping_mul(0x0000_0100_0000_01b3);
            }
        }
        let mut s = format!("{h:016x} [");
        for (i, x) in self.data.iter().take(4).enumerate() {
            if i > 0 {
                s.push_str(", ");
            }
            let _ = write!(s, "{x}");
        }
        if self.data.len() > 4 {
            s.push_str(", ...");
        }
        s.push(']');
        s
    }

    /// The tolerance used to compare floats of this type: relative, against
    /// the larger of 1 and the expected magnitude. Integers compare exactly.
    pub fn tolerance(dtype: DType) -> f64 {
        match dtype {
            DType::F64 => 1e-12,
            DType::F32 => 1e-5,
            DType::F16 => 1e-2,
            DType::BF16 => 2e-2,
            DType::I32
            | DType::I64
            | DType::U8
            | DType::Bool
            | DType::I8
            | DType::I16
            | DType::U16
            | DType::U32
            | DType::U64 => 0.0,
        }
    }

    /// Checks `self` against `expected`: same type, integers exactly equal,
    /// floats within [`HostTensor::tolerance`]. The error names the first
    /// differing element.
    pub fn check_close(&self, expected: &HostTensor) -> Result<(), String> {
        if self.ty != expected.ty || self.data.len() != expected.data.len() {
            return Err(format!(
                "type {} differs from the expected {}",
                self.ty, expected.ty
            ));
        }
        let tol = HostTensor::tolerance(self.ty.dtype);
        for (i, (a, b)) in self.data.iter().zip(&expected.data).enumerate() {
            let same =
                a == b || (a.is_nan() && b.is_nan()) || (a - b).abs() <= tol * b.abs().max(1.0);
            if !same {
                return Err(format!(
                    "element {i} is {a} but {b} was expected (tolerance {tol})"
                ));
            }
        }
        Ok(())
    }

    /// The largest absolute difference to `other`, or `None` if types differ.
    pub fn max_abs_diff(&self, other: &HostTensor) -> Option<f64> {
        if self.ty != other.ty || self.data.len() != other.data.len() {
            return None;
        }
        Some(
            self.data
                .iter()
                .zip(&other.data)
                .map(|(a, b)| (a - b).abs())
                .fold(0.0, f64::max),
        )
    }
}

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

/// Deterministic data for every input of `g`, keyed by input name.
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
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
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
    /// The graph is malformed; run the verifier for the full report.
    #[error("cannot interpret an invalid graph: {0}; run the verifier for details")]
    Invalid(String),
}

/// Evaluates `g` and returns its outputs in return order.
pub fn interpret(
    g: &Graph,
    inputs: &BTreeMap<String, HostTensor>,
) -> Result<Vec<HostTensor>, InterpError> {
    if !g.is_acyclic() {
        return Err(InterpError::Invalid("the graph has a cycle".into()));
    }
    let mut env: HashMap<ValueId, HostTensor> = HashMap::new();
    for id in g.topo_order() {
        let Some(n) = g.node(id) else { continue };
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

/// `kind(x, y)` in `dtype`: floats in f64 rounded once, integers in i128
/// wrapped to the dtype (bool: add and max are OR, mul and min are AND).
fn combine(kind: ElementwiseOp, dtype: DType, x: f64, y: f64) -> f64 {
    if dtype.is_float() {
        return dtype.round(kind.apply(x, y));
    }
    let (a, b) = (x as i128, y as i128);
    dtype.wrap(match kind {
        ElementwiseOp::Add => a.wrapping_add(b),
        ElementwiseOp::Mul => a.wrapping_mul(b),
        ElementwiseOp::Max => a.max(b),
        ElementwiseOp::Min => a.min(b),
    })
}

fn fold(kind: ElementwiseOp, dtype: DType, args: &[&HostTensor]) -> Vec<f64> {
    let mut acc = args[0].data.clone();
    for a in &args[1..] {
        for (x, y) in acc.iter_mut().zip(&a.data) {
            *x = combine(kind, dtype, *x, *y);
        }
    }
    acc
}

/// Division by a positive integer: floats in f64 rounded once, integers
/// truncated toward zero.
fn divide(dtype: DType, data: &mut [f64], by: u64) {
    for x in data {
        *x = if dtype.is_float() {
            dtype.round(*x / by as f64)
        } else {
            dtype.wrap(*x as i128 / i128::from(by))
        };
    }
}

fn reduce_all(op: ReduceOp, ty: &TensorType, args: &[&HostTensor]) -> Vec<f64> {
    let mut acc = fold(op.combiner(), ty.dtype, args);
    if op == ReduceOp::Mean {
        divide(ty.dtype, &mut acc, args.len() as u64);
    }
    acc
}

/// Splits `shape` around `axis` into (outer, extent, inner) element counts.
fn around(shape: &[usize], axis: usize) -> (usize, usize, usize) {
    let outer = shape[..axis].iter().product();
    let inner = shape[axis + 1..].iter().product();
    (outer, shape[axis], inner)
}

fn slice_data(t: &HostTensor, axis: usize, start: usize, len: usize) -> Vec<f64> {
    let (outer, extent, inner) = around(&t.ty.shape, axis);
    let mut out = Vec::with_capacity(outer * len * inner);
    for o in 0..outer {
        let base = o * extent * inner + start * inner;
        out.extend_from_slice(&t.data[base..base + len * inner]);
    }
    out
}

fn concat_data(parts: &[&HostTensor], axis: usize) -> Vec<f64> {
    let (outer, _, inner) = around(&parts[0].ty.shape, axis);
    let mut out = Vec::new();
    for o in 0..outer {
        for p in parts {
            let e = p.ty.shape[axis];
            out.extend_from_slice(&p.data[o * e * inner..(o + 1) * e * inner]);
        }
    }
    out
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
    let one = |data: Vec<f64>| {
        Ok(vec![HostTensor {
            ty: ty.clone(),
            data,
        }])
    };
    // Indexing below (`args[0]`, `shape[axis]`, data ranges) cannot panic:
    // `typed` ran `infer_type`, which checks operand counts, axes and slice
    // bounds, and inputs were checked to hold one value per element.
    if !matches!(op, Op::Input { .. }) {
        typed(args)?;
    }
    match op {
        Op::Input { name, .. } => {
            let t = inputs
                .get(name)
                .ok_or_else(|| InterpError::MissingInput(name.clone()))?;
            if t.ty != *ty {
                return Err(InterpError::InputType {
                    name: name.clone(),
                    want: ty.clone(),
                    got: t.ty.clone(),
                });
            }
            if t.data.len() != ty.num_elements() {
                return Err(InterpError::InputLength {
                    name: name.clone(),
                    ty: ty.clone(),
                    want: ty.num_elements(),
                    got: t.data.len(),
                });
            }
            Ok(vec![t.clone()])
        }
        Op::Copy { .. } | Op::Move { .. } => one(args[0].data.clone()),
        Op::Elementwise { kind, .. } => one(fold(*kind, ty.dtype, args)),
        Op::Div { by, .. } => {
            let mut d = args[0].data.clone();
            divide(ty.dtype, &mut d, *by);
            one(d)
        }
        Op::Slice {
            axis, start, len, ..
        } => one(slice_data(args[0], *axis, *start, *len)),
        Op::Concat { axis, .. } => one(concat_data(args, *axis)),
        Op::AllReduce { op } => {
            let r = reduce_all(*op, ty, args);
            Ok(args
                .iter()
                .map(|_| HostTensor {
                    ty: ty.clone(),
                    data: r.clone(),
                })
                .collect())
        }
        Op::Reduce { op, .. } | Op::DriverAllReduce { op, .. } => one(reduce_all(*op, ty, args)),
        Op::Broadcast { to } => Ok(to.iter().map(|_| args[0].clone()).collect()),
        Op::Comm { kind, ranks, .. } => {
            if *ranks != 1 {
                return Err(InterpError::NeedsWorld {
                    op: op.mnemonic(),
                    ranks: *ranks,
                });
            }
            Ok(vec![comm_result(kind, ty, args, 0)])
        }
        Op::AllGather { axis } => {
            let d = concat_data(args, *axis);
            Ok(args
                .iter()
                .map(|_| HostTensor {
                    ty: ty.clone(),
                    data: d.clone(),
                })
                .collect())
        }
        Op::AllToAll { axis, split } => {
            let tys: Vec<&TensorType> = args.iter().map(|a| &a.ty).collect();
            let pieces = crate::op::all_to_all_pieces(split.as_deref(), *axis, &tys)
                .map_err(|e| InterpError::Invalid(e.to_string()))?;
            // Piece (i, j) starts where the pieces of operand i before j end.
            let cut = |i: usize, j: usize| -> HostTensor {
                let start: usize = pieces[i][..j].iter().sum();
                let len = pieces[i][j];
                HostTensor {
                    ty: args[i].ty.with_dim(*axis, len),
                    data: slice_data(args[i], *axis, start, len),
                }
            };
            Ok((0..args.len())
                .map(|j| {
                    let parts: Vec<HostTensor> = (0..args.len()).map(|i| cut(i, j)).collect();
                    let refs: Vec<&HostTensor> = parts.iter().collect();
                    let len = parts.iter().map(|p| p.ty.shape[*axis]).sum();
                    HostTensor {
                        ty: ty.with_dim(*axis, len),
                        data: concat_data(&refs, *axis),
                    }
                })
                .collect())
        }
        Op::ReduceScatter { op, axis, split } => {
            let full = HostTensor {
                ty: args[0].ty.clone(),
                data: reduce_all(*op, &args[0].ty, args),
            };
            // Rank i's slice: `split[i]` entries, or the default partition.
            let extents = crate::op::scatter_extents(
                split.as_deref(),
                *axis,
                full.ty.shape[*axis],
                args.len(),
            )
            .map_err(|e| InterpError::Invalid(e.to_string()))?;
            let mut start = 0;
            Ok(extents
                .iter()
                .map(|len| {
                    let t = HostTensor {
                        ty: ty.with_dim(*axis, *len),
                        data: slice_data(&full, *axis, start, *len),
                    };
                    start += len;
                    t
                })
                .collect())
        }
    }
}

/// Rank `rank`'s result of an SPMD collective, given every rank's operand
/// (`args[r]` is rank r's; callers check there are `ranks` of them).
fn comm_result(kind: &CommOp, ty: &TensorType, args: &[&HostTensor], rank: usize) -> HostTensor {
    let data = match kind {
        CommOp::AllReduce(op) => reduce_all(*op, ty, args),
        CommOp::Broadcast { root } => args.get(*root).map_or_else(Vec::new, |t| t.data.clone()),
        CommOp::AllGather { axis } => concat_data(args, *axis),
        CommOp::ReduceScatter { op, axis } => {
            let full = HostTensor {
                ty: args[0].ty.clone(),
                data: reduce_all(*op, &args[0].ty, args),
            };
            let len = ty.shape[*axis];
            slice_data(&full, *axis, rank * len, len)
        }
        CommOp::Barrier => args.get(rank).map_or_else(Vec::new, |t| t.data.clone()),
    };
    HostTensor {
        ty: ty.clone(),
        data,
    }
}

/// Evaluates an SPMD world: `graphs[r]` is rank r's graph, fed by
/// `inputs[r]`. Each rank runs until its next `comm.*` node; when every rank
/// waits at one, they must be the same collective (same kind and attributes,
/// the same communicator — matched by the order each rank first uses its
/// communicators, since `comm` ids are local handles — and `ranks` equal to
/// the world size), which is then evaluated for
/// all of them. Returns each rank's outputs. This is the oracle for SPMD
/// graphs, as [`interpret`] is for single-process ones.
pub fn interpret_world(
    graphs: &[Graph],
    inputs: &[BTreeMap<String, HostTensor>],
) -> Result<Vec<Vec<HostTensor>>, InterpError> {
    let n = graphs.len();
    if inputs.len() != n {
        return Err(InterpError::WorldMismatch(format!(
            "{n} graph(s) but {} input set(s)",
            inputs.len()
        )));
    }
    let orders: Vec<Vec<NodeId>> = graphs.iter().map(|g| g.topo_order()).collect();
    // A `comm` id is a handle local to its rank's process; ranks match
    // communicators by the order in which each rank first uses them.
    let ordinals: Vec<HashMap<u32, usize>> = graphs
        .iter()
        .zip(&orders)
        .map(|(g, order)| {
            let mut m = HashMap::new();
            for id in order {
                if let Some(Op::Comm { comm, .. }) = g.node(*id).map(|x| &x.op) {
                    let next = m.len();
                    m.entry(*comm).or_insert(next);
                }
            }
            m
        })
        .collect();
    let mut pos = vec![0usize; n];
    let mut envs: Vec<HashMap<ValueId, HostTensor>> = vec![HashMap::new(); n];
    let vanished = || InterpError::Invalid("a node vanished".into());
    let args_of = |g: &Graph, env: &HashMap<ValueId, HostTensor>, id: NodeId| {
        let node = g.node(id).ok_or_else(vanished)?;
        node.operands
            .iter()
            .map(|v| {
                env.get(v).cloned().ok_or_else(|| {
                    let name = crate::text::Numbering::new(g).name(g, *v);
                    InterpError::Invalid(format!("operand {name} is undefined"))
                })
            })
            .collect::<Result<Vec<HostTensor>, _>>()
    };
    loop {
        // Run every rank up to its next collective.
        for r in 0..n {
            let (g, order) = (&graphs[r], &orders[r]);
            while let Some(&id) = order.get(pos[r]) {
                let node = g.node(id).ok_or_else(vanished)?;
                if node.op.is_comm() {
                    break;
                }
                let args = args_of(g, &envs[r], id)?;
                let refs: Vec<&HostTensor> = args.iter().collect();
                let results = eval(&node.op, &node.ty, &refs, &inputs[r])?;
                for (i, t) in results.into_iter().enumerate() {
                    envs[r].insert(
                        ValueId {
                            node: id,
                            result: i as u32,
                        },
                        t,
                    );
                }
                pos[r] += 1;
            }
        }
        let waiting: Vec<Option<NodeId>> = (0..n).map(|r| orders[r].get(pos[r]).copied()).collect();
        if waiting.iter().all(Option::is_none) {
            break;
        }
        let op_at = |r: usize| {
            waiting[r]
                .and_then(|id| graphs[r].node(id))
                .map(|node| node.op.clone())
        };
        let describe = |r: usize| match op_at(r) {
            Some(op) => format!("rank {r} waits at `{}` {:?}", op.mnemonic(), op.attrs()),
            None => format!("rank {r} has finished"),
        };
        let first = op_at(0);
        for r in 0..n {
            let same = match (&first, &op_at(r)) {
                (
                    Some(Op::Comm {
                        kind: a,
                        comm: ca,
                        ranks: na,
                        ..
                    }),
                    Some(Op::Comm {
                        kind: b,
                        comm: cb,
                        ranks: nb,
                        ..
                    }),
                ) => a == b && ordinals[0].get(ca) == ordinals[r].get(cb) && na == nb && *na == n,
                _ => false,
            };
            if !same {
                return Err(InterpError::WorldMismatch(format!(
                    "{}, but {}",
                    describe(0),
                    describe(r)
                )));
            }
        }
        let mut operands = Vec::with_capacity(n);
        for r in 0..n {
            let id = waiting[r].ok_or_else(vanished)?;
            let mut a = args_of(&graphs[r], &envs[r], id)?;
            operands.push(
                a.pop().ok_or_else(|| {
                    InterpError::Invalid("a collective without an operand".into())
                })?,
            );
        }
        if operands.iter().any(|t| t.ty != operands[0].ty) {
            return Err(InterpError::WorldMismatch(
                "the ranks' operands have different types".into(),
            ));
        }
        let refs: Vec<&HostTensor> = operands.iter().collect();
        for r in 0..n {
            let id = waiting[r].ok_or_else(vanished)?;
            let node = graphs[r].node(id).ok_or_else(vanished)?;
            let Op::Comm { kind, .. } = &node.op else {
                continue;
            };
            crate::op::infer_type(&node.op, &[&operands[r].ty])
                .map_err(|e| InterpError::Invalid(e.to_string()))?;
            envs[r].insert(
                ValueId {
                    node: id,
                    result: 0,
                },
                comm_result(kind, &node.ty, &refs, r),
            );
            pos[r] += 1;
        }
    }
    (0..n)
        .map(|r| {
            graphs[r]
                .outputs()
                .iter()
                .map(|v| {
                    envs[r]
                        .get(v)
                        .cloned()
                        .ok_or_else(|| InterpError::Invalid("a returned value is undefined".into()))
                })
                .collect()
        })
        .collect()
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
        assert_eq!(out[0].data, vec![33.0, -3.0]);
        assert_eq!(
            out[1].data,
            vec![1.0, 2.0, 3.0, -3.0, 10.0, 20.0, 30.0, 0.0]
        );
        assert_eq!(out[2].data, vec![5.0, 11.0, 16.0, -1.0]);
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
            out[0][0].data,
            vec![11.0, 2.0, 33.0, 4.0, 11.0, 2.0, 33.0, 4.0]
        );
        assert_eq!(out[0][1].data, vec![10.0, 2.0]);
        assert_eq!(out[1][1].data, vec![30.0, 4.0]);
        assert_eq!(out[0][2].data, vec![10.0, 0.0, 30.0, 0.0]);
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
