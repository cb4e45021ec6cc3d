//! The graphs tests start from: one shard per device, a collective
//! recorded through `DeviceGroup`, and a graph lowered by a pipeline, which
//! runs through `fuel_collective::run_pipeline` as every caller's does.

use fuel_collective::DeviceGroup;
use fuel_graph_ext::pass::DebugOptions;
use fuel_graph_ext::{
    text, DType, Device, Graph, LazyGraph, LazyTensor, ReduceOp, TensorType, Topology,
};
use std::sync::Arc;

/// Every `lower-collectives` algorithm option the property and table
/// tests lower with (`driver` falls back where no driver is declared).
pub const ALGORITHMS: [&str; 7] = [
    "auto",
    "star",
    "hierarchical",
    "ring",
    "tree",
    "tree, arity=3",
    "driver",
];

/// One shard per device, all of type `ty`, in graph `g`: inputs named
/// `s0`, `s1`, ... in device order.
pub fn shards(g: &LazyGraph, devices: &[Device], ty: &TensorType) -> Vec<LazyTensor> {
    devices
        .iter()
        .enumerate()
        .map(|(i, d)| g.input(&format!("s{i}"), *d, ty.clone()))
        .collect()
}

/// An `all_reduce` of one `dtype[n]` shard per device ([`shards`]),
/// recorded through a `DeviceGroup`; returns the graph before lowering.
pub fn all_reduce_graph(devices: &[Device], dtype: DType, n: usize, op: ReduceOp) -> Graph {
    let lg = LazyGraph::new("all_reduce");
    let group = DeviceGroup::new(devices.iter().copied()).unwrap();
    let shards = shards(&lg, devices, &TensorType::new(dtype, &[n]));
    for t in group.all_reduce(&shards, op).unwrap() {
        lg.output(&t).unwrap();
    }
    lg.snapshot()
}

/// `g` after `pipeline` with the default topology, verified after every
/// pass; panics naming the pipeline if it fails.
pub fn lower(g: &Graph, pipeline: &str) -> Graph {
    lower_on(g, pipeline, &Topology::default())
}

/// [`lower`] against `topology` (peer pairs, collective drivers).
pub fn lower_on(g: &Graph, pipeline: &str, topology: &Topology) -> Graph {
    let mut out = g.clone();
    let topology = Arc::new(topology.clone());
    if let Err(e) =
        fuel_collective::run_pipeline(&mut out, pipeline, topology, DebugOptions::verifying())
    {
        panic!("{pipeline} failed: {e}\non:\n{}", text::print(g));
    }
    out
}
