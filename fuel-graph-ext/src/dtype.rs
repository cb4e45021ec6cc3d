//! Element types and tensor types.
//!
//! [`DType`] is the element type; [`TensorType`] pairs it with a [`Shape`]
//! (any rank, stored inline for up to four axes). Both print and parse in the
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
}

impl DType {
    /// Every dtype, in a fixed order.
    pub const ALL: [DType; 7] = [
        DType::F32,
        DType::F16,
        DType::BF16,
        DType::F64,
        DType::I32,
        DType::I64,
        DType::U8,
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
        }
    }

    /// Bytes per element.
    pub fn size_bytes(self) -> usize {
        match self {
            DType::U8 => 1,
            DType::F16 | DType::BF16 => 2,
            DType::F32 | DType::I32 => 4,
            DType::F64 | DType::I64 => 8,
        }
    }

    /// True for floating-point types.
    pub fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F16 | DType::BF16 | DType::F64)
    }

    /// Rounds an exact value to what this dtype can hold: floats round to
    /// nearest, integers truncate toward zero and wrap like the hardware does.
    pub fn round(self, x: f64) -> f64 {
        match self {
            DType::F64 => x,
            DType::F32 => x as f32 as f64,
            DType::F16 => half::f16::from_f64(x).to_f64(),
            DType::BF16 => half::bf16::from_f64(x).to_f64(),
            DType::I32 => (x as i64) as i32 as f64,
            DType::I64 => (x as i64) as f64,
            DType::U8 => (x as i64) as u8 as f64,
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
            _ => Err(format!(
                "unknown dtype `{s}`: expected one of f32, f16, bf16, f64, i32, i64, u8"
            )),
        }
    }
}

/// A shape: one extent per axis. Rank 0 is a scalar.
pub type Shape = SmallVec<[usize; 4]>;

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
    /// Number of elements (1 for a scalar); saturates instead of overflowing.
    pub fn num_elements(&self) -> usize {
        self.shape.iter().fold(1usize, |a, &d| a.saturating_mul(d))
    }
    /// Size in bytes; saturates instead of overflowing.
    pub fn size_bytes(&self) -> usize {
        self.num_elements().saturating_mul(self.dtype.size_bytes())
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
        for d in DType::ALL {
            assert_eq!(d.as_str().parse::<DType>(), Ok(d));
        }
        assert!("f8"
            .parse::<DType>()
            .unwrap_err()
            .contains("expected one of"));
    }

    #[test]
    fn rounding_wraps_and_rounds() {
        assert_eq!(DType::U8.round(257.0), 1.0);
        assert_eq!(DType::I32.round(-7.9), -7.0);
        assert_eq!(DType::F16.round(2049.0), 2048.0);
        assert_eq!(DType::F32.round(0.1), 0.1f32 as f64);
    }
}
