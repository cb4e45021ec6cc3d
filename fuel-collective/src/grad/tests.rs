//! Finite-difference checks of every transpose rule against the reference
//! interpreter: for a collective y = C(x) and fixed cotangents w, the
//! loss f(x) = Σ_k ⟨w_k, y_k⟩ has gradient Cᵀ(w), so each element of what
//! [`transpose`] records must equal the central difference of f, for f32
//! and f64, groups of 1 to 4, even and uneven splits, and the SPMD forms
//! through `interpret_world`.

use super::{transpose, transpose_at, GradError};
use fuel_graph_ext::graph::{NodeId, ValueId};
use fuel_graph_ext::interp::{interpret, interpret_world, HostTensor};
use fuel_graph_ext::op::CommOp;
use fuel_graph_ext::{DType, Device, Graph, Op, ReduceOp, TensorType};
use std::collections::BTreeMap;

/// Values in [-1, 1] on a grid of 1/64: exact in f32, so x ± 1/8 is too.
fn values(seed: usize, n: usize) -> Vec<f64> {
    (0..n)
        .map(|i| ((seed * 7919 + i * 104_729) % 129) as f64 / 64.0 - 1.0)
        .collect()
}

const H: f64 = 0.125;

/// Rank `rank`'s operand for a max or min: at each element the N ranks
/// hold N values 1/2 apart (a different rank the largest at each element),
/// so a step of ±H never changes which rank holds the extreme and finite
/// differences see a smooth function.
fn apart(rank: usize, ranks: usize, n: usize) -> Vec<f64> {
    (0..n)
        .map(|e| ((rank + e) % ranks) as f64 * 0.5 - 0.75 + (e % 5) as f64 / 64.0)
        .collect()
}

fn input(g: &mut Graph, name: String, device: Device, ty: &TensorType) -> ValueId {
    g.add_value(Op::Input { name, device }, &[], ty.clone())
}

fn add_collective(g: &mut Graph, op: Op, xs: &[ValueId]) -> NodeId {
    crate::simplify::edit::add_collective(g, op, xs).unwrap()
}

fn dot(a: &HostTensor, b: &HostTensor) -> f64 {
    a.to_f64().iter().zip(b.to_f64()).map(|(x, y)| x * y).sum()
}

/// Checks `grads` (per operand) against central differences of `f` over
/// the inputs `x{i}`.
fn check_fd(
    what: &str,
    dtype: DType,
    inputs: &BTreeMap<String, HostTensor>,
    grads: &[HostTensor],
    f: &dyn Fn(&BTreeMap<String, HostTensor>) -> f64,
) {
    let tol = if dtype == DType::F32 { 1e-4 } else { 1e-9 };
    for (i, grad) in grads.iter().enumerate() {
        let name = format!("x{i}");
        let x = &inputs[&name];
        let base = x.to_f64();
        let got = grad.to_f64();
        assert_eq!(
            got.len(),
            base.len(),
            "{what}: gradient {i} has the wrong size"
        );
        for e in 0..base.len() {
            let at = |d: f64| {
                let mut v = base.clone();
                v[e] += d;
                let mut m = inputs.clone();
                m.insert(name.clone(), HostTensor::new(x.ty.clone(), v));
                f(&m)
            };
            let fd = (at(H) - at(-H)) / (2.0 * H);
            assert!(
                (fd - got[e]).abs() <= tol * fd.abs().max(1.0),
                "{what} {dtype}: d f / d x{i}[{e}] is {fd} by finite differences, the transpose gives {}",
                got[e]
            );
        }
    }
}

/// One single-process case: `op` over operands of `shapes` on cpu:0..N;
/// with `replicated`, the cotangents are an all_reduce of the inputs `w`.
fn check(op: Op, shapes: &[Vec<usize>], dtype: DType, replicated: bool) {
    check_inputs(op, shapes, dtype, replicated, false);
}

/// [`check`] with the operands `x{i}` made by [`apart`], for max and min.
fn check_apart(op: Op, shapes: &[Vec<usize>], dtype: DType, replicated: bool) {
    check_inputs(op, shapes, dtype, replicated, true);
}

