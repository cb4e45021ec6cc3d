//! The gradients of `max`, `min` and `prod` collectives
//! (`fuel_collective::grad`), recorded, lowered by the default pipeline and
//! run: on CPU arenas, and with one rank on a Vulkan device (lavapipe
//! here), so the backward's `eq` masks, its multiplies and the product's
//! chains of copies run on both backends. Every result equals the
//! interpreter's run of the lowered graph bit for bit, every allocator is
//! back to zero, and over two ranks (where any fold order gives the same
//! bits) the lowered graph also means what the recorded one means. Without
//! Vulkan the Vulkan half prints `SKIP: <reason>`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use fuel_collective::grad::transpose;
use fuel_graph_ext::graph::ValueId;
use fuel_graph_ext::interp::{deterministic_inputs, interpret};
use fuel_graph_ext::{DType, Device, ElementwiseOp, Graph, Op, ReduceOp, TensorType};
use fuel_test_support::{assert_close, devices_or_skip, lower, runs_exactly};

/// `op` over one `f32[8,4]` shard per device, and its backward for one
/// cotangent input per result; the results and the operands' cotangents
/// are the graph's outputs.
fn graph(fwd: Op, devices: &[Device]) -> Graph {
    let ty = TensorType::new(DType::F32, &[8, 4]);
    let mut g = Graph::new("grad");
    let xs: Vec<ValueId> = devices
        .iter()
        .enumerate()
        .map(|(i, d)| {
            let x = Op::Input {
                name: format!("x{i}"),
                device: *d,
            };
            g.add_value(x, &[], ty.clone())
        })
        .collect();
    let n = xs.len();
    let refs = vec![&ty; n];
    let out = fuel_graph_ext::op::infer_type(&fwd, &refs).unwrap();
    let y = g.add_node(fwd.clone(), &xs, out);
    if let Some(each) = fuel_graph_ext::op::result_types(&fwd, &refs).unwrap() {
        g.set_result_types(y, each);
    }
    let ys: Vec<ValueId> = (0..g.node(y).unwrap().num_results() as u32)
        .map(|result| ValueId { node: y, result })
        .collect();
    let cts: Vec<Option<ValueId>> = ys
        .iter()
        .enumerate()
        .map(|(k, v)| {
            let w = Op::Input {
                name: format!("w{k}"),
                device: g.value_device(*v).unwrap(),
            };
            let t = g.value_type(*v).unwrap().clone();
            Some(g.add_value(w, &[], t))
        })
        .collect();
    let dx = transpose(&mut g, y, &cts).unwrap();
    let mut outs = ys;
    outs.extend(dx.into_iter().map(|v| v.expect("a cotangent")));
    g.set_outputs(outs);
    g
}

fn forwards(n: usize) -> Vec<Op> {
    let mut ops = Vec::new();
    for op in [ReduceOp::Max, ReduceOp::Min, ReduceOp::Product] {
        ops.push(Op::AllReduce { op });
        ops.push(Op::Reduce { op, root: n - 1 });
        ops.push(Op::ReduceScatter {
            op,
            axis: 0,
            split: None,
        });
    }
    ops
}

/// Lowers and runs every forward's gradient on `devices`.
fn run_all(devices: &[Device]) {
    for fwd in forwards(devices.len()) {
        let what = format!("{} over {devices:?}", fwd.mnemonic());
        let g = graph(fwd.clone(), devices);
        let lowered = lower(&g, fuel_collective::DEFAULT_PIPELINE);
        // Every rank of a max or min masks on its own device.
        let extreme = !fwd.mnemonic().ends_with(".prod");
        for d in devices.iter().filter(|_| extreme) {
            let masks = lowered.node_ids().filter(|id| {
                let op = &lowered.node(*id).unwrap().op;
                matches!(op, Op::Elementwise { kind: ElementwiseOp::Eq, device } if device == d)
            });
            assert_eq!(masks.count(), 1, "{what}: the masks on {d}");
        }
        let exe = fuel_test_support::compile_env(&lowered, devices)
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        for d in devices {
            runs_exactly(&lowered, &exe, *d, &what);
        }
        if devices.len() == 2 {
            let inputs = deterministic_inputs(&g);
            let want = interpret(&g, &inputs).unwrap();
            let got = interpret(&lowered, &inputs).unwrap();
            assert_close(&got, &want, &what);
        }
    }
}

#[test]
fn max_min_and_prod_gradients_run_on_cpus() {
    run_all(&[Device::cpu(0), Device::cpu(1)]);
    run_all(&[Device::cpu(0), Device::cpu(1), Device::cpu(2)]);
}

#[test]
fn max_min_and_prod_gradients_run_with_a_vulkan_rank() {
    let devices = [Device::cpu(0), Device::vulkan(0)];
    if !devices_or_skip(
        "max_min_and_prod_gradients_run_with_a_vulkan_rank",
        &devices,
    ) {
        return;
    }
    run_all(&devices);
}
