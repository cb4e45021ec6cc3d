//! Unit tests of `simplify-collectives`: the lattice, the cost model's
//! veto, silence where nothing matches, and every reduce op and dtype of
//! `replicated-reduce` bit for bit against the interpreter.

use super::{Replication, SimplifyCollectives, SimplifyOptions};
use fuel_graph_ext::graph::{NodeId, ValueId};
use fuel_graph_ext::interp::{deterministic_inputs, interpret};
use fuel_graph_ext::pass::{Changed, Pass};
use fuel_graph_ext::{DType, Device, ElementwiseOp, Graph, Op, ReduceOp, TensorType};
use std::sync::Arc;

fn inputs(g: &mut Graph, prefix: &str, n: u32, ty: &TensorType) -> Vec<ValueId> {
    let cpus: Vec<Device> = (0..n).map(Device::cpu).collect();
    inputs_on(g, prefix, &cpus, ty)
}

fn inputs_on(g: &mut Graph, prefix: &str, devices: &[Device], ty: &TensorType) -> Vec<ValueId> {
    devices
        .iter()
        .enumerate()
        .map(|(i, &device)| {
            let op = Op::Input {
                name: format!("{prefix}{i}"),
                device,
            };
            g.add_value(op, &[], ty.clone())
        })
        .collect()
}

fn results(id: NodeId, n: u32) -> Vec<ValueId> {
    (0..n).map(|result| ValueId { node: id, result }).collect()
}

fn pass(reassociate: bool) -> SimplifyCollectives {
    SimplifyCollectives::new(SimplifyOptions { reassociate }, Arc::default())
}

fn collectives(g: &Graph) -> usize {
    g.node_ids()
        .filter(|id| g.node(*id).is_some_and(|n| n.op.is_collective()))
        .count()
}

#[test]
fn the_lattice_follows_collectives_and_local_ops() {
    let ty = TensorType::new(DType::F32, &[4]);
    let mut g = Graph::new("g");
    let xs = inputs(&mut g, "x", 2, &ty);
    let ar = g.add_node(Op::AllReduce { op: ReduceOp::Sum }, &xs, ty.clone());
    let ys = results(ar, 2);
    let add = |g: &mut Graph, a: ValueId, b: ValueId, d: u32| {
        let op = Op::Elementwise {
            kind: ElementwiseOp::Add,
            device: Device::cpu(d),
        };
        g.add_value(op, &[a, b], ty.clone())
    };
    let same: Vec<ValueId> = (0..2)
        .map(|r| add(&mut g, ys[r], ys[r], r as u32))
        .collect();
    let mixed = add(&mut g, ys[0], xs[0], 0);
    let rep = Replication::of(&g);
    assert!(rep.common_set(&ys).is_some());
    assert!(rep.common_set(&same).is_some());
    assert_ne!(rep.set(same[0]), rep.set(ys[0]));
    assert_eq!(rep.set(mixed), None, "an input varies, so the add does");
    assert_eq!(rep.set(xs[0]), None);
    assert_eq!(rep.replica_on(ys[0], Device::cpu(1)), Some(ys[1]));
}

#[test]
fn a_graph_where_nothing_matches_is_left_without_a_note() {
    let ty = TensorType::new(DType::F32, &[4]);
    let mut g = Graph::new("g");
    let xs = inputs(&mut g, "x", 3, &ty);
    let ar = g.add_node(Op::AllReduce { op: ReduceOp::Sum }, &xs, ty);
    g.set_outputs(results(ar, 3));
    let before = fuel_graph_ext::text::print(&g);
    assert_eq!(pass(false).run(&mut g), Ok(Changed::No));
    assert_eq!(fuel_graph_ext::text::print(&g), before);
}

