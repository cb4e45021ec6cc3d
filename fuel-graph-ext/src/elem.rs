//! Element arithmetic and element types, written once per dtype: the one
//! place that says how the runtime adds, multiplies, compares, divides and
//! converts elements, and which Rust type holds each dtype.
//!
//! [`Element`] is the Rust type of each dtype as users see it (`f32`,
//! `half::f16`, `bool`, ...): what typed host data is made from and read
//! back as ([`crate::exec::Tensor::from_slice`],
//! [`crate::interp::HostTensor::to_vec`]); a wrong type is an
//! [`ElemError`], never a reinterpretation.
//!
//! [`Scalar`] gives each storage type the four element-wise combiners, the
//! division by a positive integer and the conversions of `cast`, with the
//! reference interpreter's semantics: integers wrap and divide toward zero;
//! f16 and bf16 compute in f32 and round once per step, which equals a
//! correctly rounded half-precision operation (f32 has more than twice the
//! precision, so the double rounding is harmless); float `max`/`min` follow
//! [`max_float`]/[`min_float`] (a NaN loses to a number, -0 < +0); float
//! division is the exact quotient rounded once ([`div_float_bits`]); bool's
//! add and max are OR, mul and min are AND, and division truncates the 0/1
//! value. The CPU kernels (`backend::cpu`) and the host collective drivers
//! (through those kernels) use it; `with_scalar!` picks the Rust type of a
//! [`DType`] at run time. The PTX and WGSL kernels are other languages and
//! the interpreter is an independent oracle, so they are written
//! separately; the interpreter shares only [`div_float_bits`], for divisors
//! too large for its f64 division to be exact.

use crate::dtype::{DType, TensorType};
use crate::op::ElementwiseOp;
use std::fmt;

/// Runs `$body` with `$t` bound to the Rust type of `$dtype`, bool's being
/// `$bool` (the kernels' [`Bool`] byte or the users' `bool`).
macro_rules! with_dtype_type {
    ($dtype:expr, $t:ident, $bool:ty => $body:expr) => {
        match $dtype {
            $crate::dtype::DType::F32 => {
                type $t = f32;
                $body
            }
            $crate::dtype::DType::F64 => {
                type $t = f64;
                $body
            }
            $crate::dtype::DType::F16 => {
                type $t = half::f16;
                $body
            }
            $crate::dtype::DType::BF16 => {
                type $t = half::bf16;
                $body
            }
            $crate::dtype::DType::I32 => {
                type $t = i32;
                $body
            }
            $crate::dtype::DType::I64 => {
                type $t = i64;
                $body
            }
            $crate::dtype::DType::U8 => {
                type $t = u8;
                $body
            }
            $crate::dtype::DType::Bool => {
                type $t = $bool;
                $body
            }
            $crate::dtype::DType::I8 => {
                type $t = i8;
                $body
            }
            $crate::dtype::DType::I16 => {
                type $t = i16;
                $body
            }
            $crate::dtype::DType::U16 => {
                type $t = u16;
                $body
            }
            $crate::dtype::DType::U32 => {
                type $t = u32;
                $body
            }
            $crate::dtype::DType::U64 => {
                type $t = u64;
                $body
            }
        }
    };
}
pub(crate) use with_dtype_type;

/// Runs `$body` with `$t` bound to the [`Scalar`] type of `$dtype`.
macro_rules! with_scalar {
    ($dtype:expr, $t:ident => $body:expr) => {
        $crate::elem::with_dtype_type!($dtype, $t, $crate::elem::Bool => $body)
    };
}
pub(crate) use with_scalar;

/// Runs `$body` with `$t` bound to the [`Element`] type of `$dtype`.
macro_rules! with_element {
    ($dtype:expr, $t:ident => $body:expr) => {
        $crate::elem::with_dtype_type!($dtype, $t, bool => $body)
    };
}

/// A value of some dtype, widened so that every dtype's values fit exactly:
/// integers (and bool, as 0 or 1) in `i128`, floats in `f64`. What a
/// `cast` goes through.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Wide {
    /// An integer or bool value.
    Int(i128),
    /// A float value.
    Float(f64),
}

