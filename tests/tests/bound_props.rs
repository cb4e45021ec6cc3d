//! Property test of the lower bound (`fuel_collective::cost::bound`,
//! issue 35): on random topologies (link curves, latencies, deferred
//! rates, fold throughputs, runners, peers, drivers, a staging CPU, host
//! memory and cores), random groups and options (the tree's arity, values
//! relayed in pieces) and f16 means folded in f32, every candidate of every collective (`auto`
//! estimates every algorithm's) is estimated at or
//! above the bound. An estimate below it is a bug in the cost model or in
//! the bound; the failure names the topology, the collective, the
//! candidate and both figures.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use fuel_collective::lower::{decisions, Candidate};
use fuel_collective::DeviceGroup;
use fuel_graph_ext::pass::DebugOptions;
use fuel_graph_ext::{DType, Device, LazyGraph, ReduceOp, TensorType, Topology};
use fuel_test_support::shards;
use proptest::prelude::*;
use std::sync::Arc;

const POOL: [Device; 8] = [
    Device::cpu(0),
    Device::cpu(1),
    Device::cuda(0),
    Device::cuda(1),
    Device::cuda(2),
    Device::vulkan(0),
    Device::vulkan(1),
    Device::cpu(2),
];

/// A random figure between `lo` and `hi`, spread over the decades.
fn figure(lo: f64, hi: f64) -> impl Strategy<Value = f64> {
    (lo.ln()..hi.ln()).prop_map(|x| (x.exp() * 1000.0).round() / 1000.0)
}

/// `25`, or a curve of up to three sizes: `64K:30,1M:15,4M:11`.
fn curve() -> impl Strategy<Value = String> {
    prop::collection::vec(figure(0.1, 500.0), 1..=3).prop_map(|v| {
        if v.len() == 1 {
            return v[0].to_string();
        }
        let sizes = ["64K", "1M", "4M"];
        let parts: Vec<String> = v
            .iter()
            .zip(sizes)
            .map(|(g, s)| format!("{s}:{g}"))
            .collect();
        parts.join(",")
    })
}

/// A random topology file.
fn topology() -> impl Strategy<Value = String> {
    let link = (
        curve(),
        figure(0.1, 50.0),
        prop::option::of(figure(0.1, 500.0)),
    );
    (
        prop::collection::vec(link, 5),
        prop::collection::vec(
            (curve(), figure(0.1, 50.0), prop::option::of(0.0..=1.0f64)),
            3,
        ),
        (figure(0.05, 20.0), figure(0.05, 20.0), figure(0.05, 5.0)),
        (any::<bool>(), any::<bool>(), any::<bool>(), 0..3usize),
        (
            any::<bool>(),
            any::<bool>(),
            prop::option::of(1..8u32),
            prop::option::of(0..9u32),
        ),
    )
        .prop_map(
            |(links, folds, runner, (p01, p12, staging1, drivers), (hm, hk, cores, align))| {
                let mut s = String::new();
                let classes = [
                    "same-device",
                    "host-host",
                    "host-cuda",
                    "host-vulkan",
                    "cuda-peer",
                ];
                for (class, (bw, lat, deferred)) in classes.iter().zip(links) {
                    s += &format!("link {class} bandwidth={bw} latency={lat}");
                    if let Some(d) = deferred {
                        s += &format!(" deferred={d}");
                    }
                    s.push('\n');
                }
                for (kind, (gbps, fixed, wide)) in ["cpu", "cuda", "vulkan"].iter().zip(folds) {
                    s += &format!("reduce {kind} {gbps} fixed={fixed}");
                    if let Some(w) = wide {
                        s += &format!(" wide={w}");
                    }
                    s.push('\n');
                }
                s += &format!(
                    "runner threaded step={} dispatch={}\nrunner inline step={}\n",
                    runner.0, runner.2, runner.1
                );
                if p01 {
                    s += "peer cuda:0 cuda:1\n";
                }
                if p12 {
                    s += "peer cuda:1 cuda:2\n";
                }
                if staging1 {
                    s += "staging cpu:1\n";
                }
                if drivers >= 1 {
                    s += "driver cpu\n";
                }
                if drivers >= 2 {
                    s += "driver cuda\n";
                }
                if hk {
                    s += "host-kernels vulkan\n";
                } else if hm {
                    s += "host-memory vulkan\n";
                }
                if let Some(n) = cores {
                    s += &format!("cores {n} handoff=1\n");
                }
                if let Some(k) = align {
                    s += &format!("view-align vulkan {}\n", 1u32 << k);
                }
                s
            },
        )
}

