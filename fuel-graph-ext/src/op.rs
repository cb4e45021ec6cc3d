//! Operations and their typing rules.
//!
//! [`Op`] lists every node kind the IR knows: inputs, transfers (`copy`,
//! `move`), n-ary element-wise ops, `div` by a scalar, `slice`/`concat`, and
//! the collectives. [`infer_type`] is the single place that says which
//! operands an op accepts and what type it produces; the builders, the parser
//! checks and the verifier all call it, so they cannot disagree.

use crate::device::Device;
use crate::dtype::TensorType;
use smallvec::SmallVec;
use std::fmt;
use std::str::FromStr;

/// The binary operation an n-ary element-wise node folds over its operands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ElementwiseOp {
    /// `add`
    Add,
    /// `mul`
    Mul,
    /// `max`
    Max,
    /// `min`
    Min,
}

impl ElementwiseOp {
    /// Every element-wise op.
    pub const ALL: [ElementwiseOp; 4] = [
        ElementwiseOp::Add,
        ElementwiseOp::Mul,
        ElementwiseOp::Max,
        ElementwiseOp::Min,
    ];
    /// The text-IR mnemonic.
    pub fn as_str(self) -> &'static str {
        match self {
            ElementwiseOp::Add => "add",
            ElementwiseOp::Mul => "mul",
            ElementwiseOp::Max => "max",
            ElementwiseOp::Min => "min",
        }
    }
    /// Combines two exact values (the caller rounds to the dtype).
    pub fn apply(self, a: f64, b: f64) -> f64 {
        match self {
            ElementwiseOp::Add => a + b,
            ElementwiseOp::Mul => a * b,
            ElementwiseOp::Max => a.max(b),
            ElementwiseOp::Min => a.min(b),
        }
    }
}

/// How a reducing collective combines its shards.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ReduceOp {
    /// Sum of the shards.
    Sum,
    /// Product of the shards.
    Product,
    /// Element-wise maximum.
    Max,
    /// Element-wise minimum.
    Min,
    /// Sum divided by the number of shards.
    Mean,
}

impl ReduceOp {
    /// Every reduce op.
    pub const ALL: [ReduceOp; 5] = [
        ReduceOp::Sum,
        ReduceOp::Product,
        ReduceOp::Max,
        ReduceOp::Min,
        ReduceOp::Mean,
    ];
    /// The variant spelling in the text IR (`all_reduce.sum`).
    pub fn as_str(self) -> &'static str {
        match self {
            ReduceOp::Sum => "sum",
            ReduceOp::Product => "prod",
            ReduceOp::Max => "max",
            ReduceOp::Min => "min",
            ReduceOp::Mean => "mean",
        }
    }
    /// The element-wise op that combines shards (Mean sums, then divides).
    pub fn combiner(self) -> ElementwiseOp {
        match self {
            ReduceOp::Sum | ReduceOp::Mean => ElementwiseOp::Add,
            ReduceOp::Product => ElementwiseOp::Mul,
            ReduceOp::Max => ElementwiseOp::Max,
            ReduceOp::Min => ElementwiseOp::Min,
        }
    }
}

impl fmt::Display for ReduceOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ReduceOp {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ReduceOp::ALL
            .into_iter()
            .find(|r| r.as_str() == s)
            .ok_or_else(|| format!("unknown reduce op `{s}`: expected sum, prod, max, min or mean"))
    }
}

/// What an SPMD collective does for the rank whose graph holds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CommOp {
    /// The reduction of every rank's operand.
    AllReduce(ReduceOp),
    /// Rank `root`'s operand.
    Broadcast { root: usize },
    /// Every rank's operand joined along `axis`, in rank order.
    AllGather { axis: usize },
    /// This rank's equal slice (along `axis`) of the reduction.
    ReduceScatter { op: ReduceOp, axis: usize },
    /// The operand itself, once every rank has arrived.
    Barrier,
}

