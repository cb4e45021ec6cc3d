//! The typing rules: which operands an op accepts and what type it
//! produces.
//!
//! [`infer_type`] is the only typing rule. The verifier, the parser's
//! callers, the lazy builders, the interpreter, `DeviceGroup` and the SPMD
//! communicators all call it (or [`comm_type`], its rule for one rank's SPMD
//! collective), so they cannot disagree. Its error is a [`TypeError`]:
//! callers that word a refusal their own way (a `DeviceGroup` speaks of
//! ranks and devices) match on it instead of checking again.

mod per_rank;

pub use per_rank::{comm_split_type, comm_type};

use super::defs::Arity;
use super::{CommOp, Op, ReduceOp};
use crate::dtype::{DType, TensorType, MAX_TENSOR_BYTES};

/// Why operands do not fit an op. Each message names the problem and, where
/// there is one, the fix.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TypeError {
    /// Fewer operands than the op needs (or, for an op of an exact count
    /// such as `eq`, another count).
    #[error("`{op}` needs {what}, found {found} operand(s)")]
    TooFewOperands {
        /// The op's mnemonic.
        op: String,
        /// What it needs ("two or more operands").
        what: &'static str,
        /// How many it got.
        found: usize,
    },
    /// An op of one operand got another count.
    #[error("`{op}` takes exactly one operand, found {found}")]
    NotOneOperand {
        /// The op's mnemonic.
        op: String,
        /// How many it got.
        found: usize,
    },
    /// An op without operands got some.
    #[error("`{op}` takes no operands")]
    SomeOperands {
        /// The op's mnemonic.
        op: String,
    },
    /// An input's type is written on its line.
    #[error("an input's type is declared, not inferred")]
    InputType,
    /// `div {by=0}`.
    #[error("`div {{by=0}}` divides by zero; use {{by}} of 1 or more")]
    DivByZero,
    /// Operands that must have one type do not.
    #[error("operand {index} of `{op}` has type {found} but operand 0 has {first}; all operands must have one type")]
    Mismatch {
        /// The op's mnemonic.
        op: String,
        /// The first operand that differs.
        index: usize,
        /// Its type.
        found: Box<TensorType>,
        /// Operand 0's type.
        first: Box<TensorType>,
    },
    /// An axis past the operand's rank.
    #[error("axis {axis} is out of range for {ty} (rank {rank})")]
    AxisOutOfRange {
        /// The axis.
        axis: usize,
        /// The operand's type.
        ty: TensorType,
        /// Its rank.
        rank: usize,
    },
    /// A slice that runs past its axis.
    #[error("slice {{start={start}, len={len}}} does not fit axis {axis} of extent {extent}")]
    SliceOutOfRange {
        /// First entry.
        start: usize,
        /// Entries.
        len: usize,
        /// The axis.
        axis: usize,
        /// The axis's extent.
        extent: usize,
    },
    /// A `concat` or `all_gather` operand that differs outside the joined
    /// axis (along it, operands may differ).
    #[error("operand {index} of `{op}` has type {found}, which does not match {first} outside axis {axis}; operands may differ only along axis {axis} (pad or reshape the others first)")]
    ConcatMismatch {
        /// The op's mnemonic.
        op: String,
        /// The operand.
        index: usize,
        /// Its type.
        found: Box<TensorType>,
        /// Operand 0's type.
        first: Box<TensorType>,
        /// The joined axis.
        axis: usize,
    },
    /// An SPMD collective over no ranks.
    #[error("an SPMD collective needs {{ranks}} >= 1")]
    NoRanks,
    /// An SPMD broadcast's root past the world.
    #[error("root {root} is out of range for {ranks} rank(s); use a root from 0 to {}", ranks - 1)]
    RootOutOfRanks {
        /// The root.
        root: usize,
        /// The world size (1 or more).
        ranks: usize,
    },
    /// A `reduce`'s root past its shards.
    #[error("root {root} is out of range for {shards} shard(s); use a root from 0 to {}", shards.saturating_sub(1))]
    RootOutOfRange {
        /// The root.
        root: usize,
        /// The shards.
        shards: usize,
    },
    /// A `driver_all_reduce`'s rank past its shards.
    #[error("rank {rank} is out of range for {shards} shard(s); use a rank from 0 to {}", shards - 1)]
    RankOutOfRange {
        /// The rank.
        rank: usize,
        /// The shards (1 or more).
        shards: usize,
    },
    /// A `reduce_scatter` axis the ranks cannot split evenly.
    #[error("reduce_scatter axis {axis} has extent {extent}, which {ranks} ranks cannot split evenly; pad it to a multiple of {ranks}")]
    NotDivisible {
        /// The axis.
        axis: usize,
        /// Its extent.
        extent: usize,
        /// The ranks.
        ranks: usize,
    },
    /// A `reduce_scatter` split with another count than the ranks.
    #[error(
        "reduce_scatter split has {found} extent(s) for {ranks} rank(s); give one extent per rank"
    )]
    SplitCount {
        /// The extents given.
        found: usize,
        /// The ranks.
        ranks: usize,
    },
    /// A `reduce_scatter` split that does not add up to the axis extent.
    #[error("reduce_scatter split adds up to {sum} but axis {axis} has extent {extent}; make the extents add up to {extent}")]
    SplitSum {
        /// What the split adds up to (saturated at `usize::MAX`).
        sum: usize,
        /// The axis.
        axis: usize,
        /// Its extent.
        extent: usize,
    },
    /// An `all_to_all` split without N×N extents.
    #[error("all_to_all split has {found} extent(s) for {ranks} rank(s); give {want}, rank i's piece for rank j at i*{ranks}+j")]
    AllToAllSplitCount {
        /// The extents given.
        found: usize,
        /// The ranks.
        ranks: usize,
        /// ranks × ranks.
        want: usize,
    },
    /// An `all_to_all` split row that does not add up to its operand's
    /// extent.
    #[error("all_to_all split row {rank} adds up to {sum} but operand {rank} has extent {extent} along axis {axis}; make row {rank} add up to {extent}")]
    AllToAllSplitSum {
        /// The rank (row) at fault.
        rank: usize,
        /// What the row adds up to (saturated at `usize::MAX`).
        sum: usize,
        /// The operand's extent.
        extent: usize,
        /// The axis.
        axis: usize,
    },
    /// An SPMD collective with a split but no rank, or a rank but no split.
    #[error("{}", if *has_split {
        format!("`{op}` with a split needs `{{rank=R}}`, the rank whose graph holds it (it picks the row this rank sends and the column it receives); add it")
    } else {
        format!("`{op}` has `{{rank=R}}` but no split; `rank` only goes with `split=[...]`, so remove it or add the split")
    })]
    CommSplitRank {
        /// The op's mnemonic.
        op: String,
        /// True: a split without a rank; false: a rank without a split.
        has_split: bool,
    },
    /// An SPMD collective's `rank` past its world.
    #[error("`{op}` has {{rank={rank}}} but the world has {ranks} rank(s); use the rank of the graph that holds it, from 0 to {}", ranks - 1)]
    CommRankOutOfRange {
        /// The op's mnemonic.
        op: String,
        /// The rank given.
        rank: usize,
        /// The world size (1 or more).
        ranks: usize,
    },
    /// A split on an SPMD collective that takes none.
    #[error("`{op}` takes no split; only `comm.all_to_all`, `comm.all_gather` and `comm.reduce_scatter` do")]
    CommSplitUnsupported {
        /// The op's mnemonic.
        op: String,
    },
    /// An SPMD `all_gather` split that does not fit: not one extent per
    /// rank, or this rank's entry is not its operand's extent.
    #[error("{}", match found {
        Some(found) => format!("comm.all_gather split has {found} extent(s) for {ranks} rank(s); give one extent per rank, rank r's extent along axis {axis} at r"),
        None => format!("comm.all_gather split gives rank {rank} extent {want} along axis {axis}, but this rank's operand has extent {extent}; give every rank's own extent, the same list on every rank"),
    })]
    CommGatherSplit {
        /// How many extents were given, where that is the fault.
        found: Option<usize>,
        /// The world size.
        ranks: usize,
        /// This rank.
        rank: usize,
        /// Its entry of the split.
        want: usize,
        /// Its operand's extent.
        extent: usize,
        /// The axis.
        axis: usize,
    },
    /// Row `rank` of an SPMD `all_to_all` split (what this rank sends) does
    /// not add up to this rank's operand extent.
    #[error("comm.all_to_all split row {rank} (what rank {rank} sends) adds up to {sum} but this rank's operand has extent {extent} along axis {axis}; make row {rank} add up to {extent}")]
    CommSplitRow {
        /// The rank (row) at fault.
        rank: usize,
        /// What the row adds up to (saturated at `usize::MAX`).
        sum: usize,
        /// The operand's extent.
        extent: usize,
        /// The axis.
        axis: usize,
    },
    /// A broadcast to no device.
    #[error("`broadcast` needs at least one target device")]
    NoTargets,
    /// A `concat` or `all_gather` whose result would not fit
    /// ([`TensorType::fits`]).
    #[error("`{op}` along axis {axis} gives a result of more than {max} bytes (2^63 - 1), the most one tensor can address; use smaller operands", max = MAX_TENSOR_BYTES)]
    TooLarge {
        /// The op's mnemonic.
        op: String,
        /// The joined axis.
        axis: usize,
    },
    /// A `Mean` whose shards fit but whose accumulator
    /// ([`DType::mean_accumulator`]) of the same shape would not.
    #[error("`{op}` of {ty} sums in {acc}, and {acc} of that shape takes more than {max} bytes (2^63 - 1), the most one tensor can address; use a smaller shape", max = MAX_TENSOR_BYTES)]
    MeanTooLarge {
        /// The op's mnemonic.
        op: String,
        /// The operands' type.
        ty: Box<TensorType>,
        /// The accumulator dtype.
        acc: DType,
    },
    /// A `cast` between dtypes it does not convert.
    #[error("`cast` from {from} to {to} is not defined: it converts between float dtypes or between integer dtypes (bool included); {hint}")]
    CastUndefined {
        /// The operand's dtype.
        from: DType,
        /// The dtype asked for.
        to: DType,
        /// What to do instead.
        hint: &'static str,
    },
}

