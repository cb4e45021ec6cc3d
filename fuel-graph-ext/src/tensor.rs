//! Host tensors: the runtime's inputs and outputs, and what a lazy graph's
//! results hold.
//!
//! A [`Tensor`] is raw little-endian element bytes plus a [`TensorType`]:
//! what the hot path hands to devices without any per-element work. The bytes
//! sit behind an `Arc`, so passing a tensor to a device worker copies no data.
//! Typed data goes in with [`Tensor::from_slice`] (`&[f32]`,
//! `&[half::bf16]`, `&[bool]`, ...) and comes out with [`Tensor::to_vec`],
//! or, with no allocation, [`Tensor::copy_from_slice`] and
//! [`Tensor::copy_to_slice`] over a tensor's own bytes;
//! a wrong element type is an [`ElemError`] naming both types, never a
//! reinterpretation of the bytes. [`Tensor::from_host`] and
//! [`Tensor::to_host`] convert to and from the reference interpreter's
//! [`HostTensor`] (the same bytes) for checking results.

use crate::dtype::TensorType;
use crate::elem::{self, ElemError, Element};
use crate::interp::HostTensor;
use std::sync::Arc;

/// Element bytes and their type.
#[derive(Clone, Debug, PartialEq)]
pub struct Tensor {
    ty: TensorType,
    bytes: Arc<[u8]>,
}

impl Tensor {
    /// A tensor from raw little-endian bytes; the length must be `ty.size_bytes()`.
    pub fn from_bytes(ty: TensorType, bytes: impl Into<Arc<[u8]>>) -> Result<Tensor, String> {
        let bytes = bytes.into();
        if bytes.len() != ty.size_bytes() {
            return Err(format!(
                "a {ty} tensor needs {} bytes but {} were given",
                ty.size_bytes(),
                bytes.len()
            ));
        }
        Ok(Tensor { ty, bytes })
    }

    /// A tensor of `shape` holding `data` (row-major); the element type
    /// gives the dtype (`&[f32]` is f32, `&[half::f16]` f16, `&[bool]`
    /// bool). The length must match the shape.
    pub fn from_slice<T: Element>(shape: &[usize], data: &[T]) -> Result<Tensor, ElemError> {
        let ty = TensorType::new(T::DTYPE, shape);
        if data.len() != ty.num_elements() {
            return Err(ElemError::Length {
                want: ty.num_elements(),
                got: data.len(),
                ty,
            });
        }
        let mut t = Tensor::zeros(ty);
        t.write_bytes(data);
        Ok(t)
    }

    /// A tensor of `ty` with every byte zero: the buffer to fill with
    /// [`Tensor::copy_from_slice`] and hand to an eager call, which swaps
    /// buffers rather than copying them.
    pub fn zeros(ty: TensorType) -> Tensor {
        // Collected from an iterator of known length: one allocation, the
        // `Arc`'s own, where `Arc::from(Vec)` would copy the vector.
        let bytes: Arc<[u8]> = std::iter::repeat_n(0u8, ty.size_bytes()).collect();
        Tensor { ty, bytes }
    }

    /// Overwrites the elements with `data` (same dtype and element count),
    /// in the tensor's own bytes where no clone shares them, so a loop that
    /// refills one tensor allocates nothing; a shared buffer is replaced by
    /// a new one and the clones keep their values.
    pub fn copy_from_slice<T: Element>(&mut self, data: &[T]) -> Result<(), ElemError> {
        self.check_elements::<T>(data.len())?;
        self.write_bytes(data);
        Ok(())
    }

    /// Copies the elements into `out` (same dtype and element count)
    /// without allocating: the way results go back into a caller's buffer.
    pub fn copy_to_slice<T: Element>(&self, out: &mut [T]) -> Result<(), ElemError> {
        self.check_elements::<T>(out.len())?;
        T::decode_into(&self.bytes, out);
        Ok(())
    }

    /// Whether `n` elements of `T` are this tensor's elements.
    fn check_elements<T: Element>(&self, n: usize) -> Result<(), ElemError> {
        if T::DTYPE != self.ty.dtype {
            return Err(ElemError::WrongType {
                ty: self.ty.clone(),
                want: elem::rust_name(self.ty.dtype),
                got: T::RUST_NAME,
            });
        }
        if n != self.ty.num_elements() {
            return Err(ElemError::Length {
                ty: self.ty.clone(),
                want: self.ty.num_elements(),
                got: n,
            });
        }
        Ok(())
    }

    /// Writes `data` (checked by the caller) over the bytes, unsharing
    /// them first if a clone holds them.
    fn write_bytes<T: Element>(&mut self, data: &[T]) {
        if Arc::get_mut(&mut self.bytes).is_none() {
            *self = Tensor::zeros(self.ty.clone());
        }
        if let Some(b) = Arc::get_mut(&mut self.bytes) {
            T::encode_into(data, b);
        }
    }

    /// The elements as `T`, which must be the dtype's element type; a
    /// wrong `T` is an error naming both types.
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>, ElemError> {
        elem::decode(&self.ty, &self.bytes)
    }

    /// An interpreter tensor's bytes, as they are.
    pub fn from_host(t: &HostTensor) -> Tensor {
        Tensor {
            ty: t.ty.clone(),
            bytes: t.bytes().into(),
        }
    }

