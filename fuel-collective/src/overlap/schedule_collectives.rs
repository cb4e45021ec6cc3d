//! The `schedule-collectives` pass: order a lowered graph's steps so that
//! its collectives run behind the compute around them.
//!
//! **Matches** a lowered graph (no collective left: run it after
//! `lower-collectives` and the copy passes) that holds at least one
//! `extern` op, the host framework's compute. Such a graph runs on the
//! threaded runner, where each device has a compute worker and a copy lane.
//!
//! **Produces** the same nodes, recreated in the chosen order, so that the
//! printed IR, `--emit plan` and the runtime's dispatch follow it, and
//! notes: one per collective (its steps' devices, when its first step
//! starts, when its last ends, and the longest a compute lane waits on it,
//! all estimated) and one for the choice (each policy's estimate, the
//! exposed communication, the memory held). The order comes from the
//! overlap simulator (`simulate.rs`) over the cost model's prices
//! (`tasks.rs`): it tries the `collectives-first` and `critical-path` list
//! schedules, each both as a schedule that never leaves a lane idle and as
//! one that may let a lane wait a little for a better-ranked step
//! (`/waiting`), and keeps the fastest, or the order the graph already has
//! (then only the notes are added) where none beats it. A `/waiting` order
//! is meant to run each lane strictly in order (`Dispatch::InOrder`), any
//! other with the order as each lane's priority (`Dispatch::Priority`);
//! [`was_scheduled`] tells which, and `fuel-opt` runs it so. Each order is
//! a pure function of the graph and the topology (no hash-map order, clock
//! or other per-process state reaches the choice: the maps it keeps are
//! looked up, never walked, and ties go to the lower step index), so every rank of a
//! world computes the same one; a last note gives the schedule's hash
//! (`overlap::schedule_hash`), which the ranks can compare, and
//! `WorldGroup::with_topology` refuses processes whose topologies differ.
//! No step moves ahead of its operands, and the collectives start in the
//! order they come ready as the graph runs in its own order.
//!
//! **Memory:** starting collectives early can hold more bytes at once. An
//! order whose estimated peak exceeds the graph's own order's by more than
//! `max_in_flight` bytes (default: 5% of that peak) is refused, and the
//! note says so.
//!
//! **Leaves alone** a graph with no `extern` op (it changes nothing, not
//! even a note: there is no compute to overlap with) and every op, operand
//! and output: only the order of creation changes. A graph that still
//! holds a collective is an error naming the fix.

use super::simulate::{by_start, collectives, simulate, simulate_in, Lane, Policy, Task, Timeline};
use super::tasks::tasks_of;
use crate::combine::Bytes;
use crate::cost::price::plan_for;
use fuel_graph_ext::dot::human_bytes;
use fuel_graph_ext::graph::NodeId;
use fuel_graph_ext::pass::{Changed, Pass, PassError, PassOptions};
use fuel_graph_ext::plan::Schedule;
use fuel_graph_ext::{Device, Graph, Op, Topology};
use std::collections::BTreeSet;
use std::sync::Arc;

/// The pass name.
pub const NAME: &str = "schedule-collectives";

/// The options `schedule-collectives` accepts.
pub const OPTIONS: &[(&str, &str)] = &[
    (
        "max_in_flight",
        "most extra bytes an order may hold at once over the graph's own order, e.g. 64M (default: 5% of its peak)",
    ),
    (
        "policy",
        "auto (the fastest of collectives-first and critical-path, each with and without waiting), collectives-first, critical-path or own (the graph's own order)",
    ),
];

/// What the pass was asked to do.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ScheduleOptions {
    /// `max_in_flight=`, or `None` for 5% of the graph's own peak.
    pub max_in_flight: Option<usize>,
    /// `policy=`, or `None` for auto; `Policy::InOrder` keeps the graph's
    /// own order (`policy=own`).
    pub policy: Option<Policy>,
}

impl ScheduleOptions {
    /// Reads the options from a pipeline.
    pub fn from_pass_options(o: &PassOptions) -> Result<ScheduleOptions, PassError> {
        let policy = match o.get("policy") {
            None | Some("auto") => None,
            Some("collectives-first") => Some(Policy::CollectivesFirst),
            Some("critical-path") => Some(Policy::CriticalPath),
            Some("own") => Some(Policy::InOrder),
            Some(other) => {
                return Err(PassError::BadOption {
                    pass: NAME.into(),
                    option: "policy".into(),
                    message: format!(
                    "`{other}` is not a policy; use auto, collectives-first, critical-path or own"
                ),
                })
            }
        };
        Ok(ScheduleOptions {
            max_in_flight: o.parse::<Bytes>("max_in_flight")?.map(|b| b.0),
            policy,
        })
    }
}

