//! `MpiDriver`: CPU ranks in separate processes, over MPI (rsmpi), behind
//! the `mpi` cargo feature.
//!
//! Buffers and fences are the host driver's ([`HostDriver`]'s executor CPU
//! buffers and [`HostFence`]). MPI's own calls block, so the comm stream is
//! the MPI communicator itself and each collective completes before it
//! returns: it first waits (at most the op timeout) for the source's fence,
//! then calls MPI, then signals the destination's fence. `all_reduce` is an
//! `MPI_Allgather` of the bytes followed by the same rank-order fold as the
//! host driver, so every element type and reduce op is supported and every
//! rank gets bit-identical results. MPI is initialised on the first `join`
//! (thread level `Serialized`) and finalised by [`MpiDriver::finalize`],
//! which a program must call before it exits.
//!
//! Join timeout: `join` enters a non-blocking barrier and polls it; if the
//! barrier does not complete within the join timeout the error lists every
//! other rank, because MPI does not say which ranks have arrived.

use super::common::{
    backend_error, check_p2p, check_rank, check_src_dst, fold_ranks, lock, whole_elements,
};
use super::host::{bytes_mut_of, bytes_of, HostBuffer, HostFence, HostStream};
use super::{
    CollectiveDriver, CommunicationId, DeviceResource, Driver, DriverError, HostDriver, JoinOptions,
};
use crate::backend::cpu::Arena;
use crate::backend::fault::Faults;
use crate::backend::Buf;
use crate::device::{Device, DeviceKind};
use crate::dtype::DType;
use crate::op::ReduceOp;
use mpi::topology::{Communicator as _, SimpleCommunicator};
use mpi::traits::{CommunicatorCollectives, Destination, Source};
use mpi::Threading;
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

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

