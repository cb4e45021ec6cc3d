//! The host driver's fences and compute streams.
//!
//! A [`HostFence`] is a timeline, as a Vulkan timeline semaphore or a CUDA
//! event recorded on an in-order stream is: every write to its buffer takes
//! a [`Ticket`] when it is issued (enqueued), in issue order; a writer
//! waits until every earlier ticket has settled (finished or failed)
//! before it writes, then settles its own; a reader waits for every ticket
//! issued before it (a [`FencePoint`] taken when it is issued). So a
//! download right after an in-place all-reduce was enqueued waits for it,
//! and with two collectives queued into one buffer a reader waits for the
//! second, not only the first. A compute stream is a worker thread that
//! runs jobs in order.

use super::super::prologue::lock;
use super::super::DriverError;
use crate::backend::worker::Worker;
use std::collections::BTreeMap;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

#[derive(Debug, Default)]
struct Timeline {
    /// Tickets handed out (ticket numbers start at 1).
    issued: u64,
    /// Every ticket up to this one has settled, in order.
    settled: u64,
    /// The outcome of ticket `settled`: `None` when it finished (or no
    /// ticket was issued yet), the error when it failed.
    failed: Option<DriverError>,
    /// Tickets settled before an earlier one, with their outcome; folded
    /// into `settled` as soon as the gap closes.
    early: BTreeMap<u64, Option<DriverError>>,
}

impl Timeline {
    fn settle(&mut self, n: u64, outcome: Option<DriverError>) {
        if n <= self.settled {
            return;
        }
        self.early.insert(n, outcome);
        while let Some(outcome) = self.early.remove(&(self.settled + 1)) {
            self.settled += 1;
            self.failed = outcome;
        }
    }
}

type Shared = Arc<(Mutex<Timeline>, Condvar)>;

/// A host fence: the timeline of the writes to one buffer.
#[derive(Clone, Debug)]
pub struct HostFence(Shared);

impl Default for HostFence {
    fn default() -> Self {
        HostFence::ready()
    }
}

/// A point on a fence's timeline: the writes issued up to some moment.
/// Waiting for it ([`HostFence::wait_point`]) waits for exactly those.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct FencePoint(u64);

/// One write to a fence's buffer, issued and not yet settled. Settle it with
/// [`Ticket::complete`] or [`Ticket::fail`]; a ticket dropped unsettled
/// fails, so later readers and writers get an error instead of waiting for
/// a write that will never come.
#[derive(Debug)]
#[must_use = "a ticket that is dropped unsettled fails its write"]
pub struct Ticket {
    fence: HostFence,
    n: u64,
    settled: bool,
}

impl HostFence {
    /// A fence with no write pending: its buffer's contents are valid.
    pub fn ready() -> HostFence {
        HostFence(Arc::new((Mutex::new(Timeline::default()), Condvar::new())))
    }

    /// Issues a write: every reader issued from now on waits for it, and
    /// every later writer waits until it has settled.
    pub fn begin_write(&self) -> Ticket {
        let mut t = lock(&self.0 .0);
        t.issued += 1;
        Ticket {
            fence: self.clone(),
            n: t.issued,
            settled: false,
        }
    }

    /// Where the timeline is now: a reader issued now waits for this point.
    pub fn point(&self) -> FencePoint {
        FencePoint(lock(&self.0 .0).issued)
    }

    /// True if both handles are one fence.
    pub fn same(&self, other: &HostFence) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// Waits until every write issued before this call has settled, at most
    /// `timeout`; the error of the last one if it failed.
    pub fn wait(
        &self,
        timeout: Duration,
        rank: usize,
        op: &'static str,
    ) -> Result<(), DriverError> {
        self.wait_point(self.point(), timeout, rank, op)
    }

    /// Waits until every write up to `point` has settled, at most
    /// `timeout`: `Ok` if the last write settled so far finished (the
    /// buffer holds valid contents at least as new as `point`), its error
    /// if it failed.
    pub fn wait_point(
        &self,
        point: FencePoint,
        timeout: Duration,
        rank: usize,
        op: &'static str,
    ) -> Result<(), DriverError> {
        self.settled_to(point.0, timeout, rank, op)
            .and_then(|failed| failed.map_or(Ok(()), Err))
    }

    /// Waits until ticket `n` and every earlier one have settled; gives the
    /// outcome of the last settled ticket.
    fn settled_to(
        &self,
        n: u64,
        timeout: Duration,
        rank: usize,
        op: &'static str,
    ) -> Result<Option<DriverError>, DriverError> {
        let deadline = Instant::now() + timeout;
        let mut t = lock(&self.0 .0);
        loop {
            if t.settled >= n {
                return Ok(t.failed.clone());
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(DriverError::Timeout {
                    rank,
                    op,
                    waiting_for: format!(
                        "the buffer's fence ({} of its {} writes issued before this point never finished)",
                        n - t.settled,
                        n
                    ),
                    waited_ms: timeout.as_millis() as u64,
                });
            }
            t = self
                .0
                 .1
                .wait_timeout(t, deadline - now)
                .map(|(g, _)| g)
                .unwrap_or_else(|e| e.into_inner().0);
        }
    }

