//! Random small graphs of every op and dtype, lowered and run by the
//! executor on CPU devices (and `vulkan:0` when the fuzz crate is built
//! with `--features vulkan` and a device is there). Inputs are the dtype's
//! edge values (0, ±1, MIN, MAX, MAX/2, ±inf, NaN, subnormals), picked per
//! element by the fuzzer; values are `[rows, cols]` with either extent
//! possibly 0 (issue 38's empty shapes).
//!
//! Two checks, as `fuel-opt --run` makes them: every result the executor
//! computes equals the interpreter's run of the *lowered* graph bit for
//! bit, and that run means what the graph before lowering means: exactly,
//! except where a float `sum`, `prod` or `mean` over three or more ranks
//! folds in another order than the interpreter's rank order, which must
//! stay within the fold-order bound (`interp::check_lowering`; up to four
//! ranks, so f16 folds round by order). A backend's compile-time refusal
//! of a dtype or kernel is not a finding; any other error, a panic or a
//! difference is.
#![no_main]

use arbitrary::Arbitrary;
use fuel_graph_ext::interp::{check_lowering, edge_values, interpret, HostTensor};
use fuel_runtime::exec::{self, ExecError};
use fuel_graph_ext::pass::{DebugOptions, PassContext, PassManager};
use fuel_graph_ext::*;
use libfuzzer_sys::fuzz_target;
use std::collections::BTreeMap;
use std::sync::Arc;

#[derive(Arbitrary, Debug)]
struct Case {
    dtype: u8,
    len: u8,
    cols: u8,
    ranks: u8,
    vulkan: bool,
    algorithm: u8,
    steps: Vec<Step>,
    picks: Vec<u8>,
}

#[derive(Arbitrary, Debug)]
enum Step {
    Fold { kind: u8, a: u8, b: u8, c: Option<u8> },
    Div { a: u8, by: Divisor },
    Cast { a: u8, to: u8 },
    Collective { kind: u8, op: u8, root: u8 },
    SliceConcat { a: u8, start: u8 },
}

#[derive(Arbitrary, Debug)]
enum Divisor {
    Small(u8),
    Power(u8),
    Any(u64),
}

const ALGORITHMS: [&str; 5] = ["star", "hierarchical", "ring", "tree", "auto"];

/// A value of the graph being built: where it lives and its type.
#[derive(Clone)]
struct Val {
    id: ValueId,
    ty: TensorType,
    device: Device,
}