/// all_gather(reduce_scatter(x)) whose parts are outputs too: the scatter
/// stays, and the cost model decides whether an all_reduce in place of the
/// all_gather pays. Small tensors: it does (fewer copies); 1 MiB per rank
/// over two CPUs and two Vulkan devices: it does not (the all_reduce moves
/// twice the bytes across the host/GPU line), and the rule declines with a
/// note. (Between host arenas alone every copy shares its source's buffer,
/// so there the all_reduce never loses.)
#[test]
fn gather_of_scatter_follows_the_cost_model() {
    let devices = [
        Device::cpu(0),
        Device::vulkan(0),
        Device::cpu(1),
        Device::vulkan(1),
    ];
    let run = |elements: usize| {
        let ty = TensorType::new(DType::F32, &[elements]);
        let part = TensorType::new(DType::F32, &[elements / 4]);
        let mut g = Graph::new("g");
        let xs = inputs_on(&mut g, "x", &devices, &ty);
        let scatter = Op::ReduceScatter {
            op: ReduceOp::Sum,
            axis: 0,
            split: None,
        };
        let rs = g.add_node(scatter, &xs, part);
        let ag = g.add_node(Op::AllGather { axis: 0 }, &results(rs, 4), ty);
        let mut outs = results(rs, 4);
        outs.extend(results(ag, 4));
        g.set_outputs(outs);
        let changed = pass(false).run(&mut g).unwrap();
        (changed, g)
    };
    let (small, g) = run(64);
    assert_eq!(small, Changed::Yes, "{}", fuel_graph_ext::text::print(&g));
    let (large, g) = run(1 << 18);
    assert_eq!(large, Changed::No);
    assert_eq!(collectives(&g), 2, "both collectives stay");
    assert!(
        g.notes()
            .iter()
            .any(|n| n.contains("gather-of-scatter declined")
                && n.contains("the cost model estimates")),
        "{:?}",
        g.notes()
    );
}

#[test]
fn a_float_sum_merges_only_when_reassociation_is_allowed() {
    for (dtype, reassociate, merges) in [
        (DType::F32, false, false),
        (DType::F32, true, true),
        (DType::I32, false, true),
    ] {
        let ty = TensorType::new(dtype, &[8]);
        let mut g = Graph::new("g");
        let xs = inputs(&mut g, "x", 2, &ty);
        let ys = inputs(&mut g, "y", 2, &ty);
        let a = g.add_node(Op::AllReduce { op: ReduceOp::Sum }, &xs, ty.clone());
        let b = g.add_node(Op::AllReduce { op: ReduceOp::Sum }, &ys, ty.clone());
        let sums: Vec<ValueId> = (0..2u32)
            .map(|r| {
                let op = Op::Elementwise {
                    kind: ElementwiseOp::Add,
                    device: Device::cpu(r),
                };
                let (va, vb) = (
                    ValueId { node: a, result: r },
                    ValueId { node: b, result: r },
                );
                g.add_value(op, &[va, vb], ty.clone())
            })
            .collect();
        g.set_outputs(sums);
        let before = g.clone();
        pass(reassociate).run(&mut g).unwrap();
        assert_eq!(
            collectives(&g) == 1,
            merges,
            "{dtype} reassociate={reassociate}"
        );
        let inputs = deterministic_inputs(&before);
        let (want, got) = (
            interpret(&before, &inputs).unwrap(),
            interpret(&g, &inputs).unwrap(),
        );
        for (w, o) in want.iter().zip(&got) {
            o.check_same(w).unwrap();
        }
    }
}

/// `replicated-reduce` without `reassociate` is the interpreter's own
/// reduction of N replicas, bit for bit, for every dtype and op (a mean
/// through its accumulator, half floats and bools included).
#[test]
fn reductions_of_replicas_are_bit_exact_for_every_dtype_and_op() {
    for dtype in DType::ALL {
        for op in ReduceOp::ALL {
            let ty = TensorType::new(dtype, &[5]);
            let mut g = Graph::new("g");
            let xs = inputs(&mut g, "x", 3, &ty);
            let first = g.add_node(Op::AllReduce { op: ReduceOp::Max }, &xs, ty.clone());
            let second = g.add_node(Op::AllReduce { op }, &results(first, 3), ty.clone());
            g.set_outputs(results(second, 3));
            let before = g.clone();
            assert_eq!(pass(false).run(&mut g), Ok(Changed::Yes), "{dtype} {op}");
            assert_eq!(
                collectives(&g),
                1,
                "{dtype} {op}: the second all_reduce is gone"
            );
            let inputs = deterministic_inputs(&before);
            let want = interpret(&before, &inputs).unwrap();
            let got = interpret(&g, &inputs).unwrap();
            for (w, o) in want.iter().zip(&got) {
                o.check_same(w)
                    .unwrap_or_else(|e| panic!("{dtype} {op}: {e}"));
            }
        }
    }
}
