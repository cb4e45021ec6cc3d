//! Element arithmetic and element types, written once per dtype: the one
//! place that says how the runtime adds, multiplies, compares, divides and
//! converts elements, and which Rust type holds each dtype.
//!
//! [`Element`] is the Rust type of each dtype as users see it (`f32`,
//! `half::f16`, `bool`, ...): what typed host data is made from and read
//! back as ([`crate::Tensor::from_slice`],
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

use crate::dtype::DType;
use crate::op::ElementwiseOp;

/// Runs `$body` with `$t` bound to the Rust type of `$dtype`, bool's being
/// `$bool` (the kernels' [`Bool`] byte or the users' `bool`).
#[doc(hidden)]
#[macro_export]
macro_rules! with_dtype_type {
    ($dtype:expr, $t:ident, $bool:ty => $body:expr) => {
        $crate::elem::with_dtype_type!(@arms $dtype, $t, $body;
            F32 f32, F64 f64, F16 half::f16, BF16 half::bf16, I32 i32, I64 i64, U8 u8,
            Bool $bool, I8 i8, I16 i16, U16 u16, U32 u32, U64 u64)
    };
    (@arms $dtype:expr, $t:ident, $body:expr; $($v:ident $ty:ty),*) => {
        match $dtype {
            $($crate::dtype::DType::$v => {
                type $t = $ty;
                $body
            })*
        }
    };
}
#[doc(hidden)]
pub use crate::with_dtype_type;

/// Runs `$body` with `$t` bound to the [`Scalar`] type of `$dtype` (the
/// runtime's CPU folds use it too, hence exported).
#[doc(hidden)]
#[macro_export]
macro_rules! with_scalar {
    ($dtype:expr, $t:ident => $body:expr) => {
        $crate::elem::with_dtype_type!($dtype, $t, $crate::elem::Bool => $body)
    };
}
#[doc(hidden)]
pub use crate::with_scalar;

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
    /// `out[i] = div(src[i], by)`, the divisor's case chosen once for the
    /// slice (so a float loop is one vector division per lane group).
    #[inline(always)]
    fn div_slice(src: &[Self], by: u64, out: &mut [Self]) {
        for (o, x) in out.iter_mut().zip(src) {
            *o = Self::div(*x, by);
        }
    }
    /// `out[i] = div(out[i], by)`, as [`Scalar::div_slice`].
    #[inline(always)]
    fn div_in_place(out: &mut [Self], by: u64) {
        for o in out.iter_mut() {
            *o = Self::div(*o, by);
        }
    }
    /// The value, widened exactly.
    fn widen(self) -> Wide;
    /// A widened value converted to this type: integers wrap (bool is
    /// "not zero"), floats round to nearest, ties to even. Only the
    /// conversions `cast` defines (integer to integer, float to float)
    /// reach it; the others are total but unspecified.
    fn narrow(w: Wide) -> Self;
}

mod element;
mod float;

pub use element::*;
pub use float::*;

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
                    ElementwiseOp::Eq => Self::from(a == b),
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

/// `kind` on two native floats: the IEEE sum and product, [`max_float`],
/// [`min_float`], and 1 or 0 for equality.
#[inline(always)]
fn apply_float<T>(kind: ElementwiseOp, a: T, b: T) -> T
where
    T: Copy + PartialOrd + SignBit + From<u8>,
    T: std::ops::Add<Output = T> + std::ops::Mul<Output = T>,
{
    match kind {
        ElementwiseOp::Add => a + b,
        ElementwiseOp::Mul => a * b,
        ElementwiseOp::Max => max_float(a, b),
        ElementwiseOp::Min => min_float(a, b),
        ElementwiseOp::Eq => T::from(u8::from(a == b)),
    }
}

/// `out[i] = src[i] / d` where the divisor is `exact` in the type (one
/// IEEE division is then `div`'s exact quotient rounded once), else
/// `slow(src[i])`: the case chosen once, so the first loop vectorises.
#[inline(always)]
fn div_each<T: Copy + std::ops::Div<Output = T>>(
    src: &[T],
    out: &mut [T],
    exact: Option<T>,
    slow: impl Fn(T) -> T,
) {
    match exact {
        Some(d) => out.iter_mut().zip(src).for_each(|(o, x)| *o = *x / d),
        None => out.iter_mut().zip(src).for_each(|(o, x)| *o = slow(*x)),
    }
}

/// [`div_each`] over `out` in place.
#[inline(always)]
fn div_each_in_place<T: Copy + std::ops::Div<Output = T>>(
    out: &mut [T],
    exact: Option<T>,
    slow: impl Fn(T) -> T,
) {
    match exact {
        Some(d) => out.iter_mut().for_each(|o| *o = *o / d),
        None => out.iter_mut().for_each(|o| *o = slow(*o)),
    }
}

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
        apply_float(kind, a, b)
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
    fn div_slice(src: &[Self], by: u64, out: &mut [Self]) {
        // Below 2^24 the divisor is exact in f32 and one f32 division is
        // the exact quotient rounded once, as `div` gives it through f64.
        let exact = (by < F64_DIV_EXACT_BELOW_24_BITS).then_some(by as f32);
        div_each(src, out, exact, |x| Self::div(x, by));
    }
    #[inline(always)]
    fn div_in_place(out: &mut [Self], by: u64) {
        let exact = (by < F64_DIV_EXACT_BELOW_24_BITS).then_some(by as f32);
        div_each_in_place(out, exact, |x| Self::div(x, by));
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
        apply_float(kind, a, b)
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
    fn div_slice(src: &[Self], by: u64, out: &mut [Self]) {
        let exact = (by <= 1 << 53).then_some(by as f64);
        div_each(src, out, exact, |x| Self::div(x, by));
    }
    #[inline(always)]
    fn div_in_place(out: &mut [Self], by: u64) {
        let exact = (by <= 1 << 53).then_some(by as f64);
        div_each_in_place(out, exact, |x| Self::div(x, by));
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
            ElementwiseOp::Eq => a == b,
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

#[cfg(test)]
mod tests;