fn check_inputs(op: Op, shapes: &[Vec<usize>], dtype: DType, replicated: bool, spread: bool) {
    let what = format!("{op:?} over {shapes:?}");
    let mut g = Graph::new("grad");
    let xs: Vec<ValueId> = shapes
        .iter()
        .enumerate()
        .map(|(i, s)| {
            input(
                &mut g,
                format!("x{i}"),
                Device::cpu(i as u32),
                &TensorType::new(dtype, s),
            )
        })
        .collect();
    let y = add_collective(&mut g, op, &xs);
    let results = g.node(y).unwrap().num_results();
    let ys: Vec<ValueId> = (0..results as u32)
        .map(|r| ValueId { node: y, result: r })
        .collect();
    let mut ws: Vec<ValueId> = ys
        .iter()
        .enumerate()
        .map(|(k, v)| {
            let (d, t) = (
                g.value_device(*v).unwrap(),
                g.value_type(*v).unwrap().clone(),
            );
            input(&mut g, format!("w{k}"), d, &t)
        })
        .collect();
    if replicated {
        let ar = add_collective(&mut g, Op::AllReduce { op: ReduceOp::Sum }, &ws);
        ws = (0..ws.len() as u32)
            .map(|r| ValueId {
                node: ar,
                result: r,
            })
            .collect();
    }
    let cts: Vec<Option<ValueId>> = ws.iter().copied().map(Some).collect();
    let grads = transpose(&mut g, y, &cts).unwrap_or_else(|e| panic!("{what}: {e}"));
    let grads: Vec<ValueId> = grads.into_iter().map(|v| v.expect("a cotangent")).collect();
    let mut outs = ys.clone();
    outs.extend(&ws);
    outs.extend(&grads);
    g.set_outputs(outs);
    let mut inputs = BTreeMap::new();
    for (id, name) in g.inputs() {
        let ty = g.node(id).unwrap().ty.clone();
        let seed = name.bytes().map(usize::from).sum::<usize>();
        let rank = name.strip_prefix('x').and_then(|r| r.parse::<usize>().ok());
        let vals = match rank {
            Some(r) if spread => apart(r, shapes.len(), ty.num_elements()),
            _ => values(seed, ty.num_elements()),
        };
        inputs.insert(name.to_string(), HostTensor::new(ty.clone(), vals));
    }
    let k = ys.len();
    let f = |m: &BTreeMap<String, HostTensor>| {
        let out = interpret(&g, m).unwrap();
        (0..k).map(|j| dot(&out[j], &out[k + j])).sum()
    };
    let out = interpret(&g, &inputs).unwrap();
    check_fd(&what, dtype, &inputs, &out[2 * k..], &f);
}

fn v(shapes: &[&[usize]]) -> Vec<Vec<usize>> {
    shapes.iter().map(|s| s.to_vec()).collect()
}

#[test]
fn all_reduce_sum_and_mean() {
    for dtype in [DType::F32, DType::F64] {
        for op in [ReduceOp::Sum, ReduceOp::Mean] {
            for n in 1..=4 {
                for shape in [&[3][..], &[2, 3]] {
                    let shapes = vec![shape.to_vec(); n];
                    check(Op::AllReduce { op }, &shapes, dtype, false);
                    check(Op::AllReduce { op }, &shapes, dtype, true);
                }
            }
        }
    }
}

#[test]
fn reduce_and_broadcast() {
    for dtype in [DType::F32, DType::F64] {
        for op in [ReduceOp::Sum, ReduceOp::Mean] {
            check(
                Op::Reduce { op, root: 1 },
                &v(&[&[4], &[4], &[4]]),
                dtype,
                false,
            );
        }
        let to = |ds: &[u32]| Op::Broadcast {
            to: ds.iter().map(|d| Device::cpu(*d)).collect(),
        };
        check(to(&[0, 1, 2]), &v(&[&[2, 2]]), dtype, false);
        check(to(&[0, 1, 2]), &v(&[&[2, 2]]), dtype, true);
        // The operand's device is not a target: a copy brings the sum home.
        check(to(&[1, 2]), &v(&[&[3]]), dtype, false);
    }
}

#[test]
fn all_gather_and_reduce_scatter_even_and_uneven() {
    let gather = |axis| Op::AllGather { axis };
    let scatter = |op, axis, split| Op::ReduceScatter { op, axis, split };
    for dtype in [DType::F32, DType::F64] {
        let mut cases = vec![
            (gather(0), v(&[&[2], &[2], &[2]]), false),
            (gather(0), v(&[&[1, 2], &[3, 2], &[2, 2]]), false),
            (gather(1), v(&[&[2, 1], &[2, 3]]), false),
            (gather(0), v(&[&[1, 2], &[3, 2], &[2, 2]]), true),
        ];
        for op in [ReduceOp::Sum, ReduceOp::Mean] {
            cases.push((scatter(op, 0, None), v(&[&[6], &[6], &[6]]), false));
            cases.push((scatter(op, 1, None), v(&[&[2, 4], &[2, 4]]), false));
            let uneven = scatter(op, 0, Some(vec![1, 3, 2]));
            cases.push((uneven, v(&[&[6], &[6], &[6]]), false));
        }
        for (op, shapes, replicated) in cases {
            check(op, &shapes, dtype, replicated);
        }
    }
}

