//! Criterion benches for the compiler side: `lower-collectives` (auto) plus
//! the verifier on chains of all_reduce ops over 8 mixed devices, the same
//! for each fixed algorithm as the group grows from 2 to 16 devices
//! (`lower-by-group-size`: time per emitted node should not grow with the
//! group), one all_reduce over 1000 devices (`lower-large-group`), and the
//! text round trip (print + parse) of the lowered graph.
//! Throughput is in emitted nodes, so criterion's "elem/s" reads as nodes
//! per second.
//!
//! Run: `cargo bench -p fuel-collective --bench lowering`.
#![allow(clippy::expect_used)]

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use fuel_graph_ext::verify::{verify, Level};
use fuel_graph_ext::{text, Device, Graph, Topology};
use std::hint::black_box;
use std::time::Duration;

#[path = "common/chain.rs"]
mod common;
use common::{chain_over, lower_with, mixed};

fn devices() -> Vec<Device> {
    mixed(8)
}

/// `count` all_reduce ops over the main group, each reducing the previous
/// one's results.
fn chain(count: usize) -> Graph {
    chain_over(&devices(), count)
}

fn lower(g: &mut Graph) {
    lower_with(g, "lower-collectives")
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

/// Each fixed algorithm on a chain of all_reduces over 2, 4, 8 and 16
/// devices. The chain is short (the ring emits O(n^2) nodes per collective
/// on n devices); throughput in emitted nodes gives the time per node.
fn bench_group_size(c: &mut Criterion) {
    let mut group = c.benchmark_group("lower-by-group-size");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(2))
        .warm_up_time(Duration::from_millis(500));
    let count = 200;
    for alg in ["star", "hierarchical", "ring", "tree"] {
        let pipeline = format!("lower-collectives{{algorithm={alg}}}");
        for n in [2usize, 4, 8, 16] {
            let input = chain_over(&mixed(n), count);
            let mut probe = input.clone();
            lower_with(&mut probe, &pipeline);
            let emitted = probe.node_count() - input.node_count() + count;
            group.throughput(Throughput::Elements(emitted as u64));
            group.bench_function(format!("{alg}/{n}-devices"), |b| {
                b.iter_batched(
                    || input.clone(),
                    |mut g| {
                        lower_with(&mut g, &pipeline);
                        black_box(g)
                    },
                    BatchSize::LargeInput,
                )
            });
        }
    }
    group.finish();
}

/// One all_reduce over 1000 devices with `auto`, which estimates 1001 star
/// points, hierarchical, the ring (about 4 million steps if its graph were
/// built) and the tree, then lowers the cheapest; and the same with
/// `algorithm=star`, which estimates only star's points. The closed forms
/// (`lower/closed_form.rs`) keep this well under a second.
fn bench_large_group(c: &mut Criterion) {
    let mut group = c.benchmark_group("lower-large-group");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(10))
        .warm_up_time(Duration::from_secs(1));
    let cpus: Vec<Device> = (0..1000).map(Device::cpu).collect();
    for (name, devs) in [("1000-cpus", cpus), ("1000-mixed", mixed(1000))] {
        let input = chain_over(&devs, 1);
        for (alg, pipeline) in [
            ("auto", "lower-collectives"),
            ("star", "lower-collectives{algorithm=star}"),
        ] {
            group.bench_function(format!("{alg}/{name}"), |b| {
                b.iter_batched(
                    || input.clone(),
                    |mut g| {
                        lower_with(&mut g, pipeline);
                        black_box(g)
                    },
                    BatchSize::LargeInput,
                )
            });
        }
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

criterion_group!(
    benches,
    bench_lowering,
    bench_group_size,
    bench_large_group,
    bench_text
);
criterion_main!(benches);
