//! The op table: every op's text-IR syntax, declared once.
//!
//! Each [`OpDef`] row gives an op's mnemonic, whether it takes a reduce-op
//! variant (`all_reduce.sum`), whether its line quotes a name (`input "x"`),
//! how many operands it takes, its integer attributes, its placement form
//! (`@dev`, `-> dev`, `-> [dev, ...]` or none), how many results it has, and
//! how to build the [`Op`] from a parsed line. [`Op::parts`] is the way
//! back: an op's row, its variant and its attribute values. The printer,
//! the parser (and its error messages), `Op::mnemonic`, `Op::attrs`,
//! `Op::num_results` and the operand-count check of
//! [`super::infer_type`] all read this table.
//!
//! Adding an op: its variant in [`Op`], its row here (added to [`OPS`]), its
//! arm in [`Op::def`] (and in [`Op::parts`] if it has a variant or
//! attributes), and its typing rule in `typing.rs`. The test at the end
//! checks every row against its `build`, [`Op::def`] and [`Op::parts`].

use super::extern_op::{CostHint, ExternAttr, ExternOp};
use super::{CommOp, DeviceList, ElementwiseOp, Op, ReduceOp};
use crate::device::Device;
use crate::dtype::{DType, TensorType};
use smallvec::SmallVec;
use std::fmt;

/// One attribute's value: an integer (`{axis=1}`) or a dtype (`{to=bf16}`).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub enum AttrValue {
    /// A count, index or divisor.
    Int(u64),
    /// An element type.
    DType(DType),
}

impl fmt::Display for AttrValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AttrValue::Int(v) => write!(f, "{v}"),
            AttrValue::DType(d) => write!(f, "{d}"),
        }
    }
}

impl fmt::Debug for AttrValue {
    /// As written in the text IR (`3`, `bf16`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// How a node line places its op.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// `@device`: where it runs (or, for an input, lives).
    At,
    /// `-> device`: a transfer's destination.
    To,
    /// `-> [device, ...]`: a broadcast's targets.
    ToList,
    /// None: a collective's results live on its operands' devices.
    Operands,
}

/// How many operands an op takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arity {
    /// None at all.
    Zero,
    /// Exactly one.
    One,
    /// At least `n`, with `what` saying so in an error ("two or more
    /// operands").
    AtLeast(usize, &'static str),
    /// Exactly `n`, with `what` saying so in an error ("exactly two
    /// operands").
    Exactly(usize, &'static str),
}

/// How many results a node of an op has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Results {
    /// One.
    One,
    /// One per operand (printed `%N:K`).
    PerOperand,
    /// One per target device (printed `%N:K`).
    PerTarget,
}

