//! [`HostDriver`]: CPU ranks that are threads of one process, meeting over
//! shared memory.
//!
//! A group lives in a process-wide table keyed by its [`HostUniqueId`]. Each
//! joined rank owns a [`HostCommunicator`] with one worker thread, its comm
//! stream. A collective call checks its arguments, marks the destination's
//! fence pending and queues a job; the job (on the comm stream) waits on the
//! source's fence, exchanges bytes through per-(src, dst) FIFO mailboxes and
//! signals the destination's fence. Sends are buffered, so a send never waits
//! for its receive.
//!
//! A rank leaves when its communicator is dropped (after its queued work
//! finishes) or when one of its jobs fails; peers waiting on it then get
//! [`DriverError::PeerGone`] instead of waiting forever. Every wait is also
//! bounded by the [`JoinOptions`] timeouts.

use super::common::{
    adopt_buf, backend_error, check_len, check_peer, check_rank, fold_ranks, lend_buf, lock,
    reclaim_buf, whole_elements, Held, IdTable, Shared,
};
use super::{CollectiveDriver, CommunicationId, DeviceResource, Driver, DriverError, JoinOptions};
use crate::backend::cpu::{Arena, CpuBuf};
use crate::backend::fault::Faults;
use crate::backend::worker::Worker;
use crate::backend::Buf;
use crate::device::{Device, DeviceKind};
use crate::dtype::DType;
use crate::op::ReduceOp;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The in-process driver for CPU ranks.
#[derive(Clone, Copy, Debug, Default)]
pub struct HostDriver;

/// A host group's id: a process-wide counter value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct HostUniqueId(pub u64);

/// A communicator's comm stream: names the communicator it belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HostCommStream(u64);

/// A host buffer: a CPU backend buffer (the driver's own, or one the
/// executor lent), shared between the compute side and the comm stream.
pub type HostBuffer = Shared<CpuBuf>;

/// A buffer's first `need` bytes, to read; an error if it has fewer.
pub(super) fn bytes_of(held: &Held<CpuBuf>, need: usize) -> Result<&[u8], DriverError> {
    held.get()
        .and_then(|b| b.bytes().get(..need))
        .ok_or_else(|| {
            backend_error(
                HostDriver::NAME,
                "read",
                "the buffer is not a host buffer of the size given",
            )
        })
}

/// A buffer's first `need` bytes, to write; an error for a lent buffer.
pub(super) fn bytes_mut_of(held: &mut Held<CpuBuf>, need: usize) -> Result<&mut [u8], DriverError> {
    held.get_mut()
        .and_then(|b| b.bytes_mut().get_mut(..need))
        .ok_or_else(|| {
            backend_error(
                HostDriver::NAME,
                "write",
                "the destination is lent (read only) or too small",
            )
        })
}