    /// The same bytes as an interpreter tensor, for comparison.
    pub fn to_host(&self) -> HostTensor {
        HostTensor::from_parts(self.ty.clone(), self.bytes.to_vec())
    }

    /// The type.
    pub fn ty(&self) -> &TensorType {
        &self.ty
    }

    /// The element bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The bytes, writable, if the tensor has type `ty` and shares them
    /// with no other tensor (what the runtime's `run_into`
    /// overwrites in place).
    #[doc(hidden)]
    pub fn bytes_mut_for(&mut self, ty: &TensorType) -> Option<&mut [u8]> {
        if self.ty != *ty || self.bytes.len() != ty.size_bytes() {
            return None;
        }
        Arc::get_mut(&mut self.bytes)
    }

    /// Takes the bytes out, if the tensor has type `ty` and shares them with
    /// no other tensor, leaving an empty (invalid) tensor behind: the
    /// runner writes the result into them and puts a valid tensor back.
    #[doc(hidden)]
    pub fn take_bytes_for(&mut self, ty: &TensorType) -> Option<Arc<[u8]>> {
        if self.ty != *ty
            || Arc::strong_count(&self.bytes) != 1
            || Arc::weak_count(&self.bytes) != 0
        {
            return None;
        }
        Some(std::mem::replace(&mut self.bytes, no_bytes()))
    }

    /// A tensor of `ty` without its bytes: a place in an output vector that
    /// the runner fills (its bytes never match `ty`, so nothing is written
    /// into them).
    #[doc(hidden)]
    pub fn unfilled(ty: TensorType) -> Tensor {
        Tensor {
            ty,
            bytes: no_bytes(),
        }
    }

    /// The shared byte buffer (cheap to clone). This and the three
    /// functions above are the runtime's, which writes results in place.
    #[doc(hidden)]
    pub fn shared(&self) -> Arc<[u8]> {
        self.bytes.clone()
    }
}

/// The bytes of a tensor without any: one shared empty buffer, so making a
/// placeholder allocates nothing (a runner makes a few per run). Shared,
/// it is never unique, so nothing is ever written into it.
fn no_bytes() -> Arc<[u8]> {
    static EMPTY: std::sync::OnceLock<Arc<[u8]>> = std::sync::OnceLock::new();
    EMPTY.get_or_init(|| Arc::from(Vec::new())).clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_every_dtype() {
        fn check<T: Element>(data: &[T]) {
            let t = Tensor::from_slice(&[data.len()], data).unwrap();
            assert_eq!(t.ty().dtype, T::DTYPE);
            assert_eq!(t.bytes().len(), t.ty().size_bytes());
            // Compared as bytes: a NaN element is not equal to itself.
            let again = |v: Vec<T>| Tensor::from_slice(&[v.len()], &v).unwrap();
            assert_eq!(again(t.to_vec::<T>().unwrap()), t);
            // Through the interpreter's tensor and back, unchanged.
            let h = t.to_host();
            assert_eq!(again(h.to_vec::<T>().unwrap()), t);
            assert_eq!(Tensor::from_host(&h), t);
            // Into a zeroed tensor's own bytes and back out into a slice;
            // a clone taken before keeps its zeros.
            let mut z = Tensor::zeros(t.ty().clone());
            let held = z.clone();
            z.copy_from_slice(data).unwrap();
            assert_eq!(z, t);
            assert!(held.bytes().iter().all(|b| *b == 0));
            let mut out = vec![data[0]; data.len()];
            z.copy_to_slice(&mut out).unwrap();
            assert_eq!(again(out), t);
            let e = z.copy_from_slice(&data[1..]).unwrap_err().to_string();
            assert!(e.contains("give one value per element"), "{e}");
            // Read as any other type: an error naming both.
            let wrong = if T::DTYPE == crate::dtype::DType::F32 {
                t.to_vec::<i32>().unwrap_err()
            } else {
                t.to_vec::<f32>().unwrap_err()
            };
            let e = wrong.to_string();
            assert!(e.contains(T::RUST_NAME) && e.contains("used as"), "{e}");
        }
        check(&[1.0f32, -0.0, f32::NAN, f32::MIN_POSITIVE / 8.0]);
        check(&[f64::MAX, -1.5]);
        check(&[half::f16::MAX, half::f16::from_bits(1), half::f16::NEG_ZERO]);
        check(&[half::bf16::MAX, half::bf16::MIN_POSITIVE_SUBNORMAL]);
        check(&[i8::MIN, -1, i8::MAX]);
        check(&[i16::MIN, i16::MAX]);
        check(&[i32::MIN, i32::MAX]);
        check(&[i64::MIN, i64::MAX, (1 << 53) + 1]);
        check(&[0u8, 255]);
        check(&[u16::MAX, 1]);
        check(&[u32::MAX, 0]);
        check(&[u64::MAX, (1 << 60) + 3]);
        check(&[true, false, true]);
        let e = Tensor::from_bytes(
            TensorType::new(crate::dtype::DType::F32, &[2]),
            vec![0u8; 7],
        )
        .unwrap_err();
        assert!(e.contains("needs 8 bytes"), "{e}");
        let e = Tensor::from_slice(&[3], &[1u64, 2])
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "a tensor of type u64[3] has 3 element(s) but 2 were given; give one value per element"
        );
    }
}
