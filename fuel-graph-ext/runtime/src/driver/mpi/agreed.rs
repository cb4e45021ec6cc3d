//! How one `MpiDriver` collective runs: the ranks first agree on what
//! they are calling (every rank's signature, gathered, compared: a rank
//! that disagrees fails every rank with an error naming the first
//! difference, instead of undefined behaviour inside MPI), then the body
//! runs on the locked buffers. Also `reduce`, which the trait has no
//! method for, and the bodies of the trait's uneven collectives
//! (`all_gather_v`, `reduce_scatter_v`, `all_to_all_v`: `MPI_Allgatherv`,
//! `MPI_Reduce_scatter`, `MPI_Alltoallv`).

use super::ops::{self, Scratch};
use super::{completing, MpiCommStream, MpiCommunicator, MpiDriver};
use crate::driver::prologue::{backend_error, check_rank, check_src_dst, lock, Call, Member};
use crate::driver::host::{bytes_mut_of, bytes_of};
use crate::driver::{DeviceResource, DriverError};
use fuel_graph_ext::dtype::DType;
use fuel_graph_ext::op::ReduceOp;
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

/// The collectives, by the number a signature carries.
pub(super) const KINDS: [&str; 6] = [
    "all_reduce",
    "reduce_scatter",
    "all_gather",
    "broadcast",
    "reduce",
    "all_to_all",
];

/// What a rank calls: collective, dtype, element count, reduce op, root,
/// and a hash of per-rank counts (0 when even). Every rank must call the
/// same.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Sig([u64; 6]);

impl Sig {
    pub(super) fn new(kind: usize, dtype: DType, count: usize) -> Sig {
        let d = DType::ALL.iter().position(|x| *x == dtype).unwrap_or(0);
        Sig([kind as u64, d as u64, count as u64, 0, 0, 0])
    }
    pub(super) fn op(mut self, op: ReduceOp) -> Sig {
        self.0[3] = 1 + ReduceOp::ALL.iter().position(|x| *x == op).unwrap_or(0) as u64;
        self
    }
    pub(super) fn root(mut self, root: usize) -> Sig {
        self.0[4] = 1 + root as u64;
        self
    }
    pub(super) fn split(mut self, counts: &[usize]) -> Sig {
        let mut h = DefaultHasher::new();
        counts.hash(&mut h);
        self.0[5] = h.finish() | 1;
        self
    }
    fn kind(&self) -> &'static str {
        KINDS
            .get(self.0[0] as usize)
            .copied()
            .unwrap_or("an unknown collective")
    }
    /// The signature in words, e.g. "`all_reduce` of 4 f32 elements with Sum".
    fn describe(&self) -> String {
        let [_, d, count, op, root, split] = self.0;
        let dtype = DType::ALL
            .get(d as usize)
            .map_or("?".to_string(), |t| t.to_string());
        let mut s = format!("`{}` of {count} {dtype} elements", self.kind());
        if let Some(op) = op
            .checked_sub(1)
            .and_then(|o| ReduceOp::ALL.get(o as usize))
        {
            s += &format!(" with {op:?}");
        }
        if root > 0 {
            s += &format!(" from root {}", root - 1);
        }
        if split > 0 {
            s += &format!(" split {split:016x}");
        }
        s
    }
}

/// Every rank's signature, compared with this one's.
fn agree(c: &MpiCommunicator, sig: Sig) -> Result<(), DriverError> {
    let all = ops::gather_words(c, sig.0)?;
    match all.iter().enumerate().find(|(_, s)| **s != sig.0) {
        None => Ok(()),
        Some((peer, theirs)) => Err(DriverError::Mismatch {
            op: sig.kind(),
            rank: c.rank,
            mine: sig.describe(),
            peer,
            theirs: Sig(*theirs).describe(),
        }),
    }
}

/// Runs `f` on `src`'s first `src_len` bytes and `dst`'s first `dst_len`,
/// both locked. In place (one buffer) the source is a copy: MPI refuses
/// send and receive buffers that overlap.
fn with_bufs(
    src: &DeviceResource<MpiDriver>,
    src_len: usize,
    dst: &DeviceResource<MpiDriver>,
    dst_len: usize,
    f: impl FnOnce(&[u8], &mut [u8]) -> Result<(), DriverError>,
) -> Result<(), DriverError> {
    if Arc::ptr_eq(&src.buffer, &dst.buffer) {
        let mut held = lock(&dst.buffer);
        let copy = Scratch::copy_of(bytes_of(&held, src_len)?)?;
        f(copy.bytes(), bytes_mut_of(&mut held, dst_len)?)
    } else {
        let s = lock(&src.buffer);
        let mut d = lock(&dst.buffer);
        f(bytes_of(&s, src_len)?, bytes_mut_of(&mut d, dst_len)?)
    }
}

/// One collective: after `src`'s writes and in `dst`'s turn, the ranks
/// agree on `sig`, then `body` runs on the buffers.
#[allow(clippy::too_many_arguments)]
pub(super) fn run(
    c: &MpiCommunicator,
    stream: MpiCommStream,
    sig: Sig,
    src: &DeviceResource<MpiDriver>,
    src_len: usize,
    dst: &DeviceResource<MpiDriver>,
    dst_len: usize,
    body: impl FnOnce(&MpiCommunicator, &[u8], &mut [u8]) -> Result<(), DriverError>,
) -> Result<(), DriverError> {
    c.check(stream)?;
    completing(c, sig.kind(), Some(&src.fence), &dst.fence, || {
        agree(c, sig)?;
        with_bufs(src, src_len, dst, dst_len, |s, d| body(c, s, d))
    })
}

