//! The kernels of `extern` ops: what the host framework registers for each
//! backend, and how the executor calls them.
//!
//! An `extern "name"` op (`fuel_graph_ext::op::ExternOp`) runs the kernel
//! registered under its name for its device's backend. The table is
//! process-wide, as the interpreter's reference functions are
//! (`fuel_graph_ext::interp::register_reference`): register before
//! compiling. On a CPU device a kernel is a Rust function over host
//! buffers ([`register_cpu`]); it gets the op (its attributes and result
//! type), its operands' bytes and the result's bytes to fill, and returns
//! how many bytes it wrote. `compile` refuses an extern op with no kernel
//! for its device (E0730), naming the op, the device and the call that
//! registers one. At run time a kernel that fails (E0731), writes another
//! number of bytes than its result holds (E0732) or panics (E0733) ends
//! the run with an error naming the op and the device; the run's buffers
//! are released as for any failed step, and the next run works.
//!
//! `matmul` is registered from the start (`matmul.rs`): `a[m, k] · b[k,
//! n]` for f32 and f64 through the `matrixmultiply` crate.

mod gpu;
mod matmul;
#[cfg(feature = "vulkan")]
mod wgsl;

#[cfg(feature = "vulkan")]
pub use gpu::wgsl_to_spirv;
pub use gpu::{matmul_params, CudaKernel, ParamsFn, VulkanKernel};
pub use matmul::matmul_cpu;

/// The shipped `matmul` shader for Vulkan devices (f32).
pub const MATMUL_WGSL: &str = include_str!("../../shaders/matmul.wgsl");
/// The shipped `matmul` kernel for CUDA devices (f32), entry `matmul_f32`.
pub const MATMUL_PTX: &str = include_str!("../../shaders/matmul.ptx");

use crate::backend::{Buf, Ctx};
use crate::error::ExecError;
use fuel_graph_ext::device::{Device, DeviceKind};
use fuel_graph_ext::dtype::TensorType;
use fuel_graph_ext::op::ExternOp;
use std::collections::HashMap;
use std::sync::{Arc, OnceLock, RwLock};

/// One operand as a CPU kernel sees it: its type and its bytes
/// (little-endian elements, row-major).
#[derive(Clone, Copy, Debug)]
pub struct Operand<'a> {
    /// Its type.
    pub ty: &'a TensorType,
    /// Its bytes, `ty.size_bytes()` of them.
    pub bytes: &'a [u8],
}

