//! [`NcclDriver`]: collectives between CUDA GPUs through NCCL.
//!
//! Devices and buffers are the CUDA backend's ([`CudaDev`], `CudaBuf`):
//! CUDA is opened in one place and every buffer is counted by its device's
//! allocator counter. libnccl is loaded at run time by cudarc. cudarc panics
//! when the library or a symbol is missing, so every entry point first asks
//! `cudarc::nccl::sys::is_culib_present()` and every cudarc call runs under
//! `catch_unwind` (the backend's [`guarded`]). cudarc searches for
//! `libnccl.so`, never `libnccl.so.2`: with the PyPI wheel, symlink
//! `nvidia/nccl/lib/libnccl.so.2` to `libnccl.so` in a directory on
//! `LD_LIBRARY_PATH`.
//!
//! Each communicator owns its own CUDA stream (the comm stream). A collective
//! makes that stream wait on the source's event and on the destination's
//! (its previous writer), enqueues the NCCL call and records the
//! destination's new event, so compute streams never wait on it unless they
//! wait on that event. [`NcclFence`] says why that makes a fence count its
//! writers. all_gather, broadcast and reduce_scatter
//! are NCCL's own; several calls that must be issued together (one thread
//! driving several ranks, or several sends and receives) go between
//! [`CollectiveDriver::group_start`] and `group_end` (`ncclGroupStart`/`End`,
//! called directly: cudarc's `Group` guard panics if `ncclGroupEnd` fails).
//! [`NcclDriver::init_all`] makes one communicator per device of a
//! single-process group at once (`ncclCommInitAll`), which is how the
//! executor sets up a CUDA island.
//!
//! Multi-process: rank 0 mints the [`NcclUniqueId`] with
//! [`CollectiveDriver::group_id`] and hands its bytes to the others: by MPI
//! broadcast in the user's own program, through a file, or through an
//! environment variable ([`unique_id_to_env`] /
//! [`unique_id_from_env`], hex text).

use super::prologue::{
    adopt_buf, backend_error, check_rank, lend_buf, lock, p2p_prologue, prologue, reclaim_buf,
    Call, Held, IdTable, Member, P2p, Shared,
};
use super::{CollectiveDriver, CommunicationId, DeviceResource, Driver, DriverError, JoinOptions};
use crate::backend::cuda::{self, guarded, CudaBuf, CudaDev, INSTALL_HINT};
use crate::backend::fault::Faults;
use crate::backend::Buf;
use cudarc::driver::CudaStream;
use cudarc::nccl::{result, sys};
use fuel_graph_ext::device::{Device, DeviceKind};
use fuel_graph_ext::dtype::DType;
use fuel_graph_ext::op::ReduceOp;
use std::ffi::c_void;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

mod events;
mod grouped_p2p;
mod per_root;
mod unique_id;

pub use events::NcclFence;

pub use unique_id::{
    unique_id_from_env, unique_id_from_file, unique_id_to_env, unique_id_to_file, NcclUniqueId,
    UNIQUE_ID_ENV,
};

/// The hint for a missing libnccl.
pub const NCCL_HINT: &str = "install NCCL (libnccl.so) and put its directory on LD_LIBRARY_PATH; with the pip wheel nvidia-nccl-cu12/cu13, which ships only libnccl.so.2, run `ln -s $SITE/nvidia/nccl/lib/libnccl.so.2 DIR/libnccl.so` and add DIR to LD_LIBRARY_PATH (cudarc never looks for libnccl.so.2)";

/// The element types NCCL carries, for messages.
pub const NCCL_TYPES: &str = "f16, bf16, f32, f64, i8, i32, i64, u8, u32, u64";

/// The NCCL driver.
#[derive(Clone, Copy, Debug, Default)]
pub struct NcclDriver;

/// NCCL's name for `elem`; i16, u16 and bool have none.
pub fn nccl_data_type(elem: DType) -> Result<sys::ncclDataType_t, DriverError> {
    use sys::ncclDataType_t as T;
    Ok(match elem {
        DType::F16 => T::ncclFloat16,
        DType::BF16 => T::ncclBfloat16,
        DType::F32 => T::ncclFloat32,
        DType::F64 => T::ncclFloat64,
        DType::I8 => T::ncclInt8,
        DType::I32 => T::ncclInt32,
        DType::I64 => T::ncclInt64,
        DType::U8 => T::ncclUint8,
        DType::U32 => T::ncclUint32,
        DType::U64 => T::ncclUint64,
        DType::Bool | DType::I16 | DType::U16 => {
            return Err(DriverError::UnsupportedElem {
                driver: NcclDriver::NAME,
                elem,
                supported: NCCL_TYPES,
            })
        }
    })
}

