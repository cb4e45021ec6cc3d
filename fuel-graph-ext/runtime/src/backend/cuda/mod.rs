//! The CUDA backend: contexts, buffers, copies and kernels through cudarc.
//!
//! libcuda is loaded at run time. cudarc panics instead of returning an
//! error when the library or a symbol is missing, so every entry point here
//! first asks `is_culib_present()` and runs under `catch_unwind`. Kernels are
//! the PTX text of [`crate::backend::cuda::ptx`], loaded with `Ptx::from_src` (no
//! NVRTC). Host data moves with `cuMemcpyHtoD`/`DtoH`, through a pinned
//! staging buffer (allocated without write-combining, so reads are fast) when
//! the transfer is large enough to pay for it, or straight into a host
//! arena's page-locked block ([`pin`]); CUDA-to-CUDA copies are
//! `cuMemcpyDtoD` on one context and `cuMemcpyPeer` across two.
//!
//! Each device has two streams ([`Lane`]): kernels, and region copies
//! within a step (slice, concat, a long fold's chain), on the compute
//! stream; uploads, downloads and the Copy arm's device-to-device copies
//! on the copy stream, which the threaded runner's copy thread for the
//! device (and a host arena's, for a download) drives, so a copy runs
//! while a kernel does. The invariant that orders them: every call
//! synchronises the stream it enqueued on before returning, so a step is
//! complete on the GPU when its call returns, and the runner starts a step
//! only after the steps it reads have returned. A step that reads a buffer
//! the other stream wrote therefore needs no CUDA event of ours; cudarc's
//! own per-buffer events (on, as the device makes streams of its own) make
//! the reading stream wait on the writer's event as well. A buffer is
//! freed only after every call that used it returned, so no stream still
//! works on it when it goes back to the driver's pool (cudarc's drop also
//! waits on the buffer's last read and write events before the free).

use crate::backend::alloc::{AllocCounter, MemStats};
use crate::backend::fault::{Event, Faults};
use crate::backend::Region;
use crate::error::ExecError;
use fuel_graph_ext::device::Device;
use fuel_graph_ext::dtype::DType;
pub mod pin;
pub mod ptx;
mod ptx_modules;

use cudarc::driver::{
    CudaContext, CudaFunction, CudaSlice, CudaStream, DriverError, LaunchConfig, PushKernelArg,
};
#[cfg(feature = "nccl")]
use cudarc::driver::{CudaEvent, DevicePtr, DevicePtrMut};
use fuel_graph_ext::op::ElementwiseOp;
use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

/// Transfers at least this large go through pinned host memory.
pub const PINNED_MIN: usize = 1 << 20;

/// The hint printed when CUDA is missing.
pub const INSTALL_HINT: &str =
    "install the NVIDIA driver (libcuda.so) and make sure LD_LIBRARY_PATH finds it";

fn panic_text(p: Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "unknown panic".into())
}

/// Runs a cudarc call, turning a panic (missing library or symbol) into an error.
pub fn guarded<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    catch_unwind(AssertUnwindSafe(f)).map_err(panic_text)
}

/// True if libcuda can be loaded.
pub fn library_present() -> bool {
    // SAFETY: tries dlopen on each candidate name; it never panics.
    unsafe { cudarc::driver::sys::is_culib_present() }
}

/// The number of CUDA GPUs, or why there are none: (reason, hint).
pub fn device_count() -> Result<usize, (String, String)> {
    if !library_present() {
        return Err((
            "libcuda is not installed (no CUDA driver)".into(),
            INSTALL_HINT.into(),
        ));
    }
    match guarded(CudaContext::device_count) {
        Ok(Ok(n)) if n > 0 => Ok(n as usize),
        Ok(Ok(_)) => Err((
            "the CUDA driver reports no GPU".into(),
            "check `nvidia-smi`".into(),
        )),
        Ok(Err(e)) => Err((
            format!("the CUDA driver reports no usable GPU ({e})"),
            "check `nvidia-smi` and CUDA_VISIBLE_DEVICES".into(),
        )),
        Err(p) => Err((format!("loading libcuda failed: {p}"), INSTALL_HINT.into())),
    }
}

/// Which of a device's two streams a call runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lane {
    /// Kernels, and region copies within a step.
    Compute,
    /// Uploads, downloads and device-to-device copies.
    Copy,
}

