//! The pass viewer for collective pipelines: runs a pipeline while
//! recording every step ([`fuel_graph_ext::html::Recording`]) and adds what
//! only this crate knows: each collective's [`Decision`] (candidates,
//! estimates, the pick and why) and, for every node `lower-collectives`
//! made, the collective it came from
//! ([`crate::lower::LowerCollectives::provenance`]), which is how a click
//! on a collective highlights what it was lowered into.
//!
//! [`record`] is the library call (a framework engineer dumps from their
//! own program); `fuel-opt --dump-html FILE` and `fuel-opt demo` use it.

use crate::lower::{Candidate, Decision, LowerCollectives};
use fuel_graph_ext::html::{self, Link, Recording};
use fuel_graph_ext::pass::{DebugOptions, Observed, PassContext, PassError, PassManager};
use fuel_graph_ext::{Graph, NodeId, Topology};
use std::sync::Arc;

/// Runs `pm` on `g` in place, recording every step, the lowering's
/// decisions and where lowered nodes came from. `pipeline` is the
/// pipeline's text, as the page shows it.
pub fn record_with(
    pm: &mut PassManager,
    g: &mut Graph,
    pipeline: &str,
) -> Result<Recording, PassError> {
    let mut rec = Recording::new(g.name.clone(), pipeline);
    pm.run_observed(g, &mut |o| observe(&mut rec, o))?;
    Ok(rec)
}

/// Builds `pipeline` from [`crate::registry`] for `topology`, runs it on a
/// copy of `g`, and returns the lowered graph and the recording; write it
/// with [`Recording::write`] or take the page with [`Recording::to_html`].
///
/// ```
/// use fuel_collective::{viewer, DeviceGroup};
/// use fuel_graph_ext::{DType, Device, LazyGraph, ReduceOp, Topology, TensorType};
/// use std::sync::Arc;
///
/// let graph = LazyGraph::new("example");
/// let devices = [Device::cpu(0), Device::cpu(1)];
/// let ty = TensorType::new(DType::F32, &[4]);
/// let shards: Vec<_> = devices
///     .iter()
///     .enumerate()
///     .map(|(i, d)| graph.input(&format!("x{i}"), *d, ty.clone()))
///     .collect();
/// let group = DeviceGroup::new(devices)?;
/// for r in group.all_reduce(&shards, ReduceOp::Sum)? {
///     graph.output(&r)?;
/// }
/// let topo = Arc::new(Topology::default());
/// let (_lowered, rec) = viewer::record(&graph.snapshot(), "lower-collectives", topo)?;
/// assert!(rec.to_html().contains("\"name\":\"lower-collectives\""));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn record(
    g: &Graph,
    pipeline: &str,
    topology: Arc<Topology>,
) -> Result<(Graph, Recording), PassError> {
    let mut pm = PassManager::new(
        &crate::registry(),
        pipeline,
        PassContext { topology },
        DebugOptions::default(),
    )?;
    let mut out = g.clone();
    let rec = record_with(&mut pm, &mut out, pipeline)?;
    Ok((out, rec))
}

/// Records one step, and what `lower-collectives` kept from it.
fn observe(rec: &mut Recording, o: &Observed<'_>) {
    rec.observe(o);
    let lowering = o
        .pass
        .and_then(|p| (p as &dyn std::any::Any).downcast_ref::<LowerCollectives>());
    let (Some(pass), Some(before)) = (lowering, o.step.checked_sub(1)) else {
        return;
    };
    rec.links
        .extend(pass.provenance().iter().map(|&(node, from)| Link {
            step: o.step,
            node,
            from,
        }));
    // The pass lowers the collectives of its input in topological order,
    // one decision each: the same order read here.
    let Some(input) = rec.steps.get(before).map(|s| &s.graph) else {
        return;
    };
    let collectives: Vec<NodeId> = input
        .topo_order()
        .into_iter()
        .filter(|id| input.node(*id).is_some_and(|n| n.op.is_collective()))
        .collect();
    for (id, d) in collectives.iter().zip(pass.decisions()) {
        rec.decisions.push(decision_view(o.step, *id, d));
    }
}

/// A decision as the page shows it.
pub fn decision_view(step: usize, collective: NodeId, d: &Decision) -> html::Decision {
    let candidates = d
        .candidates
        .iter()
        .map(|c| match c {
            Candidate::Estimated { lowering, estimate } => html::Candidate {
                name: lowering.to_string(),
                estimate: format!(
                    "{:.2} us ({} hops)",
                    estimate.total_us(),
                    estimate.transfers
                ),
                picked: *lowering == d.lowering,
            },
            Candidate::Unfit { algorithm, why } => html::Candidate {
                name: algorithm.to_string(),
                estimate: format!("cannot: {why}"),
                picked: false,
            },
        })
        .collect();
    // The note reads `lower-collectives: <what>: chose ...`; the page
    // shows the choice and the candidates apart.
    let text = d.to_string();
    let what = text
        .strip_prefix(crate::lower::NAME)
        .and_then(|w| w.strip_prefix(": "))
        .unwrap_or(&text);
    let what = what.split(": chose ").next().unwrap_or(what);
    html::Decision {
        step,
        collective,
        what: what.to_string(),
        candidates,
        pick: d.lowering.to_string(),
        how: d.reason.to_string(),
        costs: d.costs.to_string(),
    }
}

/// The cost model's estimate of each step of a lowered graph, by node:
/// its price on the runner the executor would use, alone (no waiting).
/// The model prices the graph's plan, whose steps each name their node;
/// empty where the graph has no plan (a collective is left).
pub fn step_estimates(g: &Graph, topo: &Topology) -> Vec<(NodeId, f64)> {
    use crate::cost::{price, step_us, working_bytes};
    let Ok(plan) = price::plan_for(g, topo) else {
        return Vec::new();
    };
    let steps = price::plan_steps(&plan, topo, &Default::default(), false);
    // `plan_steps` prices every step but the inputs, in plan order.
    let nodes = plan.steps.iter().filter(|s| {
        !matches!(
            s.work,
            fuel_graph_ext::plan::Work::Device(fuel_graph_ext::plan::DeviceWork::Input { .. })
        )
    });
    let runner = price::plan_runner(&plan, topo);
    let working = working_bytes(&steps);
    nodes
        .zip(&steps)
        .map(|(n, s)| (n.node, step_us(topo, runner, &s.kind, working)))
        .collect()
}
