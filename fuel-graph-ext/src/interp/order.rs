//! Fold order: how far a lowered graph's results may lie from the
//! interpreter's where a float collective folds its shards in another
//! order, and the check of one against the other.
//!
//! The interpreter folds a collective's shards in rank order, rounding at
//! every step. A lowering folds them in the order its algorithm moves
//! them (islands first, up a tree, around a ring), and float `sum`,
//! `prod` and `mean` round differently in another order. So the meaning
//! of such a collective over three or more ranks is a fold in *some*
//! order, each step rounded to the dtype (Mean: in its accumulator); over
//! one or two ranks every order gives the same bits (IEEE addition and
//! multiplication commute). [`fold_bounds`] walks the original graph with
//! the interpreter and gives, per result element, how far a value folded
//! in any order may be from the interpreter's (Higham, *Accuracy and
//! Stability of Numerical Algorithms*, §4.2: any order of a rounded sum of
//! `n` terms is within `γ(n−1)·Σ|xᵢ|` of the exact sum, `γ(k) = ku/(1−ku)`),
//! or that every order gives the same bits, or that no bound holds (an
//! order may overflow, or the value went through an op the rules do not
//! follow). [`compare`] checks a lowered graph's result against it.
//! Integers, bool, `max`, `min` and every collective that only moves data
//! stay exact.

use super::{eval, HostTensor, InterpError};
use crate::dtype::{DType, TensorType};
use crate::graph::{Graph, ValueId};
use crate::op::{ElementwiseOp, Op, ReduceOp};
use std::collections::{BTreeMap, HashMap};

/// How far each element of one value may lie from the interpreter's:
/// `None` when every element is exact; otherwise one bound per element,
/// `0.0` for exact (same bits, any NaN matching any NaN), a finite
/// positive `b` for `|got − want| ≤ b` with both finite, and infinity
/// where no bound holds (the element is not compared).
pub type Bounds = Option<Vec<f64>>;

/// The rounding of one float dtype: its unit roundoff, largest finite
/// value, smallest normal and smallest subnormal.
#[derive(Clone, Copy)]
struct Format {
    u: f64,
    max: f64,
    normal: f64,
    tiny: f64,
}

fn format(d: DType) -> Option<Format> {
    let f = |p: i32, emax: i32, emin: i32| Format {
        u: 2f64.powi(-p),
        max: (2.0 - 2f64.powi(1 - p)) * 2f64.powi(emax),
        normal: 2f64.powi(emin),
        tiny: 2f64.powi(emin - p + 1),
    };
    match d {
        DType::F16 => Some(f(11, 15, -14)),
        DType::BF16 => Some(f(8, 127, -126)),
        DType::F32 => Some(f(24, 127, -126)),
        DType::F64 => Some(Format {
            u: f64::EPSILON / 2.0,
            max: f64::MAX,
            normal: f64::MIN_POSITIVE,
            tiny: f64::from_bits(1),
        }),
        _ => None,
    }
}

/// `γ(k) = ku / (1 − ku)`, infinite where `ku ≥ 1`.
fn gamma(k: usize, u: f64) -> f64 {
    let ku = k as f64 * u;
    if ku >= 1.0 {
        f64::INFINITY
    } else {
        ku / (1.0 - ku)
    }
}

/// Rounding the bound's own arithmetic may lose: a relative margin far
/// above f64's rounding of a few operations, far below any dtype's ulp.
const MARGIN: f64 = 1.0 + 1e-9;

