//! Opened devices and their buffers, one variant per backend.
//!
//! [`Ctx`] is an opened device and [`Buf`] a buffer on one. Both are closed
//! enums so that the Copy arm ([`copy`]) can be one exhaustive
//! match over (source kind, destination kind). [`run`] carries out one piece
//! of [`DeviceWork`] (an input, a copy or a [`Kernel`]) on its device; the
//! runner's own work (shared buffers, collectives) never reaches it.

pub mod alloc;
pub mod copy;
pub mod cpu;
#[cfg(feature = "cuda")]
pub mod cuda;
mod deferred;
pub mod fault;
mod fold_onto;
pub mod pages;
#[cfg(feature = "vulkan")]
pub mod vulkan;
pub mod worker;

use crate::error::ExecError;
use fuel_graph_ext::device::{Device, DeviceKind};
use fuel_graph_ext::dtype::DType;
use fuel_graph_ext::dtype::TensorType;
pub use fuel_graph_ext::limits;
/// The plan's vocabulary for device work, which every backend carries out.
pub use fuel_graph_ext::plan::{
    chained_launches, concat_regions, concat_regions_into, slice_regions, slice_regions_into,
    slice_run, try_region_list, DeviceWork, Kernel, Region,
};

use alloc::MemStats;
use cpu::{Arena, CpuBuf};
#[cfg(feature = "cuda")]
use cuda::{CudaBuf, CudaDev};
#[cfg(feature = "vulkan")]
use deferred::staged_vulkan_fold;
pub use deferred::{scratch_buffers, Operand};
use deferred::{staged_fold, staged_gather};
use fault::{Event, Faults};
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
#[cfg(feature = "vulkan")]
use vulkan::{VkBuf, VkDev};

/// An opened device.
#[derive(Clone)]
pub enum Ctx {
    /// A host arena.
    Cpu(Arc<Arena>),
    /// A CUDA GPU.
    #[cfg(feature = "cuda")]
    Cuda(Arc<CudaDev>),
    /// A Vulkan logical device.
    #[cfg(feature = "vulkan")]
    Vulkan(Arc<VkDev>),
}

/// A buffer on one device.
pub enum Buf {
    /// In a host arena.
    Cpu(CpuBuf),
    /// On a CUDA GPU.
    #[cfg(feature = "cuda")]
    Cuda(CudaBuf),
    /// On a Vulkan device.
    #[cfg(feature = "vulkan")]
    Vulkan(VkBuf),
}

impl Ctx {
    /// The device's name.
    pub fn device(&self) -> Device {
        match self {
            Ctx::Cpu(a) => a.device,
            #[cfg(feature = "cuda")]
            Ctx::Cuda(c) => c.device,
            #[cfg(feature = "vulkan")]
            Ctx::Vulkan(v) => v.device,
        }
    }

    /// Allocator numbers.
    pub fn stats(&self) -> MemStats {
        match self {
            Ctx::Cpu(a) => a.stats(),
            #[cfg(feature = "cuda")]
            Ctx::Cuda(c) => c.stats(),
            #[cfg(feature = "vulkan")]
            Ctx::Vulkan(v) => v.stats(),
        }
    }

    /// Whether the host reads this device's buffers where they lie (a
    /// mapped Vulkan device), so a host fold needs no scratch buffer for them.
    pub fn host_mapped(&self) -> bool {
        match self {
            Ctx::Cpu(_) => false,
            #[cfg(feature = "cuda")]
            Ctx::Cuda(_) => false,
            #[cfg(feature = "vulkan")]
            Ctx::Vulkan(v) => v.host_mapped(),
        }
    }

    /// What fits on the device, as it reports it; `None` where it does
    /// not say (a host without `/proc`, a GPU whose driver did not answer).
    pub fn capacity(&self) -> Option<limits::Capacity> {
        match self {
            Ctx::Cpu(_) => limits::host(),
            #[cfg(feature = "cuda")]
            Ctx::Cuda(c) => c.capacity(),
            #[cfg(feature = "vulkan")]
            Ctx::Vulkan(v) => Some(v.capacity()),
        }
    }

