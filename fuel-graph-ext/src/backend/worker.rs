//! One worker thread per device, fed through a channel.
//!
//! Jobs for one device run in order on its worker; jobs for different
//! devices run on different threads, so independent work overlaps. A panic
//! inside a job is caught by the job itself (see the runner), so a worker
//! never dies while its executable lives.

use std::sync::mpsc;
use std::thread::JoinHandle;

/// A unit of work for one device.
pub type Job = Box<dyn FnOnce() + Send + 'static>;

/// A device's worker thread.
pub struct Worker {
    tx: Option<mpsc::Sender<Job>>,
    handle: Option<JoinHandle<()>>,
}

impl Worker {
    /// Starts a worker named after its device.
    pub fn spawn(name: String) -> std::io::Result<Worker> {
        let (tx, rx) = mpsc::channel::<Job>();
        let handle = std::thread::Builder::new().name(name).spawn(move || {
            while let Ok(job) = rx.recv() {
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
