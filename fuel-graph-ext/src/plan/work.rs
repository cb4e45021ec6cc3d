//! What a step asks of its device: an input, a copy or one of the kernels
//! every backend has. The schedule ([`super::schedule`]) hands these to the
//! runtime, which carries each out on the device's backend; the cost model
//! prices the same values. Pure data, with no device in sight.

use super::region::Region;
use crate::device::Device;
use crate::dtype::DType;
use crate::op::ElementwiseOp;

/// What a device does for one step: the work a backend carries out. The
/// runner's own work (sharing a buffer, a collective) is not here, so every
/// arm below is real device work.
#[derive(Clone, Debug, PartialEq)]
pub enum DeviceWork {
    /// Uploads the named input or, `in_place`, reads the caller's bytes
    /// where they lie (planned by `Schedule::inputs_in_place`; a Vulkan
    /// device whose memory is the host's imports them).
    Input { name: String, in_place: bool },
    /// Copies (or moves) operand 0 from `src` to the step's device.
    Copy { src: Device, is_move: bool },
    /// A kernel on the step's device.
    Kernel(Kernel),
}

/// The kernels every backend has.
#[derive(Clone, Debug, PartialEq)]
pub enum Kernel {
    /// Folds an element-wise op over all operands in one pass.
    Fold { kind: ElementwiseOp },
    /// Divides operand 0 by a positive integer.
    Div { by: u64 },
    /// A fold whose one reader divides it, done as one step: each block of
    /// the result is folded and then divided by `by` while it is in cache,
    /// with the bits [`Kernel::Fold`] then [`Kernel::Div`] give. A Mean's
    /// `add` and `div` become one pass over memory and one buffer fewer.
    /// Planned only where [`divides_in_fold`] says the device can.
    FoldDiv { kind: ElementwiseOp, by: u64 },
    /// Converts operand 0's `from` elements to the result's dtype.
    Cast { from: DType },
    /// Gathers byte regions of the operands (slice and concat).
    Gather { regions: Vec<Region> },
    /// The caller's kernel for an `extern` op, as registered for the
    /// device's backend (`fuel_runtime::kernels`).
    Extern {
        /// The op: its kernel's name, attributes and result type.
        op: Box<crate::op::ExternOp>,
        /// Its operands' types, in operand order.
        operands: Vec<crate::dtype::TensorType>,
    },
}

impl Kernel {
    /// An element-wise fold, plain or followed by a division: the kernels
    /// that read every operand once, in order (so a copy into one can be
    /// deferred into it).
    pub fn is_fold(&self) -> bool {
        matches!(self, Kernel::Fold { .. } | Kernel::FoldDiv { .. })
    }
}

/// Whether a fold on `device` can divide its own result
/// ([`Kernel::FoldDiv`]): the host arenas' fold does; the GPU backends
/// have no such kernel, so there a `div` stays a step of its own. The
/// schedule and the cost model's closed forms both ask this.
pub fn divides_in_fold(device: Device) -> bool {
    device.is_cpu()
}

/// The launches after the first of a GPU fold of `n` operands on a backend
/// that folds at most `max` per launch: each later launch folds the partial
/// result (copied into a scratch accumulator) with up to `max - 1` more.
pub fn chained_launches(n: usize, max: usize) -> usize {
    n.saturating_sub(max).div_ceil(max.saturating_sub(1).max(1))
}
