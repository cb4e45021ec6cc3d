//! [`HostDriver`]: CPU ranks that are threads of one process, meeting over
//! shared memory.
//!
//! A group lives in a process-wide table keyed by its [`HostUniqueId`]. Each
//! joined rank owns a [`HostCommunicator`] with one worker thread, its comm
//! stream. A collective call checks its arguments, takes a ticket on the
//! destination's fence (a timeline, see [`HostFence`]), notes the point of
//! the source's fence it must read after, and queues a job; the job (on the
//! comm stream) waits for that point and for its ticket's turn, exchanges
//! bytes through per-(src, dst) FIFO mailboxes and settles its ticket.
//! Sends are buffered, so a send never waits for its receive.
//!
//! A rank leaves when its communicator is dropped (after its queued work
//! finishes) or when one of its jobs fails; peers waiting on it then get
//! [`DriverError::PeerGone`] instead of waiting forever. Every wait is also
//! bounded by the [`JoinOptions`] timeouts.

use super::prologue::{
    adopt_buf, backend_error, check_rank, fold_ranks, lend_buf, lock, p2p_prologue, prologue,
    reclaim_buf, Call, Held, Member, Shared,
};
use super::{CollectiveDriver, CommunicationId, DeviceResource, Driver, DriverError, JoinOptions};
use crate::backend::cpu::{Arena, CpuBuf};
use crate::backend::fault::Faults;
use crate::backend::worker::Worker;
use crate::backend::Buf;
use fuel_graph_ext::device::{Device, DeviceKind};
use fuel_graph_ext::dtype::DType;
use fuel_graph_ext::op::ReduceOp;
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// The in-process driver for CPU ranks.
mod exchange;
mod tickets;
mod mailbox;
mod uneven;

pub use tickets::{FencePoint, HostFence, HostStream, Ticket};
use mailbox::{
    group_name, groups, Chan, Group, GroupState, Msg, MsgData, IDS, NEXT_ID, NEXT_STREAM,
};

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
pub(super) fn snapshot(src: &HostBuffer, need: usize) -> Result<Arc<Held<CpuBuf>>, DriverError> {
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
        Worker::spawn(format!("{}-compute", dev.device), std::time::Duration::ZERO)
            .map(|w| HostStream(Arc::new(w)))
            .map_err(|e| backend_error(Self::NAME, "spawn a stream thread", e))
    }

    fn alloc(dev: &Arc<Arena>, bytes: usize) -> Result<DeviceResource<Self>, DriverError> {
        let mut buf = dev
            .alloc(bytes, &Faults::default())
            .map_err(|e| backend_error(Self::NAME, "alloc", e))?;
        // The arena recycles freed buffers with their old bytes; the trait
        // promises zeros.
        buf.bytes_mut().fill(0);
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
        lend_buf::<Self, CpuBuf>(buf, HostFence::ready())
    }

    fn adopt(buf: Buf) -> Result<DeviceResource<Self>, DriverError> {
        adopt_buf::<Self, CpuBuf>(buf, HostFence::ready())
    }

    fn reclaim(res: DeviceResource<Self>) -> Result<Buf, DriverError> {
        reclaim_buf(res)
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

    /// Queues `job` on the comm stream. With a destination `ticket`, the
    /// job first waits for its turn (every earlier write to the buffer has
    /// settled) and its outcome settles the ticket. A failure records the
    /// error, poisons this rank and tells the peers.
    fn enqueue(
        &self,
        ticket: Option<Ticket>,
        op: &'static str,
        job: impl FnOnce() -> Result<(), DriverError> + Send + 'static,
    ) -> Result<(), DriverError> {
        let group = self.group.clone();
        let errors = self.errors.clone();
        let poisoned = self.poisoned.clone();
        let (rank, timeout) = (self.rank, self.opts.op_timeout);
        let run = move || {
            let turn = match &ticket {
                Some(t) => t.wait_turn(timeout, rank, op),
                None => Ok(()),
            };
            let res = turn.and_then(|()| {
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(job)).unwrap_or_else(|_| {
                    Err(DriverError::Backend {
                        driver: HostDriver::NAME,
                        call: "comm stream job",
                        reason: "the job panicked".into(),
                    })
                })
            });
            match res {
                Ok(()) => {
                    if let Some(t) = ticket {
                        t.complete();
                    }
                }
                Err(e) => {
                    if let Some(t) = ticket {
                        t.fail(e.clone());
                    }
                    lock(&poisoned).get_or_insert_with(|| e.to_string());
                    group.leave(rank, format!("it failed: {e}"));
                    lock(&errors).push(e);
                }
            }
        };
        // A job that never reaches the thread drops its ticket, which
        // fails it: readers of the buffer get an error, not a hang.
        let sent = self.worker.as_ref().is_some_and(|w| w.send(Box::new(run)));
        if !sent {
            return Err(DriverError::Backend {
                driver: HostDriver::NAME,
                call: "enqueue",
                reason: "the comm stream thread is gone".into(),
            });
        }
        Ok(())
    }
}