    /// The offset multiple at which a `slice` on this device may be a view
    /// of its operand's buffer (`schedule::Work::View`), or `None` where
    /// slices always copy: 1 on the host (every slice's offset is a
    /// multiple of its element size), the storage-buffer offset alignment
    /// on Vulkan, none on CUDA (not built: no GPU here to prove it on).
    pub fn view_align(&self) -> Option<usize> {
        match self {
            Ctx::Cpu(_) => Some(1),
            #[cfg(feature = "cuda")]
            Ctx::Cuda(_) => None,
            #[cfg(feature = "vulkan")]
            Ctx::Vulkan(v) => usize::try_from(v.view_align()).ok(),
        }
    }

    /// Whether this device reads host-arena buffers in place (a Vulkan
    /// device that imports host memory), so a host-to-device copy can be a
    /// view (`schedule::Work::Import`).
    pub fn imports_host(&self) -> bool {
        match self {
            #[cfg(feature = "vulkan")]
            Ctx::Vulkan(v) => v.import_status().is_ok(),
            _ => false,
        }
    }

    /// What this device can do that changes its plan (views, imports,
    /// inputs read in place), as the plan's rules take it.
    pub fn caps(&self) -> fuel_graph_ext::plan::Caps {
        fuel_graph_ext::plan::Caps {
            view_align: self.view_align(),
            imports_host: self.imports_host(),
            reads_inputs_in_place: self.reads_inputs_in_place(),
        }
    }

    /// Whether a caller's input here is read where it lies rather than
    /// uploaded (a Vulkan device whose memory is the host's and which
    /// imports host memory).
    pub fn reads_inputs_in_place(&self) -> bool {
        match self {
            #[cfg(feature = "vulkan")]
            Ctx::Vulkan(v) => v.reads_inputs_in_place(),
            _ => false,
        }
    }

    /// Whether values of `dtype` may live here.
    pub fn supports(&self, dtype: DType) -> Result<(), ExecError> {
        let r = match self {
            Ctx::Cpu(_) => Ok(()),
            #[cfg(feature = "cuda")]
            Ctx::Cuda(c) => c.supports(dtype),
            #[cfg(feature = "vulkan")]
            Ctx::Vulkan(v) => v.supports(dtype),
        };
        r.map_err(|reason| ExecError::Unsupported {
            dtype,
            device: self.device(),
            reason,
        })
    }

    /// Whether kernel `k` with a result of `dtype` can run here, beyond
    /// the dtype itself (checked by [`Ctx::supports`]): Vulkan's `div`
    /// takes a 32-bit divisor.
    pub fn supports_kernel(&self, k: &Kernel, dtype: DType) -> Result<(), ExecError> {
        match (self, k) {
            #[cfg(feature = "vulkan")]
            (Ctx::Vulkan(v), Kernel::Div { by }) => v.check_div(dtype, *by),
            #[cfg(feature = "cuda")]
            (Ctx::Cuda(c), Kernel::Div { by }) => c.check_div(dtype, *by),
            _ => {
                let _ = dtype;
                Ok(())
            }
        }
    }

    /// A buffer of `bytes` on this device.
    pub fn alloc(&self, bytes: usize, faults: &Faults) -> Result<Buf, ExecError> {
        self.alloc_reusing(bytes, faults, None)
    }

    /// [`alloc`](Self::alloc); a host arena writes into `reuse` (a caller's
    /// output bytes) when it can, other devices ignore it.
    pub fn alloc_reusing(
        &self,
        bytes: usize,
        faults: &Faults,
        reuse: Option<Arc<[u8]>>,
    ) -> Result<Buf, ExecError> {
        Ok(match self {
            Ctx::Cpu(a) => Buf::Cpu(a.alloc_reusing(bytes, faults, reuse)?),
            #[cfg(feature = "cuda")]
            Ctx::Cuda(c) => Buf::Cuda(c.alloc(bytes, faults)?),
            #[cfg(feature = "vulkan")]
            Ctx::Vulkan(v) => Buf::Vulkan(v.alloc(bytes, faults)?),
        })
    }

    /// Host bytes into a new buffer here.
    pub fn upload(&self, bytes: &[u8], faults: &Faults) -> Result<Buf, ExecError> {
        let mut out = self.alloc(bytes.len(), faults)?;
        match (&mut out, self) {
            (Buf::Cpu(d), _) => cpu::memcpy(bytes, d),
            #[cfg(feature = "cuda")]
            (Buf::Cuda(d), Ctx::Cuda(c)) => c.upload(bytes, d)?,
            #[cfg(feature = "vulkan")]
            (Buf::Vulkan(d), Ctx::Vulkan(v)) => v.upload(bytes, d)?,
            #[allow(unreachable_patterns)] // with every GPU backend compiled out
            _ => return Err(ExecError::Internal("buffer on the wrong device".into())),
        }
        Ok(out)
    }
}

