//! A lowered graph's plan as the overlap simulator's [`Task`]s: the steps
//! the runtime will run (as [`crate::cost::price::plan_for`] builds them), each priced by
//! the cost model ([`Tally::price`]) and placed on the lane the threaded
//! runner gives it ([`lane_of`], the runtime's own rule).

use super::simulate::{Class, Task};
use crate::cost::price::plan_steps;
use crate::cost::{working_bytes, Tally};
use fuel_graph_ext::plan::lanes::{communicates, is_extern, lane_of};
use fuel_graph_ext::plan::{DeviceWork, Schedule, Work};
use fuel_graph_ext::topology::Runner;
use fuel_graph_ext::Topology;
use std::collections::BTreeSet;

/// The tasks of `plan`, one per scheduled step, in step order, priced for
/// the threaded runner (a graph with `extern` kernels on several devices
/// always runs threaded). `None` if the model does not price every step.
pub fn tasks_of(plan: &Schedule, topo: &Topology) -> Option<Vec<Task>> {
    let steps = plan_steps(plan, topo, &BTreeSet::new(), true);
    if steps.len() < plan.steps.len() {
        return None;
    }
    let tally = Tally::new(topo, Runner::Threaded, working_bytes(&steps));
    let tasks = plan
        .steps
        .iter()
        .zip(&steps)
        .map(|(s, m)| {
            let p = tally.price(&m.kind);
            let class = match &s.work {
                _ if is_extern(s) => Class::Compute,
                Work::Device(DeviceWork::Input { .. }) => Class::Input,
                _ if communicates(s) => Class::Comm,
                _ => Class::Other,
            };
            Task {
                lane: lane_of(s),
                busy_us: p.busy_us,
                us: p.us,
                deps: m.deps.clone(),
                class,
                bytes: s.ty.size_bytes(),
            }
        })
        .collect();
    Some(tasks)
}
