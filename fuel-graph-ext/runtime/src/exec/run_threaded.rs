//! The threaded runner: one worker thread per device, and a copy thread
//! per device beside it. A step is released to its device's worker (a copy
//! onto a device to its copy thread, which on Vulkan submits to the
//! device's copy queue and on CUDA enqueues on its copy stream) as soon as
//! its operands exist, so
//! independent work on different devices overlaps, and a copy overlaps a
//! kernel on its own device (the order each lane gets its steps in is
//! the executable's [`Dispatch`](super::Dispatch), `gate.rs`); the first
//! failure stops new steps, the running ones finish, and the run returns
//! that failure.

use super::step::{execute, operands, StepData};
use super::{ExecError, Executable};
use crate::backend::fault::Faults;
use crate::backend::Buf;
use fuel_graph_ext::plan::schedule::Work;
use std::collections::{BTreeSet, VecDeque};
use std::sync::{mpsc, Arc, Mutex};

/// The buffer table the dispatcher and the workers share.
pub(super) type Table = Arc<Mutex<Vec<Option<Arc<Buf>>>>>;

/// A finished step and its outcome, as a worker reports it.
type Done = (usize, Result<(), ExecError>);

fn poisoned() -> ExecError {
    ExecError::Internal("buffer table lock poisoned".into())
}