    fn settle(&self, n: u64, outcome: Option<DriverError>) {
        lock(&self.0 .0).settle(n, outcome);
        self.0 .1.notify_all();
    }
}

impl Ticket {
    /// The point just before this write: what an in-place writer reads.
    pub fn before(&self) -> FencePoint {
        FencePoint(self.n - 1)
    }

    /// Waits (at most `timeout`) until every write issued before this one
    /// has settled, finished or failed, so that this write lands after
    /// theirs. A writer that also reads the buffer (in place) waits for
    /// [`Ticket::before`] with [`HostFence::wait_point`] instead, which also
    /// fails when the write before failed.
    pub fn wait_turn(
        &self,
        timeout: Duration,
        rank: usize,
        op: &'static str,
    ) -> Result<(), DriverError> {
        self.fence
            .settled_to(self.n - 1, timeout, rank, op)
            .map(|_| ())
    }

    /// The write is done: the buffer holds valid contents.
    pub fn complete(mut self) {
        self.settled = true;
        self.fence.settle(self.n, None);
    }

    /// The write failed: readers that wait for it get `e`.
    pub fn fail(mut self, e: DriverError) {
        self.settled = true;
        self.fence.settle(self.n, Some(e));
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        if !self.settled {
            self.fence.settle(
                self.n,
                Some(DriverError::Backend {
                    driver: "host",
                    call: "fence",
                    reason: "a write to this buffer was abandoned before it finished".into(),
                }),
            );
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

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const T: Duration = Duration::from_secs(5);
    const SHORT: Duration = Duration::from_millis(50);

    fn err(why: &str) -> DriverError {
        DriverError::Backend {
            driver: "host",
            call: "test",
            reason: why.into(),
        }
    }

    #[test]
    fn a_reader_waits_for_every_write_issued_before_it() {
        let f = HostFence::ready();
        f.wait(SHORT, 0, "read").unwrap();
        let first = f.begin_write();
        let second = f.begin_write();
        let before_both = FencePoint(0);
        f.wait_point(before_both, SHORT, 0, "read").unwrap();
        first.complete();
        // The first write alone does not make the buffer readable.
        let e = f.wait(SHORT, 0, "read").unwrap_err();
        assert!(matches!(e, DriverError::Timeout { .. }), "{e}");
        assert!(e.to_string().contains("1 of its 2 writes"), "{e}");
        second.complete();
        f.wait(SHORT, 0, "read").unwrap();
    }

    #[test]
    fn a_point_taken_early_does_not_wait_for_later_writes() {
        let f = HostFence::ready();
        let a = f.begin_write();
        let p = f.point();
        let later = f.begin_write();
        a.complete();
        f.wait_point(p, SHORT, 0, "read").unwrap();
        assert!(f.wait(SHORT, 0, "read").is_err());
        assert_eq!(later.before(), p);
        later.complete();
    }

    #[test]
    fn out_of_order_settling_waits_for_the_gap() {
        let f = HostFence::ready();
        let a = f.begin_write();
        let b = f.begin_write();
        b.complete();
        assert!(f.wait(SHORT, 0, "read").is_err(), "ticket 1 is still open");
        a.complete();
        f.wait(SHORT, 0, "read").unwrap();
    }

    #[test]
    fn failures_reach_readers_and_a_later_write_clears_them() {
        let f = HostFence::ready();
        let a = f.begin_write();
        let b = f.begin_write();
        a.fail(err("boom"));
        // The next writer's turn comes when the failed one has settled.
        b.wait_turn(SHORT, 0, "write").unwrap();
        assert_eq!(f.wait_point(b.before(), SHORT, 0, "read"), Err(err("boom")));
        b.complete();
        f.wait(SHORT, 0, "read").unwrap();
    }

    #[test]
    fn a_dropped_ticket_fails_instead_of_hanging_its_readers() {
        let f = HostFence::ready();
        drop(f.begin_write());
        let e = f.wait(SHORT, 0, "read").unwrap_err().to_string();
        assert!(e.contains("abandoned"), "{e}");
    }

    #[test]
    fn writers_on_two_threads_take_turns() {
        let f = HostFence::ready();
        let order = Arc::new(Mutex::new(Vec::new()));
        let first = f.begin_write();
        let second = f.begin_write();
        let o = order.clone();
        let h = std::thread::spawn(move || {
            second.wait_turn(T, 1, "write").unwrap();
            o.lock().unwrap().push(2);
            second.complete();
        });
        std::thread::sleep(SHORT);
        order.lock().unwrap().push(1);
        first.complete();
        h.join().unwrap();
        f.wait(T, 0, "read").unwrap();
        assert_eq!(*order.lock().unwrap(), vec![1, 2]);
    }
}
