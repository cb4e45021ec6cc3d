//! [`NcclFence`]: how writes of one CUDA buffer by NCCL are ordered, and how
//! writes issued inside an NCCL group get their events once the group is
//! launched.

use super::backend;
use crate::driver::prologue::lock;
use crate::driver::DriverError;
use cudarc::driver::{CudaEvent, CudaStream};
use std::sync::{Arc, Mutex};

/// A CUDA fence: the event recorded after the buffer's last write, or none
/// when the contents are already valid.
///
/// It counts its writers as the host driver's timeline does, through CUDA's
/// own ordering: a stream runs its work in order, so an event recorded after
/// a write completes only when that write and everything enqueued on that
/// stream before it have. Every write goes through `NcclFence::write`,
/// which, under the fence's lock, makes the writer's stream wait for the
/// previous write's event, enqueues the write and records the new event. So
/// the writes of one buffer land in the order they were issued, whatever
/// stream each is on, and the latest event completes only after all of them:
/// a reader that waits for the event it sees (download, `order_compute`)
/// waits for every write issued before it. In place, the source's event is
/// the destination's own, the previous write, which the collective waits for
/// before it reads.
///
/// Between `ncclGroupStart` and `ncclGroupEnd` NCCL only records a call and
/// puts its kernel on the stream at `ncclGroupEnd`, so an event recorded
/// right after the call could complete before the write. A write issued
/// inside a group is therefore noted on this thread, and `NcclDriver`'s
/// `group_end` records its event again once the group is launched: for a
/// reader, a write inside a group is issued when the group ends.
#[derive(Clone, Default)]
pub struct NcclFence(pub(super) Arc<Mutex<Option<Arc<CudaEvent>>>>);

impl NcclFence {
    /// The event of the last write issued, if any: waiting for it waits for
    /// every write issued so far.
    pub fn event(&self) -> Option<Arc<CudaEvent>> {
        lock(&self.0).clone()
    }

    /// True if both handles are one fence.
    pub fn same(&self, other: &NcclFence) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// Issues one write of the buffer on `stream`: the stream waits for the
    /// previous write and for `after` (the source's event), `enqueue` puts
    /// the write on it, and the event recorded after it becomes the fence's.
    /// All under the fence's lock, so two writers cannot both wait for the
    /// same previous write. A failed `enqueue` leaves the fence as it was.
    pub(super) fn write(
        &self,
        stream: &Arc<CudaStream>,
        after: Option<Arc<CudaEvent>>,
        enqueue: impl FnOnce() -> Result<(), DriverError>,
    ) -> Result<(), DriverError> {
        let mut last = lock(&self.0);
        for ev in last.iter().chain(after.as_ref()) {
            stream
                .wait(ev)
                .map_err(|e| backend("cuStreamWaitEvent", e))?;
        }
        enqueue()?;
        let ev = Self::record(&mut last, stream)?;
        drop(last);
        GROUP.with(|g| {
            let mut g = g.borrow_mut();
            if g.depth > 0 {
                g.writes.push((self.clone(), stream.clone(), ev));
            }
        });
        Ok(())
    }

    /// Records a new event on `stream` as the fence's last write.
    pub(super) fn record(
        last: &mut Option<Arc<CudaEvent>>,
        stream: &CudaStream,
    ) -> Result<Arc<CudaEvent>, DriverError> {
        let ev = Arc::new(
            stream
                .record_event(None)
                .map_err(|e| backend("cuEventRecord", e))?,
        );
        *last = Some(ev.clone());
        Ok(ev)
    }
}

/// This thread's open NCCL groups: how deep, and the writes issued in them
/// (their fence, stream and the event recorded at the call), whose events
/// are recorded again when the outermost group ends and NCCL has put their
/// kernels on the streams. A write of the same buffer issued on another
/// thread while the group is open is not ordered after the group's write
/// (it waited for the early event); such a program races.
#[derive(Default)]
struct GroupWrites {
    depth: u32,
    writes: Vec<GroupWrite>,
}

thread_local! {
    static GROUP: std::cell::RefCell<GroupWrites> = std::cell::RefCell::default();
}

/// A write issued inside an open group: its fence, its stream and the event
/// recorded at the call, before NCCL launched the kernel.
pub(super) type GroupWrite = (NcclFence, Arc<CudaStream>, Arc<CudaEvent>);

/// Notes that this thread opened one more NCCL group.
pub(super) fn group_opened() {
    GROUP.with(|g| g.borrow_mut().depth += 1);
}

/// Notes that this thread closed one NCCL group. When that was the outermost
/// one, returns the writes issued inside it, whose events must be recorded
/// again now that their kernels are on their streams.
pub(super) fn group_closed() -> Vec<GroupWrite> {
    GROUP.with(|g| {
        let mut g = g.borrow_mut();
        g.depth = g.depth.saturating_sub(1);
        if g.depth == 0 {
            std::mem::take(&mut g.writes)
        } else {
            Vec::new()
        }
    })
}
