//! Tests of element arithmetic: every dtype's combiners, division and
//! casts against integer arithmetic, exhaustively where the format is small.

use super::*;

fn size_of_dtype<T: Scalar>() -> (usize, usize) {
    (std::mem::size_of::<T>(), T::DTYPE.size_bytes())
}

#[test]
fn every_dtype_has_a_scalar_of_its_size() {
    for d in DType::ALL {
        let (rust, ir) = with_scalar!(d, T => size_of_dtype::<T>());
        assert_eq!(rust, ir, "{d}");
        assert_eq!(with_scalar!(d, T => <T as Scalar>::DTYPE), d);
    }
}

#[test]
fn integers_wrap_and_truncate_toward_zero() {
    assert_eq!(i32::div(-7, 2), -3);
    assert_eq!(i64::div(7, 2), 3);
    assert_eq!(u8::div(255, 300), 0);
    assert_eq!(f32::div(-7.0, 2), -3.5);
    assert_eq!(i32::apply(ElementwiseOp::Add, i32::MAX, 1), i32::MIN);
    assert_eq!(u8::apply(ElementwiseOp::Mul, 16, 16), 0);
    assert_eq!(u8::apply(ElementwiseOp::Add, 200, 100), 44);
    assert_eq!(i8::div(-7, 2), -3);
    assert_eq!(u64::apply(ElementwiseOp::Max, 3, u64::MAX), u64::MAX);
    assert_eq!(i16::apply(ElementwiseOp::Min, 3, -4), -4);
    assert_eq!(u32::apply(ElementwiseOp::Mul, 1 << 31, 2), 0);
    assert_eq!(u16::div(u16::MAX, 2), 32767);
    let h = half::f16::from_f32(2048.0);
    assert_eq!(
        half::f16::apply(ElementwiseOp::Add, h, half::f16::ONE).to_f32(),
        2048.0
    );
}

#[test]
fn bool_is_or_and_and() {
    let (f, t) = (Bool(0), Bool(1));
    assert_eq!(Bool::apply(ElementwiseOp::Add, f, t), t);
    assert_eq!(Bool::apply(ElementwiseOp::Max, f, Bool(7)), t);
    assert_eq!(Bool::apply(ElementwiseOp::Mul, t, f), f);
    assert_eq!(Bool::apply(ElementwiseOp::Min, t, Bool(2)), t);
    assert_eq!(Bool::div(t, 1), t);
    assert_eq!(Bool::div(t, 2), f);
}

/// A small xorshift generator: the tests below need many values, not
/// a crate.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// Divisors from 1 to 2^64 - 1, the powers of two and their
/// neighbours included.
fn divisors(rng: &mut Rng) -> Vec<u64> {
    let mut ns: Vec<u64> = (1..=40).collect();
    for k in 1..64 {
        let p = 1u64 << k;
        ns.extend([p - 1, p, p + 1]);
    }
    ns.extend([u64::MAX, u64::MAX - 1, 3_000_000_000, 1_000_000_007]);
    ns.extend((0..40).map(|i| rng.next() >> (i % 64)).map(|n| n.max(1)));
    ns
}

/// Checks that `r` is `x / n` rounded to nearest even in f16, exactly,
/// with integers: every finite f16 is a multiple of 2^-24 below 2^16,
/// so scaled by 2^25 (for the half ulps) all values are integers.
fn is_correctly_rounded_f16(x: half::f16, n: u64, r: half::f16) -> bool {
    if x.is_nan() {
        return r.is_nan();
    }
    if x.is_infinite() {
        return r == x;
    }
    if r.is_sign_negative() != x.is_sign_negative() {
        return false;
    }
    let scaled =
        |b: u16| -> i128 { (half::f16::from_bits(b).to_f64() * (1u64 << 25) as f64) as i128 };
    let (xb, rb) = (x.to_bits() & 0x7fff, r.to_bits() & 0x7fff);
    let (xs, rs, n) = (scaled(xb), scaled(rb), i128::from(n));
    let diff = xs - rs * n; // n * (x/n - r), magnitudes
    let gap = if diff > 0 {
        if rb >= 0x7bff {
            return false; // nothing finite above r, yet the quotient is
        }
        scaled(rb + 1) - rs
    } else if rb == 0 {
        0
    } else {
        rs - scaled(rb - 1)
    };
    // |x/n - r| <= gap/2, and on a tie the last bit of r is even.
    let (err2, bound) = (diff.abs() * 2, gap * n);
    err2 < bound || (err2 == bound && rb & 1 == 0) || diff == 0
}

