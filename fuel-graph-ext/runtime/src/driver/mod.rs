//! Collective drivers: backend libraries that run a collective themselves,
//! as one enqueued operation on a communication stream of their own,
//! instead of the copy chains that `lower-collectives` writes.
//!
//! [`Driver`] is a driver's device half: open a device, make a stream, and
//! hold buffers ([`DeviceResource`]) that are the backends' own buffers
//! (`backend::cpu::CpuBuf`, `backend::cuda::CudaBuf`), so they are counted
//! by the same allocator counters as the executor's and opened through the
//! same code (CUDA is opened in one place, `backend::cuda`).
//! [`CollectiveDriver`] adds groups and the collectives themselves. Three
//! implementations exist: [`HostDriver`] (CPU ranks that are threads of one
//! process, over shared memory), `NcclDriver` (CUDA GPUs through NCCL,
//! loaded at run time; feature `nccl`) and `MpiDriver` (CPU ranks that are
//! separate processes; feature `mpi`). [`RankComm`] puts one joined rank
//! behind [`GraphComm`], the object-safe interface the executor runs a
//! graph's `comm.*` nodes through; [`LocalGroup`] holds every rank of a
//! group one process drives (an executor's `driver_all_reduce` island);
//! `common` holds the plumbing the drivers share. `docs/drivers.md` has the whole story.
//!
//! Why the drivers live here, beside the backends, and not in
//! `fuel-collective`: the executor runs `driver_all_reduce` and `comm.*`
//! nodes through them, and a crate may not call up the stack. (CubeCL keeps
//! its `CollectiveDriver` in its server crate for the same reason.)
//!
//! Ordering against compute is explicit: every [`DeviceResource`] carries the
//! fence that says when its contents are valid. A collective waits on the
//! source's fence on the comm stream (never on the caller's thread), and
//! signals the destination's fence when it is done, so it never blocks compute
//! and never reads a buffer before the compute stream has written it.

mod prologue;
pub mod host;
mod local;
#[cfg(feature = "mpi")]
pub mod mpi;
#[cfg(feature = "nccl")]
pub mod nccl;
mod rank;

pub use prologue::{BackendBuf, Held, Member};
pub use host::{
    FencePoint, HostBuffer, HostCommStream, HostCommunicator, HostDriver, HostFence, HostUniqueId,
    Ticket,
};
pub use local::{LocalAllReduce, LocalGroup};
#[cfg(feature = "mpi")]
pub use mpi::{MpiCommunicator, MpiDriver};
#[cfg(feature = "nccl")]
pub use nccl::{NcclDriver, NcclUniqueId};
pub use rank::{CommCall, GraphComm, RankComm};

use crate::backend::Buf;
use fuel_graph_ext::device::{Device, DeviceKind};
use fuel_graph_ext::dtype::DType;
use fuel_graph_ext::op::ReduceOp;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// The environment variable that sets the default join timeout, in milliseconds.
pub const JOIN_TIMEOUT_ENV: &str = "FUEL_JOIN_TIMEOUT_MS";
/// The environment variable that sets how long one collective waits for a peer, in milliseconds.
pub const OP_TIMEOUT_ENV: &str = "FUEL_COLLECTIVE_TIMEOUT_MS";
/// The join timeout when [`JOIN_TIMEOUT_ENV`] is not set.
pub const DEFAULT_JOIN_TIMEOUT: Duration = Duration::from_secs(60);
/// The per-operation timeout when [`OP_TIMEOUT_ENV`] is not set.
pub const DEFAULT_OP_TIMEOUT: Duration = Duration::from_secs(300);
/// The longest timeout the variables may set, in milliseconds (one day).
pub const MAX_TIMEOUT_MS: u64 = 86_400_000;

/// The name of a group of ranks, chosen by the program (e.g. `"dp-0"`).
///
/// [`CollectiveDriver::group_id`] turns it into the driver's [`CollectiveDriver::UniqueId`].
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CommunicationId(pub String);