/// A plain element type: every bit pattern is a valid value, alignment at most 8.
///
/// # Safety
/// Implement only for types with no padding, no invalid bit patterns and
/// `align_of::<Self>() <= 8`, so a `u64`-aligned byte buffer may be viewed as `[Self]`.
pub unsafe trait Scalar: Copy + Send + Sync + 'static {
    /// The dtype stored as this type.
    const DTYPE: DType;
    /// Combines two elements.
    fn apply(kind: ElementwiseOp, a: Self, b: Self) -> Self;
    /// Divides by a positive integer.
    fn div(a: Self, by: u64) -> Self;
    /// The value, widened exactly.
    fn widen(self) -> Wide;
    /// A widened value converted to this type: integers wrap (bool is
    /// "not zero"), floats round to nearest, ties to even. Only the
    /// conversions `cast` defines (integer to integer, float to float)
    /// reach it; the others are total but unspecified.
    fn narrow(w: Wide) -> Self;
}

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
    /// IEEE binary16.
    pub const F16: Format = Format {
        exp_bits: 5,
        frac_bits: 10,
    };
    /// bfloat16.
    pub const BF16: Format = Format {
        exp_bits: 8,
        frac_bits: 7,
    };
    /// IEEE binary32.
    pub const F32: Format = Format {
        exp_bits: 8,
        frac_bits: 23,
    };
    /// IEEE binary64.
    pub const F64: Format = Format {
        exp_bits: 11,
        frac_bits: 52,
    };
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

macro_rules! int_scalar {
    ($($t:ty => $d:ident),*) => {$(
        // SAFETY: a primitive integer: no padding, every bit pattern valid, align <= 8.
        unsafe impl Scalar for $t {
            const DTYPE: DType = DType::$d;
            #[inline(always)]
            fn apply(kind: ElementwiseOp, a: Self, b: Self) -> Self {
                match kind {
                    ElementwiseOp::Add => a.wrapping_add(b),
                    ElementwiseOp::Mul => a.wrapping_mul(b),
                    ElementwiseOp::Max => a.max(b),
                    ElementwiseOp::Min => a.min(b),
                }
            }
            #[inline(always)]
            fn div(a: Self, by: u64) -> Self {
                // i128 holds every operand; Rust division truncates toward zero.
                (a as i128 / by as i128) as Self
            }
            #[inline(always)]
            fn widen(self) -> Wide {
                Wide::Int(self as i128)
            }
            #[inline(always)]
            fn narrow(w: Wide) -> Self {
                match w {
                    Wide::Int(v) => v as Self,
                    Wide::Float(x) => x as i128 as Self,
                }
            }
        }
    )*};
}
int_scalar!(i8 => I8, i16 => I16, i32 => I32, i64 => I64, u8 => U8, u16 => U16, u32 => U32, u64 => U64);

/// Below this divisor, dividing a float of at most 24 significant bits in
/// f64 and rounding once to its type is the exact quotient rounded once:
/// both operands are exact in f64, and the double rounding is innocuous
/// while n <= 2^(52 - 24) (see docs/backends.md).
const F64_DIV_EXACT_BELOW_24_BITS: u64 = 1 << 24;

// SAFETY: a primitive float: no padding, every bit pattern valid, align 4.
unsafe impl Scalar for f32 {
    const DTYPE: DType = DType::F32;
    #[inline(always)]
    fn apply(kind: ElementwiseOp, a: Self, b: Self) -> Self {
        match kind {
            ElementwiseOp::Add => a + b,
            ElementwiseOp::Mul => a * b,
            ElementwiseOp::Max => max_float(a, b),
            ElementwiseOp::Min => min_float(a, b),
        }
    }
    #[inline(always)]
    fn div(a: Self, by: u64) -> Self {
        if by < F64_DIV_EXACT_BELOW_24_BITS {
            (f64::from(a) / by as f64) as f32
        } else {
            f32::from_bits(div_float_bits(Format::F32, u64::from(a.to_bits()), by) as u32)
        }
    }
    #[inline(always)]
    fn widen(self) -> Wide {
        Wide::Float(f64::from(self))
    }
    #[inline(always)]
    fn narrow(w: Wide) -> Self {
        match w {
            Wide::Float(x) => x as f32,
            Wide::Int(v) => v as f32,
        }
    }
}

