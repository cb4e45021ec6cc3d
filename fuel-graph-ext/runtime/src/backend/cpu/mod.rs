//! The CPU backend: one host arena per `cpu:N`, and its kernels.
//!
//! Each [`Arena`] owns its buffers (separate allocations) and counts their
//! bytes; a step on another arena may read one through a shared host copy
//! (`schedule::Work::Share`), but only the owning arena frees it. Kernels
//! work block by block: a block of the output starts as a copy of operand 0
//! and every other operand is folded into it while the block is still in
//! cache, so an n-ary op reads each input once. The inner loops are plain
//! zipped iterations that the compiler vectorises; tensors of
//! [`PARALLEL_MIN`] elements or more are split over the kernels' own rayon
//! pool ([`kernel_threads`]), never over the caller's (`pool.rs`).
//! The arithmetic is `fuel_graph_ext::elem`'s; [`fold_bytes`] is the same fold over
//! byte slices, which the host collective drivers reduce with.

use crate::backend::alloc::{AllocCounter, MemStats};
use crate::backend::fault::{Event, Faults};
use crate::backend::pages::PageBlock;
pub use crate::backend::pages::HOST_PAGE;
use crate::backend::Region;
use crate::error::ExecError;
use fuel_graph_ext::device::Device;
use fuel_graph_ext::dtype::DType;
use fuel_graph_ext::elem::{with_scalar, Scalar};
use fuel_graph_ext::op::ElementwiseOp;
use std::sync::Arc;

mod cast;
mod pool;
pub use cast::{cast, cast_bytes};
use pool::par_chunks;
pub use pool::{copy_bytes, kernel_threads, on_kernel_threads, COPY_PARALLEL_MIN_BYTES};

/// Buffers of at least this many f32s' bytes (4 MiB) are split over
/// threads. Handing a kernel to the pool costs a wake-up and a wait on each
/// side; on the 2-core development VM that cost more than the split saved
/// below 4 MiB (at 1 MiB it was 1 MiB's fold, `docs/performance.md`, issue 39),
/// which is where the copies split too ([`COPY_PARALLEL_MIN_BYTES`]).
pub const PARALLEL_MIN: usize = 1 << 20;
/// Elements per block of the fold.
const BLOCK: usize = 4096;

/// The most bytes an arena keeps in its pool of freed buffers.
pub const POOL_MAX_BYTES: usize = 1 << 30;

/// One host arena.
///
/// Freed buffers go back to a pool keyed by size (up to [`POOL_MAX_BYTES`]),
/// and the next allocation of that size takes one from there. A compiled
/// executable allocates the same sizes on every run, so after the first run
/// its buffers are recycled instead of being mapped, zeroed and page-faulted
/// again. Pooled buffers are not live: they do not count in `current`.
#[derive(Debug)]
pub struct Arena {
    /// Its device name.
    pub device: Device,
    counter: AllocCounter,
    pool: std::sync::Mutex<Pool>,
}

#[derive(Debug, Default)]
struct Pool {
    by_words: std::collections::BTreeMap<usize, Vec<Vec<u64>>>,
    /// Page blocks by capacity (they keep their device views).
    pages: std::collections::BTreeMap<usize, Vec<PageBlock>>,
    bytes: usize,
}

impl Arena {
    /// Opens `cpu:N` (always possible).
    pub fn open(device: Device) -> Arena {
        Arena {
            device,
            counter: AllocCounter::default(),
            pool: std::sync::Mutex::new(Pool::default()),
        }
    }

    /// Bytes held in the pool of freed buffers.
    pub fn pooled_bytes(&self) -> usize {
        self.pool.lock().map_or(0, |p| p.bytes)
    }

    fn take_pooled(&self, words: usize) -> Option<Vec<u64>> {
        let mut p = self.pool.lock().ok()?;
        let v = p.by_words.get_mut(&words)?.pop()?;
        p.bytes -= words * 8;
        Some(v)
    }

