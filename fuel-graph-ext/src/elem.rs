//! Element arithmetic shared by the CPU kernels, written once per dtype.
//!
//! [`Elem`] gives each storable element type the four folds and the scalar
//! division with the interpreter's rounding: integers wrap and divide toward
//! zero; f16 and bf16 compute in f32 and round once per step, which equals a
//! correctly rounded half-precision operation (f32 has more than twice the
//! precision, so the double rounding is harmless).

use crate::op::ElementwiseOp;

/// A plain element type: every bit pattern is a valid value, alignment at most 8.
///
/// # Safety
/// Implement only for types with no padding, no invalid bit patterns and
/// `align_of::<Self>() <= 8`, so a `u64`-aligned byte buffer may be viewed as `[Self]`.
pub unsafe trait Elem: Copy + Send + Sync + 'static {
    /// Combines two elements.
    fn apply(kind: ElementwiseOp, a: Self, b: Self) -> Self;
    /// Divides by a positive integer.
    fn div(a: Self, by: u64) -> Self;
}

macro_rules! int_elem {
    ($t:ty) => {
        // SAFETY: a primitive integer: no padding, every bit pattern valid, align <= 8.
        unsafe impl Elem for $t {
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
    };
}
int_elem!(i32);
int_elem!(i64);
int_elem!(u8);

macro_rules! float_elem {
    ($t:ty) => {
        // SAFETY: a primitive float: no padding, every bit pattern valid, align <= 8.
        unsafe impl Elem for $t {
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
    };
}
float_elem!(f32);
float_elem!(f64);

macro_rules! half_elem {
    ($t:ty) => {
        // SAFETY: a repr(transparent) u16: no padding, every bit pattern valid.
        unsafe impl Elem for $t {
            #[inline(always)]
            fn apply(kind: ElementwiseOp, a: Self, b: Self) -> Self {
                <$t>::from_f32(f32::apply(kind, a.to_f32(), b.to_f32()))
            }
            #[inline(always)]
            fn div(a: Self, by: u64) -> Self {
                <$t>::from_f64(a.to_f64() / by as f64)
            }
        }
    };
}
half_elem!(half::f16);
half_elem!(half::bf16);

/// Runs `$body` with `$t` bound to the Rust type of `$dtype`.
macro_rules! with_elem {
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
        }
    };
}
pub(crate) use with_elem;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integer_division_truncates_toward_zero() {
        assert_eq!(i32::div(-7, 2), -3);
        assert_eq!(i64::div(7, 2), 3);
        assert_eq!(u8::div(255, 300), 0);
        assert_eq!(f32::div(-7.0, 2), -3.5);
        assert_eq!(i32::apply(ElementwiseOp::Add, i32::MAX, 1), i32::MIN);
        assert_eq!(u8::apply(ElementwiseOp::Mul, 16, 16), 0);
        let h = half::f16::from_f32(2048.0);
        assert_eq!(
            half::f16::apply(ElementwiseOp::Add, h, half::f16::ONE).to_f32(),
            2048.0
        );
    }
}
