//! [`HostTensor`]: a tensor on the host, each dtype stored as itself.
//!
//! The elements are the little-endian bytes the executor moves (a bool is
//! one byte, 0 or 1), so every value of every dtype is held exactly: an i64
//! past 2^53, a u64 near 2^64, an f16 subnormal, a NaN. Typed data goes in
//! and out through [`Element`] (`from_slice`, `to_vec`); a wrong element
//! type is an [`ElemError`], never a reinterpretation. [`HostTensor::digest`]
//! and [`HostTensor::check_same`] are what `fuel-opt --interpret` prints and
//! what tests and `--run` compare with: bit for bit, every NaN equal to
//! every NaN.

use super::arith::Vals;
use crate::dtype::{DType, TensorType};
use crate::elem::{self, ElemError, Element};
use std::fmt::Write;

/// A host tensor: the interpreter's values, and what device results are
/// checked against.
#[derive(Clone, Debug)]
pub struct HostTensor {
    /// Its type.
    pub ty: TensorType,
    /// Row-major little-endian elements, `ty.size_bytes()` of them.
    bytes: Vec<u8>,
}

impl PartialEq for HostTensor {
    /// Same type and the same elements bit for bit, except that every NaN
    /// equals every NaN (backends need not agree on a NaN's sign or
    /// payload). So +0 and -0 differ.
    fn eq(&self, other: &HostTensor) -> bool {
        self.first_difference(other).is_none() && self.ty == other.ty
    }
}

impl HostTensor {
    /// A tensor from values, each rounded to the dtype: floats to nearest
    /// (ties to even), integers truncated toward zero and wrapped, bool
    /// true for any non-zero value. Exact for every value an `f64` holds;
    /// for 64-bit integers past 2^53 use [`HostTensor::from_slice`].
    /// A length that does not match the type is kept, and refused where the
    /// tensor is used (the interpreter's and the executor's input checks).
    pub fn new(ty: TensorType, data: Vec<f64>) -> HostTensor {
        let vals = if ty.dtype.is_float() {
            Vals::Floats(data)
        } else {
            // Truncated toward zero (saturating past i128, NaN is 0).
            Vals::Ints(data.into_iter().map(|x| x as i128).collect())
        };
        let bytes = vals.encode(ty.dtype);
        HostTensor { ty, bytes }
    }

    /// A tensor of `shape` holding `data` (row-major), whose element type
    /// gives the dtype: `&[f32]` makes an f32 tensor, `&[half::bf16]` a
    /// bf16 one, `&[bool]` a bool one. The length must match the shape.
    pub fn from_slice<T: Element>(shape: &[usize], data: &[T]) -> Result<HostTensor, ElemError> {
        let (ty, bytes) = elem::encode(shape, data)?;
        Ok(HostTensor { ty, bytes })
    }

    /// A tensor from little-endian element bytes, `ty.size_bytes()` of them.
    pub fn from_bytes(ty: TensorType, bytes: Vec<u8>) -> Result<HostTensor, ElemError> {
        if bytes.len() != ty.size_bytes() {
            return Err(ElemError::Bytes {
                want: ty.size_bytes(),
                got: bytes.len(),
                ty,
            });
        }
        Ok(HostTensor { ty, bytes })
    }

    /// A tensor from bytes whose length the caller keeps right (an
    /// executor tensor's).
    pub(crate) fn from_parts(ty: TensorType, bytes: Vec<u8>) -> HostTensor {
        HostTensor { ty, bytes }
    }

    /// The elements as `T`, which must be the dtype's element type (an
    /// error names both otherwise).
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>, ElemError> {
        elem::decode(&self.ty, &self.bytes)
    }

    /// The little-endian element bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The number of elements the bytes hold.
    pub fn len(&self) -> usize {
        self.bytes.len() / self.ty.dtype.size_bytes()
    }

    /// True when there are no elements.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// The elements as `f64`: exact for every float dtype and for integers
    /// up to 2^53 in magnitude; larger 64-bit integers round. For display
    /// and statistics; compare with [`HostTensor::check_same`].
    pub fn to_f64(&self) -> Vec<f64> {
        match Vals::decode(self.ty.dtype, &self.bytes) {
            Vals::Floats(v) => v,
            Vals::Ints(v) => v.into_iter().map(|x| x as f64).collect(),
        }
    }