    fn take_pooled_page(&self, cap: usize) -> Option<PageBlock> {
        let mut p = self.pool.lock().ok()?;
        let b = p.pages.get_mut(&cap)?.pop()?;
        p.bytes -= cap;
        Some(b)
    }

    fn give_back_page(&self, b: PageBlock) {
        let cap = b.cap();
        if let Ok(mut p) = self.pool.lock() {
            if p.bytes + cap <= POOL_MAX_BYTES {
                p.bytes += cap;
                p.pages.entry(cap).or_default().push(b);
            }
        }
    }

    fn give_back(&self, v: Vec<u64>) {
        let words = v.len();
        if let Ok(mut p) = self.pool.lock() {
            if p.bytes + words * 8 <= POOL_MAX_BYTES {
                p.bytes += words * 8;
                p.by_words.entry(words).or_default().push(v);
            }
        }
    }

    /// Allocator numbers.
    pub fn stats(&self) -> MemStats {
        self.counter.stats()
    }

    /// A buffer of `bytes`, 8-byte aligned. A new one is zeroed; a recycled
    /// one keeps old bytes, so every kernel writes its whole output.
    pub fn alloc(self: &Arc<Self>, bytes: usize, faults: &Faults) -> Result<CpuBuf, ExecError> {
        self.alloc_reusing(bytes, faults, None)
    }

    /// The allocation fault point every way of getting a buffer passes:
    /// an error when the armed fault fires here.
    fn alloc_fault(&self, bytes: usize, faults: &Faults) -> Result<(), ExecError> {
        if faults.check(Event::Alloc) {
            return Err(ExecError::OutOfMemory {
                device: self.device,
                bytes,
                reason: "injected allocation failure".into(),
            });
        }
        Ok(())
    }

    /// `r` as a buffer of this arena, values and all, when it is `bytes`
    /// long, 8-byte aligned and shared with nobody; else `r` back.
    fn take_as_is(self: &Arc<Self>, bytes: usize, mut r: Arc<[u8]>) -> Result<CpuBuf, Arc<[u8]>> {
        if r.len() != bytes || !aligned(&r) || Arc::get_mut(&mut r).is_none() {
            return Err(r);
        }
        self.counter.add(bytes);
        Ok(CpuBuf {
            store: Store::Shared(r),
            len: bytes,
            arena: self.clone(),
        })
    }

    /// `bytes` as they are, values and all, for a kernel that continues on
    /// them (a fold onto its first operand's bytes, `exec::donate`). An
    /// allocation fault point, as [`alloc`](Self::alloc) is; bytes that do
    /// not fit, or that anyone else holds, are an internal error, since the
    /// kernel would otherwise start from garbage.
    pub fn adopt(
        self: &Arc<Self>,
        bytes: usize,
        faults: &Faults,
        r: Arc<[u8]>,
    ) -> Result<CpuBuf, ExecError> {
        self.alloc_fault(bytes, faults)?;
        self.take_as_is(bytes, r)
            .map_err(|_| ExecError::Internal("bytes to fold onto are shared or do not fit".into()))
    }

    /// [`alloc`](Self::alloc), but into `reuse` when it is `bytes` long,
    /// 8-byte aligned and shared with nobody: the bytes of a caller's output
    /// tensor, which the runner hands back without copying.
    pub fn alloc_reusing(
        self: &Arc<Self>,
        bytes: usize,
        faults: &Faults,
        reuse: Option<Arc<[u8]>>,
    ) -> Result<CpuBuf, ExecError> {
        let oom = |reason: String| ExecError::OutOfMemory {
            device: self.device,
            bytes,
            reason,
        };
        self.alloc_fault(bytes, faults)?;
        if let Some(Ok(b)) = reuse.map(|r| self.take_as_is(bytes, r)) {
            return Ok(b);
        }
        if bytes >= HOST_PAGE {
            let cap = PageBlock::capacity_for(bytes);
            let b = match self.take_pooled_page(cap) {
                Some(b) => b,
                None => PageBlock::new(bytes)
                    .ok_or_else(|| oom(format!("the host refused {cap} page-aligned bytes")))?,
            };
            self.counter.add(bytes);
            return Ok(CpuBuf {
                store: Store::Page(b),
                len: bytes,
                arena: self.clone(),
            });
        }
        let words = bytes.div_ceil(8);
        let v = match self.take_pooled(words) {
            Some(v) => v,
            None => {
                let mut v: Vec<u64> = Vec::new();
                v.try_reserve_exact(words).map_err(|e| oom(e.to_string()))?;
                v.resize(words, 0);
                v
            }
        };
        self.counter.add(bytes);
        Ok(CpuBuf {
            store: Store::Pooled(v),
            len: bytes,
            arena: self.clone(),
        })
    }