/// The bound of a sum of `xs` (whose own bounds are `es`) folded in any
/// order and rounded to `f` at every step, against the same sum in
/// another order: 0 where every order gives the same bits.
fn sum_bound(xs: &[f64], es: &[f64], f: Format) -> f64 {
    let n = xs.len();
    if es.iter().any(|e| e.is_infinite()) {
        return f64::INFINITY;
    }
    let exact_in = es.iter().all(|e| *e == 0.0);
    if xs.iter().any(|x| x.is_nan()) {
        return if exact_in { 0.0 } else { f64::INFINITY };
    }
    let g = gamma(n.saturating_sub(1), f.u);
    let s: f64 = xs
        .iter()
        .filter(|x| x.is_finite())
        .map(|x| x.abs())
        .sum::<f64>()
        + es.iter().sum::<f64>();
    // No partial sum of any order reaches past `s·(1+γ)`: below the
    // largest finite value, no order overflows.
    let bounded = s * (1.0 + g) * MARGIN <= f.max;
    if xs.iter().any(|x| x.is_infinite()) {
        // inf (or NaN, both infinities met) in every order, unless a
        // finite part may overflow to the other infinity.
        return if exact_in && bounded {
            0.0
        } else {
            f64::INFINITY
        };
    }
    if !bounded {
        return f64::INFINITY;
    }
    if exact_in && n <= 2 {
        return 0.0;
    }
    (es.iter().sum::<f64>() + 2.0 * g * s) * MARGIN
}

/// The bound of a product of `xs`, all exact, folded in any order: 0
/// where every order gives the same bits (one or two operands; a zero or
/// an infinity that no order's overflow or underflow can reach).
fn prod_bound(xs: &[f64], f: Format) -> f64 {
    let n = xs.len();
    if n <= 2 || xs.iter().any(|x| x.is_nan()) {
        return 0.0;
    }
    let g = gamma(n, f.u);
    let zero = xs.contains(&0.0);
    let inf = xs.iter().any(|x| x.is_infinite());
    let logs = xs
        .iter()
        .filter(|x| x.is_finite() && **x != 0.0)
        .map(|x| x.abs().log2());
    // Every partial product of the finite nonzero operands lies between
    // the product of those below 1 and the product of those above 1.
    let (mut hi, mut lo) = (0.0f64, 0.0f64);
    for l in logs {
        hi += l.max(0.0);
        lo += l.min(0.0);
    }
    let slack = (1.0 + g).log2() + 1e-6;
    let no_overflow = hi + slack < f.max.log2();
    let no_underflow = lo - slack > f.normal.log2();
    match (zero, inf) {
        // A partial holding the zero is ±0 or NaN, one holding the
        // infinity ±inf or NaN: they meet as NaN in every order.
        (true, true) => 0.0,
        // ±0 with the sign of every order, unless an order overflows
        // first and meets the zero as NaN.
        (true, false) if no_overflow => 0.0,
        (false, true) if no_underflow => 0.0,
        (false, false) if no_overflow && no_underflow => {
            let p = (xs.iter().map(|x| x.abs().log2()).sum::<f64>()).exp2();
            2.0 * g * p * (1.0 + g) * MARGIN
        }
        _ => f64::INFINITY,
    }
}

/// The bound of a `Mean` of `xs` (bounds `es`) in dtype `d`: the sum in
/// its accumulator in any order, divided by `n` there, rounded back to `d`.
fn mean_bound(xs: &[f64], es: &[f64], d: DType) -> f64 {
    let (Some(acc), Some(out)) = (format(d.mean_accumulator()), format(d)) else {
        return 0.0;
    };
    let e_sum = sum_bound(xs, es, acc);
    if e_sum == 0.0 || e_sum.is_infinite() {
        return e_sum;
    }
    let n = xs.len() as f64;
    let s: f64 = xs.iter().map(|x| x.abs()).sum::<f64>() + es.iter().sum::<f64>();
    let q = s * (1.0 + gamma(xs.len(), acc.u)) / n * MARGIN;
    let e_q = e_sum / n + 2.0 * acc.u * q + acc.tiny;
    if d == d.mean_accumulator() {
        return e_q * MARGIN;
    }
    if (q + e_q) * (1.0 + out.u) > out.max {
        return f64::INFINITY;
    }
    (e_q + 2.0 * out.u * (q + e_q) + out.tiny) * MARGIN
}

/// Whether `op` over `n` shards of `dtype` may give other bits in
/// another fold order.
fn order_dependent(op: ReduceOp, dtype: DType, n: usize) -> bool {
    dtype.is_float() && n > 2 && matches!(op, ReduceOp::Sum | ReduceOp::Product | ReduceOp::Mean)
}