#[test]
fn float_division_is_the_exact_quotient_rounded_once() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let ns = divisors(&mut rng);
    // f16 exhaustively, checked with exact integer arithmetic.
    for bits in 0..=u16::MAX {
        let x = half::f16::from_bits(bits);
        for &n in &ns {
            let r = half::f16::from_bits(div_float_bits(Format::F16, u64::from(bits), n) as u16);
            assert!(
                is_correctly_rounded_f16(x, n, r),
                "{x:?} ({bits:04x}) / {n} gave {r:?}"
            );
            if !x.is_nan() && r == half::f16::ZERO {
                assert_eq!(
                    r.is_sign_negative(),
                    x.is_sign_negative(),
                    "the sign of a zero"
                );
            }
        }
    }
    // f64 against the hardware's division, which is exact while the
    // divisor is (below 2^53).
    for _ in 0..200_000 {
        let bits = rng.next();
        let n = (rng.next() >> (rng.next() % 64)).clamp(1, 1 << 53);
        let x = f64::from_bits(bits);
        let got = f64::from_bits(div_float_bits(Format::F64, bits, n));
        let want = x / n as f64;
        assert!(
            got.to_bits() == want.to_bits() || got.is_nan() && want.is_nan(),
            "{x:e} / {n}"
        );
    }
    // Subnormal dividends and results of f64, where the rounding moves.
    for k in 0..2000u64 {
        let bits = k * 0x0000_0123_4567_89ab % (1 << 53);
        let x = f64::from_bits(bits);
        for n in [3u64, 7, 1 << 20, (1 << 53) - 1] {
            let got = f64::from_bits(div_float_bits(Format::F64, bits, n));
            assert_eq!(got.to_bits(), (x / n as f64).to_bits(), "{x:e} / {n}");
        }
    }
}

#[test]
fn rounding_f64_to_halves_is_correct() {
    // Against f32 -> half (the hardware's or half's full-width
    // conversion) for f64 values that are exactly f32s, and against
    // the exact division for ties built from odd multiples.
    let mut rng = Rng(0x1234_5678_9abc_def1);
    for _ in 0..200_000 {
        let x = f32::from_bits(rng.next() as u32);
        let want16 = half::f16::from_f32(x);
        let want_b = half::bf16::from_f32(x);
        let got16 = f16_from_f64(f64::from(x));
        let got_b = bf16_from_f64(f64::from(x));
        assert!(
            got16.to_bits() == want16.to_bits() || x.is_nan() && got16.is_nan(),
            "{x:e}"
        );
        assert!(
            got_b.to_bits() == want_b.to_bits() || x.is_nan() && got_b.is_nan(),
            "{x:e}"
        );
    }
    // Just above a tie only in the low 32 bits of the f64: rounds up.
    let tie = 1.0 + 2f64.powi(-11); // halfway between two f16s
    assert_eq!(f16_from_f64(tie).to_bits(), 0x3c00);
    assert_eq!(f16_from_f64(tie + 2f64.powi(-40)).to_bits(), 0x3c01);
    assert_eq!(
        bf16_from_f64(1.0 + 2f64.powi(-8) + 2f64.powi(-45)).to_bits(),
        0x3f81
    );
    assert_eq!(f16_from_f64(65520.0), half::f16::INFINITY);
    assert_eq!(f16_from_f64(-65519.99), -half::f16::MAX);
    assert_eq!(f16_from_f64(2f64.powi(-25)).to_bits(), 0);
    assert_eq!(f16_from_f64(2f64.powi(-25) * 1.0000001).to_bits(), 1);
    assert_eq!(f16_from_f64(-1e-300).to_bits(), 0x8000);
    assert_eq!(bf16_from_f64(f64::MAX), half::bf16::INFINITY);
    assert!(f16_from_f64(f64::NAN).is_nan());
}

