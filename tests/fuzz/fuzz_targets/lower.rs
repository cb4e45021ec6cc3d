//! Arbitrary structured graphs through the whole default pipeline: random
//! groups, dtypes, shapes, collective kinds and every `lower-collectives`
//! algorithm. It must never panic, the output must verify, and the reference
//! interpreter must give the same values before and after.
#![no_main]

use arbitrary::Arbitrary;
use fuel_graph_ext::interp::{deterministic_inputs, interpret};
use fuel_graph_ext::pass::DebugOptions;
use fuel_graph_ext::verify::{verify, Level};
use fuel_graph_ext::*;
use libfuzzer_sys::fuzz_target;
use std::sync::Arc;

#[derive(Arbitrary, Debug)]
struct Case {
    devices: Vec<u8>,
    dtype: u8,
    shape: Vec<u8>,
    kind: u8,
    op: u8,
    root: u8,
    axis: u8,
    algorithm: u8,
    arity: u8,
    peers: bool,
}

const ALGORITHMS: [&str; 6] = ["auto", "star", "hierarchical", "ring", "tree", "driver"];

fn device(k: u8) -> Device {
    match k % 3 {
        0 => Device::cpu(u32::from(k / 3 % 3)),
        1 => Device::cuda(u32::from(k / 3 % 3)),
        _ => Device::vulkan(u32::from(k / 3 % 3)),
    }
}

fuzz_target!(|c: Case| {
    let devices: Vec<Device> = c.devices.iter().take(8).map(|d| device(*d)).collect();
    if devices.is_empty() {
        return;
    }
    let n = devices.len();
    let dtype = DType::ALL[c.dtype as usize % DType::ALL.len()];
    let mut shape: Vec<usize> = c.shape.iter().take(3).map(|d| (*d as usize % 6) + 1).collect();
    let rop = ReduceOp::ALL[c.op as usize % ReduceOp::ALL.len()];
    let kind = c.kind % 6;
    let axis = if shape.is_empty() { 0 } else { c.axis as usize % shape.len() };
    if kind == 4 {
        if shape.is_empty() {
            shape.push(n);
        } else {
            shape[axis] *= n;
        }
    }
    let ty = TensorType::new(dtype, &shape);
    let root = c.root as usize % n;
    let mut g = Graph::new("fuzz");
    let shards: Vec<ValueId> = devices
        .iter()
        .enumerate()
        .map(|(i, d)| g.add_value(Op::Input { name: format!("s{i}"), device: *d }, &[], ty.clone()))
        .collect();
    let (op, operands): (Op, Vec<ValueId>) = match kind {
        0 => (Op::AllReduce { op: rop }, shards),
        1 => (Op::Reduce { op: rop, root }, shards),
        2 => (Op::Broadcast { to: devices.iter().copied().collect() }, vec![shards[root]]),
        3 => (Op::AllGather { axis }, shards),
        5 => (Op::AllToAll { axis, split: None }, shards),
        // A split from the root byte: the whole axis on one rank, none on
        // the others (a zero extent is legal), or the default partition.
        _ => {
            let split = (c.root % 2 == 1).then(|| {
                let extent = shape.get(axis).copied().unwrap_or(0);
                (0..n).map(|r| if r == root { extent } else { 0 }).collect()
            });
            (Op::ReduceScatter { op: rop, axis, split }, shards)
        }
    };
    let tys: Vec<&TensorType> = operands.iter().map(|_| &ty).collect();
    let Ok(out_ty) = op::infer_type(&op, &tys) else { return };
    let each = op::result_types(&op, &tys).ok().flatten();
    let id = g.add_node(op, &operands, out_ty);
    if let Some(each) = each {
        g.set_result_types(id, each);
    }
    let results = g.node(id).map_or(0, |x| x.num_results());
    g.set_outputs((0..results as u32).map(|r| ValueId { node: id, result: r }).collect());
    let mut topo = Topology::default();
    if c.peers {
        topo = topo.with_peer(0, 1);
        topo.drivers.insert(DeviceKind::Cpu);
        topo.drivers.insert(DeviceKind::Cuda);
    }
    let topo = Arc::new(topo);
    if verify(&g, Level::Structural, &topo).is_err() {
        return;
    }
    let alg = ALGORITHMS[c.algorithm as usize % ALGORITHMS.len()];
    let opts = if alg == "tree" { format!("algorithm=tree, arity={}", c.arity % 4 + 2) } else { format!("algorithm={alg}") };
    let pipeline = format!("lower-collectives{{{opts}}},insert-cross-device-copies,split-cross-vendor-copies,cse,dce");
    let before = g.clone();
    if let Err(e) = fuel_collective::run_pipeline(&mut g, &pipeline, topo.clone(), DebugOptions::verifying()) {
        panic!("{pipeline} failed on a valid graph: {e}\n{}", text::print(&before));
    }
    let inputs = deterministic_inputs(&before);
    let want = interpret(&before, &inputs).unwrap_or_else(|e| panic!("{e}"));
    let got = interpret(&g, &inputs).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(want.len(), got.len());
    for (k, (a, b)) in got.iter().zip(&want).enumerate() {
        if let Err(e) = a.check_close(b) {
            panic!("result {k}: {e}\nbefore:\n{}\nafter:\n{}", text::print(&before), text::print(&g));
        }
    }
});