/// One CUDA GPU: a context, a compute and a copy stream, and the loaded
/// kernels.
pub struct CudaDev {
    /// Its name.
    pub device: Device,
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    /// The copy stream ([`Lane::Copy`]).
    copy: Arc<CudaStream>,
    funcs: HashMap<String, CudaFunction>,
    counter: AllocCounter,
    /// Whether host-arena blocks are page-locked ([`pin`]), or why not.
    pin: std::sync::Mutex<Result<(), String>>,
    /// The entries of `extern` kernels, loaded on first use, by name.
    externs: std::sync::Mutex<HashMap<String, CudaFunction>>,
}

impl CudaDev {
    /// Opens `cuda:N` and loads the kernels.
    /// Whether it page-locks host-arena buffers is `FUEL_CUDA_PIN`'s
    /// ([`pin::pin_setting`]); the executor says it with [`CudaDev::open_with`].
    pub fn open(device: Device) -> Result<Arc<CudaDev>, ExecError> {
        Self::open_pinning(device, pin::pin_setting())
    }

    /// Opens `cuda:N` and loads the kernels; `pin`: whether it page-locks
    /// host-arena buffers (if the driver lets it).
    pub fn open_with(device: Device, pin: bool) -> Result<Arc<CudaDev>, ExecError> {
        Self::open_pinning(device, Ok(pin))
    }

    fn open_pinning(device: Device, pin: Result<bool, String>) -> Result<Arc<CudaDev>, ExecError> {
        let unavailable = |reason: String, hint: &str| ExecError::DeviceUnavailable {
            device: device.to_string(),
            reason,
            hint: hint.to_string(),
        };
        let count = device_count().map_err(|(r, h)| unavailable(r, &h))?;
        let pin = pin.map_err(|e| {
            unavailable(
                e,
                "`fuel-opt devices` shows whether host-arena buffers are page-locked",
            )
        })?;
        if device.index as usize >= count {
            return Err(unavailable(
                format!(
                    "there are {count} CUDA GPU(s), so cuda:0..cuda:{} exist",
                    count - 1
                ),
                "use an existing ordinal or check CUDA_VISIBLE_DEVICES",
            ));
        }
        let opened = guarded(|| -> Result<Arc<CudaDev>, DriverError> {
            let ctx = CudaContext::new(device.index as usize)?;
            let stream = ctx.new_stream()?;
            let copy = ctx.new_stream()?;
            let module = ctx.load_module(cudarc::nvrtc::Ptx::from_src(ptx::module()))?;
            let mut funcs = HashMap::new();
            for name in ptx::entries() {
                let f = module.load_function(&name)?;
                funcs.insert(name, f);
            }
            Ok(Arc::new(CudaDev {
                device,
                ctx,
                stream,
                copy,
                funcs,
                counter: AllocCounter::default(),
                pin: std::sync::Mutex::new(pin::pin_decision(Ok(pin))),
                externs: std::sync::Mutex::new(HashMap::new()),
            }))
        });
        match opened {
            Ok(Ok(d)) => Ok(d),
            Ok(Err(e)) => Err(unavailable(format!("{e}"), "check `nvidia-smi`")),
            Err(p) => Err(unavailable(p, INSTALL_HINT)),
        }
    }

    /// Allocator numbers.
    pub fn stats(&self) -> MemStats {
        self.counter.stats()
    }

    /// What fits: the GPU's memory, as `cuDeviceTotalMem` reports it.
    pub fn capacity(&self) -> Option<fuel_graph_ext::limits::Capacity> {
        let total = guarded(|| self.ctx.total_mem()).ok()?.ok()?;
        Some(fuel_graph_ext::limits::Capacity::uniform(
            total,
            "the GPU's memory (cuDeviceTotalMem)",
        ))
    }

    /// The CUDA context (a collective driver binds it to its threads).
    #[cfg(feature = "nccl")]
    pub(crate) fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    /// A new stream on this device's context: a collective driver's comm
    /// stream, kept apart from the compute stream every other call uses.
    #[cfg(feature = "nccl")]
    pub(crate) fn new_stream(&self) -> Result<Arc<CudaStream>, ExecError> {
        self.call(Lane::Compute, "cuStreamCreate", |_| self.ctx.new_stream())
    }

    /// Makes the compute stream wait for `event` (recorded on another
    /// stream, such as a collective's comm stream) before its next work.
    /// The call synchronises the compute stream, so the event's work is
    /// done when it returns and the copy stream may read its results too.
    #[cfg(feature = "nccl")]
    pub(crate) fn wait_event(&self, event: &CudaEvent) -> Result<(), ExecError> {
        self.call(Lane::Compute, "cuStreamWaitEvent", |s| s.wait(event))
    }