#[test]
fn the_fast_divisions_equal_the_exact_one() {
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let ns = divisors(&mut rng);
    for bits in 0..=u16::MAX {
        for &n in &ns {
            let (h, b) = (half::f16::from_bits(bits), half::bf16::from_bits(bits));
            let want = div_float_bits(Format::F16, u64::from(bits), n) as u16;
            let got = half::f16::div(h, n).to_bits();
            assert!(got == want || h.is_nan(), "f16 {h:?} / {n}");
            let want = div_float_bits(Format::BF16, u64::from(bits), n) as u16;
            let got = half::bf16::div(b, n).to_bits();
            assert!(got == want || b.is_nan(), "bf16 {b:?} / {n}");
        }
    }
    for _ in 0..300_000 {
        let bits = rng.next() as u32;
        let n = (rng.next() >> (rng.next() % 64)).max(1);
        let x = f32::from_bits(bits);
        let want = div_float_bits(Format::F32, u64::from(bits), n) as u32;
        assert!(
            f32::div(x, n).to_bits() == want || x.is_nan(),
            "f32 {x:e} / {n}"
        );
    }
}

#[test]
fn max_and_min_order_zeros_and_skip_nan() {
    let nan = f32::NAN;
    assert_eq!(max_float(nan, 2.0f32), 2.0);
    assert_eq!(max_float(2.0f32, nan), 2.0);
    assert!(max_float(nan, nan).is_nan());
    assert_eq!(min_float(nan, -2.0f32), -2.0);
    assert_eq!(min_float(-2.0f32, nan), -2.0);
    for (a, b) in [(0.0f32, -0.0f32), (-0.0, 0.0)] {
        assert_eq!(max_float(a, b).to_bits(), 0.0f32.to_bits(), "max({a}, {b})");
        assert_eq!(
            min_float(a, b).to_bits(),
            (-0.0f32).to_bits(),
            "min({a}, {b})"
        );
    }
    assert_eq!(max_float(f64::NEG_INFINITY, -1e300), -1e300);
    assert_eq!(min_float(f64::INFINITY, f64::MAX), f64::MAX);
    let (pz, nz) = (half::f16::ZERO, half::f16::NEG_ZERO);
    assert_eq!(half::f16::apply(ElementwiseOp::Max, nz, pz).to_bits(), 0);
    assert_eq!(
        half::f16::apply(ElementwiseOp::Min, pz, nz).to_bits(),
        0x8000
    );
}

#[test]
fn conversions_wrap_integers_and_round_floats() {
    assert_eq!(u8::narrow((-1i32).widen()), 255);
    assert_eq!(i8::narrow(200u8.widen()), -56);
    assert_eq!(i64::narrow(u64::MAX.widen()), -1);
    assert_eq!(u64::narrow(i64::MIN.widen()), 1 << 63);
    assert_eq!(i32::narrow(Bool(1).widen()), 1);
    assert_eq!(Bool::narrow(256i32.widen()), Bool(1));
    assert_eq!(Bool::narrow(0u64.widen()), Bool(0));
    assert_eq!(half::f16::narrow(65520.0f32.widen()), half::f16::INFINITY);
    assert_eq!(half::f16::narrow(65519.0f32.widen()).to_f32(), 65504.0);
    assert_eq!(
        half::bf16::narrow((1.0f32 + 2f32.powi(-8)).widen()).to_f32(),
        1.0
    );
    assert_eq!(f32::narrow(half::f16::from_bits(1).widen()), 2f32.powi(-24));
    assert_eq!(f32::narrow(1e-46f64.widen()).to_bits(), 0);
    assert_eq!(f32::narrow(f64::MAX.widen()), f32::INFINITY);
    assert!(f32::narrow(f64::NAN.widen()).is_nan());
    assert_eq!(f64::narrow(f32::from_bits(1).widen()), 2f64.powi(-149));
}

