//! Profiling aid for `lower-collectives`: builds the criterion bench's chain
//! of `N` all_reduces over 8 mixed devices, lowers it (pipeline with its
//! input and output verification) and verifies again, printing the time of
//! each phase. `perf record -g` or callgrind on this binary profiles one
//! size at a time.
//!
//! Run: `cargo run --release -p fuel-collective --example lower_chain -- 10000,20000 [reps]`.
#![allow(clippy::expect_used)]

use fuel_graph_ext::verify::{verify, Level};
use fuel_graph_ext::{Graph, Topology};
use std::time::Instant;

#[path = "../benches/common/chain.rs"]
mod common;

fn chain(count: usize, n: usize) -> Graph {
    common::chain_over(&common::mixed(n), count)
}

/// The chain of `count` all_reduces over `n` devices, timed: recording is
/// linear in the chain (each result's device is known when it is recorded).
fn timed_chain(count: usize, n: usize) -> Graph {
    let t = Instant::now();
    let g = chain(count, n);
    println!(
        "{count}: recorded through DeviceGroup in {:.1} ms",
        t.elapsed().as_secs_f64() * 1e3
    );
    g
}

/// Milliseconds for one lowering (pipeline + verify, as in the bench).
fn once(input: &Graph, pipeline: &str) -> (f64, f64) {
    let mut g = input.clone();
    let t0 = Instant::now();
    common::lower_with(&mut g, pipeline);
    let t1 = Instant::now();
    verify(&g, Level::Placement, &Topology::default()).expect("verifies");
    let t2 = Instant::now();
    let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
    let out = (ms(t1 - t0), ms(t2 - t0));
    drop(g);
    out
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

/// `lower_chain COUNT[,COUNT..] [REPS] [DEVICES] [ALGORITHM]`: lowers each
/// size REPS times, interleaved (so load from other processes hits every
/// size alike), and prints the median per size and each size's ratio to the
/// first. DEVICES (default 8) and ALGORITHM (default auto) pick the group
/// and the `algorithm=` option.
fn main() {
    let mut args = std::env::args().skip(1);
    let counts: Vec<usize> = args
        .next()
        .unwrap_or_else(|| "10000,20000".into())
        .split(',')
        .filter_map(|c| c.parse().ok())
        .collect();
    let reps: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(5);
    let n: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(8);
    let alg = args.next().unwrap_or_else(|| "auto".into());
    let pipeline = format!("lower-collectives{{algorithm={alg}}}");
    let inputs: Vec<Graph> = counts.iter().map(|c| timed_chain(*c, n)).collect();
    let mut pipe = vec![Vec::new(); counts.len()];
    let mut total = vec![Vec::new(); counts.len()];
    for _ in 0..reps {
        for (i, input) in inputs.iter().enumerate() {
            let (p, t) = once(input, &pipeline);
            pipe[i].push(p);
            total[i].push(t);
        }
    }
    let mut base = None;
    for (i, c) in counts.iter().enumerate() {
        let emitted = {
            let mut g = inputs[i].clone();
            fuel_collective::run_pipeline(
                &mut g,
                &pipeline,
                Default::default(),
                Default::default(),
            )
            .expect("lowering");
            g.node_count() + c - inputs[i].node_count()
        };
        let p = median(&mut pipe[i]);
        let t = median(&mut total[i]);
        let b = *base.get_or_insert(t);
        println!(
            "{c}: median pipeline {p:.1} ms, pipeline+verify {t:.1} ms ({:.3} us/collective, {:.3} us/node of {emitted}), x{:.2} of the first",
            t * 1e3 / *c as f64,
            t * 1e3 / emitted as f64,
            t / b
        );
    }
}
