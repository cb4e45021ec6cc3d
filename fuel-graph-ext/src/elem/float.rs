//! Float rules shared by every element: `max`/`min` with NaN and signed
//! zeros ([`max_float`], [`min_float`]), and exact rounding of a quotient or
//! an f64 to a narrower IEEE format ([`div_float_bits`], [`round_f64_bits`]).

/// `max` of two floats: a NaN loses to a number (NaN only when both are
/// NaN), and -0 counts as less than +0. IEEE 754-2019's `maximumNumber`;
/// every kernel and the interpreter follow it.
#[inline(always)]
pub fn max_float<T: Copy + PartialOrd + SignBit>(a: T, b: T) -> T {
    #[allow(clippy::eq_op)] // x != x is the NaN test
    let (a_nan, b_nan) = (a != a, b != b);
    if a_nan {
        b
    } else if b_nan || a > b {
        a
    } else if b > a || a.sign_bit() {
        // Equal and a is -0 (or both have one sign): b.
        b
    } else {
        a
    }
}

/// `min` of two floats: a NaN loses to a number, and -0 counts as less than
/// +0 (IEEE 754-2019's `minimumNumber`).
#[inline(always)]
pub fn min_float<T: Copy + PartialOrd + SignBit>(a: T, b: T) -> T {
    #[allow(clippy::eq_op)] // x != x is the NaN test
    let (a_nan, b_nan) = (a != a, b != b);
    if a_nan {
        b
    } else if b_nan || a < b {
        a
    } else if b < a || !a.sign_bit() {
        b
    } else {
        a
    }
}

/// The sign bit of a float.
pub trait SignBit {
    /// Whether the sign bit is set (true for -0).
    fn sign_bit(self) -> bool;
}

impl SignBit for f32 {
    #[inline(always)]
    fn sign_bit(self) -> bool {
        self.is_sign_negative()
    }
}

impl SignBit for f64 {
    #[inline(always)]
    fn sign_bit(self) -> bool {
        self.is_sign_negative()
    }
}

/// An IEEE 754 binary format, for [`div_float_bits`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Format {
    /// Exponent bits.
    pub exp_bits: u32,
    /// Fraction bits (the significand without its implicit bit).
    pub frac_bits: u32,
}

impl Format {
    /// A format of `exp_bits` exponent and `frac_bits` fraction bits.
    const fn new(exp_bits: u32, frac_bits: u32) -> Format {
        Format {
            exp_bits,
            frac_bits,
        }
    }

    /// IEEE binary16.
    pub const F16: Format = Format::new(5, 10);
    /// bfloat16.
    pub const BF16: Format = Format::new(8, 7);
    /// IEEE binary32.
    pub const F32: Format = Format::new(8, 23);
    /// IEEE binary64.
    pub const F64: Format = Format::new(11, 52);
}

impl Format {
    fn bias(self) -> i64 {
        (1i64 << (self.exp_bits - 1)) - 1
    }
    fn exp_mask(self) -> u64 {
        (1u64 << self.exp_bits) - 1
    }
    fn frac_mask(self) -> u64 {
        (1u64 << self.frac_bits) - 1
    }
    fn sign_bit(self) -> u64 {
        1u64 << (self.exp_bits + self.frac_bits)
    }
}

