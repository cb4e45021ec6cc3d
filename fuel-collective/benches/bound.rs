//! Criterion bench of the lower bound (`fuel_collective::cost::bound`):
//! an all-reduce, an all-gather and an all-to-all over 16 devices (every
//! one of the 2^16 splits tried: the target is at most 5 ms), and an
//! all-reduce over 1000 devices (the few splits a large group gets).
//!
//! Run: `cargo bench -p fuel-collective --bench bound`.
#![allow(clippy::expect_used)]

use criterion::{criterion_group, criterion_main, Criterion};
use fuel_collective::cost::bound::{bound, Collective};
use fuel_graph_ext::{Device, Topology};
use std::hint::black_box;
use std::time::Duration;

/// `n` devices: CUDA, Vulkan and CPU in turn.
fn mixed(n: usize) -> Vec<Device> {
    (0..n)
        .map(|i| match i % 3 {
            0 => Device::cuda((i / 3) as u32),
            1 => Device::vulkan((i / 3) as u32),
            _ => Device::cpu((i / 3) as u32),
        })
        .collect()
}

fn bench_bound(c: &mut Criterion) {
    let topo = Topology::default().with_peer(0, 1);
    let m = 4 << 20;
    let mut group = c.benchmark_group("bound");
    group
        .sample_size(20)
        .measurement_time(Duration::from_secs(5));
    let g16 = mixed(16);
    let cases = [
        ("all_reduce/16", Collective::AllReduce { bytes: m }),
        (
            "all_gather/16",
            Collective::AllGather {
                shards: vec![m; 16],
            },
        ),
        (
            "all_to_all/16",
            Collective::AllToAll {
                sends: vec![m / 16; 256],
            },
        ),
    ];
    for (name, collective) in cases {
        group.bench_function(name, |b| {
            b.iter(|| bound(black_box(&collective), &g16, &topo).expect("bound"))
        });
    }
    let g1000 = mixed(1000);
    let all_reduce = Collective::AllReduce { bytes: m };
    group.bench_function("all_reduce/1000", |b| {
        b.iter(|| bound(black_box(&all_reduce), &g1000, &topo).expect("bound"))
    });
    group.finish();
}

criterion_group!(benches, bench_bound);
criterion_main!(benches);
