//! Operations, their syntax and their typing rules.
//!
//! [`Op`] lists every node kind the IR knows: inputs, transfers (`copy`,
//! `move`), n-ary element-wise ops, `div` by a scalar, `cast` to another
//! dtype, `slice`/`concat`, and the collectives. [`defs`] declares each op's text-IR syntax once (the
//! printer and the parser are driven by it), and [`infer_type`]
//! (`typing.rs`) is the single place that says which operands an op accepts
//! and what type it produces; the builders, the verifier and the
//! collectives' front ends all call it, so they cannot disagree.

pub mod defs;
pub mod extern_op;
mod typing;

pub use extern_op::{CostHint, ExternAttr, ExternOp};
pub use typing::{
    all_to_all_pieces, cast_defined, comm_split_type, comm_type, infer_type, result_types,
    result_types_of, scatter_extents, TypeError,
};

use crate::device::Device;
use crate::dtype::DType;
use defs::{AttrValue, Results};
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
    /// `eq`: 1 where its two operands are equal, else 0, in their dtype
    /// (IEEE equality: NaN equals nothing, -0 equals +0; bool compares
    /// truth values). A comparison, not a fold: it takes exactly two
    /// operands, and no reduce op combines with it.
    Eq,
}

impl ElementwiseOp {
    /// Every element-wise op.
    pub const ALL: [ElementwiseOp; 5] = [
        ElementwiseOp::Add,
        ElementwiseOp::Mul,
        ElementwiseOp::Max,
        ElementwiseOp::Min,
        ElementwiseOp::Eq,
    ];
    /// The text-IR mnemonic.
    pub const fn as_str(self) -> &'static str {
        match self {
            ElementwiseOp::Add => "add",
            ElementwiseOp::Mul => "mul",
            ElementwiseOp::Max => "max",
            ElementwiseOp::Min => "min",
            ElementwiseOp::Eq => "eq",
        }
    }
    /// Combines two exact values (the caller rounds to the dtype).
    pub fn apply(self, a: f64, b: f64) -> f64 {
        match self {
            ElementwiseOp::Add => a + b,
            ElementwiseOp::Mul => a * b,
            ElementwiseOp::Max => a.max(b),
            ElementwiseOp::Min => a.min(b),
            ElementwiseOp::Eq => f64::from(u8::from(a == b)),
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
            .ok_or_else(|| {
                format!(
                    "unknown reduce op `{}`: expected sum, prod, max, min or mean",
                    crate::text::excerpt::token(s)
                )
            })
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
    /// The operand cut along `axis` into `ranks` pieces, piece j sent to
    /// rank j; this rank's result joins what it receives in rank order.
    /// The pieces are equal (the result has the operand's type) unless the
    /// node carries a split ([`Op::Comm`]'s `split` and `rank`): then row
    /// `rank` of the N×N split cuts the operand and column `rank` says what
    /// arrives.
    AllToAll { axis: usize },
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
    /// Converts each element to dtype `to`: floats round to nearest even,
    /// integers wrap (see [`cast_defined`] for the pairs it converts).
    Cast { to: DType, device: Device },
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
    /// Rank i gets the i-th slice (along `axis`) of the reduction: `split[i]`
    /// entries, or by default `extent / N` each with the remainder on the
    /// last rank ([`scatter_extents`]). A zero extent is legal.
    ReduceScatter {
        op: ReduceOp,
        axis: usize,
        split: Option<Vec<usize>>,
    },
    /// Rank i's operand is cut along `axis` into N pieces, piece j goes to
    /// rank j, and rank j joins what it receives in rank order. `split`,
    /// where given, has N×N extents: entry `i*N + j` is what rank i sends
    /// to rank j; by default each operand is cut as a `reduce_scatter`
    /// cuts ([`scatter_extents`]). Operands may differ along `axis` only.
    AllToAll {
        axis: usize,
        split: Option<Vec<usize>>,
    },
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
    ///
    /// An uneven `comm.all_to_all` carries `split`, N×N extents like
    /// `all_to_all`'s (entry `i*N + j`: what rank i sends to rank j, the
    /// same matrix on every rank), and `rank`, the rank whose graph holds
    /// the node, which picks its row (what it sends) and column (what it
    /// gets). Both are written or neither (`{rank=R, split=[...]}`); an
    /// even split is recorded as none, so it prints as before.
    Comm {
        kind: CommOp,
        comm: u32,
        ranks: usize,
        device: Device,
        rank: Option<usize>,
        split: Option<Vec<usize>>,
    },
    /// The host framework's kernel, run as registered (`extern_op.rs`):
    /// no pass looks inside it, merges it or removes it.
    Extern(Box<ExternOp>),
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
        let parts = self.parts();
        out.push_str(parts.def.mnemonic);
        if let Some(v) = parts.variant {
            out.push('.');
            out.push_str(v.as_str());
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
                | Op::AllToAll { .. }
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

    /// True for a foreign op (`extern`): what it computes is the caller's,
    /// so it is never merged with a look-alike and never removed as dead.
    pub fn is_extern(&self) -> bool {
        matches!(self, Op::Extern(_))
    }

    /// How many results a node with this op and `operands` operands has:
    /// one per operand for all_reduce, all_gather and reduce_scatter, one per
    /// target for broadcast, one otherwise.
    pub fn num_results(&self, operands: usize) -> usize {
        match self.def().results {
            Results::One => 1,
            Results::PerOperand => operands,
            Results::PerTarget => self.targets().map_or(0, <[Device]>::len),
        }
    }

    /// True when the node is written `%N:K` and its results used as `%N#i`.
    pub fn is_multi_result(&self) -> bool {
        self.def().results != Results::One
    }

    /// A broadcast's target devices.
    pub fn targets(&self) -> Option<&[Device]> {
        match self {
            Op::Broadcast { to } => Some(to),
            _ => None,
        }
    }

    /// Where result `result` lives, by the placement rules: on a device the
    /// op names, or (collectives, whose results stay on their ranks) on the
    /// device of one of its operands.
    pub fn result_place(&self, result: u32) -> ResultPlace {
        match self {
            Op::AllReduce { .. }
            | Op::AllGather { .. }
            | Op::ReduceScatter { .. }
            | Op::AllToAll { .. } => ResultPlace::Operand(result as usize),
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
            | Op::Cast { device, .. }
            | Op::Slice { device, .. }
            | Op::Concat { device, .. }
            | Op::DriverAllReduce { device, .. }
            | Op::Comm { device, .. } => Some(*device),
            Op::Copy { to } | Op::Move { to } => Some(*to),
            Op::Extern(x) => Some(x.device),
            _ => None,
        }
    }

    /// The attributes, sorted by key, as printed in `{...}`.
    pub fn attrs(&self) -> Vec<(&'static str, AttrValue)> {
        self.parts().ints()
    }
}
