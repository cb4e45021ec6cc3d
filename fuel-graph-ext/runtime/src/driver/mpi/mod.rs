//! `MpiDriver`: CPU ranks in separate processes, over MPI (rsmpi), behind
//! the `mpi` cargo feature.
//!
//! Buffers and fences are the host driver's ([`HostDriver`]'s executor CPU
//! buffers and [`HostFence`]). MPI's own calls block, so the comm stream is
//! the MPI communicator itself and each collective completes before it
//! returns: it takes a ticket on the destination's fence, waits (at most the
//! op timeout) for the source's writes and its turn, calls MPI, then settles
//! the ticket. The collectives are MPI's own (`ops`, routed by `route` so
//! every rank gets bit-identical results; `calls` makes the ranks agree on
//! each call first); every MPI call's code is checked (`raw`), the
//! communicator running under `MPI_ERRORS_RETURN`.
//!
//! Threads: MPI is initialised on the first `join` at
//! `MPI_THREAD_MULTIPLE`, and the level MPI provides is checked (also when
//! the program initialised MPI itself); each communicator is its own
//! `MPI_Comm` (see [`MpiCommunicator`]), so communicators on several
//! threads run side by side. [`MpiDriver::finalize`], which a program must
//! call before it exits, refuses while any communicator or join is left.
//!
//! Join timeout: the ranks first tell each other they have arrived
//! (`arrive`), so a timeout lists exactly the ranks never heard from; then
//! `MPI_Comm_create_group`, which has no timeout, runs on a helper thread.

mod arrive;
mod agreed;
pub mod keep_freed;
mod ops;
mod p2p;
mod raw;
mod sendrecv_ring;
mod route;

use super::prologue::{
    backend_error, check_p2p, check_rank, check_src_dst, lock, p2p_prologue, Call, IdTable, Member,
};
use super::host::{bytes_mut_of, bytes_of, write_after, HostBuffer, HostFence, HostStream};
use super::{
    CollectiveDriver, CommunicationId, DeviceResource, Driver, DriverError, HostDriver, JoinOptions,
};
use crate::backend::cpu::Arena;
use crate::backend::Buf;
use agreed::Sig;
use fuel_graph_ext::device::{Device, DeviceKind};
use fuel_graph_ext::dtype::DType;
use fuel_graph_ext::op::ReduceOp;
use mpi::raw::AsRaw;
use mpi::topology::{Communicator as _, SimpleCommunicator};
use mpi::Threading;
use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The MPI driver.
#[derive(Clone, Copy, Debug, Default)]
pub struct MpiDriver;

/// An MPI group id: a hash of the group's name (every process computes the
/// same one, so nothing has to travel).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MpiUniqueId(pub u64);

/// The MPI comm stream: MPI calls are synchronous, so this only names the communicator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MpiCommStream(u64);

/// The MPI runtime as this driver started it: dropping the last handle
/// finalises MPI ([`MpiDriver::finalize`]).
struct Universe(#[allow(dead_code)] mpi::environment::Universe);
// SAFETY: the universe is only made under STATE's lock and only dropped
// when the last `Arc` goes (under STATE's lock, in `finalize`); no method
// of it is ever called, so sharing the handle between threads shares
// nothing MPI sees.
unsafe impl Send for Universe {}
// SAFETY: as for `Send`: no method is called through a shared reference.
unsafe impl Sync for Universe {}

/// Where MPI stands in this process, as far as the driver knows.
enum State {
    /// The driver has not touched MPI.
    Untouched,
    /// The driver initialised MPI: every communicator (and every join in
    /// progress) holds a clone of the handle, so `finalize` can tell
    /// whether any is left. `provided` is the thread level MPI granted.
    Owned {
        universe: Arc<Universe>,
        provided: Threading,
    },
    /// The program initialised MPI itself (and finalises it).
    Foreign,
    /// [`MpiDriver::finalize`] ran: MPI cannot start again in this process.
    Finalized,
}

static STATE: Mutex<State> = Mutex::new(State::Untouched);

/// Group names by id, to name groups in messages.
static IDS: IdTable<CommunicationId, MpiUniqueId> = IdTable::new();

/// The join tags in use by joins in progress, with the id joining under
/// each: two concurrent joins with one tag would be matched with each other.
static JOINING: Mutex<Option<HashMap<i32, MpiUniqueId>>> = Mutex::new(None);

static NEXT_STREAM: AtomicU64 = AtomicU64::new(1);

/// The thread level the driver needs: see [`MpiCommunicator`].
fn level_name(t: Threading) -> &'static str {
    match t {
        Threading::Single => "MPI_THREAD_SINGLE",
        Threading::Funneled => "MPI_THREAD_FUNNELED",
        Threading::Serialized => "MPI_THREAD_SERIALIZED",
        Threading::Multiple => "MPI_THREAD_MULTIPLE",
    }
}

