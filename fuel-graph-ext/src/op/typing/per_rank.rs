//! The typing rule of one rank's SPMD collective (`comm.*`): the even
//! forms, and the uneven ones that carry a split and the rank whose graph
//! holds the node (`all_to_all`'s N×N split, `all_gather`'s extent per
//! rank, `reduce_scatter`'s slice per rank).

use super::{check_axis, scatter_extents, split, TypeError};
use crate::dtype::TensorType;
use crate::op::{CommOp, Op};

/// The type one rank's SPMD collective `kind` over `ranks` ranks gives its
/// operand of type `t`: what `comm.*` nodes and the communicators check.
pub fn comm_type(kind: &CommOp, ranks: usize, t: &TensorType) -> Result<TensorType, TypeError> {
    comm_split_type(kind, ranks, None, None, t)
}

/// [`comm_type`] for a node that may carry a split: `comm.all_to_all`'s
/// N×N `split` with `rank`, the rank whose graph holds it (both or
/// neither). Row `rank` must add up to the operand's extent along the
/// axis; the result's extent is column `rank`'s sum.
pub fn comm_split_type(
    kind: &CommOp,
    ranks: usize,
    rank: Option<usize>,
    pieces: Option<&[usize]>,
    t: &TensorType,
) -> Result<TensorType, TypeError> {
    if ranks == 0 {
        return Err(TypeError::NoRanks);
    }
    let op = || comm_mnemonic(kind);
    if pieces.is_some() != rank.is_some() {
        return Err(TypeError::CommSplitRank {
            op: op(),
            has_split: pieces.is_some(),
        });
    }
    if let (Some(rank), Some(pieces)) = (rank, pieces) {
        if rank >= ranks {
            return Err(TypeError::CommRankOutOfRange {
                op: op(),
                rank,
                ranks,
            });
        }
        return match kind {
            CommOp::AllToAll { axis } => {
                check_axis(*axis, t)?;
                comm_all_to_all_split(*axis, ranks, rank, pieces, t)
            }
            CommOp::AllGather { axis } => {
                check_axis(*axis, t)?;
                comm_all_gather_split(*axis, ranks, rank, pieces, t)
            }
            CommOp::ReduceScatter { axis, .. } => {
                check_axis(*axis, t)?;
                let extents = scatter_extents(Some(pieces), *axis, t.shape[*axis], ranks)?;
                Ok(t.with_dim(*axis, extents[rank]))
            }
            _ => Err(TypeError::CommSplitUnsupported { op: op() }),
        };
    }
    match kind {
        CommOp::AllReduce(_) | CommOp::Barrier => Ok(t.clone()),
        CommOp::Broadcast { root } => {
            if *root >= ranks {
                return Err(TypeError::RootOutOfRanks { root: *root, ranks });
            }
            Ok(t.clone())
        }
        CommOp::AllGather { axis } => {
            check_axis(*axis, t)?;
            let extent = t.shape[*axis].checked_mul(ranks);
            with_extent(t, *axis, extent, "comm.all_gather")
        }
        CommOp::ReduceScatter { axis, .. } => {
            check_axis(*axis, t)?;
            split(*axis, t, ranks)
        }
        CommOp::AllToAll { axis } => {
            check_axis(*axis, t)?;
            split(*axis, t, ranks)?;
            Ok(t.clone())
        }
    }
}

/// The mnemonic of a `comm.*` node of `kind`, for messages.
fn comm_mnemonic(kind: &CommOp) -> String {
    Op::Comm {
        kind: *kind,
        comm: 0,
        ranks: 1,
        device: crate::device::Device::cpu(0),
        rank: None,
        split: None,
    }
    .mnemonic()
}

/// Rank `rank`'s result (in range) of an SPMD `all_gather` along `axis`
/// (in range) of operands whose extents along it are `split`.
fn comm_all_gather_split(
    axis: usize,
    ranks: usize,
    rank: usize,
    split: &[usize],
    t: &TensorType,
) -> Result<TensorType, TypeError> {
    let extent = t.shape[axis];
    let bad = |found: Option<usize>, want: usize| TypeError::CommGatherSplit {
        found,
        ranks,
        rank,
        want,
        extent,
        axis,
    };
    if split.len() != ranks {
        return Err(bad(Some(split.len()), 0));
    }
    if split[rank] != extent {
        return Err(bad(None, split[rank]));
    }
    let total = split.iter().try_fold(0usize, |acc, e| acc.checked_add(*e));
    with_extent(t, axis, total, "comm.all_gather")
}

/// `t` with `extent` along `axis`, or [`TypeError::TooLarge`] naming `op`
/// where the extent overflowed (`None`) or the result does not fit.
fn with_extent(
    t: &TensorType,
    axis: usize,
    extent: Option<usize>,
    op: &str,
) -> Result<TensorType, TypeError> {
    let too_large = || TypeError::TooLarge {
        op: op.into(),
        axis,
    };
    let out = t.with_dim(axis, extent.ok_or_else(too_large)?);
    if out.fits() {
        Ok(out)
    } else {
        Err(too_large())
    }
}

/// Rank `rank`'s result (in range) of an SPMD `all_to_all` along `axis`
/// (in range) with the N×N `split`.
fn comm_all_to_all_split(
    axis: usize,
    ranks: usize,
    rank: usize,
    split: &[usize],
    t: &TensorType,
) -> Result<TensorType, TypeError> {
    let want = ranks.saturating_mul(ranks);
    if split.len() != want {
        return Err(TypeError::AllToAllSplitCount {
            found: split.len(),
            ranks,
            want,
        });
    }
    let add = |acc: Option<usize>, e: &usize| acc?.checked_add(*e);
    let row = split[rank * ranks..(rank + 1) * ranks]
        .iter()
        .fold(Some(0), add)
        .unwrap_or(usize::MAX);
    let extent = t.shape[axis];
    if row != extent {
        return Err(TypeError::CommSplitRow {
            rank,
            sum: row,
            extent,
            axis,
        });
    }
    let col = split.iter().skip(rank).step_by(ranks).fold(Some(0), add);
    with_extent(t, axis, col, "comm.all_to_all")
}