/// The shard a rank posts to its peers: its source as it is when lent by
/// the executor (which never writes a buffer once made), else a copy made
/// in the source's arena (an in-place all-reduce overwrites its source).
fn snapshot(src: &HostBuffer, need: usize) -> Result<Arc<Held<CpuBuf>>, DriverError> {
    let held = lock(src);
    match &*held {
        Held::Lent(b) => Ok(Arc::new(Held::Lent(b.clone()))),
        Held::Own(b) => {
            let mut copy = b
                .arena()
                .alloc(need, &Faults::default())
                .map_err(|e| backend_error(HostDriver::NAME, "alloc", e))?;
            copy.bytes_mut().copy_from_slice(bytes_of(&held, need)?);
            Ok(Arc::new(Held::Own(copy)))
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum FenceState {
    Ready,
    Pending,
    Failed(DriverError),
}

/// A host fence: ready, pending (a writer is on its way) or failed.
#[derive(Clone, Debug)]
pub struct HostFence(Arc<(Mutex<FenceState>, Condvar)>);

impl Default for HostFence {
    fn default() -> Self {
        HostFence::ready()
    }
}

impl HostFence {
    /// A fence that is already signalled.
    pub fn ready() -> HostFence {
        HostFence(Arc::new((Mutex::new(FenceState::Ready), Condvar::new())))
    }
    /// Marks a write as in progress: readers wait until [`HostFence::signal`].
    pub fn reset(&self) {
        *lock(&self.0 .0) = FenceState::Pending;
    }
    /// Marks the contents valid.
    pub fn signal(&self) {
        *lock(&self.0 .0) = FenceState::Ready;
        self.0 .1.notify_all();
    }
    /// Marks the write as failed; readers get `e`.
    pub fn fail(&self, e: DriverError) {
        *lock(&self.0 .0) = FenceState::Failed(e);
        self.0 .1.notify_all();
    }
    /// True if both handles are one fence.
    pub fn same(&self, other: &HostFence) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
    /// Waits until the fence is signalled or failed, at most `timeout`.
    pub fn wait(
        &self,
        timeout: Duration,
        rank: usize,
        op: &'static str,
    ) -> Result<(), DriverError> {
        let deadline = Instant::now() + timeout;
        let mut st = lock(&self.0 .0);
        loop {
            match &*st {
                FenceState::Ready => return Ok(()),
                FenceState::Failed(e) => return Err(e.clone()),
                FenceState::Pending => {}
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(DriverError::Timeout {
                    rank,
                    op,
                    waiting_for: "the buffer's fence (its writer never signalled it)".into(),
                    waited_ms: timeout.as_millis() as u64,
                });
            }
            st = self
                .0
                 .1
                .wait_timeout(st, deadline - now)
                .map(|(g, _)| g)
                .unwrap_or_else(|e| e.into_inner().0);
        }
    }
}

/// A compute stream on the host: a worker thread running jobs in order.
#[derive(Clone)]
pub struct HostStream(Arc<Worker>);

impl HostStream {
    /// Queues `job`; false if the stream's thread is gone.
    pub fn submit(&self, job: impl FnOnce() + Send + 'static) -> bool {
        self.0.send(Box::new(job))
    }
}

impl Driver for HostDriver {
    type Device = Arc<Arena>;
    type Buffer = HostBuffer;
    type Fence = HostFence;
    type Stream = HostStream;
    const NAME: &'static str = "host";
    const KIND: DeviceKind = DeviceKind::Cpu;

    fn open(device: Device) -> Result<Arc<Arena>, DriverError> {
        if device.kind != DeviceKind::Cpu {
            return Err(DriverError::WrongDevice {
                driver: Self::NAME,
                device,
                kind: Self::KIND,
            });
        }
        Ok(Arc::new(Arena::open(device)))
    }

    fn new_stream(dev: &Arc<Arena>) -> Result<HostStream, DriverError> {
        Worker::spawn(format!("{}-compute", dev.device))
            .map(|w| HostStream(Arc::new(w)))
            .map_err(|e| backend_error(Self::NAME, "spawn a stream thread", e))
    }

    fn alloc(dev: &Arc<Arena>, bytes: usize) -> Result<DeviceResource<Self>, DriverError> {
        let buf = dev
            .alloc(bytes, &Faults::default())
            .map_err(|e| backend_error(Self::NAME, "alloc", e))?;
        Ok(DeviceResource {
            buffer: Arc::new(Mutex::new(Held::Own(buf))),
            fence: HostFence::ready(),
            bytes,
        })
    }

    fn upload(dev: &Arc<Arena>, bytes: &[u8]) -> Result<DeviceResource<Self>, DriverError> {
        let res = Self::alloc(dev, bytes.len())?;
        bytes_mut_of(&mut lock(&res.buffer), bytes.len())?.copy_from_slice(bytes);
        Ok(res)
    }

    fn download(res: &DeviceResource<Self>, timeout: Duration) -> Result<Vec<u8>, DriverError> {
        res.fence.wait(timeout, 0, "download")?;
        Ok(bytes_of(&lock(&res.buffer), res.bytes)?.to_vec())
    }

    fn lend(buf: &Arc<Buf>) -> Result<DeviceResource<Self>, DriverError> {
        let (buffer, bytes) = lend_buf(Self::NAME, Self::KIND, buf)?;
        Ok(DeviceResource {
            buffer,
            fence: HostFence::ready(),
            bytes,
        })
    }

    fn adopt(buf: Buf) -> Result<DeviceResource<Self>, DriverError> {
        let (buffer, bytes) = adopt_buf(Self::NAME, Self::KIND, buf)?;
        Ok(DeviceResource {
            buffer,
            fence: HostFence::ready(),
            bytes,
        })
    }

    fn reclaim(res: DeviceResource<Self>) -> Result<Buf, DriverError> {
        reclaim_buf(res)
    }
}

// ---------------------------------------------------------------- groups

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Chan {
    P2p,
    Coll,
}

struct Msg {
    what: String,
    elem: DType,
    count: usize,
    data: MsgData,
}

/// What a message carries.
enum MsgData {
    /// An all-reduce shard, read where it lies (every rank's fold needs
    /// it aligned); its sender waits until every peer has dropped it.
    Shard(Arc<Held<CpuBuf>>),
    /// A send's bytes, copied: a send never waits for its receive.
    Bytes(Vec<u8>),
}

impl MsgData {
    fn bytes(&self, need: usize) -> Result<&[u8], DriverError> {
        match self {
            MsgData::Shard(h) => bytes_of(h, need),
            MsgData::Bytes(b) => b.get(..need).ok_or_else(|| {
                backend_error(
                    HostDriver::NAME,
                    "recv",
                    "the message is shorter than its count",
                )
            }),
        }
    }

    fn shard(self) -> Result<Arc<Held<CpuBuf>>, DriverError> {
        match self {
            MsgData::Shard(h) => Ok(h),
            MsgData::Bytes(_) => Err(backend_error(
                HostDriver::NAME,
                "all_reduce",
                "a send arrived on the collective channel",
            )),
        }
    }
}

struct GroupState {
    joined: Vec<bool>,
    /// Why each rank left, once it has.
    gone: Vec<Option<String>>,
    /// Queued messages per (from, to, channel).
    mail: HashMap<(usize, usize, Chan), VecDeque<Msg>>,
}

struct Group {
    name: String,
    ranks: usize,
    state: Mutex<GroupState>,
    cv: Condvar,
}

static IDS: IdTable<CommunicationId, HostUniqueId> = IdTable::new();

fn groups() -> &'static Mutex<HashMap<u64, Arc<Group>>> {
    static GROUPS: OnceLock<Mutex<HashMap<u64, Arc<Group>>>> = OnceLock::new();
    GROUPS.get_or_init(Default::default)
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);
static NEXT_STREAM: AtomicU64 = AtomicU64::new(1);

fn group_name(id: HostUniqueId) -> String {
    IDS.key_of(id)
        .map(|k| k.0)
        .unwrap_or_else(|| format!("#{}", id.0))
}

impl Group {
    /// Waits for a message from `from`, or its departure, or the deadline.
    fn take(
        &self,
        from: usize,
        to: usize,
        chan: Chan,
        timeout: Duration,
        op: &'static str,
    ) -> Result<Msg, DriverError> {
        let deadline = Instant::now() + timeout;
        let mut st = lock(&self.state);
        loop {
            if let Some(m) = st
                .mail
                .get_mut(&(from, to, chan))
                .and_then(|q| q.pop_front())
            {
                return Ok(m);
            }
            if let Some(Some(reason)) = st.gone.get(from) {
                return Err(DriverError::PeerGone {
                    group: self.name.clone(),
                    rank: to,
                    peer: from,
                    reason: reason.clone(),
                    op,
                });
            }
            if let Some(Some(reason)) = st.gone.get(to) {
                return Err(DriverError::Poisoned {
                    rank: to,
                    reason: reason.clone(),
                });
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(DriverError::Timeout {
                    rank: to,
                    op,
                    waiting_for: format!("data from rank {from}"),
                    waited_ms: timeout.as_millis() as u64,
                });
            }
            st = self
                .cv
                .wait_timeout(st, deadline - now)
                .map(|(g, _)| g)
                .unwrap_or_else(|e| e.into_inner().0);
        }
    }

    fn put(&self, from: usize, to: usize, chan: Chan, m: Msg) {
        lock(&self.state)
            .mail
            .entry((from, to, chan))
            .or_default()
            .push_back(m);
        self.cv.notify_all();
    }

    fn leave(&self, rank: usize, reason: String) {
        let mut st = lock(&self.state);
        if let Some(g) = st.gone.get_mut(rank) {
            if g.is_none() {
                *g = Some(reason);
            }
        }
        // Nobody will read what was sent to it: let its senders go.
        st.mail.retain(|(_, to, _), _| *to != rank);
        self.cv.notify_all();
    }

    /// Drops shards a rank has folded, under the group's lock, and wakes
    /// their senders (see [`Group::wait_read`]).
    fn release(&self, shards: Vec<Arc<Held<CpuBuf>>>) {
        let _st = lock(&self.state);
        drop(shards);
        self.cv.notify_all();
    }

    /// Waits until every peer has dropped `mine` (read it, or left), so a
    /// buffer a shard borrows is free when the collective completes and
    /// the allocator counters are back where they were.
    fn wait_read(
        &self,
        mine: &Arc<Held<CpuBuf>>,
        rank: usize,
        timeout: Duration,
    ) -> Result<(), DriverError> {
        let deadline = Instant::now() + timeout;
        let mut st = lock(&self.state);
        while Arc::strong_count(mine) > 1 {
            let now = Instant::now();
            if now >= deadline {
                return Err(DriverError::Timeout {
                    rank,
                    op: "all_reduce",
                    waiting_for: "its peers to read its shard".into(),
                    waited_ms: timeout.as_millis() as u64,
                });
            }
            // A peer that fails drops its shards without the lock: poll.
            let slice = (deadline - now).min(Duration::from_millis(10));
            st = self
                .cv
                .wait_timeout(st, slice)
                .map(|(g, _)| g)
                .unwrap_or_else(|e| e.into_inner().0);
        }
        Ok(())
    }
}

/// One rank's membership of a host group.
pub struct HostCommunicator {
    group: Arc<Group>,
    id: HostUniqueId,
    rank: usize,
    ranks: usize,
    opts: JoinOptions,
    stream: HostCommStream,
    /// The first failure of a job, reported once by `synchronize`; any
    /// failure also poisons the communicator.
    errors: Arc<Mutex<Vec<DriverError>>>,
    poisoned: Arc<Mutex<Option<String>>>,
    worker: Option<Worker>,
}

impl std::fmt::Debug for HostCommunicator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostCommunicator")
            .field("group", &self.group.name)
            .field("rank", &self.rank)
            .field("ranks", &self.ranks)
            .finish()
    }
}

