//! The graphs tests start from: one shard per device, a collective
//! recorded through `DeviceGroup`, the text of graphs several tests run
//! (a pair all-reduce, the kernels every backend runs, the demo's), and a
//! graph lowered by a pipeline, which runs through
//! `fuel_collective::run_pipeline` as every caller's does.

use fuel_collective::DeviceGroup;
use fuel_graph_ext::pass::DebugOptions;
use fuel_graph_ext::{
    text, DType, Device, Graph, LazyGraph, LazyTensor, ReduceOp, TensorType, Topology,
};
use std::sync::Arc;

/// Two devices of each kind: the pool the property tests draw groups from.
pub const DEVICE_POOL: [Device; 6] = [
    Device::cpu(0),
    Device::cpu(1),
    Device::cuda(0),
    Device::cuda(1),
    Device::vulkan(0),
    Device::vulkan(1),
];

/// Every `lower-collectives` algorithm option the property and table
/// tests lower with (`driver` falls back where no driver is declared,
/// `pairwise` for every collective but a reduce_scatter, `split` for
/// every collective but an all_reduce over two GPUs with no direct path).
pub const ALGORITHMS: [&str; 9] = [
    "auto",
    "star",
    "hierarchical",
    "ring",
    "tree",
    "tree, arity=3",
    "driver",
    "pairwise",
    "split",
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

/// A two-device all-reduce as a star lowering writes it, in text: `b`'s
/// shard (input `"b"`) copied to `a`, folded there with `a`'s (`"a"`) by
/// `op`, and the result copied back to `b`; the graph `@ar` returns both
/// results. `ty` is the shards' type, such as `f32[16]`.
pub fn pair_all_reduce(op: &str, ty: &str, a: Device, b: Device) -> String {
    format!(
        "graph @ar {{
  %0 = input \"a\" @{a} : {ty}
  %1 = input \"b\" @{b} : {ty}
  %2 = copy %1 -> {a} : {ty}
  %3 = {op} %0, %2 @{a} : {ty}
  %4 = copy %3 -> {b} : {ty}
  return %3, %4
}}
"
    )
}

/// The kernels every backend runs, in text, for the tests that run them
/// on one backend and compare with the interpreter: on `a`, two slices of
/// an `i32[6,4]` (columns and rows), a concat of three operands and a div,
/// whose result is moved to `b` (`a` itself: a move in place); on `b`, an
/// `f32[300]` divided and folded by max, min, mul and an add of eleven
/// operands. `graph @k` returns one result of each kind.
pub fn kernels(a: Device, b: Device) -> String {
    format!(
        "graph @k {{
  %0 = input \"a\" @{a} : i32[6,4]
  %1 = slice %0 {{axis=1, len=2, start=1}} @{a} : i32[6,2]
  %2 = slice %0 {{axis=0, len=3, start=2}} @{a} : i32[3,4]
  %3 = concat %1, %0, %1 {{axis=1}} @{a} : i32[6,8]
  %4 = div %3 {{by=3}} @{a} : i32[6,8]
  %5 = move %4 -> {b} : i32[6,8]
  %6 = input \"f\" @{b} : f32[300]
  %7 = div %6 {{by=4}} @{b} : f32[300]
  %8 = max %7, %6, %7 @{b} : f32[300]
  %9 = min %6, %7 @{b} : f32[300]
  %10 = mul %6, %6, %7 @{b} : f32[300]
  %11 = add %6, %6, %6, %6, %6, %6, %6, %6, %6, %7, %7 @{b} : f32[300]
  return %2, %5, %8, %9, %10, %11
}}
"
    )
}

/// The devices of `fuel-opt demo` on a machine with lavapipe: cpu:0..3
/// and vulkan:0..1.
pub const DEMO_DEVICES: [Device; 6] = [
    Device::cpu(0),
    Device::cpu(1),
    Device::cpu(2),
    Device::cpu(3),
    Device::vulkan(0),
    Device::vulkan(1),
];

/// The demo's graph (`fuel-opt demo` on [`DEMO_DEVICES`]): an
/// all_reduce.sum, and a reduce_scatter.sum feeding an all_gather, of
/// `f32[elements]` shards named `shard0`, `shard1`, ...
pub fn demo_graph(elements: usize) -> Graph {
    let group = DeviceGroup::new(DEMO_DEVICES).unwrap();
    let lazy = LazyGraph::new("demo");
    let ty = TensorType::new(DType::F32, &[elements]);
    let shards: Vec<_> = DEMO_DEVICES
        .iter()
        .enumerate()
        .map(|(i, d)| lazy.input(&format!("shard{i}"), *d, ty.clone()))
        .collect();
    for t in group.all_reduce(&shards, ReduceOp::Sum).unwrap() {
        lazy.output(&t).unwrap();
    }
    let parts = group.reduce_scatter(&shards, ReduceOp::Sum, 0).unwrap();
    for t in group.all_gather(&parts, 0).unwrap() {
        lazy.output(&t).unwrap();
    }
    lazy.snapshot()
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
