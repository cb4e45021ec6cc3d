//! The bodies of `MpiDriver`'s collectives over host bytes: the MPI call
//! each dtype and op takes (`route` says which and why), the widening of a
//! `Mean`, and the gather-then-fold fallback. Each call blocks until MPI
//! is done; its return code becomes a `DriverError` (the communicator runs
//! under `MPI_ERRORS_RETURN`).

use super::raw::{self, check, count};
use super::route::{self, Route};
use super::MpiCommunicator;
use crate::backend::cpu;
use crate::driver::prologue::{backend_error, fold_ranks};
use crate::driver::DriverError;
use fuel_graph_ext::dtype::DType;
use fuel_graph_ext::op::ReduceOp;
use mpi::ffi;
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicU64, Ordering};

/// How many reductions took the gather-then-fold fallback in this process.
pub(super) static FALLBACKS: AtomicU64 = AtomicU64::new(0);

/// A zeroed scratch buffer aligned for any element type.
pub(super) struct Scratch(Vec<u64>, usize);

impl Scratch {
    /// `bytes` zeroed bytes, or an error if they cannot be allocated.
    pub(super) fn new(bytes: usize) -> Result<Scratch, DriverError> {
        let mut v = Vec::new();
        v.try_reserve_exact(bytes.div_ceil(8))
            .map_err(|e| backend_error("mpi", "alloc", e))?;
        v.resize(bytes.div_ceil(8), 0u64);
        Ok(Scratch(v, bytes))
    }
    /// A copy of `b`.
    pub(super) fn copy_of(b: &[u8]) -> Result<Scratch, DriverError> {
        let mut s = Scratch::new(b.len())?;
        s.bytes_mut().copy_from_slice(b);
        Ok(s)
    }
    pub(super) fn bytes(&self) -> &[u8] {
        // SAFETY: u64 words viewed as their bytes, within the vector.
        unsafe { std::slice::from_raw_parts(self.0.as_ptr().cast(), self.1) }
    }
    pub(super) fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `bytes`.
        unsafe { std::slice::from_raw_parts_mut(self.0.as_mut_ptr().cast(), self.1) }
    }
}

fn cptr(b: &[u8]) -> *const c_void {
    b.as_ptr().cast()
}
fn mptr(b: &mut [u8]) -> *mut c_void {
    b.as_mut_ptr().cast()
}
fn ints(call: &'static str, v: &[usize]) -> Result<Vec<c_int>, DriverError> {
    v.iter().map(|n| count(call, *n)).collect()
}

/// `dtype`'s widening to `acc`, or narrowing back.
fn cast(from: DType, to: DType, src: &[u8], dst: &mut [u8]) -> Result<(), DriverError> {
    if cpu::cast_bytes(from, to, src, dst) {
        Ok(())
    } else {
        Err(backend_error(
            "mpi",
            "cast",
            "a buffer is misaligned for its elements",
        ))
    }
}
fn divide(dtype: DType, by: usize, b: &mut [u8]) -> Result<(), DriverError> {
    if cpu::div_bytes_in_place(dtype, by as u64, b) {
        Ok(())
    } else {
        Err(backend_error(
            "mpi",
            "divide",
            "a buffer is misaligned for its elements",
        ))
    }
}

/// Every rank's `src` (the same length on every rank), in rank order.
fn gather_all(c: &MpiCommunicator, src: &[u8]) -> Result<Scratch, DriverError> {
    let mut all = Scratch::new(src.len() * c.ranks)?;
    let n = count("MPI_Allgather", src.len())?;
    // SAFETY: `all` holds `ranks` runs of `src.len()` bytes.
    check("MPI_Allgather", unsafe {
        ffi::MPI_Allgather(
            cptr(src),
            n,
            ffi::RSMPI_UINT8_T,
            mptr(all.bytes_mut()),
            n,
            ffi::RSMPI_UINT8_T,
            c.raw(),
        )
    })?;
    Ok(all)
}

/// The fallback: gather every rank's bytes and fold them in rank order.
/// `pick(all) -> shards` selects what each rank contributes to `dst`.
fn fold_gathered(
    c: &MpiCommunicator,
    dtype: DType,
    op: ReduceOp,
    src: &[u8],
    dst: &mut [u8],
    at: usize,
) -> Result<(), DriverError> {
    FALLBACKS.fetch_add(1, Ordering::Relaxed);
    let all = gather_all(c, src)?;
    let shards: Vec<&[u8]> = all
        .bytes()
        .chunks(src.len().max(1))
        .take(c.ranks)
        .map(|s| &s[at..at + dst.len()])
        .collect();
    fold_ranks("mpi", dtype, op, &shards, dst)
}