impl Drop for HostCommunicator {
    fn drop(&mut self) {
        // Let queued work finish (every wait in it is bounded), then leave.
        drop(self.worker.take());
        self.group
            .leave(self.rank, "its communicator was dropped".into());
        let all_gone = lock(&self.group.state).gone.iter().all(|g| g.is_some());
        if all_gone {
            let mut gs = lock(groups());
            if gs
                .get(&self.id.0)
                .is_some_and(|g| Arc::ptr_eq(g, &self.group))
            {
                gs.remove(&self.id.0);
            }
        }
    }
}

impl HostCommunicator {
    /// This rank.
    pub fn rank(&self) -> usize {
        self.rank
    }
    /// The group size.
    pub fn ranks(&self) -> usize {
        self.ranks
    }
    /// The options it joined with.
    pub fn options(&self) -> JoinOptions {
        self.opts
    }

    fn check(&self, stream: HostCommStream) -> Result<(), DriverError> {
        if stream != self.stream {
            return Err(DriverError::WrongStream);
        }
        if let Some(reason) = lock(&self.poisoned).clone() {
            return Err(DriverError::Poisoned {
                rank: self.rank,
                reason,
            });
        }
        Ok(())
    }

    /// Queues `job` on the comm stream; a failure fails `dst` (if any),
    /// records the error, poisons this rank and tells the peers.
    fn enqueue(
        &self,
        dst: Option<HostFence>,
        job: impl FnOnce() -> Result<(), DriverError> + Send + 'static,
    ) -> Result<(), DriverError> {
        let group = self.group.clone();
        let errors = self.errors.clone();
        let poisoned = self.poisoned.clone();
        let rank = self.rank;
        let fence = dst.clone();
        let run = move || {
            let res =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(job)).unwrap_or_else(|_| {
                    Err(DriverError::Backend {
                        driver: HostDriver::NAME,
                        call: "comm stream job",
                        reason: "the job panicked".into(),
                    })
                });
            match res {
                Ok(()) => {
                    if let Some(f) = fence {
                        f.signal();
                    }
                }
                Err(e) => {
                    if let Some(f) = fence {
                        f.fail(e.clone());
                    }
                    lock(&poisoned).get_or_insert_with(|| e.to_string());
                    group.leave(rank, format!("it failed: {e}"));
                    lock(&errors).push(e);
                }
            }
        };
        let sent = self.worker.as_ref().is_some_and(|w| w.send(Box::new(run)));
        if !sent {
            let e = DriverError::Backend {
                driver: HostDriver::NAME,
                call: "enqueue",
                reason: "the comm stream thread is gone".into(),
            };
            if let Some(f) = dst {
                f.fail(e.clone());
            }
            return Err(e);
        }
        Ok(())
    }
}