/// Whether `cast` converts `from` to `to`: between two different float
/// dtypes (rounding to nearest, ties to even), or between two different
/// integer dtypes, bool included (wrapping: the value modulo 2^bits of the
/// target, two's complement; bool is 0 or 1, and "not zero" the other
/// way). A float never becomes an integer or the other way.
pub fn cast_defined(from: DType, to: DType) -> Result<(), TypeError> {
    let hint = if from == to {
        "the operand already has that dtype, so remove the cast"
    } else {
        "convert within one kind"
    };
    if from != to && from.is_float() == to.is_float() {
        Ok(())
    } else {
        Err(TypeError::CastUndefined { from, to, hint })
    }
}

/// Checks operand types against `op` and returns the result type (shared by
/// every result of a multi-result node).
pub fn infer_type(op: &Op, operands: &[&TensorType]) -> Result<TensorType, TypeError> {
    let out = infer_unchecked(op, operands)?;
    mean_fits(op, operands)?;
    Ok(out)
}

/// A `Mean` sums in its accumulator (`lower-collectives`, the drivers and
/// the interpreter all do), so the accumulator of the operands' shape must
/// fit too: an `i8[2^61]` fits, its `i64` sum does not.
fn mean_fits(op: &Op, operands: &[&TensorType]) -> Result<(), TypeError> {
    let mean = match op {
        Op::AllReduce { op: r }
        | Op::Reduce { op: r, .. }
        | Op::ReduceScatter { op: r, .. }
        | Op::DriverAllReduce { op: r, .. }
        | Op::Comm {
            kind: CommOp::AllReduce(r) | CommOp::ReduceScatter { op: r, .. },
            ..
        } => *r == ReduceOp::Mean,
        _ => false,
    };
    let Some(t) = operands.first().filter(|_| mean) else {
        return Ok(());
    };
    let acc = t.dtype.mean_accumulator();
    if TensorType::new(acc, &t.shape).fits() {
        return Ok(());
    }
    Err(TypeError::MeanTooLarge {
        op: op.mnemonic(),
        ty: Box::new((*t).clone()),
        acc,
    })
}