/// What a row's `build` reads a node line's pieces through (the parser
/// implements it). Each call names what the op needs, so a missing piece
/// is reported in the order the row asks for them.
pub trait Fields {
    /// The reduce-op variant (`sum` in `all_reduce.sum`).
    fn reduce_op(&mut self) -> Result<ReduceOp, FieldError>;
    /// The integer attribute `key`.
    fn attr(&mut self, key: &'static str) -> Result<u64, FieldError>;
    /// The dtype attribute `key`.
    fn dtype_attr(&mut self, key: &'static str) -> Result<DType, FieldError>;
    /// The optional list attribute `key` (`split=[1,2,3]`).
    fn list(&mut self, key: &'static str) -> Result<Option<Vec<u64>>, FieldError>;
    /// The optional integer attribute `key` (`rank=2`).
    fn opt_attr(&mut self, key: &'static str) -> Result<Option<u64>, FieldError>;
    /// The `@device` placement.
    fn at(&mut self) -> Result<Device, FieldError>;
    /// The `-> device` placement.
    fn to(&mut self) -> Result<Device, FieldError>;
    /// The `-> [device, ...]` placement.
    fn to_list(&mut self) -> Result<DeviceList, FieldError>;
    /// The quoted name.
    fn name(&mut self) -> String;
    /// The result type the line declares (an extern op's, which no rule
    /// infers).
    fn result_type(&mut self) -> TensorType;
    /// Every attribute no earlier call took, free-form, and the `cost`
    /// hint among them (an extern op's).
    fn free_attrs(&mut self) -> Result<FreeAttrs, FieldError>;
}

/// An extern op's free-form attributes, sorted by key, and its cost hint.
pub type FreeAttrs = (Vec<(String, ExternAttr)>, Option<CostHint>);

/// A piece a row's `build` asked for and the line does not have.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FieldError {
    /// No `.variant` after the mnemonic.
    MissingVariant,
    /// A variant that is not a reduce op; the message says which are.
    BadVariant(String),
    /// No attribute `key`.
    MissingAttr(&'static str),
    /// Attribute `key` is a name where an integer belongs.
    NotInteger {
        /// The attribute.
        key: &'static str,
        /// What it is.
        found: String,
    },
    /// Attribute `key` is a number, or a name that is no dtype, where a
    /// dtype belongs; the message says which dtypes there are.
    NotDType {
        /// The attribute.
        key: &'static str,
        /// What it is.
        found: String,
    },
    /// Attribute `key` is `value`, which does not fit in `bits` bits.
    TooLarge {
        /// The attribute.
        key: &'static str,
        /// Its value.
        value: u64,
        /// The bits it must fit in.
        bits: u32,
    },
    /// No placement of the form the op takes.
    MissingPlacement(Placement),
    /// A cost hint that is negative, NaN or infinite; the message says so.
    BadCost(String),
    /// Attribute `key` written as a list where it takes an integer
    /// (`list: false`), or the other way round.
    WrongForm {
        /// The attribute.
        key: &'static str,
        /// Whether it takes a list.
        list: bool,
    },
}

/// Reads attribute `key` as a count or index.
fn usize_attr(f: &mut dyn Fields, key: &'static str) -> Result<usize, FieldError> {
    f.attr(key).map(|v| v as usize)
}

/// Reads attribute `key`, which must fit in 32 bits.
fn u32_attr(f: &mut dyn Fields, key: &'static str) -> Result<u32, FieldError> {
    let value = f.attr(key)?;
    u32::try_from(value).map_err(|_| FieldError::TooLarge {
        key,
        value,
        bits: 32,
    })
}

/// One op of the text IR.
pub struct OpDef {
    /// The mnemonic without a variant: `add`, `all_reduce`,
    /// `comm.broadcast`.
    pub mnemonic: &'static str,
    /// Whether a reduce op follows the mnemonic (`all_reduce.sum`).
    pub reduce_variant: bool,
    /// Whether a quoted name follows the mnemonic (`input "x"`).
    pub named: bool,
    /// How many operands it takes.
    pub arity: Arity,
    /// Its attributes, sorted by key: the order `{...}` prints.
    pub attrs: &'static [&'static str],
    /// Its optional integer attributes (`rank=R`), sorted by key; they
    /// print among `attrs`, in key order.
    pub opt_attrs: &'static [&'static str],
    /// Its optional list attributes (`split=[...]`), sorted by key; they
    /// print after the integer ones, so each sorts after all of those.
    pub lists: &'static [&'static str],
    /// How its line places it.
    pub placement: Placement,
    /// How many results it has.
    pub results: Results,
    /// Builds the op from a line's pieces.
    pub build: fn(&mut dyn Fields) -> Result<Op, FieldError>,
}

/// Ops spelled `prefix.name` (`comm.broadcast`), and what the parser calls
/// one of them.
pub struct Group {
    /// The part before the first `.`.
    pub prefix: &'static str,
    /// What one of them is ("SPMD collective").
    pub what: &'static str,
    /// How the list of all ops shows the group (`comm.<collective>`).
    pub placeholder: &'static str,
}

/// The groups of dotted ops.
pub static GROUPS: &[Group] = &[Group {
    prefix: "comm",
    what: "SPMD collective",
    placeholder: "comm.<collective>",
}];

/// What a collective of shards needs.
const SHARDS: Arity = Arity::AtLeast(1, "one or more shards");

/// The build function of a row.
type Build = fn(&mut dyn Fields) -> Result<Op, FieldError>;

impl OpDef {
    /// A row without a variant or a quoted name, with one result; the
    /// methods below change those.
    const fn new(
        mnemonic: &'static str,
        arity: Arity,
        attrs: &'static [&'static str],
        placement: Placement,
        build: Build,
    ) -> OpDef {
        OpDef {
            mnemonic,
            reduce_variant: false,
            named: false,
            arity,
            attrs,
            opt_attrs: &[],
            lists: &[],
            placement,
            results: Results::One,
            build,
        }
    }
    /// Takes a reduce-op variant (`.sum`).
    const fn reduce_variant(self) -> OpDef {
        OpDef {
            reduce_variant: true,
            ..self
        }
    }
    /// Quotes a name after the mnemonic.
    const fn named(self) -> OpDef {
        OpDef {
            named: true,
            ..self
        }
    }
    /// Takes the optional list attributes `lists`.
    const fn lists(self, lists: &'static [&'static str]) -> OpDef {
        OpDef { lists, ..self }
    }
    /// Takes the optional integer attributes `opt_attrs`.
    const fn opt_attrs(self, opt_attrs: &'static [&'static str]) -> OpDef {
        OpDef { opt_attrs, ..self }
    }
    /// Has `results` results.
    const fn results(self, results: Results) -> OpDef {
        OpDef { results, ..self }
    }
}