/// Copies bytes `range` of `from` into `to` (two ranks' all-reduce
/// results). The two locks are taken in address order, so two ranks copying
/// from each other cannot deadlock.
fn copy_run(
    from: &HostBuffer,
    to: &HostBuffer,
    range: std::ops::Range<usize>,
) -> Result<(), DriverError> {
    if Arc::ptr_eq(from, to) {
        return Ok(());
    }
    let end = range.end;
    let (mut a, mut b);
    let (src, dst) = if Arc::as_ptr(from) < Arc::as_ptr(to) {
        a = lock(from);
        b = lock(to);
        (&mut a, &mut b)
    } else {
        b = lock(to);
        a = lock(from);
        (&mut a, &mut b)
    };
    let bytes = bytes_of(src, end)?;
    bytes_mut_of(dst, end)?[range.clone()].copy_from_slice(&bytes[range]);
    Ok(())
}

/// Issues a write of `dst` that reads `src`: a ticket on `dst`'s fence,
/// and the point of `src`'s fence the write must read after. In place (one
/// fence) that point is the write just before the ticket.
pub(super) fn write_after(src: &HostFence, dst: &HostFence) -> (FencePoint, Ticket) {
    if src.same(dst) {
        let t = dst.begin_write();
        (t.before(), t)
    } else {
        let p = src.point();
        (p, dst.begin_write())
    }
}

/// What a job that reads a source and writes a destination takes onto the
/// comm stream: the group, this rank, the group size, the per-operation
/// timeout, both buffers, and the point of the source's fence to read after.
struct Job {
    group: Arc<Group>,
    rank: usize,
    ranks: usize,
    timeout: Duration,
    src_buf: HostBuffer,
    dst_buf: HostBuffer,
    src_fence: HostFence,
    src_point: FencePoint,
}

impl Job {
    /// The job of `comm` reading `src` and writing `dst`, and the ticket of
    /// its write on `dst`'s fence (after `src`'s writer; see [`write_after`]).
    fn new(
        comm: &HostCommunicator,
        src: &DeviceResource<HostDriver>,
        dst: &DeviceResource<HostDriver>,
    ) -> (Job, Ticket) {
        let (src_point, ticket) = write_after(&src.fence, &dst.fence);
        let job = Job {
            group: comm.group.clone(),
            rank: comm.rank,
            ranks: comm.ranks,
            timeout: comm.opts.op_timeout,
            src_buf: src.buffer.clone(),
            dst_buf: dst.buffer.clone(),
            src_fence: src.fence.clone(),
            src_point,
        };
        (job, ticket)
    }

    /// The group, this rank, the group size, the timeout and both buffers.
    fn into_parts(self) -> (Arc<Group>, usize, usize, Duration, HostBuffer, HostBuffer) {
        let Job {
            group,
            rank,
            ranks,
            timeout,
            src_buf,
            dst_buf,
            ..
        } = self;
        (group, rank, ranks, timeout, src_buf, dst_buf)
    }

    /// Waits, on the comm stream, until the source holds what `op` reads.
    fn wait_src(&self, op: &'static str) -> Result<(), DriverError> {
        self.src_fence
            .wait_point(self.src_point, self.timeout, self.rank, op)
    }
}