// SAFETY: a primitive float: no padding, every bit pattern valid, align 8.
unsafe impl Scalar for f64 {
    const DTYPE: DType = DType::F64;
    #[inline(always)]
    fn apply(kind: ElementwiseOp, a: Self, b: Self) -> Self {
        match kind {
            ElementwiseOp::Add => a + b,
            ElementwiseOp::Mul => a * b,
            ElementwiseOp::Max => max_float(a, b),
            ElementwiseOp::Min => min_float(a, b),
        }
    }
    #[inline(always)]
    fn div(a: Self, by: u64) -> Self {
        // Below 2^53 the divisor is exact in f64 and the division is one
        // correctly rounded IEEE operation.
        if by <= 1 << 53 {
            a / by as f64
        } else {
            f64::from_bits(div_float_bits(Format::F64, a.to_bits(), by))
        }
    }
    #[inline(always)]
    fn widen(self) -> Wide {
        Wide::Float(self)
    }
    #[inline(always)]
    fn narrow(w: Wide) -> Self {
        match w {
            Wide::Float(x) => x,
            Wide::Int(v) => v as f64,
        }
    }
}

macro_rules! half_scalar {
    ($($t:ty => $d:ident, $fmt:expr),*) => {$(
        // SAFETY: a repr(transparent) u16: no padding, every bit pattern valid.
        unsafe impl Scalar for $t {
            const DTYPE: DType = DType::$d;
            #[inline(always)]
            fn apply(kind: ElementwiseOp, a: Self, b: Self) -> Self {
                <$t>::from_f32(f32::apply(kind, a.to_f32(), b.to_f32()))
            }
            #[inline(always)]
            fn div(a: Self, by: u64) -> Self {
                if by < F64_DIV_EXACT_BELOW_24_BITS {
                    <$t>::from_bits(round_f64_bits($fmt, a.to_f64() / by as f64) as u16)
                } else {
                    <$t>::from_bits(div_float_bits($fmt, u64::from(a.to_bits()), by) as u16)
                }
            }
            #[inline(always)]
            fn widen(self) -> Wide {
                Wide::Float(self.to_f64())
            }
            #[inline(always)]
            fn narrow(w: Wide) -> Self {
                let x = match w {
                    Wide::Float(x) => x,
                    Wide::Int(v) => v as f64,
                };
                // An f32 value converts in one correct rounding by the
                // `half` crate (F16C where the CPU has it); any other f64
                // needs the full-width rounding.
                let narrow = x as f32;
                if f64::from(narrow) == x {
                    <$t>::from_f32(narrow)
                } else {
                    <$t>::from_bits(round_f64_bits($fmt, x) as u16)
                }
            }
        }
    )*};
}
half_scalar!(half::f16 => F16, Format::F16, half::bf16 => BF16, Format::BF16);

/// A bool element: one byte, 0 false and anything else true. Results are
/// always 0 or 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(transparent)]
pub struct Bool(pub u8);

impl Bool {
    /// The truth value.
    pub fn get(self) -> bool {
        self.0 != 0
    }
}

// SAFETY: a repr(transparent) u8: no padding, every bit pattern valid, align 1.
unsafe impl Scalar for Bool {
    const DTYPE: DType = DType::Bool;
    #[inline(always)]
    fn apply(kind: ElementwiseOp, a: Self, b: Self) -> Self {
        let (a, b) = (a.get(), b.get());
        Bool(u8::from(match kind {
            ElementwiseOp::Add | ElementwiseOp::Max => a || b,
            ElementwiseOp::Mul | ElementwiseOp::Min => a && b,
        }))
    }
    #[inline(always)]
    fn div(a: Self, by: u64) -> Self {
        // The 0/1 value divided and truncated: itself for 1, else false.
        Bool(u8::from(a.get() && by == 1))
    }
    #[inline(always)]
    fn widen(self) -> Wide {
        Wide::Int(i128::from(self.get()))
    }
    #[inline(always)]
    fn narrow(w: Wide) -> Self {
        Bool(u8::from(match w {
            Wide::Int(v) => v != 0,
            Wide::Float(x) => x != 0.0,
        }))
    }
}

/// The Rust type users hold a dtype's elements in: `f32`, `f64`,
/// `half::f16`, `half::bf16`, `i8` ... `u64` and `bool`. Typed host data is
/// made from `&[T]` and read back as `Vec<T>` through it; the bytes are the
/// little-endian elements the executor moves.
pub trait Element: Copy + PartialEq + fmt::Debug + Send + Sync + 'static + sealed::Sealed {
    /// The dtype of this type's elements.
    const DTYPE: DType;
    /// The type's name in Rust, for messages (`half::f16`).
    const RUST_NAME: &'static str;
    /// Appends the element's little-endian bytes (a bool is one byte, 0 or 1).
    fn put(self, out: &mut Vec<u8>);
    /// The element in the first `DTYPE.size_bytes()` bytes of `bytes`
    /// (any non-zero byte is `true`).
    fn get(bytes: &[u8]) -> Self;
}