/// `input "name" @dev`: a graph input.
pub static INPUT: OpDef = OpDef::new("input", Arity::Zero, &[], Placement::At, |f| {
    let name = f.name();
    Ok(Op::Input {
        name,
        device: f.at()?,
    })
})
.named();

/// `copy %v -> dev`.
pub static COPY: OpDef = OpDef::new("copy", Arity::One, &[], Placement::To, |f| {
    Ok(Op::Copy { to: f.to()? })
});

/// `move %v -> dev`.
pub static MOVE: OpDef = OpDef::new("move", Arity::One, &[], Placement::To, |f| {
    Ok(Op::Move { to: f.to()? })
});

/// The row of `ElementwiseOp::ALL[K]`: `add %a, %b, ... @dev` and the
/// like. (An index past `ALL` fails to compile.)
const fn elementwise<const K: usize>() -> OpDef {
    let two = Arity::AtLeast(2, "two or more operands");
    OpDef::new(
        ElementwiseOp::ALL[K].as_str(),
        two,
        &[],
        Placement::At,
        elementwise_op::<K>,
    )
}

/// Builds the element-wise op `ElementwiseOp::ALL[K]`.
fn elementwise_op<const K: usize>(f: &mut dyn Fields) -> Result<Op, FieldError> {
    Ok(Op::Elementwise {
        kind: ElementwiseOp::ALL[K],
        device: f.at()?,
    })
}

/// `add %a, %b, ... @dev`.
pub static ADD: OpDef = elementwise::<0>();
/// `mul %a, %b, ... @dev`.
pub static MUL: OpDef = elementwise::<1>();
/// `max %a, %b, ... @dev`.
pub static MAX: OpDef = elementwise::<2>();
/// `min %a, %b, ... @dev`.
pub static MIN: OpDef = elementwise::<3>();
/// `eq %a, %b @dev`: a comparison, so exactly two operands.
pub static EQ: OpDef = OpDef::new(
    ElementwiseOp::ALL[4].as_str(),
    Arity::Exactly(2, "exactly two operands"),
    &[],
    Placement::At,
    elementwise_op::<4>,
);

/// `div %v {by=N} @dev`.
pub static DIV: OpDef = OpDef::new("div", Arity::One, &["by"], Placement::At, |f| {
    let by = f.attr("by")?;
    Ok(Op::Div {
        by,
        device: f.at()?,
    })
});

/// `cast %v {to=D} @dev`.
pub static CAST: OpDef = OpDef::new("cast", Arity::One, &["to"], Placement::At, |f| {
    let to = f.dtype_attr("to")?;
    Ok(Op::Cast {
        to,
        device: f.at()?,
    })
});