/// Element `i`'s bound of one fold of `op` over `vals` (bounds `bs`).
fn fold_element(op: ReduceOp, dtype: DType, vals: &[Vec<f64>], bs: &[&Bounds], i: usize) -> f64 {
    let xs: Vec<f64> = vals.iter().map(|v| v[i]).collect();
    let es: Vec<f64> = bs
        .iter()
        .map(|b| b.as_ref().map_or(0.0, |b| b[i]))
        .collect();
    let Some(f) = format(dtype) else {
        // Integers fold exactly in any order; an operand already out of
        // reach (an integer cast of an inexact float) stays so.
        return if es.iter().all(|e| *e == 0.0) {
            0.0
        } else {
            f64::INFINITY
        };
    };
    match op {
        ReduceOp::Sum => sum_bound(&xs, &es, f),
        ReduceOp::Mean => mean_bound(&xs, &es, dtype),
        ReduceOp::Product if es.iter().all(|e| *e == 0.0) => prod_bound(&xs, f),
        ReduceOp::Product => f64::INFINITY,
        // max and min are 1-Lipschitz in every operand.
        ReduceOp::Max | ReduceOp::Min => es.iter().fold(0.0, |a, e| a.max(*e)),
    }
}

/// The bounds of a fold of `op` over `args` (bounds `bs`), elementwise.
fn fold(op: ReduceOp, dtype: DType, args: &[&HostTensor], bs: &[&Bounds]) -> Bounds {
    let n = args.len();
    if bs.iter().all(|b| b.is_none()) && !order_dependent(op, dtype, n) {
        return None;
    }
    let vals: Vec<Vec<f64>> = args.iter().map(|a| a.to_f64()).collect();
    let len = args.first().map_or(0, |a| a.len());
    Some(
        (0..len)
            .map(|i| fold_element(op, dtype, &vals, bs, i))
            .collect(),
    )
}

/// The bounds of one result of a data movement (`slice`, `concat`,
/// `all_gather`, ...): the same op moving the operands' bounds, held as
/// f64 tensors of the operands' shapes.
fn moved(op: &Op, ty: &TensorType, args: &[&HostTensor], bs: &[&Bounds]) -> Vec<Bounds> {
    let as_tensor = |a: &HostTensor, b: &Bounds| {
        let data = b.clone().unwrap_or_else(|| vec![0.0; a.len()]);
        HostTensor::new(TensorType::new(DType::F64, &a.ty.shape), data)
    };
    let held: Vec<HostTensor> = args.iter().zip(bs).map(|(a, b)| as_tensor(a, b)).collect();
    let refs: Vec<&HostTensor> = held.iter().collect();
    let wide = TensorType::new(DType::F64, &ty.shape);
    match eval(op, &wide, &refs, &BTreeMap::new()) {
        Ok(out) => out.into_iter().map(|t| Some(t.to_f64())).collect(),
        // Not a movement the rules follow: nothing is bounded.
        Err(_) => vec![Some(vec![f64::INFINITY; ty.num_elements()])],
    }
}

/// Every element unbounded, for each of `count` results of `ty`'s size.
fn unbounded(ty: &TensorType, count: usize) -> Vec<Bounds> {
    vec![Some(vec![f64::INFINITY; ty.num_elements()]); count]
}