impl CommOp {
    /// The mnemonic after `comm.`.
    pub fn name(&self) -> String {
        match self {
            CommOp::AllReduce(op) => format!("all_reduce.{op}"),
            CommOp::Broadcast { .. } => "broadcast".into(),
            CommOp::AllGather { .. } => "all_gather".into(),
            CommOp::ReduceScatter { op, .. } => format!("reduce_scatter.{op}"),
            CommOp::Barrier => "barrier".into(),
        }
    }
}

/// Devices listed by a broadcast, inline for small groups.
pub type DeviceList = SmallVec<[Device; 8]>;

/// A node's operation and its attributes.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// A graph input, fed by name at run time.
    Input { name: String, device: Device },
    /// Copies its operand to `to`; the source stays valid.
    Copy { to: Device },
    /// Moves its operand to `to`; the source is consumed and freed.
    Move { to: Device },
    /// Folds `kind` over two or more operands in one kernel.
    Elementwise { kind: ElementwiseOp, device: Device },
    /// Divides by a positive integer (integers truncate toward zero).
    Div { by: u64, device: Device },
    /// `len` entries of `axis` starting at `start`.
    Slice {
        axis: usize,
        start: usize,
        len: usize,
        device: Device,
    },
    /// Operands joined along `axis`, in operand order.
    Concat { axis: usize, device: Device },
    /// Every rank gets the reduction of all shards; result i on operand i's device.
    AllReduce { op: ReduceOp },
    /// The reduction of all shards, on the device of operand `root`.
    Reduce { op: ReduceOp, root: usize },
    /// Its one operand, on each listed device.
    Broadcast { to: DeviceList },
    /// Every rank gets all shards concatenated along `axis`.
    AllGather { axis: usize },
    /// Rank i gets the i-th equal slice (along `axis`) of the reduction.
    ReduceScatter { op: ReduceOp, axis: usize },
    /// Rank `rank`'s result of an all-reduce that a collective driver (the
    /// host driver for CPU devices, NCCL for CUDA) carries out over the
    /// operands, which may live on several devices of one kind. It is what
    /// `lower-collectives` emits inside an island that has a driver; one node
    /// per rank whose result is used, each on its rank's device.
    DriverAllReduce {
        op: ReduceOp,
        rank: usize,
        device: Device,
    },
    /// This rank's part of an SPMD collective over `ranks` ranks that each
    /// hold their own graph: the communicator registered as `comm` meets the
    /// other ranks through its driver when the executor reaches the node.
    /// Nodes of one communicator run in graph order, on every rank alike.
    Comm {
        kind: CommOp,
        comm: u32,
        ranks: usize,
        device: Device,
    },
}

/// Where one result of an op lives ([`Op::result_place`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResultPlace {
    /// On this device (`None`: nowhere, e.g. a broadcast result past `to`).
    Device(Option<Device>),
    /// On the device of operand `k`.
    Operand(usize),
}

impl Op {
    /// The mnemonic with its variant, as printed (`all_reduce.sum`).
    pub fn mnemonic(&self) -> String {
        let mut s = String::new();
        self.push_mnemonic(&mut s);
        s
    }

    /// Appends [`Op::mnemonic`] to `out` (the printer's allocation-free path).
    pub fn push_mnemonic(&self, out: &mut String) {
        let (base, variant) = match self {
            Op::Input { .. } => ("input", None),
            Op::Copy { .. } => ("copy", None),
            Op::Move { .. } => ("move", None),
            Op::Elementwise { kind, .. } => (kind.as_str(), None),
            Op::Div { .. } => ("div", None),
            Op::Slice { .. } => ("slice", None),
            Op::Concat { .. } => ("concat", None),
            Op::AllReduce { op } => ("all_reduce", Some(op.as_str())),
            Op::Reduce { op, .. } => ("reduce", Some(op.as_str())),
            Op::Broadcast { .. } => ("broadcast", None),
            Op::AllGather { .. } => ("all_gather", None),
            Op::ReduceScatter { op, .. } => ("reduce_scatter", Some(op.as_str())),
            Op::DriverAllReduce { op, .. } => ("driver_all_reduce", Some(op.as_str())),
            Op::Comm { kind, .. } => {
                out.push_str("comm.");
                out.push_str(&kind.name());
                return;
            }
        };
        out.push_str(base);
        if let Some(v) = variant {
            out.push('.');
            out.push_str(v);
        }
    }