#[test]
fn all_to_all_even_and_split() {
    for dtype in [DType::F32, DType::F64] {
        check(
            Op::AllToAll {
                axis: 0,
                split: None,
            },
            &v(&[&[4, 1], &[4, 1]]),
            dtype,
            false,
        );
        check(
            Op::AllToAll {
                axis: 1,
                split: None,
            },
            &v(&[&[2, 6], &[2, 6], &[2, 6]]),
            dtype,
            false,
        );
        let split = Op::AllToAll {
            axis: 0,
            split: Some(vec![1, 2, 4, 0]),
        };
        check(split, &v(&[&[3, 2], &[4, 2]]), dtype, false);
        let three = Op::AllToAll {
            axis: 0,
            split: Some(vec![0, 1, 2, 3, 0, 0, 1, 1, 1]),
        };
        check(three, &v(&[&[3], &[3], &[3]]), dtype, false);
    }
}

/// Checks the gradient of the reduction `op` with `check` where every
/// reduction is checked: all-reduce (replicated cotangent or not) and reduce
/// over groups of 1 to 4, and reduce-scatter along either axis, even and
/// uneven, an empty share included.
fn reduction_forms(op: ReduceOp, check: fn(Op, &[Vec<usize>], DType, bool)) {
    for dtype in [DType::F32, DType::F64] {
        for n in 1..=4 {
            for shape in [&[5][..], &[2, 3]] {
                let shapes = vec![shape.to_vec(); n];
                check(Op::AllReduce { op }, &shapes, dtype, false);
                check(Op::AllReduce { op }, &shapes, dtype, true);
                check(Op::Reduce { op, root: n - 1 }, &shapes, dtype, false);
            }
        }
        let scatter = |axis, split| Op::ReduceScatter { op, axis, split };
        let cases = [
            (scatter(0, None), v(&[&[6], &[6], &[6]])),
            (scatter(1, None), v(&[&[2, 4], &[2, 4]])),
            (scatter(0, Some(vec![1, 3, 2])), v(&[&[6], &[6], &[6]])),
            (scatter(0, Some(vec![0, 2, 1, 1])), vec![vec![4, 2]; 4]),
        ];
        for (fwd, shapes) in cases {
            check(fwd, &shapes, dtype, false);
        }
    }
}

#[test]
fn max_and_min_by_finite_differences() {
    for op in [ReduceOp::Max, ReduceOp::Min] {
        reduction_forms(op, check_apart);
    }
}

/// The cotangents `ws` of the rule tests below: three ranks of four.
const WS: [[f64; 4]; 3] = [
    [0.5, -0.25, 1.0, 0.125],
    [0.25, 0.5, -1.0, 2.0],
    [1.0, 1.0, 0.5, -0.5],
];

/// Each rank's gradient, as the interpreter computes it, of an all-reduce
/// `op` over three CPU ranks holding `xs`, for the cotangents [`WS`].
fn three_rank_gradients(
    name: &str,
    op: ReduceOp,
    dtype: DType,
    xs: &[[f64; 4]; 3],
) -> Vec<Vec<f64>> {
    let ty = TensorType::new(dtype, &[4]);
    let mut g = Graph::new(name);
    let mut inputs = BTreeMap::new();
    let (mut x, mut w) = (Vec::new(), Vec::new());
    for i in 0..3 {
        let d = Device::cpu(i as u32);
        x.push(input(&mut g, format!("x{i}"), d, &ty));
        w.push(input(&mut g, format!("w{i}"), d, &ty));
        inputs.insert(format!("x{i}"), HostTensor::new(ty.clone(), xs[i].to_vec()));
        inputs.insert(format!("w{i}"), HostTensor::new(ty.clone(), WS[i].to_vec()));
    }
    let y = add_collective(&mut g, Op::AllReduce { op }, &x);
    let cts: Vec<Option<ValueId>> = w.iter().copied().map(Some).collect();
    let dx = transpose(&mut g, y, &cts).unwrap();
    g.set_outputs(dx.into_iter().flatten().collect());
    let out = interpret(&g, &inputs).unwrap();
    out.iter().map(HostTensor::to_f64).collect()
}