/// The pass object.
pub struct ScheduleCollectives {
    opts: ScheduleOptions,
    topo: Arc<Topology>,
}

impl ScheduleCollectives {
    /// With the given options and topology.
    pub fn new(opts: ScheduleOptions, topo: Arc<Topology>) -> ScheduleCollectives {
        ScheduleCollectives { opts, topo }
    }
}

impl Pass for ScheduleCollectives {
    fn name(&self) -> &'static str {
        NAME
    }

    fn run(&mut self, g: &mut Graph) -> Result<Changed, PassError> {
        let failed = |message: String| PassError::Failed {
            pass: NAME.into(),
            message,
        };
        let ops = || g.node_ids().filter_map(|id| g.node(id).map(|n| &n.op));
        if !ops().any(|op| matches!(op, Op::Extern(_))) {
            return Ok(Changed::No);
        }
        if let Some(op) = ops().find(|op| op.is_collective()) {
            return Err(failed(format!(
                "the graph still holds a `{}`; schedule-collectives orders a lowered graph: put it after lower-collectives and the copy passes",
                op.mnemonic()
            )));
        }
        let plan = plan_for(g, &self.topo).map_err(|e| failed(e.to_string()))?;
        let tasks = tasks_of(&plan, &self.topo).ok_or_else(|| {
            failed("the cost model does not price every step of this graph".into())
        })?;
        let choice = choose(&tasks, self.opts);
        // The graph's own order is kept as it is: only the notes are added.
        if choice.policy != Policy::InOrder {
            let order = node_order(g, &plan, &choice.timeline.order);
            *g = g.rebuilt_in(&order).ok_or_else(|| PassError::Internal {
                pass: NAME.into(),
                message: "the chosen order is not a topological order of the graph".into(),
            })?;
        }
        for note in notes(&plan, &tasks, &choice) {
            g.add_note(note);
        }
        let steps = super::schedule_steps(g).len();
        g.add_note(format!(
            "{NAME}: schedule hash {:016x} over {steps} steps that communicate or compute (what every rank of a world must issue alike: overlap::schedule_hash)",
            super::schedule_hash(g)
        ));
        Ok(Changed::Yes)
    }
}

/// Every node of `g`, in the order of the steps `steps` (of `plan`),
/// each node without a step of its own (an op the plan runs inside
/// another, such as a fold a `div` carries out) just before the first step
/// that reads it, every node after its operands.
fn node_order(g: &Graph, plan: &Schedule, steps: &[usize]) -> Vec<NodeId> {
    let mut pos: rustc_hash::FxHashMap<NodeId, usize> = Default::default();
    for (k, &i) in steps.iter().enumerate() {
        pos.insert(plan.steps[i].node, k);
    }
    let topo = g.topo_order();
    // A node with no step takes its earliest reader's place (readers come
    // later in topological order, so walk it backwards).
    for id in topo.iter().rev() {
        if pos.contains_key(id) {
            continue;
        }
        let at = g
            .consumers(*id)
            .iter()
            .filter_map(|c| pos.get(c).copied())
            .min()
            .unwrap_or(usize::MAX);
        pos.insert(*id, at);
    }
    let index: rustc_hash::FxHashMap<NodeId, usize> =
        topo.iter().enumerate().map(|(k, id)| (*id, k)).collect();
    let key = |id: &NodeId| (pos[id], index[id]);
    let mut left: rustc_hash::FxHashMap<NodeId, usize> = Default::default();
    let mut ready = std::collections::BinaryHeap::new();
    for id in &topo {
        let operands: BTreeSet<NodeId> = g
            .node(*id)
            .map(|n| n.operands.iter().map(|v| v.node).collect())
            .unwrap_or_default();
        left.insert(*id, operands.len());
        if operands.is_empty() {
            ready.push(std::cmp::Reverse((key(id), *id)));
        }
    }
    let mut order = Vec::with_capacity(topo.len());
    while let Some(std::cmp::Reverse((_, id))) = ready.pop() {
        order.push(id);
        for c in g.consumers(id) {
            if let Some(l) = left.get_mut(&c) {
                *l -= 1;
                if *l == 0 {
                    ready.push(std::cmp::Reverse((key(&c), c)));
                }
            }
        }
    }
    order
}

