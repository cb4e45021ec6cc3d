//! The threaded runner's dispatch order ([`Dispatch`]): which ready step
//! may go to its lane now. A lane is a device's compute worker or its copy
//! thread; a step that needs no device takes none.
//!
//! - [`Dispatch::Fifo`] lets every step go the moment its operands exist,
//!   so each lane runs steps in the order they came ready.
//! - [`Dispatch::InOrder`] keeps each lane to the schedule's own order: a
//!   step goes only after the lane's earlier steps have gone, even when a
//!   later one is ready first. This is how the order `schedule-collectives`
//!   gives a graph (its node order) reaches the devices.
//! - [`Dispatch::AfterCompute`] holds every step that moves data between
//!   devices or meets other ranks until every `extern` kernel that reads
//!   nothing communicated has finished: communication after the whole
//!   backward pass, the baseline a training-step benchmark compares with.
//!   (An extern that reads a collective's result waits for it, so it
//!   cannot be waited for.)

use fuel_graph_ext::plan::lanes::{communicates, compute_before_communication, lane_of, Lane};
use fuel_graph_ext::plan::Schedule;
use std::collections::VecDeque;

/// How the threaded runner orders the ready steps of each lane; see the
/// module. The inline runner runs steps in schedule order whatever this
/// says.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Dispatch {
    /// In the order they come ready (the default).
    #[default]
    Fifo,
    /// Each lane in schedule order.
    InOrder,
    /// As `Fifo`, with communication held until every `extern` kernel is done.
    AfterCompute,
}

impl Dispatch {
    /// `FUEL_DISPATCH`: `fifo`, `in-order` or `after-compute`; `None` when
    /// unset or empty.
    pub fn from_env() -> Result<Option<Dispatch>, fuel_graph_ext::env::EnvError> {
        const ACCEPTS: &str = "fifo, in-order or after-compute";
        let Some(v) = fuel_graph_ext::env::text("FUEL_DISPATCH", ACCEPTS)? else {
            return Ok(None);
        };
        match v.trim() {
            "fifo" => Ok(Some(Dispatch::Fifo)),
            "in-order" => Ok(Some(Dispatch::InOrder)),
            "after-compute" => Ok(Some(Dispatch::AfterCompute)),
            _ => Err(fuel_graph_ext::env::EnvError {
                name: "FUEL_DISPATCH".into(),
                value: v,
                accepts: ACCEPTS.into(),
            }),
        }
    }
}

/// One run's dispatch state.
pub(super) struct Gate {
    mode: Dispatch,
    /// `InOrder`: the step before each on its lane, and after it.
    prev: Vec<Option<usize>>,
    next: Vec<Option<usize>>,
    gone: Vec<bool>,
    /// Ready steps held back, waiting for their turn.
    parked: Vec<bool>,
    /// `AfterCompute`: the extern kernels that read nothing communicated,
    /// how many of them have not finished, and the communication held
    /// until they have.
    compute: Vec<bool>,
    externs_left: usize,
    held: Vec<usize>,
}

impl Gate {
    /// The state for one run of `plan`.
    pub(super) fn new(plan: &Schedule, mode: Dispatch) -> Gate {
        // Only in-order dispatch keeps per-step lane state; FIFO (the
        // default) allocates nothing.
        let n = match mode {
            Dispatch::InOrder => plan.steps.len(),
            _ => 0,
        };
        let (mut prev, mut next) = (vec![None; n], vec![None; n]);
        if mode == Dispatch::InOrder {
            let mut last: std::collections::HashMap<Lane, usize> = Default::default();
            for (i, s) in plan.steps.iter().enumerate() {
                if let Some(p) = lane_of(s).and_then(|l| last.insert(l, i)) {
                    prev[i] = Some(p);
                    next[p] = Some(i);
                }
            }
        }
        let compute = match mode {
            Dispatch::AfterCompute => compute_before_communication(&plan.steps),
            _ => Vec::new(),
        };
        let externs_left = compute.iter().filter(|c| **c).count();
        Gate {
            mode,
            prev,
            next,
            gone: vec![false; n],
            parked: vec![false; n],
            compute,
            externs_left,
            held: Vec::new(),
        }
    }

    /// Whether ready step `i` may go now; if not it is parked, and
    /// [`Gate::went`] or [`Gate::finished`] hands it back when it may.
    pub(super) fn admit(&mut self, plan: &Schedule, i: usize) -> bool {
        match self.mode {
            Dispatch::Fifo => true,
            Dispatch::InOrder => {
                let ok = self.prev[i].is_none_or(|p| self.gone[p]);
                self.parked[i] = !ok;
                ok
            }
            Dispatch::AfterCompute => {
                let ok = self.externs_left == 0 || !communicates(&plan.steps[i]);
                if !ok {
                    self.held.push(i);
                }
                ok
            }
        }
    }

    /// Step `i` went to its lane (or, an island's member, was covered by
    /// the island): the next step of its lane, if parked, is ready to go.
    pub(super) fn went(&mut self, i: usize, ready: &mut VecDeque<usize>) {
        let Some(gone) = self.gone.get_mut(i) else {
            return;
        };
        *gone = true;
        if let Some(&Some(n)) = self.next.get(i) {
            if std::mem::replace(&mut self.parked[n], false) {
                ready.push_back(n);
            }
        }
    }

    /// Step `i` finished: after the last `extern` kernel, the held
    /// communication is ready to go.
    pub(super) fn finished(&mut self, i: usize, ready: &mut VecDeque<usize>) {
        if self.compute.get(i) == Some(&true) {
            self.externs_left = self.externs_left.saturating_sub(1);
            if self.externs_left == 0 {
                ready.extend(self.held.drain(..));
            }
        }
    }
}
