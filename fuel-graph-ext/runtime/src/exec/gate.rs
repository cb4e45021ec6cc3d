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
//! - [`Dispatch::Priority`] keeps the schedule's order as a priority: a
//!   lane has at most two steps out (one running, one queued behind it),
//!   and when it has room it takes the ready step that comes first in the
//!   schedule, so it is never idle while one of its steps is ready. A schedule built from estimates stays useful
//!   when a step takes longer than estimated. `comm.*` steps and driver
//!   islands keep the schedule's order among themselves, lane by lane, so
//!   every rank issues them alike.
//! - [`Dispatch::AfterCompute`] holds every step that moves data between
//!   devices or meets other ranks until every `extern` kernel that reads
//!   nothing communicated has finished: communication after the whole
//!   backward pass, the baseline a training-step benchmark compares with.
//!   (An extern that reads a collective's result waits for it, so it
//!   cannot be waited for.)

use fuel_graph_ext::plan::lanes::{communicates, compute_before_communication, lane_of, Lane};
use fuel_graph_ext::plan::{Schedule, Work};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};

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
    /// Each lane has at most two steps out (one running, one queued), and
    /// when it has room takes the ready step that comes first in the
    /// schedule: the schedule's order as a priority, without ever leaving
    /// a lane idle while one of its steps is ready. `comm.*` steps still
    /// go in schedule order.
    Priority,
    /// As `Fifo`, with communication held until every `extern` kernel is done.
    AfterCompute,
}

impl Dispatch {
    /// `FUEL_DISPATCH`: `fifo`, `in-order`, `priority` or `after-compute`; `None` when
    /// unset or empty.
    pub fn from_env() -> Result<Option<Dispatch>, fuel_graph_ext::env::EnvError> {
        const ACCEPTS: &str = "fifo, in-order, priority or after-compute";
        let Some(v) = fuel_graph_ext::env::text("FUEL_DISPATCH", ACCEPTS)? else {
            return Ok(None);
        };
        match v.trim() {
            "fifo" => Ok(Some(Dispatch::Fifo)),
            "in-order" => Ok(Some(Dispatch::InOrder)),
            "priority" => Ok(Some(Dispatch::Priority)),
            "after-compute" => Ok(Some(Dispatch::AfterCompute)),
            _ => Err(fuel_graph_ext::env::EnvError {
                name: "FUEL_DISPATCH".into(),
                value: v,
                accepts: ACCEPTS.into(),
            }),
        }
    }
}

/// Steps a lane has out at once under priority dispatch: the one running
/// and the one queued behind it, so the worker finds its next step waiting
/// instead of idling through a round trip to the dispatcher (one at a time
/// measured 1.7x FIFO's step time on the 2-core VM); the choice of that
/// next step is made one step early.
const LANE_DEPTH: u8 = 2;

/// What a dispatch order needs to know of a plan, worked out once when the
/// executable is compiled (a pure function of the plan and the order).
pub(super) struct Order {
    mode: Dispatch,
    /// `InOrder`: the step before each on its lane, and after it
    /// (`Priority`: the same among a lane's `comm.*` and island steps).
    prev: Vec<Option<usize>>,
    next: Vec<Option<usize>>,
    /// `AfterCompute`: the extern kernels that read nothing communicated,
    /// and how many there are.
    compute: Vec<bool>,
    externs: usize,
    /// `Priority`: each step's lane, an index below `lanes`.
    lane: Vec<Option<usize>>,
    lanes: usize,
}

