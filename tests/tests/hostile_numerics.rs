//! Numerics (issue 38, class 1): lowered results against the reference
//! interpreter where the fold order matters. Each lowering runs on the
//! devices bit for bit as the interpreter runs the *lowered* graph (the
//! same folds in the same order), and the lowered graph means what the
//! original means under the fold-order rule (`interp::check_lowering`):
//! exact, or within the bound of a fold in another order, or not compared
//! where another order may overflow. A deliberately wrong lowering is
//! caught, and random float data over many binades never trips a correct
//! one.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use fuel_collective::DeviceGroup;
use fuel_graph_ext::interp::{check_lowering, interpret, Agreement, HostTensor};
use fuel_graph_ext::{text, DType, Device, Graph, LazyGraph, Op, ReduceOp, TensorType};
use fuel_runtime::exec;
use fuel_test_support::{devices_or_skip, lower, shards};
use half::f16;
use proptest::prelude::*;
use std::collections::BTreeMap;

const ALGORITHMS: [&str; 5] = ["star", "hierarchical", "ring", "tree", "tree, arity=3"];

fn f16s(v: &[f64]) -> HostTensor {
    let h: Vec<f16> = v.iter().map(|x| f16::from_f64(*x)).collect();
    HostTensor::from_slice(&[h.len()], &h).unwrap()
}

/// Inputs `s0`, `s1`, ... from per-rank columns of `rows` (rank r's shard
/// is `rows[i][r]` for every i).
fn inputs(rows: &[&[f64]], make: fn(&[f64]) -> HostTensor) -> BTreeMap<String, HostTensor> {
    let n = rows[0].len();
    (0..n)
        .map(|r| {
            let col: Vec<f64> = rows.iter().map(|row| row[r]).collect();
            (format!("s{r}"), make(&col))
        })
        .collect()
}

/// One collective over `devs` of `ty` shards (`s0`, `s1`, ...): an
/// all_reduce, or a reduce onto `root`.
fn graph(devs: &[Device], ty: &TensorType, op: ReduceOp, root: Option<usize>) -> Graph {
    let lg = LazyGraph::new("numerics");
    let group = DeviceGroup::new(devs.iter().copied()).unwrap();
    let xs = shards(&lg, devs, ty);
    let outs = match root {
        None => group.all_reduce(&xs, op).unwrap(),
        Some(r) => vec![group.reduce(&xs, op, r).unwrap()],
    };
    for o in &outs {
        lg.output(o).unwrap();
    }
    lg.snapshot()
}

/// The agreements of `lowered` with `original`, summed over results; no
/// element may be wrong.
fn agree(original: &Graph, lowered: &Graph, ins: &BTreeMap<String, HostTensor>) -> Agreement {
    let mut sum = Agreement::default();
    for (k, a) in check_lowering(original, lowered, ins)
        .unwrap()
        .into_iter()
        .enumerate()
    {
        assert_eq!(a.wrong, 0, "result {k}: {a:?}\n{}", text::print(lowered));
        sum.same += a.same;
        sum.within += a.within;
        sum.unchecked += a.unchecked;
    }
    sum
}

/// Runs `lowered` on its devices: every result equals the interpreter's
/// run of `lowered` bit for bit.
fn device_matches_lowered(lowered: &Graph, devs: &[Device], ins: &BTreeMap<String, HostTensor>) {
    let exe = exec::compile(lowered, devs).unwrap();
    let got = exe.run_host(ins).unwrap();
    let want = interpret(lowered, ins).unwrap();
    for (k, (g, w)) in got.iter().zip(&want).enumerate() {
        if let Err(e) = g.check_same(w) {
            panic!("result {k}: the device differs from the lowered graph: {e}");
        }
    }
}

/// Rows where f16 rounds differently by order: 2048 + 1 is 2048 (a tie,
/// to even) but 1 + 1 + 2048 is 2050.
const F16_ROWS: [&[f64]; 4] = [
    &[1.0, 2048.0, 1.0],
    &[2048.0, 1.0, 1.0],
    &[1.0, 1.0, 2048.0],
    &[0.5, -2048.0, 2048.0],
];