impl CommunicationId {
    /// A group called `name`.
    pub fn new(name: impl Into<String>) -> CommunicationId {
        CommunicationId(name.into())
    }
}

impl fmt::Display for CommunicationId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// How long a rank waits for the others.
///
/// [`CollectiveDriver::join_with`] takes them as a value;
/// [`JoinOptions::from_env`] (what the trait's `join` uses, and what the
/// CLI hands the compiler) reads [`JOIN_TIMEOUT_ENV`] and [`OP_TIMEOUT_ENV`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JoinOptions {
    /// How long `join` waits for every rank to arrive.
    pub join_timeout: Duration,
    /// How long one collective, send or receive waits for a peer (or for the
    /// source fence) before it fails.
    pub op_timeout: Duration,
}

impl Default for JoinOptions {
    fn default() -> Self {
        JoinOptions {
            join_timeout: DEFAULT_JOIN_TIMEOUT,
            op_timeout: DEFAULT_OP_TIMEOUT,
        }
    }
}

impl JoinOptions {
    /// The defaults, overridden by [`JOIN_TIMEOUT_ENV`] and [`OP_TIMEOUT_ENV`]:
    /// a whole number of milliseconds from 1 to [`MAX_TIMEOUT_MS`] (one
    /// day); any other value is an error that names the variable (a huge
    /// one would overflow the deadline).
    pub fn from_env() -> Result<JoinOptions, DriverError> {
        let d = JoinOptions::default();
        let ms = |name: &str, default: Duration, what: &str| {
            fuel_graph_ext::env::integer(
                name,
                1..=MAX_TIMEOUT_MS,
                u64::try_from(default.as_millis()).unwrap_or(MAX_TIMEOUT_MS),
                what,
            )
            .map(Duration::from_millis)
        };
        Ok(JoinOptions {
            join_timeout: ms(
                JOIN_TIMEOUT_ENV,
                d.join_timeout,
                "milliseconds a rank waits for the others to join",
            )?,
            op_timeout: ms(
                OP_TIMEOUT_ENV,
                d.op_timeout,
                "milliseconds a collective waits for a peer",
            )?,
        })
    }

    /// Both timeouts set to `t` (handy in tests).
    pub fn with_timeout(t: Duration) -> JoinOptions {
        JoinOptions {
            join_timeout: t,
            op_timeout: t,
        }
    }
}