    /// The stream of `lane`.
    fn stream_of(&self, lane: Lane) -> &Arc<CudaStream> {
        match lane {
            Lane::Compute => &self.stream,
            Lane::Copy => &self.copy,
        }
    }

    /// Whether `dtype` has kernels here ([`ptx::DTYPES`]).
    pub fn supports(&self, dtype: DType) -> Result<(), String> {
        if ptx::DTYPES.contains(&dtype) {
            Ok(())
        } else {
            Err(format!("no PTX kernel is written for {dtype}"))
        }
    }

    /// Whether `div {by}` on `dtype` is exact here: the float kernels
    /// divide in f64, which is exact for divisors below 2^24 (2^53 for
    /// f64). `compile` asks, so the refusal comes before any run.
    pub fn check_div(&self, dtype: DType, by: u64) -> Result<(), ExecError> {
        let limit: u64 = match dtype {
            DType::F64 => 1 << 53,
            d if d.is_float() => (1 << 24) - 1,
            _ => return Ok(()),
        };
        if by > limit {
            return Err(ExecError::UnsupportedKernel {
                op: format!("div {{by={by}}}"),
                device: self.device,
                reason: format!(
                    "the CUDA kernel divides {dtype} exactly by divisors up to {limit}"
                ),
                fix: "place this div on a CPU device".into(),
            });
        }
        Ok(())
    }

    fn err(&self, op: &str, e: impl std::fmt::Display) -> ExecError {
        let reason = e.to_string();
        if reason.contains("OUT_OF_MEMORY") {
            ExecError::OutOfMemory {
                device: self.device,
                bytes: 0,
                reason: format!("{op}: {reason}"),
            }
        } else if reason.contains("LAUNCH_FAILED")
            || reason.contains("ILLEGAL_ADDRESS")
            || reason.contains("DEINITIALIZED")
        {
            ExecError::DeviceLost {
                device: self.device,
                op: op.into(),
                reason,
            }
        } else {
            ExecError::Device {
                device: self.device,
                op: op.into(),
                reason,
            }
        }
    }

    /// Runs `f` guarded on `lane`'s stream and synchronises that stream,
    /// so the work `f` enqueued is done when this returns (the invariant
    /// the two streams rely on, see the module's header).
    fn call<T>(
        &self,
        lane: Lane,
        op: &str,
        f: impl FnOnce(&Arc<CudaStream>) -> Result<T, DriverError>,
    ) -> Result<T, ExecError> {
        let stream = self.stream_of(lane);
        match guarded(|| -> Result<T, DriverError> {
            let r = f(stream)?;
            stream.synchronize()?;
            Ok(r)
        }) {
            Ok(Ok(r)) => Ok(r),
            Ok(Err(e)) => Err(self.err(op, e)),
            Err(p) => Err(self.err(op, p)),
        }
    }

    /// A device buffer of `bytes`, made (and zeroed) on the compute stream.
    pub fn alloc(self: &Arc<Self>, bytes: usize, faults: &Faults) -> Result<CudaBuf, ExecError> {
        self.alloc_on(Lane::Compute, bytes, faults)
    }

    /// A device buffer of `bytes`, made (and zeroed) on `lane`'s stream: a
    /// copy's destination on the copy stream, so making it does not wait
    /// for a kernel running on the compute stream.
    pub fn alloc_on(
        self: &Arc<Self>,
        lane: Lane,
        bytes: usize,
        faults: &Faults,
    ) -> Result<CudaBuf, ExecError> {
        if faults.check(Event::Alloc) {
            return Err(ExecError::OutOfMemory {
                device: self.device,
                bytes,
                reason: "injected allocation failure".into(),
            });
        }
        let slice = self
            .call(lane, "alloc", |s| s.alloc_zeros::<u8>(bytes.max(1)))
            .map_err(|e| match e {
                ExecError::Device { reason, .. } => ExecError::OutOfMemory {
                    device: self.device,
                    bytes,
                    reason,
                },
                e => e,
            })?;
        self.counter.add(bytes);
        Ok(CudaBuf {
            slice: Some(slice),
            len: bytes,
            dev: self.clone(),
        })
    }

    /// Host bytes into `dst`, on the copy stream.
    pub fn upload(&self, src: &[u8], dst: &mut CudaBuf) -> Result<(), ExecError> {
        let len = src.len();
        let slice = dst.slice_mut()?;
        if len >= PINNED_MIN {
            self.call(Lane::Copy, "upload", |s| {
                // SAFETY: the pinned buffer is fully written before use.
                let mut pinned = unsafe { self.ctx.alloc_pinned_with_flags::<u8>(len, 0) }?;
                pinned.as_mut_slice()?.copy_from_slice(src);
                s.memcpy_htod(&pinned, &mut slice.slice_mut(..len))
            })
        } else {
            self.call(Lane::Copy, "upload", |s| {
                s.memcpy_htod(src, &mut slice.slice_mut(..len))
            })
        }
    }

