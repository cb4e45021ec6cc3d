//! Plumbing every driver shares: poison-tolerant locks, what a communicator
//! answers ([`Member`]) and the per-call prologue written once on it (the
//! stream, the peer, the buffer lengths: [`prologue`], [`p2p_prologue`]),
//! the argument checks (ranks, whole elements), the process-wide table of group
//! ids, the buffers a driver holds ([`Held`]: its own, or one the executor
//! lends it), and the rank-order fold of the host-side drivers, which is the
//! CPU backend's own fold.

use super::{CollectiveDriver, DeviceResource, Driver, DriverError};
use crate::backend::{cpu, Buf};
use fuel_graph_ext::device::Device;
use fuel_graph_ext::dtype::DType;
use fuel_graph_ext::op::ReduceOp;
use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, Mutex, MutexGuard};

/// Locks `m`; a panicking holder leaves plain data behind, so keep going.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// What every communicator answers alike: its rank, its group's size and
/// its comm stream. The collective trait's `comm_stream` and
/// `rank_and_size` and the per-call prologue are written once on it.
pub trait Member {
    /// The comm stream's handle.
    type Stream: Copy + PartialEq;
    /// This rank and the group size.
    fn rank_and_size(&self) -> (usize, usize);
    /// The communicator's comm stream.
    fn stream(&self) -> Self::Stream;
    /// Whether the communicator may take a call on `stream`: `WrongStream`
    /// unless it is its own (a driver adds its own refusals, e.g. `Poisoned`).
    fn check(&self, stream: Self::Stream) -> Result<(), DriverError> {
        if stream != self.stream() {
            return Err(DriverError::WrongStream);
        }
        Ok(())
    }
}

/// The arguments every collective from a source into a destination takes
/// besides its own: the communicator, the source, the destination, the
/// element type and the stream. Every collective method of
/// [`CollectiveDriver`](super::CollectiveDriver) takes them as one value.
/// In that order: `Call(comm, src, dst, dtype, stream)`.
pub struct Call<'a, D: CollectiveDriver>(
    pub &'a D::Communicator,
    pub &'a DeviceResource<D>,
    pub &'a DeviceResource<D>,
    pub D::DataType,
    pub D::CommStream,
);

/// The arguments of a send or a receive: the communicator, the buffer (a
/// send's source, a receive's destination), the element type, how many
/// elements, the peer's rank and the stream. In that order:
/// `P2p(comm, buf, dtype, count, peer, stream)`.
pub struct P2p<'a, D: CollectiveDriver>(
    pub &'a D::Communicator,
    pub &'a DeviceResource<D>,
    pub D::DataType,
    pub usize,
    pub usize,
    pub D::CommStream,
);

impl<D: CollectiveDriver> Clone for Call<'_, D> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<D: CollectiveDriver> Copy for Call<'_, D> {}

/// The prologue of a collective `op` on `comm`: the stream is its own, and
/// the buffers hold what it reads (`src`: elements, bytes) and writes
/// (`dst`). Gives the bytes read.
pub(crate) fn prologue<M: Member>(
    comm: &M,
    stream: M::Stream,
    op: &'static str,
    elem_bytes: usize,
    src: (usize, usize),
    dst: (usize, usize),
) -> Result<usize, DriverError> {
    comm.check(stream)?;
    check_src_dst(op, elem_bytes, src, dst)
}

/// The prologue of a send or receive `op` of `count` elements with `peer`
/// through a buffer of `have` bytes: the stream is the communicator's, the
/// peer another rank, and the buffer holds the elements. Gives their bytes.
pub(crate) fn p2p_prologue<M: Member>(
    comm: &M,
    stream: M::Stream,
    op: &'static str,
    peer: usize,
    (elem_bytes, count): (usize, usize),
    have: usize,
) -> Result<usize, DriverError> {
    comm.check(stream)?;
    let (rank, ranks) = comm.rank_and_size();
    check_p2p(op, rank, peer, ranks, elem_bytes, count, have)
}

/// The driver `driver`'s call `call` failed with `e`.
pub(crate) fn backend_error(
    driver: &'static str,
    call: &'static str,
    e: impl std::fmt::Display,
) -> DriverError {
    DriverError::Backend {
        driver,
        call,
        reason: e.to_string(),
    }
}

/// Checks `size` against `dtype` and gives the element count.
pub(crate) fn whole_elements(dtype: DType, size: u64) -> Result<usize, DriverError> {
    let es = dtype.size_bytes();
    let partial = || DriverError::PartialElement {
        size,
        elem: dtype,
        elem_size: es,
    };
    if !size.is_multiple_of(es as u64) {
        return Err(partial());
    }
    usize::try_from(size / es as u64).map_err(|_| partial())
}

/// `rank` is a rank of a group of `ranks`.
pub(crate) fn check_rank(rank: usize, ranks: usize) -> Result<(), DriverError> {
    if ranks == 0 || rank >= ranks {
        return Err(DriverError::BadRank { rank, ranks });
    }
    Ok(())
}