    /// A stable digest: a 64-bit FNV-1a hash of the elements plus the first
    /// four of them. Equal values give equal digests (every NaN hashes as
    /// one NaN, -0 as +0). Each element is hashed as the bits of its value
    /// as an `f64`; an integer no `f64` holds exactly (a 64-bit one past
    /// 2^53) is hashed as its 16 bytes instead, and printed in full.
    pub fn digest(&self) -> String {
        let vals = Vals::decode(self.ty.dtype, &self.bytes);
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        let mut eat = |bytes: &[u8]| {
            for b in bytes {
                h ^= u64::from(*b);
                h = h.wrapping_mul(0x0000_0100_0000_01b3);
            }
        };
        let shown = |i: usize| -> Option<String> {
            match &vals {
                Vals::Floats(v) => v.get(i).map(|x| format!("{x}")),
                Vals::Ints(v) => v.get(i).map(|x| format!("{x}")),
            }
        };
        match &vals {
            Vals::Floats(v) => {
                for x in v {
                    eat(&canonical(*x).to_bits().to_le_bytes());
                }
            }
            Vals::Ints(v) => {
                for x in v {
                    let f = *x as f64;
                    if f as i128 == *x && f.abs() < 2f64.powi(127) {
                        eat(&canonical(f).to_bits().to_le_bytes());
                    } else {
                        eat(&x.to_le_bytes());
                    }
                }
            }
        }
        let len = vals.len();
        let mut s = format!("{h:016x} [");
        for i in 0..len.min(4) {
            if i > 0 {
                s.push_str(", ");
            }
            if let Some(x) = shown(i) {
                let _ = write!(s, "{x}");
            }
        }
        if len > 4 {
            s.push_str(", ...");
        }
        s.push(']');
        s
    }

    /// The first element (index and both values, as printed) where `self`
    /// and `other` differ bit for bit, NaN equal to NaN; `None` if there is
    /// none. Tensors of different lengths differ at the first missing one.
    fn first_difference(&self, other: &HostTensor) -> Option<(usize, String, String)> {
        let dtype = self.ty.dtype;
        let size = dtype.size_bytes();
        let a = self.bytes.chunks_exact(size);
        let b = other.bytes.chunks_exact(size);
        let (na, nb) = (a.len(), b.len());
        for (i, (x, y)) in a.zip(b).enumerate() {
            if x != y && !(is_nan(dtype, x) && is_nan(dtype, y)) {
                return Some((i, show(dtype, x), show(dtype, y)));
            }
        }
        (na != nb).then(|| (na.min(nb), "missing".into(), "missing".into()))
    }

    /// How many elements differ from `expected`'s, as
    /// [`HostTensor::check_same`] compares them (missing ones count).
    pub fn differences(&self, expected: &HostTensor) -> usize {
        let dtype = self.ty.dtype;
        let size = dtype.size_bytes();
        let a = self.bytes.chunks_exact(size);
        let b = expected.bytes.chunks_exact(size);
        let missing = a.len().abs_diff(b.len());
        missing
            + a.zip(b)
                .filter(|(x, y)| x != y && !(is_nan(dtype, x) && is_nan(dtype, y)))
                .count()
    }

    /// Checks `self` against `expected`: the same type and every element
    /// the same bit for bit (so +0 is not -0), except that every NaN equals
    /// every NaN. Every backend computes what the interpreter does, so no
    /// tolerance applies. The error names the first differing element.
    pub fn check_same(&self, expected: &HostTensor) -> Result<(), String> {
        if self.ty != expected.ty || self.bytes.len() != expected.bytes.len() {
            return Err(format!(
                "type {} differs from the expected {}",
                self.ty, expected.ty
            ));
        }
        match self.first_difference(expected) {
            None => Ok(()),
            Some((i, a, b)) => Err(format!(
                "element {i} is {a} but {b} was expected (bit for bit)"
            )),
        }
    }
}

/// -0 as +0 and every NaN as one NaN, for hashing.
fn canonical(x: f64) -> f64 {
    if x == 0.0 {
        0.0
    } else if x.is_nan() {
        f64::NAN
    } else {
        x
    }
}

/// Whether the element in `bytes` is a NaN.
fn is_nan(dtype: DType, bytes: &[u8]) -> bool {
    match Vals::decode(dtype, bytes) {
        Vals::Floats(v) => v.first().is_some_and(|x| x.is_nan()),
        Vals::Ints(_) => false,
    }
}