impl Order {
    /// `mode` over `plan`. FIFO (the default) keeps nothing per step.
    pub(super) fn new(plan: &Schedule, mode: Dispatch) -> Order {
        let n = match mode {
            Dispatch::InOrder | Dispatch::Priority => plan.steps.len(),
            _ => 0,
        };
        let (mut prev, mut next) = (vec![None; n], vec![None; n]);
        let mut lane = vec![None; n];
        let mut lanes: HashMap<Lane, usize> = HashMap::new();
        let mut last: HashMap<Lane, usize> = HashMap::new();
        for (i, s) in plan.steps.iter().enumerate().take(n) {
            let Some(l) = lane_of(s) else { continue };
            // Under priority dispatch a lane's `comm.*` and island steps
            // keep their order, and take no turn of the lane: an island's
            // members are finished by whichever member ran it.
            let ordered = matches!(s.work, Work::Comm { .. } | Work::Island { .. });
            if mode == Dispatch::InOrder || ordered {
                if let Some(p) = last.insert(l, i) {
                    prev[i] = Some(p);
                    next[p] = Some(i);
                }
            }
            if mode == Dispatch::Priority && !ordered {
                let count = lanes.len();
                lane[i] = Some(*lanes.entry(l).or_insert(count));
            }
        }
        let compute = match mode {
            Dispatch::AfterCompute => compute_before_communication(&plan.steps),
            _ => Vec::new(),
        };
        let externs = compute.iter().filter(|c| **c).count();
        Order {
            mode,
            prev,
            next,
            compute,
            externs,
            lane,
            lanes: lanes.len(),
        }
    }
}

/// One run's dispatch state, over its executable's [`Order`].
pub(super) struct Gate<'a> {
    order: &'a Order,
    gone: Vec<bool>,
    /// Ready steps held back, waiting for their turn.
    parked: Vec<bool>,
    /// `AfterCompute`: how many of the order's extern kernels have not
    /// finished, and the communication held until they have.
    externs_left: usize,
    held: Vec<usize>,
    /// `Priority`: how many steps each lane has out, and each lane's ready
    /// steps, first in the schedule on top.
    out: Vec<u8>,
    waiting: Vec<BinaryHeap<Reverse<usize>>>,
}

impl<'a> Gate<'a> {
    /// The state for one run.
    pub(super) fn new(order: &'a Order) -> Gate<'a> {
        let n = order.prev.len();
        Gate {
            order,
            gone: vec![false; n],
            parked: vec![false; n],
            externs_left: order.externs,
            held: Vec::new(),
            out: vec![0; order.lanes],
            waiting: vec![BinaryHeap::new(); order.lanes],
        }
    }

    /// Whether ready step `i` may go now; if not it is parked, and
    /// [`Gate::went`] or [`Gate::finished`] hands it back when it may.
    pub(super) fn admit(&mut self, plan: &Schedule, i: usize) -> bool {
        match self.order.mode {
            Dispatch::Fifo => true,
            Dispatch::InOrder => {
                let ok = self.order.prev[i].is_none_or(|p| self.gone[p]);
                self.parked[i] = !ok;
                ok
            }
            Dispatch::Priority => {
                if self.order.prev[i].is_some_and(|p| !self.gone[p]) {
                    self.parked[i] = true;
                    return false;
                }
                let Some(l) = self.order.lane[i] else {
                    return true;
                };
                if self.out[l] >= LANE_DEPTH {
                    self.waiting[l].push(Reverse(i));
                    return false;
                }
                self.out[l] += 1;
                true
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
        if let Some(&Some(n)) = self.order.next.get(i) {
            if std::mem::replace(&mut self.parked[n], false) {
                ready.push_back(n);
            }
        }
    }

    /// Step `i` finished: its lane takes the ready step that comes first
    /// (priority dispatch); after the last `extern` kernel, the held
    /// communication is ready to go.
    pub(super) fn finished(&mut self, i: usize, ready: &mut VecDeque<usize>) {
        if let Some(&Some(l)) = self.order.lane.get(i) {
            self.out[l] = self.out[l].saturating_sub(1);
            if let Some(Reverse(j)) = self.waiting[l].pop() {
                // First in line: `admit` gives it the lane again.
                ready.push_front(j);
            }
        }
        if self.order.compute.get(i) == Some(&true) {
            self.externs_left = self.externs_left.saturating_sub(1);
            if self.externs_left == 0 {
                ready.extend(self.held.drain(..));
            }
        }
    }
}
