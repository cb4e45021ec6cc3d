//! Which queue of the threaded runner runs each step: a device's compute
//! worker, its copy thread (a copy onto a host arena, a Vulkan device or a
//! CUDA device, so it overlaps a kernel on the same device), or none (work the
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
    /// The device's worker: kernels, driver calls and `comm.*` steps.
    Compute(Device),
    /// The device's copy thread: copies onto a host arena, a Vulkan device
    /// (its copy queue) or a CUDA device (its copy stream).
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
    matches!(s.work, Work::Device(DeviceWork::Copy { .. })) && kind_has_copy_lane(s.device.kind)
}

/// Whether devices of `kind` have a copy thread beside their worker: every
/// kind has one now (CUDA's since its copy stream, issue 33 item 2); the
/// match keeps a new kind from getting one unasked.
pub fn kind_has_copy_lane(kind: DeviceKind) -> bool {
    match kind {
        DeviceKind::Cpu | DeviceKind::Vulkan | DeviceKind::Cuda => true,
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::schedule::Schedule;

    /// A copy onto each kind of device runs on that device's copy thread
    /// (on CUDA: the thread that drives its copy stream); kernels stay on
    /// the compute worker.
    #[test]
    fn copies_onto_every_kind_of_device_take_its_copy_lane() {
        let src = "graph @lanes {
  %0 = input \"a\" @cpu:0 : f32[4]
  %1 = copy %0 -> cuda:0 : f32[4]
  %2 = add %1, %1 @cuda:0 : f32[4]
  %3 = copy %2 -> vulkan:0 : f32[4]
  %4 = copy %2 -> cuda:1 : f32[4]
  %5 = copy %2 -> cpu:1 : f32[4]
  return %3, %4, %5
}
";
        let g = crate::text::parse(src).unwrap();
        let plan = Schedule::new(&g).unwrap();
        let lane = |device: Device, copy: bool| {
            plan.steps
                .iter()
                .find(|s| s.device == device && has_copy_lane(s) == copy)
                .and_then(lane_of)
        };
        for d in [Device::cuda(0), Device::vulkan(0), Device::cuda(1)] {
            assert_eq!(lane(d, true), Some(Lane::Copy(d)), "{d}");
        }
        let cuda0 = Device::cuda(0);
        assert_eq!(lane(cuda0, false), Some(Lane::Compute(cuda0)));
        for kind in DeviceKind::ALL {
            assert!(kind_has_copy_lane(kind), "{kind:?}");
        }
    }
}