/// The bounds of a node's results, given its operands and theirs.
fn node_bounds(
    op: &Op,
    ty: &TensorType,
    args: &[&HostTensor],
    bs: &[&Bounds],
    results: usize,
) -> Vec<Bounds> {
    let dtype = ty.dtype;
    let any = bs.iter().any(|b| b.is_some());
    match op {
        Op::AllReduce { op: r } => vec![fold(*r, dtype, args, bs); results],
        Op::Reduce { op: r, .. } | Op::DriverAllReduce { op: r, .. } => {
            vec![fold(*r, dtype, args, bs)]
        }
        Op::ReduceScatter { op: r, axis, split } => match fold(*r, dtype, args, bs) {
            None => vec![None; results],
            Some(full) => {
                // The whole fold's bounds, cut as the results are.
                let held = args.first().map(|a| {
                    HostTensor::new(TensorType::new(DType::F64, &a.ty.shape), full.clone())
                });
                let Some(held) = held else {
                    return unbounded(ty, results);
                };
                let copies: Vec<&HostTensor> = args.iter().map(|_| &held).collect();
                let as_max = Op::ReduceScatter {
                    op: ReduceOp::Max,
                    axis: *axis,
                    split: split.clone(),
                };
                let wide = TensorType::new(DType::F64, &ty.shape);
                match eval(&as_max, &wide, &copies, &BTreeMap::new()) {
                    Ok(out) => out.into_iter().map(|t| Some(t.to_f64())).collect(),
                    Err(_) => unbounded(ty, results),
                }
            }
        },
        _ if !any => vec![None; results],
        Op::Copy { .. }
        | Op::Move { .. }
        | Op::Slice { .. }
        | Op::Concat { .. }
        | Op::Broadcast { .. }
        | Op::AllGather { .. }
        | Op::AllToAll { .. } => moved(op, ty, args, bs),
        Op::Elementwise { kind, .. } => match kind {
            // A fixed order is one of every order.
            ElementwiseOp::Add => vec![fold(ReduceOp::Sum, dtype, args, bs)],
            ElementwiseOp::Max => vec![fold(ReduceOp::Max, dtype, args, bs)],
            ElementwiseOp::Min => vec![fold(ReduceOp::Min, dtype, args, bs)],
            ElementwiseOp::Mul => unbounded(ty, 1),
            ElementwiseOp::Eq => vec![compared(ty, bs)],
        },
        Op::Div { by, .. } => vec![divided(args, bs, *by, dtype)],
        Op::Cast { to, .. } => vec![cast(args, bs, *to)],
        _ => unbounded(ty, results),
    }
}

/// The bounds of an `eq`: its result is 0 or 1, so it lies within 1 of the
/// interpreter's wherever an operand's element may lie off, and is exact
/// elsewhere.
fn compared(ty: &TensorType, bs: &[&Bounds]) -> Bounds {
    let off = |e: usize| {
        bs.iter().any(|b| {
            b.as_ref()
                .is_some_and(|v| v.get(e).is_none_or(|x| *x != 0.0))
        })
    };
    Some(
        (0..ty.num_elements())
            .map(|e| if off(e) { 1.0 } else { 0.0 })
            .collect(),
    )
}

/// The bounds of `args[0]` (bounds `bs[0]`) divided by `by` and rounded.
fn divided(args: &[&HostTensor], bs: &[&Bounds], by: u64, dtype: DType) -> Bounds {
    let (Some(a), Some(Some(b)), Some(f)) = (args.first(), bs.first(), format(dtype)) else {
        return bs.first().and_then(|b| (*b).clone());
    };
    let by = by.max(1) as f64;
    let xs = a.to_f64();
    Some(
        xs.iter()
            .zip(b)
            .map(|(x, e)| match *e {
                0.0 => 0.0,
                e if e.is_infinite() => e,
                e => (e / by + 2.0 * f.u * (x.abs() + e) / by + f.tiny) * MARGIN,
            })
            .collect(),
    )
}

/// The bounds of `args[0]` (bounds `bs[0]`) cast to `to`.
fn cast(args: &[&HostTensor], bs: &[&Bounds], to: DType) -> Bounds {
    let (Some(a), Some(Some(b))) = (args.first(), bs.first()) else {
        return None;
    };
    let f = format(to);
    let xs = a.to_f64();
    Some(
        xs.iter()
            .zip(b)
            .map(|(x, e)| match (*e, f) {
                (0.0, _) => 0.0,
                (e, Some(f)) if (x.abs() + e) * (1.0 + f.u) * MARGIN <= f.max => {
                    (e + 2.0 * f.u * (x.abs() + e) + f.tiny) * MARGIN
                }
                // An integer cast of an inexact value, or one that may
                // overflow: no bound.
                _ => f64::INFINITY,
            })
            .collect(),
    )
}

