//! Ranks as threads: running one closure per rank of an in-process group,
//! as the host-driver, NCCL and SPMD tests do, with a deadline so that a
//! rank that hangs fails the test instead of stalling it.

use std::sync::mpsc;
use std::time::Duration;

/// Runs `f(rank)` on `n` threads and gives the results in rank order;
/// panics if a rank panics or has not finished within `limit`.
pub fn on_ranks<T: Send + 'static>(
    n: usize,
    limit: Duration,
    f: impl Fn(usize) -> T + Send + Clone + 'static,
) -> Vec<T> {
    let (tx, rx) = mpsc::channel();
    for rank in 0..n {
        let (tx, f) = (tx.clone(), f.clone());
        std::thread::spawn(move || {
            let _ = tx.send((rank, f(rank)));
        });
    }
    drop(tx);
    let mut out: Vec<Option<T>> = (0..n).map(|_| None).collect();
    for _ in 0..n {
        let (r, v) = rx.recv_timeout(limit).expect("a rank hung or panicked");
        out[r] = Some(v);
    }
    out.into_iter().map(|v| v.unwrap()).collect()
}