    /// A read-only buffer over a caller's input bytes, without copying them
    /// (they must be [`aligned`]); counted like any buffer while it lives.
    pub fn wrap(self: &Arc<Self>, bytes: Arc<[u8]>, faults: &Faults) -> Result<CpuBuf, ExecError> {
        let len = bytes.len();
        self.alloc_fault(len, faults)?;
        if !aligned(&bytes) {
            return Err(ExecError::Internal(
                "wrapped host bytes are misaligned".into(),
            ));
        }
        self.counter.add(len);
        Ok(CpuBuf {
            store: Store::Shared(bytes),
            len,
            arena: self.clone(),
        })
    }
}

/// Whether host bytes may back a [`CpuBuf`] as they are: every element
/// type needs at most 8-byte alignment.
pub fn aligned(bytes: &[u8]) -> bool {
    (bytes.as_ptr() as usize).is_multiple_of(8)
}

#[derive(Debug)]
enum Store {
    /// The arena's own storage; goes back to its pool.
    Pooled(Vec<u64>),
    /// Host bytes shared with a caller's tensor (8-byte aligned).
    Shared(Arc<[u8]>),
    /// The arena's own page-aligned storage (buffers of [`HOST_PAGE`]
    /// bytes or more), which a GPU backend may import; goes back to its pool.
    Page(PageBlock),
    /// A run of another host buffer's bytes, starting `at` bytes in, held
    /// alive by this view ([`CpuBuf::view`]): a slice that copies nothing.
    /// Its bytes are counted once, by the buffer it views.
    View { of: Viewed, at: usize },
}

/// The buffer a [`Store::View`] reads (a host buffer), kept alive by it.
struct Viewed(Arc<super::Buf>);

impl std::fmt::Debug for Viewed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "view of {} bytes", self.0.len())
    }
}

/// A buffer in one arena; freeing it (drop) updates the arena's counter.
#[derive(Debug)]
pub struct CpuBuf {
    store: Store,
    len: usize,
    arena: Arc<Arena>,
}

impl Drop for CpuBuf {
    fn drop(&mut self) {
        if matches!(self.store, Store::View { .. }) {
            // Counted by the buffer it views, which dropping `of` releases.
            return;
        }
        self.arena.counter.sub(self.len);
        match std::mem::replace(&mut self.store, Store::Pooled(Vec::new())) {
            Store::Pooled(v) if !v.is_empty() => self.arena.give_back(v),
            Store::Page(b) => self.arena.give_back_page(b),
            _ => {}
        }
    }
}

impl CpuBuf {
    fn ptr(&self) -> *const u8 {
        match &self.store {
            Store::Pooled(v) => v.as_ptr().cast::<u8>(),
            Store::Shared(b) => b.as_ptr(),
            Store::Page(b) => b.ptr().cast_const(),
            Store::View { of, at } => match &*of.0 {
                // SAFETY: `view` checked `at + len` against the viewed
                // buffer's length, and `of` keeps that buffer alive.
                super::Buf::Cpu(c) => unsafe { c.ptr().add(*at) },
                #[allow(unreachable_patterns)] // with every GPU backend compiled out
                _ => std::ptr::null(),
            },
        }
    }