/// NCCL's reduction for `op`; `Mean` is `ncclAvg`.
pub fn nccl_red_op(op: ReduceOp) -> sys::ncclRedOp_t {
    use sys::ncclRedOp_t as R;
    match op {
        ReduceOp::Sum => R::ncclSum,
        ReduceOp::Product => R::ncclProd,
        ReduceOp::Max => R::ncclMax,
        ReduceOp::Min => R::ncclMin,
        ReduceOp::Mean => R::ncclAvg,
    }
}

/// An NCCL resource's buffer: a CUDA backend buffer, the driver's own or
/// one the executor lent.
pub type NcclBuffer = Shared<CudaBuf>;

fn backend(call: &'static str, e: impl std::fmt::Display) -> DriverError {
    backend_error(NcclDriver::NAME, call, e)
}

/// True if libnccl can be loaded.
pub fn library_present() -> bool {
    // SAFETY: tries dlopen on each candidate name; it never panics.
    unsafe { sys::is_culib_present() }
}

fn require_nccl() -> Result<(), DriverError> {
    if library_present() {
        Ok(())
    } else {
        Err(DriverError::LibraryMissing {
            library: "libnccl",
            reason: "cudarc could not load libnccl.so".into(),
            hint: NCCL_HINT,
        })
    }
}

fn require_cuda() -> Result<(), DriverError> {
    if cuda::library_present() {
        Ok(())
    } else {
        Err(DriverError::LibraryMissing {
            library: "libcuda",
            reason: "no CUDA driver".into(),
            hint: INSTALL_HINT,
        })
    }
}

/// Runs a cudarc call under `catch_unwind`, flattening both failure kinds.
fn call<T>(
    name: &'static str,
    f: impl FnOnce() -> Result<T, DriverError>,
) -> Result<T, DriverError> {
    guarded(f).map_err(|p| backend(name, format!("cudarc panicked: {p}")))?
}

/// An NCCL status as a driver error.
fn nccl<T>(name: &'static str, r: Result<T, result::NcclError>) -> Result<(), DriverError> {
    r.map(|_| ()).map_err(|e| backend(name, format!("{e:?}")))
}

/// A CUDA comm stream handle: names the communicator it belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NcclCommStream(u64);

static NEXT_STREAM: AtomicU64 = AtomicU64::new(1);

/// One rank's NCCL communicator, its GPU and its comm stream.
pub struct NcclCommunicator {
    raw: sys::ncclComm_t,
    dev: Arc<CudaDev>,
    stream: Arc<CudaStream>,
    id: NcclCommStream,
    rank: usize,
    ranks: usize,
}

// SAFETY: an ncclComm_t may be used from any thread as long as calls on it
// are not concurrent; every use here goes through `&self` methods that issue
// one NCCL call at a time from the owner's thread, and the type is not Sync.
unsafe impl Send for NcclCommunicator {}

impl Member for NcclCommunicator {
    type Stream = NcclCommStream;
    fn rank_and_size(&self) -> (usize, usize) {
        (self.rank, self.ranks)
    }
    fn stream(&self) -> NcclCommStream {
        self.id
    }
}

impl Drop for NcclCommunicator {
    fn drop(&mut self) {
        // cudarc's own Comm panics if the abort fails; here a failure is
        // ignored (the process is tearing the group down anyway).
        let raw = self.raw;
        let _ = guarded(move || {
            // SAFETY: `raw` came from ncclCommInitRank/All and is destroyed once.
            let _ = unsafe { result::comm_destroy(raw) };
        });
    }
}

impl NcclCommunicator {
    /// Its GPU.
    pub fn device(&self) -> &Arc<CudaDev> {
        &self.dev
    }

    /// Binds the GPU's context to this thread; gives the comm stream for
    /// NCCL.
    fn begin(&self) -> Result<sys::cudaStream_t, DriverError> {
        self.dev
            .context()
            .bind_to_thread()
            .map_err(|e| backend("bind_to_thread", e))?;
        Ok(self.stream.cu_stream() as sys::cudaStream_t)
    }

    /// Makes the comm stream wait for `src`'s fence: every write of the
    /// source issued so far.
    fn read_after(&self, src: &NcclFence) -> Result<(), DriverError> {
        match src.event() {
            Some(ev) => self
                .stream
                .wait(&ev)
                .map_err(|e| backend("cuStreamWaitEvent", e)),
            None => Ok(()),
        }
    }