    /// `src` into host bytes, on the copy stream.
    pub fn download(&self, src: &CudaBuf, dst: &mut [u8]) -> Result<(), ExecError> {
        let len = dst.len();
        let slice = src.slice()?;
        if len >= PINNED_MIN {
            let pinned = self.call(Lane::Copy, "download", |s| {
                // SAFETY: the pinned buffer is fully written by the copy before it is read.
                let mut pinned = unsafe { self.ctx.alloc_pinned_with_flags::<u8>(len, 0) }?;
                s.memcpy_dtoh(&slice.slice(..len), &mut pinned)?;
                Ok(pinned)
            })?;
            guarded(|| pinned.as_slice().map(|s| dst.copy_from_slice(s)))
                .map_err(|p| self.err("download", p))?
                .map_err(|e| self.err("download", e))
        } else {
            self.call(Lane::Copy, "download", |s| {
                s.memcpy_dtoh(&slice.slice(..len), dst)
            })
        }
    }

    /// Byte regions of `srcs` into `dst` on the compute stream: a step's
    /// slice, concat or a collective's layout copy.
    pub fn gather(
        &self,
        op: &str,
        regions: &[Region],
        srcs: &[&CudaBuf],
        dst: &mut CudaBuf,
    ) -> Result<(), ExecError> {
        self.copy_regions(Lane::Compute, op, regions, srcs, dst)
    }

    /// Byte regions of `srcs` into `dst`, on `lane`'s stream: same
    /// context, or peer copies when a source lives on another GPU.
    pub fn copy_regions(
        &self,
        lane: Lane,
        op: &str,
        regions: &[Region],
        srcs: &[&CudaBuf],
        dst: &mut CudaBuf,
    ) -> Result<(), ExecError> {
        let out = dst.slice_mut()?;
        self.call(lane, op, |stream| {
            for r in regions {
                let Some(s) = srcs.get(r.operand) else {
                    continue;
                };
                let Some(src) = s.slice.as_ref() else {
                    continue;
                };
                stream.memcpy_dtod(
                    &src.slice(r.src..r.src + r.len),
                    &mut out.slice_mut(r.dst..r.dst + r.len),
                )?;
            }
            Ok(())
        })
    }

    /// `dst = fold(kind, ins)`; more than eight operands chain launches.
    pub fn fold(
        self: &Arc<Self>,
        dtype: DType,
        kind: ElementwiseOp,
        ins: &[&CudaBuf],
        dst: &mut CudaBuf,
        n: usize,
        faults: &Faults,
    ) -> Result<(), ExecError> {
        let op: u32 = match kind {
            ElementwiseOp::Add => 0,
            ElementwiseOp::Mul => 1,
            ElementwiseOp::Max => 2,
            ElementwiseOp::Min => 3,
            ElementwiseOp::Eq => 4,
        };
        let (head, mut rest) = ins.split_at(ins.len().min(ptx::MAX_ARITY));
        self.launch_fold(dtype, op, head, dst, n)?;
        while !rest.is_empty() {
            let take = rest.len().min(ptx::MAX_ARITY - 1);
            let mut acc = self.alloc(dst.len, faults)?;
            let whole = [Region {
                operand: 0,
                src: 0,
                dst: 0,
                len: dst.len,
            }];
            self.copy_regions(Lane::Compute, "copy", &whole, &[&*dst], &mut acc)?;
            let mut chunk: Vec<&CudaBuf> = vec![&acc];
            chunk.extend_from_slice(&rest[..take]);
            self.launch_fold(dtype, op, &chunk, dst, n)?;
            rest = &rest[take..];
        }
        Ok(())
    }

    fn function(&self, name: &str) -> Result<&CudaFunction, ExecError> {
        self.funcs
            .get(name)
            .ok_or_else(|| ExecError::Internal(format!("kernel {name} is not loaded")))
    }

    fn config(n: usize) -> LaunchConfig {
        let blocks = n.div_ceil(256).max(1) as u32;
        LaunchConfig {
            grid_dim: (blocks, 1, 1),
            block_dim: (256, 1, 1),
            shared_mem_bytes: 0,
        }
    }

