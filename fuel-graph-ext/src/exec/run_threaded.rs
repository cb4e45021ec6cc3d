//! The threaded runner: one worker thread per device. A step is released
//! to its device's worker as soon as its operands exist, so independent work
//! on different devices overlaps; the first failure stops new steps, the
//! running ones finish, and the run returns that failure.

use super::step::{execute, operands, StepData};
use super::{ExecError, Executable};
use crate::backend::fault::Faults;
use crate::backend::Buf;
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
        let (done_tx, done_rx) = mpsc::channel::<Done>();
        let mut in_flight = 0usize;
        let mut first_err: Option<ExecError> = None;
        loop {
            while first_err.is_none() {
                let Some(i) = ready.pop_front() else { break };
                let step_data = StepData {
                    input: data[i].take(),
                    reuse: reuse[i].take(),
                };
                match self.launch(i, table, step_data, faults, &done_tx) {
                    Ok(()) => in_flight += 1,
                    Err(e) => first_err = Some(e),
                }
            }
            if in_flight == 0 {
                break;
            }
            let Ok((i, res)) = done_rx.recv() else {
                first_err.get_or_insert(ExecError::Internal("a worker vanished".into()));
                break;
            };
            in_flight -= 1;
            if let Err(e) = res {
                first_err.get_or_insert(e);
                continue;
            }
            let mut t = table.lock().map_err(|_| poisoned())?;
            self.release_operands(i, &mut reads_left, &mut t);
            drop(t);
            for &d in &plan.dependents[i] {
                deps_left[d] -= 1;
                if deps_left[d] == 0 {
                    ready.push_back(d);
                }
            }
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Starts step `i`: on the dispatcher's thread when it is the runner's
    /// own work (a shared or deferred copy), else on its device's worker.
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
        if !step.work.needs_device() {
            // No device work: the slot takes its source's buffer right here.
            let res = execute(&self.plan, i, &ctx, &ins, step_data, faults);
            let _ = done.send((i, store(table, res)));
            return Ok(());
        }
        let worker = self
            .workers
            .get(&step.device)
            .ok_or_else(|| ExecError::Internal(format!("no worker for {}", step.device)))?;
        let plan = self.plan.clone();
        let table = table.clone();
        let faults = faults.clone();
        let done = done.clone();
        let sent = worker.send(Box::new(move || {
            let res = execute(&plan, i, &ctx, &ins, step_data, &faults);
            drop(ins);
            let _ = done.send((i, store(&table, res)));
        }));
        if sent {
            Ok(())
        } else {
            Err(ExecError::Internal(format!(
                "the worker for {} stopped",
                step.device
            )))
        }
    }
}