impl Buf {
    /// The host buffer, if it is one.
    pub fn as_cpu(&self) -> Option<&CpuBuf> {
        match self {
            Buf::Cpu(b) => Some(b),
            #[allow(unreachable_patterns)] // with every GPU backend compiled out
            _ => None,
        }
    }

    /// The CUDA buffer, if it is one.
    #[cfg(feature = "cuda")]
    pub fn as_cuda(&self) -> Option<&CudaBuf> {
        match self {
            Buf::Cuda(b) => Some(b),
            _ => None,
        }
    }

    /// The Vulkan buffer, if it is one.
    #[cfg(feature = "vulkan")]
    pub fn as_vulkan(&self) -> Option<&VkBuf> {
        match self {
            Buf::Vulkan(b) => Some(b),
            _ => None,
        }
    }

    /// The kind of device it lives on.
    pub fn kind(&self) -> DeviceKind {
        match self {
            Buf::Cpu(_) => DeviceKind::Cpu,
            #[cfg(feature = "cuda")]
            Buf::Cuda(_) => DeviceKind::Cuda,
            #[cfg(feature = "vulkan")]
            Buf::Vulkan(_) => DeviceKind::Vulkan,
        }
    }

    /// The device it lives on.
    pub fn device(&self) -> Device {
        match self {
            Buf::Cpu(b) => b.device(),
            #[cfg(feature = "cuda")]
            Buf::Cuda(b) => b.dev().device,
            #[cfg(feature = "vulkan")]
            Buf::Vulkan(b) => b.dev().device,
        }
    }

    /// Its length in bytes.
    pub fn len(&self) -> usize {
        match self {
            Buf::Cpu(b) => b.bytes().len(),
            #[cfg(feature = "cuda")]
            Buf::Cuda(b) => b.len(),
            #[cfg(feature = "vulkan")]
            Buf::Vulkan(b) => b.len(),
        }
    }

    /// True for a zero-byte buffer.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Reads the whole buffer back to the host.
    pub fn download(&self, bytes: usize) -> Result<Vec<u8>, ExecError> {
        let mut out = Vec::new();
        out.try_reserve_exact(bytes)
            .map_err(|e| ExecError::OutOfMemory {
                device: self.device(),
                bytes,
                reason: format!("the host cannot hold the bytes read back: {e}"),
            })?;
        out.resize(bytes, 0);
        self.download_into(&mut out)?;
        Ok(out)
    }

    /// Reads the first `out.len()` bytes of the buffer into `out`.
    pub fn download_into(&self, out: &mut [u8]) -> Result<(), ExecError> {
        match self {
            Buf::Cpu(b) => {
                let src = b
                    .bytes()
                    .get(..out.len())
                    .ok_or_else(|| ExecError::Internal("download past the buffer".into()))?;
                cpu::copy_bytes(src, out);
            }
            #[cfg(feature = "cuda")]
            Buf::Cuda(b) => b.dev().download(b, out)?,
            #[cfg(feature = "vulkan")]
            Buf::Vulkan(b) => b.dev().download(b, out)?,
        }
        Ok(())
    }
}

/// Why a backend that this build left out cannot open `device`.
#[allow(dead_code)] // unused when every backend is compiled in
fn compiled_out(device: Device, feature: &str) -> ExecError {
    ExecError::DeviceUnavailable {
        device: device.to_string(),
        reason: format!(
            "this build has no {} backend (cargo feature `{feature}` is off)",
            device.kind
        ),
        hint: crate::error::feature_hint(feature),
    }
}

