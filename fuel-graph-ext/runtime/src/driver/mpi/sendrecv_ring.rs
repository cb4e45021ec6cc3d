//! The float all-reduce as a ring of `MPI_Sendrecv` calls: a
//! reduce-scatter in which each run of elements travels once round the
//! ring, folded on every rank it passes, and ends on its owner; then an
//! all-gather in which every owner's bits travel round the ring unchanged.
//!
//! Why not MPI's own calls: a float `MPI_Allreduce` may fold in different
//! orders on different ranks (`route`), and the safe pair that replaced it
//! (`MPI_Reduce_scatter`, then `MPI_Allgatherv`) was slow where it counts:
//! Open MPI's reduce-scatter copies the whole send buffer into a temporary
//! before its first step, and the all-gather copies the part once more. The
//! ring here moves the bytes a ring all-reduce moves, `2 (N−1)/N` of the
//! buffer per rank, receives each run straight into the result, and folds
//! it there with the CPU backend's fold (`backend::cpu::fold_bytes`,
//! continued onto the received partial sum), so f16 and bf16 round as the
//! interpreter rounds them and need no MPI user op.
//!
//! Run `b` (of `route::split`) is folded starting at rank `b + 1`, in ring
//! order, and ends on rank `b`: `((x[b+1] op x[b+2]) op …) op x[b]`. Every
//! rank receives the owner's bits, so every rank holds the same result.
//! Messages carry [`TAG`], apart from `send`/`recv`'s tag 0, so a user's
//! point-to-point messages never meet the ring's.

use super::raw::{check, count, move_type};
use super::route;
use super::MpiCommunicator;
use crate::backend::cpu;
use crate::driver::prologue::backend_error;
use crate::driver::DriverError;
use fuel_graph_ext::dtype::DType;
use fuel_graph_ext::op::ReduceOp;
use mpi::ffi;
use std::ffi::c_int;
use std::ops::Range;

/// The tag of the ring's messages.
pub(super) const TAG: c_int = 1;

/// `dst = op over ranks of src` (not `Mean`: see `route`), on every rank,
/// bit-identical everywhere. `src` holds at least `dst.len()` bytes.
pub(super) fn all_reduce(
    c: &MpiCommunicator,
    dtype: DType,
    op: ReduceOp,
    src: &[u8],
    dst: &mut [u8],
) -> Result<(), DriverError> {
    let (p, r) = (c.ranks, c.rank);
    let es = dtype.size_bytes();
    let src = &src[..dst.len()];
    if p == 1 {
        dst.copy_from_slice(src);
        return Ok(());
    }
    let counts = route::split(dst.len() / es, p);
    let starts = route::offsets(&counts);
    let run = |b: usize| starts[b] * es..(starts[b] + counts[b]) * es;
    let (next, prev) = ((r + 1) % p, (r + p - 1) % p);
    // Reduce-scatter: at step s rank r passes on run r-s-1 (its own shard
    // at the first step, a partial sum after) and takes run r-s-2, onto
    // which it folds its own shard.
    for s in 0..p - 1 {
        let (out, into) = scatter_step(r, p, s);
        let base = dst.as_mut_ptr();
        let from = if s == 0 {
            src.as_ptr()
        } else {
            base.cast_const()
        };
        // SAFETY: `src` and `dst` are as long as each other, and `out` and
        // `into` are different runs of them.
        unsafe { exchange(c, dtype, (from, run(out)), (base, run(into)), (next, prev))? };
        let (mine, into) = (&src[run(into)], &mut dst[run(into)]);
        if !cpu::fold_bytes(dtype, op.combiner(), &[mine], into, true) {
            return Err(backend_error(
                "mpi",
                "fold",
                "a buffer is not aligned for its elements",
            ));
        }
    }
    // All-gather: at step s rank r passes on run r-s (its own at the first
    // step) and takes run r-s-1.
    for s in 0..p - 1 {
        let (out, into) = gather_step(r, p, s);
        let base = dst.as_mut_ptr();
        // SAFETY: `out` and `into` are different runs of `dst`.
        unsafe {
            exchange(
                c,
                dtype,
                (base.cast_const(), run(out)),
                (base, run(into)),
                (next, prev),
            )?
        };
    }
    Ok(())
}

