//! [`Element`]: the Rust type users hold each dtype's elements in, and the
//! checked conversion between typed slices and the executor's bytes
//! ([`encode`], [`decode`], [`ElemError`]).

use crate::dtype::{DType, TensorType};
use std::fmt;

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
    /// Writes `data`'s little-endian bytes over `out`, element by element
    /// in fixed-size chunks (which the compiler turns into a plain copy on
    /// a little-endian host); `out` holds `data.len()` elements' bytes.
    fn encode_into(data: &[Self], out: &mut [u8]);
    /// Reads `out.len()` elements from the little-endian `bytes`, the
    /// inverse of [`Element::encode_into`].
    fn decode_into(bytes: &[u8], out: &mut [Self]);
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
            #[inline]
            fn encode_into(data: &[Self], out: &mut [u8]) {
                for (d, x) in out.chunks_exact_mut($n).zip(data) {
                    d.copy_from_slice(&x.to_le_bytes());
                }
            }
            #[inline]
            fn decode_into(bytes: &[u8], out: &mut [Self]) {
                for (x, c) in out.iter_mut().zip(bytes.chunks_exact($n)) {
                    let mut b = [0u8; $n];
                    b.copy_from_slice(c);
                    *x = <$t>::from_le_bytes(b);
                }
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
    #[inline]
    fn encode_into(data: &[Self], out: &mut [u8]) {
        for (d, x) in out.iter_mut().zip(data) {
            *d = u8::from(*x);
        }
    }
    #[inline]
    fn decode_into(bytes: &[u8], out: &mut [Self]) {
        for (x, b) in out.iter_mut().zip(bytes) {
            *x = *b != 0;
        }
    }
}

/// The Rust type that holds `dtype`'s elements, as [`Element::RUST_NAME`]
/// spells it.
pub fn rust_name(dtype: DType) -> &'static str {
    with_element!(dtype, T => T::RUST_NAME)
}

/// Why typed host data does not fit.
#[derive(Clone, PartialEq, Eq, thiserror::Error)]
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
    let mut bytes = vec![0u8; ty.size_bytes()];
    T::encode_into(data, &mut bytes);
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
    let mut out = vec![T::get(&[0; 8]); bytes.len() / ty.dtype.size_bytes()];
    T::decode_into(bytes, &mut out);
    Ok(out)
}