/// Opens every device in `listed` (one Vulkan instance for all of them),
/// as `opts` says; `import`: whether Vulkan devices may import host
/// buffers (the plan's `import_host_buffers`).
#[cfg_attr(
    not(all(feature = "vulkan", feature = "cuda")),
    allow(unused_variables)
)]
pub fn open(
    listed: &BTreeSet<Device>,
    opts: &crate::exec::RuntimeOptions,
    import: bool,
) -> Result<Ctxs, ExecError> {
    let mut ctxs = Ctxs::default();
    #[cfg(feature = "vulkan")]
    let mut instance: Option<Arc<vulkan::Instance>> = None;
    for d in listed {
        let ctx = match d.kind {
            DeviceKind::Cpu => Ctx::Cpu(Arc::new(Arena::open(*d))),
            #[cfg(feature = "cuda")]
            DeviceKind::Cuda => Ctx::Cuda(CudaDev::open_with(*d, opts.cuda_pin)?),
            #[cfg(not(feature = "cuda"))]
            DeviceKind::Cuda => return Err(compiled_out(*d, "cuda")),
            #[cfg(feature = "vulkan")]
            DeviceKind::Vulkan => {
                let inst = match &instance {
                    Some(i) => i.clone(),
                    None => {
                        let i =
                            vulkan::Instance::open().map_err(|u| ExecError::DeviceUnavailable {
                                device: d.to_string(),
                                reason: u.reason,
                                hint: u.hint,
                            })?;
                        instance = Some(i.clone());
                        i
                    }
                };
                let access = if opts.vulkan_mapped {
                    vulkan::HostAccess::Mapped
                } else {
                    vulkan::HostAccess::Staging
                };
                let how = vulkan::OpenOptions {
                    per_adapter: opts.vulkan_devices_per_adapter,
                    access,
                    import,
                };
                Ctx::Vulkan(inst.open_device_as(*d, how)?)
            }
            #[cfg(not(feature = "vulkan"))]
            DeviceKind::Vulkan => return Err(compiled_out(*d, "vulkan")),
        };
        ctxs.insert(*d, ctx);
    }
    Ok(ctxs)
}

fn wrong(op: &str) -> ExecError {
    ExecError::Internal(format!("`{op}` got an operand on another backend"))
}

/// One piece of device work as a runner hands it to [`run`].
pub struct DeviceCall<'a> {
    /// What to do.
    pub work: &'a DeviceWork,
    /// The result type.
    pub ty: &'a TensorType,
    /// The op's mnemonic, for errors.
    pub op: &'a str,
    /// The operands, in operand order.
    pub ins: &'a [Arc<Buf>],
    /// The caller's tensor for an input step (a host arena wraps it
    /// without copying).
    pub input: Option<&'a Arc<[u8]>>,
    /// Storage the result may be written into (see [`Ctx::alloc_reusing`]).
    pub reuse: Option<Arc<[u8]>>,
    /// A host fold continued on `reuse`, which holds operand 0's values;
    /// `ins` are the operands after it (`exec::donate`).
    pub onto: bool,
}

/// The opened devices by device: looked up once per step, so with a
/// cheap hash (a device is two small integers).
pub type Ctxs = HashMap<Device, Ctx, rustc_hash::FxBuildHasher>;

/// Runs one piece of device work on `ctx` and returns its result buffer.
pub fn run(ctx: &Ctx, call: DeviceCall<'_>, faults: &Faults) -> Result<Buf, ExecError> {
    let bytes = call.ty.size_bytes();
    match call.work {
        DeviceWork::Input { name, in_place } => {
            // Only a Vulkan device reads inputs in place.
            #[cfg(not(feature = "vulkan"))]
            let _ = in_place;
            let data = call
                .input
                .ok_or_else(|| ExecError::MissingInput(name.clone()))?;
            match ctx {
                Ctx::Cpu(a) if cpu::aligned(data) => Ok(Buf::Cpu(a.wrap(data.clone(), faults)?)),
                // Read in place: no allocation, so no allocation fault
                // point, as `Executable::planned_events` counts. Where the
                // driver refuses these bytes after all, an upload passes
                // none either.
                #[cfg(feature = "vulkan")]
                Ctx::Vulkan(v) if *in_place => match v.input_in_place(data)? {
                    Some(view) => Ok(Buf::Vulkan(view)),
                    None => ctx.upload(data, &Faults::new(None)),
                },
                _ => ctx.upload(data, faults),
            }
        }
        DeviceWork::Copy { .. } => {
            let src = call
                .ins
                .first()
                .ok_or_else(|| ExecError::Internal("copy without a source".into()))?;
            copy::copy(src, ctx, bytes, faults, call.reuse)
        }
        DeviceWork::Kernel(_) if call.onto => fold_onto::run(ctx, call, faults),
        DeviceWork::Kernel(k) => {
            let mut out = ctx.alloc_reusing(bytes, faults, call.reuse)?;
            if faults.check(Event::Kernel) {
                return Err(ExecError::Injected {
                    device: ctx.device(),
                    op: call.op.into(),
                });
            }
            kernel(ctx, k, call.ty, call.op, call.ins, &mut out, faults)?;
            Ok(out)
        }
    }
}