/// `dst = op over ranks of src`, on every rank, bit-identical everywhere.
pub(super) fn all_reduce(
    c: &MpiCommunicator,
    dtype: DType,
    op: ReduceOp,
    src: &[u8],
    dst: &mut [u8],
) -> Result<(), DriverError> {
    let es = dtype.size_bytes();
    let n = dst.len() / es;
    match route::all_reduce(dtype, op) {
        Route::Mean { acc } if acc == dtype => {
            all_reduce(c, dtype, ReduceOp::Sum, src, dst)?;
            divide(dtype, c.ranks, dst)
        }
        Route::Mean { acc } => {
            let mut wide = Scratch::new(n * acc.size_bytes())?;
            cast(dtype, acc, &src[..n * es], wide.bytes_mut())?;
            let mut sum = Scratch::new(n * acc.size_bytes())?;
            all_reduce(c, acc, ReduceOp::Sum, wide.bytes(), sum.bytes_mut())?;
            divide(acc, c.ranks, sum.bytes_mut())?;
            cast(acc, dtype, sum.bytes(), dst)
        }
        Route::Allreduce(wire) => {
            let Some((t, o)) = raw::reduction(wire, dtype, op) else {
                return fold_gathered(c, dtype, op, &src[..dst.len()], dst, 0);
            };
            let k = count("MPI_Allreduce", n)?;
            // SAFETY: both buffers hold `n` elements of `t`.
            check("MPI_Allreduce", unsafe {
                ffi::MPI_Allreduce(cptr(src), mptr(dst), k, t, o, c.raw())
            })
        }
        Route::Ring => super::sendrecv_ring::all_reduce(c, dtype, op, src, dst),
    }
}

/// Rank r's run of the reduction, `counts[r]` elements per rank (`src`
/// holds their sum): `MPI_Reduce_scatter`, or `_block` when `even`.
pub(super) fn reduce_scatter(
    c: &MpiCommunicator,
    dtype: DType,
    op: ReduceOp,
    counts: &[usize],
    src: &[u8],
    dst: &mut [u8],
) -> Result<(), DriverError> {
    let es = dtype.size_bytes();
    let total: usize = counts.iter().sum();
    if op == ReduceOp::Mean {
        let acc = dtype.mean_accumulator();
        if acc == dtype {
            reduce_scatter(c, dtype, ReduceOp::Sum, counts, src, dst)?;
            return divide(dtype, c.ranks, dst);
        }
        let mut wide = Scratch::new(total * acc.size_bytes())?;
        cast(dtype, acc, &src[..total * es], wide.bytes_mut())?;
        let mut part = Scratch::new(counts[c.rank] * acc.size_bytes())?;
        reduce_scatter(
            c,
            acc,
            ReduceOp::Sum,
            counts,
            wide.bytes(),
            part.bytes_mut(),
        )?;
        divide(acc, c.ranks, part.bytes_mut())?;
        return cast(acc, dtype, part.bytes(), dst);
    }
    let Some((t, o)) = raw::reduction(route::wire(dtype), dtype, op) else {
        let at = route::offsets(counts)[c.rank] * es;
        return fold_gathered(c, dtype, op, &src[..total * es], dst, at);
    };
    let even = counts.iter().all(|k| *k == counts[0]);
    if even {
        let k = count("MPI_Reduce_scatter_block", counts[0])?;
        // SAFETY: `src` holds `ranks * k` elements, `dst` k.
        check("MPI_Reduce_scatter_block", unsafe {
            ffi::MPI_Reduce_scatter_block(cptr(src), mptr(dst), k, t, o, c.raw())
        })
    } else {
        let kc = ints("MPI_Reduce_scatter", counts)?;
        // SAFETY: `src` holds the sum of the counts, `dst` this rank's.
        check("MPI_Reduce_scatter", unsafe {
            ffi::MPI_Reduce_scatter(cptr(src), mptr(dst), kc.as_ptr(), t, o, c.raw())
        })
    }
}

/// The reduction of every rank's `src` into `dst` on `root` only.
pub(super) fn reduce(
    c: &MpiCommunicator,
    dtype: DType,
    op: ReduceOp,
    root: usize,
    src: &[u8],
    dst: &mut [u8],
) -> Result<(), DriverError> {
    let es = dtype.size_bytes();
    let n = dst.len() / es;
    if op == ReduceOp::Mean {
        let acc = dtype.mean_accumulator();
        let mut wide = Scratch::new(n * acc.size_bytes())?;
        cast(dtype, acc, &src[..n * es], wide.bytes_mut())?;
        let mut sum = Scratch::new(n * acc.size_bytes())?;
        reduce(c, acc, ReduceOp::Sum, root, wide.bytes(), sum.bytes_mut())?;
        if c.rank == root {
            divide(acc, c.ranks, sum.bytes_mut())?;
            cast(acc, dtype, sum.bytes(), dst)?;
        }
        return Ok(());
    }
    let Some((t, o)) = raw::reduction(route::wire(dtype), dtype, op) else {
        let mut out = Scratch::new(dst.len())?;
        fold_gathered(c, dtype, op, &src[..dst.len()], out.bytes_mut(), 0)?;
        if c.rank == root {
            dst.copy_from_slice(out.bytes());
        }
        return Ok(());
    };
    let k = count("MPI_Reduce", n)?;
    let r = count("MPI_Reduce", root)?;
    // SAFETY: both buffers hold `n` elements (dst is only written on root).
    check("MPI_Reduce", unsafe {
        ffi::MPI_Reduce(cptr(src), mptr(dst), k, t, o, r, c.raw())
    })
}