/// Why a driver refused or failed. Each message names the problem and the fix.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DriverError {
    /// A variable the driver reads ([`JOIN_TIMEOUT_ENV`], [`OP_TIMEOUT_ENV`])
    /// has a bad value.
    #[error(transparent)]
    Env(#[from] fuel_graph_ext::env::EnvError),
    /// Some ranks never joined.
    #[error("joining group `{group}` as rank {rank} of {ranks} timed out after {waited_ms} ms; rank(s) {missing:?} never arrived; start every rank, or raise the timeout (JoinOptions or {JOIN_TIMEOUT_ENV})")]
    JoinTimeout {
        /// The group.
        group: String,
        /// The rank that gave up.
        rank: usize,
        /// The group size.
        ranks: usize,
        /// The ranks that never arrived.
        missing: Vec<usize>,
        /// How long it waited.
        waited_ms: u64,
    },
    /// A rank number outside the group, or an empty group.
    #[error("rank {rank} is not in a group of {ranks}; use a rank from 0 to {}", ranks.saturating_sub(1))]
    BadRank {
        /// The rank given.
        rank: usize,
        /// The group size.
        ranks: usize,
    },
    /// Two joins of one group disagree, or a rank joined twice.
    #[error("cannot join group `{group}`: {reason}")]
    JoinRefused {
        /// The group.
        group: String,
        /// What was wrong.
        reason: String,
    },
    /// The driver has no name for this element type.
    #[error("the {driver} driver cannot carry {elem} elements; it supports {supported}; convert the tensor first")]
    UnsupportedElem {
        /// The driver.
        driver: &'static str,
        /// The refused type.
        elem: DType,
        /// What it supports.
        supported: &'static str,
    },
    /// A byte size that is not a whole number of elements.
    #[error("{size} bytes is not a whole number of {elem} elements ({elem_size} bytes each); pass a multiple of {elem_size}")]
    PartialElement {
        /// The size given.
        size: u64,
        /// The element type.
        elem: DType,
        /// Bytes per element.
        elem_size: usize,
    },
    /// A buffer too small for `count` elements.
    #[error("`{op}` of {count} elements needs {need} bytes but the buffer has {have}; allocate a larger buffer or pass a smaller count")]
    BufferTooSmall {
        /// The operation.
        op: &'static str,
        /// The element count.
        count: usize,
        /// Bytes needed.
        need: usize,
        /// Bytes present.
        have: usize,
    },
    /// Two ranks called one collective with different arguments.
    #[error("`{op}` mismatch: rank {rank} passed {mine} but rank {peer} passed {theirs}; every rank must pass the same element type, count and reduce op")]
    Mismatch {
        /// The operation.
        op: &'static str,
        /// This rank.
        rank: usize,
        /// This rank's arguments.
        mine: String,
        /// The other rank.
        peer: usize,
        /// Its arguments.
        theirs: String,
    },
    /// Ranks of an `all_to_all` disagree on how much one sends another
    /// (E0960): every rank fails with the same message, naming the first
    /// pair (by receiver, then sender) that disagrees.
    #[error("`all_to_all` split mismatch: rank {from} sends {sends} {elem} element(s) to rank {to}, which expects {expects}; every rank must pass the same split (rank i's send[j] equal to rank j's recv[i])")]
    SplitMismatch {
        /// The sending rank.
        from: usize,
        /// The receiving rank.
        to: usize,
        /// What the sender sends.
        sends: usize,
        /// What the receiver expects.
        expects: usize,
        /// The element type.
        elem: DType,
    },
    /// Ranks of an SPMD `comm.all_to_all` with a split hold different
    /// splits (or operands that differ outside the axis), found before the
    /// exchange on a driver that cannot compare counts itself (E0961).
    /// Every rank fails with the same message.
    #[error("ranks disagree on an uneven collective's split: {what} is {low} on some rank(s) and {high} on others; record the same split on every rank (N×N for all_to_all, one extent per rank for all_gather and reduce_scatter), on operands that differ only along the split axis")]
    SplitDisagree {
        /// What differs.
        what: String,
        /// Its smallest value across the ranks.
        low: u64,
        /// Its largest.
        high: u64,
    },
    /// A peer left the group (its communicator was dropped) or failed.
    #[error("rank {peer} of group `{group}` is gone ({reason}); rank {rank} cannot finish `{op}`; restart the group")]
    PeerGone {
        /// The group.
        group: String,
        /// This rank.
        rank: usize,
        /// The rank that left.
        peer: usize,
        /// Why it left.
        reason: String,
        /// The operation that could not finish.
        op: &'static str,
    },
    /// Waiting for a peer or a fence took too long.
    #[error("rank {rank}: `{op}` waited {waited_ms} ms for {waiting_for}; check that every rank issues the same collectives in the same order, or raise the timeout (JoinOptions or {OP_TIMEOUT_ENV})")]
    Timeout {
        /// This rank.
        rank: usize,
        /// The operation.
        op: &'static str,
        /// What it waited for.
        waiting_for: String,
        /// How long.
        waited_ms: u64,
    },
    /// An earlier failure poisoned this communicator.
    #[error("rank {rank}'s communicator failed earlier ({reason}); drop it and join a new group")]
    Poisoned {
        /// This rank.
        rank: usize,
        /// The first failure.
        reason: String,
    },
    /// A stream that does not belong to this communicator.
    #[error(
        "the comm stream passed does not belong to this communicator; use `comm_stream(&comm)`"
    )]
    WrongStream,
    /// A runtime library is missing.
    #[error("{library} is not available: {reason}; {hint}")]
    LibraryMissing {
        /// The library.
        library: &'static str,
        /// What went wrong.
        reason: String,
        /// How to fix it.
        hint: &'static str,
    },
    /// The backend returned an error.
    #[error("{driver}: `{call}` failed: {reason}")]
    Backend {
        /// The driver.
        driver: &'static str,
        /// The call.
        call: &'static str,
        /// Its error.
        reason: String,
    },
    /// The device is not one this driver opens.
    #[error("the {driver} driver cannot open {device}; it opens {kind} devices")]
    WrongDevice {
        /// The driver.
        driver: &'static str,
        /// The device given.
        device: Device,
        /// The kind it opens.
        kind: DeviceKind,
    },
}