fn backend(call: &'static str, reason: impl std::fmt::Display) -> DriverError {
    backend_error(MpiDriver::NAME, call, reason)
}

/// A host resource of the MPI driver as the host driver's (same buffers
/// and fences), and back.
fn as_host(r: DeviceResource<MpiDriver>) -> DeviceResource<HostDriver> {
    DeviceResource {
        buffer: r.buffer,
        fence: r.fence,
        bytes: r.bytes,
    }
}
fn from_host(r: DeviceResource<HostDriver>) -> DeviceResource<MpiDriver> {
    DeviceResource {
        buffer: r.buffer,
        fence: r.fence,
        bytes: r.bytes,
    }
}

/// An MPI communicator that crosses to the thread that uses it.
struct Comm(SimpleCommunicator);
// SAFETY: MPI runs at MPI_THREAD_MULTIPLE (checked before any communicator
// is made), so any thread may call MPI with any communicator; the handle is
// an opaque MPI object, not tied to the thread that made it.
unsafe impl Send for Comm {}

/// One process's membership of a group: its own communicator over every
/// process of `MPI_COMM_WORLD`.
///
/// Threads: MPI runs at `MPI_THREAD_MULTIPLE` (asked for when the driver
/// initialises MPI, checked in every case), so MPI calls from several
/// threads may overlap. Each communicator is its own `MPI_Comm`, made by
/// `MPI_Comm_create_group` with a tag from the group's id, so two
/// communicators of one process never match each other's messages or
/// collectives. One communicator is `Send` but not `Sync`: its calls never
/// overlap each other, as MPI requires of collectives on one communicator.
pub struct MpiCommunicator {
    // Declared before `_universe`, so it is freed (MPI_Comm_free) while
    // MPI is still initialised.
    comm: SimpleCommunicator,
    rank: usize,
    ranks: usize,
    opts: JoinOptions,
    stream: MpiCommStream,
    /// The first failure (an MPI error, ranks that disagreed): every later
    /// call refuses with it, because the ranks' calls no longer pair up.
    failed: Mutex<Option<String>>,
    /// Keeps MPI initialised while the communicator lives (`None` when the
    /// program initialised MPI itself).
    _universe: Option<Arc<Universe>>,
}

// SAFETY: see the type's doc: at MPI_THREAD_MULTIPLE any thread may call
// MPI, and the type is not Sync, so its own calls never overlap.
unsafe impl Send for MpiCommunicator {}

impl MpiCommunicator {
    /// The raw `MPI_Comm`.
    fn raw(&self) -> mpi::ffi::MPI_Comm {
        self.comm.as_raw()
    }
    /// `Poisoned` once a call has failed: the ranks' calls no longer pair up.
    fn healthy(&self) -> Result<(), DriverError> {
        match &*lock(&self.failed) {
            None => Ok(()),
            Some(reason) => Err(DriverError::Poisoned {
                rank: self.rank,
                reason: reason.clone(),
            }),
        }
    }
    /// Records `r`'s failure, if any (the first one stays), and passes it on.
    fn note<T>(&self, r: Result<T, DriverError>) -> Result<T, DriverError> {
        if let Err(e) = &r {
            lock(&self.failed).get_or_insert_with(|| e.to_string());
        }
        r
    }
}

impl MpiDriver {
    /// Finalises MPI, if this driver initialised it, once no communicator
    /// and no join is left: while one is, it refuses and does nothing, so
    /// MPI can never be finalised under a communicator. Call it before the
    /// process exits, after dropping every communicator (and everything
    /// holding one: executables compiled with a `DriverCommunicator`). MPI
    /// cannot be initialised again afterwards; a later `join` says so. When
    /// the program initialised MPI itself, this does nothing.
    pub fn finalize() -> Result<(), DriverError> {
        let mut st = lock(&STATE);
        if let State::Owned { universe, .. } = &*st {
            let others = Arc::strong_count(universe) - 1;
            if others > 0 {
                return Err(backend(
                    "MPI_Finalize",
                    format!(
                        "{others} communicator(s) or join(s) still use MPI; drop every MpiCommunicator (and whatever holds one) before finalising"
                    ),
                ));
            }
            *st = State::Finalized;
        }
        Ok(())
    }