/// `mag * 2^exp2`, plus a fraction of its last unit when `sticky` (the
/// remainder of a division), rounded to nearest even in `fmt`, with sign
/// bit `sign`; infinity past the largest finite value. `mag` is not zero.
fn round_scaled(fmt: Format, sign: u64, mag: u128, sticky: bool, exp2: i64) -> u64 {
    let f = i64::from(fmt.frac_bits);
    let len = 128 - i64::from(mag.leading_zeros());
    // Keep f + 1 bits, or (below the normal range) every bit down to the
    // smallest subnormal's.
    let shift = (len - (f + 1)).max((1 - fmt.bias() - f) - exp2);
    let mant = if shift <= 0 {
        // Exact: fewer bits than the format holds.
        mag << (-shift)
    } else if shift > 128 {
        // Below half the smallest subnormal.
        0
    } else {
        let shift = shift as u32;
        let mut mant = mag.checked_shr(shift).unwrap_or(0);
        let rest = if shift == 128 {
            mag
        } else {
            mag & ((1u128 << shift) - 1)
        };
        let half = 1u128 << (shift - 1);
        if rest > half || (rest == half && (sticky || mant & 1 == 1)) {
            mant += 1;
        }
        mant
    };
    // mant * 2^lsb is the result. Its exponent field is lsb + f + bias - 1
    // plus the implicit bit `mant` carries (none for a subnormal, and a
    // mantissa rounded up to 2^(f+1) carries into the exponent by itself).
    let lsb = shift.max(0) + exp2;
    let field = lsb + f + fmt.bias() - 1;
    let inf = fmt.exp_mask() << fmt.frac_bits;
    let bits = u128::try_from(field.max(0))
        .ok()
        .and_then(|fi| (fi << fmt.frac_bits).checked_add(mant))
        .unwrap_or(u128::MAX);
    sign | u64::try_from(bits).map_or(inf, |b| b.min(inf))
}

/// The float with bit pattern `bits` in `fmt`, divided by the integer `n`
/// (1 or more), rounded once to nearest, ties to even: the exact quotient,
/// whatever the size of `n`. NaN stays NaN, infinities and zeros keep their
/// sign, and a result below the smallest subnormal rounds to a zero of the
/// dividend's sign. This is what `div {by=N}` means for floats.
pub fn div_float_bits(fmt: Format, bits: u64, n: u64) -> u64 {
    let f = fmt.frac_bits;
    let exp = (bits >> f) & fmt.exp_mask();
    let frac = bits & fmt.frac_mask();
    if exp == fmt.exp_mask() || (exp == 0 && frac == 0) || n <= 1 {
        // NaN, an infinity or a zero divided by n is itself (n >= 1).
        return bits;
    }
    // The dividend is m * 2^q with m an integer.
    let (m, q) = if exp == 0 {
        (frac, 1 - fmt.bias() - i64::from(f))
    } else {
        (frac | (1u64 << f), exp as i64 - fmt.bias() - i64::from(f))
    };
    // m * 2^s / n with m * 2^s in [2^126, 2^127): at least 63 quotient bits.
    let s = 127 - (64 - i64::from(m.leading_zeros()));
    let num = u128::from(m) << s;
    let (quot, rem) = (num / u128::from(n), num % u128::from(n));
    round_scaled(fmt, bits & fmt.sign_bit(), quot, rem != 0, q - s)
}

/// `x` rounded to nearest even in `fmt` (one rounding, with subnormals and
/// overflow to infinity), as bits. NaN becomes a quiet NaN of the same
/// sign. (The `half` crate's `from_f64` drops the low 32 bits of `x` before
/// rounding, which breaks ties and subnormals; this does not.)
pub fn round_f64_bits(fmt: Format, x: f64) -> u64 {
    let sign = if x.is_sign_negative() {
        fmt.sign_bit()
    } else {
        0
    };
    let inf = fmt.exp_mask() << fmt.frac_bits;
    if x.is_nan() {
        return sign | inf | (1u64 << (fmt.frac_bits - 1));
    }
    if x.is_infinite() {
        return sign | inf;
    }
    if x == 0.0 {
        return sign;
    }
    let b = x.to_bits();
    let exp = (b >> 52) & 0x7ff;
    let frac = b & ((1u64 << 52) - 1);
    let (m, q) = if exp == 0 {
        (frac, -1074)
    } else {
        (frac | (1u64 << 52), exp as i64 - 1075)
    };
    round_scaled(fmt, sign, u128::from(m), false, q)
}

/// `x` rounded to f16 (correctly, see [`round_f64_bits`]).
pub fn f16_from_f64(x: f64) -> half::f16 {
    half::f16::from_bits(round_f64_bits(Format::F16, x) as u16)
}

/// `x` rounded to bf16 (correctly, see [`round_f64_bits`]).
pub fn bf16_from_f64(x: f64) -> half::bf16 {
    half::bf16::from_bits(round_f64_bits(Format::BF16, x) as u16)
}