/// `peer` is another rank of the group than `rank`.
pub(crate) fn check_peer(rank: usize, peer: usize, ranks: usize) -> Result<(), DriverError> {
    check_rank(peer, ranks)?;
    if peer == rank {
        return Err(DriverError::BadRank { rank: peer, ranks });
    }
    Ok(())
}

/// `count` elements of `elem_bytes` each fit in a buffer of `have` bytes;
/// gives the bytes they take.
pub(crate) fn check_len(
    op: &'static str,
    elem_bytes: usize,
    count: usize,
    have: usize,
) -> Result<usize, DriverError> {
    let need = count.saturating_mul(elem_bytes);
    if need > have {
        return Err(DriverError::BufferTooSmall {
            op,
            count,
            need,
            have,
        });
    }
    Ok(need)
}

/// The buffers of a collective that reads `src.0` elements from a buffer of
/// `src.1` bytes and writes `dst.0` into one of `dst.1`: both fit. Gives
/// the bytes read.
pub(crate) fn check_src_dst(
    op: &'static str,
    elem_bytes: usize,
    src: (usize, usize),
    dst: (usize, usize),
) -> Result<usize, DriverError> {
    let need = check_len(op, elem_bytes, src.0, src.1)?;
    check_len(op, elem_bytes, dst.0, dst.1)?;
    Ok(need)
}

/// A send or receive by `rank` of `count` elements with `peer`, through a
/// buffer of `have` bytes: the peer is another rank of the group and the
/// buffer holds the elements. Gives their bytes.
#[allow(clippy::too_many_arguments)]
pub(crate) fn check_p2p(
    op: &'static str,
    rank: usize,
    peer: usize,
    ranks: usize,
    elem_bytes: usize,
    count: usize,
    have: usize,
) -> Result<usize, DriverError> {
    check_peer(rank, peer, ranks)?;
    check_len(op, elem_bytes, count, have)
}

/// A process-wide table from group names to a driver's unique ids: the
/// first caller mints an id, every later one gets the same.
pub(crate) struct IdTable<K, U>(Mutex<Option<HashMap<K, U>>>);

impl<K: Eq + Hash + Clone, U: Copy + PartialEq> IdTable<K, U> {
    /// An empty table (a `static`).
    pub(crate) const fn new() -> Self {
        IdTable(Mutex::new(None))
    }

    /// The id of `key`, minted by `mint` if it has none yet.
    pub(crate) fn get_or_mint(
        &self,
        key: &K,
        mint: impl FnOnce() -> Result<U, DriverError>,
    ) -> Result<U, DriverError> {
        let mut t = lock(&self.0);
        let t = t.get_or_insert_with(HashMap::new);
        if let Some(u) = t.get(key) {
            return Ok(*u);
        }
        let u = mint()?;
        t.insert(key.clone(), u);
        Ok(u)
    }

    /// The key whose id is `id`, if any.
    pub(crate) fn key_of(&self, id: U) -> Option<K> {
        lock(&self.0)
            .as_ref()?
            .iter()
            .find(|(_, v)| **v == id)
            .map(|(k, _)| k.clone())
    }
}

/// A backend buffer type a driver can hold: the view of it inside the
/// executor's [`Buf`], and the way back.
pub trait BackendBuf: Sized + Send + Sync + 'static {
    /// This backend's buffer inside `buf`, if `buf` is one.
    fn within(buf: &Buf) -> Option<&Self>;
    /// `buf` as this backend's buffer, or `buf` back if it is another's.
    fn from_buf(buf: Buf) -> Result<Self, Buf>;
    /// Back into the executor's buffer type.
    fn into_buf(self) -> Buf;
    /// The device it lives on.
    fn device(&self) -> Device;
}

impl BackendBuf for cpu::CpuBuf {
    fn within(buf: &Buf) -> Option<&Self> {
        buf.as_cpu()
    }
    fn from_buf(buf: Buf) -> Result<Self, Buf> {
        match buf {
            Buf::Cpu(b) => Ok(b),
            #[allow(unreachable_patterns)] // with every GPU backend compiled out
            other => Err(other),
        }
    }
    fn into_buf(self) -> Buf {
        Buf::Cpu(self)
    }
    fn device(&self) -> Device {
        cpu::CpuBuf::device(self)
    }
}

#[cfg(feature = "cuda")]
impl BackendBuf for crate::backend::cuda::CudaBuf {
    fn within(buf: &Buf) -> Option<&Self> {
        buf.as_cuda()
    }
    fn from_buf(buf: Buf) -> Result<Self, Buf> {
        match buf {
            Buf::Cuda(b) => Ok(b),
            other => Err(other),
        }
    }
    fn into_buf(self) -> Buf {
        Buf::Cuda(self)
    }
    fn device(&self) -> Device {
        self.dev().device
    }
}

/// A buffer a driver works on: its own, or one the executor lent it for a
/// collective (read only; the executor never writes a buffer once made).
pub enum Held<B> {
    /// The driver's own buffer, read and written.
    Own(B),
    /// An executor buffer, only read.
    Lent(Arc<Buf>),
}