/// Whether `schedule-collectives` ordered `g` (its note on the choice is
/// there), and if so whether its order lets a lane wait for a step
/// (a `/waiting` schedule). A runner should then keep each lane strictly
/// to the graph's order (`Dispatch::InOrder`) where it waits, and take the
/// order as each lane's priority (`Dispatch::Priority`) where it does not,
/// as `fuel-opt` does.
pub fn was_scheduled(g: &Graph) -> Option<Scheduled> {
    let mark = format!("{NAME}: chose ");
    let note = g.notes().iter().find_map(|n| n.strip_prefix(&mark))?;
    let policy = note.split(' ').next().unwrap_or("");
    Some(if policy.ends_with("/waiting") {
        Scheduled::Waits
    } else {
        Scheduled::NeverWaits
    })
}

/// How a graph `schedule-collectives` ordered means to be run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scheduled {
    /// Its order may let a lane wait for a better-ranked step: run each
    /// lane strictly in order.
    Waits,
    /// Its order never leaves a lane idle: take it as a priority.
    NeverWaits,
}

/// The order picked, and how the others fared.
struct Choice {
    policy: Policy,
    timeline: Timeline,
    /// (policy, estimate) of every order considered, the graph's own first.
    tried: Vec<(Policy, f64)>,
    /// Orders refused for the memory they hold, with their extra bytes.
    refused: Vec<(Policy, usize)>,
    cap: usize,
    own_peak: usize,
    /// Each task's collective, numbered in the order they start.
    groups: Vec<Option<usize>>,
    fifo_us: f64,
    after_us: f64,
}

/// Picks the fastest order within the memory cap; the graph's own order
/// (as priority dispatch runs it) wins ties, so a graph already well
/// ordered is kept as it is.
fn choose(tasks: &[Task], opts: ScheduleOptions) -> Choice {
    let own = simulate(tasks, Policy::Priority);
    // Collectives start in the order they come ready as the graph runs.
    let groups = by_start(&collectives(tasks), &own);
    let cap = opts.max_in_flight.unwrap_or(own.peak_bytes / 20);
    let mut choice = Choice {
        policy: Policy::InOrder,
        tried: vec![(Policy::InOrder, own.makespan_us)],
        refused: Vec::new(),
        cap,
        own_peak: own.peak_bytes,
        groups: groups.clone(),
        fifo_us: simulate(tasks, Policy::Fifo).makespan_us,
        after_us: simulate(tasks, Policy::AfterCompute).makespan_us,
        timeline: own,
    };
    // Each policy as a list schedule that never leaves a lane idle, and as
    // one that may wait a little for a better-ranked step.
    let policies = match opts.policy {
        Some(Policy::CollectivesFirst) => {
            vec![Policy::CollectivesFirst, Policy::CollectivesFirstWaiting]
        }
        Some(Policy::CriticalPath) => vec![Policy::CriticalPath, Policy::CriticalPathWaiting],
        Some(p) => vec![p],
        None => vec![
            Policy::CollectivesFirst,
            Policy::CollectivesFirstWaiting,
            Policy::CriticalPath,
            Policy::CriticalPathWaiting,
        ],
    };
    let forced = opts.policy.is_some();
    for p in policies.into_iter().filter(|p| *p != Policy::InOrder) {
        let t = simulate_in(tasks, p, &groups);
        choice.tried.push((p, t.makespan_us));
        let extra = t.peak_bytes.saturating_sub(choice.own_peak);
        if extra > cap {
            choice.refused.push((p, extra));
            continue;
        }
        // A forced policy is taken even where it is no faster than the
        // graph's own order (the faster of its two schedules).
        let first_forced = forced && choice.policy == Policy::InOrder;
        if first_forced || t.makespan_us < choice.timeline.makespan_us - 1e-6 {
            choice.policy = p;
            choice.timeline = t;
        }
    }
    choice
}

/// A policy as the notes name it: `InOrder` stands for the graph's own
/// order, as priority dispatch runs it.
fn shown(p: Policy) -> &'static str {
    match p {
        Policy::InOrder => "own order",
        p => p.name(),
    }
}