    fn wrap(
        dev: &Arc<CudaDev>,
        raw: sys::ncclComm_t,
        rank: usize,
        ranks: usize,
    ) -> Result<Self, DriverError> {
        let stream = dev.new_stream().map_err(|e| backend("cuStreamCreate", e))?;
        Ok(NcclCommunicator {
            raw,
            dev: dev.clone(),
            stream,
            id: NcclCommStream(NEXT_STREAM.fetch_add(1, Ordering::Relaxed)),
            rank,
            ranks,
        })
    }
}

/// Runs `f` with the device address of `src`, to read, ordered on `stream`.
fn read_ptr<R>(
    src: &DeviceResource<NcclDriver>,
    stream: &CudaStream,
    f: impl FnOnce(u64) -> R,
) -> Result<R, DriverError> {
    let s = lock(&src.buffer);
    let b = s
        .get()
        .ok_or_else(|| backend("read", "the source is not a CUDA buffer"))?;
    b.with_ptr(stream, f)
        .map_err(|e| backend("device pointer", e))
}

/// Runs `f` with the device address of `dst`, to write, ordered on `stream`.
fn write_ptr<R>(
    dst: &DeviceResource<NcclDriver>,
    stream: &CudaStream,
    f: impl FnOnce(u64) -> R,
) -> Result<R, DriverError> {
    let mut d = lock(&dst.buffer);
    let b = d
        .get_mut()
        .ok_or_else(|| backend("write", "the destination is lent (read only)"))?;
    b.with_ptr_mut(stream, f)
        .map_err(|e| backend("device pointer", e))
}

/// Runs `f` with the device addresses of `src` (read) and `dst` (written),
/// which may be one buffer (an in-place collective), ordered on `stream`.
fn with_ptrs<R>(
    src: &DeviceResource<NcclDriver>,
    dst: &DeviceResource<NcclDriver>,
    stream: &CudaStream,
    f: impl FnOnce(u64, u64) -> R,
) -> Result<R, DriverError> {
    if Arc::ptr_eq(&src.buffer, &dst.buffer) {
        return write_ptr(dst, stream, |p| f(p, p));
    }
    read_ptr(src, stream, |sp| write_ptr(dst, stream, |dp| f(sp, dp)))?
}

/// Collective `op`'s prologue (the stream, and `src` and `dst` holding
/// `src_count` and `dst_count` elements), then NCCL call `name` (made by
/// `f` from the source and destination addresses and the stream) enqueued
/// on the communicator's stream as the next write of `dst`'s fence
/// ([`NcclFence::write`]): after `src`'s writes and `dst`'s previous
/// write, with `dst`'s event recorded after it.
fn collective(
    c: Call<'_, NcclDriver>,
    (op, name): (&'static str, &'static str),
    (src_count, dst_count): (usize, usize),
    f: impl FnOnce(u64, u64, sys::cudaStream_t) -> Result<result::NcclStatus, result::NcclError>,
) -> Result<(), DriverError> {
    let Call(comm, src, dst, dtype, stream) = c;
    let es = elem_bytes(dtype);
    prologue(
        comm,
        stream,
        op,
        es,
        (src_count, src.bytes),
        (dst_count, dst.bytes),
    )?;
    call(name, || {
        let cs = comm.begin()?;
        // In place, the source's last write is the destination's previous
        // one, which `write` waits for (its lock is not taken twice).
        let after = if src.fence.same(&dst.fence) {
            None
        } else {
            src.fence.event()
        };
        dst.fence.write(&comm.stream, after, || {
            let r = with_ptrs(src, dst, &comm.stream, |sp, dp| f(sp, dp, cs))?;
            nccl(name, r)
        })
    })
}

static IDS: IdTable<CommunicationId, NcclUniqueId> = IdTable::new();

impl Driver for NcclDriver {
    type Device = Arc<CudaDev>;
    type Buffer = NcclBuffer;
    type Fence = NcclFence;
    type Stream = Arc<CudaStream>;
    const NAME: &'static str = "nccl";
    // NCCL cannot compare the counts of grouped sends and receives.
    const CHECKS_COUNTS: bool = false;
    const KIND: DeviceKind = DeviceKind::Cuda;

    fn open(device: Device) -> Result<Arc<CudaDev>, DriverError> {
        if device.kind != DeviceKind::Cuda {
            return Err(DriverError::WrongDevice {
                driver: Self::NAME,
                device,
                kind: Self::KIND,
            });
        }
        require_cuda()?;
        CudaDev::open(device).map_err(|e| backend("open", e))
    }