fn infer_unchecked(op: &Op, operands: &[&TensorType]) -> Result<TensorType, TypeError> {
    let n = operands.len();
    check_arity(op, n)?;
    // Past the arity check, operand 0 exists for every op but an input.
    let all_equal = || -> Result<TensorType, TypeError> {
        let first = operands[0];
        for (i, t) in operands.iter().enumerate().skip(1) {
            if *t != first {
                return Err(TypeError::Mismatch {
                    op: op.mnemonic(),
                    index: i,
                    found: Box::new((*t).clone()),
                    first: Box::new(first.clone()),
                });
            }
        }
        Ok(first.clone())
    };
    match op {
        Op::Input { .. } => Err(TypeError::InputType),
        Op::Extern(x) => Ok(x.ty.clone()),
        Op::Div { by: 0, .. } => Err(TypeError::DivByZero),
        Op::Copy { .. } | Op::Move { .. } | Op::Div { .. } => Ok(operands[0].clone()),
        Op::Cast { to, .. } => {
            cast_defined(operands[0].dtype, *to)?;
            Ok(TensorType {
                dtype: *to,
                shape: operands[0].shape.clone(),
            })
        }
        Op::Elementwise { .. } | Op::AllReduce { .. } => all_equal(),
        Op::Slice {
            axis, start, len, ..
        } => {
            let t = operands[0];
            check_axis(*axis, t)?;
            let extent = t.shape[*axis];
            // A zero `len` is legal (a rank's empty share of a
            // reduce_scatter), as long as `start` is inside the axis.
            if start.checked_add(*len).is_none_or(|end| end > extent) {
                return Err(TypeError::SliceOutOfRange {
                    start: *start,
                    len: *len,
                    axis: *axis,
                    extent,
                });
            }
            Ok(t.with_dim(*axis, *len))
        }
        Op::Concat { axis, .. } | Op::AllGather { axis } => joined(op, *axis, operands),
        Op::AllToAll { axis, split } => {
            joined(op, *axis, operands)?;
            let pieces = all_to_all_pieces(split.as_deref(), *axis, operands)?;
            let got = pieces.iter().fold(0usize, |acc, row| {
                acc.saturating_add(row.first().copied().unwrap_or(0))
            });
            Ok(operands[0].with_dim(*axis, got))
        }
        Op::Comm {
            kind,
            ranks,
            rank,
            split,
            ..
        } => comm_split_type(kind, *ranks, *rank, split.as_deref(), operands[0]),
        Op::DriverAllReduce { rank, .. } => {
            if *rank >= n {
                return Err(TypeError::RankOutOfRange {
                    rank: *rank,
                    shards: n,
                });
            }
            all_equal()
        }
        Op::Reduce { root, .. } => {
            if *root >= n {
                return Err(TypeError::RootOutOfRange {
                    root: *root,
                    shards: n,
                });
            }
            all_equal()
        }
        Op::Broadcast { to } => {
            if to.is_empty() {
                return Err(TypeError::NoTargets);
            }
            Ok(operands[0].clone())
        }
        Op::ReduceScatter { axis, split, .. } => {
            let t = all_equal()?;
            check_axis(*axis, &t)?;
            let extents = scatter_extents(split.as_deref(), *axis, t.shape[*axis], n)?;
            Ok(t.with_dim(*axis, extents.first().copied().unwrap_or(0)))
        }
    }
}

