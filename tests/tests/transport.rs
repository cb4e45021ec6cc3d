//! Narrow transport (`lower-collectives{transport=...}`): the stated error
//! bound on pseudo-random data of many magnitudes and near the range
//! limits, f16's overflow to infinity, and the executor running the casts
//! bit for bit as the interpreter does, bf16 and f16, on
//! `[vulkan:0, vulkan:1, cpu:0]` (on lavapipe where present).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use fuel_graph_ext::interp::{interpret, HostTensor};
use fuel_graph_ext::{DType, Device, Graph, ReduceOp};
use fuel_runtime::exec;
use fuel_test_support::{all_reduce_graph, devices_or_skip, lower};
use std::collections::BTreeMap;

/// One f32 all_reduce.sum of `n` elements over `devices`.
fn all_reduce(devices: &[Device], n: usize) -> Graph {
    all_reduce_graph(devices, DType::F32, n, ReduceOp::Sum)
}

/// A repeatable generator (64-bit LCG, high bits).
struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 11
    }
    /// Mantissa in [-1, 1), exponent in [lo, hi].
    fn value(&mut self, lo: i32, hi: i32) -> f32 {
        let m = (self.next() % (1 << 24)) as f32 / (1 << 23) as f32 - 1.0;
        let e = lo + (self.next() % (hi - lo + 1) as u64) as i32;
        m * 2f32.powi(e)
    }
}

fn inputs(shards: &[Vec<f32>]) -> BTreeMap<String, HostTensor> {
    shards
        .iter()
        .enumerate()
        .map(|(r, x)| {
            (
                format!("s{r}"),
                HostTensor::from_slice(&[x.len()], x).unwrap(),
            )
        })
        .collect()
}

/// Lowers with `transport`, interprets, and returns the largest
/// |got - want| / Σ|xᵢ| over every element of every result.
fn worst_ratio(devices: &[Device], shards: &[Vec<f32>], transport: &str) -> f64 {
    let n = shards[0].len();
    let g = all_reduce(devices, n);
    let lowered = lower(
        &g,
        &fuel_collective::pipeline_with(&format!("transport={transport}")),
    );
    let ins = inputs(shards);
    let want = interpret(&g, &ins).unwrap();
    let got = interpret(&lowered, &ins).unwrap();
    let mut worst: f64 = 0.0;
    for (g, w) in got.iter().zip(&want) {
        for (i, (a, b)) in g.to_f64().iter().zip(w.to_f64()).enumerate() {
            let sum_abs: f64 = shards.iter().map(|s| (s[i] as f64).abs()).sum();
            assert!(a.is_finite(), "{transport}: element {i} is {a}");
            if sum_abs > 0.0 {
                worst = worst.max((a - b).abs() / sum_abs);
            } else {
                assert_eq!(*a, b);
            }
        }
    }
    worst
}

/// The bound the docs state, `(2u + u²)`, plus f32's own rounding of a
/// sum of `ranks` terms, in units of Σ|xᵢ|.
fn bound(u: f64, ranks: usize) -> f64 {
    2.0 * u + u * u + ranks as f64 * 2f64.powi(-24)
}

fn random_shards(ranks: usize, n: usize, lo: i32, hi: i32, seed: u64) -> Vec<Vec<f32>> {
    let mut r = Lcg(seed);
    (0..ranks)
        .map(|_| (0..n).map(|_| r.value(lo, hi)).collect())
        .collect()
}

const GROUPS: [&[Device]; 2] = [
    &[Device::vulkan(0), Device::vulkan(1), Device::cpu(0)],
    &[
        Device::cuda(0),
        Device::vulkan(0),
        Device::cpu(0),
        Device::cpu(1),
    ],
];