/// The tie rule, shown: every rank whose operand equals the extreme gets
/// the whole cotangent (the sum of every rank's), ties and -0/+0 included;
/// a NaN operand never holds the extreme.
#[test]
fn every_tied_rank_gets_the_whole_cotangent() {
    let nan = f64::NAN;
    let xs = [
        [1.0, 2.0, 3.0, -0.0],
        [1.0, 5.0, nan, 0.0],
        [0.0, 5.0, 3.0, -1.0],
    ];
    // Which ranks hold the extreme of each element.
    let max_holders = [[1, 0, 1, 1], [1, 1, 0, 1], [0, 1, 1, 0]];
    let min_holders = [[0, 1, 1, 0], [0, 0, 0, 0], [1, 0, 1, 1]];
    for dtype in [DType::F32, DType::F64] {
        for (op, holders) in [(ReduceOp::Max, max_holders), (ReduceOp::Min, min_holders)] {
            let out = three_rank_gradients("ties", op, dtype, &xs);
            for (i, got) in out.iter().enumerate() {
                for e in 0..4 {
                    let total: f64 = WS.iter().map(|r| r[e]).sum();
                    let want = f64::from(holders[i][e]) * total;
                    assert_eq!(got[e], want, "{op} {dtype}: rank {i} element {e}");
                }
            }
        }
    }
}

#[test]
fn prod_by_finite_differences() {
    reduction_forms(ReduceOp::Product, check);
}

/// A product's gradient at zeros is the product of the others, exactly:
/// one zero operand leaves its own gradient and zeroes the others', two
/// zero every one (never the NaN of 0/0 a division would give).
#[test]
fn prod_gradients_at_zeros_are_exact() {
    let xs = [
        [0.0, 2.0, 0.0, -1.5],
        [3.0, 0.0, 0.0, 2.0],
        [-2.0, 5.0, 4.0, 0.5],
    ];
    for dtype in [DType::F32, DType::F64] {
        let out = three_rank_gradients("zeros", ReduceOp::Product, dtype, &xs);
        for (i, got) in out.iter().enumerate() {
            for e in 0..4 {
                let total: f64 = WS.iter().map(|r| r[e]).sum();
                let others: f64 = (0..3).filter(|j| *j != i).map(|j| xs[j][e]).product();
                assert_eq!(got[e], others * total, "{dtype}: rank {i} element {e}");
            }
        }
    }
}

/// The SPMD product gathers the operands along axis 0, so it needs the
/// graph's rank and an operand with an axis; without either it says so.
#[test]
fn spmd_prod_says_what_it_needs() {
    let comm = |rank| Op::Comm {
        kind: CommOp::AllReduce(ReduceOp::Product),
        comm: 0,
        ranks: 2,
        device: Device::cpu(0),
        rank,
        split: None,
    };
    for (shape, rank, needs) in [(&[2][..], None, "rank"), (&[][..], Some(0), "scalar")] {
        let mut g = Graph::new("rank");
        let ty = TensorType::new(DType::F32, shape);
        let x = input(&mut g, "x".into(), Device::cpu(0), &ty);
        let y = add_collective(&mut g, comm(None), &[x]);
        match transpose_at(&mut g, y, &[Some(x)], rank) {
            Err(e @ GradError::Unsupported { .. }) => {
                assert!(e.to_string().contains(needs), "{e}");
            }
            other => panic!("{shape:?}: {other:?}"),
        }
    }
}

#[test]
fn wrong_arguments_are_errors() {
    let mut g = Graph::new("g");
    let ty = TensorType::new(DType::F32, &[2]);
    let xs: Vec<ValueId> = (0..2)
        .map(|i| input(&mut g, format!("x{i}"), Device::cpu(i), &ty))
        .collect();
    // A wrong count and a wrong type are errors too, never panics.
    let y = add_collective(&mut g, Op::AllReduce { op: ReduceOp::Sum }, &xs);
    assert!(matches!(
        transpose(&mut g, y, &[Some(xs[0])]),
        Err(GradError::Count { .. })
    ));
    let other = input(
        &mut g,
        "z".into(),
        Device::cpu(0),
        &TensorType::new(DType::F32, &[3]),
    );
    let bad = transpose(&mut g, y, &[Some(other), Some(xs[1])]);
    assert!(matches!(bad, Err(GradError::Type { .. })), "{bad:?}");
    assert_eq!(transpose(&mut g, y, &[None, None]), Ok(vec![None, None]));
    assert!(matches!(
        transpose(&mut g, xs[0].node, &[Some(xs[0])]),
        Err(GradError::NotCollective { .. })
    ));
}

