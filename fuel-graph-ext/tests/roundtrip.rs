//! Property: print -> parse -> print is byte-identical for random graphs, and
//! the parsed graph verifies exactly when the original does.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use fuel_graph_ext::op::DeviceList;
use fuel_graph_ext::text::{parse, print};
use fuel_graph_ext::verify::{verify, Level};
use fuel_graph_ext::*;
use proptest::prelude::*;

fn device(k: u8) -> Device {
    match k % 3 {
        0 => Device::cpu(u32::from(k / 3 % 3)),
        1 => Device::cuda(u32::from(k / 3 % 3)),
        _ => Device::vulkan(u32::from(k / 3 % 3)),
    }
}

/// Builds a graph from random instructions. Operands are picked among
/// existing values; types are inferred where the op allows, so most graphs
/// are well typed, and the rest exercise the parser on ill-typed input.
fn build(name_seed: u8, inputs: &[(u8, u8, Vec<usize>)], steps: &[(u8, u8, u8, u8, u8)]) -> Graph {
    let mut g = Graph::new(format!("g{name_seed}"));
    let mut values: Vec<ValueId> = Vec::new();
    for (i, (dev, dt, shape)) in inputs.iter().enumerate() {
        let ty = TensorType::new(DType::ALL[*dt as usize % DType::ALL.len()], shape);
        let name = if i % 2 == 0 {
            format!("in{i}")
        } else {
            format!("we\"ird\\{i}\n")
        };
        values.push(g.add_value(
            Op::Input {
                name,
                device: device(*dev),
            },
            &[],
            ty,
        ));
    }
    for &(kind, a, b, dev, attr) in steps {
        let pick = |x: u8| values[x as usize % values.len()];
        let (va, vb) = (pick(a), pick(b));
        let ta = g.value_type(va).unwrap().clone();
        let d = device(dev);
        let rop = ReduceOp::ALL[attr as usize % 5];
        let axis = attr as usize % ta.rank().max(1);
        let op = match kind % 13 {
            0 => Op::Elementwise {
                kind: ElementwiseOp::ALL[attr as usize % ElementwiseOp::ALL.len()],
                device: d,
            },
            1 => Op::Copy { to: d },
            2 => Op::Div {
                by: u64::from(attr % 5) + 1,
                device: d,
            },
            3 => Op::Slice {
                axis,
                start: 0,
                len: 1,
                device: d,
            },
            4 => Op::Concat { axis, device: d },
            5 => Op::AllReduce { op: rop },
            6 => Op::Reduce {
                op: rop,
                root: attr as usize % 2,
            },
            7 => Op::Broadcast {
                to: (0..(attr % 4 + 1))
                    .map(|i| device(dev.wrapping_add(i)))
                    .collect::<DeviceList>(),
            },
            8 => Op::AllGather { axis },
            9 => Op::Cast {
                to: DType::ALL[attr as usize % DType::ALL.len()],
                device: d,
            },
            10 => Op::AllToAll {
                axis,
                split: attr.is_multiple_of(2).then(|| {
                    let e = ta.shape.get(axis).copied().unwrap_or(0);
                    vec![e, 0, 0, e]
                }),
            },
            // An SPMD collective of 2 ranks as rank 1, uneven every other
            // time: {rank=1, split=[...]} sorts among the other attributes.
            12 => {
                let e = ta.shape.get(axis).copied().unwrap_or(0);
                let (kind, split) = match attr % 3 {
                    0 => (op::CommOp::AllToAll { axis }, vec![0, 1, e, 0]),
                    1 => (op::CommOp::AllGather { axis }, vec![3, e]),
                    _ => (op::CommOp::ReduceScatter { op: rop, axis }, vec![1, e]),
                };
                let uneven = attr.is_multiple_of(2);
                Op::Comm {
                    kind,
                    comm: u32::from(a),
                    ranks: 2,
                    device: d,
                    rank: uneven.then_some(1),
                    split: uneven.then_some(split),
                }
            }
            // Every third one with a split: all on rank 0, none on rank 1.
            _ => Op::ReduceScatter {
                op: rop,
                axis,
                split: attr
                    .is_multiple_of(3)
                    .then(|| vec![ta.shape.get(axis).copied().unwrap_or(0), 0]),
            },
        };
        let operands: Vec<ValueId> = match &op {
            Op::Copy { .. }
            | Op::Div { .. }
            | Op::Cast { .. }
            | Op::Slice { .. }
            | Op::Broadcast { .. }
            | Op::Comm { .. } => vec![va],
            _ => vec![va, vb],
        };
        let tys: Vec<TensorType> = operands
            .iter()
            .map(|v| g.value_type(*v).unwrap().clone())
            .collect();
        let refs: Vec<&TensorType> = tys.iter().collect();
        let ty = op::infer_type(&op, &refs).unwrap_or(ta);
        let each = op::result_types(&op, &refs).ok().flatten();
        let id = g.add_node(op, &operands, ty);
        if let Some(each) = each {
            g.set_result_types(id, each);
        }
        let n = g.node(id).unwrap().num_results();
        for r in 0..n as u32 {
            values.push(ValueId {
                node: id,
                result: r,
            });
        }
    }
    let outs: Vec<ValueId> = values.iter().rev().step_by(2).copied().collect();
    g.set_outputs(outs);
    if name_seed.is_multiple_of(3) {
        g.add_note("a note with {braces} and \"quotes\"");
    }
    g
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]
    #[test]
    fn print_parse_print_is_identical(
        seed in any::<u8>(),
        inputs in prop::collection::vec((any::<u8>(), any::<u8>(), prop::collection::vec(1usize..5, 0..4)), 1..4),
        steps in prop::collection::vec((any::<u8>(), any::<u8>(), any::<u8>(), any::<u8>(), any::<u8>()), 0..24),
    ) {
        let g = build(seed, &inputs, &steps);
        let text = print(&g);
        let back = parse(&text).map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        prop_assert_eq!(print(&back), text.clone());
        let topo = Topology::default();
        for level in [Level::Structural, Level::Placement] {
            prop_assert_eq!(verify(&g, level, &topo).is_ok(), verify(&back, level, &topo).is_ok(), "{}", text);
        }
    }
}