/// Marks `dst` pending unless it is `src`'s own fence (an in-place
/// operation), which must stay as the writer left it until the job reads it.
fn mark_pending(src: Option<&HostFence>, dst: &HostFence) {
    if !src.is_some_and(|s| s.same(dst)) {
        dst.reset();
    }
}

impl HostDriver {
    /// [`CollectiveDriver::join`] with explicit timeouts.
    pub fn join_with(
        id: HostUniqueId,
        ranks: usize,
        rank: usize,
        opts: JoinOptions,
    ) -> Result<HostCommunicator, DriverError> {
        check_rank(rank, ranks)?;
        let name = group_name(id);
        let group = {
            let mut gs = lock(groups());
            gs.entry(id.0)
                .or_insert_with(|| {
                    Arc::new(Group {
                        name: name.clone(),
                        ranks,
                        state: Mutex::new(GroupState {
                            joined: vec![false; ranks],
                            gone: vec![None; ranks],
                            mail: HashMap::new(),
                        }),
                        cv: Condvar::new(),
                    })
                })
                .clone()
        };
        if group.ranks != ranks {
            return Err(DriverError::JoinRefused {
                group: name,
                reason: format!(
                    "rank {rank} says the group has {ranks} ranks but it was formed with {}; pass the same size on every rank",
                    group.ranks
                ),
            });
        }
        let deadline = Instant::now() + opts.join_timeout;
        {
            let mut st = lock(&group.state);
            if st.joined[rank] {
                return Err(DriverError::JoinRefused {
                    group: name,
                    reason: format!("rank {rank} has already joined; each rank joins once"),
                });
            }
            st.joined[rank] = true;
            group.cv.notify_all();
            loop {
                if st.joined.iter().all(|j| *j) {
                    break;
                }
                let now = Instant::now();
                if now >= deadline {
                    let missing = (0..ranks).filter(|r| !st.joined[*r]).collect();
                    // Withdraw, so a late rank does not think this one is here.
                    st.joined[rank] = false;
                    return Err(DriverError::JoinTimeout {
                        group: name,
                        rank,
                        ranks,
                        missing,
                        waited_ms: opts.join_timeout.as_millis() as u64,
                    });
                }
                st = group
                    .cv
                    .wait_timeout(st, deadline - now)
                    .map(|(g, _)| g)
                    .unwrap_or_else(|e| e.into_inner().0);
            }
        }
        let worker = Worker::spawn(format!("{name}-rank{rank}-comm"))
            .map_err(|e| backend_error(Self::NAME, "spawn the comm stream thread", e))?;
        Ok(HostCommunicator {
            group,
            id,
            rank,
            ranks,
            opts,
            stream: HostCommStream(NEXT_STREAM.fetch_add(1, Ordering::Relaxed)),
            errors: Arc::default(),
            poisoned: Arc::default(),
            worker: Some(worker),
        })
    }
}

