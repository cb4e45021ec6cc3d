//! The interpreter's element semantics, computed exactly.
//!
//! Elements are widened to values that hold every dtype exactly
//! ([`Vals`]: integers and bool in `i128`, floats in `f64`), computed on, and
//! rounded back once per step:
//! - integers wrap to their width (two's complement) after every step and
//!   divide toward zero; bool is 0 or 1, so add and max are OR, mul and min
//!   AND, and division keeps true only when dividing by 1;
//! - floats add and multiply in f64 and round once to their dtype (to
//!   nearest, ties to even), which equals the dtype's own correctly rounded
//!   operation: f64 has more than twice the precision of f32, f16 and bf16
//!   plus two bits, so the double rounding is innocuous; `max`/`min` let a
//!   number win over a NaN and order -0 below +0;
//! - a float divided by `N` is the exact quotient rounded once (in f64 for
//!   divisors small enough that this is exact, else
//!   [`crate::elem::div_float_bits`]);
//! - `eq` is 1 where its two operands are equal and 0 elsewhere, in their
//!   dtype: IEEE equality for floats (NaN equals nothing, -0 equals +0),
//!   truth values for bool;
//! - `cast` converts the value: integers wrap, floats round once;
//! - `Mean` widens each operand to [`DType::mean_accumulator`], sums there
//!   (wrapping or rounding each step, in operand order), divides by the
//!   number of operands and casts back: the definition the lowering's
//!   `cast`, `add`, `div`, `cast` nodes compute (docs/text-ir.md).
//!
//! This is written apart from the kernels' arithmetic (`crate::elem`), so
//! that it checks them; it shares only `elem`'s correctly rounded
//! conversion to f16/bf16 and its division by huge divisors, which `elem`'s
//! tests check exhaustively against integer arithmetic.

use super::HostTensor;
use crate::dtype::DType;
use crate::elem::{self, Format};
use crate::op::{ElementwiseOp, ReduceOp};

/// A tensor's elements as exact values.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Vals {
    /// Integer and bool elements.
    Ints(Vec<i128>),
    /// Float elements.
    Floats(Vec<f64>),
}

impl Vals {
    /// The elements of `bytes` (little-endian `dtype` elements).
    pub(crate) fn decode(dtype: DType, bytes: &[u8]) -> Vals {
        let size = dtype.size_bytes();
        let chunks = bytes.chunks_exact(size);
        let word = |c: &[u8]| -> u64 {
            c.iter()
                .rev()
                .fold(0u64, |acc, b| (acc << 8) | u64::from(*b))
        };
        match dtype {
            DType::F32 => Vals::Floats(
                chunks
                    .map(|c| f64::from(f32::from_bits(word(c) as u32)))
                    .collect(),
            ),
            DType::F64 => Vals::Floats(chunks.map(|c| f64::from_bits(word(c))).collect()),
            DType::F16 => Vals::Floats(
                chunks
                    .map(|c| half::f16::from_bits(word(c) as u16).to_f64())
                    .collect(),
            ),
            DType::BF16 => Vals::Floats(
                chunks
                    .map(|c| half::bf16::from_bits(word(c) as u16).to_f64())
                    .collect(),
            ),
            DType::Bool => Vals::Ints(chunks.map(|c| i128::from(word(c) != 0)).collect()),
            _ => {
                // Sign-extend the signed types from their width.
                let signed = !dtype.is_unsigned();
                let bits = 8 * size as u32;
                Vals::Ints(
                    chunks
                        .map(|c| {
                            let w = i128::from(word(c));
                            if signed && w >> (bits - 1) & 1 == 1 {
                                w - (1i128 << bits)
                            } else {
                                w
                            }
                        })
                        .collect(),
                )
            }
        }
    }