    /// MPI, initialised at `MPI_THREAD_MULTIPLE` (or checked to be, when the
    /// program initialised it), and the handle a communicator keeps.
    fn runtime() -> Result<Option<Arc<Universe>>, DriverError> {
        keep_freed::keep_freed_memory().map_err(|e| backend("MPI_Init_thread", e.to_string()))?;
        let mut st = lock(&STATE);
        if let State::Untouched = &*st {
            *st = match mpi::initialize_with_threading(Threading::Multiple) {
                Some((universe, provided)) => State::Owned {
                    universe: Arc::new(Universe(universe)),
                    provided,
                },
                None => State::Foreign,
            };
        }
        let need = |provided: Threading, who: &str| {
            if provided == Threading::Multiple {
                return Ok(());
            }
            Err(backend(
                "MPI_Init_thread",
                format!(
                    "{who} MPI at {}, but the driver needs MPI_THREAD_MULTIPLE (communicators are used from several threads); {}",
                    level_name(provided),
                    if who == "the MPI library initialised" {
                        "use an MPI built with thread support (Open MPI: --enable-mpi-thread-multiple)"
                    } else {
                        "initialise MPI with Threading::Multiple, or let the driver initialise it"
                    }
                ),
            ))
        };
        match &*st {
            State::Owned { universe, provided } => {
                need(*provided, "the MPI library initialised")?;
                Ok(Some(universe.clone()))
            }
            State::Foreign => {
                if mpi::environment::is_finalized() {
                    return Err(backend(
                        "MPI_Init_thread",
                        "MPI is already finalised; join before finalising",
                    ));
                }
                need(mpi::environment::threading_support(), "the program initialised")?;
                Ok(None)
            }
            State::Finalized => Err(backend(
                "MPI_Init_thread",
                "MpiDriver::finalize already ran, and MPI starts once per process; join every group before finalising",
            )),
            State::Untouched => Err(backend("MPI_Init_thread", "MPI did not start")),
        }
    }