/// Each result's type where the results of `op` differ (an uneven
/// `reduce_scatter`), else `None`: every result has [`infer_type`]'s type,
/// which for a `reduce_scatter` is result 0's.
pub fn result_types(
    op: &Op,
    operands: &[&TensorType],
) -> Result<Option<Vec<TensorType>>, TypeError> {
    let t = infer_type(op, operands)?;
    result_types_of(op, operands, &t)
}

/// [`result_types`] where `t` is [`infer_type`]'s type, already known (the
/// verifier needs both, and inferring twice was a tenth of its work).
pub fn result_types_of(
    op: &Op,
    operands: &[&TensorType],
    t: &TensorType,
) -> Result<Option<Vec<TensorType>>, TypeError> {
    if let Op::AllToAll { axis, split } = op {
        let pieces = all_to_all_pieces(split.as_deref(), *axis, operands)?;
        let got: Vec<usize> = (0..operands.len())
            .map(|j| {
                pieces.iter().fold(0usize, |acc, row| {
                    acc.saturating_add(row.get(j).copied().unwrap_or(0))
                })
            })
            .collect();
        if got.iter().all(|e| Some(e) == got.first()) {
            return Ok(None);
        }
        return Ok(Some(got.iter().map(|e| t.with_dim(*axis, *e)).collect()));
    }
    let Op::ReduceScatter { axis, split, .. } = op else {
        return Ok(None);
    };
    let full = operands[0].shape[*axis];
    let extents = scatter_extents(split.as_deref(), *axis, full, operands.len())?;
    if extents.iter().all(|e| Some(e) == extents.first()) {
        return Ok(None);
    }
    Ok(Some(
        extents.iter().map(|e| t.with_dim(*axis, *e)).collect(),
    ))
}