impl CollectiveDriver for HostDriver {
    type Communicator = HostCommunicator;
    type UniqueId = HostUniqueId;
    type DataType = DType;
    type CommStream = HostCommStream;

    fn group_id(id: &CommunicationId) -> Result<HostUniqueId, DriverError> {
        IDS.get_or_mint(id, || {
            Ok(HostUniqueId(NEXT_ID.fetch_add(1, Ordering::Relaxed)))
        })
    }

    fn join(id: HostUniqueId, ranks: usize, rank: usize) -> Result<HostCommunicator, DriverError> {
        Self::join_with(id, ranks, rank, JoinOptions::from_env())
    }

    fn data_type(dtype: DType, size: u64) -> Result<(DType, usize), DriverError> {
        // Every dtype has host arithmetic.
        Ok((dtype, whole_elements(dtype, size)?))
    }

    fn comm_stream(comm: &HostCommunicator) -> HostCommStream {
        comm.stream
    }

    fn rank_and_size(comm: &HostCommunicator) -> (usize, usize) {
        (comm.rank, comm.ranks)
    }

    fn all_reduce(
        comm: &HostCommunicator,
        src: &DeviceResource<Self>,
        dst: &DeviceResource<Self>,
        dtype: DType,
        count: usize,
        op: ReduceOp,
        stream: HostCommStream,
    ) -> Result<(), DriverError> {
        comm.check(stream)?;
        let es = dtype.size_bytes();
        let need = check_len("all_reduce", es, count, src.bytes)?;
        check_len("all_reduce", es, count, dst.bytes)?;
        mark_pending(Some(&src.fence), &dst.fence);
        let (group, rank, ranks, timeout) = (
            comm.group.clone(),
            comm.rank,
            comm.ranks,
            comm.opts.op_timeout,
        );
        let (src_buf, src_fence, dst_buf) =
            (src.buffer.clone(), src.fence.clone(), dst.buffer.clone());
        let what = format!("{count} {dtype} elements with {op:?}");
        comm.enqueue(Some(dst.fence.clone()), move || {
            src_fence.wait(timeout, rank, "all_reduce")?;
            let mine = snapshot(&src_buf, need)?;
            for peer in (0..ranks).filter(|p| *p != rank) {
                let m = Msg {
                    what: what.clone(),
                    elem: dtype,
                    count,
                    data: MsgData::Shard(mine.clone()),
                };
                group.put(rank, peer, Chan::Coll, m);
            }
            let mut shards: Vec<Arc<Held<CpuBuf>>> = Vec::with_capacity(ranks);
            for peer in 0..ranks {
                if peer == rank {
                    shards.push(mine.clone());
                    continue;
                }
                let m = group.take(peer, rank, Chan::Coll, timeout, "all_reduce")?;
                if m.what != what || m.elem != dtype || m.count != count {
                    return Err(DriverError::Mismatch {
                        op: "all_reduce",
                        rank,
                        mine: what.clone(),
                        peer,
                        theirs: m.what,
                    });
                }
                shards.push(m.data.shard()?);
            }
            let folded = {
                let refs = shards
                    .iter()
                    .map(|s| bytes_of(s, need))
                    .collect::<Result<Vec<_>, _>>()?;
                let mut out = lock(&dst_buf);
                fold_ranks(
                    HostDriver::NAME,
                    dtype,
                    op,
                    &refs,
                    bytes_mut_of(&mut out, need)?,
                )
            };
            group.release(shards);
            folded?;
            group.wait_read(&mine, rank, timeout)
        })
    }