    /// [`CollectiveDriver::join_with`].
    ///
    /// Every process of `MPI_COMM_WORLD` joins, each as its world rank.
    /// The group's communicator comes from `MPI_Comm_create_group` over the
    /// world with a tag taken from `id`, so joins of different groups may
    /// run on several threads at once. MPI gives that call no timeout: it
    /// runs on a helper thread and the join gives up after
    /// `opts.join_timeout`, naming every other rank (MPI does not say who
    /// arrived); the helper stays inside MPI until the others come, and
    /// keeps MPI from being finalised meanwhile.
    fn join_world(
        id: MpiUniqueId,
        ranks: usize,
        rank: usize,
        opts: JoinOptions,
    ) -> Result<MpiCommunicator, DriverError> {
        check_rank(rank, ranks)?;
        let universe = Self::runtime()?;
        let group = IDS
            .key_of(id)
            .map_or_else(|| format!("{id:?}"), |k| k.to_string());
        let world = SimpleCommunicator::world();
        let (wr, ws) = (world.rank() as usize, world.size() as usize);
        if ws != ranks || wr != rank {
            return Err(DriverError::JoinRefused {
                group,
                reason: format!(
                    "this process is rank {wr} of {ws} in MPI_COMM_WORLD but asked to join as rank {rank} of {ranks}; launch with `mpirun -n {ranks}` and pass the MPI rank"
                ),
            });
        }
        // Tags 0..=32767 are valid everywhere (MPI_TAG_UB is at least that):
        // the communicator is made under `tag`, arrivals are told under
        // `tag + 16384`.
        let tag = (id.0 % 16384) as i32;
        {
            let mut joining = lock(&JOINING);
            let joining = joining.get_or_insert_with(HashMap::new);
            match joining.get(&tag) {
                Some(other) if *other == id => {
                    return Err(DriverError::JoinRefused {
                        group,
                        reason: format!(
                        "rank {rank} is already joining it on another thread; each rank joins once"
                    ),
                    })
                }
                Some(other) => {
                    let theirs = IDS
                        .key_of(*other)
                        .map_or_else(|| format!("{other:?}"), |k| k.to_string());
                    return Err(DriverError::JoinRefused {
                        group,
                        reason: format!(
                            "group `{theirs}` is joining at the same time under the same MPI tag {tag}; rename one of the groups, or join them one after the other"
                        ),
                    });
                }
                None => {
                    joining.insert(tag, id);
                }
            }
        }
        let started = std::time::Instant::now();
        let heard = arrive::arrivals(rank, ranks, tag + 16384, id.0, opts.join_timeout);
        let unjoin = || {
            if let Some(j) = lock(&JOINING).as_mut() {
                j.remove(&tag);
            }
        };
        match heard {
            Ok(Ok(())) => {}
            Ok(Err(missing)) => {
                unjoin();
                return Err(DriverError::JoinTimeout {
                    group,
                    rank,
                    ranks,
                    missing,
                    waited_ms: opts.join_timeout.as_millis() as u64,
                });
            }
            Err(e) => {
                unjoin();
                return Err(e);
            }
        }
        let (tx, rx) = std::sync::mpsc::channel();
        let helper_universe = universe.clone();
        let spawned = std::thread::Builder::new()
            .name(format!("mpi-join-{tag}"))
            .spawn(move || {
                let world = SimpleCommunicator::world();
                let made = world.split_by_subgroup_with_tag(&world.group(), tag);
                if let Some(j) = lock(&JOINING).as_mut() {
                    j.remove(&tag);
                }
                // The handle travels with the communicator, so this thread
                // holds neither once the join has them (`finalize` counts
                // handles). A join that gave up has dropped the receiver:
                // then both are dropped here, the communicator first.
                let _ = tx.send((made.map(Comm), helper_universe));
            });
        if let Err(e) = spawned {
            if let Some(j) = lock(&JOINING).as_mut() {
                j.remove(&tag);
            }
            return Err(backend("spawn the join thread", e));
        }
        let left = opts.join_timeout.saturating_sub(started.elapsed());
        let comm = match rx.recv_timeout(left.max(Duration::from_millis(1))) {
            Ok((Some(Comm(c)), _helper_handle)) => c,
            Ok((None, _helper_handle)) => {
                return Err(backend(
                    "MPI_Comm_create_group",
                    "this process is not in the group it made",
                ))
            }
            Err(_) => {
                // Every rank was heard from, so none is missing: one left
                // between saying so and making the communicator.
                return Err(DriverError::Timeout {
                    rank,
                    op: "join",
                    waiting_for: format!(
                        "MPI_Comm_create_group of group `{group}` after every rank had arrived (a rank gave up or exited in between)"
                    ),
                    waited_ms: opts.join_timeout.as_millis() as u64,
                });
            }
        };
        raw::errors_return(comm.as_raw())?;
        Ok(MpiCommunicator {
            comm,
            rank,
            ranks,
            opts,
            stream: MpiCommStream(NEXT_STREAM.fetch_add(1, Ordering::Relaxed)),
            failed: Mutex::new(None),
            _universe: universe,
        })
    }
}

impl Member for MpiCommunicator {
    type Stream = MpiCommStream;
    fn rank_and_size(&self) -> (usize, usize) {
        (self.rank, self.ranks)
    }
    fn stream(&self) -> MpiCommStream {
        self.stream
    }
}

/// Runs `f`, a write of `dst` that reads `src` first (if any), as one
/// write on `dst`'s fence timeline: it takes a ticket, waits (at most the op
/// timeout) for the writes of `src` issued before it and for its turn on
/// `dst`, then settles the ticket with `f`'s outcome. MPI's calls finish
/// before they return, so the ticket is settled when this returns, and a
/// reader on another thread that was issued meanwhile waits for it.
fn completing(
    comm: &MpiCommunicator,
    op: &'static str,
    src: Option<&HostFence>,
    dst: &HostFence,
    f: impl FnOnce() -> Result<(), DriverError>,
) -> Result<(), DriverError> {
    let (point, ticket) = match src {
        Some(s) => {
            let (p, t) = write_after(s, dst);
            (Some((s, p)), t)
        }
        None => (None, dst.begin_write()),
    };
    let (timeout, rank) = (comm.opts.op_timeout, comm.rank);
    let res = comm.healthy().and_then(|()| {
        ticket.wait_turn(timeout, rank, op)?;
        if let Some((s, p)) = point {
            s.wait_point(p, timeout, rank, op)?;
        }
        comm.note(f())
    });
    match res {
        Ok(()) => {
            ticket.complete();
            Ok(())
        }
        Err(e) => {
            ticket.fail(e.clone());
            Err(e)
        }
    }
}