/// `slice %v {axis=A, len=L, start=S} @dev`.
pub static SLICE: OpDef = OpDef::new(
    "slice",
    Arity::One,
    &["axis", "len", "start"],
    Placement::At,
    |f| {
        Ok(Op::Slice {
            axis: usize_attr(f, "axis")?,
            start: usize_attr(f, "start")?,
            len: usize_attr(f, "len")?,
            device: f.at()?,
        })
    },
);

/// `concat %a, ... {axis=A} @dev`.
pub static CONCAT: OpDef = OpDef::new(
    "concat",
    Arity::AtLeast(1, "one or more operands"),
    &["axis"],
    Placement::At,
    |f| {
        let axis = usize_attr(f, "axis")?;
        Ok(Op::Concat {
            axis,
            device: f.at()?,
        })
    },
);

/// `all_reduce.<op> %a, ...`.
pub static ALL_REDUCE: OpDef = OpDef::new("all_reduce", SHARDS, &[], Placement::Operands, |f| {
    Ok(Op::AllReduce { op: f.reduce_op()? })
})
.reduce_variant()
.results(Results::PerOperand);

/// `reduce.<op> %a, ... {root=R}`.
pub static REDUCE: OpDef = OpDef::new("reduce", SHARDS, &["root"], Placement::Operands, |f| {
    let op = f.reduce_op()?;
    Ok(Op::Reduce {
        op,
        root: usize_attr(f, "root")?,
    })
})
.reduce_variant();

/// `broadcast %v -> [dev, ...]`.
pub static BROADCAST: OpDef = OpDef::new("broadcast", Arity::One, &[], Placement::ToList, |f| {
    Ok(Op::Broadcast { to: f.to_list()? })
})
.results(Results::PerTarget);

/// `all_gather %a, ... {axis=A}`.
pub static ALL_GATHER: OpDef =
    OpDef::new("all_gather", SHARDS, &["axis"], Placement::Operands, |f| {
        let axis = usize_attr(f, "axis")?;
        Ok(Op::AllGather { axis })
    })
    .results(Results::PerOperand);

/// `reduce_scatter.<op> %a, ... {axis=A}` or `{axis=A, split=[E0, ...]}`.
pub static REDUCE_SCATTER: OpDef = OpDef::new(
    "reduce_scatter",
    SHARDS,
    &["axis"],
    Placement::Operands,
    |f| {
        let op = f.reduce_op()?;
        let axis = usize_attr(f, "axis")?;
        let split = f
            .list("split")?
            .map(|v| v.into_iter().map(|e| e as usize).collect());
        Ok(Op::ReduceScatter { op, axis, split })
    },
)
.reduce_variant()
.lists(&["split"])
.results(Results::PerOperand);

/// `all_to_all %a, ... {axis=A}` or `{axis=A, split=[E00, E01, ...]}`
/// (N×N extents, rank i's piece for rank j at `i*N + j`).
pub static ALL_TO_ALL: OpDef =
    OpDef::new("all_to_all", SHARDS, &["axis"], Placement::Operands, |f| {
        let axis = usize_attr(f, "axis")?;
        let split = f
            .list("split")?
            .map(|v| v.into_iter().map(|e| e as usize).collect());
        Ok(Op::AllToAll { axis, split })
    })
    .lists(&["split"])
    .results(Results::PerOperand);

/// `driver_all_reduce.<op> %a, ... {rank=R} @dev`.
pub static DRIVER_ALL_REDUCE: OpDef =
    OpDef::new("driver_all_reduce", SHARDS, &["rank"], Placement::At, |f| {
        Ok(Op::DriverAllReduce {
            op: f.reduce_op()?,
            rank: usize_attr(f, "rank")?,
            device: f.at()?,
        })
    })
    .reduce_variant();

