//! Which queue of the threaded runner runs each step: a device's compute
//! worker, its copy thread (a copy onto a host arena or a Vulkan device,
//! so it overlaps a kernel on the same device), or none (work the
//! dispatcher does itself: a shared buffer, a deferred operand, an import,
//! a view, a host input). The runtime sends steps by this rule, and the
//! overlap simulator (`fuel_collective::overlap`) plays plans through the
//! same lanes, so the two cannot disagree on where a step waits.

use super::schedule::{Step, Work};
use super::work::{DeviceWork, Kernel};
use crate::device::{Device, DeviceKind};

/// One queue of the threaded runner.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Lane {
    /// The device's worker: kernels, copies onto a CUDA device, driver
    /// calls and `comm.*` steps.
    Compute(Device),
    /// The device's copy thread: copies onto a host arena or Vulkan device.
    Copy(Device),
}

/// The lane that runs `s`, or `None` for the dispatcher's own work.
pub fn lane_of(s: &Step) -> Option<Lane> {
    let host_input = s.device.is_cpu() && matches!(s.work, Work::Device(DeviceWork::Input { .. }));
    if !s.work.needs_device() || host_input {
        return None;
    }
    Some(if has_copy_lane(s) {
        Lane::Copy(s.device)
    } else {
        Lane::Compute(s.device)
    })
}

/// Whether `s` is a copy that runs on its device's copy thread.
pub fn has_copy_lane(s: &Step) -> bool {
    matches!(s.work, Work::Device(DeviceWork::Copy { .. }))
        && matches!(s.device.kind, DeviceKind::Cpu | DeviceKind::Vulkan)
}

/// Whether `s` moves data between devices or meets other ranks: a copy
/// from another device (however the plan carries it out), a `comm.*` step
/// or a driver all-reduce.
pub fn communicates(s: &Step) -> bool {
    match &s.work {
        Work::Device(DeviceWork::Copy { src, .. }) => *src != s.device,
        Work::Share { .. } | Work::Defer { .. } | Work::Import { .. } => true,
        Work::Comm { .. } | Work::Island { .. } => true,
        _ => false,
    }
}

/// Whether `s` is an `extern` kernel: the host framework's compute.
pub fn is_extern(s: &Step) -> bool {
    matches!(s.work.kernel(), Some(Kernel::Extern { .. }))
}

/// For each step of `steps` (in schedule order, operands first), whether
/// it is an `extern` kernel that reads nothing communicated, directly or
/// through other steps: the compute of a backward pass, which a naive
/// training step finishes before it starts any communication.
pub fn compute_before_communication(steps: &[Step]) -> Vec<bool> {
    let mut after_comm = vec![false; steps.len()];
    let mut out = vec![false; steps.len()];
    for (i, s) in steps.iter().enumerate() {
        let reads_comm = s
            .operands
            .iter()
            .any(|&o| o < i && (after_comm[o] || steps.get(o).is_some_and(communicates)));
        after_comm[i] = reads_comm;
        out[i] = is_extern(s) && !reads_comm;
    }
    out
}