impl Driver for MpiDriver {
    type Device = Arc<Arena>;
    type Buffer = HostBuffer;
    type Fence = HostFence;
    type Stream = HostStream;
    const NAME: &'static str = "mpi";
    const KIND: DeviceKind = DeviceKind::Cpu;

    fn open(device: Device) -> Result<Arc<Arena>, DriverError> {
        HostDriver::open(device)
    }
    fn new_stream(dev: &Arc<Arena>) -> Result<HostStream, DriverError> {
        HostDriver::new_stream(dev)
    }
    fn alloc(dev: &Arc<Arena>, bytes: usize) -> Result<DeviceResource<Self>, DriverError> {
        HostDriver::alloc(dev, bytes).map(from_host)
    }
    fn upload(dev: &Arc<Arena>, bytes: &[u8]) -> Result<DeviceResource<Self>, DriverError> {
        HostDriver::upload(dev, bytes).map(from_host)
    }
    fn download(res: &DeviceResource<Self>, timeout: Duration) -> Result<Vec<u8>, DriverError> {
        res.fence.wait(timeout, 0, "download")?;
        Ok(bytes_of(&lock(&res.buffer), res.bytes)?.to_vec())
    }
    fn lend(buf: &Arc<Buf>) -> Result<DeviceResource<Self>, DriverError> {
        HostDriver::lend(buf).map(from_host)
    }
    fn adopt(buf: Buf) -> Result<DeviceResource<Self>, DriverError> {
        HostDriver::adopt(buf).map(from_host)
    }
    fn reclaim(res: DeviceResource<Self>) -> Result<Buf, DriverError> {
        HostDriver::reclaim(as_host(res))
    }
}

impl CollectiveDriver for MpiDriver {
    type Communicator = MpiCommunicator;
    type UniqueId = MpiUniqueId;
    type DataType = DType;
    type CommStream = MpiCommStream;

    fn group_id(id: &CommunicationId) -> Result<MpiUniqueId, DriverError> {
        IDS.get_or_mint(id, || {
            let mut h = DefaultHasher::new();
            id.hash(&mut h);
            Ok(MpiUniqueId(h.finish()))
        })
    }

    fn join_with(
        id: MpiUniqueId,
        ranks: usize,
        rank: usize,
        opts: JoinOptions,
    ) -> Result<MpiCommunicator, DriverError> {
        Self::join_world(id, ranks, rank, opts)
    }

    fn name_of(dtype: DType) -> Result<DType, DriverError> {
        Ok(dtype)
    }

    fn all_reduce(
        comm: &MpiCommunicator,
        src: &DeviceResource<Self>,
        dst: &DeviceResource<Self>,
        dtype: DType,
        count: usize,
        op: ReduceOp,
        stream: MpiCommStream,
    ) -> Result<(), DriverError> {
        let es = dtype.size_bytes();
        let need = check_src_dst("all_reduce", es, (count, src.bytes), (count, dst.bytes))?;
        let sig = Sig::new(0, dtype, count).op(op);
        agreed::run(comm, stream, sig, src, need, dst, need, |c, s, d| {
            ops::all_reduce(c, dtype, op, s, d)
        })
    }

    fn all_gather(
        comm: &MpiCommunicator,
        src: &DeviceResource<Self>,
        dst: &DeviceResource<Self>,
        dtype: DType,
        count: usize,
        stream: MpiCommStream,
    ) -> Result<bool, DriverError> {
        let es = dtype.size_bytes();
        let total = count.saturating_mul(comm.ranks);
        let need = check_src_dst("all_gather", es, (count, src.bytes), (total, dst.bytes))?;
        let counts = vec![count; comm.ranks];
        let sig = Sig::new(2, dtype, count);
        agreed::run(comm, stream, sig, src, need, dst, total * es, |c, s, d| {
            ops::all_gather(c, dtype, &counts, s, d)
        })?;
        Ok(true)
    }

