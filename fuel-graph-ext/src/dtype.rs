//! Element types and tensor types.
//!
//! [`DType`] is the element type: the floats f32, f16, bf16, f64, the
//! integers i8, i16, i32, i64, u8, u16, u32, u64, and bool; [`TensorType`]
//! pairs it with a [`Shape`] (any rank, stored inline for up to four axes). Both print and parse in the
//! text-IR spelling: `f32`, `bf16[4,256]`, `i64[]` for a scalar.

use smallvec::SmallVec;
use std::fmt;
use std::str::FromStr;

/// An element type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DType {
    /// IEEE binary32.
    F32,
    /// IEEE binary16.
    F16,
    /// bfloat16.
    BF16,
    /// IEEE binary64.
    F64,
    /// Signed 32-bit integer.
    I32,
    /// Signed 64-bit integer.
    I64,
    /// Unsigned 8-bit integer.
    U8,
    /// A truth value stored in one byte: 0 is false, anything else true
    /// (kernels write 1). Add and max are OR, mul and min are AND.
    Bool,
    /// Signed 8-bit integer.
    I8,
    /// Signed 16-bit integer.
    I16,
    /// Unsigned 16-bit integer.
    U16,
    /// Unsigned 32-bit integer.
    U32,
    /// Unsigned 64-bit integer.
    U64,
}

impl DType {
    /// Every dtype, in a fixed order.
    pub const ALL: [DType; 13] = [
        DType::F32,
        DType::F16,
        DType::BF16,
        DType::F64,
        DType::I32,
        DType::I64,
        DType::U8,
        DType::Bool,
        DType::I8,
        DType::I16,
        DType::U16,
        DType::U32,
        DType::U64,
    ];

    /// The text-IR spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::F64 => "f64",
            DType::I32 => "i32",
            DType::I64 => "i64",
            DType::U8 => "u8",
            DType::Bool => "bool",
            DType::I8 => "i8",
            DType::I16 => "i16",
            DType::U16 => "u16",
            DType::U32 => "u32",
            DType::U64 => "u64",
        }
    }

    /// Bytes per element.
    pub fn size_bytes(self) -> usize {
        match self {
            DType::U8 | DType::Bool | DType::I8 => 1,
            DType::F16 | DType::BF16 | DType::I16 | DType::U16 => 2,
            DType::F32 | DType::I32 | DType::U32 => 4,
            DType::F64 | DType::I64 | DType::U64 => 8,
        }
    }

    /// True for floating-point types.
    pub fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F16 | DType::BF16 | DType::F64)
    }

    /// True for the unsigned integer types and bool, whose values are never
    /// negative.
    pub fn is_unsigned(self) -> bool {
        matches!(
            self,
            DType::U8 | DType::U16 | DType::U32 | DType::U64 | DType::Bool
        )
    }

    /// The type a `Mean` of this dtype sums in before it divides, so that
    /// the sum cannot overflow where the mean fits: f32 for f16; f64 for
    /// bf16 (which has f32's range, so an f32 sum of bf16 values can
    /// overflow); i64 for the signed integers up to 32 bits, u64 for the
    /// unsigned ones and bool (whose mean is then true only when every
    /// operand is). f32, f64, i64 and u64 sum in themselves: there is no
    /// wider type every device has, so their sums overflow as Sum does
    /// (docs/lowering.md).
    pub fn mean_accumulator(self) -> DType {
        match self {
            DType::F16 => DType::F32,
            DType::BF16 => DType::F64,
            DType::I8 | DType::I16 | DType::I32 => DType::I64,
            DType::U8 | DType::U16 | DType::U32 | DType::Bool => DType::U64,
            DType::F32 | DType::F64 | DType::I64 | DType::U64 => self,
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for DType {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "f32" => Ok(DType::F32),
            "f16" => Ok(DType::F16),
            "bf16" => Ok(DType::BF16),
            "f64" => Ok(DType::F64),
            "i32" => Ok(DType::I32),
            "i64" => Ok(DType::I64),
            "u8" => Ok(DType::U8),
            "bool" => Ok(DType::Bool),
            "i8" => Ok(DType::I8),
            "i16" => Ok(DType::I16),
            "u16" => Ok(DType::U16),
            "u32" => Ok(DType::U32),
            "u64" => Ok(DType::U64),
            _ => Err(format!(
                "unknown dtype `{}`: expected one of f32, f16, bf16, f64, i32, i64, u8, bool, i8, i16, u16, u32, u64",
                crate::text::excerpt::token(s)
            )),
        }
    }
}

/// A shape: one extent per axis. Rank 0 is a scalar.
pub type Shape = SmallVec<[usize; 4]>;

/// The most bytes one tensor may take: `isize::MAX` (2^63 - 1), the
/// largest allocation Rust can make, and far more than any device has.
/// The verifier refuses a type that does not [`fit`](TensorType::fits), so
/// every size, offset and element count computed from a verified graph's
/// types fits in `usize` without overflow checks.
pub const MAX_TENSOR_BYTES: usize = isize::MAX as usize;

