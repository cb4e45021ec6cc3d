//! Pipelined staged hops (`lower-collectives{chunks=...}`): cutting a
//! relayed value into pieces is bit-exact against the whole-value lowering
//! (interpreter, and the executor on lavapipe where present), every kind
//! that relays is cut, and a small value stays whole under `chunks=auto`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use fuel_collective::DeviceGroup;
use fuel_graph_ext::interp::{deterministic_inputs, interpret};
use fuel_graph_ext::{DType, Device, Graph, LazyGraph, Op, ReduceOp, TensorType};
use fuel_runtime::exec;
use fuel_test_support::{devices_or_skip, lower};

/// One all_reduce of `op` over `devices`, f32 of `shape`.
fn all_reduce(devices: &[Device], shape: &[usize], op: ReduceOp) -> Graph {
    let group = DeviceGroup::new(devices.iter().copied()).unwrap();
    let g = LazyGraph::new("chunks");
    let ty = TensorType::new(DType::F32, shape);
    let shards: Vec<_> = devices
        .iter()
        .enumerate()
        .map(|(r, d)| g.input(&format!("s{r}"), *d, ty.clone()))
        .collect();
    for t in group.all_reduce(&shards, op).unwrap() {
        g.output(&t).unwrap();
    }
    g.snapshot()
}

fn count(g: &Graph, f: impl Fn(&Op) -> bool) -> usize {
    g.node_ids()
        .filter(|id| g.node(*id).is_some_and(|n| f(&n.op)))
        .count()
}

const GPUS: [Device; 3] = [Device::vulkan(0), Device::vulkan(1), Device::cpu(0)];

#[test]
fn pieces_give_the_same_bits_as_the_whole_value() {
    for alg in ["star, reduce_at=vulkan:0", "ring", "tree"] {
        for (shape, k) in [(vec![10], 4), (vec![3, 7], 3), (vec![5], 5), (vec![2], 8)] {
            for op in [ReduceOp::Sum, ReduceOp::Mean, ReduceOp::Max] {
                let g = all_reduce(&GPUS, &shape, op);
                let ins = deterministic_inputs(&g);
                let whole = lower(
                    &g,
                    &fuel_collective::pipeline_with(&format!("algorithm={alg}")),
                );
                let cut = lower(
                    &g,
                    &fuel_collective::pipeline_with(&format!("algorithm={alg}, chunks={k}")),
                );
                let slices = |g: &Graph| count(g, |o| matches!(o, Op::Slice { .. }));
                assert!(
                    slices(&cut) > slices(&whole),
                    "{alg} {shape:?} chunks={k}: nothing was cut"
                );
                let want = interpret(&whole, &ins).unwrap();
                let got = interpret(&cut, &ins).unwrap();
                for (i, (a, b)) in got.iter().zip(&want).enumerate() {
                    if let Err(e) = a.check_same(b) {
                        panic!("{alg} {shape:?} chunks={k} {op}: result {i}: {e}");
                    }
                }
            }
        }
    }
}

/// A chain: the second all_reduce relays the first one's results onward,
/// so a relay's source is a value an earlier cut replaced by a `concat`
/// (the fuzzer found the pass cutting the stale id instead, which by then
/// named a piece: a type error after `lower-collectives`).
#[test]
fn a_chain_relays_what_the_earlier_cut_joined() {
    let devices = [
        Device::vulkan(1),
        Device::vulkan(2),
        Device::cuda(2),
        Device::cuda(0),
    ];
    let mut g = all_reduce(&devices, &[65], ReduceOp::Max);
    let first = g.outputs().to_vec();
    let ty = g.value_type(first[0]).cloned().unwrap();
    let second = g.add_node(Op::AllReduce { op: ReduceOp::Max }, &first, ty);
    for r in 0..devices.len() as u32 {
        g.push_output(fuel_graph_ext::graph::ValueId {
            node: second,
            result: r,
        });
    }
    let ins = deterministic_inputs(&g);
    let want = interpret(&g, &ins).unwrap();
    for k in [2, 5] {
        let p = format!("algorithm=star, reduce_at=cuda:0, chunks={k}");
        let cut = lower(&g, &fuel_collective::pipeline_with(&p));
        let concats = count(&cut, |o| matches!(o, Op::Concat { .. }));
        assert!(concats >= 2 * (devices.len() - 1), "{p}: {concats} concats");
        for (i, (a, b)) in interpret(&cut, &ins).unwrap().iter().zip(&want).enumerate() {
            if let Err(e) = a.check_same(b) {
                panic!("{p}: result {i}: {e}");
            }
        }
    }
}

#[test]
fn auto_keeps_small_values_whole_and_host_groups_are_left_alone() {
    let g = all_reduce(&GPUS, &[6], ReduceOp::Sum);
    let p = "algorithm=star, reduce_at=vulkan:0";
    let whole = lower(&g, &fuel_collective::pipeline_with(p));
    let auto = lower(
        &g,
        &fuel_collective::pipeline_with(&format!("{p}, chunks=auto")),
    );
    assert_eq!(whole.node_count(), auto.node_count());
    let cpus: Vec<Device> = (0..4).map(Device::cpu).collect();
    let g = all_reduce(&cpus, &[64], ReduceOp::Sum);
    let whole = lower(&g, &fuel_collective::pipeline_with(""));
    let cut = lower(&g, &fuel_collective::pipeline_with("chunks=8"));
    assert_eq!(whole.node_count(), cut.node_count());
}

#[test]
fn the_executor_runs_pieces_as_the_interpreter_does() {
    if !devices_or_skip("chunks=4 on lavapipe", &GPUS) {
        return;
    }
    let g = all_reduce(&GPUS, &[4099], ReduceOp::Sum);
    let ins = deterministic_inputs(&g);
    let lowered = lower(
        &g,
        &fuel_collective::pipeline_with("algorithm=star, reduce_at=vulkan:0, chunks=4"),
    );
    let want = interpret(&lowered, &ins).unwrap();
    let exe = exec::compile(&lowered, &GPUS).unwrap();
    let got = exe.run_host(&ins).unwrap();
    for (i, (a, b)) in got.iter().zip(&want).enumerate() {
        if let Err(e) = a.check_same(b) {
            panic!("result {i}: {e}");
        }
    }
}