/// A CPU kernel's signature: the op, its operands and the result's bytes in;
/// how many bytes it wrote (all of them, for a correct kernel), or why it
/// failed, out.
pub trait CpuFn:
    Fn(&ExternOp, &[Operand<'_>], &mut [u8]) -> Result<usize, String> + Send + Sync
{
}
impl<F: Fn(&ExternOp, &[Operand<'_>], &mut [u8]) -> Result<usize, String> + Send + Sync> CpuFn
    for F
{
}

/// A registered CPU kernel.
pub type CpuKernel = Arc<dyn CpuFn>;

/// Every registered kernel, by name.
#[derive(Default)]
struct Table {
    cpu: HashMap<String, CpuKernel>,
    vulkan: HashMap<String, VulkanKernel>,
    cuda: HashMap<String, CudaKernel>,
}

fn table() -> &'static RwLock<Table> {
    static TABLE: OnceLock<RwLock<Table>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut t = Table::default();
        t.cpu.insert("matmul".into(), Arc::new(matmul_cpu));
        // The shipped shader compiles (tests/tests/extern_op.rs runs it);
        // were it not to, Vulkan matmuls would be refused at compile time.
        #[cfg(feature = "vulkan")]
        if let Ok(spirv) = wgsl_to_spirv("matmul", MATMUL_WGSL) {
            let k = VulkanKernel {
                spirv: spirv.into(),
                params: Arc::new(matmul_params),
            };
            t.vulkan.insert("matmul".into(), k);
        }
        let k = CudaKernel {
            ptx: MATMUL_PTX.into(),
            entry: "matmul_f32".into(),
            params: Arc::new(matmul_params),
        };
        t.cuda.insert("matmul".into(), k);
        RwLock::new(t)
    })
}

/// Registers PTX as the CUDA kernel of `extern "name"` ops: entry `entry`
/// of `ptx`, with `params` (see `gpu.rs` for the signature it must have).
pub fn register_ptx(name: &str, ptx: &str, entry: &str, params: impl ParamsFn + 'static) {
    if let Ok(mut t) = table().write() {
        let k = CudaKernel {
            ptx: ptx.into(),
            entry: entry.to_string(),
            params: Arc::new(params),
        };
        t.cuda.insert(name.to_string(), k);
    }
}

/// Registers SPIR-V (bytes) as the Vulkan kernel of `extern "name"` ops,
/// with `params`, the two parameter words of a dispatch (see `gpu.rs` for
/// the layout the shader sees).
pub fn register_spirv(name: &str, spirv: Vec<u8>, params: impl ParamsFn + 'static) {
    if let Ok(mut t) = table().write() {
        let k = VulkanKernel {
            spirv: spirv.into(),
            params: Arc::new(params),
        };
        t.vulkan.insert(name.to_string(), k);
    }
}

/// Compiles `wgsl` with naga and registers it as the Vulkan kernel of
/// `extern "name"` ops ([`register_spirv`]); a shader that does not
/// compile is refused here, with naga's message.
#[cfg(feature = "vulkan")]
pub fn register_wgsl(
    name: &str,
    wgsl: &str,
    params: impl ParamsFn + 'static,
) -> Result<(), String> {
    register_spirv(name, wgsl_to_spirv(name, wgsl)?, params);
    Ok(())
}

/// Registers `f` as the CPU kernel of `extern "name"` ops, for every
/// graph compiled after this in the process (replacing an earlier one).
pub fn register_cpu(name: &str, f: impl CpuFn + 'static) {
    if let Ok(mut t) = table().write() {
        t.cpu.insert(name.to_string(), Arc::new(f));
    }
}

/// The call that registers a kernel for `kind`, for messages.
fn how_to_register(kind: DeviceKind) -> &'static str {
    match kind {
        DeviceKind::Cpu => {
            "register one with fuel_runtime::kernels::register_cpu(name, fn) before compiling"
        }
        DeviceKind::Vulkan => "register one with fuel_runtime::kernels::register_wgsl(name, wgsl, params) or register_spirv before compiling",
        DeviceKind::Cuda => "register one with fuel_runtime::kernels::register_ptx(name, ptx, entry, params) before compiling",
    }
}

/// The CPU kernel of `x`, if one is registered.
fn cpu_kernel(x: &ExternOp) -> Option<CpuKernel> {
    table().read().ok()?.cpu.get(&x.name).cloned()
}

/// The Vulkan kernel of `x`, if one is registered.
fn vulkan_kernel(x: &ExternOp) -> Option<VulkanKernel> {
    table().read().ok()?.vulkan.get(&x.name).cloned()
}

/// The CUDA kernel of `x`, if one is registered.
fn cuda_kernel(x: &ExternOp) -> Option<CudaKernel> {
    table().read().ok()?.cuda.get(&x.name).cloned()
}

/// A GPU kernel's parameter words for `x` over operands of `tys`, or the
/// compile-time refusal of types it does not take.
fn gpu_params(
    params: &dyn ParamsFn,
    x: &ExternOp,
    tys: &[TensorType],
    device: Device,
) -> Result<[u32; 2], ExecError> {
    let refs: Vec<&TensorType> = tys.iter().collect();
    params(x, &refs).map_err(|reason| ExecError::UnsupportedKernel {
        op: format!("extern \"{}\"", x.name),
        device,
        reason,
        fix: "place it on a device whose kernel takes these types, or register one that does"
            .into(),
    })
}

/// The error for `x` on `device`, which has no kernel for it.
fn no_kernel(x: &ExternOp, device: Device) -> ExecError {
    ExecError::NoExternKernel {
        name: x.name.clone(),
        device,
        fix: how_to_register(device.kind).to_string(),
    }
}