    /// Little-endian `dtype` elements of these values, each rounded or
    /// wrapped to the dtype.
    pub(crate) fn encode(&self, dtype: DType) -> Vec<u8> {
        let size = dtype.size_bytes();
        let mut out = Vec::with_capacity(self.len() * size);
        match self {
            Vals::Floats(v) if dtype.is_float() => {
                for x in v {
                    put_float(dtype, *x, &mut out);
                }
            }
            Vals::Floats(v) => {
                for x in v {
                    put_int(dtype, *x as i128, &mut out);
                }
            }
            Vals::Ints(v) if dtype.is_float() => {
                for x in v {
                    put_float(dtype, *x as f64, &mut out);
                }
            }
            Vals::Ints(v) => {
                for x in v {
                    put_int(dtype, *x, &mut out);
                }
            }
        }
        out
    }

    /// How many elements.
    pub(crate) fn len(&self) -> usize {
        match self {
            Vals::Ints(v) => v.len(),
            Vals::Floats(v) => v.len(),
        }
    }
}

/// Appends `x` rounded to float `dtype`.
fn put_float(dtype: DType, x: f64, out: &mut Vec<u8>) {
    match dtype {
        DType::F64 => out.extend_from_slice(&x.to_le_bytes()),
        DType::F16 => {
            out.extend_from_slice(&(elem::round_f64_bits(Format::F16, x) as u16).to_le_bytes())
        }
        DType::BF16 => {
            out.extend_from_slice(&(elem::round_f64_bits(Format::BF16, x) as u16).to_le_bytes())
        }
        // Rust's f64 -> f32 conversion rounds once, to nearest even.
        _ => out.extend_from_slice(&(x as f32).to_le_bytes()),
    }
}

/// Appends `v` wrapped to integer `dtype` (bool: 1 for any non-zero value).
fn put_int(dtype: DType, v: i128, out: &mut Vec<u8>) {
    if dtype == DType::Bool {
        out.push(u8::from(v != 0));
    } else {
        // The low bytes of the two's complement are the wrapped value.
        out.extend_from_slice(&v.to_le_bytes()[..dtype.size_bytes()]);
    }
}

/// `v` wrapped to integer `dtype`, as a value.
fn wrap(dtype: DType, v: i128) -> i128 {
    if dtype == DType::Bool {
        return i128::from(v != 0);
    }
    let bits = 8 * dtype.size_bytes() as u32;
    let m = v.rem_euclid(1i128 << bits);
    if !dtype.is_unsigned() && m >> (bits - 1) == 1 {
        m - (1i128 << bits)
    } else {
        m
    }
}

/// `x` rounded to float `dtype`, as a value.
fn round(dtype: DType, x: f64) -> f64 {
    match dtype {
        DType::F64 => x,
        DType::F16 => half::f16::from_bits(elem::round_f64_bits(Format::F16, x) as u16).to_f64(),
        DType::BF16 => half::bf16::from_bits(elem::round_f64_bits(Format::BF16, x) as u16).to_f64(),
        _ => f64::from(x as f32),
    }
}

/// `max` with a NaN losing to a number and -0 below +0.
fn max_of(a: f64, b: f64) -> f64 {
    match (a.is_nan(), b.is_nan()) {
        (true, _) => b,
        (false, true) => a,
        _ if a == b => {
            if a.is_sign_negative() {
                b
            } else {
                a
            }
        }
        _ => a.max(b),
    }
}

/// `min` with a NaN losing to a number and -0 below +0: `max` of the
/// negations, negated (negation is exact and keeps a NaN's payload).
fn min_of(a: f64, b: f64) -> f64 {
    -max_of(-a, -b)
}

