//! A host fold continued on its first operand's own bytes: the kernel
//! side of an in-place reduction (`exec::donate`). When the run holds
//! operand 0's buffer alone and that buffer was handed over for the
//! fold's result, the runner gives the step those bytes as its result and
//! the operands after the first; the fold adds the rest onto them (and
//! divides, for a [`Kernel::FoldDiv`]), in the order and with the bits the
//! plain fold has.

use super::cpu;
use super::fault::Event;
use super::{locals, Buf, Ctx, DeviceCall, DeviceWork, Faults, Kernel};
use crate::error::ExecError;

/// Runs `call` (a fold on a host arena whose `reuse` holds operand 0's
/// values and whose `ins` are the operands after it) and returns its
/// result, which lies in those bytes.
pub(super) fn run(ctx: &Ctx, call: DeviceCall<'_>, faults: &Faults) -> Result<Buf, ExecError> {
    let (kind, div) = match call.work {
        DeviceWork::Kernel(Kernel::Fold { kind }) => (*kind, None),
        DeviceWork::Kernel(Kernel::FoldDiv { kind, by }) => (*kind, Some(*by)),
        _ => return Err(not_a_host_fold(call.op)),
    };
    let (Ctx::Cpu(arena), Some(bytes)) = (ctx, call.reuse) else {
        return Err(not_a_host_fold(call.op));
    };
    let mut out = arena.adopt(call.ty.size_bytes(), faults, bytes)?;
    if faults.check(Event::Kernel) {
        return Err(ExecError::Injected {
            device: ctx.device(),
            op: call.op.into(),
        });
    }
    let ins = locals(call.ins, Buf::as_cpu, call.op)?;
    cpu::fold_onto(call.ty.dtype, kind, &ins, &mut out, div);
    Ok(Buf::Cpu(out))
}

fn not_a_host_fold(op: &str) -> ExecError {
    ExecError::Internal(format!(
        "`{op}` was asked to fold onto its first operand, which only a host fold with bytes to fold onto does"
    ))
}

/// A [`Kernel::FoldDiv`] on a GPU (planned on host arenas only).
#[cfg(any(feature = "cuda", feature = "vulkan"))]
pub(super) fn host_only(op: &str) -> ExecError {
    ExecError::Internal(format!(
        "`{op}` was planned as a fold that divides, which only host arenas run"
    ))
}