/// A buffer on a driver's device and the fence that says when its contents
/// are valid (compute has written it, or a collective has filled it).
pub struct DeviceResource<D: Driver> {
    /// The buffer handle.
    pub buffer: D::Buffer,
    /// Signalled when the buffer's contents are valid.
    pub fence: D::Fence,
    /// Its size in bytes.
    pub bytes: usize,
}

impl<D: Driver> Clone for DeviceResource<D>
where
    D::Buffer: Clone,
    D::Fence: Clone,
{
    fn clone(&self) -> Self {
        DeviceResource {
            buffer: self.buffer.clone(),
            fence: self.fence.clone(),
            bytes: self.bytes,
        }
    }
}

/// A collective driver's device half: what it needs from a backend besides
/// the collectives themselves.
pub trait Driver: Sized + Send + Sync + 'static {
    /// An opened device.
    type Device: Clone + Send + Sync;
    /// A buffer handle on that device.
    type Buffer: Send + Sync;
    /// The fence that orders a buffer's writer before its readers.
    type Fence: Send + Sync;
    /// A compute stream.
    type Stream: Send;

    /// The driver's name in messages.
    const NAME: &'static str;
    /// Whether the driver's `all_to_all` compares the counts the ranks pass
    /// and fails every rank when they disagree (host, MPI). A driver that
    /// cannot (NCCL) says false, and an uneven SPMD `comm.all_to_all` then
    /// has its ranks agree on the split first.
    const CHECKS_COUNTS: bool = true;
    /// The kind of device it opens.
    const KIND: DeviceKind;

    /// Opens `device`.
    fn open(device: Device) -> Result<Self::Device, DriverError>;
    /// A new compute stream on `dev`.
    fn new_stream(dev: &Self::Device) -> Result<Self::Stream, DriverError>;
    /// A zeroed buffer of `bytes`, valid at once (its fence is signalled).
    fn alloc(dev: &Self::Device, bytes: usize) -> Result<DeviceResource<Self>, DriverError>;
    /// A buffer holding `bytes`, valid at once.
    fn upload(dev: &Self::Device, bytes: &[u8]) -> Result<DeviceResource<Self>, DriverError>;
    /// Waits for the resource's fence (at most `timeout`) and reads it back.
    fn download(res: &DeviceResource<Self>, timeout: Duration) -> Result<Vec<u8>, DriverError>;
    /// Lends the executor's buffer `buf` to a collective as a source, read
    /// only and without copying it (its contents are valid: its fence is
    /// signalled). `WrongDevice` if it is on another backend.
    fn lend(buf: &Arc<Buf>) -> Result<DeviceResource<Self>, DriverError>;
    /// Hands the executor's fresh buffer `buf` to a collective as a
    /// destination. `WrongDevice` (and the buffer dropped) if it is on
    /// another backend.
    fn adopt(buf: Buf) -> Result<DeviceResource<Self>, DriverError>;
    /// The buffer back from a destination once its collective is done
    /// (after `synchronize`).
    fn reclaim(res: DeviceResource<Self>) -> Result<Buf, DriverError>;
    /// Orders the compute stream of `res`'s device after `res`'s fence, so
    /// compute work enqueued later reads what the collective wrote. Nothing
    /// for drivers whose compute never runs ahead (the host drivers).
    fn order_compute(_res: &DeviceResource<Self>) -> Result<(), DriverError> {
        Ok(())
    }
}