/// One SPMD case: each of `n` ranks holds a graph with one `comm.*` node.
fn check_comm(
    kind: CommOp,
    n: usize,
    shapes: &[Vec<usize>],
    split: Option<Vec<usize>>,
    dtype: DType,
    spread: bool,
) {
    let what = format!("comm {kind:?} over {shapes:?}");
    let mut graphs = Vec::new();
    let mut inputs = Vec::new();
    let mut k_out = 0;
    for (r, shape) in shapes.iter().enumerate().take(n) {
        let mut g = Graph::new("rank");
        let d = Device::cpu(0);
        let x = input(&mut g, "x0".into(), d, &TensorType::new(dtype, shape));
        let op = Op::Comm {
            kind,
            comm: 0,
            ranks: n,
            device: d,
            rank: split.as_ref().map(|_| r),
            split: split.clone(),
        };
        let y = add_collective(&mut g, op, &[x]);
        let yv = ValueId { node: y, result: 0 };
        let ty = g.value_type(yv).unwrap().clone();
        let w = input(&mut g, "w0".into(), d, &ty);
        let back =
            transpose_at(&mut g, y, &[Some(w)], Some(r)).unwrap_or_else(|e| panic!("{what}: {e}"));
        let mut outs = vec![yv, w];
        outs.extend(back.iter().flatten());
        k_out = outs.len();
        g.set_outputs(outs);
        let mut m = BTreeMap::new();
        let len = shape.iter().product();
        let x = if spread {
            apart(r, n, len)
        } else {
            values(r * 3 + 1, len)
        };
        m.insert(
            "x0".into(),
            HostTensor::new(TensorType::new(dtype, shape), x),
        );
        m.insert(
            "w0".into(),
            HostTensor::new(ty.clone(), values(r * 3 + 2, ty.num_elements())),
        );
        graphs.push(g);
        inputs.push(m);
    }
    let _ = k_out;
    let f = |ins: &[BTreeMap<String, HostTensor>]| -> f64 {
        interpret_world(&graphs, ins)
            .unwrap()
            .iter()
            .map(|o| dot(&o[0], &o[1]))
            .sum()
    };
    let outs = interpret_world(&graphs, &inputs).unwrap();
    let tol = if dtype == DType::F32 { 1e-4 } else { 1e-9 };
    for r in 0..n {
        let base = inputs[r]["x0"].to_f64();
        // A rank whose cotangent is zero (a broadcast's non-root) has none.
        let got = outs[r]
            .get(2)
            .map_or_else(|| vec![0.0; base.len()], HostTensor::to_f64);
        for e in 0..base.len() {
            let at = |d: f64| {
                let mut ins = inputs.clone();
                let mut vals = base.clone();
                vals[e] += d;
                let ty = ins[r]["x0"].ty.clone();
                ins[r].insert("x0".into(), HostTensor::new(ty, vals));
                f(&ins)
            };
            let fd = (at(H) - at(-H)) / (2.0 * H);
            assert!(
                (fd - got[e]).abs() <= tol * fd.abs().max(1.0),
                "{what} {dtype}: rank {r} element {e}: finite differences {fd}, transpose {}",
                got[e]
            );
        }
    }
}

#[test]
fn comm_forms() {
    for dtype in [DType::F32, DType::F64] {
        for n in [2, 3] {
            let same = vec![vec![6]; n];
            for op in [ReduceOp::Sum, ReduceOp::Mean] {
                check_comm(CommOp::AllReduce(op), n, &same, None, dtype, false);
                check_comm(
                    CommOp::ReduceScatter { op, axis: 0 },
                    n,
                    &same,
                    None,
                    dtype,
                    false,
                );
            }
            check_comm(CommOp::AllGather { axis: 0 }, n, &same, None, dtype, false);
            check_comm(CommOp::AllToAll { axis: 0 }, n, &same, None, dtype, false);
            check_comm(CommOp::Broadcast { root: 1 }, n, &same, None, dtype, false);
            check_comm(CommOp::Barrier, n, &same, None, dtype, false);
        }
        // Uneven: rank 0 sends 1 and 2, rank 1 sends 4 and 0.
        let split = Some(vec![1, 2, 4, 0]);
        check_comm(
            CommOp::AllToAll { axis: 0 },
            2,
            &v(&[&[3], &[4]]),
            split,
            dtype,
            false,
        );
        // Uneven reduce_scatter: 1, 3 and 2 of the 6, gathered back alike;
        // and the all_gather of shards of 1, 3 and 2, scattered back.
        let split = Some(vec![1, 3, 2]);
        let six = v(&[&[6], &[6], &[6]]);
        let parts = v(&[&[1], &[3], &[2]]);
        let gather = CommOp::AllGather { axis: 0 };
        check_comm(gather, 3, &parts, split.clone(), dtype, false);
        for op in [ReduceOp::Sum, ReduceOp::Mean] {
            let kind = CommOp::ReduceScatter { op, axis: 0 };
            check_comm(kind, 3, &six, split.clone(), dtype, false);
        }
    }
}