#[test]
fn f16_all_reduce_hierarchical_and_tree_over_cpu_vulkan_cpu() {
    let devs = [Device::cpu(0), Device::vulkan(0), Device::cpu(1)];
    let g = graph(
        &devs,
        &TensorType::new(DType::F16, &[4]),
        ReduceOp::Sum,
        None,
    );
    let ins = inputs(&F16_ROWS, f16s);
    let run = devices_or_skip("f16_all_reduce_hierarchical_and_tree", &devs);
    let mut reordered = 0;
    for alg in ALGORITHMS {
        let out = lower(&g, &format!("lower-collectives{{algorithm={alg}}}"));
        let a = agree(&g, &out, &ins);
        assert_eq!(a.unchecked, 0, "{alg}: nothing may overflow here");
        reordered += a.within;
        if run {
            device_matches_lowered(&out, &devs, &ins);
        }
    }
    // The case is real: some algorithm folds out of rank order.
    assert!(reordered > 0, "no algorithm folded in another order");
}

#[test]
fn f16_reduce_over_five_ranks_default_pipeline_and_every_algorithm() {
    let devs: Vec<Device> = (0..5).map(Device::cpu).collect();
    let g = graph(
        &devs,
        &TensorType::new(DType::F16, &[3]),
        ReduceOp::Sum,
        Some(2),
    );
    let rows: [&[f64]; 3] = [
        &[1.0, 2048.0, 1.0, 1.0, 1.0],
        &[1.0, 1.0, 1.0, 1.0, 2048.0],
        &[65504.0, -65504.0, 0.25, 0.25, 0.25],
    ];
    let ins = inputs(&rows, f16s);
    let mut reordered = 0;
    let mut pipes: Vec<String> = ALGORITHMS
        .iter()
        .map(|a| format!("lower-collectives{{algorithm={a}}}"))
        .collect();
    pipes.push(fuel_collective::DEFAULT_PIPELINE.into());
    for p in &pipes {
        let out = lower(&g, p);
        reordered += agree(&g, &out, &ins).within;
        device_matches_lowered(&out, &devs, &ins);
    }
    assert!(reordered > 0, "no pipeline folded in another order");
}

#[test]
fn f32_product_where_an_order_overflows_before_the_zero_is_not_compared() {
    let devs: Vec<Device> = (0..3).map(Device::cpu).collect();
    let g = graph(
        &devs,
        &TensorType::new(DType::F32, &[3]),
        ReduceOp::Product,
        None,
    );
    let f32s = |v: &[f64]| {
        let x: Vec<f32> = v.iter().map(|x| *x as f32).collect();
        HostTensor::from_slice(&[x.len()], &x).unwrap()
    };
    let big = 2f64.powi(127);
    let rows: [&[f64]; 3] = [&[-3.0, -0.0, big], &[-3.0, -0.0, big], &[-3.0, -0.0, big]];
    let ins = inputs(&rows, f32s);
    let out = lower(&g, "lower-collectives{algorithm=ring}");
    let folded = interpret(&out, &ins).unwrap()[0].to_vec::<f32>().unwrap();
    let meant = interpret(&g, &ins).unwrap()[0].to_vec::<f32>().unwrap();
    // The case: one ring chunk overflows to -inf before it meets
    // the zero (NaN), where rank order gives 0.
    assert!(folded.iter().any(|x| x.is_nan()), "{folded:?}");
    assert!(meant.iter().all(|x| *x == 0.0), "{meant:?}");
    let a = agree(&g, &out, &ins);
    assert!(a.unchecked > 0, "{a:?}");
    device_matches_lowered(&out, &devs, &ins);
    // With 2^100 no order overflows: the zero wins in every order, and the
    // ring is compared exactly.
    let small = 2f64.powi(100);
    let rows: [&[f64]; 3] = [
        &[-3.0, -0.0, small],
        &[-3.0, -0.0, small],
        &[-3.0, -0.0, small],
    ];
    let ins = inputs(&rows, f32s);
    let a = agree(&g, &out, &ins);
    assert_eq!((a.same, a.within, a.unchecked), (9, 0, 0), "{a:?}");
}

