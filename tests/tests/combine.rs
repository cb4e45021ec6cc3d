//! `combine-collectives` end to end: many small all_reduces recorded with
//! `DeviceGroup`, merged and lowered by the default pipeline, run by the
//! executor on host arenas and on lavapipe Vulkan, each result bit for bit
//! the interpreter's for the unmerged graph; and the memory a bucket costs.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use fuel_collective::DeviceGroup;
use fuel_graph_ext::interp::{deterministic_inputs, interpret};
use fuel_graph_ext::{DType, Device, Graph, LazyGraph, Op, ReduceOp, TensorType, Topology};
use fuel_runtime::exec::{self, Tensor};
use fuel_test_support::{assert_no_leaks, devices_or_skip, lower};

/// `sizes.len()` independent all_reduces of f32[size] over `devices`.
fn gradients(devices: &[Device], sizes: &[usize], op: ReduceOp) -> Graph {
    let group = DeviceGroup::new(devices.iter().copied()).unwrap();
    let g = LazyGraph::new("grads");
    for (k, &n) in sizes.iter().enumerate() {
        let ty = TensorType::new(DType::F32, &[n]);
        let shards: Vec<_> = devices
            .iter()
            .enumerate()
            .map(|(r, d)| g.input(&format!("g{k}_{r}"), *d, ty.clone()))
            .collect();
        for t in group.all_reduce(&shards, op).unwrap() {
            g.output(&t).unwrap();
        }
    }
    g.snapshot()
}

fn collectives(g: &Graph) -> usize {
    g.node_ids()
        .filter(|id| g.node(*id).is_some_and(|n| n.op.is_collective()))
        .count()
}

/// Merges with `combine`, checks how many all_reduces are left, lowers the
/// rest of the default pipeline, runs, and compares bit for bit.
fn merge_run_check(devices: &[Device], sizes: &[usize], combine: &str, left: usize) {
    let original = gradients(devices, sizes, ReduceOp::Sum);
    let merged = lower(&original, combine);
    assert_eq!(collectives(&merged), left, "{combine} on {devices:?}");
    let rest = fuel_collective::DEFAULT_PIPELINE
        .split_once(',')
        .map(|(_, r)| r)
        .unwrap();
    let lowered = lower(&merged, rest);
    let exe = exec::compile(&lowered, devices).unwrap();
    let inputs = deterministic_inputs(&original);
    let want = interpret(&original, &inputs).unwrap();
    let got = exe.run_host(&inputs).unwrap();
    assert_eq!(got.len(), want.len());
    for (k, (g, w)) in got.iter().zip(&want).enumerate() {
        if let Err(e) = g.check_same(w) {
            panic!("{combine} on {devices:?}: result {k} differs: {e}");
        }
    }
    assert_no_leaks(&exe);
}

const SIZES: [usize; 12] = [1, 16, 256, 4096, 3, 64, 1024, 7, 2, 32, 512, 8192];

#[test]
fn twelve_all_reduces_on_four_cpus_merge_and_keep_their_values() {
    let cpus: Vec<Device> = (0..4).map(Device::cpu).collect();
    // Everything in one bucket, then in buckets of at most 4 KiB per rank
    // (4096 and 8192 floats stay alone), then the cost model's call.
    merge_run_check(&cpus, &SIZES, "combine-collectives{threshold=1M}", 1);
    let run = |t: &str| {
        let g = gradients(&cpus, &SIZES, ReduceOp::Sum);
        collectives(&lower(&g, t))
    };
    let four_k = run("combine-collectives{threshold=4K}");
    // 10 fit in 4 KiB; they take at least two buckets (3.4 KiB + ...).
    assert!((4..SIZES.len()).contains(&four_k), "{four_k}");
    merge_run_check(&cpus, &SIZES, "combine-collectives{threshold=4K}", four_k);
    let auto = run("combine-collectives");
    merge_run_check(&cpus, &SIZES, "combine-collectives", auto);
}

#[test]
fn twelve_all_reduces_on_two_vulkan_devices_and_a_cpu() {
    let devices = [Device::vulkan(0), Device::vulkan(1), Device::cpu(0)];
    if !devices_or_skip("combine on [vulkan:0, vulkan:1, cpu:0]", &devices) {
        return;
    }
    merge_run_check(&devices, &SIZES, "combine-collectives{threshold=1M}", 1);
}

/// A bucket costs each rank its joined shards and its result at once: the
/// extra memory per device beyond its own inputs and the outputs it keeps
/// stays within twice the bucket's bytes per rank.
#[test]
fn a_bucket_needs_at_most_twice_its_bytes_per_rank() {
    let cpus: Vec<Device> = (0..4).map(Device::cpu).collect();
    let sizes = [16384usize; 8];
    let original = gradients(&cpus, &sizes, ReduceOp::Sum);
    let lowered = lower(
        &original,
        &fuel_collective::DEFAULT_PIPELINE.replacen(
            "combine-collectives",
            "combine-collectives{threshold=1M}",
            1,
        ),
    );
    assert_eq!(
        lowered
            .node_ids()
            .filter(|id| lowered
                .node(*id)
                .is_some_and(|n| matches!(n.op, Op::Concat { .. })))
            .count(),
        4,
        "one concat per rank: one bucket"
    );
    let exe = exec::compile_with_options(
        &lowered,
        &cpus,
        &Topology::default(),
        exec::Options::default(),
    )
    .unwrap();
    let host = deterministic_inputs(&original);
    let inputs = host
        .iter()
        .map(|(k, v)| (k.clone(), Tensor::from_host(v)))
        .collect();
    let mut outs = Vec::new();
    exe.run_into(&inputs, &mut outs).unwrap();
    let bucket = sizes.iter().sum::<usize>() * 4;
    for d in &cpus {
        let peak = exe.memory(*d).unwrap().peak;
        // Its own shards, and the results it returns, are not extra.
        let extra = peak.saturating_sub(2 * bucket);
        eprintln!("{d}: peak {peak} B, extra {extra} B, bucket {bucket} B per rank");
        assert!(
            extra <= 2 * bucket,
            "{d}: {extra} B extra for a bucket of {bucket} B per rank"
        );
    }
}
