//! What one run of an executable will do at its fault points, read off the
//! schedule and the opened devices: how many copies, kernels and buffer
//! allocations it passes. Tests enumerate every
//! [`FaultPoint`](super::FaultPoint) with it and check it against the
//! allocator counters, so no test restates the share, defer and scratch
//! rules that the schedule and the backends apply.

use super::Executable;
use crate::backend::{self, Ctx, DeviceWork, Operand};
use fuel_graph_ext::plan::schedule::Work;

/// The events one run passes, each a possible [`FaultPoint`](super::FaultPoint).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RunEvents {
    /// Copies and moves, shared and deferred ones included
    /// (`FaultPoint::Copy`).
    pub copies: usize,
    /// Kernels: element-wise, div, slice (a view too), concat, and one per
    /// member of a driver all-reduce (`FaultPoint::Kernel`).
    pub kernels: usize,
    /// Buffers allocated at a fault point (`FaultPoint::Alloc`): every
    /// buffer of a run except what a collective driver allocates for
    /// itself (the result of a rank with no node, the driver's scratch).
    pub allocs: usize,
}

impl Executable {
    /// The copies, kernels and allocations one run makes (the same every
    /// run): an input, a copy and a kernel allocate their result, a shared
    /// or deferred copy allocates nothing, and a kernel allocates the
    /// scratch buffers its backend needs for its operands
    /// ([`backend::scratch_buffers`]). `None` for a graph with `comm.*`
    /// steps, whose communicator decides what it allocates.
    pub fn planned_events(&self) -> Option<RunEvents> {
        let plan = &self.plan;
        let mapped = |d| self.ctxs.get(&d).is_some_and(Ctx::host_mapped);
        let mut ev = RunEvents::default();
        for s in &plan.steps {
            match &s.work {
                // An input read in place allocates nothing.
                Work::Device(DeviceWork::Input { in_place, .. }) => {
                    ev.allocs += usize::from(!in_place)
                }
                Work::Device(DeviceWork::Copy { .. }) => {
                    ev.copies += 1;
                    ev.allocs += 1;
                }
                Work::Share { .. } | Work::Defer { .. } | Work::Import { .. } => ev.copies += 1,
                Work::Device(DeviceWork::Kernel(k)) => {
                    let operands: Vec<Operand> = s
                        .operands
                        .iter()
                        .map(|&o| match plan.steps.get(o).map(|o| &o.work) {
                            Some(Work::Defer { src }) => Operand::Deferred {
                                mapped: mapped(*src),
                            },
                            _ => Operand::Local,
                        })
                        .collect();
                    ev.kernels += 1;
                    ev.allocs +=
                        1 + backend::scratch_buffers(self.ctxs.get(&s.device)?, k, &operands);
                }
                Work::Island { .. } => {
                    ev.kernels += 1;
                    ev.allocs += 1;
                }
                // A slice that is a view passes the kernel fault point and
                // allocates nothing.
                Work::View { .. } => ev.kernels += 1,
                Work::Comm { .. } => return None,
            }
        }
        Some(ev)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn planned(src: &str) -> RunEvents {
        let g = fuel_graph_ext::text::parse(src).unwrap();
        super::super::compile(&g, &[])
            .unwrap()
            .planned_events()
            .unwrap()
    }

    #[test]
    fn shared_copies_allocate_nothing_outputs_included() {
        // The first copy only feeds the add, the second is an output: both
        // share their source's buffer (the input's, and the sum's).
        let src = "graph @g {\n  %0 = input \"a\" @cpu:0 : f32[4]\n  %1 = copy %0 -> cpu:1 : f32[4]\n  %2 = add %1, %1 @cpu:1 : f32[4]\n  %3 = copy %2 -> cpu:0 : f32[4]\n  return %3\n}\n";
        assert_eq!(
            planned(src),
            RunEvents {
                copies: 2,
                kernels: 1,
                allocs: 2
            }
        );
    }
}