// Held only so that dropping it finalises MPI.
struct Universe(#[allow(dead_code)] mpi::environment::Universe);
// SAFETY: the universe is only created and dropped under UNIVERSE's lock,
// and MPI is initialised at thread level Serialized.
unsafe impl Send for Universe {}

static UNIVERSE: Mutex<Option<Universe>> = Mutex::new(None);

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

/// One process's membership of the MPI world.
pub struct MpiCommunicator {
    world: SimpleCommunicator,
    rank: usize,
    ranks: usize,
    opts: JoinOptions,
    stream: MpiCommStream,
}

// SAFETY: MPI runs at thread level Serialized, which allows calls from any
// thread as long as they do not overlap; the type is not Sync, so one thread
// at a time uses it.
unsafe impl Send for MpiCommunicator {}

impl MpiDriver {
    /// Finalises MPI. Call once, after every communicator is dropped.
    pub fn finalize() {
        drop(lock(&UNIVERSE).take());
    }

    fn world() -> Result<SimpleCommunicator, DriverError> {
        let mut u = lock(&UNIVERSE);
        if u.is_none() {
            if mpi::environment::is_initialized() {
                return Ok(SimpleCommunicator::world());
            }
            let (universe, _) =
                mpi::initialize_with_threading(Threading::Serialized).ok_or_else(|| {
                    backend(
                        "MPI_Init_thread",
                        "MPI is already finalised; initialise it once per process",
                    )
                })?;
            *u = Some(Universe(universe));
        }
        Ok(SimpleCommunicator::world())
    }

    /// [`CollectiveDriver::join`] with explicit timeouts.
    pub fn join_with(
        _id: MpiUniqueId,
        ranks: usize,
        rank: usize,
        opts: JoinOptions,
    ) -> Result<MpiCommunicator, DriverError> {
        check_rank(rank, ranks)?;
        let world = Self::world()?;
        let (wr, ws) = (world.rank() as usize, world.size() as usize);
        if ws != ranks || wr != rank {
            return Err(DriverError::JoinRefused {
                group: "MPI_COMM_WORLD".into(),
                reason: format!(
                    "this process is rank {wr} of {ws} in MPI_COMM_WORLD but asked to join as rank {rank} of {ranks}; launch with `mpirun -n {ranks}` and pass the MPI rank"
                ),
            });
        }
        let deadline = Instant::now() + opts.join_timeout;
        let mut req = world.immediate_barrier();
        loop {
            match req.test() {
                Ok(_) => break,
                Err(r) => req = r,
            }
            if Instant::now() >= deadline {
                // The request still refers to no buffer; MPI keeps it alive.
                std::mem::forget(req);
                return Err(DriverError::JoinTimeout {
                    group: "MPI_COMM_WORLD".into(),
                    rank,
                    ranks,
                    missing: (0..ranks).filter(|r| *r != rank).collect(),
                    waited_ms: opts.join_timeout.as_millis() as u64,
                });
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        Ok(MpiCommunicator {
            world,
            rank,
            ranks,
            opts,
            stream: MpiCommStream(rank as u64 + 1),
        })
    }

    fn check(comm: &MpiCommunicator, stream: MpiCommStream) -> Result<(), DriverError> {
        if stream != comm.stream {
            return Err(DriverError::WrongStream);
        }
        Ok(())
    }
}

/// Runs `f` with `dst`'s fence pending, then signals or fails it.
fn completing(
    dst: &HostFence,
    f: impl FnOnce() -> Result<(), DriverError>,
) -> Result<(), DriverError> {
    dst.reset();
    match f() {
        Ok(()) => {
            dst.signal();
            Ok(())
        }
        Err(e) => {
            dst.fail(e.clone());
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
        let mut h = DefaultHasher::new();
        id.hash(&mut h);
        Ok(MpiUniqueId(h.finish()))
    }

    fn join(id: MpiUniqueId, ranks: usize, rank: usize) -> Result<MpiCommunicator, DriverError> {
        Self::join_with(id, ranks, rank, JoinOptions::from_env()?)
    }

    fn data_type(dtype: DType, size: u64) -> Result<(DType, usize), DriverError> {
        Ok((dtype, whole_elements(dtype, size)?))
    }

    fn comm_stream(comm: &MpiCommunicator) -> MpiCommStream {
        comm.stream
    }

    fn rank_and_size(comm: &MpiCommunicator) -> (usize, usize) {
        (comm.rank, comm.ranks)
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
        Self::check(comm, stream)?;
        let need = check_src_dst(
            "all_reduce",
            dtype.size_bytes(),
            (count, src.bytes),
            (count, dst.bytes),
        )?;
        src.fence
            .wait(comm.opts.op_timeout, comm.rank, "all_reduce")?;
        completing(&dst.fence, || {
            // Every rank first agrees on the size, so a mismatch is an error
            // on every rank instead of undefined behaviour inside MPI.
            let mut sizes = vec![0u64; comm.ranks];
            comm.world.all_gather_into(&(need as u64), &mut sizes[..]);
            if let Some((peer, theirs)) = sizes.iter().enumerate().find(|(_, s)| **s != need as u64)
            {
                return Err(DriverError::Mismatch {
                    op: "all_reduce",
                    rank: comm.rank,
                    mine: format!("{need} bytes"),
                    peer,
                    theirs: format!("{theirs} bytes"),
                });
            }
            let mut out = lock(&dst.buffer);
            // Every rank's bytes, gathered into one aligned buffer of the
            // destination's arena, then folded there in rank order.
            let mut all = out
                .get()
                .map(|b| b.arena().clone())
                .ok_or_else(|| backend("alloc", "the destination is not a host buffer"))?
                .alloc(need * comm.ranks, &Faults::default())
                .map_err(|e| backend("alloc", e))?;
            {
                let src_held = lock(&src.buffer);
                comm.world
                    .all_gather_into(bytes_of(&src_held, need)?, all.bytes_mut());
            }
            let shards: Vec<&[u8]> = all.bytes().chunks(need.max(1)).take(comm.ranks).collect();
            fold_ranks(
                MpiDriver::NAME,
                dtype,
                op,
                &shards,
                bytes_mut_of(&mut out, need)?,
            )
        })
    }

    fn send(
        comm: &MpiCommunicator,
        src: &DeviceResource<Self>,
        dtype: DType,
        count: usize,
        peer: usize,
        stream: MpiCommStream,
    ) -> Result<(), DriverError> {
        Self::check(comm, stream)?;
        let need = check_p2p(
            "send",
            comm.rank,
            peer,
            comm.ranks,
            dtype.size_bytes(),
            count,
            src.bytes,
        )?;
        src.fence.wait(comm.opts.op_timeout, comm.rank, "send")?;
        let held = lock(&src.buffer);
        comm.world
            .process_at_rank(peer as i32)
            .send(bytes_of(&held, need)?);
        Ok(())
    }

    fn recv(
        comm: &MpiCommunicator,
        dst: &DeviceResource<Self>,
        dtype: DType,
        count: usize,
        peer: usize,
        stream: MpiCommStream,
    ) -> Result<(), DriverError> {
        Self::check(comm, stream)?;
        let need = check_p2p(
            "recv",
            comm.rank,
            peer,
            comm.ranks,
            dtype.size_bytes(),
            count,
            dst.bytes,
        )?;
        completing(&dst.fence, || {
            let (data, _status) = comm.world.process_at_rank(peer as i32).receive_vec::<u8>();
            if data.len() != need {
                return Err(DriverError::Mismatch {
                    op: "send/recv",
                    rank: comm.rank,
                    mine: format!("recv of {count} {dtype} elements ({need} bytes)"),
                    peer,
                    theirs: format!("send of {} bytes", data.len()),
                });
            }
            bytes_mut_of(&mut lock(&dst.buffer), need)?.copy_from_slice(&data);
            Ok(())
        })
    }

    fn synchronize(comm: &MpiCommunicator, stream: MpiCommStream) -> Result<(), DriverError> {
        // Every call already completed before it returned.
        Self::check(comm, stream)
    }
}
