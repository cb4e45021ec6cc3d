//! The host driver's fences and compute streams: a fence is a
//! ready/pending/failed flag with a condition variable, a stream a worker
//! thread that runs jobs in order.

use super::super::common::lock;
use super::super::DriverError;
use crate::backend::worker::Worker;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum FenceState {
    Ready,
    Pending,
    Failed(DriverError),
}

/// A host fence: ready, pending (a writer is on its way) or failed.
#[derive(Clone, Debug)]
pub struct HostFence(Arc<(Mutex<FenceState>, Condvar)>);

impl Default for HostFence {
    fn default() -> Self {
        HostFence::ready()
    }
}

impl HostFence {
    /// A fence that is already signalled.
    pub fn ready() -> HostFence {
        HostFence(Arc::new((Mutex::new(FenceState::Ready), Condvar::new())))
    }
    /// Marks a write as in progress: readers wait until [`HostFence::signal`].
    pub fn reset(&self) {
        *lock(&self.0 .0) = FenceState::Pending;
    }
    /// Marks the contents valid.
    pub fn signal(&self) {
        *lock(&self.0 .0) = FenceState::Ready;
        self.0 .1.notify_all();
    }
    /// Marks the write as failed; readers get `e`.
    pub fn fail(&self, e: DriverError) {
        *lock(&self.0 .0) = FenceState::Failed(e);
        self.0 .1.notify_all();
    }
    /// True if both handles are one fence.
    pub fn same(&self, other: &HostFence) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
    /// Waits until the fence is signalled or failed, at most `timeout`.
    pub fn wait(
        &self,
        timeout: Duration,
        rank: usize,
        op: &'static str,
    ) -> Result<(), DriverError> {
        let deadline = Instant::now() + timeout;
        let mut st = lock(&self.0 .0);
        loop {
            match &*st {
                FenceState::Ready => return Ok(()),
                FenceState::Failed(e) => return Err(e.clone()),
                FenceState::Pending => {}
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(DriverError::Timeout {
                    rank,
                    op,
                    waiting_for: "the buffer's fence (its writer never signalled it)".into(),
                    waited_ms: timeout.as_millis() as u64,
                });
            }
            st = self
                .0
                 .1
                .wait_timeout(st, deadline - now)
                .map(|(g, _)| g)
                .unwrap_or_else(|e| e.into_inner().0);
        }
    }
}

/// A compute stream on the host: a worker thread running jobs in order.
#[derive(Clone)]
pub struct HostStream(pub(super) Arc<Worker>);

impl HostStream {
    /// Queues `job`; false if the stream's thread is gone.
    pub fn submit(&self, job: impl FnOnce() + Send + 'static) -> bool {
        self.0.send(Box::new(job))
    }
}