    fn new_stream(dev: &Arc<CudaDev>) -> Result<Arc<CudaStream>, DriverError> {
        dev.new_stream().map_err(|e| backend("cuStreamCreate", e))
    }

    fn alloc(dev: &Arc<CudaDev>, bytes: usize) -> Result<DeviceResource<Self>, DriverError> {
        let buf = dev
            .alloc(bytes, &Faults::default())
            .map_err(|e| backend("alloc", e))?;
        Ok(DeviceResource {
            buffer: Arc::new(Mutex::new(Held::Own(buf))),
            fence: NcclFence::default(),
            bytes,
        })
    }

    fn upload(dev: &Arc<CudaDev>, bytes: &[u8]) -> Result<DeviceResource<Self>, DriverError> {
        let res = Self::alloc(dev, bytes.len())?;
        {
            let mut held = lock(&res.buffer);
            let b = held
                .get_mut()
                .ok_or_else(|| backend("upload", "a fresh buffer is not the driver's own"))?;
            dev.upload(bytes, b).map_err(|e| backend("upload", e))?;
        }
        Ok(res)
    }

    fn download(res: &DeviceResource<Self>, _timeout: Duration) -> Result<Vec<u8>, DriverError> {
        // A CUDA event wait has no timeout; it ends when the comm stream does.
        if let Some(ev) = res.fence.event() {
            call("cuEventSynchronize", || {
                ev.synchronize()
                    .map_err(|e| backend("cuEventSynchronize", e))
            })?;
        }
        let held = lock(&res.buffer);
        let b = held
            .get()
            .ok_or_else(|| backend("download", "not a CUDA buffer"))?;
        let mut out = vec![0u8; res.bytes];
        b.dev()
            .download(b, &mut out)
            .map_err(|e| backend("download", e))?;
        Ok(out)
    }

    fn lend(buf: &Arc<Buf>) -> Result<DeviceResource<Self>, DriverError> {
        lend_buf::<Self, CudaBuf>(buf, NcclFence::default())
    }

    fn adopt(buf: Buf) -> Result<DeviceResource<Self>, DriverError> {
        adopt_buf::<Self, CudaBuf>(buf, NcclFence::default())
    }

    fn reclaim(res: DeviceResource<Self>) -> Result<Buf, DriverError> {
        reclaim_buf(res)
    }

    fn order_compute(res: &DeviceResource<Self>) -> Result<(), DriverError> {
        let Some(ev) = res.fence.event() else {
            return Ok(());
        };
        let held = lock(&res.buffer);
        match held.get() {
            Some(b) => b
                .dev()
                .wait_event(&ev)
                .map_err(|e| backend("cuStreamWaitEvent", e)),
            None => Ok(()),
        }
    }
}

impl NcclDriver {
    /// Joins on a given GPU. NCCL's own init has no timeout, so it runs on a
    /// helper thread and the caller gives up after `opts.join_timeout`; the
    /// helper stays blocked inside NCCL until the process exits.
    pub fn join_on(
        dev: &Arc<CudaDev>,
        id: NcclUniqueId,
        ranks: usize,
        rank: usize,
        opts: JoinOptions,
    ) -> Result<NcclCommunicator, DriverError> {
        check_rank(rank, ranks)?;
        require_nccl()?;
        let ctx = dev.context().clone();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name(format!("nccl-join-rank{rank}"))
            .spawn(move || {
                let r = call("ncclCommInitRank", || {
                    ctx.bind_to_thread()
                        .map_err(|e| backend("bind_to_thread", e))?;
                    let mut raw: sys::ncclComm_t = std::ptr::null_mut();
                    // SAFETY: `raw` is a valid out-pointer; the id is 128 plain bytes.
                    let r = unsafe {
                        result::comm_init_rank(&mut raw, ranks as i32, id.to_sys(), rank as i32)
                    };
                    nccl("ncclCommInitRank", r)?;
                    Ok(raw as usize)
                });
                let _ = tx.send(r);
            })
            .map_err(|e| backend("spawn the join thread", e))?;
        let raw = match rx.recv_timeout(opts.join_timeout) {
            Ok(r) => r? as sys::ncclComm_t,
            Err(_) => {
                return Err(DriverError::JoinTimeout {
                    group: format!("{id:?}"),
                    rank,
                    ranks,
                    // NCCL does not say who arrived; name every other rank.
                    missing: (0..ranks).filter(|r| *r != rank).collect(),
                    waited_ms: opts.join_timeout.as_millis() as u64,
                });
            }
        };
        NcclCommunicator::wrap(dev, raw, rank, ranks)
    }