/// A driver that runs collectives across devices itself.
///
/// The collective methods enqueue work on `stream` and return; an `Err`
/// means the driver refused to enqueue. A failure after enqueueing fails the
/// destination's fence (so [`Driver::download`] reports it) and is returned
/// by [`CollectiveDriver::synchronize`].
pub trait CollectiveDriver: Driver {
    /// This rank's membership of one group, joined once and kept.
    type Communicator: Member<Stream = Self::CommStream> + Send;
    /// What every rank of a group joins under.
    type UniqueId: Copy;
    /// How the driver names an element type.
    type DataType: Copy;
    /// The stream collectives run on, apart from the compute streams.
    type CommStream: Copy + PartialEq;

    /// The unique id for the group `id`: minted by whichever caller asks
    /// first in this process and remembered, so two servers of one group get
    /// the same answer.
    fn group_id(id: &CommunicationId) -> Result<Self::UniqueId, DriverError>;
    /// Joins group `id` as rank `rank` of `ranks`, waiting for every rank
    /// at most `opts.join_timeout`.
    fn join_with(
        id: Self::UniqueId,
        ranks: usize,
        rank: usize,
        opts: JoinOptions,
    ) -> Result<Self::Communicator, DriverError>;
    /// [`join_with`](Self::join_with) the timeouts of [`JoinOptions::from_env`].
    fn join(
        id: Self::UniqueId,
        ranks: usize,
        rank: usize,
    ) -> Result<Self::Communicator, DriverError> {
        Self::join_with(id, ranks, rank, JoinOptions::from_env()?)
    }
    /// The driver's name for `dtype`, or `UnsupportedElem`.
    fn name_of(dtype: DType) -> Result<Self::DataType, DriverError>;
    /// The driver's name for `dtype` and how many elements `size` bytes hold.
    fn data_type(dtype: DType, size: u64) -> Result<(Self::DataType, usize), DriverError> {
        Ok((Self::name_of(dtype)?, prologue::whole_elements(dtype, size)?))
    }
    /// The communicator's comm stream.
    fn comm_stream(comm: &Self::Communicator) -> Self::CommStream {
        comm.stream()
    }
    /// This rank and the group size.
    fn rank_and_size(comm: &Self::Communicator) -> (usize, usize) {
        comm.rank_and_size()
    }
    /// Reduces `src` across the group into `dst` on every rank.
    #[allow(clippy::too_many_arguments)]
    fn all_reduce(
        comm: &Self::Communicator,
        src: &DeviceResource<Self>,
        dst: &DeviceResource<Self>,
        dtype: Self::DataType,
        count: usize,
        op: ReduceOp,
        stream: Self::CommStream,
    ) -> Result<(), DriverError>;
    /// Sends `count` elements of `src` to `peer`.
    fn send(
        comm: &Self::Communicator,
        src: &DeviceResource<Self>,
        dtype: Self::DataType,
        count: usize,
        peer: usize,
        stream: Self::CommStream,
    ) -> Result<(), DriverError>;
    /// Receives `count` elements from `peer` into `dst`.
    fn recv(
        comm: &Self::Communicator,
        dst: &DeviceResource<Self>,
        dtype: Self::DataType,
        count: usize,
        peer: usize,
        stream: Self::CommStream,
    ) -> Result<(), DriverError>;
    /// All-to-all with per-peer counts, like `MPI_Alltoallv`: the first
    /// `send[0]` elements of `src` go to rank 0, the next `send[1]` to
    /// rank 1, and so on; `dst` receives `recv[j]` elements from each rank
    /// j, joined in rank order. Both slices have one count per rank (zero
    /// is legal). Rank i's `send[j]` must equal rank j's `recv[i]`; the
    /// host and MPI drivers check it and fail every rank when it does not,
    /// NCCL cannot (the SPMD `comm.all_to_all` checks before it calls).
    #[allow(clippy::too_many_arguments)]
    fn all_to_all(
        comm: &Self::Communicator,
        src: &DeviceResource<Self>,
        dst: &DeviceResource<Self>,
        dtype: Self::DataType,
        send: &[usize],
        recv: &[usize],
        stream: Self::CommStream,
    ) -> Result<(), DriverError>;
    /// Waits until everything enqueued on `stream` is done; returns the
    /// first failure since the last call.
    fn synchronize(comm: &Self::Communicator, stream: Self::CommStream) -> Result<(), DriverError>;