    /// A view of `len` bytes of host buffer `of` starting `at` bytes in,
    /// which holds `of` alive: what a `slice` of one contiguous run becomes
    /// (`Work::View`). Nothing is allocated or counted. `None` when `of` is
    /// not a host buffer or the run does not fit in it. `at` must be a
    /// multiple of the element size (every slice's offset is), so typed
    /// reads of the view stay aligned.
    pub fn view(of: &Arc<super::Buf>, at: usize, len: usize) -> Option<CpuBuf> {
        // Irrefutable when every GPU backend is compiled out.
        #[allow(irrefutable_let_patterns)]
        let super::Buf::Cpu(c) = &**of
        else {
            return None;
        };
        if at.checked_add(len)? > c.len {
            return None;
        }
        Some(CpuBuf {
            store: Store::View {
                of: Viewed(of.clone()),
                at,
            },
            len,
            arena: c.arena.clone(),
        })
    }

    fn ptr_mut(&mut self) -> *mut u8 {
        if let Store::View { .. } = &self.store {
            // Steps only read their operands, so nothing writes a view; if
            // something did, it writes into bytes of its own.
            let mut v = vec![0u64; self.len.div_ceil(8)];
            // SAFETY: `v` holds at least `len` bytes; the regions are distinct.
            unsafe {
                std::ptr::copy_nonoverlapping(self.ptr(), v.as_mut_ptr().cast::<u8>(), self.len)
            };
            self.arena.counter.add(self.len);
            self.store = Store::Pooled(v);
        }
        if let Store::Shared(b) = &mut self.store {
            if Arc::get_mut(b).is_none() {
                // Shared with a caller: write into a copy of our own.
                let mut v = vec![0u64; self.len.div_ceil(8)];
                // SAFETY: `v` holds at least `len` bytes; the regions are distinct.
                unsafe {
                    std::ptr::copy_nonoverlapping(b.as_ptr(), v.as_mut_ptr().cast::<u8>(), self.len)
                };
                self.store = Store::Pooled(v);
            }
        }
        match &mut self.store {
            Store::Pooled(v) => v.as_mut_ptr().cast::<u8>(),
            Store::Page(b) => b.ptr(),
            // Unique (checked above), so writing through it is sound.
            Store::Shared(b) => Arc::get_mut(b).map_or(std::ptr::null_mut(), |s| s.as_mut_ptr()),
            // Replaced by bytes of its own above.
            Store::View { .. } => std::ptr::null_mut(),
        }
    }

    /// The bytes.
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: the storage holds at least `len` initialised bytes; u8 has no alignment needs.
        unsafe { std::slice::from_raw_parts(self.ptr(), self.len) }
    }

    /// The bytes, writable.
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        let p = self.ptr_mut();
        // SAFETY: as in `bytes`, and we hold `&mut self` over unshared storage.
        unsafe { std::slice::from_raw_parts_mut(p, self.len) }
    }

    fn typed<T: Scalar>(&self) -> &[T] {
        // SAFETY: the storage is 8-byte aligned (pooled `u64`s, page blocks, or shared
        // bytes checked by `aligned`), which is enough for every `Scalar`
        // (see its safety contract), or a view at a multiple of its
        // element's size, which is `T`'s alignment; every bit pattern is a
        // valid `T`.
        unsafe {
            std::slice::from_raw_parts(self.ptr().cast::<T>(), self.len / std::mem::size_of::<T>())
        }
    }

    fn typed_mut<T: Scalar>(&mut self) -> &mut [T] {
        let p = self.ptr_mut();
        // SAFETY: as in `typed`, and we hold `&mut self` over unshared storage.
        unsafe {
            std::slice::from_raw_parts_mut(p.cast::<T>(), self.len / std::mem::size_of::<T>())
        }
    }

    /// Hands shared storage back as host bytes without copying (the buffer
    /// is freed from the arena's point of view); pooled storage comes back
    /// as `Err(self)`.
    pub fn into_shared(mut self) -> Result<Arc<[u8]>, CpuBuf> {
        match std::mem::replace(&mut self.store, Store::Pooled(Vec::new())) {
            Store::Shared(b) => Ok(b),
            pooled => {
                self.store = pooled;
                Err(self)
            }
        }
    }

    /// The caller's bytes it shares, when it holds a caller's tensor
    /// ([`Arena::wrap`]) rather than bytes of the arena's own.
    pub fn shared_bytes(&self) -> Option<&Arc<[u8]>> {
        match &self.store {
            Store::Shared(b) => Some(b),
            _ => None,
        }
    }

    /// Its page-aligned block, when it has one (buffers the arena made of
    /// [`HOST_PAGE`] bytes or more; not a caller's bytes).
    pub fn page_block(&self) -> Option<&PageBlock> {
        match &self.store {
            Store::Page(b) => Some(b),
            _ => None,
        }
    }

    /// The arena it belongs to.
    pub fn device(&self) -> Device {
        self.arena.device
    }

    /// The arena itself (where a copy of this buffer is allocated).
    pub fn arena(&self) -> &Arc<Arena> {
        &self.arena
    }
}