#[test]
fn comm_max_and_min_by_finite_differences() {
    for dtype in [DType::F32, DType::F64] {
        for op in [ReduceOp::Max, ReduceOp::Min] {
            for n in [2, 3, 4] {
                let same = vec![vec![n * 2]; n];
                check_comm(CommOp::AllReduce(op), n, &same, None, dtype, true);
                let kind = CommOp::ReduceScatter { op, axis: 0 };
                check_comm(kind, n, &same, None, dtype, true);
            }
            let kind = CommOp::ReduceScatter { op, axis: 0 };
            let six = v(&[&[6], &[6], &[6]]);
            check_comm(kind, 3, &six, Some(vec![1, 3, 2]), dtype, true);
        }
    }
}

#[test]
fn comm_prod_by_finite_differences() {
    let op = ReduceOp::Product;
    for dtype in [DType::F32, DType::F64] {
        for n in [1, 2, 3, 4] {
            let same = vec![vec![n * 2, 2]; n];
            check_comm(CommOp::AllReduce(op), n, &same, None, dtype, false);
            let kind = CommOp::ReduceScatter { op, axis: 1 };
            check_comm(kind, n, &vec![vec![3, 2 * n]; n], None, dtype, false);
        }
        let kind = CommOp::ReduceScatter { op, axis: 0 };
        let six = v(&[&[6], &[6], &[6]]);
        check_comm(kind, 3, &six, Some(vec![1, 3, 2]), dtype, false);
    }
}

/// JAX's point: the transpose of an all_reduce.sum whose cotangent is
/// replicated needs no communication. Lowered, the backward adds no copy.
#[test]
fn transpose_of_a_replicated_all_reduce_lowers_to_zero_copies() {
    let ty = TensorType::new(DType::F32, &[64]);
    let build = |with_backward: bool| {
        let mut g = Graph::new("g");
        let xs: Vec<ValueId> = (0..4)
            .map(|i| input(&mut g, format!("x{i}"), Device::cpu(i), &ty))
            .collect();
        let ws: Vec<ValueId> = (0..4)
            .map(|i| input(&mut g, format!("w{i}"), Device::cpu(i), &ty))
            .collect();
        let y = add_collective(&mut g, Op::AllReduce { op: ReduceOp::Sum }, &xs);
        // The cotangent of y is replicated: the same on every rank.
        let c = add_collective(&mut g, Op::AllReduce { op: ReduceOp::Sum }, &ws);
        let cs: Vec<ValueId> = (0..4).map(|r| ValueId { node: c, result: r }).collect();
        let mut outs: Vec<ValueId> = (0..4).map(|r| ValueId { node: y, result: r }).collect();
        outs.extend(&cs);
        if with_backward {
            let nodes = g.node_count();
            let dx =
                transpose(&mut g, y, &cs.iter().copied().map(Some).collect::<Vec<_>>()).unwrap();
            // Only local nodes were recorded.
            assert!(g.node_ids().filter(|id| id.0.index() >= nodes).all(|id| !g
                .node(id)
                .unwrap()
                .op
                .is_collective()));
            outs.extend(dx.into_iter().flatten());
        }
        g.set_outputs(outs);
        crate::run_pipeline(
            &mut g,
            crate::DEFAULT_PIPELINE,
            Default::default(),
            Default::default(),
        )
        .unwrap();
        let copies = g
            .node_ids()
            .filter(|id| g.node(*id).unwrap().op.is_transfer())
            .count();
        (g, copies)
    };
    let (_, forward) = build(false);
    let (g, both) = build(true);
    assert!(forward > 0, "the forward moves data");
    assert_eq!(
        both,
        forward,
        "the backward added copies:\n{}",
        fuel_graph_ext::text::print(&g)
    );
}