    /// One communicator per device of `devs` (rank r on `devs[r]`), made
    /// at once by one thread (`ncclCommInitAll`): a group of GPUs that one
    /// process drives, such as an executor's CUDA island. Every device must
    /// be a different GPU.
    pub fn init_all(devs: &[Arc<CudaDev>]) -> Result<Vec<NcclCommunicator>, DriverError> {
        require_cuda()?;
        require_nccl()?;
        let ordinals: Vec<i32> = devs.iter().map(|d| d.device.index as i32).collect();
        let mut raws: Vec<sys::ncclComm_t> = vec![std::ptr::null_mut(); devs.len()];
        call("ncclCommInitAll", || {
            // SAFETY: `raws` has room for one communicator per ordinal.
            let r = unsafe {
                result::comm_init_all(raws.as_mut_ptr(), ordinals.len() as i32, ordinals.as_ptr())
            };
            nccl("ncclCommInitAll", r)
        })?;
        let ranks = devs.len();
        let mut out = Vec::with_capacity(ranks);
        for (rank, (dev, raw)) in devs.iter().zip(raws).enumerate() {
            out.push(NcclCommunicator::wrap(dev, raw, rank, ranks)?);
        }
        Ok(out)
    }
}

fn elem_bytes(dt: sys::ncclDataType_t) -> usize {
    use sys::ncclDataType_t as T;
    match dt {
        T::ncclInt8 | T::ncclUint8 | T::ncclFloat8e4m3 | T::ncclFloat8e5m2 => 1,
        T::ncclFloat16 | T::ncclBfloat16 => 2,
        T::ncclInt32 | T::ncclUint32 | T::ncclFloat32 => 4,
        _ => 8,
    }
}

impl CollectiveDriver for NcclDriver {
    type Communicator = NcclCommunicator;
    type UniqueId = NcclUniqueId;
    type DataType = sys::ncclDataType_t;
    type CommStream = NcclCommStream;

    fn group_id(id: &CommunicationId) -> Result<NcclUniqueId, DriverError> {
        IDS.get_or_mint(id, || {
            require_nccl()?;
            let u = call("ncclGetUniqueId", || {
                result::get_uniqueid().map_err(|e| backend("ncclGetUniqueId", format!("{e:?}")))
            })?;
            Ok(NcclUniqueId::from_sys(&u))
        })
    }

    /// One GPU per rank, round-robin over the visible GPUs
    /// ([`NcclDriver::join_on`] picks the GPU).
    fn join_with(
        id: NcclUniqueId,
        ranks: usize,
        rank: usize,
        opts: JoinOptions,
    ) -> Result<NcclCommunicator, DriverError> {
        require_cuda()?;
        let n = cuda::device_count().map_err(|(reason, _)| backend("cuDeviceGetCount", reason))?;
        let dev = Self::open(Device::cuda((rank % n) as u32))?;
        Self::join_on(&dev, id, ranks, rank, opts)
    }

    fn name_of(dtype: DType) -> Result<sys::ncclDataType_t, DriverError> {
        nccl_data_type(dtype)
    }

    fn all_reduce(c: Call<'_, Self>, count: usize, op: ReduceOp) -> Result<(), DriverError> {
        let Call(comm, _, _, dtype, _) = c;
        collective(
            c,
            ("all_reduce", "ncclAllReduce"),
            (count, count),
            |sp, dp, cs| {
                // SAFETY: both buffers hold `count` elements (checked) and
                // stay alive (locked) until the call is enqueued.
                unsafe {
                    result::all_reduce(
                        sp as _,
                        dp as _,
                        count,
                        dtype,
                        nccl_red_op(op),
                        comm.raw,
                        cs,
                    )
                }
            },
        )
    }

    fn send(p: P2p<'_, Self>) -> Result<(), DriverError> {
        let P2p(comm, src, dtype, count, peer, stream) = p;
        let es = elem_bytes(dtype);
        p2p_prologue(comm, stream, "send", peer, (es, count), src.bytes)?;
        call("ncclSend", || {
            let cs = comm.begin()?;
            comm.read_after(&src.fence)?;
            let r = read_ptr(src, &comm.stream, |sp| {
                // SAFETY: the buffer holds `count` elements (checked).
                unsafe {
                    result::send(sp as *const c_void, count, dtype, peer as i32, comm.raw, cs)
                }
            })?;
            nccl("ncclSend", r)
        })
    }