    /// Opens a group of calls that are launched together when
    /// [`group_end`](Self::group_end) is called: what NCCL needs when one
    /// thread drives several ranks, or posts several sends and receives.
    /// Nothing for drivers whose calls never block each other.
    fn group_start() -> Result<(), DriverError> {
        Ok(())
    }
    /// Closes the group [`group_start`](Self::group_start) opened.
    fn group_end() -> Result<(), DriverError> {
        Ok(())
    }

    /// The driver's own all-gather: every rank's `count` elements of `src`,
    /// in rank order, into `dst`. `Ok(false)` (nothing enqueued) when the
    /// driver has none; the caller then composes it from `send`/`recv`.
    #[allow(clippy::too_many_arguments)]
    fn all_gather(
        _comm: &Self::Communicator,
        _src: &DeviceResource<Self>,
        _dst: &DeviceResource<Self>,
        _dtype: Self::DataType,
        _count: usize,
        _stream: Self::CommStream,
    ) -> Result<bool, DriverError> {
        Ok(false)
    }
    /// The driver's own broadcast: rank `root`'s `count` elements of `src`
    /// into `dst` on every rank. `Ok(false)` when the driver has none.
    #[allow(clippy::too_many_arguments)]
    fn broadcast(
        _comm: &Self::Communicator,
        _src: &DeviceResource<Self>,
        _dst: &DeviceResource<Self>,
        _dtype: Self::DataType,
        _count: usize,
        _root: usize,
        _stream: Self::CommStream,
    ) -> Result<bool, DriverError> {
        Ok(false)
    }
    /// All-gather with a count per rank, like `MPI_Allgatherv`: rank r's
    /// first `counts[r]` elements of `src`, for every r in rank order, into
    /// `dst` (the sum of `counts`; a zero is legal). Every rank passes the
    /// same `counts`; the host and MPI drivers check that and fail every
    /// rank when they differ. `Ok(false)` (nothing enqueued) when the
    /// driver has none.
    #[allow(clippy::too_many_arguments)]
    fn all_gather_uneven(
        _comm: &Self::Communicator,
        _src: &DeviceResource<Self>,
        _dst: &DeviceResource<Self>,
        _dtype: Self::DataType,
        _counts: &[usize],
        _stream: Self::CommStream,
    ) -> Result<bool, DriverError> {
        Ok(false)
    }
    /// Reduce-scatter with a count per rank, like `MPI_Reduce_scatter`:
    /// `src` holds the sum of `counts` elements on every rank, and rank r's
    /// `dst` gets the r-th run (`counts[r]` elements, after the runs of
    /// the ranks before it) of their reduction. Every rank passes the same
    /// `counts`. `Ok(false)` when the driver has none.
    #[allow(clippy::too_many_arguments)]
    fn reduce_scatter_uneven(
        _comm: &Self::Communicator,
        _src: &DeviceResource<Self>,
        _dst: &DeviceResource<Self>,
        _dtype: Self::DataType,
        _counts: &[usize],
        _op: ReduceOp,
        _stream: Self::CommStream,
    ) -> Result<bool, DriverError> {
        Ok(false)
    }
    /// The driver's own reduce-scatter: rank r gets the r-th run of `count`
    /// elements of the reduction of every rank's `src` (`ranks * count`
    /// elements). `Ok(false)` when the driver has none.
    #[allow(clippy::too_many_arguments)]
    fn reduce_scatter(
        _comm: &Self::Communicator,
        _src: &DeviceResource<Self>,
        _dst: &DeviceResource<Self>,
        _dtype: Self::DataType,
        _count: usize,
        _op: ReduceOp,
        _stream: Self::CommStream,
    ) -> Result<bool, DriverError> {
        Ok(false)
    }
}