// The verifier gives an n-ary op two or more operands of the output's type,
// and `run` refuses inputs whose bytes do not fill their type, so every
// operand is as long as `out` and the indexing below stays in bounds.
fn fold_typed<T: Scalar>(
    kind: ElementwiseOp,
    ins: &[&CpuBuf],
    out: &mut CpuBuf,
    onto: bool,
    div: Option<u64>,
) {
    let ins: Vec<&[T]> = ins.iter().map(|b| b.typed::<T>()).collect();
    fold_slices(kind, &ins, out.typed_mut::<T>(), onto, div)
}

/// The one fold: `out = kind(ins[0], ins[1], ...)` (or onto `out`), block by
/// block, every operand at least as long as `out`; with `div`, each block
/// is then divided by it while it is in cache (`Scalar::div_in_place`, the
/// bits `div` gives).
fn fold_slices<T: Scalar>(
    kind: ElementwiseOp,
    ins: &[&[T]],
    out: &mut [T],
    onto: bool,
    div: Option<u64>,
) {
    // Folding onto `out` folds every operand into it; otherwise operands 0
    // and 1 start each block (one pass, not a copy and then a fold), or
    // operand 0 alone is copied when it is the only one.
    let rest = match (onto, ins.len()) {
        (true, _) => ins,
        (false, 1) => &ins[1..],
        (false, _) => &ins[2..],
    };
    par_chunks(out, |off, chunk| {
        for (bi, block) in chunk.chunks_mut(BLOCK).enumerate() {
            let start = off + bi * BLOCK;
            let end = start + block.len();
            match (onto, ins) {
                (true, _) => {}
                (false, [a]) => block.copy_from_slice(&a[start..end]),
                (false, [a, b, ..]) => pair_block(kind, block, &a[start..end], &b[start..end]),
                (false, []) => {}
            }
            for x in rest {
                fold_block(kind, block, &x[start..end]);
            }
            if let Some(by) = div {
                T::div_in_place(block, by);
            }
        }
    });
}

/// `$body` with `$k` the constant `kind`: the op is matched once, outside
/// the loop `$body` holds, so each arm is a plain loop the compiler
/// vectorises; with the match inside (in `Scalar::apply`) it stopped doing
/// so once the fold had two callers, and the fold ran about 5x slower.
macro_rules! per_kind {
    ($kind:expr, $k:ident => $body:expr) => {
        per_kind!(@arms $kind, $k => $body; Add Mul Max Min Eq)
    };
    (@arms $kind:expr, $k:ident => $body:expr; $($op:ident)*) => {
        match $kind {
            $(ElementwiseOp::$op => {
                const $k: ElementwiseOp = ElementwiseOp::$op;
                $body
            })*
        }
    };
}