/// The interpreter's results of `g` on `inputs`, and the bound of each
/// result element against a fold in any other order (see the module
/// documentation).
pub fn fold_bounds(
    g: &Graph,
    inputs: &BTreeMap<String, HostTensor>,
) -> Result<(Vec<HostTensor>, Vec<Bounds>), InterpError> {
    let (order, acyclic) = g.topo_order_acyclic();
    if !acyclic {
        return Err(InterpError::Invalid("the graph has a cycle".into()));
    }
    let mut env: HashMap<ValueId, (HostTensor, Bounds)> = HashMap::new();
    for id in order {
        let Some(n) = g.node(id) else { continue };
        let mut args = Vec::with_capacity(n.operands.len());
        let mut bs = Vec::with_capacity(n.operands.len());
        for v in &n.operands {
            let (t, b) = env
                .get(v)
                .ok_or_else(|| InterpError::Invalid("an operand is undefined".into()))?;
            args.push(t);
            bs.push(b);
        }
        let results = eval(&n.op, &n.ty, &args, inputs)?;
        let bounds = node_bounds(&n.op, &n.ty, &args, &bs, results.len());
        let made: Vec<(HostTensor, Bounds)> = results.into_iter().zip(bounds).collect();
        for (i, r) in made.into_iter().enumerate() {
            env.insert(
                ValueId {
                    node: id,
                    result: i as u32,
                },
                r,
            );
        }
    }
    let mut values = Vec::new();
    let mut bounds = Vec::new();
    for v in g.outputs() {
        let (t, b) = env
            .get(v)
            .ok_or_else(|| InterpError::Invalid("a returned value is undefined".into()))?;
        values.push(t.clone());
        bounds.push(b.clone());
    }
    Ok((values, bounds))
}

/// How one result of a lowered graph compares with the interpreter's
/// result of the original graph under its [`Bounds`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Agreement {
    /// Elements with the same bits (any NaN matching any NaN).
    pub same: usize,
    /// Elements that differ within their fold-order bound.
    pub within: usize,
    /// Elements no bound reaches (an order may overflow there, or the
    /// value went through an op the rules do not follow): not compared.
    pub unchecked: usize,
    /// Elements that differ past their bound.
    pub wrong: usize,
    /// The first wrong element: its index, value, the interpreter's and
    /// the bound.
    pub first_wrong: Option<(usize, f64, f64, f64)>,
}

/// Compares `got` (the lowered graph's result) with `want` (the
/// original's) element by element under `bounds`.
pub fn compare(got: &HostTensor, want: &HostTensor, bounds: &Bounds) -> Agreement {
    let mut a = Agreement::default();
    if got.ty != want.ty {
        a.wrong = want.len().max(1);
        return a;
    }
    let size = got.ty.dtype.size_bytes().max(1);
    let float = got.ty.dtype.is_float();
    let (g, w) = (got.to_f64(), want.to_f64());
    let chunks = got.bytes().chunks(size).zip(want.bytes().chunks(size));
    for (i, (gb, wb)) in chunks.enumerate() {
        let b = bounds
            .as_ref()
            .map_or(0.0, |b| b.get(i).copied().unwrap_or(0.0));
        if gb == wb || (float && g[i].is_nan() && w[i].is_nan()) {
            a.same += 1;
        } else if b.is_infinite() {
            a.unchecked += 1;
        } else if b > 0.0 && g[i].is_finite() && w[i].is_finite() && (g[i] - w[i]).abs() <= b {
            a.within += 1;
        } else {
            a.wrong += 1;
            if a.first_wrong.is_none() {
                a.first_wrong = Some((i, g[i], w[i], b));
            }
        }
    }
    a
}

