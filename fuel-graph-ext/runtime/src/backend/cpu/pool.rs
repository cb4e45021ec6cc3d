//! The host kernels' own thread pool and how work is split over it: a
//! kernel or copy of [`PARALLEL_MIN`] f32s' worth or more runs in chunks on
//! the pool ([`par_chunks`]), never on the caller's rayon pool; a copy
//! below [`COPY_PARALLEL_MIN_BYTES`] stays on its thread unless that thread
//! is already one of the pool's.

use super::PARALLEL_MIN;

/// The host kernels' own thread pool, started on first use; `None` if its
/// threads could not be started (the kernels then run on their caller's
/// thread).
fn kernel_pool() -> Option<&'static rayon::ThreadPool> {
    static POOL: std::sync::OnceLock<Option<rayon::ThreadPool>> = std::sync::OnceLock::new();
    POOL.get_or_init(|| {
        rayon::ThreadPoolBuilder::new()
            .thread_name(|i| format!("fuel-cpu-{i}"))
            .build()
            .ok()
    })
    .as_ref()
}

/// How many threads a large host kernel is split over: the size of the
/// kernels' own pool (as many as rayon's global pool would have: the cores,
/// or `RAYON_NUM_THREADS`), 1 if it could not be started.
pub fn kernel_threads() -> usize {
    kernel_pool().map_or(1, rayon::ThreadPool::current_num_threads)
}

/// Runs `f` on the kernels' own pool (see `par_chunks`), so that rayon
/// work inside it splits over the same threads as the host kernels: what
/// `fuel-opt bench` times its host bound on. On the calling thread when
/// that is a thread of another rayon pool or the pool could not start.
pub fn on_kernel_threads<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    match kernel_pool() {
        Some(pool) if rayon::current_thread_index().is_none() => pool.install(f),
        _ => f(),
    }
}

/// Threads for a buffer of `bytes`: one below [`PARALLEL_MIN`] f32s' worth.
fn threads_for(bytes: usize) -> usize {
    let min = PARALLEL_MIN * 4;
    if bytes < min {
        return 1;
    }
    kernel_threads().min(bytes / (min / 4)).max(1)
}

/// Runs `f(offset, chunk)` over chunks of `out`, on several threads when
/// large.
///
/// The threads are the kernels' own rayon pool, started once per process
/// (spawning fresh threads per call cost 100 us or more per kernel on a
/// loaded VM), and never the caller's pool:
/// - From a thread that belongs to no rayon pool (the caller of an
///   all-host executable, a device worker, a collective driver's stream),
///   the call hands the chunks to the kernels' pool and blocks until they
///   are done. Those threads run nothing but kernel chunks, so they are
///   free even when every thread of rayon's global pool is blocked inside
///   `Executable::run`: borrowing the global pool here deadlocked then.
/// - From a thread of some other rayon pool (`run` called inside
///   `par_iter`), the kernel runs on the calling thread alone. Joining any
///   pool from there lets the thread run other tasks of its own pool while
///   it waits (rayon's issue 592): another `run`, or a task that needs a
///   lock its caller holds, which can then never be released. The caller's
///   pool is already busy with its own tasks, so little is lost.
/// - From a thread of the kernels' pool (a chunk that splits again), it
///   splits over that pool.
pub(super) fn par_chunks<T: Send>(out: &mut [T], f: impl Fn(usize, &mut [T]) + Sync) {
    use rayon::prelude::*;
    let threads = threads_for(std::mem::size_of_val(out));
    let pool = match kernel_pool() {
        Some(pool) if threads > 1 => pool,
        _ => return f(0, out),
    };
    let per = out.len().div_ceil(threads);
    let split = |out: &mut [T]| {
        out.par_chunks_mut(per)
            .enumerate()
            .for_each(|(i, chunk)| f(i * per, chunk))
    };
    if pool.current_thread_index().is_some() {
        split(out)
    } else if rayon::current_thread_index().is_none() {
        pool.install(|| split(out))
    } else {
        f(0, out)
    }
}

/// Copies below this many bytes that are not already on the kernels'
/// pool run on the calling thread: handing half of a memcpy to the pool
/// costs a wake-up and a wait that, on the 2-core development VM, took as
/// long as the copy itself up to 16 MiB (three 1 MiB copies: 62 us on one
/// thread, 61 us split with one handoff each, 31 us split on the pool;
/// `docs/performance.md`, issue 19). A run of an all-host executable
/// with large steps runs on the pool as a whole
/// ([`on_kernel_threads`]), so its copies split for free.
pub const COPY_PARALLEL_MIN_BYTES: usize = 4 << 20;

/// Whether this thread is one of the kernels' pool.
fn on_kernel_pool() -> bool {
    kernel_pool().is_some_and(|p| p.current_thread_index().is_some())
}

/// `dst.copy_from_slice(src)` (same length), in parallel when large.
pub fn copy_bytes(src: &[u8], dst: &mut [u8]) {
    if dst.len() < COPY_PARALLEL_MIN_BYTES && !on_kernel_pool() {
        dst.copy_from_slice(src);
        return;
    }
    par_chunks(dst, |off, chunk| {
        let len = chunk.len();
        chunk.copy_from_slice(&src[off..off + len]);
    });
}