/// `block[i] = kind(block[i], x[i])`, the op matched outside the loop
/// (`per_kind!`).
#[inline(always)]
fn fold_block<T: Scalar>(kind: ElementwiseOp, block: &mut [T], x: &[T]) {
    per_kind!(kind, K => {
        for (o, y) in block.iter_mut().zip(x) {
            *o = T::apply(K, *o, *y);
        }
    })
}

/// `block[i] = kind(a[i], b[i])`, matched once outside the loop as in
/// [`fold_block`], so the first two operands of a fold take one pass.
#[inline(always)]
fn pair_block<T: Scalar>(kind: ElementwiseOp, block: &mut [T], a: &[T], b: &[T]) {
    per_kind!(kind, K => {
        for (o, (x, y)) in block.iter_mut().zip(a.iter().zip(b)) {
            *o = T::apply(K, *x, *y);
        }
    })
}

fn div_typed<T: Scalar>(by: u64, input: &CpuBuf, out: &mut CpuBuf) {
    let src = input.typed::<T>();
    par_chunks(out.typed_mut::<T>(), |off, chunk| {
        let len = chunk.len();
        T::div_slice(&src[off..off + len], by, chunk);
    });
}

/// `out = fold(kind, ins)`; all buffers hold `dtype` elements of one length.
pub fn fold(dtype: DType, kind: ElementwiseOp, ins: &[&CpuBuf], out: &mut CpuBuf) {
    fold_into(dtype, kind, ins, out, false)
}

/// `out = fold(kind, ins)` when `onto` is false; `out = fold(kind, [out] ++
/// ins)` when it is true (a left fold continued, so folding operands in
/// groups gives the same bits as folding them all at once).
pub fn fold_into(dtype: DType, kind: ElementwiseOp, ins: &[&CpuBuf], out: &mut CpuBuf, onto: bool) {
    if ins.is_empty() {
        return;
    }
    with_scalar!(dtype, T => fold_typed::<T>(kind, ins, out, onto, None))
}

/// `out = fold(kind, [out] ++ ins)`, then divided by `div` if given, in
/// one pass: a fold continued on its first operand's own bytes.
pub fn fold_onto(
    dtype: DType,
    kind: ElementwiseOp,
    ins: &[&CpuBuf],
    out: &mut CpuBuf,
    div: Option<u64>,
) {
    with_scalar!(dtype, T => fold_typed::<T>(kind, ins, out, true, div))
}

/// `out = fold(kind, ins) / by` in one pass: the bits of [`fold`] and then
/// [`div`], each block divided while it is in cache (`Kernel::FoldDiv`).
pub fn fold_div(dtype: DType, kind: ElementwiseOp, ins: &[&CpuBuf], out: &mut CpuBuf, by: u64) {
    if ins.is_empty() {
        return;
    }
    with_scalar!(dtype, T => fold_typed::<T>(kind, ins, out, false, Some(by)))
}

/// [`fold_into`] over host bytes that may belong to no arena (a mapped GPU
/// buffer, a collective's shards): `out` and every operand are viewed as
/// `dtype` elements, and every operand must be at least as long as `out`.
/// Returns false, doing nothing, when some slice is not aligned for the
/// elements, not a whole number of them, or too short.
pub fn fold_bytes(
    dtype: DType,
    kind: ElementwiseOp,
    ins: &[&[u8]],
    out: &mut [u8],
    onto: bool,
) -> bool {
    if ins.is_empty() || ins.iter().any(|x| x.len() < out.len()) {
        return false;
    }
    let len = out.len();
    with_scalar!(dtype, T => {
        let ins: Option<Vec<&[T]>> = ins.iter().map(|x| view::<T>(&x[..len])).collect();
        match (ins, view_mut::<T>(out)) {
            (Some(ins), Some(out)) => {
                fold_slices::<T>(kind, &ins, out, onto, None);
                true
            }
            _ => false,
        }
    })
}