fn round_trip<T: Element>(data: &[T]) {
    let (ty, bytes) = encode(&[data.len()], data).unwrap();
    assert_eq!(ty.dtype, <T as Element>::DTYPE);
    assert_eq!(bytes.len(), ty.size_bytes());
    assert_eq!(decode::<T>(&ty, &bytes).unwrap(), data);
}

#[test]
fn elements_round_trip_and_refuse_the_wrong_type() {
    round_trip(&[1.5f32, -0.0, f32::MAX]);
    round_trip(&[f64::MIN_POSITIVE, 2.0]);
    round_trip(&[half::f16::MAX, half::f16::from_bits(1)]);
    round_trip(&[half::bf16::MIN, half::bf16::ONE]);
    round_trip(&[i8::MIN, i8::MAX]);
    round_trip(&[i16::MIN, -1]);
    round_trip(&[i32::MIN, i32::MAX]);
    round_trip(&[i64::MIN, i64::MAX, (1 << 53) + 1]);
    round_trip(&[u8::MAX, 0]);
    round_trip(&[u16::MAX]);
    round_trip(&[u32::MAX]);
    round_trip(&[u64::MAX, (1 << 53) + 1]);
    round_trip(&[true, false, true]);
    for d in DType::ALL {
        assert_eq!(with_element!(d, T => <T as Element>::DTYPE), d);
        assert_eq!(
            with_element!(d, T => std::mem::size_of::<T>()),
            d.size_bytes()
        );
    }
    let (ty, bytes) = encode(&[2], &[1.0f32, 2.0]).unwrap();
    let e = decode::<i32>(&ty, &bytes).unwrap_err();
    assert_eq!(
        e.to_string(),
        "the tensor is f32[2], whose elements are f32, but it was used as i32; use Vec<f32> or &[f32]"
    );
    let e = encode(&[2, 2], &[half::f16::ONE]).unwrap_err().to_string();
    assert_eq!(
        e,
        "a tensor of type f16[2,2] has 4 element(s) but 1 were given; give one value per element"
    );
}

#[test]
fn slice_division_is_elementwise_division() {
    // The slice forms pick the divisor's case once; every element must
    // come out as `div` gives it, bit for bit (NaNs as NaNs).
    fn check<T: Scalar + PartialEq + std::fmt::Debug>(
        xs: &[T],
        ns: &[u64],
        bits: impl Fn(T) -> u64,
    ) {
        for &n in ns {
            let want: Vec<u64> = xs.iter().map(|x| bits(T::div(*x, n))).collect();
            let mut out = xs.to_vec();
            T::div_slice(xs, n, &mut out);
            assert_eq!(
                out.iter().map(|x| bits(*x)).collect::<Vec<_>>(),
                want,
                "div_slice by {n}"
            );
            let mut out = xs.to_vec();
            T::div_in_place(&mut out, n);
            assert_eq!(
                out.iter().map(|x| bits(*x)).collect::<Vec<_>>(),
                want,
                "div_in_place by {n}"
            );
        }
    }
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let ns = divisors(&mut rng);
    let f32s: Vec<f32> = (0..4096)
        .map(|_| f32::from_bits(rng.next() as u32))
        .chain([
            0.0,
            -0.0,
            f32::INFINITY,
            f32::MIN_POSITIVE,
            f32::from_bits(1),
            f32::MAX,
        ])
        .collect();
    check(&f32s, &ns, |x: f32| u64::from(x.to_bits()));
    let f64s: Vec<f64> = (0..4096)
        .map(|_| f64::from_bits(rng.next()))
        .chain([0.0, -0.0, f64::NEG_INFINITY, f64::from_bits(1), f64::MAX])
        .collect();
    check(&f64s, &ns, f64::to_bits);
}