    fn broadcast(
        comm: &MpiCommunicator,
        src: &DeviceResource<Self>,
        dst: &DeviceResource<Self>,
        dtype: DType,
        count: usize,
        root: usize,
        stream: MpiCommStream,
    ) -> Result<bool, DriverError> {
        check_rank(root, comm.ranks)?;
        let es = dtype.size_bytes();
        let need = check_src_dst("broadcast", es, (count, src.bytes), (count, dst.bytes))?;
        let sig = Sig::new(3, dtype, count).root(root);
        agreed::run(comm, stream, sig, src, need, dst, need, |c, s, d| {
            if c.rank == root {
                d.copy_from_slice(s);
            }
            ops::broadcast(c, dtype, root, d)
        })?;
        Ok(true)
    }

    fn reduce_scatter(
        comm: &MpiCommunicator,
        src: &DeviceResource<Self>,
        dst: &DeviceResource<Self>,
        dtype: DType,
        count: usize,
        op: ReduceOp,
        stream: MpiCommStream,
    ) -> Result<bool, DriverError> {
        let es = dtype.size_bytes();
        let total = count.saturating_mul(comm.ranks);
        let need = check_src_dst("reduce_scatter", es, (total, src.bytes), (count, dst.bytes))?;
        let counts = vec![count; comm.ranks];
        let sig = Sig::new(1, dtype, count).op(op);
        agreed::run(comm, stream, sig, src, need, dst, count * es, |c, s, d| {
            ops::reduce_scatter(c, dtype, op, &counts, s, d)
        })?;
        Ok(true)
    }

    fn send(
        comm: &MpiCommunicator,
        src: &DeviceResource<Self>,
        dtype: DType,
        count: usize,
        peer: usize,
        stream: MpiCommStream,
    ) -> Result<(), DriverError> {
        comm.check(stream)?;
        comm.healthy()?;
        let (rank, ranks, es) = (comm.rank, comm.ranks, dtype.size_bytes());
        let need = check_p2p("send", rank, peer, ranks, es, count, src.bytes)?;
        src.fence.wait(comm.opts.op_timeout, comm.rank, "send")?;
        let held = lock(&src.buffer);
        let r = p2p::send(comm, bytes_of(&held, need)?, peer);
        comm.note(r)
    }

    fn recv(
        comm: &MpiCommunicator,
        dst: &DeviceResource<Self>,
        dtype: DType,
        count: usize,
        peer: usize,
        stream: MpiCommStream,
    ) -> Result<(), DriverError> {
        let es = dtype.size_bytes();
        let need = p2p_prologue(comm, stream, "recv", peer, (es, count), dst.bytes)?;
        completing(comm, "recv", None, &dst.fence, || {
            let mut held = lock(&dst.buffer);
            p2p::recv(comm, bytes_mut_of(&mut held, need)?, peer, || {
                format!("recv of {count} {dtype} elements ({need} bytes)")
            })
        })
    }

    fn all_to_all(
        comm: &MpiCommunicator,
        src: &DeviceResource<Self>,
        dst: &DeviceResource<Self>,
        dtype: DType,
        send: &[usize],
        recv: &[usize],
        stream: MpiCommStream,
    ) -> Result<(), DriverError> {
        Self::all_to_all_v(Call(comm, src, dst, dtype, stream), send, recv)
    }

    fn all_gather_uneven(
        comm: &MpiCommunicator,
        src: &DeviceResource<Self>,
        dst: &DeviceResource<Self>,
        dtype: DType,
        counts: &[usize],
        stream: MpiCommStream,
    ) -> Result<bool, DriverError> {
        // `MPI_Allgatherv`, after the ranks agree on the counts.
        Self::all_gather_v(Call(comm, src, dst, dtype, stream), counts).map(|()| true)
    }

    fn reduce_scatter_uneven(
        comm: &MpiCommunicator,
        src: &DeviceResource<Self>,
        dst: &DeviceResource<Self>,
        dtype: DType,
        counts: &[usize],
        op: ReduceOp,
        stream: MpiCommStream,
    ) -> Result<bool, DriverError> {
        // `MPI_Reduce_scatter`, after the ranks agree on the counts.
        Self::reduce_scatter_v(Call(comm, src, dst, dtype, stream), counts, op).map(|()| true)
    }

    fn synchronize(comm: &MpiCommunicator, stream: MpiCommStream) -> Result<(), DriverError> {
        // Every call already completed before it returned.
        comm.check(stream)
    }
}