/// A host-to-Vulkan copy the plan elided (`schedule::Work::Import`): a view
/// of `src`'s host buffer on `ctx` after the copy fault point, or, when the
/// device cannot import this buffer after all (the driver refused), a real
/// copy. The fallback passes no allocation fault point, so that
/// `Executable::planned_events` (which counts none for an import) holds.
pub fn import_host(
    ctx: &Ctx,
    src: &Arc<Buf>,
    bytes: usize,
    faults: &Faults,
) -> Result<Buf, ExecError> {
    if faults.check(Event::Copy) {
        return Err(ExecError::Injected {
            device: ctx.device(),
            op: "copy".into(),
        });
    }
    #[cfg(feature = "vulkan")]
    if let Ctx::Vulkan(v) = ctx {
        if let Some(view) = v.view_of_host(src, bytes)? {
            return Ok(Buf::Vulkan(view));
        }
        // A caller's tensor on the host, on a device that reads callers'
        // bytes where they lie (as it reads its own inputs).
        let caller = src.as_cpu().and_then(|c| c.shared_bytes());
        if let Some(data) = caller.filter(|d| d.len() == bytes && v.reads_inputs_in_place()) {
            if let Some(view) = v.input_in_place(data)? {
                return Ok(Buf::Vulkan(view));
            }
        }
    }
    copy::copy(src, ctx, bytes, &Faults::new(None), None)
}

/// A view of `len` bytes of `src` starting `at` bytes in, on `src`'s own
/// device, holding `src` alive: a `slice` planned as
/// [`Work::View`](fuel_graph_ext::plan::schedule::Work::View). Nothing moves or is
/// allocated.
#[cfg_attr(not(feature = "vulkan"), allow(unused_variables))]
pub fn view(src: &Arc<Buf>, at: usize, len: usize, host_only: bool) -> Result<Buf, ExecError> {
    let made = match &**src {
        Buf::Cpu(_) => cpu::CpuBuf::view(src, at, len).map(Buf::Cpu),
        #[cfg(feature = "vulkan")]
        Buf::Vulkan(_) => vulkan::VkBuf::view(src, at, len, host_only).map(Buf::Vulkan),
        #[cfg(feature = "cuda")]
        Buf::Cuda(_) => None,
    };
    made.ok_or_else(|| {
        ExecError::Internal(format!(
            "a view of {len} bytes at {at} of a {}-byte buffer that cannot hold it",
            src.len()
        ))
    })
}

