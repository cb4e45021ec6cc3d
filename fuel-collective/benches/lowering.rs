//! Criterion benches for the compiler side: `lower-collectives` (auto) plus
//! the verifier on chains of all_reduce ops over 8 mixed devices, and the
//! text round trip (print + parse) of the lowered graph. Throughput is in
//! emitted nodes, so criterion's "elem/s" reads as nodes per second.
//!
//! Run: `cargo bench -p fuel-collective --bench lowering`.
#![allow(clippy::expect_used)]

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use fuel_collective::DeviceGroup;
use fuel_graph_ext::pass::{PassContext, PassManager};
use fuel_graph_ext::verify::{verify, Level};
use fuel_graph_ext::{text, DType, Device, Graph, LazyGraph, ReduceOp, TensorType, Topology};
use std::hint::black_box;
use std::time::Duration;

fn devices() -> Vec<Device> {
    let mut d: Vec<Device> = (0..4).map(Device::cuda).collect();
    d.extend([
        Device::vulkan(0),
        Device::vulkan(1),
        Device::cpu(0),
        Device::cpu(1),
    ]);
    d
}

/// `count` all_reduce ops, each reducing the previous one's results.
fn chain(count: usize) -> Graph {
    let devs = devices();
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

fn lower(g: &mut Graph) {
    let mut pm = PassManager::new(
        &fuel_collective::registry(),
        "lower-collectives",
        PassContext::default(),
    )
    .expect("pipeline");
    pm.verify_each = false;
    pm.dump_dir = None;
    pm.print_after = None;
    pm.run(g).expect("lowering");
}

fn bench_lowering(c: &mut Criterion) {
    let mut group = c.benchmark_group("lower-collectives+verify");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(20))
        .warm_up_time(Duration::from_secs(2));
    for count in [10_000usize, 20_000] {
        let input = chain(count);
        let mut probe = input.clone();
        lower(&mut probe);
        let emitted = probe.node_count() - input.node_count() + count;
        eprintln!(
            "{count} all_reduce ops over 8 devices: {emitted} nodes emitted, {} after",
            probe.node_count()
        );
        group.throughput(Throughput::Elements(emitted as u64));
        group.bench_function(format!("{count}-all-reduces"), |b| {
            b.iter_batched(
                || input.clone(),
                |mut g| {
                    lower(&mut g);
                    verify(&g, Level::Placement, &Topology::default()).expect("verifies");
                    black_box(g)
                },
                BatchSize::LargeInput,
            )
        });
    }
    group.finish();
}

fn bench_text(c: &mut Criterion) {
    let mut g = chain(10_000);
    lower(&mut g);
    let nodes = g.node_count();
    let printed = text::print(&g);
    let mut group = c.benchmark_group("text-round-trip");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(10));
    group.throughput(Throughput::Elements(nodes as u64));
    group.bench_function("print", |b| b.iter(|| black_box(text::print(&g))));
    group.bench_function("parse", |b| {
        b.iter(|| black_box(text::parse(&printed).expect("parses")))
    });
    group.bench_function("print+parse", |b| {
        b.iter(|| black_box(text::parse(&text::print(&g)).expect("parses")))
    });
    group.finish();
}

criterion_group!(benches, bench_lowering, bench_text);
criterion_main!(benches);