/// A dtype and a shape.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TensorType {
    /// Element type.
    pub dtype: DType,
    /// Extents, outermost first.
    pub shape: Shape,
}

impl TensorType {
    /// Builds a type from a dtype and extents.
    pub fn new(dtype: DType, shape: &[usize]) -> TensorType {
        TensorType {
            dtype,
            shape: shape.iter().copied().collect(),
        }
    }
    /// Number of elements (1 for a scalar); saturates instead of
    /// overflowing (a type that [`fits`](TensorType::fits) never does).
    pub fn num_elements(&self) -> usize {
        self.checked_num_elements().unwrap_or(usize::MAX)
    }
    /// Size in bytes; saturates instead of overflowing (a type that
    /// [`fits`](TensorType::fits) never does).
    pub fn size_bytes(&self) -> usize {
        self.checked_size_bytes().unwrap_or(usize::MAX)
    }
    /// Number of elements, or `None` if it does not fit in `usize`. An
    /// empty axis makes it 0 whatever the other extents are.
    pub fn checked_num_elements(&self) -> Option<usize> {
        if self.shape.contains(&0) {
            return Some(0);
        }
        self.shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d))
    }
    /// Size in bytes, or `None` if it does not fit in `usize`.
    pub fn checked_size_bytes(&self) -> Option<usize> {
        self.checked_num_elements()?
            .checked_mul(self.dtype.size_bytes())
    }
    /// True if the type can be addressed: the extents, each counted as at
    /// least 1, times the element size, come to at most
    /// [`MAX_TENSOR_BYTES`]. Counting empty axes as 1 bounds every partial
    /// product too (the rows before an axis, the elements after it, byte
    /// offsets), so code that walks a fitting type cannot overflow, and an
    /// empty tensor cannot hide an axis of 2^63 rows to loop over.
    pub fn fits(&self) -> bool {
        self.shape
            .iter()
            .try_fold(self.dtype.size_bytes(), |a, &d| a.checked_mul(d.max(1)))
            .is_some_and(|b| b <= MAX_TENSOR_BYTES)
    }
    /// Number of axes.
    pub fn rank(&self) -> usize {
        self.shape.len()
    }
    /// The same dtype with one axis changed.
    pub fn with_dim(&self, axis: usize, extent: usize) -> TensorType {
        let mut t = self.clone();
        if let Some(d) = t.shape.get_mut(axis) {
            *d = extent;
        }
        t
    }
}

impl fmt::Display for TensorType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}[", self.dtype)?;
        for (i, d) in self.shape.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{d}")?;
        }
        f.write_str("]")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_and_sizes() {
        let t = TensorType::new(DType::BF16, &[4, 256]);
        assert_eq!(t.to_string(), "bf16[4,256]");
        assert_eq!(t.size_bytes(), 2048);
        assert_eq!(TensorType::new(DType::I64, &[]).to_string(), "i64[]");
        assert_eq!(TensorType::new(DType::I64, &[]).num_elements(), 1);
    }

    #[test]
    fn sizes_are_checked() {
        let t = |d: DType, s: &[usize]| TensorType::new(d, s);
        let big = 1usize << 62;
        assert!(t(DType::U8, &[big]).fits());
        assert_eq!(t(DType::U8, &[big]).checked_size_bytes(), Some(big));
        // 2^62 f32s are 2^64 bytes: the count fits, the bytes do not.
        assert!(!t(DType::F32, &[big]).fits());
        assert_eq!(t(DType::F32, &[big]).checked_num_elements(), Some(big));
        assert_eq!(t(DType::F32, &[big]).checked_size_bytes(), None);
        assert_eq!(t(DType::F32, &[big]).size_bytes(), usize::MAX);
        assert!(!t(DType::U8, &[1 << 63]).fits());
        assert!(!t(DType::U8, &[1 << 32, 1 << 32]).fits());
        assert_eq!(
            t(DType::U8, &[1 << 32, 1 << 32]).checked_num_elements(),
            None
        );
        // An empty tensor has no elements, but its other axes still count.
        assert_eq!(
            t(DType::F64, &[usize::MAX, 0]).checked_num_elements(),
            Some(0)
        );
        assert!(!t(DType::F64, &[usize::MAX, 0]).fits());
        assert!(t(DType::F64, &[1 << 20, 0]).fits());
        assert!(t(DType::U8, &[]).fits());
        for d in DType::ALL {
            assert_eq!(d.as_str().parse::<DType>(), Ok(d));
        }
        assert!("f8"
            .parse::<DType>()
            .unwrap_err()
            .contains("expected one of"));
    }

    #[test]
    fn means_widen_what_can_overflow() {
        for d in DType::ALL {
            let acc = d.mean_accumulator();
            assert_eq!(acc.is_float(), d.is_float(), "{d}");
            assert!(acc.size_bytes() >= d.size_bytes(), "{d}");
            assert_eq!(
                acc.mean_accumulator(),
                acc,
                "{d}: an accumulator is its own"
            );
        }
    }
}