    /// True for `copy` and `move`.
    pub fn is_transfer(&self) -> bool {
        matches!(self, Op::Copy { .. } | Op::Move { .. })
    }

    /// True for the collective ops, which span several devices.
    pub fn is_collective(&self) -> bool {
        matches!(
            self,
            Op::AllReduce { .. }
                | Op::Reduce { .. }
                | Op::Broadcast { .. }
                | Op::AllGather { .. }
                | Op::ReduceScatter { .. }
        )
    }

    /// True for a driver collective: placed on one device, but its operands
    /// may live on other devices of the same kind (the driver moves them).
    pub fn is_driver_collective(&self) -> bool {
        matches!(self, Op::DriverAllReduce { .. })
    }

    /// True for an SPMD collective: it meets other ranks, so it is never
    /// merged with a look-alike and never removed as dead.
    pub fn is_comm(&self) -> bool {
        matches!(self, Op::Comm { .. })
    }

    /// How many results a node with this op and `operands` operands has:
    /// one per operand for all_reduce, all_gather and reduce_scatter, one per
    /// target for broadcast, one otherwise.
    pub fn num_results(&self, operands: usize) -> usize {
        match self {
            Op::AllReduce { .. } | Op::AllGather { .. } | Op::ReduceScatter { .. } => operands,
            Op::Broadcast { to } => to.len(),
            _ => 1,
        }
    }

    /// True when the node is written `%N:K` and its results used as `%N#i`.
    pub fn is_multi_result(&self) -> bool {
        self.is_collective() && !matches!(self, Op::Reduce { .. })
    }

    /// Where result `result` lives, by the placement rules: on a device the
    /// op names, or (collectives, whose results stay on their ranks) on the
    /// device of one of its operands.
    pub fn result_place(&self, result: u32) -> ResultPlace {
        match self {
            Op::AllReduce { .. } | Op::AllGather { .. } | Op::ReduceScatter { .. } => {
                ResultPlace::Operand(result as usize)
            }
            Op::Reduce { root, .. } => ResultPlace::Operand(*root),
            Op::Broadcast { to } => ResultPlace::Device(to.get(result as usize).copied()),
            op => ResultPlace::Device(op.device()),
        }
    }

    /// The one device a non-collective op runs on or writes to.
    pub fn device(&self) -> Option<Device> {
        match self {
            Op::Input { device, .. }
            | Op::Elementwise { device, .. }
            | Op::Div { device, .. }
            | Op::Slice { device, .. }
            | Op::Concat { device, .. }
            | Op::DriverAllReduce { device, .. }
            | Op::Comm { device, .. } => Some(*device),
            Op::Copy { to } | Op::Move { to } => Some(*to),
            _ => None,
        }
    }

    /// The integer attributes, sorted by key, as printed in `{...}`.
    pub fn attrs(&self) -> Vec<(&'static str, u64)> {
        match self {
            Op::Div { by, .. } => vec![("by", *by)],
            Op::Slice {
                axis, start, len, ..
            } => {
                vec![
                    ("axis", *axis as u64),
                    ("len", *len as u64),
                    ("start", *start as u64),
                ]
            }
            Op::Concat { axis, .. } | Op::AllGather { axis } | Op::ReduceScatter { axis, .. } => {
                vec![("axis", *axis as u64)]
            }
            Op::Reduce { root, .. } => vec![("root", *root as u64)],
            Op::DriverAllReduce { rank, .. } => vec![("rank", *rank as u64)],
            Op::Comm {
                kind, comm, ranks, ..
            } => {
                let mut a = vec![("comm", u64::from(*comm)), ("ranks", *ranks as u64)];
                match kind {
                    CommOp::Broadcast { root } => a.push(("root", *root as u64)),
                    CommOp::AllGather { axis } | CommOp::ReduceScatter { axis, .. } => {
                        a.insert(0, ("axis", *axis as u64))
                    }
                    CommOp::AllReduce(_) | CommOp::Barrier => {}
                }
                a
            }
            _ => vec![],
        }
    }
}