    fn recv(p: P2p<'_, Self>) -> Result<(), DriverError> {
        let P2p(comm, dst, dtype, count, peer, stream) = p;
        let es = elem_bytes(dtype);
        p2p_prologue(comm, stream, "recv", peer, (es, count), dst.bytes)?;
        call("ncclRecv", || {
            let cs = comm.begin()?;
            dst.fence.write(&comm.stream, None, || {
                let r = write_ptr(dst, &comm.stream, |dp| {
                    // SAFETY: the buffer holds `count` elements (checked).
                    unsafe {
                        result::recv(dp as *mut c_void, count, dtype, peer as i32, comm.raw, cs)
                    }
                })?;
                nccl("ncclRecv", r)
            })
        })
    }

    fn all_to_all(c: Call<'_, Self>, send: &[usize], recv: &[usize]) -> Result<(), DriverError> {
        Self::all_to_all_grouped(c, send, recv)
    }

    fn synchronize(comm: &NcclCommunicator, stream: NcclCommStream) -> Result<(), DriverError> {
        comm.check(stream)?;
        call("cuStreamSynchronize", || {
            comm.stream
                .synchronize()
                .map_err(|e| backend("cuStreamSynchronize", e))
        })
    }

    fn group_start() -> Result<(), DriverError> {
        require_nccl()?;
        call("ncclGroupStart", || {
            nccl("ncclGroupStart", result::group_start())
        })?;
        events::group_opened();
        Ok(())
    }

    fn group_end() -> Result<(), DriverError> {
        require_nccl()?;
        let ended = call("ncclGroupEnd", || nccl("ncclGroupEnd", result::group_end()));
        let writes = events::group_closed();
        ended?;
        // The group's kernels are on their streams now: each write's fence
        // gets an event recorded after its kernel.
        for (fence, stream, early) in writes {
            let mut last = lock(&fence.0);
            // Unless a later write has replaced it meanwhile.
            if last.as_ref().is_some_and(|ev| Arc::ptr_eq(ev, &early)) {
                call("cuEventRecord", || NcclFence::record(&mut last, &stream))?;
            }
        }
        Ok(())
    }

    fn all_gather(c: Call<'_, Self>, count: usize) -> Result<bool, DriverError> {
        let Call(comm, _, _, dtype, _) = c;
        let counts = (count, count * comm.ranks);
        collective(c, ("all_gather", "ncclAllGather"), counts, |sp, dp, cs| {
            // SAFETY: `src` holds `count` and `dst` `ranks * count`
            // elements (checked).
            unsafe { result::all_gather(sp as _, dp as _, count, dtype, comm.raw, cs) }
        })?;
        Ok(true)
    }

    fn broadcast(c: Call<'_, Self>, count: usize, root: usize) -> Result<bool, DriverError> {
        let Call(comm, _, _, dtype, _) = c;
        check_rank(root, comm.ranks)?;
        collective(
            c,
            ("broadcast", "ncclBroadcast"),
            (count, count),
            |sp, dp, cs| {
                // SAFETY: both buffers hold `count` elements (checked).
                unsafe {
                    result::broadcast(sp as _, dp as _, count, dtype, root as i32, comm.raw, cs)
                }
            },
        )?;
        Ok(true)
    }

    fn reduce_scatter(c: Call<'_, Self>, count: usize, op: ReduceOp) -> Result<bool, DriverError> {
        let Call(comm, _, _, dtype, _) = c;
        let counts = (count * comm.ranks, count);
        collective(
            c,
            ("reduce_scatter", "ncclReduceScatter"),
            counts,
            |sp, dp, cs| {
                // SAFETY: `src` holds `ranks * count` and `dst` `count`
                // elements (checked).
                let op = nccl_red_op(op);
                unsafe { result::reduce_scatter(sp as _, dp as _, count, dtype, op, comm.raw, cs) }
            },
        )?;
        Ok(true)
    }

    fn all_gather_uneven(c: Call<'_, Self>, counts: &[usize]) -> Result<bool, DriverError> {
        Self::all_gather_grouped(c, counts).map(|()| true)
    }

    fn reduce_scatter_uneven(
        c: Call<'_, Self>,
        counts: &[usize],
        op: ReduceOp,
    ) -> Result<bool, DriverError> {
        Self::reduce_scatter_grouped(c, counts, op).map(|()| true)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