/// `lowered` with the first two-or-more-operand `add` made to read its
/// first operand twice: a shard counted twice, another left out.
fn count_a_shard_twice(lowered: &Graph) -> Graph {
    let mut bad = lowered.clone();
    let id = bad
        .node_ids()
        .find(|id| {
            let n = bad.node(*id).unwrap();
            matches!(n.op, Op::Elementwise { .. }) && n.operands.len() >= 2
        })
        .expect("an add");
    let first = bad.node(id).unwrap().operands[0];
    bad.set_operand(id, 1, first);
    bad
}

#[test]
fn a_wrong_lowering_is_caught() {
    let devs = [Device::cpu(0), Device::cpu(1), Device::cpu(2)];
    for (dtype, op) in [
        (DType::F16, ReduceOp::Sum),
        (DType::F32, ReduceOp::Mean),
        (DType::I32, ReduceOp::Sum),
    ] {
        let g = graph(&devs, &TensorType::new(dtype, &[8]), op, None);
        let ins = fuel_graph_ext::interp::deterministic_inputs(&g);
        for alg in ALGORITHMS {
            let out = lower(&g, &format!("lower-collectives{{algorithm={alg}}}"));
            agree(&g, &out, &ins);
            let bad = count_a_shard_twice(&out);
            let wrong: usize = check_lowering(&g, &bad, &ins)
                .unwrap()
                .iter()
                .map(|a| a.wrong)
                .sum();
            assert!(
                wrong > 0,
                "{dtype} {op:?} {alg}: not caught\n{}",
                text::print(&bad)
            );
        }
    }
}

#[test]
fn order_bounds_follow_a_sum_through_div_and_cast() {
    let src = "graph @g {\n  %0 = input \"s0\" @cpu:0 : f16[4]\n  %1 = input \"s1\" @vulkan:0 : f16[4]\n  %2 = input \"s2\" @cpu:1 : f16[4]\n  %3:3 = all_reduce.sum %0, %1, %2 : f16[4]\n  %4 = div %3#0 {by=3} @cpu:0 : f16[4]\n  %5 = cast %4 {to=f32} @cpu:0 : f32[4]\n  %6 = mul %3#2, %2 @cpu:1 : f16[4]\n  return %5, %6\n}\n";
    let g = text::parse(src).unwrap();
    let ins = inputs(&F16_ROWS, f16s);
    let out = lower(&g, "lower-collectives{algorithm=hierarchical}");
    let r = check_lowering(&g, &out, &ins).unwrap();
    assert!(r.iter().all(|a| a.wrong == 0), "{r:?}");
    // The quotient is bounded; the product has no rule, so the elements
    // where the orders differ are not compared (never called wrong).
    assert_eq!(r[0].unchecked, 0, "{r:?}");
    assert!(r[0].within > 0, "{r:?}");
    assert!(r[1].unchecked > 0, "{r:?}");
}

fn binade_value() -> impl Strategy<Value = f64> {
    (any::<bool>(), 1.0f64..2.0, -30i32..16).prop_map(|(neg, m, e)| {
        let x = m * 2f64.powi(e);
        if neg {
            -x
        } else {
            x
        }
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, failure_persistence: None, ..ProptestConfig::default() })]

    /// A correct lowering is never called wrong: f16 and bf16 sums and
    /// means of values over 46 binades (some past f16's range, so some
    /// orders overflow), over 3 to 6 ranks, with every algorithm.
    #[test]
    fn a_correct_lowering_is_never_called_wrong(
        n in 3usize..=6,
        dtype in prop::sample::select(vec![DType::F16, DType::BF16, DType::F32]),
        op in prop::sample::select(vec![ReduceOp::Sum, ReduceOp::Mean, ReduceOp::Product]),
        vals in prop::collection::vec(binade_value(), 6 * 8),
    ) {
        let devs: Vec<Device> = (0..n as u32).map(Device::cpu).collect();
        let g = graph(&devs, &TensorType::new(dtype, &[8]), op, None);
        let ins: BTreeMap<String, HostTensor> = (0..n)
            .map(|r| {
                let col: Vec<f64> = vals[r * 8..(r + 1) * 8].to_vec();
                let ty = TensorType::new(dtype, &[8]);
                (format!("s{r}"), HostTensor::new(ty, col))
            })
            .collect();
        for alg in ALGORITHMS {
            let out = lower(&g, &format!("lower-collectives{{algorithm={alg}}}"));
            agree(&g, &out, &ins);
        }
    }
}