/// `counts` has one entry per rank.
fn per_rank(c: &MpiCommunicator, what: &'static str, counts: &[usize]) -> Result<(), DriverError> {
    if counts.len() == c.ranks {
        return Ok(());
    }
    Err(backend_error(
        "mpi",
        what,
        format!(
            "{} counts given for a group of {}; pass one count per rank",
            counts.len(),
            c.ranks
        ),
    ))
}

impl MpiDriver {
    /// How many reductions in this process took the gather-then-fold
    /// fallback (only when MPI could not make a user op for f16/bf16).
    pub fn fallback_folds() -> u64 {
        ops::FALLBACKS.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// `MPI_Reduce`: every rank's `count` elements of `src`, reduced with
    /// `op`, into `dst` on `root` (other ranks' `dst` is left alone).
    #[allow(clippy::too_many_arguments)]
    pub fn reduce(
        comm: &MpiCommunicator,
        src: &DeviceResource<Self>,
        dst: &DeviceResource<Self>,
        dtype: DType,
        count: usize,
        op: ReduceOp,
        root: usize,
        stream: MpiCommStream,
    ) -> Result<(), DriverError> {
        check_rank(root, comm.ranks)?;
        let es = dtype.size_bytes();
        let need = check_src_dst("reduce", es, (count, src.bytes), (count, dst.bytes))?;
        let sig = Sig::new(4, dtype, count).op(op).root(root);
        run(comm, stream, sig, src, need, dst, need, |c, s, d| {
            ops::reduce(c, dtype, op, root, s, d)
        })
    }

    /// `MPI_Allgatherv`: rank r contributes `counts[r]` elements of `src`;
    /// every rank's `dst` gets them all, in rank order.
    pub(super) fn all_gather_v(call: Call<'_, Self>, counts: &[usize]) -> Result<(), DriverError> {
        let Call(comm, src, dst, dtype, stream) = call;
        per_rank(comm, "all_gather_v", counts)?;
        let total: usize = counts.iter().sum();
        let es = dtype.size_bytes();
        let need = check_src_dst(
            "all_gather",
            es,
            (counts[comm.rank], src.bytes),
            (total, dst.bytes),
        )?;
        let sig = Sig::new(2, dtype, total).split(counts);
        run(comm, stream, sig, src, need, dst, total * es, |c, s, d| {
            ops::all_gather(c, dtype, counts, s, d)
        })
    }

    /// `MPI_Reduce_scatter`: `src` holds the sum of `counts` elements on
    /// every rank; rank r's `dst` gets the r-th run (`counts[r]` elements)
    /// of their reduction.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn reduce_scatter_v(
        call: Call<'_, Self>,
        counts: &[usize],
        op: ReduceOp,
    ) -> Result<(), DriverError> {
        let Call(comm, src, dst, dtype, stream) = call;
        per_rank(comm, "reduce_scatter_v", counts)?;
        let total: usize = counts.iter().sum();
        let es = dtype.size_bytes();
        let need = check_src_dst(
            "reduce_scatter",
            es,
            (total, src.bytes),
            (counts[comm.rank], dst.bytes),
        )?;
        let sig = Sig::new(1, dtype, total).op(op).split(counts);
        run(
            comm,
            stream,
            sig,
            src,
            need,
            dst,
            counts[comm.rank] * es,
            |c, s, d| ops::reduce_scatter(c, dtype, op, counts, s, d),
        )
    }

    /// `MPI_Alltoallv`: the first `send[0]` elements of `src` go to rank
    /// 0, the next `send[1]` to rank 1, …; `dst` receives `recv[j]`
    /// elements from each rank j, in rank order. Every rank checks that
    /// what each peer sends it is what it expects; a difference fails every
    /// rank, naming the first.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn all_to_all_v(
        call: Call<'_, Self>,
        send: &[usize],
        recv: &[usize],
    ) -> Result<(), DriverError> {
        let Call(comm, src, dst, dtype, stream) = call;
        per_rank(comm, "all_to_all_v", send)?;
        per_rank(comm, "all_to_all_v", recv)?;
        let (ts, tr) = (send.iter().sum::<usize>(), recv.iter().sum::<usize>());
        let es = dtype.size_bytes();
        let need = check_src_dst("all_to_all", es, (ts, src.bytes), (tr, dst.bytes))?;
        let sig = Sig::new(5, dtype, 0);
        run(comm, stream, sig, src, need, dst, tr * es, |c, s, d| {
            let theirs = ops::exchange_counts(c, send)?;
            // This rank's first disagreement, then every rank's: the first
            // rank that found one names it on every rank.
            let bad = (0..c.ranks).find(|j| theirs[*j] != recv[*j]);
            let word = bad.map_or([u64::MAX; 6], |j| {
                [j as u64, recv[j] as u64, theirs[j] as u64, 0, 0, 0]
            });
            let all = ops::gather_words(c, word)?;
            if let Some((r, w)) = all.iter().enumerate().find(|(_, w)| w[0] != u64::MAX) {
                return Err(DriverError::SplitMismatch {
                    from: w[0] as usize,
                    to: r,
                    sends: w[2] as usize,
                    expects: w[1] as usize,
                    elem: dtype,
                });
            }
            ops::all_to_all(c, dtype, send, recv, s, d)
        })
    }
}