/// The pieces of an `all_to_all` along `axis` (in range for every operand):
/// `pieces[i][j]` entries of operand i go to rank j. From `split` (N×N,
/// row i adding up to operand i's extent) or, by default, each operand cut
/// as [`scatter_extents`] cuts it.
pub fn all_to_all_pieces(
    split: Option<&[usize]>,
    axis: usize,
    operands: &[&TensorType],
) -> Result<Vec<Vec<usize>>, TypeError> {
    let n = operands.len();
    match split {
        Some(s) => {
            let want = n.saturating_mul(n);
            if s.len() != want {
                return Err(TypeError::AllToAllSplitCount {
                    found: s.len(),
                    ranks: n,
                    want,
                });
            }
            s.chunks(n.max(1))
                .zip(operands)
                .enumerate()
                .map(|(rank, (row, t))| {
                    let extent = t.shape[axis];
                    let sum = row
                        .iter()
                        .try_fold(0usize, |acc, e| acc.checked_add(*e))
                        .unwrap_or(usize::MAX);
                    if sum != extent {
                        return Err(TypeError::AllToAllSplitSum {
                            rank,
                            sum,
                            extent,
                            axis,
                        });
                    }
                    Ok(row.to_vec())
                })
                .collect()
        }
        None => operands
            .iter()
            .map(|t| scatter_extents(None, axis, t.shape[axis], n))
            .collect(),
    }
}