/// The element in `bytes`, as a message shows it: its value, and for
/// floats its bit pattern (which tells -0 from +0).
fn show(dtype: DType, bytes: &[u8]) -> String {
    let hex: String = bytes.iter().rev().map(|b| format!("{b:02x}")).collect();
    match Vals::decode(dtype, bytes) {
        Vals::Floats(v) => format!("{} (0x{hex})", v.first().copied().unwrap_or(f64::NAN)),
        Vals::Ints(v) => format!("{}", v.first().copied().unwrap_or(0)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typed_data_round_trips_for_every_dtype() {
        fn check<T: Element>(data: &[T]) {
            let t = HostTensor::from_slice(&[data.len()], data).unwrap();
            assert_eq!(t.ty, TensorType::new(T::DTYPE, &[data.len()]));
            assert_eq!(t.to_vec::<T>().unwrap(), data);
            let e = t.to_vec::<u16>().err();
            let e2 = t.to_vec::<bool>().err();
            assert!(e.is_some() || e2.is_some(), "{}", T::DTYPE);
        }
        check(&[f32::MIN, -0.0, f32::from_bits(1), f32::INFINITY]);
        check(&[f64::MAX, f64::MIN_POSITIVE / 4.0]);
        check(&[
            half::f16::MAX,
            half::f16::from_bits(1),
            half::f16::NEG_INFINITY,
        ]);
        check(&[half::bf16::MIN, half::bf16::from_bits(0x0001)]);
        check(&[i8::MIN, i8::MAX, 0]);
        check(&[i16::MIN, i16::MAX]);
        check(&[i32::MIN, i32::MAX]);
        check(&[i64::MIN, i64::MAX, (1 << 53) + 1]);
        check(&[0u8, u8::MAX]);
        check(&[u16::MAX]);
        check(&[u32::MAX, 7]);
        check(&[u64::MAX, (1 << 53) + 1]);
        check(&[true, false]);
        let t = HostTensor::from_slice(&[2], &[1.0f32, 2.0]).unwrap();
        assert_eq!(
            t.to_vec::<half::f16>().unwrap_err().to_string(),
            "the tensor is f32[2], whose elements are f32, but it was used as half::f16; use Vec<f32> or &[f32]"
        );
    }

    #[test]
    fn new_rounds_to_the_dtype() {
        let t = |d: DType, v: f64| HostTensor::new(TensorType::new(d, &[1]), vec![v]);
        assert_eq!(t(DType::U8, 257.0).to_vec::<u8>().unwrap(), [1]);
        assert_eq!(t(DType::I32, -7.9).to_vec::<i32>().unwrap(), [-7]);
        assert_eq!(t(DType::F16, 2049.0).to_f64(), [2048.0]);
        assert_eq!(t(DType::F32, 0.1).to_vec::<f32>().unwrap(), [0.1f32]);
        assert_eq!(t(DType::I8, 130.0).to_vec::<i8>().unwrap(), [-126]);
        assert_eq!(t(DType::U16, -1.0).to_vec::<u16>().unwrap(), [65535]);
        assert_eq!(t(DType::U64, -1.0).to_vec::<u64>().unwrap(), [u64::MAX]);
        assert_eq!(t(DType::Bool, -3.0).to_vec::<bool>().unwrap(), [true]);
        assert_eq!(t(DType::Bool, 0.0).to_vec::<bool>().unwrap(), [false]);
    }

    #[test]
    fn equality_is_bitwise_but_nan_is_nan() {
        let f = |v: &[f32]| HostTensor::from_slice(&[v.len()], v).unwrap();
        assert_eq!(f(&[f32::NAN, 1.0]), f(&[-f32::NAN, 1.0]));
        assert_ne!(f(&[0.0]), f(&[-0.0]));
        let e = f(&[1.0, 0.0]).check_same(&f(&[1.0, -0.0])).unwrap_err();
        assert_eq!(
            e,
            "element 1 is 0 (0x00000000) but -0 (0x80000000) was expected (bit for bit)"
        );
        let i = HostTensor::from_slice(&[1], &[i64::MAX]).unwrap();
        let j = HostTensor::from_slice(&[1], &[i64::MAX - 1]).unwrap();
        assert_ne!(i, j, "64-bit integers compare exactly");
        assert_ne!(i.digest(), j.digest());
        assert_eq!(
            i.check_same(&j).unwrap_err(),
            "element 0 is 9223372036854775807 but 9223372036854775806 was expected (bit for bit)"
        );
    }

    #[test]
    fn digests_are_those_of_the_values() {
        // Pinned: the digest of exact values is what it was when the
        // interpreter held f64s (the README's `--interpret` lines).
        let t = HostTensor::new(
            TensorType::new(DType::F32, &[5]),
            vec![1.0, -2.0, 0.5, 3.0, 4.0],
        );
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for x in [1.0f64, -2.0, 0.5, 3.0, 4.0] {
            for b in x.to_bits().to_le_bytes() {
                h ^= u64::from(b);
                h = h.wrapping_mul(0x0000_0100_0000_01b3);
            }
        }
        assert_eq!(t.digest(), format!("{h:016x} [1, -2, 0.5, 3, ...]"));
        // Integers hash as the f64 of their value, as they always did.
        let ints = HostTensor::new(
            TensorType::new(DType::I64, &[5]),
            vec![1.0, -2.0, 0.0, 3.0, 4.0],
        );
        let floats = HostTensor::new(
            TensorType::new(DType::F64, &[5]),
            vec![1.0, -2.0, 0.0, 3.0, 4.0],
        );
        assert_eq!(ints.digest(), floats.digest());
        let z = HostTensor::from_slice(&[2], &[-0.0f32, f32::NAN]).unwrap();
        let z2 = HostTensor::from_slice(&[2], &[0.0f32, -f32::NAN]).unwrap();
        let hash = |t: &HostTensor| t.digest().split(' ').next().map(str::to_string);
        assert_eq!(hash(&z), hash(&z2));
        assert_eq!(z.digest(), format!("{} [-0, NaN]", hash(&z).unwrap()));
        let big = HostTensor::from_slice(&[1], &[u64::MAX]).unwrap();
        assert!(
            big.digest().ends_with(" [18446744073709551615]"),
            "{}",
            big.digest()
        );
    }
}