/// Runs kernel `k` of `op` into `out`, a buffer of `ty` on `ctx`.
fn kernel(
    ctx: &Ctx,
    k: &Kernel,
    ty: &TensorType,
    op: &str,
    ins: &[Arc<Buf>],
    out: &mut Buf,
    faults: &Faults,
) -> Result<(), ExecError> {
    let dtype = ty.dtype;
    #[cfg(any(feature = "cuda", feature = "vulkan"))]
    let n = ty.num_elements();
    let first = || ins.first().map(|b| &**b).ok_or_else(|| wrong(op));
    if let Kernel::Gather { regions } = k {
        return gather(ctx, op, regions, ins, out, faults);
    }
    if let Kernel::Extern { op: x, operands } = k {
        return crate::kernels::run(ctx, x, operands, ins, out, faults);
    }
    match (out, ctx) {
        (Buf::Cpu(d), Ctx::Cpu(arena)) => match k {
            Kernel::Fold { kind } if ins.iter().any(|b| b.as_cpu().is_none()) => {
                staged_fold(arena, dtype, *kind, ins, d, faults)
            }
            Kernel::Fold { kind } => {
                cpu::fold(dtype, *kind, &locals(ins, Buf::as_cpu, op)?, d);
                Ok(())
            }
            Kernel::Div { by } => {
                let a = first()?.as_cpu().ok_or_else(|| wrong(op))?;
                cpu::div(dtype, *by, a, d);
                Ok(())
            }
            Kernel::FoldDiv { kind, by } if ins.iter().any(|b| b.as_cpu().is_none()) => {
                staged_fold(arena, dtype, *kind, ins, d, faults)?;
                let divided = cpu::div_bytes_in_place(dtype, *by, d.bytes_mut());
                divided.then_some(()).ok_or_else(|| wrong(op))
            }
            Kernel::FoldDiv { kind, by } => {
                cpu::fold_div(dtype, *kind, &locals(ins, Buf::as_cpu, op)?, d, *by);
                Ok(())
            }
            Kernel::Cast { from } => {
                let a = first()?.as_cpu().ok_or_else(|| wrong(op))?;
                cpu::cast(*from, dtype, a, d);
                Ok(())
            }
            Kernel::Gather { .. } | Kernel::Extern { .. } => Err(wrong(op)),
        },
        #[cfg(feature = "cuda")]
        (Buf::Cuda(d), Ctx::Cuda(c)) => match k {
            Kernel::Fold { kind } => {
                c.fold(dtype, *kind, &locals(ins, Buf::as_cuda, op)?, d, n, faults)
            }
            Kernel::Div { by } => {
                let a = first()?.as_cuda().ok_or_else(|| wrong(op))?;
                c.div(dtype, *by, a, d, n)
            }
            Kernel::Cast { from } => {
                let a = first()?.as_cuda().ok_or_else(|| wrong(op))?;
                c.cast(*from, dtype, a, d, n)
            }
            Kernel::FoldDiv { .. } => Err(fold_onto::host_only(op)),
            Kernel::Gather { .. } | Kernel::Extern { .. } => Err(wrong(op)),
        },
        #[cfg(feature = "vulkan")]
        (Buf::Vulkan(d), Ctx::Vulkan(v)) => match k {
            Kernel::Fold { kind } if ins.iter().any(|b| b.as_vulkan().is_none()) => {
                staged_vulkan_fold(v, dtype, *kind, ins, d, n, faults)
            }
            Kernel::Fold { kind } => v.fold(
                dtype,
                *kind,
                &locals(ins, Buf::as_vulkan, op)?,
                d,
                n,
                faults,
            ),
            Kernel::Div { by } => {
                let a = first()?.as_vulkan().ok_or_else(|| wrong(op))?;
                v.div(dtype, *by, a, d, n, faults)
            }
            Kernel::Cast { from } => {
                let a = first()?.as_vulkan().ok_or_else(|| wrong(op))?;
                v.cast(*from, dtype, a, d, n, faults)
            }
            Kernel::FoldDiv { .. } => Err(fold_onto::host_only(op)),
            Kernel::Gather { .. } | Kernel::Extern { .. } => Err(wrong(op)),
        },
        #[allow(unreachable_patterns)] // with every GPU backend compiled out
        _ => Err(wrong(op)),
    }
}

/// Copies byte `regions` of `ins` into `out`, all on `ctx`: slice and
/// concat, and the layout steps of collectives.
pub fn gather(
    ctx: &Ctx,
    op: &str,
    regions: &[Region],
    ins: &[Arc<Buf>],
    out: &mut Buf,
    faults: &Faults,
) -> Result<(), ExecError> {
    match (out, ctx) {
        (Buf::Cpu(d), Ctx::Cpu(arena)) if ins.iter().any(|b| b.as_cpu().is_none()) => {
            staged_gather(arena, regions, ins, d, faults)
        }
        (Buf::Cpu(d), Ctx::Cpu(_)) => {
            cpu::gather(regions, &locals(ins, Buf::as_cpu, op)?, d).map_err(ExecError::Internal)
        }
        #[cfg(feature = "cuda")]
        (Buf::Cuda(d), Ctx::Cuda(c)) => c.gather(op, regions, &locals(ins, Buf::as_cuda, op)?, d),
        #[cfg(feature = "vulkan")]
        (Buf::Vulkan(d), Ctx::Vulkan(v)) => {
            v.copy_regions(op, regions, &locals(ins, Buf::as_vulkan, op)?, d, faults)
        }
        #[allow(unreachable_patterns)] // with every GPU backend compiled out
        _ => Err(wrong(op)),
    }
}

/// Every operand as a buffer of one backend (picked by `local`).
fn locals<'a, T>(
    ins: &'a [Arc<Buf>],
    local: impl Fn(&'a Buf) -> Option<&'a T>,
    op: &str,
) -> Result<Vec<&'a T>, ExecError> {
    ins.iter()
        .map(|b| local(b).ok_or_else(|| wrong(op)))
        .collect()
}