/// Each rank's extent of a `reduce_scatter` of `extent` entries along
/// `axis` over `ranks` ranks (1 or more): `split` as given, which must have
/// one extent per rank adding up to `extent`, or by default `extent /
/// ranks` each with the remainder on the last rank.
pub fn scatter_extents(
    split: Option<&[usize]>,
    axis: usize,
    extent: usize,
    ranks: usize,
) -> Result<Vec<usize>, TypeError> {
    match split {
        Some(s) => {
            if s.len() != ranks {
                return Err(TypeError::SplitCount {
                    found: s.len(),
                    ranks,
                });
            }
            let sum = s
                .iter()
                .try_fold(0usize, |acc, e| acc.checked_add(*e))
                .unwrap_or(usize::MAX);
            if sum != extent {
                return Err(TypeError::SplitSum { sum, axis, extent });
            }
            Ok(s.to_vec())
        }
        None => {
            let ranks = ranks.max(1);
            let each = extent / ranks;
            let mut v = vec![each; ranks];
            if let Some(last) = v.last_mut() {
                *last = extent - each * (ranks - 1);
            }
            Ok(v)
        }
    }
}

fn too_large(op: &Op, axis: usize) -> TypeError {
    TypeError::TooLarge {
        op: op.mnemonic(),
        axis,
    }
}

/// `out`, the result of `op` joining along `axis`, if it fits
/// ([`TensorType::fits`]): the ops that grow a tensor check their result.
fn fitting(op: &Op, axis: usize, out: TensorType) -> Result<TensorType, TypeError> {
    if out.fits() {
        Ok(out)
    } else {
        Err(too_large(op, axis))
    }
}

/// The operand count the op's row allows.
fn check_arity(op: &Op, n: usize) -> Result<(), TypeError> {
    match op.def().arity {
        Arity::Zero if n != 0 => Err(TypeError::SomeOperands { op: op.mnemonic() }),
        Arity::One if n != 1 => Err(TypeError::NotOneOperand {
            op: op.mnemonic(),
            found: n,
        }),
        Arity::AtLeast(lo, what) if n < lo => Err(TypeError::TooFewOperands {
            op: op.mnemonic(),
            what,
            found: n,
        }),
        Arity::Exactly(k, what) if n != k => Err(TypeError::TooFewOperands {
            op: op.mnemonic(),
            what,
            found: n,
        }),
        _ => Ok(()),
    }
}

/// `operands` joined along `axis`, in order (`concat`, and what every rank
/// of an `all_gather` gets): they may differ in extent along `axis` (a zero
/// extent included) and nowhere else.
fn joined(op: &Op, axis: usize, operands: &[&TensorType]) -> Result<TensorType, TypeError> {
    let first = operands[0];
    check_axis(axis, first)?;
    let mut total = 0usize;
    for (i, t) in operands.iter().enumerate() {
        let same_other_axes = t.dtype == first.dtype
            && t.rank() == first.rank()
            && (0..t.rank()).all(|a| a == axis || t.shape[a] == first.shape[a]);
        if !same_other_axes {
            return Err(TypeError::ConcatMismatch {
                op: op.mnemonic(),
                index: i,
                found: Box::new((*t).clone()),
                first: Box::new(first.clone()),
                axis,
            });
        }
        total = total
            .checked_add(t.shape[axis])
            .ok_or_else(|| too_large(op, axis))?;
    }
    fitting(op, axis, first.with_dim(axis, total))
}

fn check_axis(axis: usize, t: &TensorType) -> Result<(), TypeError> {
    if axis >= t.rank() {
        Err(TypeError::AxisOutOfRange {
            axis,
            ty: t.clone(),
            rank: t.rank(),
        })
    } else {
        Ok(())
    }
}

/// `t` cut into `ranks` equal slices along `axis` (already in range).
fn split(axis: usize, t: &TensorType, ranks: usize) -> Result<TensorType, TypeError> {
    let extent = t.shape[axis];
    if !extent.is_multiple_of(ranks) {
        return Err(TypeError::NotDivisible {
            axis,
            extent,
            ranks,
        });
    }
    Ok(t.with_dim(axis, extent / ranks))
}

#[cfg(test)]
mod tests;