/// `kind(a, b)` in `dtype`, element by element, into `acc`.
fn combine(kind: ElementwiseOp, dtype: DType, acc: &mut Vals, b: &Vals) {
    match (acc, b) {
        (Vals::Ints(acc), Vals::Ints(b)) => {
            for (x, y) in acc.iter_mut().zip(b) {
                *x = wrap(
                    dtype,
                    match kind {
                        ElementwiseOp::Add => x.wrapping_add(*y),
                        // Wrapping in i128 keeps the product mod 2^128, and
                        // every width divides 128.
                        ElementwiseOp::Mul => x.wrapping_mul(*y),
                        ElementwiseOp::Max => (*x).max(*y),
                        ElementwiseOp::Min => (*x).min(*y),
                        // bool decodes to its truth value, so this compares
                        // truth values.
                        ElementwiseOp::Eq => i128::from(*x == *y),
                    },
                );
            }
        }
        (Vals::Floats(acc), Vals::Floats(b)) => {
            for (x, y) in acc.iter_mut().zip(b) {
                *x = match kind {
                    ElementwiseOp::Add => round(dtype, *x + *y),
                    ElementwiseOp::Mul => round(dtype, *x * *y),
                    ElementwiseOp::Max => max_of(*x, *y),
                    ElementwiseOp::Min => min_of(*x, *y),
                    // IEEE equality: NaN equals nothing, -0 equals +0.
                    ElementwiseOp::Eq => f64::from(u8::from(*x == *y)),
                };
            }
        }
        // Operands of one op share a dtype, so they decode alike.
        _ => {}
    }
}

/// The fold of `kind` over `args` (all of `dtype`), in operand order.
fn fold_vals(kind: ElementwiseOp, dtype: DType, args: &[Vals]) -> Vals {
    let mut it = args.iter();
    let mut acc = it.next().cloned().unwrap_or(Vals::Ints(Vec::new()));
    for a in it {
        combine(kind, dtype, &mut acc, a);
    }
    acc
}

/// Divides every value (of `dtype`) by `by` (1 or more).
fn divide_vals(dtype: DType, vals: &mut Vals, by: u64) {
    match vals {
        Vals::Ints(v) => {
            for x in v {
                // i128 division truncates toward zero.
                *x = wrap(dtype, *x / i128::from(by));
            }
        }
        Vals::Floats(v) => {
            // Both operands exact in f64 and one division there, rounded
            // once more to the dtype: exact for f64 up to 2^53, and for the
            // narrower floats while by < 2^24 (docs/backends.md).
            let small = if dtype == DType::F64 {
                by <= 1 << 53
            } else {
                by < 1 << 24
            };
            for x in v {
                *x = if small {
                    round(dtype, *x / by as f64)
                } else {
                    let fmt = match dtype {
                        DType::F16 => Format::F16,
                        DType::BF16 => Format::BF16,
                        DType::F64 => Format::F64,
                        _ => Format::F32,
                    };
                    let bits = Vals::Floats(vec![*x]).encode(dtype);
                    let word = bits
                        .iter()
                        .rev()
                        .fold(0u64, |a, b| (a << 8) | u64::from(*b));
                    let q = elem::div_float_bits(fmt, word, by).to_le_bytes();
                    match Vals::decode(dtype, &q[..dtype.size_bytes()]) {
                        Vals::Floats(f) => f.first().copied().unwrap_or(f64::NAN),
                        Vals::Ints(_) => f64::NAN,
                    }
                };
            }
        }
    }
}

/// `args` (each of `dtype`) folded with `kind`, as bytes.
pub(crate) fn fold(kind: ElementwiseOp, dtype: DType, args: &[&HostTensor]) -> Vec<u8> {
    let vals: Vec<Vals> = args
        .iter()
        .map(|t| Vals::decode(dtype, t.bytes()))
        .collect();
    fold_vals(kind, dtype, &vals).encode(dtype)
}

/// `t` divided by `by`, as bytes.
pub(crate) fn divide(t: &HostTensor, by: u64) -> Vec<u8> {
    let dtype = t.ty.dtype;
    let mut v = Vals::decode(dtype, t.bytes());
    divide_vals(dtype, &mut v, by);
    v.encode(dtype)
}

/// `t` converted to `to`, as bytes: integers wrap, floats round once.
pub(crate) fn cast(t: &HostTensor, to: DType) -> Vec<u8> {
    Vals::decode(t.ty.dtype, t.bytes()).encode(to)
}