#[derive(Clone, Debug)]
struct Case {
    topology: String,
    devs: Vec<Device>,
    kind: usize,
    elements: usize,
    root: usize,
    /// The pass's options: the tree's arity, relayed values in pieces.
    options: &'static str,
    /// An f16 mean, which the pass folds in an f32 accumulator.
    narrow_mean: bool,
}

fn case() -> impl Strategy<Value = Case> {
    (
        topology(),
        prop::collection::vec(0..POOL.len(), 2..=6),
        0..7usize,
        prop::sample::select(vec![16usize, 4096, 65536, 1 << 20, 4 << 20]),
        any::<prop::sample::Index>(),
        prop::sample::select(vec!["", "{arity=3}", "{chunks=4}", "{chunks=auto}"]),
        any::<bool>(),
    )
        .prop_map(
            |(topology, devs, kind, elements, root, options, narrow_mean)| {
                let devs: Vec<Device> = devs.into_iter().map(|i| POOL[i]).collect();
                Case {
                    root: root.index(devs.len()),
                    topology,
                    devs,
                    kind,
                    elements,
                    options,
                    narrow_mean,
                }
            },
        )
}

/// The case's collective, recorded through a `DeviceGroup`.
fn record(c: &Case) -> fuel_graph_ext::Graph {
    let n = c.devs.len();
    let lg = LazyGraph::new("bound");
    let group = DeviceGroup::new(c.devs.iter().copied()).unwrap();
    let even = c.elements.div_ceil(n) * n;
    let (dtype, op) = if c.narrow_mean {
        (DType::F16, ReduceOp::Mean)
    } else {
        (DType::F32, ReduceOp::Sum)
    };
    let ty = TensorType::new(dtype, &[even]);
    let s = shards(&lg, &c.devs, &ty);
    let outs = match c.kind {
        0 => group.all_reduce(&s, op).unwrap(),
        1 => vec![group.reduce(&s, op, c.root).unwrap()],
        2 => group.broadcast(&s[c.root], c.root).unwrap(),
        3 => group.all_gather(&s, 0).unwrap(),
        4 => group.reduce_scatter(&s, op, 0).unwrap(),
        5 => {
            // Uneven: rank 0 gets the most.
            let mut split = vec![even / (2 * n); n];
            split[0] = even - split[1..].iter().sum::<usize>();
            group.reduce_scatter_split(&s, op, 0, &split).unwrap()
        }
        _ => group.all_to_all(&s, 0, None).unwrap(),
    };
    for t in outs {
        lg.output(&t).unwrap();
    }
    lg.snapshot()
}

/// Cases per run: 160, or `BOUND_PROPS_CASES` (a longer local run, e.g.
/// 20000, after a change to the bound or the model).
fn cases() -> u32 {
    std::env::var("BOUND_PROPS_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(160)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn no_candidate_is_estimated_below_its_bound(c in case()) {
        let topo = Topology::parse(&c.topology).unwrap();
        let mut g = record(&c);
        let pm = fuel_collective::run_pipeline(
            &mut g,
            &format!("lower-collectives{}", c.options),
            Arc::new(topo),
            DebugOptions::default(),
        )
        .unwrap();
        for d in decisions(&pm) {
            let Some(bound) = d.candidates.bound() else { continue };
            let bound = bound.as_ref().unwrap();
            for cand in d.candidates.iter() {
                if let Candidate::Estimated { lowering, estimate } = cand {
                    let est = estimate.total_us();
                    prop_assert!(
                        est >= bound.us * (1.0 - 1e-9),
                        "{lowering} is estimated at {est:.3}us, below the bound {bound}\n\
                         collective: {d}\ntopology:\n{}",
                        c.topology
                    );
                }
            }
        }
    }
}