impl Executable {
    /// Releases steps to their workers as their operands become ready and
    /// waits until every released step has finished.
    pub(super) fn dispatch(
        &self,
        table: &Table,
        mut data: Vec<Option<Arc<[u8]>>>,
        reuse: &mut [Option<Arc<[u8]>>],
        faults: &Arc<Faults>,
    ) -> Result<(), ExecError> {
        let plan = &self.plan;
        let n = plan.steps.len();
        // Indices below are step numbers of `plan`, which sizes every
        // vector here, so indexing cannot go out of bounds.
        let mut reads_left = plan.reads.clone();
        let mut deps_left: Vec<usize> = plan
            .steps
            .iter()
            .map(|s| s.operands.iter().collect::<BTreeSet<_>>().len())
            .collect();
        let mut ready: VecDeque<usize> = (0..n).filter(|&i| deps_left[i] == 0).collect();
        let mut gate = super::gate::Gate::new(&self.order);
        let (done_tx, done_rx) = mpsc::channel::<Done>();
        let mut in_flight = 0usize;
        // Per island: launched in this run (by whichever member came first).
        let mut launched = vec![false; plan.islands.len()];
        let mut first_err: Option<ExecError> = None;
        loop {
            while first_err.is_none() {
                let Some(i) = ready.pop_front() else { break };
                if !gate.admit(plan, i) {
                    continue;
                }
                gate.went(i, &mut ready);
                if let Work::Island { island, .. } = plan.steps[i].work {
                    if std::mem::replace(&mut launched[island], true) {
                        // Another member launched it; its completion
                        // completes this step too.
                        continue;
                    }
                    let island_reuse = self.island_reuse(island, reuse);
                    match self.launch_island(i, island, table, island_reuse, faults, &done_tx) {
                        Ok(()) => in_flight += 1,
                        Err(e) => first_err = Some(e),
                    }
                    continue;
                }
                let step_data = StepData {
                    input: data[i].take(),
                    reuse: reuse[i].take(),
                    onto: false,
                };
                match self.launch(i, table, step_data, faults, &done_tx) {
                    Ok(()) => in_flight += 1,
                    Err(e) => first_err = Some(e),
                }
            }
            if in_flight == 0 {
                break;
            }
            let Some((i, res)) = crate::backend::worker::recv_soon(&done_rx, self.spin) else {
                first_err.get_or_insert(ExecError::Internal("a worker vanished".into()));
                break;
            };
            in_flight -= 1;
            if let Err(e) = res {
                first_err.get_or_insert(e);
                continue;
            }
            // An island's completion completes every member step.
            let finished: Vec<usize> = match plan.steps[i].work {
                Work::Island { island, .. } => plan.islands[island]
                    .members
                    .iter()
                    .flatten()
                    .copied()
                    .collect(),
                _ => vec![i],
            };
            let mut t = table.lock().map_err(|_| poisoned())?;
            for &f in &finished {
                self.release_operands(f, &mut reads_left, &mut t);
            }
            drop(t);
            for &f in &finished {
                gate.finished(f, &mut ready);
                for &d in &plan.dependents[f] {
                    deps_left[d] -= 1;
                    if deps_left[d] == 0 {
                        ready.push_back(d);
                    }
                }
            }
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Starts step `i`: on the dispatcher's thread when it needs no device
    /// time (`Work::needs_device`; a host input too, which wraps the
    /// caller's bytes), else on its device's worker.
    fn launch(
        &self,
        i: usize,
        table: &Table,
        step_data: StepData,
        faults: &Arc<Faults>,
        done: &mpsc::Sender<Done>,
    ) -> Result<(), ExecError> {
        let step = &self.plan.steps[i];
        let ctx = self.ctx(step.device)?.clone();
        let mut ins = Vec::with_capacity(step.operands.len());
        operands(step, &table.lock().map_err(|_| poisoned())?, &mut ins)?;
        let store = move |table: &Table, res: Result<Arc<Buf>, ExecError>| {
            res.and_then(|b| {
                table.lock().map_err(|_| poisoned()).map(|mut t| {
                    t[i] = Some(b);
                })
            })
        };
        let host_input = step.device.is_cpu()
            && matches!(
                step.work,
                Work::Device(crate::backend::DeviceWork::Input { .. })
            );
        if !step.work.needs_device() || host_input {
            // No device work: the slot takes its source's buffer right here.
            let res = execute(&self.plan, &self.comms, i, &ctx, &ins, step_data, faults);
            let _ = done.send((i, store(table, res)));
            return Ok(());
        }
        // A copy onto a device runs on its copy thread, beside the
        // device's kernels (the plan's lane rule).
        let copy = fuel_graph_ext::plan::lanes::has_copy_lane(step);
        let worker = copy
            .then(|| self.copy_workers.get(&step.device))
            .flatten()
            .or_else(|| self.workers.get(&step.device))
            .ok_or_else(|| ExecError::Internal(format!("no worker for {}", step.device)))?;
        let plan = self.plan.clone();
        let comms = self.comms.clone();
        let table = table.clone();
        let faults = faults.clone();
        let done = done.clone();
        let sent = worker.send(Box::new(move || {
            let res = execute(&plan, &comms, i, &ctx, &ins, step_data, &faults);
            drop(ins);
            let _ = done.send((i, store(&table, res)));
        }));
        self.sent(sent, i)
    }

    /// Starts island `island` (whose member `i` became ready first) on the
    /// worker of `i`'s device: one job runs the collective for every rank
    /// and fills every member's slot.
    fn launch_island(
        &self,
        i: usize,
        island: usize,
        table: &Table,
        reuse: Vec<Option<Arc<[u8]>>>,
        faults: &Arc<Faults>,
        done: &mpsc::Sender<Done>,
    ) -> Result<(), ExecError> {
        let step = &self.plan.steps[i];
        let mut shards = Vec::with_capacity(step.operands.len());
        operands(step, &table.lock().map_err(|_| poisoned())?, &mut shards)?;
        let worker = self
            .workers
            .get(&step.device)
            .ok_or_else(|| ExecError::Internal(format!("no worker for {}", step.device)))?;
        let (plan, islands, ctxs) = (self.plan.clone(), self.islands.clone(), self.ctxs.clone());
        let table = table.clone();
        let faults = faults.clone();
        let done = done.clone();
        let sent = worker.send(Box::new(move || {
            let res = super::island::run(&plan, &islands, island, &ctxs, &shards, reuse, &faults);
            drop(shards);
            let res = res.and_then(|results| {
                let mut t = table.lock().map_err(|_| poisoned())?;
                for (m, buf) in results {
                    t[m] = Some(buf);
                }
                Ok(())
            });
            let _ = done.send((i, res));
        }));
        self.sent(sent, i)
    }

    fn sent(&self, sent: bool, i: usize) -> Result<(), ExecError> {
        if sent {
            Ok(())
        } else {
            Err(ExecError::Internal(format!(
                "the worker for {} stopped",
                self.plan.steps[i].device
            )))
        }
    }
}