impl Member for HostCommunicator {
    type Stream = HostCommStream;
    fn rank_and_size(&self) -> (usize, usize) {
        (self.rank, self.ranks)
    }
    fn stream(&self) -> HostCommStream {
        self.stream
    }
    /// Its own stream, and no job of it has failed.
    fn check(&self, stream: HostCommStream) -> Result<(), DriverError> {
        if stream != self.stream {
            return Err(DriverError::WrongStream);
        }
        match lock(&self.poisoned).clone() {
            Some(reason) => Err(DriverError::Poisoned {
                rank: self.rank,
                reason,
            }),
            None => Ok(()),
        }
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

    fn join_with(
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
        let worker = Worker::spawn(format!("{name}-rank{rank}-comm"), std::time::Duration::ZERO)
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

    fn name_of(dtype: DType) -> Result<DType, DriverError> {
        // Every dtype has host arithmetic.
        Ok(dtype)
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
        let need = prologue(
            comm,
            stream,
            "all_reduce",
            dtype.size_bytes(),
            (count, src.bytes),
            (count, dst.bytes),
        )?;
        let (job, ticket) = Job::new(comm, src, dst);
        let what = format!("{count} {dtype} elements with {op:?}");
        let es = dtype.size_bytes();
        comm.enqueue(Some(ticket), "all_reduce", move || {
            job.wait_src("all_reduce")?;
            let (group, rank, ranks, timeout, src_buf, dst_buf) = job.into_parts();
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
            // Reduce-scatter: this rank folds its own run of the elements
            // from every shard, in rank order (so every rank's result has
            // the same bits), into that run of its result...
            let runs = |r: usize| (r * count / ranks * es)..((r + 1) * count / ranks * es);
            let my = runs(rank);
            let folded = {
                let refs = shards
                    .iter()
                    .map(|s| bytes_of(s, need).map(|b| &b[my.clone()]))
                    .collect::<Result<Vec<_>, _>>()?;
                let mut out = lock(&dst_buf);
                fold_ranks(
                    HostDriver::NAME,
                    dtype,
                    op,
                    &refs,
                    &mut bytes_mut_of(&mut out, need)?[my.clone()],
                )
            };
            group.release(shards);
            folded?;
            // ...then an all-gather: every rank copies the others' runs
            // out of their results. n reads of a shard in all instead of
            // every rank reading every shard.
            let token = Arc::new(());
            for peer in (0..ranks).filter(|p| *p != rank) {
                let data = MsgData::Part {
                    buf: dst_buf.clone(),
                    range: my.clone(),
                    token: token.clone(),
                };
                let m = Msg {
                    what: what.clone(),
                    elem: dtype,
                    count,
                    data,
                };
                group.put(rank, peer, Chan::Part, m);
            }
            for peer in (0..ranks).filter(|p| *p != rank) {
                let m = group.take(peer, rank, Chan::Part, timeout, "all_reduce")?;
                let MsgData::Part { buf, range, token } = m.data else {
                    return Err(backend_error(
                        HostDriver::NAME,
                        "all_reduce",
                        "a message other than a result arrived on the result channel",
                    ));
                };
                let copied = copy_run(&buf, &dst_buf, range);
                // The result's handle goes before the token, so a sender
                // that sees every token back holds its result alone.
                drop(buf);
                group.release(vec![token]);
                copied?;
            }
            group.wait_read(&token, rank, timeout)?;
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
        let es = dtype.size_bytes();
        let need = p2p_prologue(comm, stream, "send", peer, (es, count), src.bytes)?;
        let (group, rank, timeout) = (comm.group.clone(), comm.rank, comm.opts.op_timeout);
        let (src_buf, src_fence) = (src.buffer.clone(), src.fence.clone());
        let src_point = src_fence.point();
        comm.enqueue(None, "send", move || {
            src_fence.wait_point(src_point, timeout, rank, "send")?;
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
        let es = dtype.size_bytes();
        let need = p2p_prologue(comm, stream, "recv", peer, (es, count), dst.bytes)?;
        let ticket = dst.fence.begin_write();
        let (group, rank, timeout) = (comm.group.clone(), comm.rank, comm.opts.op_timeout);
        let dst_buf = dst.buffer.clone();
        comm.enqueue(Some(ticket), "recv", move || {
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

    fn all_to_all(
        comm: &HostCommunicator,
        src: &DeviceResource<Self>,
        dst: &DeviceResource<Self>,
        dtype: DType,
        send: &[usize],
        recv: &[usize],
        stream: HostCommStream,
    ) -> Result<(), DriverError> {
        Self::all_to_all_mail(Call(comm, src, dst, dtype, stream), send, recv)
    }

    fn all_gather_uneven(
        comm: &HostCommunicator,
        src: &DeviceResource<Self>,
        dst: &DeviceResource<Self>,
        dtype: DType,
        counts: &[usize],
        stream: HostCommStream,
    ) -> Result<bool, DriverError> {
        Self::all_gather_mail(Call(comm, src, dst, dtype, stream), counts).map(|()| true)
    }

    fn reduce_scatter_uneven(
        comm: &HostCommunicator,
        src: &DeviceResource<Self>,
        dst: &DeviceResource<Self>,
        dtype: DType,
        counts: &[usize],
        op: ReduceOp,
        stream: HostCommStream,
    ) -> Result<bool, DriverError> {
        Self::reduce_scatter_mail(Call(comm, src, dst, dtype, stream), counts, op).map(|()| true)
    }

    fn synchronize(comm: &HostCommunicator, stream: HostCommStream) -> Result<(), DriverError> {
        if stream != comm.stream() {
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
