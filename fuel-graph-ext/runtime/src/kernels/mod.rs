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

mod matmul;

pub use matmul::matmul_cpu;

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
}

fn table() -> &'static RwLock<Table> {
    static TABLE: OnceLock<RwLock<Table>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut t = Table::default();
        t.cpu.insert("matmul".into(), Arc::new(matmul_cpu));
        RwLock::new(t)
    })
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
        _ => "this build runs extern ops on CPU devices only: place the op on a cpu device and register its kernel with fuel_runtime::kernels::register_cpu(name, fn)",
    }
}

/// The CPU kernel of `x`, if one is registered.
fn cpu_kernel(x: &ExternOp) -> Option<CpuKernel> {
    table().read().ok()?.cpu.get(&x.name).cloned()
}

/// Whether `x` can run on `device`: a kernel is registered for its
/// backend (E0730 if not).
pub(crate) fn check(x: &ExternOp, device: Device) -> Result<(), ExecError> {
    let found = match device.kind {
        DeviceKind::Cpu => cpu_kernel(x).is_some(),
        _ => false,
    };
    if found {
        return Ok(());
    }
    Err(ExecError::NoExternKernel {
        name: x.name.clone(),
        device,
        fix: how_to_register(device.kind).to_string(),
    })
}

/// Runs an `extern` op's registered kernel for `ctx`'s backend into `out`;
/// `tys` are its operands' types.
pub(crate) fn run(
    ctx: &Ctx,
    x: &ExternOp,
    tys: &[TensorType],
    ins: &[Arc<Buf>],
    out: &mut Buf,
) -> Result<(), ExecError> {
    let device = ctx.device();
    match out {
        Buf::Cpu(d) => {
            let mut operands = Vec::with_capacity(ins.len());
            for (b, ty) in ins.iter().zip(tys) {
                let cpu = b.as_cpu().ok_or_else(|| {
                    ExecError::Internal(format!(
                        "`extern` on {device} got an operand on another backend"
                    ))
                })?;
                operands.push(Operand {
                    ty,
                    bytes: cpu.bytes(),
                });
            }
            run_cpu(x, device, &operands, d.bytes_mut())
        }
        #[allow(unreachable_patterns)] // with every GPU backend compiled out
        _ => check(x, device),
    }
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
    let f = cpu_kernel(x).ok_or_else(|| ExecError::NoExternKernel {
        name: x.name.clone(),
        device,
        fix: how_to_register(device.kind).to_string(),
    })?;
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