/// Every rank's `counts[r]` elements, in rank order, into `dst`:
/// `MPI_Allgather` when the counts are even, else `MPI_Allgatherv`.
pub(super) fn all_gather(
    c: &MpiCommunicator,
    dtype: DType,
    counts: &[usize],
    src: &[u8],
    dst: &mut [u8],
) -> Result<(), DriverError> {
    let t = raw::move_type(dtype);
    if counts.iter().all(|k| *k == counts[0]) {
        let k = count("MPI_Allgather", counts[0])?;
        // SAFETY: `src` holds k elements, `dst` ranks * k.
        return check("MPI_Allgather", unsafe {
            ffi::MPI_Allgather(cptr(src), k, t, mptr(dst), k, t, c.raw())
        });
    }
    let kc = ints("MPI_Allgatherv", counts)?;
    let kd = ints("MPI_Allgatherv", &route::offsets(counts))?;
    // SAFETY: `src` holds this rank's count, `dst` their sum.
    check("MPI_Allgatherv", unsafe {
        ffi::MPI_Allgatherv(
            cptr(src),
            kc[c.rank],
            t,
            mptr(dst),
            kc.as_ptr(),
            kd.as_ptr(),
            t,
            c.raw(),
        )
    })
}

/// `root`'s `dst` (already holding its data) onto every rank: `MPI_Bcast`.
pub(super) fn broadcast(
    c: &MpiCommunicator,
    dtype: DType,
    root: usize,
    dst: &mut [u8],
) -> Result<(), DriverError> {
    let k = count("MPI_Bcast", dst.len() / dtype.size_bytes())?;
    let r = count("MPI_Bcast", root)?;
    // SAFETY: `dst` holds k elements.
    check("MPI_Bcast", unsafe {
        ffi::MPI_Bcast(mptr(dst), k, raw::move_type(dtype), r, c.raw())
    })
}

/// `MPI_Alltoallv`: `send[j]` elements of `src` (in order) go to rank j;
/// `recv[j]` elements from rank j land in `dst` in rank order.
pub(super) fn all_to_all(
    c: &MpiCommunicator,
    dtype: DType,
    send: &[usize],
    recv: &[usize],
    src: &[u8],
    dst: &mut [u8],
) -> Result<(), DriverError> {
    let t = raw::move_type(dtype);
    let call = "MPI_Alltoallv";
    let (sc, sd) = (ints(call, send)?, ints(call, &route::offsets(send))?);
    let (rc, rd) = (ints(call, recv)?, ints(call, &route::offsets(recv))?);
    // SAFETY: `src` holds the sum of `send`, `dst` the sum of `recv`.
    check(call, unsafe {
        ffi::MPI_Alltoallv(
            cptr(src),
            sc.as_ptr(),
            sd.as_ptr(),
            t,
            mptr(dst),
            rc.as_ptr(),
            rd.as_ptr(),
            t,
            c.raw(),
        )
    })
}

/// What every rank plans to send this one (`MPI_Alltoall` of `send`).
pub(super) fn exchange_counts(
    c: &MpiCommunicator,
    send: &[usize],
) -> Result<Vec<usize>, DriverError> {
    let mine: Vec<u64> = send.iter().map(|k| *k as u64).collect();
    let mut theirs = vec![0u64; c.ranks];
    // SAFETY: one u64 to and from every rank.
    check("MPI_Alltoall", unsafe {
        ffi::MPI_Alltoall(
            mine.as_ptr().cast(),
            1,
            ffi::RSMPI_UINT64_T,
            theirs.as_mut_ptr().cast(),
            1,
            ffi::RSMPI_UINT64_T,
            c.raw(),
        )
    })?;
    Ok(theirs.into_iter().map(|k| k as usize).collect())
}

/// Every rank's six words, in rank order (`MPI_Allgather`).
pub(super) fn gather_words(
    c: &MpiCommunicator,
    sig: [u64; 6],
) -> Result<Vec<[u64; 6]>, DriverError> {
    let mut all = vec![[0u64; 6]; c.ranks];
    // SAFETY: six u64 from every rank.
    check("MPI_Allgather", unsafe {
        ffi::MPI_Allgather(
            sig.as_ptr().cast(),
            6,
            ffi::RSMPI_UINT64_T,
            all.as_mut_ptr().cast(),
            6,
            ffi::RSMPI_UINT64_T,
            c.raw(),
        )
    })?;
    Ok(all)
}
