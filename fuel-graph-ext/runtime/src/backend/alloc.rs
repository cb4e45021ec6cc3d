//! Per-device allocator byte counters.
//!
//! Every device buffer adds its size to its device's [`AllocCounter`] when it
//! is created and subtracts it when it is dropped, so tests can prove a run
//! (even a failed one) left nothing behind: `current` goes back to its
//! baseline. `peak` is the high-water mark since the device was opened,
//! and `allocations` counts every buffer made since then.

use std::sync::atomic::{AtomicUsize, Ordering};

/// A snapshot of one device's allocator.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemStats {
    /// Bytes held by live buffers now.
    pub current: usize,
    /// The most bytes held at once.
    pub peak: usize,
    /// Buffers alive now.
    pub live_buffers: usize,
    /// Buffers made since the device was opened, freed or not.
    pub allocations: usize,
}

/// The counter one device's buffers update.
#[derive(Debug, Default)]
pub struct AllocCounter {
    current: AtomicUsize,
    peak: AtomicUsize,
    live: AtomicUsize,
    made: AtomicUsize,
}

impl AllocCounter {
    /// Records a new buffer of `bytes`.
    pub fn add(&self, bytes: usize) {
        let now = self.current.fetch_add(bytes, Ordering::SeqCst) + bytes;
        self.peak.fetch_max(now, Ordering::SeqCst);
        self.live.fetch_add(1, Ordering::SeqCst);
        self.made.fetch_add(1, Ordering::SeqCst);
    }

    /// Records that a buffer of `bytes` was freed.
    pub fn sub(&self, bytes: usize) {
        self.current.fetch_sub(bytes, Ordering::SeqCst);
        self.live.fetch_sub(1, Ordering::SeqCst);
    }

    /// The current numbers.
    pub fn stats(&self) -> MemStats {
        MemStats {
            current: self.current.load(Ordering::SeqCst),
            peak: self.peak.load(Ordering::SeqCst),
            live_buffers: self.live.load(Ordering::SeqCst),
            allocations: self.made.load(Ordering::SeqCst),
        }
    }
}