#[test]
fn bf16_and_f16_stay_within_the_stated_bound_on_random_data() {
    for devices in GROUPS {
        let shards = random_shards(devices.len(), 4096, -12, 12, 7);
        for (t, u) in [("bf16", 2f64.powi(-8)), ("f16", 2f64.powi(-11))] {
            let worst = worst_ratio(devices, &shards, t);
            eprintln!(
                "{t} on {devices:?}: worst |err|/sum|x| = {worst:e} (bound {:e})",
                bound(u, devices.len())
            );
            assert!(worst <= bound(u, devices.len()), "{t}: {worst:e}");
            // The data really travelled narrow: the error is of the
            // narrow type's order, not f32's.
            assert!(worst > u / 16.0, "{t}: {worst:e} is too small to be {t}");
        }
    }
}

#[test]
fn bf16_keeps_f32_range_near_its_limits() {
    let devices = GROUPS[0];
    // Magnitudes up to 2^125 (three of them sum below f32's 2^128) and
    // down to 2^-126 (f32's smallest normal).
    for (lo, hi) in [(100, 125), (-126, -100)] {
        let shards = random_shards(devices.len(), 1024, lo, hi, 11);
        let worst = worst_ratio(devices, &shards, "bf16");
        assert!(worst <= bound(2f64.powi(-8), 3), "[{lo}, {hi}]: {worst:e}");
    }
}

#[test]
fn f16_within_its_range_and_overflow_to_infinity_past_it() {
    let devices = GROUPS[0];
    // Within range: magnitudes below 2^14 with sums below 65504.
    let shards = random_shards(3, 1024, -14, 13, 3);
    assert!(worst_ratio(devices, &shards, "f16") <= bound(2f64.powi(-11), 3));
    // Past it: shards of 30000 fit f16, but their sum (90000) does not.
    // The star sums in f32 at its point, and each result that leaves it
    // as f16 arrives as +inf: what the docs say happens.
    let g = all_reduce(devices, 2);
    let lowered = lower(&g, &fuel_collective::pipeline_with("transport=f16"));
    let ins = inputs(&[vec![30000.0, 1.0], vec![30000.0, 2.0], vec![30000.0, 3.0]]);
    let got = interpret(&lowered, &ins).unwrap();
    let mut inf = 0;
    for r in &got {
        let v = r.to_f64();
        assert_eq!(v[1], 6.0);
        if v[0].is_infinite() {
            assert!(v[0] > 0.0);
            inf += 1;
        } else {
            assert_eq!(v[0], 90000.0, "a finite result is the f32 sum itself");
        }
    }
    // Vulkan ranks receive the sum over a narrow link.
    assert!(inf >= 2, "{inf} of 3 results overflowed");
    // A shard past 65504 is +inf on the wire, so every sum is.
    let ins = inputs(&[vec![70000.0, 1.0], vec![1.0, 2.0], vec![1.0, 3.0]]);
    let vulkan_shard_big = interpret(&lowered, &ins).unwrap();
    assert!(vulkan_shard_big.iter().all(|r| r.to_f64()[0].is_infinite()));
}

#[test]
fn staged_transport_leaves_host_only_groups_exact() {
    let cpus: Vec<Device> = (0..4).map(Device::cpu).collect();
    let shards = random_shards(4, 256, -12, 12, 5);
    assert_eq!(worst_ratio(&cpus, &shards, "bf16-staged"), 0.0);
    assert!(worst_ratio(&cpus, &shards, "bf16") > 0.0);
}

