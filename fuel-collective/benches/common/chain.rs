//! The graphs the lowering benches and the `lower_chain` profiling example
//! lower: chains of all_reduce ops over a mixed group. Included with
//! `#[path]` by both, so they measure the same thing.

use fuel_collective::DeviceGroup;
use fuel_graph_ext::pass::DebugOptions;
use fuel_graph_ext::{DType, Device, Graph, LazyGraph, ReduceOp, TensorType};

/// `n` devices (2 or more): half CUDA, a quarter Vulkan (none for 2), the
/// rest CPUs; 8 gives the main bench's group.
pub fn mixed(n: usize) -> Vec<Device> {
    let cuda = n / 2;
    let vulkan = n / 4;
    let cpu = n - cuda - vulkan;
    let mut d: Vec<Device> = (0..cuda as u32).map(Device::cuda).collect();
    d.extend((0..vulkan as u32).map(Device::vulkan));
    d.extend((0..cpu as u32).map(Device::cpu));
    d
}

/// `count` chained all_reduce ops over `devs`, each reducing the previous
/// one's results.
pub fn chain_over(devs: &[Device], count: usize) -> Graph {
    let group = DeviceGroup::new(devs.iter().copied()).expect("group");
    let g = LazyGraph::new("chain");
    let ty = TensorType::new(DType::F32, &[1024]);
    let mut shards: Vec<_> = devs
        .iter()
        .enumerate()
        .map(|(i, d)| g.input(&format!("s{i}"), *d, ty.clone()))
        .collect();
    for _ in 0..count {
        shards = group
            .all_reduce(&shards, ReduceOp::Sum)
            .expect("all_reduce");
    }
    for t in &shards {
        g.output(t).expect("output");
    }
    g.snapshot()
}

/// Runs `pipeline` on `g` as the benches time it: no verifier between
/// passes, no dumps.
pub fn lower_with(g: &mut Graph, pipeline: &str) {
    let debug = DebugOptions {
        verify_each: false,
        ..DebugOptions::default()
    };
    fuel_collective::run_pipeline(g, pipeline, Default::default(), debug).expect("lowering");
}
