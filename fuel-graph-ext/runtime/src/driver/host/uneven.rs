//! The host driver's collectives with a count per rank, like
//! `MPI_Allgatherv` and `MPI_Reduce_scatter`: each rank posts its operand
//! once, as a shard every peer reads where it lies (as the all-reduce
//! does), with a description that names the counts, the element type and
//! the op, so ranks that pass different counts fail instead of reading
//! past each other. A rank waits until its peers have dropped its shard
//! before the collective completes.

use super::super::prologue::{check_counts, check_src_dst, fold_ranks, lock, Call, Member};
use super::super::{Driver, DriverError};
use super::{bytes_mut_of, bytes_of, snapshot, HostDriver, Job};
use crate::backend::cpu::CpuBuf;
use crate::driver::Held;
use fuel_graph_ext::op::ReduceOp;
use std::sync::Arc;

impl HostDriver {
    /// [`CollectiveDriver::all_gather_uneven`](super::super::CollectiveDriver::all_gather_uneven)
    /// over the mailboxes.
    pub(super) fn all_gather_mail(
        call: Call<'_, Self>,
        counts: &[usize],
    ) -> Result<(), DriverError> {
        let Call(comm, src, dst, dtype, stream) = call;
        const OP: &str = "all_gather_uneven";
        comm.check(stream)?;
        let total = check_counts("host", OP, counts, comm.ranks)?;
        let es = dtype.size_bytes();
        let mine_len = counts[comm.rank];
        let need = check_src_dst(OP, es, (mine_len, src.bytes), (total, dst.bytes))?;
        let what = format!("an all_gather of {counts:?} {dtype} elements");
        let counts = counts.to_vec();
        let sizes = (need, total * es);
        Self::exchange(call, sizes, what, OP, move |_, shards, out| {
            let mut at = 0;
            for (r, s) in shards.iter().enumerate() {
                let len = counts[r] * es;
                out[at..at + len].copy_from_slice(bytes_of(s, len)?);
                at += len;
            }
            Ok(())
        })
    }

    /// [`CollectiveDriver::reduce_scatter_uneven`](super::super::CollectiveDriver::reduce_scatter_uneven)
    /// over the mailboxes: this rank folds its run of every rank's shard,
    /// in rank order.
    pub(super) fn reduce_scatter_mail(
        call: Call<'_, Self>,
        counts: &[usize],
        op: ReduceOp,
    ) -> Result<(), DriverError> {
        let Call(comm, src, dst, dtype, stream) = call;
        const OP: &str = "reduce_scatter_uneven";
        comm.check(stream)?;
        let total = check_counts("host", OP, counts, comm.ranks)?;
        let es = dtype.size_bytes();
        let need = check_src_dst(OP, es, (total, src.bytes), (counts[comm.rank], dst.bytes))?;
        let what = format!("a reduce_scatter of {counts:?} {dtype} elements with {op:?}");
        let counts = counts.to_vec();
        let sizes = (need, counts[comm.rank] * es);
        Self::exchange(call, sizes, what, OP, move |rank, shards, out| {
            let start: usize = counts[..rank].iter().sum::<usize>() * es;
            let len = counts[rank] * es;
            let runs = shards
                .iter()
                .map(|s| bytes_of(s, start + len).map(|b| &b[start..start + len]))
                .collect::<Result<Vec<_>, _>>()?;
            fold_ranks(HostDriver::NAME, dtype, op, &runs, out)
        })
    }

    /// Posts this rank's first `sizes.0` bytes of `src` to every peer as a
    /// shard described by `what`, takes every peer's (refusing one whose
    /// description differs), lets `write` fill the first `sizes.1` bytes
    /// of `dst` from the shards in rank order, and waits until the peers
    /// have dropped this rank's shard.
    fn exchange(
        call: Call<'_, Self>,
        sizes: (usize, usize),
        what: String,
        op: &'static str,
        write: impl FnOnce(usize, &[Arc<Held<CpuBuf>>], &mut [u8]) -> Result<(), DriverError>
            + Send
            + 'static,
    ) -> Result<(), DriverError> {
        let Call(comm, src, dst, dtype, _) = call;
        let (job, ticket) = Job::new(comm, src, dst);
        let (need, out_bytes) = sizes;
        comm.enqueue(Some(ticket), op, move || {
            job.wait_src(op)?;
            let (group, rank, ranks, timeout, src_buf, dst_buf) = job.into_parts();
            let mine = snapshot(&src_buf, need)?;
            let shards =
                group.swap_shards((rank, ranks), &mine, (&what, dtype, need), timeout, op)?;
            let written = {
                let mut out = lock(&dst_buf);
                let out = bytes_mut_of(&mut out, out_bytes)?;
                write(rank, &shards, out)
            };
            group.release(shards);
            written?;
            group.wait_read(&mine, rank, timeout)
        })
    }
}
