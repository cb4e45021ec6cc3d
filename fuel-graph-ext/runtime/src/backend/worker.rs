//! One worker thread per device, fed through a channel.
//!
//! Jobs for one device run in order on its worker; jobs for different
//! devices run on different threads, so independent work overlaps. A
//! waiting thread of the threaded runner (a worker between jobs, the
//! dispatcher between completions) polls its channel for a short while
//! ([`SPIN_VAR`], 50 us by default), yielding the core between polls, before
//! it sleeps: on a VM a sleeping thread's core halts, and waking it cost
//! 30-60 us per hand-off, most of a small step's time. A panic
//! inside a job is caught by the job itself (see the runner), so a worker
//! never dies while its executable lives.

use crate::error::ExecError;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The variable that sets how long a waiting runner thread polls.
pub const SPIN_VAR: &str = "FUEL_SPIN_US";

/// How long a waiting runner thread polls when [`SPIN_VAR`] is unset, in µs.
pub const DEFAULT_SPIN_US: u64 = 50;

/// [`SPIN_VAR`]: microseconds a waiting thread of the threaded runner keeps
/// polling before it sleeps, 0 to 10 000 (0: sleep at once); 50 when unset.
pub fn spin_setting() -> Result<Duration, fuel_graph_ext::env::EnvError> {
    fuel_graph_ext::env::integer(
        SPIN_VAR,
        0..=10_000,
        DEFAULT_SPIN_US,
        "microseconds a waiting runner thread polls before it sleeps",
    )
    .map(Duration::from_micros)
}

/// The next message on `rx`, or `None` once every sender is gone: polled
/// (yielding the core between polls) for up to `spin`, then waited for.
pub fn recv_soon<T>(rx: &mpsc::Receiver<T>, spin: Duration) -> Option<T> {
    if !spin.is_zero() {
        let start = Instant::now();
        loop {
            match rx.try_recv() {
                Ok(v) => return Some(v),
                Err(mpsc::TryRecvError::Disconnected) => return None,
                Err(mpsc::TryRecvError::Empty) => {}
            }
            if start.elapsed() >= spin {
                break;
            }
            std::thread::yield_now();
        }
    }
    rx.recv().ok()
}

/// A unit of work for one device.
pub type Job = Box<dyn FnOnce() + Send + 'static>;

/// A device's worker thread.
pub struct Worker {
    tx: Option<mpsc::Sender<Job>>,
    handle: Option<JoinHandle<()>>,
}

impl Worker {
    /// Starts a worker named after its device, which polls for its next
    /// job for `spin` before it sleeps ([`recv_soon`]).
    pub fn spawn(name: String, spin: Duration) -> std::io::Result<Worker> {
        let (tx, rx) = mpsc::channel::<Job>();
        let handle = std::thread::Builder::new().name(name).spawn(move || {
            while let Some(job) = recv_soon(&rx, spin) {
                job();
            }
        })?;
        Ok(Worker {
            tx: Some(tx),
            handle: Some(handle),
        })
    }

