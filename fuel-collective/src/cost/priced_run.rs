//! The cost model's estimate of one run of a plan, step by step: when each
//! step may start and end, how long it takes and what it keeps busy, and
//! which of the estimate's two bounds on the finishing time binds (the
//! longest chain plus the dispatcher, or the busiest resource). It prices
//! the same steps as [`super::price::plan_steps`] with the same
//! [`Tally`], so its total is [`crate::lower::estimate_run`]'s; it only
//! keeps what the sum forgets. `fuel-opt --emit plan` prints it under the
//! plan, so a user sees why an estimate is what it is.

use super::price::{plan_steps_from, Origin};
use super::{runner_of, start_of, working_bytes, Estimate, Load, Resource, Tally};
use fuel_graph_ext::topology::Runner;
use fuel_graph_ext::{Schedule, Topology};
use std::collections::BTreeSet;
use std::fmt::Write;

/// One priced step.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Row {
    /// The scheduled step, or the output handed back.
    pub origin: Origin,
    /// When it may start: when the steps it waits for are done (us).
    pub start_us: f64,
    /// Its time from start to finish (us).
    pub us: f64,
    /// What it keeps busy.
    pub resource: Resource,
    /// Bytes it reads or writes in host memory.
    pub host_bytes: f64,
}

/// A plan's run, priced step by step.
#[derive(Clone, Debug, PartialEq)]
pub struct PricedRun {
    /// Every priced step, in the plan's order (outputs last).
    pub rows: Vec<Row>,
    /// Each resource's total work ([`Tally::loads`]).
    pub loads: Vec<(Load, f64)>,
    /// The run's estimate, as [`crate::lower::estimate_run`] gives it.
    pub estimate: Estimate,
    /// The runner the executor takes for the plan.
    pub runner: Runner,
}

/// `plan`'s run priced on `topo`: inputs, every step, the outputs handed
/// back and the runner's fixed cost per run.
pub fn priced_run(plan: &Schedule, topo: &Topology) -> PricedRun {
    let mut origins = Vec::with_capacity(plan.steps.len());
    let steps = plan_steps_from(plan, topo, &BTreeSet::new(), true, |o| origins.push(o));
    let runner = runner_of(&steps);
    let mut tally = Tally::new(topo, runner, working_bytes(&steps));
    let mut finish: Vec<f64> = Vec::with_capacity(steps.len());
    let mut rows = Vec::with_capacity(steps.len());
    for (i, (step, origin)) in steps.iter().zip(origins).enumerate() {
        let start = start_of(step, i, &finish);
        let priced = tally.price(&step.kind);
        finish.push(tally.add_priced(&priced, start));
        rows.push(Row {
            origin,
            start_us: start,
            us: priced.us,
            resource: priced.resource,
            host_bytes: priced.host_bytes,
        });
    }
    let loads = tally.loads();
    let mut estimate = tally.finish();
    estimate.run_us = topo.runner(runner).run_us;
    PricedRun {
        rows,
        loads,
        estimate,
        runner,
    }
}

impl PricedRun {
    /// The priced run as text: a summary that says which bound binds, each
    /// resource's work, then one line per step (deterministic).
    pub fn render(&self) -> String {
        let e = &self.estimate;
        let mut s = String::with_capacity(128 + 64 * self.rows.len());
        let runner = match self.runner {
            Runner::Inline => "inline",
            Runner::Threaded => "threaded",
        };
        let _ = writeln!(
            s,
            "estimate of one run: {} us ({runner} runner, the cost model's figures)",
            us(e.total_us())
        );
        let chain = e.critical_path_us + e.dispatcher_us;
        let busiest = self.loads.iter().max_by(|a, b| a.1.total_cmp(&b.1));
        let binds = match busiest {
            Some((load, _)) if e.busiest_us > chain => format!("the busiest resource, {load}"),
            _ => "the longest chain of steps plus the dispatcher".to_string(),
        };
        let _ = writeln!(
            s,
            "  binds: {binds}; longest chain {} us + dispatcher {} us, busiest resource {} us, fixed cost per run {} us",
            us(e.critical_path_us),
            us(e.dispatcher_us),
            us(e.busiest_us),
            us(e.run_us)
        );
        let loads: Vec<String> = self
            .loads
            .iter()
            .filter(|(_, w)| *w > 0.0)
            .map(|(l, w)| format!("{l} {} us", us(*w)))
            .collect();
        let _ = writeln!(s, "  work: {}", loads.join(", "));
        let _ = writeln!(
            s,
            "  {:<10} {:>10} {:>10} {:>10}  {:<24} {:>10}",
            "step", "start us", "end us", "time us", "on", "host bytes"
        );
        for r in &self.rows {
            let what = match r.origin {
                Origin::Slot(slot) => format!("s{slot}"),
                Origin::Output(slot) => format!("out s{slot}"),
            };
            let on = r.resource.to_string();
            let _ = writeln!(
                s,
                "  {what:<10} {:>10} {:>10} {:>10}  {on:<24} {:>10}",
                us(r.start_us),
                us(r.start_us + r.us),
                us(r.us),
                fuel_graph_ext::dot::human_bytes(r.host_bytes as usize)
            );
        }
        s
    }
}

/// Microseconds as printed: one decimal.
fn us(x: f64) -> String {
    format!("{x:.1}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lower::estimate_run;

    /// The priced run's total is `estimate_run`'s, its rows are the plan's
    /// steps plus the outputs handed back, and each row ends no earlier
    /// than the rows it waits for.
    #[test]
    fn the_priced_run_adds_up_to_the_runs_estimate() {
        let src = "graph @g {\n  %0 = input \"a\" @vulkan:0 : f32[262144]\n  %1 = input \"b\" @cpu:0 : f32[262144]\n  %2 = copy %0 -> cpu:0 : f32[262144]\n  %3 = add %2, %1 @cpu:0 : f32[262144]\n  %4 = copy %3 -> vulkan:0 : f32[262144]\n  return %3, %4\n}\n";
        let g = fuel_graph_ext::text::parse(src).unwrap();
        let topo = Topology::default();
        let plan = super::super::price::plan_for(&g, &topo).unwrap();
        let t = priced_run(&plan, &topo);
        let want = estimate_run(&g, &topo).unwrap();
        assert_eq!(t.estimate, want);
        let slots = t
            .rows
            .iter()
            .filter(|r| matches!(r.origin, Origin::Slot(_)))
            .count();
        assert_eq!(slots, plan.steps.len());
        let outputs = t
            .rows
            .iter()
            .filter(|r| matches!(r.origin, Origin::Output(_)))
            .count();
        assert!(outputs <= plan.outputs.len());
        let end = t.rows.iter().map(|r| r.start_us + r.us).fold(0.0, f64::max);
        assert!((end - t.estimate.critical_path_us).abs() < 1e-9);
        let text = t.render();
        assert!(
            text.starts_with(&format!(
                "estimate of one run: {:.1} us (threaded runner",
                want.total_us()
            )),
            "{text}"
        );
        assert!(text.contains("\n  s3 "), "{text}");
        assert!(text.contains("binds: "), "{text}");
    }
}
