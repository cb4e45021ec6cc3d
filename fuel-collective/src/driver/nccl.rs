//! [`NcclDriver`]: collectives between CUDA GPUs through NCCL.
//!
//! libnccl is loaded at run time by cudarc. cudarc panics when the library or
//! a symbol is missing, so every entry point first asks
//! `cudarc::nccl::sys::is_culib_present()` and every cudarc call runs under
//! `catch_unwind` (the executor's [`guarded`]). cudarc searches for
//! `libnccl.so`, never `libnccl.so.2`: with the PyPI wheel, symlink
//! `nvidia/nccl/lib/libnccl.so.2` to `libnccl.so` in a directory on
//! `LD_LIBRARY_PATH`.
//!
//! Each communicator owns its own CUDA stream (the comm stream). A collective
//! makes that stream wait on the source's event, enqueues the NCCL call and
//! records the destination's event, so compute streams never wait on it
//! unless they wait on that event.
//!
//! Multi-process: rank 0 mints the [`NcclUniqueId`] with
//! [`CollectiveDriver::group_id`] and hands its bytes to the others: by MPI
//! broadcast (feature `mpi`, see `driver::mpi::broadcast_bytes`), or through
//! a file or an environment variable ([`unique_id_to_env`] /
//! [`unique_id_from_env`], hex text).

use super::{
    check_rank, whole_elements, CollectiveDriver, CommunicationId, DeviceResource, Driver,
    DriverError, ElemType, JoinOptions,
};
use cudarc::driver::{CudaContext, CudaEvent, CudaSlice, CudaStream, DevicePtr, DevicePtrMut};
use cudarc::nccl::{result, sys};
use fuel_graph_ext::backend::cuda::{guarded, library_present};
use fuel_graph_ext::{Device, DeviceKind, ReduceOp};
use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

/// The hint for a missing libnccl.
pub const NCCL_HINT: &str = "install NCCL (libnccl.so) and put its directory on LD_LIBRARY_PATH; with the pip wheel nvidia-nccl-cu12/cu13, which ships only libnccl.so.2, run `ln -s $SITE/nvidia/nccl/lib/libnccl.so.2 DIR/libnccl.so` and add DIR to LD_LIBRARY_PATH (cudarc never looks for libnccl.so.2)";

/// The element types NCCL carries, for messages.
pub const NCCL_TYPES: &str = "f16, bf16, f32, f64, i8, i32, i64, u8, u32, u64";

/// The NCCL driver.
#[derive(Clone, Copy, Debug, Default)]
pub struct NcclDriver;

/// NCCL's group id: 128 opaque bytes, minted by one rank and copied to the others.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct NcclUniqueId(pub [u8; 128]);

impl std::fmt::Debug for NcclUniqueId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "NcclUniqueId({}…)", &self.to_hex()[..16])
    }
}

impl NcclUniqueId {
    /// Its bytes.
    pub fn to_bytes(&self) -> [u8; 128] {
        self.0
    }
    /// From exactly 128 bytes.
    pub fn from_bytes(b: &[u8]) -> Result<NcclUniqueId, String> {
        let arr: [u8; 128] = b
            .try_into()
            .map_err(|_| format!("an NCCL unique id is 128 bytes, got {}", b.len()))?;
        Ok(NcclUniqueId(arr))
    }
    /// 256 lower-case hex digits.
    pub fn to_hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }
    /// From 256 hex digits.
    pub fn from_hex(s: &str) -> Result<NcclUniqueId, String> {
        let s = s.trim();
        if s.len() != 256 || !s.is_ascii() {
            return Err(format!(
                "an NCCL unique id is 256 hex digits, got {} characters",
                s.len()
            ));
        }
        let mut out = [0u8; 128];
        for (i, o) in out.iter_mut().enumerate() {
            *o = u8::from_str_radix(&s[2 * i..2 * i + 2], 16)
                .map_err(|e| format!("bad hex at byte {i} of the NCCL unique id: {e}"))?;
        }
        Ok(NcclUniqueId(out))
    }
    fn to_sys(self) -> sys::ncclUniqueId {
        sys::ncclUniqueId {
            internal: self.0.map(|b| b as std::ffi::c_char),
        }
    }
    fn from_sys(id: &sys::ncclUniqueId) -> NcclUniqueId {
        NcclUniqueId(id.internal.map(|c| c as u8))
    }
}