/// The reduction `op` of `args` (each of `dtype`), as bytes. `Mean` widens
/// to [`DType::mean_accumulator`], sums, divides by the operand count and
/// converts back.
pub(crate) fn reduce(op: ReduceOp, dtype: DType, args: &[&HostTensor]) -> Vec<u8> {
    if op != ReduceOp::Mean {
        return fold(op.combiner(), dtype, args);
    }
    let acc = dtype.mean_accumulator();
    let widened: Vec<Vals> = args
        .iter()
        .map(|t| {
            // The conversion to the accumulator: exact, as it only widens.
            let bytes = Vals::decode(dtype, t.bytes()).encode(acc);
            Vals::decode(acc, &bytes)
        })
        .collect();
    let mut sum = fold_vals(ElementwiseOp::Add, acc, &widened);
    divide_vals(acc, &mut sum, args.len() as u64);
    sum.encode(dtype)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::TensorType;

    fn t<T: crate::elem::Element>(v: &[T]) -> HostTensor {
        HostTensor::from_slice(&[v.len()], v).unwrap()
    }

    fn out<T: crate::elem::Element>(dtype: DType, bytes: Vec<u8>) -> Vec<T> {
        let n = bytes.len() / dtype.size_bytes();
        HostTensor::from_bytes(TensorType::new(dtype, &[n]), bytes)
            .unwrap()
            .to_vec()
            .unwrap()
    }

    #[test]
    fn integers_are_exact_at_64_bits() {
        let a = t(&[i64::MAX, i64::MIN, (1 << 53) + 1, 3_037_000_500]);
        let b = t(&[1i64, -1, 2, 3_037_000_500]);
        let sum: Vec<i64> = out(DType::I64, fold(ElementwiseOp::Add, DType::I64, &[&a, &b]));
        assert_eq!(sum, [i64::MIN, i64::MAX, (1 << 53) + 3, 6_074_001_000]);
        let prod: Vec<i64> = out(DType::I64, fold(ElementwiseOp::Mul, DType::I64, &[&a, &b]));
        assert_eq!(
            prod,
            [
                i64::MAX,
                i64::MIN,
                (1 << 54) + 2,
                3_037_000_500i64.wrapping_mul(3_037_000_500)
            ]
        );
        let u = t(&[u64::MAX, u64::MAX - 1]);
        let v: Vec<u64> = out(DType::U64, fold(ElementwiseOp::Mul, DType::U64, &[&u, &u]));
        assert_eq!(v, [1, 4]);
        let m: Vec<u64> = out(
            DType::U64,
            fold(ElementwiseOp::Max, DType::U64, &[&u, &t(&[1u64, u64::MAX])]),
        );
        assert_eq!(m, [u64::MAX, u64::MAX]);
        let d: Vec<i64> = out(DType::I64, divide(&t(&[i64::MIN, -7, 7]), 2));
        assert_eq!(d, [i64::MIN / 2, -3, 3]);
        let d: Vec<i32> = out(DType::I32, divide(&t(&[i32::MIN, i32::MAX]), 1 << 31));
        assert_eq!(d, [-1, 0]);
        let d: Vec<u64> = out(DType::U64, divide(&t(&[u64::MAX]), u64::MAX));
        assert_eq!(d, [1]);
    }

    #[test]
    fn means_do_not_overflow() {
        // The examples of issue 12.
        let h = |x: f32| half::f16::from_f32(x);
        let m: Vec<half::f16> = out(
            DType::F16,
            reduce(
                ReduceOp::Mean,
                DType::F16,
                &[&t(&[h(40000.0), h(65504.0)]), &t(&[h(40000.0), h(65504.0)])],
            ),
        );
        assert_eq!(m, [h(40000.0), h(65504.0)]);
        let m: Vec<u8> = out(
            DType::U8,
            reduce(
                ReduceOp::Mean,
                DType::U8,
                &[&t(&[200u8, 255]), &t(&[200u8, 254])],
            ),
        );
        assert_eq!(m, [200, 254]);
        let m: Vec<i32> = out(
            DType::I32,
            reduce(
                ReduceOp::Mean,
                DType::I32,
                &[&t(&[i32::MAX, i32::MIN, -7]), &t(&[i32::MAX, i32::MIN, 0])],
            ),
        );
        assert_eq!(m, [i32::MAX, i32::MIN, -3]);
        let b = |v: &[bool]| t(v);
        let m: Vec<bool> = out(
            DType::Bool,
            reduce(
                ReduceOp::Mean,
                DType::Bool,
                &[&b(&[true, true, false]), &b(&[true, false, false])],
            ),
        );
        assert_eq!(
            m,
            [true, false, false],
            "the mean of bools is true only when all are"
        );
        // 64-bit integers have no wider type: the sum wraps (documented).
        let m: Vec<i64> = out(
            DType::I64,
            reduce(ReduceOp::Mean, DType::I64, &[&t(&[i64::MAX]), &t(&[2i64])]),
        );
        assert_eq!(m, [i64::MAX.wrapping_add(2) / 2]);
        let bf = |x: f32| half::bf16::from_f32(x);
        let m: Vec<half::bf16> = out(
            DType::BF16,
            reduce(
                ReduceOp::Mean,
                DType::BF16,
                &[&t(&[bf(3e38)]), &t(&[bf(3e38)]), &t(&[bf(3e38)])],
            ),
        );
        assert_eq!(m, [bf(3e38)]);
    }

    #[test]
    fn floats_follow_ieee_at_the_extremes() {
        let sub = f32::from_bits(1);
        let a = t(&[sub, f32::MAX, f32::NAN, 0.0, -0.0, f32::INFINITY, 1.0]);
        let b = t(&[sub, f32::MAX, 1.0, -0.0, 0.0, f32::NEG_INFINITY, f32::NAN]);
        let s: Vec<f32> = out(DType::F32, fold(ElementwiseOp::Add, DType::F32, &[&a, &b]));
        assert_eq!(s[0].to_bits(), 2);
        assert_eq!(s[1], f32::INFINITY);
        assert!(s[2].is_nan() && s[5].is_nan() && s[6].is_nan());
        assert_eq!(s[3].to_bits(), 0);
        let mx: Vec<f32> = out(DType::F32, fold(ElementwiseOp::Max, DType::F32, &[&a, &b]));
        assert_eq!(mx[2], 1.0);
        assert_eq!(mx[3].to_bits(), 0);
        assert_eq!(mx[4].to_bits(), 0);
        assert_eq!(mx[6], 1.0);
        let mn: Vec<f32> = out(DType::F32, fold(ElementwiseOp::Min, DType::F32, &[&a, &b]));
        assert_eq!(mn[3].to_bits(), 0x8000_0000);
        assert_eq!(mn[4].to_bits(), 0x8000_0000);
        let p: Vec<f32> = out(DType::F32, fold(ElementwiseOp::Mul, DType::F32, &[&a, &b]));
        assert_eq!(p[0].to_bits(), 0, "underflow to +0");
        assert_eq!(p[3].to_bits(), 0x8000_0000);
        let d: Vec<f32> = out(DType::F32, divide(&a, 3));
        assert_eq!(d[1], f32::MAX / 3.0);
        assert_eq!(d[4].to_bits(), 0x8000_0000);
        let d: Vec<f32> = out(DType::F32, divide(&t(&[1.0f32, f32::MAX]), (1 << 40) + 1));
        assert_eq!(d[0], (1.0f64 / ((1u64 << 40) + 1) as f64) as f32);
        let c: Vec<half::f16> = out(
            DType::F16,
            cast(
                &t(&[65519.0f32, 65520.0, 5.960_464_5e-8, 2.9e-8]),
                DType::F16,
            ),
        );
        assert_eq!(
            c.iter().map(|h| h.to_bits()).collect::<Vec<_>>(),
            [0x7bff, 0x7c00, 1, 0]
        );
        let c: Vec<u8> = out(DType::U8, cast(&t(&[-1i64, 256, 255]), DType::U8));
        assert_eq!(c, [255, 0, 255]);
        let c: Vec<bool> = out(DType::Bool, cast(&t(&[0i32, -5, 1 << 20]), DType::Bool));
        assert_eq!(c, [false, true, true]);
        let c: Vec<i64> = out(DType::I64, cast(&t(&[u32::MAX]), DType::I64));
        assert_eq!(c, [u32::MAX as i64]);
    }

    /// `eq` on every dtype, against values written by hand: IEEE equality
    /// for the floats (NaN equals nothing, -0 equals +0, the smallest
    /// subnormal only itself), values for the integers at their extremes,
    /// truth values for bool; 1 or 0 in the operands' dtype.
    #[test]
    fn eq_is_exact_on_every_dtype() {
        let eq = |dtype, a: &HostTensor, b: &HostTensor| fold(ElementwiseOp::Eq, dtype, &[a, b]);
        let sub = f32::from_bits(1);
        let fa = [f32::NAN, -0.0, 1.0, f32::INFINITY, sub, f32::MAX, 0.5];
        let fb = [f32::NAN, 0.0, 1.0, f32::NEG_INFINITY, sub, f32::MAX, 0.25];
        let want = [0.0, 1.0, 1.0, 0.0, 1.0, 1.0, 0.0];
        let r: Vec<f32> = out(DType::F32, eq(DType::F32, &t(&fa), &t(&fb)));
        assert_eq!(r, want.map(|x| x as f32));
        let (da, db) = (fa.map(f64::from), fb.map(f64::from));
        let r: Vec<f64> = out(DType::F64, eq(DType::F64, &t(&da), &t(&db)));
        assert_eq!(r, want);
        // Values one f64 step apart are not equal.
        let r: Vec<f64> = out(
            DType::F64,
            eq(DType::F64, &t(&[1.0f64]), &t(&[1.0 + f64::EPSILON])),
        );
        assert_eq!(r, [0.0]);
        let h = |v: [f32; 7]| v.map(half::f16::from_f32);
        let r: Vec<half::f16> = out(DType::F16, eq(DType::F16, &t(&h(fa)), &t(&h(fb))));
        assert_eq!(r, h(want.map(|x| x as f32)));
        let bf = |v: [f32; 7]| v.map(half::bf16::from_f32);
        let r: Vec<half::bf16> = out(DType::BF16, eq(DType::BF16, &t(&bf(fa)), &t(&bf(fb))));
        assert_eq!(r, bf(want.map(|x| x as f32)));
        macro_rules! ints {
            ($($ty:ty => $d:ident),*) => {$({
                let a = t(&[<$ty>::MIN, <$ty>::MAX, 0, 1, <$ty>::MAX]);
                let b = t(&[<$ty>::MIN, <$ty>::MAX - 1, 0, 0, <$ty>::MIN]);
                let r: Vec<$ty> = out(DType::$d, eq(DType::$d, &a, &b));
                assert_eq!(r, [1, 0, 1, 0, 0], "{}", DType::$d);
            })*};
        }
        ints!(i8 => I8, i16 => I16, i32 => I32, i64 => I64, u8 => U8, u16 => U16, u32 => U32, u64 => U64);
        // bool: a byte of 2 is true, so it equals 1.
        let bools = |v: &[u8]| {
            HostTensor::from_bytes(TensorType::new(DType::Bool, &[v.len()]), v.to_vec()).unwrap()
        };
        let r = eq(DType::Bool, &bools(&[2, 0, 1, 0]), &bools(&[1, 0, 0, 7]));
        assert_eq!(r, [1, 1, 0, 0]);
    }
}
