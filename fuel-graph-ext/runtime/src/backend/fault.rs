//! Fault injection: make the n-th copy, kernel, allocation or wait for
//! submitted GPU work of the next run fail, through the real code path.
//!
//! [`crate::exec::Executable::inject_fault`] arms one [`FaultPoint`] for the
//! next run only. The backends ask [`Faults::check`] right where a real
//! driver error would surface (after the destination buffer is allocated), so
//! the error handling, buffer release and recovery that tests observe are the
//! ones a real kernel failure, allocation failure or lost device takes.

use std::sync::atomic::{AtomicUsize, Ordering};

/// Where to fail. `nth` counts from 0 in the order the workers reach them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultPoint {
    /// The n-th copy or move of the run fails after allocating its destination.
    Copy { nth: usize },
    /// The n-th kernel (element-wise, div, slice, concat) fails after allocating its output.
    Kernel { nth: usize },
    /// The n-th buffer allocation of the run fails as if the device were out of memory.
    Alloc { nth: usize },
    /// The n-th wait for work submitted to a GPU (Vulkan) fails, as the
    /// wait of a lost device does: after the submit, with the work still in
    /// flight. The device is then lost for good: nothing its work may touch
    /// is reused or freed until it is dropped, and every later run that
    /// uses it fails, saying so.
    Wait { nth: usize },
}

/// The kind of event a backend reports to [`Faults::check`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// A copy or move.
    Copy,
    /// A kernel.
    Kernel,
    /// A buffer allocation.
    Alloc,
    /// A wait for submitted GPU work.
    Wait,
}

/// The armed fault of one run and the event counters.
#[derive(Debug, Default)]
pub struct Faults {
    armed: Option<FaultPoint>,
    copies: AtomicUsize,
    kernels: AtomicUsize,
    allocs: AtomicUsize,
    waits: AtomicUsize,
}

impl Faults {
    /// Counters for a run with `armed` (or none).
    pub fn new(armed: Option<FaultPoint>) -> Faults {
        Faults {
            armed,
            ..Faults::default()
        }
    }

    /// Counts one event; true if the armed fault fires here.
    pub fn check(&self, event: Event) -> bool {
        // Unarmed, nothing can fire and nobody reads the counts: a run
        // passes several events per step, each an atomic add otherwise.
        if self.armed.is_none() {
            return false;
        }
        let (counter, target) = match (event, self.armed) {
            (Event::Copy, Some(FaultPoint::Copy { nth })) => (&self.copies, Some(nth)),
            (Event::Kernel, Some(FaultPoint::Kernel { nth })) => (&self.kernels, Some(nth)),
            (Event::Alloc, Some(FaultPoint::Alloc { nth })) => (&self.allocs, Some(nth)),
            (Event::Wait, Some(FaultPoint::Wait { nth })) => (&self.waits, Some(nth)),
            (Event::Copy, _) => (&self.copies, None),
            (Event::Kernel, _) => (&self.kernels, None),
            (Event::Alloc, _) => (&self.allocs, None),
            (Event::Wait, _) => (&self.waits, None),
        };
        let n = counter.fetch_add(1, Ordering::SeqCst);
        target == Some(n)
    }
}