/// `transport=auto` narrows only where the cost model says it pays: never
/// among CPUs (their copies share host buffers, so the casts are all
/// cost), and over a slow link between a GPU and the host, where the
/// bytes dominate. A forced transport that the model thinks loses is
/// applied, with a warning that gives both estimates.
#[test]
fn auto_transport_narrows_only_where_it_pays() {
    let cpus: Vec<Device> = (0..4).map(Device::cpu).collect();
    let g = all_reduce(&cpus, 1 << 16);
    let casts = |g: &Graph| {
        g.node_ids()
            .filter(|id| {
                matches!(
                    g.node(*id).map(|n| &n.op),
                    Some(fuel_graph_ext::Op::Cast { .. })
                )
            })
            .count()
    };
    let auto = lower(&g, &fuel_collective::pipeline_with("transport=auto"));
    let said = fuel_graph_ext::text::print(&auto);
    assert!(said.contains("transport=auto kept f32"), "{said}");
    assert!(said.contains("us narrow, "), "no estimates in: {said}");
    assert_eq!(casts(&auto), 0, "{said}");
    let forced = lower(&g, &fuel_collective::pipeline_with("transport=bf16"));
    let said = fuel_graph_ext::text::print(&forced);
    assert!(
        said.contains("WARNING: transport=bf16 makes this graph slower"),
        "{said}"
    );
    assert!(casts(&forced) > 0, "{said}");

    // One CUDA device behind a slow link (lowering opens no device).
    let slow =
        fuel_graph_ext::Topology::parse("link host-cuda bandwidth=0.5 latency=10\n").unwrap();
    let pair = [Device::cpu(0), Device::cuda(0)];
    let g = all_reduce(&pair, 1 << 20);
    let auto = fuel_test_support::graphs::lower_on(
        &g,
        &fuel_collective::pipeline_with("transport=auto"),
        &slow,
    );
    let said = fuel_graph_ext::text::print(&auto);
    assert!(said.contains("transport=auto is on"), "{said}");
    assert!(casts(&auto) > 0, "{said}");
    let ins = inputs(&random_shards(2, 1 << 20, -4, 4, 9));
    let (want, got) = (
        interpret(&g, &ins).unwrap(),
        interpret(&auto, &ins).unwrap(),
    );
    assert!(
        got.iter().zip(&want).any(|(a, b)| a != b),
        "bf16 rounding left no trace"
    );
}

#[test]
fn narrow_transport_other_algorithms_are_refused() {
    let g = all_reduce(&[Device::cpu(0), Device::cpu(1)], 4);
    let mut h = g.clone();
    let Err(e) = fuel_collective::run_pipeline(
        &mut h,
        &fuel_collective::pipeline_with("algorithm=ring, transport=bf16"),
        Default::default(),
        Default::default(),
    ) else {
        panic!("transport=bf16 with algorithm=ring was accepted");
    };
    assert!(e.to_string().contains("use algorithm=star or auto"), "{e}");
}

#[test]
fn the_executor_runs_narrow_transport_as_the_interpreter_does() {
    let devices = [Device::vulkan(0), Device::vulkan(1), Device::cpu(0)];
    if !devices_or_skip("transport=bf16 on lavapipe", &devices) {
        return;
    }
    // An odd length, so that the last word of a 16-bit buffer holds half
    // an element.
    let n = 4097;
    let shards = random_shards(3, n, -12, 12, 9);
    let g = all_reduce(&devices, n);
    for t in ["bf16", "bf16-staged", "f16", "f16-staged"] {
        let lowered = lower(
            &g,
            &fuel_collective::pipeline_with(&format!("transport={t}")),
        );
        let ins = inputs(&shards);
        let want = interpret(&lowered, &ins).unwrap();
        let exe = exec::compile(&lowered, &devices).unwrap_or_else(|e| panic!("{t}: {e}"));
        let got = exe.run_host(&ins).unwrap();
        for (k, (a, b)) in got.iter().zip(&want).enumerate() {
            if let Err(e) = a.check_same(b) {
                panic!("{t}: result {k}: {e}");
            }
        }
        // The narrow type really ran on a Vulkan device.
        let narrow = if t.starts_with("bf16") { "bf16" } else { "f16" };
        let text = fuel_graph_ext::text::print(&lowered);
        assert!(
            text.lines()
                .any(|l| l.contains("cast") && l.contains("@vulkan") && l.contains(narrow)),
            "{t}: no {narrow} cast on a Vulkan device:\n{text}"
        );
    }
}