/// The runs rank `r` of `p` sends and receives at reduce-scatter step `s`.
fn scatter_step(r: usize, p: usize, s: usize) -> (usize, usize) {
    ((r + 2 * p - s - 1) % p, (r + 2 * p - s - 2) % p)
}

/// The runs rank `r` of `p` sends and receives at all-gather step `s`.
fn gather_step(r: usize, p: usize, s: usize) -> (usize, usize) {
    ((r + p - s) % p, (r + 2 * p - s - 1) % p)
}

/// One ring step: bytes `out` of the buffer at `from` go to `to` while
/// bytes `into` of the buffer at `dst` arrive from `source`.
///
/// # Safety
/// Both ranges lie within their buffers, and when the two buffers are one
/// the ranges do not overlap (MPI's send and receive buffers must not).
unsafe fn exchange(
    c: &MpiCommunicator,
    dtype: DType,
    (from, out): (*const u8, Range<usize>),
    (dst, into): (*mut u8, Range<usize>),
    (to, source): (usize, usize),
) -> Result<(), DriverError> {
    let es = dtype.size_bytes();
    let k_out = count("MPI_Sendrecv", out.len() / es)?;
    let k_in = count("MPI_Sendrecv", into.len() / es)?;
    let t = move_type(dtype);
    // SAFETY: the caller's; both peers are ranks of the communicator.
    check("MPI_Sendrecv", unsafe {
        ffi::MPI_Sendrecv(
            from.add(out.start).cast(),
            k_out,
            t,
            to as c_int,
            TAG,
            dst.add(into.start).cast(),
            k_in,
            t,
            source as c_int,
            TAG,
            c.raw(),
            ffi::RSMPI_STATUS_IGNORE,
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The ranks folded into each rank's copy of each run (`held[r][b]`).
    type Held = Vec<Vec<Vec<usize>>>;

    /// Plays `p - 1` steps of `step` on `held`: each rank takes the run its
    /// left neighbour sends, appending itself to the ranks folded into it
    /// when `fold`.
    fn play(
        held: &mut Held,
        p: usize,
        step: fn(usize, usize, usize) -> (usize, usize),
        fold: bool,
    ) {
        for s in 0..p.saturating_sub(1) {
            let sent: Vec<(usize, Vec<usize>)> = (0..p)
                .map(|r| {
                    let (out, _) = step(r, p, s);
                    (out, held[r][out].clone())
                })
                .collect();
            for (r, runs) in held.iter_mut().enumerate() {
                let (_, into) = step(r, p, s);
                let (run, came) = &sent[(r + p - 1) % p];
                assert_eq!(
                    *run, into,
                    "p={p} s={s}: rank {r} takes the run its left sends"
                );
                runs[into] = came.clone();
                if fold {
                    runs[into].push(r);
                }
            }
        }
    }

    /// Plays the ring's schedule on lists of the ranks folded into each run:
    /// every run must end on its owner with every rank folded in once, in
    /// ring order from the owner's successor, and reach every rank intact.
    #[test]
    fn every_run_goes_round_once_and_reaches_everyone() {
        for p in 1..=7 {
            let order = |b: usize| -> Vec<usize> { (1..=p).map(|i| (b + i) % p).collect() };
            let mut held: Held = (0..p).map(|r| vec![vec![r]; p]).collect();
            play(&mut held, p, scatter_step, true);
            for (r, runs) in held.iter().enumerate() {
                assert_eq!(runs[r], order(r), "p={p}: run {r} on its owner");
            }
            play(&mut held, p, gather_step, false);
            for (r, runs) in held.iter().enumerate() {
                for (b, ranks) in runs.iter().enumerate() {
                    assert_eq!(*ranks, order(b), "p={p}: rank {r}'s run {b}");
                }
            }
        }
    }
}