    fn send(
        comm: &HostCommunicator,
        src: &DeviceResource<Self>,
        dtype: DType,
        count: usize,
        peer: usize,
        stream: HostCommStream,
    ) -> Result<(), DriverError> {
        comm.check(stream)?;
        check_peer(comm.rank, peer, comm.ranks)?;
        let need = check_len("send", dtype.size_bytes(), count, src.bytes)?;
        let (group, rank, timeout) = (comm.group.clone(), comm.rank, comm.opts.op_timeout);
        let (src_buf, src_fence) = (src.buffer.clone(), src.fence.clone());
        comm.enqueue(None, move || {
            src_fence.wait(timeout, rank, "send")?;
            let data = MsgData::Bytes(bytes_of(&lock(&src_buf), need)?.to_vec());
            let m = Msg {
                what: format!("{count} {dtype} elements"),
                elem: dtype,
                count,
                data,
            };
            group.put(rank, peer, Chan::P2p, m);
            Ok(())
        })
    }

    fn recv(
        comm: &HostCommunicator,
        dst: &DeviceResource<Self>,
        dtype: DType,
        count: usize,
        peer: usize,
        stream: HostCommStream,
    ) -> Result<(), DriverError> {
        comm.check(stream)?;
        check_peer(comm.rank, peer, comm.ranks)?;
        let need = check_len("recv", dtype.size_bytes(), count, dst.bytes)?;
        dst.fence.reset();
        let (group, rank, timeout) = (comm.group.clone(), comm.rank, comm.opts.op_timeout);
        let dst_buf = dst.buffer.clone();
        comm.enqueue(Some(dst.fence.clone()), move || {
            let m = group.take(peer, rank, Chan::P2p, timeout, "recv")?;
            if m.elem != dtype || m.count != count {
                return Err(DriverError::Mismatch {
                    op: "send/recv",
                    rank,
                    mine: format!("recv of {count} {dtype} elements"),
                    peer,
                    theirs: format!("send of {}", m.what),
                });
            }
            let mut out = lock(&dst_buf);
            bytes_mut_of(&mut out, need)?.copy_from_slice(m.data.bytes(need)?);
            Ok(())
        })
    }

    fn synchronize(comm: &HostCommunicator, stream: HostCommStream) -> Result<(), DriverError> {
        if stream != comm.stream {
            return Err(DriverError::WrongStream);
        }
        let (tx, rx) = mpsc::channel::<()>();
        let sent = comm.worker.as_ref().is_some_and(|w| {
            w.send(Box::new(move || {
                let _ = tx.send(());
            }))
        });
        if sent {
            // Every job's waits are bounded by op_timeout; allow for a few.
            let bound = comm.opts.op_timeout.saturating_mul(4) + Duration::from_secs(1);
            if rx.recv_timeout(bound).is_err() {
                return Err(DriverError::Timeout {
                    rank: comm.rank,
                    op: "synchronize",
                    waiting_for: "the comm stream to drain".into(),
                    waited_ms: bound.as_millis() as u64,
                });
            }
        }
        let mut errs = lock(&comm.errors);
        if errs.is_empty() {
            return Ok(());
        }
        let first = errs.remove(0);
        errs.clear();
        Err(first)
    }
}