impl<B: BackendBuf> Held<B> {
    /// The buffer, to read.
    pub fn get(&self) -> Option<&B> {
        match self {
            Held::Own(b) => Some(b),
            Held::Lent(b) => B::within(b),
        }
    }

    /// The buffer, to write; `None` for a lent one.
    pub fn get_mut(&mut self) -> Option<&mut B> {
        match self {
            Held::Own(b) => Some(b),
            Held::Lent(_) => None,
        }
    }
}

/// The shared handle a driver's [`DeviceResource`] holds.
pub type Shared<B> = Arc<Mutex<Held<B>>>;

/// The executor's buffer `buf` lent to driver `D` as a source, with
/// `fence` (already signalled), or why `D` cannot read it.
pub(crate) fn lend_buf<D, B>(
    buf: &Arc<Buf>,
    fence: D::Fence,
) -> Result<DeviceResource<D>, DriverError>
where
    D: Driver<Buffer = Shared<B>>,
    B: BackendBuf,
{
    if B::within(buf).is_none() {
        return Err(wrong_backend(D::NAME, D::KIND, buf));
    }
    Ok(DeviceResource {
        buffer: Arc::new(Mutex::new(Held::Lent(buf.clone()))),
        fence,
        bytes: buf.len(),
    })
}

/// The executor's fresh buffer `buf` as driver `D`'s own destination, with
/// `fence`, or why `D` cannot use it.
pub(crate) fn adopt_buf<D, B>(buf: Buf, fence: D::Fence) -> Result<DeviceResource<D>, DriverError>
where
    D: Driver<Buffer = Shared<B>>,
    B: BackendBuf,
{
    let bytes = buf.len();
    match B::from_buf(buf) {
        Ok(b) => Ok(DeviceResource {
            buffer: Arc::new(Mutex::new(Held::Own(b))),
            fence,
            bytes,
        }),
        Err(other) => Err(wrong_backend(D::NAME, D::KIND, &other)),
    }
}

/// The executor buffer a destination holds, once nothing else does.
pub(crate) fn reclaim_buf<D, B>(res: DeviceResource<D>) -> Result<Buf, DriverError>
where
    D: Driver<Buffer = Shared<B>>,
    B: BackendBuf,
{
    let not_own = |why: &str| DriverError::Backend {
        driver: D::NAME,
        call: "reclaim",
        reason: format!("the destination {why}; synchronize before reclaiming it"),
    };
    let held = Arc::try_unwrap(res.buffer).map_err(|_| not_own("is still in use"))?;
    match held.into_inner().unwrap_or_else(|e| e.into_inner()) {
        Held::Own(b) => Ok(b.into_buf()),
        Held::Lent(_) => Err(not_own("was lent, not adopted")),
    }
}

fn wrong_backend(
    driver: &'static str,
    kind: fuel_graph_ext::device::DeviceKind,
    buf: &Buf,
) -> DriverError {
    DriverError::WrongDevice {
        driver,
        device: buf.device(),
        kind,
    }
}

/// Reduces `shards` (in rank order, each at least `out.len()` bytes of
/// `dtype` elements) into `out` with the CPU backend's own fold; `Mean`
/// sums in the dtype's accumulator (`DType::mean_accumulator`, so a u8 or
/// f16 mean does not overflow) and divides by the number of shards. Every
/// rank that folds the same shards gets the same bits.
pub(crate) fn fold_ranks(
    driver: &'static str,
    dtype: DType,
    op: ReduceOp,
    shards: &[&[u8]],
    out: &mut [u8],
) -> Result<(), DriverError> {
    if out.is_empty() {
        return Ok(());
    }
    let acc = dtype.mean_accumulator();
    let ok = if op == ReduceOp::Mean && acc != dtype {
        cpu::mean_bytes(dtype, acc, shards, out)
    } else {
        cpu::fold_bytes(dtype, op.combiner(), shards, out, false)
            && (op != ReduceOp::Mean || cpu::div_bytes_in_place(dtype, shards.len() as u64, out))
    };
    if ok {
        Ok(())
    } else {
        Err(backend_error(
            driver,
            "fold",
            "a shard is shorter than the result or not aligned for its elements",
        ))
    }
}

/// An all-to-all's per-rank counts: one per rank of a group of `ranks`;
/// gives their sum (an error if it overflows).
pub(crate) fn check_counts(
    driver: &'static str,
    what: &'static str,
    counts: &[usize],
    ranks: usize,
) -> Result<usize, DriverError> {
    if counts.len() != ranks {
        return Err(backend_error(
            driver,
            what,
            format!(
                "{} counts given for a group of {ranks}; pass one count per rank",
                counts.len()
            ),
        ));
    }
    counts
        .iter()
        .try_fold(0usize, |acc, c| acc.checked_add(*c))
        .ok_or_else(|| backend_error(driver, what, "the counts add up past usize::MAX"))
}
