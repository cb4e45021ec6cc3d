//! Test support for the algorithms' unit tests: a collective lowered on a
//! topology, checked against the reference interpreter, with its decision
//! and the devices its folds run on; and the shipped PCIe workstation's
//! topology, which several of them lower on.

use super::{decisions, Decision};
use fuel_graph_ext::interp::{deterministic_inputs, interpret};
use fuel_graph_ext::{text, Device, Graph, Op, Topology};
use std::sync::Arc;

/// `src` (one collective) lowered by `pipeline` on `topo`; panics unless
/// the lowered graph computes what `src` did. Returns the graph, the
/// collective's decision and the devices of its folds, sorted.
pub(super) fn lowered(src: &str, pipeline: &str, topo: Topology) -> (Graph, Decision, Vec<Device>) {
    let before = text::parse(src).expect("the test's source parses");
    let mut g = before.clone();
    let pm = crate::run_pipeline(&mut g, pipeline, Arc::new(topo), Default::default())
        .expect("the pipeline runs");
    let inputs = deterministic_inputs(&before);
    assert_eq!(
        interpret(&g, &inputs).expect("the lowered graph runs"),
        interpret(&before, &inputs).expect("the source runs"),
        "{pipeline}: the lowering changed what the graph computes"
    );
    let decision = decisions(&pm)
        .first()
        .map(|d| (*d).clone())
        .expect("one collective was lowered");
    let mut folds: Vec<Device> = g
        .node_ids()
        .filter_map(|id| g.node(id))
        .filter(|n| matches!(n.op, Op::Elementwise { .. }))
        .filter_map(|n| n.op.device())
        .collect();
    folds.sort();
    (g, decision, folds)
}

/// The text of `examples/topologies/pcie-cuda-vulkan.topo`.
pub(super) const PCIE_TEXT: &str =
    include_str!("../../../examples/topologies/pcie-cuda-vulkan.topo");

/// The shipped PCIe workstation: `[cuda:0, vulkan:0, cpu:0]`, no path
/// between the two GPUs, a Vulkan card that binds views at 4 bytes.
pub(super) fn pcie() -> Topology {
    Topology::parse(PCIE_TEXT).expect("the shipped topology parses")
}