/// Checks operand types against `op` and returns the result type (shared by
/// every result of a multi-result node). The error is a sentence naming the
/// problem.
pub fn infer_type(op: &Op, operands: &[&TensorType]) -> Result<TensorType, String> {
    let n = operands.len();
    let need = |lo: usize, what: &str| -> Result<(), String> {
        if n < lo {
            Err(format!(
                "`{}` needs {what}, found {n} operand(s)",
                op.mnemonic()
            ))
        } else {
            Ok(())
        }
    };
    let all_equal = || -> Result<TensorType, String> {
        let first = operands[0];
        for (i, t) in operands.iter().enumerate().skip(1) {
            if *t != first {
                return Err(format!(
                    "operand {i} of `{}` has type {t} but operand 0 has {first}; all operands must have one type",
                    op.mnemonic()
                ));
            }
        }
        Ok(first.clone())
    };
    let check_axis = |axis: usize, t: &TensorType| -> Result<(), String> {
        if axis >= t.rank() {
            Err(format!(
                "axis {axis} is out of range for {t} (rank {})",
                t.rank()
            ))
        } else {
            Ok(())
        }
    };
    match op {
        Op::Input { .. } => {
            if n != 0 {
                return Err("`input` takes no operands".into());
            }
            Err("an input's type is declared, not inferred".into())
        }
        Op::Copy { .. } | Op::Move { .. } | Op::Div { .. } => {
            if n != 1 {
                return Err(format!(
                    "`{}` takes exactly one operand, found {n}",
                    op.mnemonic()
                ));
            }
            if let Op::Div { by: 0, .. } = op {
                return Err("`div {by=0}` divides by zero; use {by} of 1 or more".into());
            }
            Ok(operands[0].clone())
        }
        Op::Elementwise { .. } => {
            need(2, "two or more operands")?;
            all_equal()
        }
        Op::Slice {
            axis, start, len, ..
        } => {
            if n != 1 {
                return Err(format!("`slice` takes exactly one operand, found {n}"));
            }
            let t = operands[0];
            check_axis(*axis, t)?;
            let extent = t.shape[*axis];
            if *len == 0 || start.checked_add(*len).is_none_or(|end| end > extent) {
                return Err(format!(
                    "slice {{start={start}, len={len}}} does not fit axis {axis} of extent {extent}"
                ));
            }
            Ok(t.with_dim(*axis, *len))
        }
        Op::Concat { axis, .. } => {
            need(1, "one or more operands")?;
            let first = operands[0];
            check_axis(*axis, first)?;
            let mut total = 0usize;
            for (i, t) in operands.iter().enumerate() {
                let same_other_axes = t.dtype == first.dtype
                    && t.rank() == first.rank()
                    && (0..t.rank()).all(|a| a == *axis || t.shape[a] == first.shape[a]);
                if !same_other_axes {
                    return Err(format!(
                        "operand {i} of `concat` has type {t}, which does not match {first} outside axis {axis}"
                    ));
                }
                total = total.saturating_add(t.shape[*axis]);
            }
            Ok(first.with_dim(*axis, total))
        }
        Op::AllReduce { .. } => {
            need(1, "one or more shards")?;
            all_equal()
        }
        Op::Comm { kind, ranks, .. } => {
            if n != 1 {
                return Err(format!(
                    "`{}` takes exactly one operand, found {n}",
                    op.mnemonic()
                ));
            }
            let t = operands[0];
            if *ranks == 0 {
                return Err("an SPMD collective needs {ranks} >= 1".into());
            }
            match kind {
                CommOp::AllReduce(_) | CommOp::Barrier => Ok(t.clone()),
                CommOp::Broadcast { root } => {
                    if root >= ranks {
                        return Err(format!(
                            "root {root} is out of range for {ranks} rank(s); use a root from 0 to {}",
                            ranks - 1
                        ));
                    }
                    Ok(t.clone())
                }
                CommOp::AllGather { axis } => {
                    check_axis(*axis, t)?;
                    Ok(t.with_dim(*axis, t.shape[*axis].saturating_mul(*ranks)))
                }
                CommOp::ReduceScatter { axis, .. } => {
                    check_axis(*axis, t)?;
                    let extent = t.shape[*axis];
                    if !extent.is_multiple_of(*ranks) {
                        return Err(format!(
                            "reduce_scatter axis {axis} has extent {extent}, which {ranks} ranks cannot split evenly; pad it to a multiple of {ranks}"
                        ));
                    }
                    Ok(t.with_dim(*axis, extent / ranks))
                }
            }
        }
        Op::DriverAllReduce { rank, .. } => {
            need(1, "one or more shards")?;
            if *rank >= n {
                return Err(format!(
                    "rank {rank} is out of range for {n} shard(s); use a rank from 0 to {}",
                    n - 1
                ));
            }
            all_equal()
        }
        Op::Reduce { root, .. } => {
            need(1, "one or more shards")?;
            if *root >= n {
                return Err(format!(
                    "root {root} is out of range for {n} shard(s); use a root from 0 to {}",
                    n.saturating_sub(1)
                ));
            }
            all_equal()
        }
        Op::Broadcast { to } => {
            if n != 1 {
                return Err(format!("`broadcast` takes exactly one operand, found {n}"));
            }
            if to.is_empty() {
                return Err("`broadcast` needs at least one target device".into());
            }
            Ok(operands[0].clone())
        }
        Op::AllGather { axis } => {
            need(1, "one or more shards")?;
            let t = all_equal()?;
            check_axis(*axis, &t)?;
            let extent = t.shape[*axis].saturating_mul(n);
            Ok(t.with_dim(*axis, extent))
        }
        Op::ReduceScatter { axis, .. } => {
            need(1, "one or more shards")?;
            let t = all_equal()?;
            check_axis(*axis, &t)?;
            let extent = t.shape[*axis];
            if extent % n != 0 {
                return Err(format!(
                    "reduce_scatter axis {axis} has extent {extent}, which {n} ranks cannot split evenly; pad it to a multiple of {n}"
                ));
            }
            Ok(t.with_dim(*axis, extent / n))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DType;

    #[test]
    fn collective_types() {
        let t = TensorType::new(DType::F32, &[6, 2]);
        let ops = [&t, &t, &t];
        assert_eq!(
            infer_type(&Op::AllGather { axis: 0 }, &ops)
                .unwrap()
                .to_string(),
            "f32[18,2]"
        );
        let rs = Op::ReduceScatter {
            op: ReduceOp::Sum,
            axis: 0,
        };
        assert_eq!(infer_type(&rs, &ops).unwrap().to_string(), "f32[2,2]");
        let rs1 = Op::ReduceScatter {
            op: ReduceOp::Sum,
            axis: 1,
        };
        assert!(infer_type(&rs1, &ops)
            .unwrap_err()
            .contains("cannot split evenly"));
        let r = Op::Reduce {
            op: ReduceOp::Max,
            root: 3,
        };
        assert!(infer_type(&r, &ops)
            .unwrap_err()
            .contains("root 3 is out of range"));
    }

    #[test]
    fn elementwise_needs_equal_types() {
        let a = TensorType::new(DType::F32, &[4]);
        let b = TensorType::new(DType::I32, &[4]);
        let add = Op::Elementwise {
            kind: ElementwiseOp::Add,
            device: Device::cpu(0),
        };
        assert!(infer_type(&add, &[&a]).unwrap_err().contains("two or more"));
        assert!(infer_type(&add, &[&a, &b])
            .unwrap_err()
            .contains("operand 1"));
        let s = Op::Slice {
            axis: 0,
            start: 3,
            len: 2,
            device: Device::cpu(0),
        };
        assert!(infer_type(&s, &[&a]).unwrap_err().contains("does not fit"));
    }
}