/// The `Mean` of `shards` (each at least as long as `out`, `dtype`
/// elements) as the IR defines it: every element widened to `acc` (the
/// dtype's `mean_accumulator`), summed there in shard order, divided by the
/// number of shards and converted back. False, doing nothing, when a slice
/// is misaligned or short, or the accumulator cannot be allocated.
pub fn mean_bytes(dtype: DType, acc: DType, shards: &[&[u8]], out: &mut [u8]) -> bool {
    with_scalar!(dtype, S => with_scalar!(acc, A => mean_typed::<S, A>(shards, out)))
}

fn mean_typed<S: Scalar, A: Scalar>(shards: &[&[u8]], out: &mut [u8]) -> bool {
    let len = out.len();
    let Some(dst) = view_mut::<S>(out) else {
        return false;
    };
    let mut sum: Vec<A> = Vec::new();
    if sum.try_reserve_exact(dst.len()).is_err() {
        return false;
    }
    for shard in shards {
        let Some(src) = shard.get(..len).and_then(view::<S>) else {
            return false;
        };
        if sum.is_empty() {
            sum.extend(src.iter().map(|x| A::narrow(x.widen())));
        } else {
            for (o, x) in sum.iter_mut().zip(src) {
                *o = A::apply(ElementwiseOp::Add, *o, A::narrow(x.widen()));
            }
        }
    }
    let count = shards.len() as u64;
    for (o, x) in dst.iter_mut().zip(&sum) {
        *o = S::narrow(A::div(*x, count).widen());
    }
    true
}

/// `out[i] = out[i] / by` over host bytes of `dtype` elements; false when
/// they are not aligned or not a whole number of elements.
pub fn div_bytes_in_place(dtype: DType, by: u64, out: &mut [u8]) -> bool {
    with_scalar!(dtype, T => match view_mut::<T>(out) {
        Some(out) => {
            par_chunks(out, |_, chunk| T::div_in_place(chunk, by));
            true
        }
        None => false,
    })
}

/// `bytes` as elements, writable, when aligned and a whole number of them.
fn view_mut<T: Scalar>(bytes: &mut [u8]) -> Option<&mut [T]> {
    // SAFETY: as in `view`.
    let (head, mid, tail) = unsafe { bytes.align_to_mut::<T>() };
    (head.is_empty() && tail.is_empty()).then_some(mid)
}

/// `bytes` as elements, when aligned and a whole number of them.
fn view<T: Scalar>(bytes: &[u8]) -> Option<&[T]> {
    // SAFETY: every bit pattern is a valid `T` (`Scalar`'s contract); `align_to`
    // only hands out the aligned middle, and we require it to be everything.
    let (head, mid, tail) = unsafe { bytes.align_to::<T>() };
    (head.is_empty() && tail.is_empty()).then_some(mid)
}

/// `out = input / by`.
pub fn div(dtype: DType, by: u64, input: &CpuBuf, out: &mut CpuBuf) {
    with_scalar!(dtype, T => div_typed::<T>(by, input, out))
}

/// Copies `regions` of one operand, whose bytes are `src`, into `dst`.
pub fn copy_regions(regions: &[&Region], src: &[u8], dst: &mut [u8]) -> Result<(), String> {
    for r in regions {
        let from = src
            .get(r.src..r.src + r.len)
            .ok_or("region outside its operand")?;
        let to = dst
            .get_mut(r.dst..r.dst + r.len)
            .ok_or("region outside the result")?;
        copy_bytes(from, to);
    }
    Ok(())
}

/// Copies byte regions of `ins` into `out` (slice and concat).
pub fn gather(regions: &[Region], ins: &[&CpuBuf], out: &mut CpuBuf) -> Result<(), String> {
    let dst = out.bytes_mut();
    for r in regions {
        let src = ins.get(r.operand).ok_or("region outside its operand")?;
        // A large region splits over the pool as a copy does (an
        // all_gather's regions are whole shards).
        copy_regions(&[r], src.bytes(), dst)?;
    }
    Ok(())
}

