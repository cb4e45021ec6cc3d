//! Element arithmetic, written once per dtype: the one place that says how
//! the runtime adds, multiplies, compares and divides elements.
//!
//! [`Scalar`] gives each storage type the four element-wise combiners and
//! the division by a positive integer, with the reference interpreter's
//! rounding: integers wrap and divide toward zero; f16 and bf16 compute in
//! f32 and round once per step, which equals a correctly rounded
//! half-precision operation (f32 has more than twice the precision, so the
//! double rounding is harmless); bool's add and max are OR, mul and min are
//! AND, and division truncates the 0/1 value. The CPU kernels
//! (`backend::cpu`) and the host collective drivers (through those kernels)
//! use it; `with_scalar!` picks the Rust type of a [`DType`] at run time.
//! The PTX and WGSL kernels are other languages and the interpreter is an
//! independent oracle, so they are written separately.

use crate::dtype::DType;
use crate::op::ElementwiseOp;

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
        }
    )*};
}
int_scalar!(i8 => I8, i16 => I16, i32 => I32, i64 => I64, u8 => U8, u16 => U16, u32 => U32, u64 => U64);

macro_rules! float_scalar {
    ($($t:ty => $d:ident),*) => {$(
        // SAFETY: a primitive float: no padding, every bit pattern valid, align <= 8.
        unsafe impl Scalar for $t {
            const DTYPE: DType = DType::$d;
            #[inline(always)]
            fn apply(kind: ElementwiseOp, a: Self, b: Self) -> Self {
                match kind {
                    ElementwiseOp::Add => a + b,
                    ElementwiseOp::Mul => a * b,
                    ElementwiseOp::Max => a.max(b),
                    ElementwiseOp::Min => a.min(b),
                }
            }
            #[inline(always)]
            fn div(a: Self, by: u64) -> Self {
                (a as f64 / by as f64) as Self
            }
        }
    )*};
}
float_scalar!(f32 => F32, f64 => F64);

macro_rules! half_scalar {
    ($($t:ty => $d:ident),*) => {$(
        // SAFETY: a repr(transparent) u16: no padding, every bit pattern valid.
        unsafe impl Scalar for $t {
            const DTYPE: DType = DType::$d;
            #[inline(always)]
            fn apply(kind: ElementwiseOp, a: Self, b: Self) -> Self {
                <$t>::from_f32(f32::apply(kind, a.to_f32(), b.to_f32()))
            }
            #[inline(always)]
            fn div(a: Self, by: u64) -> Self {
                <$t>::from_f64(a.to_f64() / by as f64)
            }
        }
    )*};
}
half_scalar!(half::f16 => F16, half::bf16 => BF16);

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
}

/// Runs `$body` with `$t` bound to the Rust type of `$dtype`.
macro_rules! with_scalar {
    ($dtype:expr, $t:ident => $body:expr) => {
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
                type $t = $crate::elem::Bool;
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
pub(crate) use with_scalar;

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
            assert_eq!(with_scalar!(d, T => T::DTYPE), d);
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
}