/// Whether `x`, with operands of `tys`, can run on `device`: a kernel is
/// registered for its backend (E0730 if not) and, on a GPU, takes these
/// types (`ExecError::UnsupportedKernel` if not).
pub(crate) fn check(x: &ExternOp, tys: &[TensorType], device: Device) -> Result<(), ExecError> {
    match device.kind {
        DeviceKind::Cpu if cpu_kernel(x).is_some() => Ok(()),
        DeviceKind::Vulkan => {
            let k = vulkan_kernel(x).ok_or_else(|| no_kernel(x, device))?;
            gpu_params(&*k.params, x, tys, device).map(|_| ())
        }
        DeviceKind::Cuda => {
            let k = cuda_kernel(x).ok_or_else(|| no_kernel(x, device))?;
            gpu_params(&*k.params, x, tys, device).map(|_| ())
        }
        _ => Err(no_kernel(x, device)),
    }
}

/// Runs an `extern` op's registered kernel for `ctx`'s backend into `out`;
/// `tys` are its operands' types.
pub(crate) fn run(
    ctx: &Ctx,
    x: &ExternOp,
    tys: &[TensorType],
    ins: &[Arc<Buf>],
    out: &mut Buf,
    #[allow(unused_variables)] // with the Vulkan backend compiled out
    faults: &crate::backend::fault::Faults,
) -> Result<(), ExecError> {
    let device = ctx.device();
    match out {
        Buf::Cpu(d) => {
            let mut operands = Vec::with_capacity(ins.len());
            for (b, ty) in ins.iter().zip(tys) {
                let cpu = b.as_cpu().ok_or_else(|| wrong_backend(device))?;
                operands.push(Operand {
                    ty,
                    bytes: cpu.bytes(),
                });
            }
            run_cpu(x, device, &operands, d.bytes_mut())
        }
        #[cfg(feature = "vulkan")]
        Buf::Vulkan(d) => {
            let Ctx::Vulkan(v) = ctx else {
                return Err(wrong_backend(device));
            };
            let k = vulkan_kernel(x).ok_or_else(|| no_kernel(x, device))?;
            let params = gpu_params(&*k.params, x, tys, device)?;
            let bufs = ins
                .iter()
                .map(|b| b.as_vulkan().ok_or_else(|| wrong_backend(device)))
                .collect::<Result<Vec<_>, _>>()?;
            let n = x.ty.num_elements();
            v.run_extern(&x.name, &k.spirv, params, &bufs, d, n, faults)
        }
        #[cfg(feature = "cuda")]
        Buf::Cuda(d) => {
            let Ctx::Cuda(c) = ctx else {
                return Err(wrong_backend(device));
            };
            let k = cuda_kernel(x).ok_or_else(|| no_kernel(x, device))?;
            let params = gpu_params(&*k.params, x, tys, device)?;
            let bufs = ins
                .iter()
                .map(|b| b.as_cuda().ok_or_else(|| wrong_backend(device)))
                .collect::<Result<Vec<_>, _>>()?;
            let n = x.ty.num_elements();
            c.run_extern(&x.name, &k.ptx, &k.entry, params, &bufs, d, n)
        }
        #[allow(unreachable_patterns)] // with every GPU backend compiled out
        _ => check(x, tys, device),
    }
}

/// An operand on another backend than its extern op's device.
fn wrong_backend(device: Device) -> ExecError {
    ExecError::Internal(format!(
        "`extern` on {device} got a buffer of another backend"
    ))
}

/// Runs `x`'s CPU kernel over `ins` into `out` on `device`.
fn run_cpu(
    x: &ExternOp,
    device: Device,
    ins: &[Operand<'_>],
    out: &mut [u8],
) -> Result<(), ExecError> {
    let fail = |reason: String| ExecError::ExternFailed {
        name: x.name.clone(),
        device,
        reason,
    };
    let f = cpu_kernel(x).ok_or_else(|| no_kernel(x, device))?;
    let want = out.len();
    let res = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(x, ins, out)));
    match res {
        Ok(Ok(wrote)) if wrote == want => Ok(()),
        Ok(Ok(wrote)) => Err(ExecError::ExternBytes {
            name: x.name.clone(),
            device,
            wrote,
            want,
            ty: Box::new(x.ty.clone()),
        }),
        Ok(Err(reason)) => Err(fail(reason)),
        Err(p) => Err(ExecError::ExternPanicked {
            name: x.name.clone(),
            device,
            message: crate::exec::panic_message(&*p),
        }),
    }
}