/// An SPMD collective's row: `comm.<name> %v {..} @dev`, one operand and
/// one result; its build reads its own attributes, then [`comm_op`] the
/// rest.
const fn comm(mnemonic: &'static str, attrs: &'static [&'static str], build: Build) -> OpDef {
    OpDef::new(mnemonic, Arity::One, attrs, Placement::At, build)
}

/// `comm` and `ranks`, then the device: the part every SPMD collective
/// reads after its own attributes.
fn comm_op(f: &mut dyn Fields, kind: CommOp) -> Result<Op, FieldError> {
    comm_split_op(f, kind, None, None)
}

/// [`comm_op`] for a row that may carry `{rank=R, split=[...]}`.
fn comm_split_op(
    f: &mut dyn Fields,
    kind: CommOp,
    rank: Option<usize>,
    split: Option<Vec<usize>>,
) -> Result<Op, FieldError> {
    Ok(Op::Comm {
        kind,
        comm: u32_attr(f, "comm")?,
        ranks: usize_attr(f, "ranks")?,
        device: f.at()?,
        rank,
        split,
    })
}

/// `comm.all_reduce.<op> %v {comm=C, ranks=R} @dev`.
pub static COMM_ALL_REDUCE: OpDef = comm("comm.all_reduce", &["comm", "ranks"], |f| {
    let kind = CommOp::AllReduce(f.reduce_op()?);
    comm_op(f, kind)
})
.reduce_variant();
/// `comm.broadcast %v {comm=C, ranks=R, root=T} @dev`.
pub static COMM_BROADCAST: OpDef = comm("comm.broadcast", &["comm", "ranks", "root"], |f| {
    let root = usize_attr(f, "root")?;
    comm_op(f, CommOp::Broadcast { root })
});
/// Reads the optional `{rank=R, split=[...]}` of an SPMD collective.
fn rank_and_split(f: &mut dyn Fields) -> Result<(Option<usize>, Option<Vec<usize>>), FieldError> {
    let rank = f.opt_attr("rank")?.map(|r| r as usize);
    let split = f
        .list("split")?
        .map(|v| v.into_iter().map(|e| e as usize).collect());
    Ok((rank, split))
}

/// `comm.all_gather %v {axis=A, comm=C, ranks=N} @dev`, or with operands
/// of different extents `{axis=A, comm=C, rank=R, ranks=N, split=[E0,
/// ...]}` (every rank's extent along A; R is the rank whose graph holds
/// the node).
pub static COMM_ALL_GATHER: OpDef = comm("comm.all_gather", &["axis", "comm", "ranks"], |f| {
    let axis = usize_attr(f, "axis")?;
    let (rank, split) = rank_and_split(f)?;
    comm_split_op(f, CommOp::AllGather { axis }, rank, split)
})
.opt_attrs(&["rank"])
.lists(&["split"]);
/// `comm.reduce_scatter.<op> %v {axis=A, comm=C, ranks=N} @dev`, or with
/// slices of different extents `{axis=A, comm=C, rank=R, ranks=N,
/// split=[E0, ...]}` (every rank's slice along A).
pub static COMM_REDUCE_SCATTER: OpDef =
    comm("comm.reduce_scatter", &["axis", "comm", "ranks"], |f| {
        let op = f.reduce_op()?;
        let axis = usize_attr(f, "axis")?;
        let (rank, split) = rank_and_split(f)?;
        comm_split_op(f, CommOp::ReduceScatter { op, axis }, rank, split)
    })
    .reduce_variant()
    .opt_attrs(&["rank"])
    .lists(&["split"]);
/// `comm.all_to_all %v {axis=A, comm=C, ranks=N} @dev`, or uneven
/// `{axis=A, comm=C, rank=R, ranks=N, split=[E00, E01, ...]}` (N×N
/// extents, rank i's piece for rank j at `i*N + j`; R is the rank whose
/// graph holds the node).
pub static COMM_ALL_TO_ALL: OpDef = comm("comm.all_to_all", &["axis", "comm", "ranks"], |f| {
    let axis = usize_attr(f, "axis")?;
    let (rank, split) = rank_and_split(f)?;
    comm_split_op(f, CommOp::AllToAll { axis }, rank, split)
})
.opt_attrs(&["rank"])
.lists(&["split"]);
/// `comm.barrier %v {comm=C, ranks=R} @dev`.
pub static COMM_BARRIER: OpDef = comm("comm.barrier", &["comm", "ranks"], |f| {
    comm_op(f, CommOp::Barrier)
});

/// `extern "name" %a, ... {k=v, ..., cost=S} @dev`: the host framework's
/// kernel `name` (`op/extern_op.rs`).
pub static EXTERN: OpDef = OpDef::new(
    "extern",
    Arity::AtLeast(0, "any operands"),
    &[],
    Placement::At,
    |f| {
        let name = f.name();
        let (attrs, cost) = f.free_attrs()?;
        let ty = f.result_type();
        Ok(Op::Extern(Box::new(ExternOp {
            name,
            device: f.at()?,
            ty,
            attrs,
            cost,
        })))
    },
)
.named();

/// Every op, in the order the parser's "expected ..." message lists them.
pub static OPS: &[&OpDef] = &[
    &INPUT,
    &COPY,
    &MOVE,
    &ADD,
    &MUL,
    &MAX,
    &MIN,
    &EQ,
    &DIV,
    &CAST,
    &SLICE,
    &CONCAT,
    &ALL_REDUCE,
    &REDUCE,
    &BROADCAST,
    &ALL_GATHER,
    &REDUCE_SCATTER,
    &ALL_TO_ALL,
    &DRIVER_ALL_REDUCE,
    &COMM_ALL_REDUCE,
    &COMM_BROADCAST,
    &COMM_ALL_GATHER,
    &COMM_REDUCE_SCATTER,
    &COMM_BARRIER,
    &COMM_ALL_TO_ALL,
    &EXTERN,
];

/// The row and variant a mnemonic as written names (`all_reduce.sum` gives
/// `all_reduce` and `Some("sum")`), if any. A row with a reduce variant
/// matches with or without one (a missing one is the row's error to
/// report); a row without matches only the bare mnemonic.
pub fn lookup(mnemonic: &str) -> Option<(&'static OpDef, Option<&str>)> {
    let m = mnemonic.as_bytes();
    OPS.iter().find_map(|def| {
        // Compared inline: mnemonics are a few bytes, too short to pay for
        // a call to `memcmp` per row.
        let d = def.mnemonic.as_bytes();
        let head = m.get(..d.len())?;
        if !head.iter().zip(d).all(|(a, b)| a == b) {
            return None;
        }
        match m.get(d.len()) {
            None => Some((*def, None)),
            Some(b'.') if def.reduce_variant => Some((*def, mnemonic.get(d.len() + 1..))),
            _ => None,
        }
    })
}

/// The attribute values of an op, in its row's key order.
pub type AttrValues = SmallVec<[AttrValue; 3]>;

/// An op taken apart as its row describes it.
pub struct Parts {
    /// Its row.
    pub def: &'static OpDef,
    /// Its reduce-op variant, for a row that has one.
    pub variant: Option<ReduceOp>,
    /// Its attribute values, in the row's key order.
    pub attrs: AttrValues,
    /// Its optional integer attributes that are set, in the row's key
    /// order.
    pub opt_attrs: Vec<(&'static str, u64)>,
    /// Its list attributes that are set, in the row's key order.
    pub lists: Vec<(&'static str, Vec<u64>)>,
}

impl Parts {
    /// Every integer or dtype attribute that is set, required and optional
    /// together, sorted by key: the order `{...}` prints them.
    pub fn ints(&self) -> Vec<(&'static str, AttrValue)> {
        let mut all: Vec<(&'static str, AttrValue)> = self
            .def
            .attrs
            .iter()
            .copied()
            .zip(self.attrs.iter().copied())
            .chain(self.opt_attrs.iter().map(|(k, v)| (*k, AttrValue::Int(*v))))
            .collect();
        all.sort_by_key(|(k, _)| *k);
        all
    }

    /// Whether the op prints a `{...}` block.
    pub fn has_attrs(&self) -> bool {
        !self.attrs.is_empty() || !self.opt_attrs.is_empty() || !self.lists.is_empty()
    }
}

impl Op {
    /// This op's row of the table.
    pub fn def(&self) -> &'static OpDef {
        match self {
            Op::Input { .. } => &INPUT,
            Op::Copy { .. } => &COPY,
            Op::Move { .. } => &MOVE,
            Op::Elementwise { kind, .. } => match kind {
                ElementwiseOp::Add => &ADD,
                ElementwiseOp::Mul => &MUL,
                ElementwiseOp::Max => &MAX,
                ElementwiseOp::Min => &MIN,
                ElementwiseOp::Eq => &EQ,
            },
            Op::Div { .. } => &DIV,
            Op::Cast { .. } => &CAST,
            Op::Slice { .. } => &SLICE,
            Op::Concat { .. } => &CONCAT,
            Op::AllReduce { .. } => &ALL_REDUCE,
            Op::Reduce { .. } => &REDUCE,
            Op::Broadcast { .. } => &BROADCAST,
            Op::AllGather { .. } => &ALL_GATHER,
            Op::ReduceScatter { .. } => &REDUCE_SCATTER,
            Op::AllToAll { .. } => &ALL_TO_ALL,
            Op::DriverAllReduce { .. } => &DRIVER_ALL_REDUCE,
            Op::Extern(_) => &EXTERN,
            Op::Comm { kind, .. } => match kind {
                CommOp::AllReduce(_) => &COMM_ALL_REDUCE,
                CommOp::Broadcast { .. } => &COMM_BROADCAST,
                CommOp::AllGather { .. } => &COMM_ALL_GATHER,
                CommOp::ReduceScatter { .. } => &COMM_REDUCE_SCATTER,
                CommOp::Barrier => &COMM_BARRIER,
                CommOp::AllToAll { .. } => &COMM_ALL_TO_ALL,
            },
        }
    }

    /// This op's row, variant and attribute values. (The ops without
    /// either fall to the last arm; the test below checks every row.)
    pub fn parts(&self) -> Parts {
        let n = |x: usize| AttrValue::Int(x as u64);
        let (variant, attrs): (Option<ReduceOp>, &[AttrValue]) = match self {
            Op::Div { by, .. } => (None, &[AttrValue::Int(*by)]),
            Op::Cast { to, .. } => (None, &[AttrValue::DType(*to)]),
            Op::Slice {
                axis, start, len, ..
            } => (None, &[n(*axis), n(*len), n(*start)]),
            Op::Concat { axis, .. } | Op::AllGather { axis } | Op::AllToAll { axis, .. } => {
                (None, &[n(*axis)])
            }
            Op::AllReduce { op } => (Some(*op), &[]),
            Op::Reduce { op, root } => (Some(*op), &[n(*root)]),
            Op::ReduceScatter { op, axis, .. } => (Some(*op), &[n(*axis)]),
            Op::DriverAllReduce { op, rank, .. } => (Some(*op), &[n(*rank)]),
            Op::Comm {
                kind, comm, ranks, ..
            } => {
                let (c, r) = (AttrValue::Int(u64::from(*comm)), n(*ranks));
                match kind {
                    CommOp::AllReduce(op) => (Some(*op), &[c, r]),
                    CommOp::Broadcast { root } => (None, &[c, r, n(*root)]),
                    CommOp::AllGather { axis } | CommOp::AllToAll { axis } => {
                        (None, &[n(*axis), c, r])
                    }
                    CommOp::ReduceScatter { op, axis } => (Some(*op), &[n(*axis), c, r]),
                    CommOp::Barrier => (None, &[c, r]),
                }
            }
            Op::Input { .. }
            | Op::Copy { .. }
            | Op::Move { .. }
            | Op::Elementwise { .. }
            | Op::Extern(_)
            | Op::Broadcast { .. } => (None, &[]),
        };
        let lists = match self {
            Op::ReduceScatter {
                split: Some(split), ..
            }
            | Op::AllToAll {
                split: Some(split), ..
            }
            | Op::Comm {
                split: Some(split), ..
            } => vec![("split", split.iter().map(|e| *e as u64).collect())],
            _ => Vec::new(),
        };
        let opt_attrs = match self {
            Op::Comm {
                rank: Some(rank), ..
            } => vec![("rank", *rank as u64)],
            _ => Vec::new(),
        };
        Parts {
            def: self.def(),
            variant,
            attrs: SmallVec::from_slice(attrs),
            opt_attrs,
            lists,
        }
    }
}

#[cfg(test)]
mod tests;
