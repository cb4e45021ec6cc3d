//! Property test of `schedule-collectives` (issue 33): for random
//! data-parallel steps (layers of `extern "matmul"` gradients on random
//! groups of CPUs, CUDA and Vulkan devices, with and without cost hints,
//! all_reduced by every algorithm, then updated), under every policy and
//! memory cap, the pass succeeds, the graph it gives verifies, holds the
//! same ops, computes bit for bit what the unscheduled lowering computes on
//! the interpreter, and comes out the same when scheduled again.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use fuel_collective::DeviceGroup;
use fuel_graph_ext::interp::{deterministic_inputs, interpret};
use fuel_graph_ext::op::{CostHint, ExternOp};
use fuel_graph_ext::{text, DType, Device, Graph, LazyGraph, ReduceOp, TensorType, Topology};
use fuel_test_support::{lower_on, ALGORITHMS, DEVICE_POOL as POOL};
use proptest::prelude::*;

const POLICIES: [&str; 4] = ["auto", "collectives-first", "critical-path", "own"];
const OPS: [ReduceOp; 3] = [ReduceOp::Sum, ReduceOp::Mean, ReduceOp::Max];

#[derive(Clone, Debug)]
struct Case {
    devs: Vec<Device>,
    layers: usize,
    width: usize,
    batch: usize,
    hint: Option<f64>,
    algorithm: &'static str,
    policy: &'static str,
    cap: Option<usize>,
    op: ReduceOp,
}

fn case() -> impl Strategy<Value = Case> {
    (
        prop::sample::subsequence(POOL.to_vec(), 1..=5),
        1..=3usize,
        1..=4usize,
        1..=3usize,
        prop::option::of(1e-7..1e-2f64),
        0..ALGORITHMS.len(),
        0..POLICIES.len(),
        prop::option::of(0..4096usize),
        0..OPS.len(),
    )
        .prop_map(
            |(devs, layers, width, batch, hint, algorithm, policy, cap, op)| Case {
                devs,
                layers,
                width,
                batch,
                hint,
                algorithm: ALGORITHMS[algorithm],
                policy: POLICIES[policy],
                cap,
                op: OPS[op],
            },
        )
}

fn step(c: &Case) -> Graph {
    let group = DeviceGroup::new(c.devs.iter().copied()).unwrap();
    let graph = LazyGraph::new("step");
    let f32s = |shape: &[usize]| TensorType::new(DType::F32, shape);
    for l in 0..c.layers {
        let grads: Vec<_> = c
            .devs
            .iter()
            .enumerate()
            .map(|(r, d)| {
                let x = graph.input(&format!("x{l}.{r}"), *d, f32s(&[c.width, c.batch]));
                let y = graph.input(&format!("y{l}.{r}"), *d, f32s(&[c.batch, c.width]));
                let mut op = ExternOp::new("matmul", *d, f32s(&[c.width, c.width]));
                op.cost = c.hint.map(|h| CostHint::new(h).unwrap());
                x.call_extern(op, &[&y]).unwrap()
            })
            .collect();
        let reduced = group.all_reduce(&grads, c.op).unwrap();
        for (r, (d, g)) in c.devs.iter().zip(&reduced).enumerate() {
            let w = graph.input(&format!("w{l}.{r}"), *d, f32s(&[c.width, c.width]));
            graph.output(&w.add(g).unwrap()).unwrap();
        }
    }
    graph.snapshot()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn scheduling_keeps_every_op_and_the_meaning(c in case()) {
        let topo = Topology::default();
        let g = step(&c);
        let base = format!(
            "simplify-collectives,combine-collectives,lower-collectives{{algorithm={}}},insert-cross-device-copies,split-cross-vendor-copies,cse,dce",
            c.algorithm
        );
        let mut options = vec![format!("policy={}", c.policy)];
        if let Some(cap) = c.cap {
            options.push(format!("max_in_flight={cap}"));
        }
        let scheduled = format!("{base},schedule-collectives{{{}}}", options.join(", "));
        // `lower_on` verifies after every pass and panics on any error.
        let plain = lower_on(&g, &base, &topo);
        let ordered = lower_on(&g, &scheduled, &topo);
        let printed = text::print(&ordered);
        prop_assert!(printed.contains("// schedule-collectives: chose "), "{}", printed);
        prop_assert_eq!(plain.node_count(), ordered.node_count());
        let ops = |g: &Graph| {
            let mut v: Vec<String> = g
                .node_ids()
                .filter_map(|id| g.node(id))
                .map(|n| format!("{:?} {:?}", n.op, n.ty))
                .collect();
            v.sort();
            v
        };
        prop_assert_eq!(ops(&plain), ops(&ordered));
        let inputs = deterministic_inputs(&g);
        let want = interpret(&plain, &inputs).unwrap();
        let got = interpret(&ordered, &inputs).unwrap();
        prop_assert_eq!(got.len(), want.len());
        for (a, b) in got.iter().zip(&want) {
            prop_assert!(a.check_same(b).is_ok(), "{:?}", a.check_same(b));
        }
        prop_assert_eq!(text::print(&lower_on(&g, &scheduled, &topo)), printed);
    }
}
