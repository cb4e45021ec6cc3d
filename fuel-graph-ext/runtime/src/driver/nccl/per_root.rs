//! NCCL's collectives with a count per rank: NCCL has no `Allgatherv` or
//! `Reduce_scatter` with counts, so the all-gather is one `ncclBroadcast`
//! per root (root r's `counts[r]` elements into their run of every rank's
//! result) and the reduce-scatter one `ncclReduce` per root (the r-th run
//! of every rank's operand reduced onto rank r), each launched together
//! inside `ncclGroupStart`/`ncclGroupEnd`. NCCL cannot compare the counts
//! the ranks pass: callers must agree on them first.

use super::super::prologue::{check_counts, Call};
use super::super::DriverError;
use super::{collective, elem_bytes, nccl_red_op, NcclDriver};
use cudarc::nccl::result;
use fuel_graph_ext::op::ReduceOp;
use std::ffi::c_void;

impl NcclDriver {
    /// [`CollectiveDriver::all_gather_uneven`](super::super::CollectiveDriver::all_gather_uneven)
    /// as grouped broadcasts, one per root.
    pub(super) fn all_gather_grouped(
        call: Call<'_, Self>,
        counts: &[usize],
    ) -> Result<(), DriverError> {
        let Call(comm, _, _, dtype, _) = call;
        let total = check_counts("nccl", "all_gather_uneven", counts, comm.ranks)?;
        let es = elem_bytes(dtype);
        let what = ("all_gather_uneven", "ncclBroadcast");
        collective(call, what, (counts[comm.rank], total), |sp, dp, cs| {
            grouped(counts, es, |root, count, at| {
                // Only the root reads its send buffer; the others pass
                // their run of the result.
                let send = if root == comm.rank { sp } else { dp + at };
                // SAFETY: `src` holds `counts[rank]` and `dst` the sum of
                // `counts` elements (checked); each run lies inside them.
                unsafe {
                    result::broadcast(
                        send as *const c_void,
                        (dp + at) as *mut c_void,
                        count,
                        dtype,
                        root as i32,
                        comm.raw,
                        cs,
                    )
                }
            })
        })
    }

    /// [`CollectiveDriver::reduce_scatter_uneven`](super::super::CollectiveDriver::reduce_scatter_uneven)
    /// as grouped reduces, one per root.
    pub(super) fn reduce_scatter_grouped(
        call: Call<'_, Self>,
        counts: &[usize],
        op: ReduceOp,
    ) -> Result<(), DriverError> {
        let Call(comm, _, _, dtype, _) = call;
        let total = check_counts("nccl", "reduce_scatter_uneven", counts, comm.ranks)?;
        let es = elem_bytes(dtype);
        let what = ("reduce_scatter_uneven", "ncclReduce");
        collective(call, what, (total, counts[comm.rank]), |sp, dp, cs| {
            grouped(counts, es, |root, count, at| {
                // Only the root writes its receive buffer, this rank's
                // whole result.
                // SAFETY: `src` holds the sum of `counts` and `dst`
                // `counts[rank]` elements (checked); each run lies inside.
                unsafe {
                    result::reduce(
                        (sp + at) as *const c_void,
                        dp as *mut c_void,
                        count,
                        dtype,
                        nccl_red_op(op),
                        root as i32,
                        comm.raw,
                        cs,
                    )
                }
            })
        })
    }
}

/// One `launch(root, count, at)` per root inside one NCCL group: `count`
/// is `counts[root]` and `at` the byte offset of root's run, runs of
/// `es`-byte elements laid end to end in rank order.
fn grouped(
    counts: &[usize],
    es: usize,
    mut launch: impl FnMut(usize, usize, u64) -> Result<result::NcclStatus, result::NcclError>,
) -> Result<result::NcclStatus, result::NcclError> {
    result::group_start()?;
    let mut at = 0u64;
    for (root, count) in counts.iter().enumerate() {
        launch(root, *count, at)?;
        at += (count * es) as u64;
    }
    result::group_end()
}