/// The variable [`unique_id_to_env`] and [`unique_id_from_env`] use by default.
pub const UNIQUE_ID_ENV: &str = "FUEL_NCCL_UNIQUE_ID";

/// The `NAME=hex` line a launcher exports so every rank sees rank 0's id.
pub fn unique_id_to_env(var: &str, id: &NcclUniqueId) -> String {
    format!("{var}={}", id.to_hex())
}

/// Reads the id from environment variable `var` (set by the launcher).
pub fn unique_id_from_env(var: &str) -> Result<NcclUniqueId, String> {
    let v = std::env::var(var).map_err(|_| {
        format!("environment variable {var} is not set; have rank 0 export `unique_id_to_env(...)` before starting the others")
    })?;
    NcclUniqueId::from_hex(&v).map_err(|e| format!("{var}: {e}"))
}

/// Writes the id as hex to `path` (for launchers that share a file system).
pub fn unique_id_to_file(path: &std::path::Path, id: &NcclUniqueId) -> Result<(), String> {
    std::fs::write(path, id.to_hex()).map_err(|e| format!("writing {}: {e}", path.display()))
}

/// Reads an id written by [`unique_id_to_file`].
pub fn unique_id_from_file(path: &std::path::Path) -> Result<NcclUniqueId, String> {
    let s =
        std::fs::read_to_string(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
    NcclUniqueId::from_hex(&s).map_err(|e| format!("{}: {e}", path.display()))
}

/// NCCL's name for `elem`; i16, u16 and bool have none.
pub fn nccl_data_type(elem: ElemType) -> Result<sys::ncclDataType_t, DriverError> {
    use sys::ncclDataType_t as T;
    Ok(match elem {
        ElemType::F16 => T::ncclFloat16,
        ElemType::BF16 => T::ncclBfloat16,
        ElemType::F32 => T::ncclFloat32,
        ElemType::F64 => T::ncclFloat64,
        ElemType::I8 => T::ncclInt8,
        ElemType::I32 => T::ncclInt32,
        ElemType::I64 => T::ncclInt64,
        ElemType::U8 => T::ncclUint8,
        ElemType::U32 => T::ncclUint32,
        ElemType::U64 => T::ncclUint64,
        ElemType::Bool | ElemType::I16 | ElemType::U16 => {
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

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn backend(call: &'static str, e: impl std::fmt::Display) -> DriverError {
    DriverError::Backend {
        driver: NcclDriver::NAME,
        call,
        reason: e.to_string(),
    }
}

fn require_nccl() -> Result<(), DriverError> {
    // SAFETY: tries dlopen on each candidate name; it never panics.
    if unsafe { sys::is_culib_present() } {
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
    if library_present() {
        Ok(())
    } else {
        Err(DriverError::LibraryMissing {
            library: "libcuda",
            reason: "no CUDA driver".into(),
            hint: "install the NVIDIA driver (libcuda.so) and make sure LD_LIBRARY_PATH finds it",
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

/// A CUDA fence: the event recorded after the buffer's last writer, or none
/// when the contents are already valid.
#[derive(Clone, Default)]
pub struct NcclFence(Arc<Mutex<Option<Arc<CudaEvent>>>>);

impl NcclFence {
    /// Sets the event that marks the buffer's last write.
    pub fn set(&self, ev: CudaEvent) {
        *lock(&self.0) = Some(Arc::new(ev));
    }
    /// The current event, if any.
    pub fn event(&self) -> Option<Arc<CudaEvent>> {
        lock(&self.0).clone()
    }
}

/// A CUDA comm stream handle: names the communicator it belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NcclCommStream(u64);

static NEXT_STREAM: AtomicU64 = AtomicU64::new(1);

/// One rank's NCCL communicator and its comm stream.
pub struct NcclCommunicator {
    raw: sys::ncclComm_t,
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    id: NcclCommStream,
    rank: usize,
    ranks: usize,
}

// SAFETY: an ncclComm_t may be used from any thread as long as calls on it
// are not concurrent; every use here goes through `&self` methods that issue
// one NCCL call at a time from the owner's thread, and the type is not Sync.
unsafe impl Send for NcclCommunicator {}

impl Drop for NcclCommunicator {
    fn drop(&mut self) {
        // cudarc's own Comm panics if the abort fails; here a failure is
        // ignored (the process is tearing the group down anyway).
        let raw = self.raw;
        let _ = guarded(move || {
            // SAFETY: `raw` came from ncclCommInitRank and is destroyed once.
            let _ = unsafe { result::comm_destroy(raw) };
        });
    }
}

impl NcclCommunicator {
    fn check(&self, stream: NcclCommStream) -> Result<(), DriverError> {
        if stream != self.id {
            return Err(DriverError::WrongStream);
        }
        Ok(())
    }
}

fn ids() -> &'static Mutex<HashMap<CommunicationId, NcclUniqueId>> {
    static IDS: OnceLock<Mutex<HashMap<CommunicationId, NcclUniqueId>>> = OnceLock::new();
    IDS.get_or_init(Default::default)
}

impl Driver for NcclDriver {
    type Device = Arc<CudaContext>;
    type Buffer = Arc<Mutex<CudaSlice<u8>>>;
    type Fence = NcclFence;
    type Stream = Arc<CudaStream>;
    const NAME: &'static str = "nccl";
    const KIND: DeviceKind = DeviceKind::Cuda;

    fn open(device: Device) -> Result<Arc<CudaContext>, DriverError> {
        if device.kind != DeviceKind::Cuda {
            return Err(DriverError::WrongDevice {
                driver: Self::NAME,
                device,
                kind: Self::KIND,
            });
        }
        require_cuda()?;
        call("CudaContext::new", || {
            CudaContext::new(device.index as usize).map_err(|e| backend("CudaContext::new", e))
        })
    }

    fn new_stream(dev: &Arc<CudaContext>) -> Result<Arc<CudaStream>, DriverError> {
        call("new_stream", || {
            dev.new_stream().map_err(|e| backend("new_stream", e))
        })
    }

    fn alloc(dev: &Arc<CudaContext>, bytes: usize) -> Result<DeviceResource<Self>, DriverError> {
        call("alloc_zeros", || {
            let s = dev.default_stream();
            let buf = s
                .alloc_zeros::<u8>(bytes.max(1))
                .map_err(|e| backend("alloc_zeros", e))?;
            s.synchronize().map_err(|e| backend("synchronize", e))?;
            Ok(DeviceResource {
                buffer: Arc::new(Mutex::new(buf)),
                fence: NcclFence::default(),
                bytes,
            })
        })
    }

    fn upload(dev: &Arc<CudaContext>, bytes: &[u8]) -> Result<DeviceResource<Self>, DriverError> {
        call("clone_htod", || {
            let s = dev.default_stream();
            let buf = if bytes.is_empty() {
                s.alloc_zeros::<u8>(1)
            } else {
                s.clone_htod(bytes)
            }
            .map_err(|e| backend("clone_htod", e))?;
            s.synchronize().map_err(|e| backend("synchronize", e))?;
            Ok(DeviceResource {
                buffer: Arc::new(Mutex::new(buf)),
                fence: NcclFence::default(),
                bytes: bytes.len(),
            })
        })
    }

    fn download(res: &DeviceResource<Self>, _timeout: Duration) -> Result<Vec<u8>, DriverError> {
        // A CUDA event wait has no timeout; it ends when the comm stream does.
        call("clone_dtoh", || {
            if let Some(ev) = res.fence.event() {
                ev.synchronize()
                    .map_err(|e| backend("event synchronize", e))?;
            }
            let buf = lock(&res.buffer);
            let s = buf.context().default_stream();
            let mut v = s.clone_dtoh(&*buf).map_err(|e| backend("clone_dtoh", e))?;
            v.truncate(res.bytes);
            Ok(v)
        })
    }
}

impl NcclDriver {
    /// Joins on a given GPU. NCCL's own init has no timeout, so it runs on a
    /// helper thread and the caller gives up after `opts.join_timeout`; the
    /// helper stays blocked inside NCCL until the process exits.
    pub fn join_on(
        ctx: &Arc<CudaContext>,
        id: NcclUniqueId,
        ranks: usize,
        rank: usize,
        opts: JoinOptions,
    ) -> Result<NcclCommunicator, DriverError> {
        check_rank(rank, ranks)?;
        require_nccl()?;
        let stream = Self::new_stream(ctx)?;
        let ctx2 = ctx.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name(format!("nccl-join-rank{rank}"))
            .spawn(move || {
                let r = call("ncclCommInitRank", || {
                    ctx2.bind_to_thread()
                        .map_err(|e| backend("bind_to_thread", e))?;
                    let mut raw: sys::ncclComm_t = std::ptr::null_mut();
                    // SAFETY: `raw` is a valid out-pointer; the id is 128 plain bytes.
                    unsafe {
                        result::comm_init_rank(&mut raw, ranks as i32, id.to_sys(), rank as i32)
                    }
                    .map_err(|e| backend("ncclCommInitRank", format!("{e:?}")))?;
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
        Ok(NcclCommunicator {
            raw,
            ctx: ctx.clone(),
            stream,
            id: NcclCommStream(NEXT_STREAM.fetch_add(1, Ordering::Relaxed)),
            rank,
            ranks,
        })
    }

    fn wait_src(comm: &NcclCommunicator, fence: &NcclFence) -> Result<(), DriverError> {
        if let Some(ev) = fence.event() {
            comm.stream
                .wait(&ev)
                .map_err(|e| backend("cuStreamWaitEvent", e))?;
        }
        Ok(())
    }

    fn signal(comm: &NcclCommunicator, fence: &NcclFence) -> Result<(), DriverError> {
        let ev = comm
            .stream
            .record_event(None)
            .map_err(|e| backend("cuEventRecord", e))?;
        fence.set(ev);
        Ok(())
    }
}

fn check_len(
    op: &'static str,
    elem_bytes: usize,
    count: usize,
    have: usize,
) -> Result<(), DriverError> {
    let need = count.saturating_mul(elem_bytes);
    if need > have {
        return Err(DriverError::BufferTooSmall {
            op,
            count,
            need,
            have,
        });
    }
    Ok(())
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
        let mut ids = lock(ids());
        if let Some(u) = ids.get(id) {
            return Ok(*u);
        }
        require_nccl()?;
        let u = call("ncclGetUniqueId", || {
            result::get_uniqueid().map_err(|e| backend("ncclGetUniqueId", format!("{e:?}")))
        })?;
        let u = NcclUniqueId::from_sys(&u);
        ids.insert(id.clone(), u);
        Ok(u)
    }

    fn join(id: NcclUniqueId, ranks: usize, rank: usize) -> Result<NcclCommunicator, DriverError> {
        // One GPU per rank, round-robin over the visible GPUs.
        require_cuda()?;
        let n = call("device_count", || {
            CudaContext::device_count().map_err(|e| backend("cuDeviceGetCount", e))
        })?;
        if n <= 0 {
            return Err(backend("cuDeviceGetCount", "no CUDA GPU is visible"));
        }
        let ctx = Self::open(Device {
            kind: DeviceKind::Cuda,
            index: (rank % n as usize) as u32,
        })?;
        Self::join_on(&ctx, id, ranks, rank, JoinOptions::from_env())
    }

    fn data_type(dtype: ElemType, size: u64) -> Result<(sys::ncclDataType_t, usize), DriverError> {
        let dt = nccl_data_type(dtype)?;
        Ok((dt, whole_elements(dtype, size)?))
    }

    fn comm_stream(comm: &NcclCommunicator) -> NcclCommStream {
        comm.id
    }

    fn rank_and_size(comm: &NcclCommunicator) -> (usize, usize) {
        (comm.rank, comm.ranks)
    }

    fn all_reduce(
        comm: &NcclCommunicator,
        src: &DeviceResource<Self>,
        dst: &DeviceResource<Self>,
        dtype: sys::ncclDataType_t,
        count: usize,
        op: ReduceOp,
        stream: NcclCommStream,
    ) -> Result<(), DriverError> {
        comm.check(stream)?;
        check_len("all_reduce", elem_bytes(dtype), count, src.bytes)?;
        check_len("all_reduce", elem_bytes(dtype), count, dst.bytes)?;
        call("ncclAllReduce", || {
            comm.ctx
                .bind_to_thread()
                .map_err(|e| backend("bind_to_thread", e))?;
            Self::wait_src(comm, &src.fence)?;
            let cs = comm.stream.cu_stream() as sys::cudaStream_t;
            if Arc::ptr_eq(&src.buffer, &dst.buffer) {
                let mut b = lock(&dst.buffer);
                let (p, _sync) = b.device_ptr_mut(&comm.stream);
                // SAFETY: in place; the buffer holds `count` elements (checked).
                unsafe {
                    result::all_reduce(
                        p as *const c_void,
                        p as *mut c_void,
                        count,
                        dtype,
                        nccl_red_op(op),
                        comm.raw,
                        cs,
                    )
                }
                .map_err(|e| backend("ncclAllReduce", format!("{e:?}")))?;
            } else {
                let s = lock(&src.buffer);
                let mut d = lock(&dst.buffer);
                let (sp, _s) = s.device_ptr(&comm.stream);
                let (dp, _d) = d.device_ptr_mut(&comm.stream);
                // SAFETY: both buffers hold `count` elements (checked).
                unsafe {
                    result::all_reduce(
                        sp as *const c_void,
                        dp as *mut c_void,
                        count,
                        dtype,
                        nccl_red_op(op),
                        comm.raw,
                        cs,
                    )
                }
                .map_err(|e| backend("ncclAllReduce", format!("{e:?}")))?;
            }
            Self::signal(comm, &dst.fence)
        })
    }

    fn send(
        comm: &NcclCommunicator,
        src: &DeviceResource<Self>,
        dtype: sys::ncclDataType_t,
        count: usize,
        peer: usize,
        stream: NcclCommStream,
    ) -> Result<(), DriverError> {
        comm.check(stream)?;
        check_rank(peer, comm.ranks)?;
        check_len("send", elem_bytes(dtype), count, src.bytes)?;
        call("ncclSend", || {
            comm.ctx
                .bind_to_thread()
                .map_err(|e| backend("bind_to_thread", e))?;
            Self::wait_src(comm, &src.fence)?;
            let s = lock(&src.buffer);
            let (sp, _s) = s.device_ptr(&comm.stream);
            let cs = comm.stream.cu_stream() as sys::cudaStream_t;
            // SAFETY: the buffer holds `count` elements (checked).
            unsafe { result::send(sp as *const c_void, count, dtype, peer as i32, comm.raw, cs) }
                .map_err(|e| backend("ncclSend", format!("{e:?}")))?;
            Ok(())
        })
    }

    fn recv(
        comm: &NcclCommunicator,
        dst: &DeviceResource<Self>,
        dtype: sys::ncclDataType_t,
        count: usize,
        peer: usize,
        stream: NcclCommStream,
    ) -> Result<(), DriverError> {
        comm.check(stream)?;
        check_rank(peer, comm.ranks)?;
        check_len("recv", elem_bytes(dtype), count, dst.bytes)?;
        call("ncclRecv", || {
            comm.ctx
                .bind_to_thread()
                .map_err(|e| backend("bind_to_thread", e))?;
            let mut d = lock(&dst.buffer);
            let (dp, _d) = d.device_ptr_mut(&comm.stream);
            let cs = comm.stream.cu_stream() as sys::cudaStream_t;
            // SAFETY: the buffer holds `count` elements (checked).
            unsafe { result::recv(dp as *mut c_void, count, dtype, peer as i32, comm.raw, cs) }
                .map_err(|e| backend("ncclRecv", format!("{e:?}")))?;
            drop(_d);
            Self::signal(comm, &dst.fence)
        })
    }

    fn synchronize(comm: &NcclCommunicator, stream: NcclCommStream) -> Result<(), DriverError> {
        comm.check(stream)?;
        call("cuStreamSynchronize", || {
            comm.stream
                .synchronize()
                .map_err(|e| backend("cuStreamSynchronize", e))
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn elem_mapping_covers_nccl_types_and_refuses_the_rest() {
        use sys::ncclDataType_t as T;
        let table = [
            (ElemType::F16, T::ncclFloat16),
            (ElemType::BF16, T::ncclBfloat16),
            (ElemType::F32, T::ncclFloat32),
            (ElemType::F64, T::ncclFloat64),
            (ElemType::I8, T::ncclInt8),
            (ElemType::I32, T::ncclInt32),
            (ElemType::I64, T::ncclInt64),
            (ElemType::U8, T::ncclUint8),
            (ElemType::U32, T::ncclUint32),
            (ElemType::U64, T::ncclUint64),
        ];
        for (e, t) in table {
            assert_eq!(nccl_data_type(e).unwrap(), t, "{e}");
            assert_eq!(elem_bytes(t), e.size_bytes(), "{e}");
        }
        for e in [ElemType::Bool, ElemType::I16, ElemType::U16] {
            let err = nccl_data_type(e).unwrap_err().to_string();
            assert!(err.contains(e.as_str()) && err.contains("nccl"), "{err}");
        }
    }

    #[test]
    fn reduce_ops_map_and_mean_is_avg() {
        use sys::ncclRedOp_t as R;
        assert_eq!(nccl_red_op(ReduceOp::Sum), R::ncclSum);
        assert_eq!(nccl_red_op(ReduceOp::Product), R::ncclProd);
        assert_eq!(nccl_red_op(ReduceOp::Max), R::ncclMax);
        assert_eq!(nccl_red_op(ReduceOp::Min), R::ncclMin);
        assert_eq!(nccl_red_op(ReduceOp::Mean), R::ncclAvg);
    }

    #[test]
    fn data_type_checks_whole_elements() {
        let (t, n) = NcclDriver::data_type(ElemType::BF16, 64).unwrap();
        assert_eq!((t, n), (sys::ncclDataType_t::ncclBfloat16, 32));
        let e = NcclDriver::data_type(ElemType::F32, 6)
            .unwrap_err()
            .to_string();
        assert!(e.contains("not a whole number"), "{e}");
    }

    #[test]
    fn unique_id_round_trips_through_bytes_hex_and_env() {
        let mut b = [0u8; 128];
        for (i, x) in b.iter_mut().enumerate() {
            *x = (i * 37 % 256) as u8;
        }
        let id = NcclUniqueId(b);
        assert_eq!(NcclUniqueId::from_bytes(&id.to_bytes()).unwrap(), id);
        assert_eq!(NcclUniqueId::from_hex(&id.to_hex()).unwrap(), id);
        assert_eq!(NcclUniqueId::from_sys(&id.to_sys()), id);
        let line = unique_id_to_env("X", &id);
        assert!(line.starts_with("X=") && line.len() == 2 + 256);
        assert!(NcclUniqueId::from_hex("zz").is_err());
        assert!(NcclUniqueId::from_bytes(&[0; 3]).is_err());
        let path = std::env::temp_dir().join(format!("fuel-nccl-id-{}", std::process::id()));
        unique_id_to_file(&path, &id).unwrap();
        assert_eq!(unique_id_from_file(&path).unwrap(), id);
        let _ = std::fs::remove_file(path);
    }
}