/// The choice's notes: one per collective, then the summary.
fn notes(plan: &Schedule, tasks: &[Task], c: &Choice) -> Vec<String> {
    let t = &c.timeline;
    let mut out = Vec::new();
    let groups = c.groups.clone();
    let exposed = exposed_by_group(tasks, t, &groups);
    let count = exposed.len();
    for (k, exposed) in exposed.iter().enumerate() {
        let members: Vec<usize> = (0..tasks.len()).filter(|&i| groups[i] == Some(k)).collect();
        let devices: BTreeSet<Device> = members.iter().map(|&i| plan.steps[i].device).collect();
        let devices: Vec<String> = devices.iter().map(Device::to_string).collect();
        let start = members.iter().map(|&i| t.start[i]).fold(f64::MAX, f64::min);
        let done = members.iter().map(|&i| t.end[i]).fold(0.0, f64::max);
        out.push(format!(
            "{NAME}: collective {} of {count} ({} steps on {}): starts at {start:.1}us, done at {done:.1}us, keeps one compute lane waiting {:.1}us at most",
            k + 1,
            members.len(),
            devices.join(", "),
            exposed,
        ));
    }
    let tried: Vec<String> = c
        .tried
        .iter()
        .map(|(p, us)| format!("{} {us:.1}us", shown(*p)))
        .collect();
    let mut summary = format!(
        "{NAME}: chose {} (estimates: {}; fifo {:.1}us; after-compute {:.1}us): step {:.1}us, compute {:.1}us, exposed {:.1}us; peak {} (the graph's own order {}, max_in_flight {})",
        shown(c.policy),
        tried.join(", "),
        c.fifo_us,
        c.after_us,
        t.makespan_us,
        t.compute_us,
        t.exposed_us,
        human_bytes(t.peak_bytes),
        human_bytes(c.own_peak),
        human_bytes(c.cap),
    );
    for (p, extra) in &c.refused {
        summary.push_str(&format!(
            "; refused {}: it holds {} more",
            p.name(),
            human_bytes(*extra)
        ));
    }
    out.push(summary);
    out
}

/// Per collective, the most time one compute lane sat idle before steps
/// whose last operand to arrive came from that collective.
fn exposed_by_group(tasks: &[Task], t: &Timeline, groups: &[Option<usize>]) -> Vec<f64> {
    let count = groups.iter().filter_map(|g| *g).max().map_or(0, |m| m + 1);
    let mut per_lane: std::collections::BTreeMap<(usize, Lane), f64> = Default::default();
    let mut free: std::collections::BTreeMap<Lane, f64> = Default::default();
    for &i in &t.order {
        let Some(lane @ Lane::Compute(_)) = tasks[i].lane else {
            continue;
        };
        let was_free = free.get(&lane).copied().unwrap_or(0.0);
        let gap = t.start[i] - was_free;
        let last = tasks[i]
            .deps
            .iter()
            .copied()
            .filter(|&d| d < tasks.len())
            .max_by(|&a, &b| t.end[a].total_cmp(&t.end[b]));
        if let Some(k) = last.and_then(|d| groups[d]).filter(|_| gap > 1e-9) {
            *per_lane.entry((k, lane)).or_insert(0.0) += gap;
        }
        free.insert(lane, t.start[i] + tasks[i].busy_us);
    }
    let mut exposed = vec![0.0f64; count];
    for ((k, _), us) in per_lane {
        exposed[k] = exposed[k].max(us);
    }
    exposed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::overlap::simulate::Class;

    fn task(us: f64, bytes: usize, deps: &[usize], class: Class) -> Task {
        Task {
            lane: Some(Lane::Compute(fuel_graph_ext::Device::cpu(0))),
            busy_us: us,
            us,
            deps: deps.to_vec(),
            class,
            bytes,
        }
    }

    /// In order, a kernel's 5000-byte result is read and freed before a
    /// 5000-byte collective step starts; collectives first starts that
    /// step at once and holds it until the end, beside the kernel's.
    #[test]
    fn an_order_that_holds_more_than_max_in_flight_is_refused() {
        let tasks = vec![
            task(100.0, 5000, &[], Class::Compute),
            task(1.0, 1, &[0], Class::Other),
            task(1.0, 5000, &[], Class::Other),
            task(1.0, 1, &[2, 1], Class::Other),
        ];
        let forced = |cap| ScheduleOptions {
            max_in_flight: cap,
            policy: Some(Policy::CollectivesFirst),
        };
        let c = choose(&tasks, forced(None));
        let first = [Policy::CollectivesFirst, Policy::CollectivesFirstWaiting];
        assert_eq!(c.policy, Policy::InOrder);
        assert!(!c.refused.is_empty());
        for (p, extra) in &c.refused {
            assert!(first.contains(p) && *extra >= 4999, "{:?}", c.refused);
        }
        // With room for it, the forced order is taken.
        let c = choose(&tasks, forced(Some(10_000)));
        assert!(first.contains(&c.policy), "{:?}", c.policy);
        assert!(c.refused.is_empty());
    }
}