    /// Queues a job; false if the worker is gone.
    pub fn send(&self, job: Job) -> bool {
        self.tx.as_ref().is_some_and(|tx| tx.send(job).is_ok())
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.tx = None;
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// Why a thread could not start, as an [`ExecError::Thread`] that names
/// the limits the process may have hit, each with its current value where
/// `/proc` says. glibc reports both a thread limit (`ulimit -u`,
/// `/proc/sys/kernel/threads-max`, a cgroup's `pids.max`) and no memory
/// for the new thread's stack (`ulimit -v`) as `EAGAIN`, so both are named,
/// the likelier first (memory for `ENOMEM`).
pub fn spawn_error(what: impl Into<String>, e: &std::io::Error) -> ExecError {
    let proc_limit = |prefix: &str| -> String {
        std::fs::read_to_string("/proc/self/limits")
            .ok()
            .and_then(|text| {
                let line = text.lines().find(|l| l.starts_with(prefix))?;
                Some(
                    line.get(prefix.len()..)?
                        .split_whitespace()
                        .next()?
                        .to_string(),
                )
            })
            .unwrap_or_else(|| "unknown".into())
    };
    let threads_max = std::fs::read_to_string("/proc/sys/kernel/threads-max")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into());
    let stack = match std::env::var("RUST_MIN_STACK") {
        Ok(v) => format!(
            "RUST_MIN_STACK={} bytes",
            fuel_graph_ext::text::excerpt::token(&v)
        ),
        Err(_) => "2 MiB".into(),
    };
    let threads = format!(
        "the limit on threads (ulimit -u: {}; /proc/sys/kernel/threads-max: {threads_max}; or a cgroup's pids.max)",
        proc_limit("Max processes")
    );
    let memory = format!(
        "the memory for its stack ({stack}; ulimit -v: {})",
        proc_limit("Max address space")
    );
    let (first, second) = if e.kind() == std::io::ErrorKind::OutOfMemory {
        (memory, threads)
    } else {
        (threads, memory)
    };
    ExecError::Thread {
        what: what.into(),
        reason: e.to_string(),
        limit: format!(
            "the process hit {first} or {second}; raise the limit that was hit, or use fewer devices"
        ),
    }
}

/// Makes sure rayon's global pool, which the host kernels split large
/// tensors over, exists: started here if it is not yet, so that a process
/// out of threads gets [`spawn_error`]'s message at compile time instead
/// of a kernel panicking later.
pub fn host_pool_ready() -> Result<(), ExecError> {
    match rayon::ThreadPoolBuilder::new().build_global() {
        Ok(()) => Ok(()),
        // rayon's words for a pool that already runs (pinned by a test).
        Err(e) if e.to_string().contains("already been initialized") => Ok(()),
        Err(e) => {
            // rayon keeps the io::Error only in its text: a thread that
            // cannot get a stack says `Cannot allocate memory` (ENOMEM),
            // anything else is taken as the thread limit (EAGAIN).
            let text = e.to_string();
            let kind = if text.contains("Cannot allocate memory") {
                std::io::ErrorKind::OutOfMemory
            } else {
                std::io::ErrorKind::WouldBlock
            };
            Err(spawn_error(
                "rayon's thread pool for the host kernels",
                &std::io::Error::new(kind, text),
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_waiting_thread_gets_what_comes_during_or_after_its_polling() {
        for spin in [
            Duration::ZERO,
            Duration::from_micros(50),
            Duration::from_millis(20),
        ] {
            // Already there.
            let (tx, rx) = mpsc::channel();
            tx.send(1).unwrap();
            assert_eq!(recv_soon(&rx, spin), Some(1));
            // Sent well after any polling has given up: the blocking wait
            // gets it.
            let late = std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(40));
                tx.send(2).unwrap();
                tx
            });
            assert_eq!(recv_soon(&rx, spin), Some(2));
            // Every sender gone, whether it goes while polling or later.
            drop(late.join().unwrap());
            assert_eq!(recv_soon(&rx, spin), None);
        }
        // Jobs run in order on a worker that polls.
        let (tx, rx) = mpsc::channel();
        let w = Worker::spawn("poll-test".into(), Duration::from_micros(50)).unwrap();
        for i in 0..100 {
            let tx = tx.clone();
            assert!(w.send(Box::new(move || tx.send(i).unwrap())));
        }
        let got: Vec<i32> = (0..100).map(|_| rx.recv().unwrap()).collect();
        assert_eq!(got, (0..100).collect::<Vec<_>>());
    }

    #[test]
    fn the_pool_starts_once_and_thread_errors_name_the_limit() {
        host_pool_ready().unwrap();
        host_pool_ready().unwrap();
        let again = rayon::ThreadPoolBuilder::new().build_global().unwrap_err();
        assert!(
            again.to_string().contains("already been initialized"),
            "{again}"
        );
        let e = spawn_error(
            "the worker thread for vulkan:0",
            &std::io::Error::from_raw_os_error(11),
        );
        let text = e.to_string();
        assert!(
            text.starts_with(
                "cannot start the worker thread for vulkan:0: Resource temporarily unavailable"
            ),
            "{text}"
        );
        assert!(
            text.contains("the process hit the limit on threads (ulimit -u: "),
            "{text}"
        );
        assert!(text.contains(" or the memory for its stack ("), "{text}");
        let e = spawn_error("x", &std::io::Error::from_raw_os_error(12)).to_string();
        assert!(
            e.contains("the process hit the memory for its stack ("),
            "{e}"
        );
    }
}