/// Copies bytes from a host slice into `out` (same length), in parallel when large.
pub fn memcpy(src: &[u8], out: &mut CpuBuf) {
    copy_bytes(src, out.bytes_mut());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn freed_buffers_are_recycled_and_not_counted() {
        let arena = Arc::new(Arena::open(Device::cpu(7)));
        let faults = Faults::new(None);
        let mut a = arena.alloc(4096, &faults).unwrap();
        a.bytes_mut()[0] = 42;
        let ptr = a.bytes().as_ptr();
        drop(a);
        assert_eq!(arena.stats().current, 0);
        assert_eq!(arena.pooled_bytes(), 4096);
        let b = arena.alloc(4096, &faults).unwrap();
        assert_eq!(b.bytes().as_ptr(), ptr, "the pooled buffer is reused");
        assert_eq!(arena.pooled_bytes(), 0);
        assert_eq!(arena.stats().current, 4096);
        let c = arena.alloc(8, &faults).unwrap();
        assert_eq!(c.bytes(), &[0u8; 8], "a fresh buffer is zeroed");
        drop((b, c));
        assert_eq!(arena.stats().live_buffers, 0);
    }

    #[test]
    fn fold_is_threaded_and_exact_and_frees() {
        let arena = Arc::new(Arena::open(Device::cpu(0)));
        let faults = Faults::new(None);
        let n = PARALLEL_MIN + 3;
        let mut bufs = Vec::new();
        for k in 0..3i32 {
            let mut b = arena.alloc(n * 4, &faults).unwrap();
            for (i, x) in b.typed_mut::<i32>().iter_mut().enumerate() {
                *x = (i as i32 % 7) - k;
            }
            bufs.push(b);
        }
        let mut out = arena.alloc(n * 4, &faults).unwrap();
        let refs: Vec<&CpuBuf> = bufs.iter().collect();
        fold(DType::I32, ElementwiseOp::Add, &refs, &mut out);
        for (i, x) in out.typed::<i32>().iter().enumerate() {
            assert_eq!(*x, 3 * (i as i32 % 7) - 3);
        }
        assert_eq!(arena.stats().current, 4 * n * 4);
        drop((bufs, out));
        assert_eq!(arena.stats().current, 0);
        assert_eq!(arena.stats().peak, 4 * n * 4);
    }

    #[test]
    fn folding_in_groups_gives_the_bits_of_one_fold() {
        let arena = Arc::new(Arena::open(Device::cpu(0)));
        let faults = Faults::new(None);
        let n = 1000;
        let bufs: Vec<CpuBuf> = (0..4)
            .map(|k| {
                let mut b = arena.alloc(n * 4, &faults).unwrap();
                for (i, x) in b.typed_mut::<f32>().iter_mut().enumerate() {
                    *x = (i as f32 * 0.37 + k as f32).sin() * 1e3;
                }
                b
            })
            .collect();
        let refs: Vec<&CpuBuf> = bufs.iter().collect();
        let mut whole = arena.alloc(n * 4, &faults).unwrap();
        fold(DType::F32, ElementwiseOp::Add, &refs, &mut whole);
        let mut parts = arena.alloc(n * 4, &faults).unwrap();
        fold_into(
            DType::F32,
            ElementwiseOp::Add,
            &refs[..1],
            &mut parts,
            false,
        );
        fold_into(
            DType::F32,
            ElementwiseOp::Add,
            &refs[1..3],
            &mut parts,
            true,
        );
        fold_into(DType::F32, ElementwiseOp::Add, &refs[3..], &mut parts, true);
        assert_eq!(whole.bytes(), parts.bytes());
        // And it is not a no-op: folding onto a buffer adds to what is there.
        fold_into(DType::F32, ElementwiseOp::Add, &refs[..1], &mut parts, true);
        assert_ne!(whole.bytes(), parts.bytes());
    }
}