fuzz_target!(|c: Case| {
    let dtype = DType::ALL[c.dtype as usize % DType::ALL.len()];
    // Rows per rank 0 to 12 and columns 0 to 2: some values are empty.
    let len = c.len as usize % 13;
    let cols = c.cols as usize % 3;
    let ranks = (c.ranks as usize % 4) + 1;
    let mut devices: Vec<Device> = (0..ranks as u32).map(Device::cpu).collect();
    let use_vulkan = c.vulkan && cfg!(feature = "vulkan") && exec::discover().why_not(Device::vulkan(0)).is_none();
    if use_vulkan {
        devices[0] = Device::vulkan(0);
    }
    let ty = TensorType::new(dtype, &[len * ranks, cols]);
    let mut g = Graph::new("run");
    let mut vals: Vec<Val> = devices
        .iter()
        .enumerate()
        .map(|(i, d)| Val {
            id: g.add_value(Op::Input { name: format!("x{i}"), device: *d }, &[], ty.clone()),
            ty: ty.clone(),
            device: *d,
        })
        .collect();
    let pick = |vals: &[Val], k: u8| vals[k as usize % vals.len()].clone();
    for step in c.steps.iter().take(8) {
        match step {
            Step::Fold { kind, a, b, c: third } => {
                let x = pick(&vals, *a);
                // Operands of one fold share the type and device of the first.
                let same: Vec<Val> = vals.iter().filter(|v| v.ty == x.ty && v.device == x.device).cloned().collect();
                let mut ops = vec![x.id, pick(&same, *b).id];
                if let Some(t) = third {
                    ops.push(pick(&same, *t).id);
                }
                let kind = ElementwiseOp::ALL[*kind as usize % ElementwiseOp::ALL.len()];
                // `eq` compares exactly two.
                if kind == ElementwiseOp::Eq {
                    ops.truncate(2);
                }
                let id = g.add_value(Op::Elementwise { kind, device: x.device }, &ops, x.ty.clone());
                vals.push(Val { id, ..x });
            }
            Step::Div { a, by } => {
                let x = pick(&vals, *a);
                let by = match by {
                    Divisor::Small(k) => u64::from(*k % 16) + 1,
                    Divisor::Power(k) => {
                        let p = 1u64 << (k % 64);
                        [p, p.saturating_sub(1).max(1), p.saturating_add(1)][(*k as usize / 64) % 3]
                    }
                    Divisor::Any(n) => (*n).max(1),
                };
                let id = g.add_value(Op::Div { by, device: x.device }, &[x.id], x.ty.clone());
                vals.push(Val { id, ..x });
            }
            Step::Cast { a, to } => {
                let x = pick(&vals, *a);
                let to = DType::ALL[*to as usize % DType::ALL.len()];
                if op::cast_defined(x.ty.dtype, to).is_err() {
                    continue;
                }
                let t = TensorType { dtype: to, shape: x.ty.shape.clone() };
                let id = g.add_value(Op::Cast { to, device: x.device }, &[x.id], t.clone());
                vals.push(Val { id, ty: t, device: x.device });
            }
            Step::SliceConcat { a, start } => {
                let x = pick(&vals, *a);
                let extent = x.ty.shape[0];
                // An uneven reduce_scatter leaves some ranks an empty share.
                if extent == 0 {
                    continue;
                }
                let s = *start as usize % extent;
                let t = x.ty.with_dim(0, extent - s);
                let sl = g.add_value(Op::Slice { axis: 0, start: s, len: extent - s, device: x.device }, &[x.id], t);
                let cat_ty = x.ty.with_dim(0, 2 * extent - s);
                let id = g.add_value(Op::Concat { axis: 0, device: x.device }, &[sl, x.id], cat_ty.clone());
                vals.push(Val { id, ty: cat_ty, device: x.device });
            }
            Step::Collective { kind, op, root } => {
                // One shard per device, each of the first value's type found there.
                let x = pick(&vals, *root);
                let shards: Vec<Val> = devices
                    .iter()
                    .filter_map(|d| vals.iter().rev().find(|v| v.device == *d && v.ty == x.ty).cloned())
                    .collect();
                if shards.len() != devices.len() {
                    continue;
                }
                let rop = ReduceOp::ALL[*op as usize % ReduceOp::ALL.len()];
                let n = shards.len();
                let ids: Vec<ValueId> = shards.iter().map(|s| s.id).collect();
                let op = match kind % 4 {
                    0 => Op::AllReduce { op: rop },
                    1 => Op::Reduce { op: rop, root: *root as usize % n },
                    2 => Op::AllGather { axis: *root as usize / 4 % 2 },
                    _ => Op::ReduceScatter {
                        op: rop,
                        axis: 0,
                        split: None,
                    },
                };
                let tys: Vec<&TensorType> = shards.iter().map(|s| &s.ty).collect();
                let Ok(out) = op::infer_type(&op, &tys) else { continue };
                // An uneven reduce_scatter (the remainder on the last rank)
                // gives each result its own type.
                let Ok(each) = op::result_types(&op, &tys) else { continue };
                let node = g.add_node(op, &ids, out.clone());
                if let Some(each) = each {
                    g.set_result_types(node, each);
                }
                let results = g.node(node).map_or(0, |nd| nd.num_results());
                for r in 0..results as u32 {
                    let id = ValueId { node, result: r };
                    if let (Some(device), Some(ty)) = (g.value_device(id), g.value_type(id)) {
                        vals.push(Val { id, ty: ty.clone(), device });
                    }
                }
            }
        }
    }
    g.set_outputs(vals.iter().skip(devices.len()).map(|v| v.id).collect());
    if g.outputs().is_empty() {
        return;
    }
    // Inputs: each element an edge value of the dtype, as the fuzzer picks.
    let edges = edge_values(dtype);
    let size = dtype.size_bytes();
    let mut k = 0usize;
    let mut inputs = BTreeMap::new();
    for i in 0..devices.len() {
        let mut bytes = Vec::with_capacity(ty.size_bytes());
        for _ in 0..ty.num_elements() {
            let p = c.picks.get(k).copied().unwrap_or(k as u8) as usize % edges.len();
            k += 1;
            bytes.extend_from_slice(&edges.bytes()[p * size..(p + 1) * size]);
        }
        inputs.insert(format!("x{i}"), HostTensor::from_bytes(ty.clone(), bytes).unwrap());
    }
    interpret(&g, &inputs).unwrap_or_else(|e| panic!("{e}\n{}", text::print(&g)));
    let algorithm = ALGORITHMS[c.algorithm as usize % ALGORITHMS.len()];
    let pipeline = format!(
        "lower-collectives{{algorithm={algorithm}}},insert-cross-device-copies,split-cross-vendor-copies,cse,dce"
    );
    let mut lowered = g.clone();
    PassManager::new(&fuel_collective::registry(), &pipeline, PassContext { topology: Arc::new(Topology::default()) }, DebugOptions::verifying())
        .unwrap_or_else(|e| panic!("{pipeline}: {e}"))
        .run(&mut lowered)
        .unwrap_or_else(|e| panic!("{pipeline} failed: {e}\n{}", text::print(&g)));
    let exe = match exec::compile(&lowered, &[]) {
        Ok(exe) => exe,
        // A backend without this dtype or kernel refuses at compile time.
        Err(ExecError::Unsupported { .. } | ExecError::UnsupportedKernel { .. }) => return,
        Err(e) => panic!("compile failed: {e}\n{}", text::print(&lowered)),
    };
    let got = exe
        .run_host(&inputs)
        .unwrap_or_else(|e| panic!("run failed: {e}\n{}", text::print(&lowered)));
    // The device against the lowered graph: the same folds in the same order.
    let folded = interpret(&lowered, &inputs).unwrap_or_else(|e| panic!("{e}\n{}", text::print(&lowered)));
    assert_eq!(got.len(), folded.len());
    for (r, (a, b)) in got.iter().zip(&folded).enumerate() {
        if let Err(e) = a.check_same(b) {
            panic!("result {r}: the device differs from the lowered graph: {e}\nafter ({pipeline}):\n{}", text::print(&lowered));
        }
    }
    // The lowered graph against the meaning of the graph before lowering.
    let agree = check_lowering(&g, &lowered, &inputs).unwrap_or_else(|e| panic!("{e}"));
    for (r, a) in agree.iter().enumerate() {
        if a.wrong > 0 {
            panic!(
                "result {r}: {a:?}\nbefore:\n{}\nafter ({pipeline}):\n{}",
                text::print(&g),
                text::print(&lowered)
            );
        }
    }
    for d in exe.devices() {
        if let Some(m) = exe.memory(d) {
            assert_eq!(m.current, 0, "{d} still holds {} bytes", m.current);
        }
    }
});