/// Interprets `original` and `lowered` on `inputs` and compares each
/// result of the lowered graph with the original's under the original's
/// fold-order [`Bounds`]: what "the lowering means what the graph means"
/// is, for every dtype (docs/lowering.md, "Fold order").
pub fn check_lowering(
    original: &Graph,
    lowered: &Graph,
    inputs: &BTreeMap<String, HostTensor>,
) -> Result<Vec<Agreement>, InterpError> {
    let (want, bounds) = fold_bounds(original, inputs)?;
    let got = super::interpret(lowered, inputs)?;
    if got.len() != want.len() {
        return Err(InterpError::Invalid(format!(
            "the lowered graph returns {} result(s) but the original returns {}",
            got.len(),
            want.len()
        )));
    }
    Ok(got
        .iter()
        .zip(&want)
        .zip(&bounds)
        .map(|((g, w), b)| compare(g, w, b))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fmt(d: DType) -> Format {
        format(d).unwrap_or(Format {
            u: 0.0,
            max: 0.0,
            normal: 0.0,
            tiny: 0.0,
        })
    }

    #[test]
    fn the_formats_are_the_dtypes_own() {
        let h = fmt(DType::F16);
        assert_eq!(
            (h.max, h.normal, h.tiny),
            (65504.0, 2f64.powi(-14), 2f64.powi(-24))
        );
        let f = fmt(DType::F32);
        assert_eq!(f.max, f64::from(f32::MAX));
        assert_eq!(f.tiny, f64::from(f32::from_bits(1)));
        assert_eq!(fmt(DType::BF16).max, f64::from(half::bf16::MAX.to_f32()));
    }

    #[test]
    fn sums_commute_over_two_and_are_bounded_over_three() {
        let h = fmt(DType::F16);
        assert_eq!(sum_bound(&[2048.0, 1.0], &[0.0, 0.0], h), 0.0);
        let b = sum_bound(&[1.0, 2048.0, 1.0], &[0.0; 3], h);
        // 2048 + 1 + 1 is 2048 in rank order and 2050 in another: 2 apart.
        assert!((2.0..4.1).contains(&b), "{b}");
        // Near 65504 an order may overflow: no bound.
        assert!(sum_bound(&[60000.0, 60000.0, -60000.0], &[0.0; 3], h).is_infinite());
        // NaN in every order.
        assert_eq!(sum_bound(&[f64::NAN, 1.0, 2.0], &[0.0; 3], h), 0.0);
        assert!(sum_bound(&[1.0, 2.0, 3.0], &[f64::INFINITY, 0.0, 0.0], h).is_infinite());
    }

    #[test]
    fn a_product_with_a_zero_is_exact_unless_an_order_overflows() {
        let f = fmt(DType::F32);
        let big = 2f64.powi(127);
        assert!(prod_bound(&[-3.0, -0.0, big], f).is_infinite());
        assert_eq!(prod_bound(&[-3.0, -0.0, 2f64.powi(100)], f), 0.0);
        assert_eq!(prod_bound(&[f64::INFINITY, 0.0, 5.0], f), 0.0);
        assert!(prod_bound(&[2.0, 3.0, 5.0], f) > 0.0);
        assert_eq!(prod_bound(&[big, big], f), 0.0);
    }

    /// An `eq` of a value that an order may change is 0 or 1 either way:
    /// bound 1 wherever its operand's bound is not 0 (0 elsewhere), and an
    /// `eq` of exact values is exact.
    #[test]
    fn an_eq_of_an_inexact_value_is_within_one() {
        let src = "graph @g {
  %0 = input \"a\" @cpu:0 : f32[2]
  %1 = input \"b\" @cpu:1 : f32[2]
  %2 = input \"c\" @cpu:2 : f32[2]
  %3:3 = all_reduce.sum %0, %1, %2 : f32[2]
  %4 = eq %3#0, %0 @cpu:0 : f32[2]
  %5 = eq %0, %0 @cpu:0 : f32[2]
  return %4, %5, %3#0
}
";
        let g = crate::text::parse(src).unwrap();
        let t = |v: [f32; 2]| HostTensor::from_slice(&[2], &v).unwrap();
        // Element 0 rounds by order (1 + 2^-24 + 2^-24).
        let tiny = f32::EPSILON / 2.0;
        let inputs: BTreeMap<String, HostTensor> = [
            ("a".to_string(), t([1.0, 1.0])),
            ("b".to_string(), t([tiny, 0.0])),
            ("c".to_string(), t([tiny, 0.0])),
        ]
        .into();
        let (values, bounds) = fold_bounds(&g, &inputs).unwrap();
        assert_eq!(values[0].to_f64(), [1.0, 1.0]);
        let sum = bounds[2].clone().unwrap();
        assert!(sum[0] > 0.0, "{sum:?}");
        let want: Vec<f64> = sum
            .iter()
            .map(|b| if *b == 0.0 { 0.0 } else { 1.0 })
            .collect();
        assert_eq!(bounds[0], Some(want));
        assert_eq!(bounds[1], None, "an eq of exact values is exact");
    }
}