    fn launch_fold(
        &self,
        dtype: DType,
        op: u32,
        ins: &[&CudaBuf],
        dst: &mut CudaBuf,
        n: usize,
    ) -> Result<(), ExecError> {
        let f = self.function(&format!("fold_{}", dtype.as_str()))?;
        let srcs = ins
            .iter()
            .map(|b| b.slice())
            .collect::<Result<Vec<_>, _>>()?;
        let first = *srcs
            .first()
            .ok_or_else(|| ExecError::Internal("fold without operands".into()))?;
        let out = dst.slice_mut()?;
        let count = ins.len() as u32;
        let n64 = n as u64;
        self.call(Lane::Compute, "fold", |s| {
            let mut b = s.launch_builder(f);
            for k in 0..ptx::MAX_ARITY {
                b.arg(srcs.get(k).copied().unwrap_or(first));
            }
            b.arg(&mut *out).arg(&count).arg(&op).arg(&n64);
            // SAFETY: the arguments match the PTX signature of fold_<dt>, and
            // every buffer holds at least n elements.
            unsafe { b.launch(Self::config(n)) }.map(|_| ())
        })
    }

    /// `dst = src / by`.
    pub fn div(
        &self,
        dtype: DType,
        by: u64,
        src: &CudaBuf,
        dst: &mut CudaBuf,
        n: usize,
    ) -> Result<(), ExecError> {
        let f = self.function(&format!("div_{}", dtype.as_str()))?;
        let a = src.slice()?;
        let out = dst.slice_mut()?;
        let n64 = n as u64;
        self.call(Lane::Compute, "div", |s| {
            let mut b = s.launch_builder(f);
            b.arg(a).arg(&mut *out).arg(&by).arg(&n64);
            // SAFETY: the arguments match the PTX signature of div_<dt>.
            unsafe { b.launch(Self::config(n)) }.map(|_| ())
        })
    }

    /// `dst = src` converted from `from` to `to` elements (the `cast` op).
    pub fn cast(
        &self,
        from: DType,
        to: DType,
        src: &CudaBuf,
        dst: &mut CudaBuf,
        n: usize,
    ) -> Result<(), ExecError> {
        let f = self.function(&ptx::cast_entry(from, to))?;
        let a = src.slice()?;
        let out = dst.slice_mut()?;
        let n64 = n as u64;
        self.call(Lane::Compute, "cast", |s| {
            let mut b = s.launch_builder(f);
            b.arg(a).arg(&mut *out).arg(&n64);
            // SAFETY: the arguments match the PTX signature of cast_<from>_<to>.
            unsafe { b.launch(Self::config(n)) }.map(|_| ())
        })
    }
}

/// A device buffer; dropping it frees the memory and updates the counter.
pub struct CudaBuf {
    slice: Option<CudaSlice<u8>>,
    len: usize,
    dev: Arc<CudaDev>,
}

impl CudaBuf {
    fn slice(&self) -> Result<&CudaSlice<u8>, ExecError> {
        self.slice
            .as_ref()
            .ok_or_else(|| ExecError::Internal("CUDA buffer already freed".into()))
    }
    fn slice_mut(&mut self) -> Result<&mut CudaSlice<u8>, ExecError> {
        self.slice
            .as_mut()
            .ok_or_else(|| ExecError::Internal("CUDA buffer already freed".into()))
    }
    /// Its device.
    pub fn dev(&self) -> &Arc<CudaDev> {
        &self.dev
    }

    /// Its length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True for a zero-byte buffer.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Runs `f` with the buffer's device address, ordered on `stream`
    /// (for a library call that reads it, such as an NCCL collective).
    #[cfg(feature = "nccl")]
    pub(crate) fn with_ptr<R>(
        &self,
        stream: &CudaStream,
        f: impl FnOnce(u64) -> R,
    ) -> Result<R, ExecError> {
        let (p, _sync) = self.slice()?.device_ptr(stream);
        Ok(f(p))
    }

    /// [`with_ptr`](Self::with_ptr) for a call that writes the buffer.
    #[cfg(feature = "nccl")]
    pub(crate) fn with_ptr_mut<R>(
        &mut self,
        stream: &CudaStream,
        f: impl FnOnce(u64) -> R,
    ) -> Result<R, ExecError> {
        let (p, _sync) = self.slice_mut()?.device_ptr_mut(stream);
        Ok(f(p))
    }
}

impl Drop for CudaBuf {
    fn drop(&mut self) {
        if let Some(s) = self.slice.take() {
            // cudarc frees on drop; guard it like every other call.
            let _ = guarded(move || drop(s));
        }
        self.dev.counter.sub(self.len);
    }
}