mod sealed {
    /// Only this module's element types are [`super::Element`]s.
    pub trait Sealed {}
}

macro_rules! element {
    ($($t:ty => $d:ident, $name:literal, $n:literal);* $(;)?) => {$(
        impl sealed::Sealed for $t {}
        impl Element for $t {
            const DTYPE: DType = DType::$d;
            const RUST_NAME: &'static str = $name;
            #[inline]
            fn put(self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
            }
            #[inline]
            fn get(bytes: &[u8]) -> Self {
                let mut b = [0u8; $n];
                for (d, s) in b.iter_mut().zip(bytes) {
                    *d = *s;
                }
                <$t>::from_le_bytes(b)
            }
        }
    )*};
}
element!(
    f32 => F32, "f32", 4;
    f64 => F64, "f64", 8;
    half::f16 => F16, "half::f16", 2;
    half::bf16 => BF16, "half::bf16", 2;
    i8 => I8, "i8", 1;
    i16 => I16, "i16", 2;
    i32 => I32, "i32", 4;
    i64 => I64, "i64", 8;
    u8 => U8, "u8", 1;
    u16 => U16, "u16", 2;
    u32 => U32, "u32", 4;
    u64 => U64, "u64", 8;
);

impl sealed::Sealed for bool {}
impl Element for bool {
    const DTYPE: DType = DType::Bool;
    const RUST_NAME: &'static str = "bool";
    #[inline]
    fn put(self, out: &mut Vec<u8>) {
        out.push(u8::from(self));
    }
    #[inline]
    fn get(bytes: &[u8]) -> Self {
        bytes.first().is_some_and(|b| *b != 0)
    }
}

/// The Rust type that holds `dtype`'s elements, as [`Element::RUST_NAME`]
/// spells it.
pub fn rust_name(dtype: DType) -> &'static str {
    with_element!(dtype, T => T::RUST_NAME)
}

/// Why typed host data does not fit.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ElemError {
    /// Elements of one Rust type for a tensor of another dtype.
    #[error("the tensor is {ty}, whose elements are {want}, but it was used as {got}; use Vec<{want}> or &[{want}]")]
    WrongType {
        /// The tensor's type.
        ty: TensorType,
        /// The Rust type of its elements.
        want: &'static str,
        /// The Rust type asked for.
        got: &'static str,
    },
    /// A slice of the wrong length for the shape.
    #[error(
        "a tensor of type {ty} has {want} element(s) but {got} were given; give one value per element"
    )]
    Length {
        /// The type asked for.
        ty: TensorType,
        /// Elements it has.
        want: usize,
        /// Elements given.
        got: usize,
    },
    /// Bytes that are not a whole tensor.
    #[error("a tensor of type {ty} needs {want} bytes but {got} were given")]
    Bytes {
        /// The type asked for.
        ty: TensorType,
        /// Bytes it has.
        want: usize,
        /// Bytes given.
        got: usize,
    },
}

/// Little-endian bytes of `data`, a tensor of `shape`: the type and the
/// bytes of typed host data.
pub fn encode<T: Element>(shape: &[usize], data: &[T]) -> Result<(TensorType, Vec<u8>), ElemError> {
    let ty = TensorType::new(T::DTYPE, shape);
    let want = ty.num_elements();
    if data.len() != want {
        return Err(ElemError::Length {
            ty,
            want,
            got: data.len(),
        });
    }
    let mut bytes = Vec::with_capacity(ty.size_bytes());
    for x in data {
        x.put(&mut bytes);
    }
    Ok((ty, bytes))
}

/// The elements of `bytes`, a tensor of `ty`, as `T`; an error naming both
/// types if `T` is not `ty`'s element type.
pub fn decode<T: Element>(ty: &TensorType, bytes: &[u8]) -> Result<Vec<T>, ElemError> {
    if T::DTYPE != ty.dtype {
        return Err(ElemError::WrongType {
            ty: ty.clone(),
            want: rust_name(ty.dtype),
            got: T::RUST_NAME,
        });
    }
    let size = ty.dtype.size_bytes();
    Ok(bytes.chunks_exact(size).map(T::get).collect())
}

#[cfg(test)]
mod tests {
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
                let r =
                    half::f16::from_bits(div_float_bits(Format::F16, u64::from(bits), n) as u16);
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
}
