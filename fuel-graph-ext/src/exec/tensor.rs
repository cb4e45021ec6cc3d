//! Host tensors for the executor's inputs and outputs.
//!
//! A [`Tensor`] is raw little-endian element bytes plus a [`TensorType`]:
//! what the hot path hands to devices without any per-element work. The bytes
//! sit behind an `Arc`, so passing a tensor to a device worker copies no data.
//! [`Tensor::from_host`] and [`Tensor::to_host`] convert to and from the
//! reference interpreter's [`HostTensor`] for checking results.

use crate::dtype::{DType, TensorType};
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

    /// Encodes an interpreter tensor (values are rounded to the dtype).
    pub fn from_host(t: &HostTensor) -> Tensor {
        let mut bytes = Vec::with_capacity(t.ty.size_bytes());
        for &x in &t.data {
            encode(t.ty.dtype, x, &mut bytes);
        }
        Tensor {
            ty: t.ty.clone(),
            bytes: bytes.into(),
        }
    }

    /// Decodes into an interpreter tensor for comparison.
    pub fn to_host(&self) -> HostTensor {
        let size = self.ty.dtype.size_bytes();
        let data = self
            .bytes
            .chunks_exact(size)
            .map(|c| decode(self.ty.dtype, c))
            .collect();
        HostTensor {
            ty: self.ty.clone(),
            data,
        }
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
    /// with no other tensor (what [`run_into`](super::Executable::run_into)
    /// overwrites in place).
    pub(crate) fn bytes_mut_for(&mut self, ty: &TensorType) -> Option<&mut [u8]> {
        if self.ty != *ty || self.bytes.len() != ty.size_bytes() {
            return None;
        }
        Arc::get_mut(&mut self.bytes)
    }

    /// Takes the bytes out, if the tensor has type `ty` and shares them with
    /// no other tensor, leaving an empty (invalid) tensor behind: the
    /// runner writes the result into them and puts a valid tensor back.
    pub(crate) fn take_bytes_for(&mut self, ty: &TensorType) -> Option<Arc<[u8]>> {
        if self.ty != *ty
            || Arc::strong_count(&self.bytes) != 1
            || Arc::weak_count(&self.bytes) != 0
        {
            return None;
        }
        Some(std::mem::replace(&mut self.bytes, Arc::from(Vec::new())))
    }

    /// The shared byte buffer (cheap to clone).
    pub(crate) fn shared(&self) -> Arc<[u8]> {
        self.bytes.clone()
    }
}

/// Appends `x` (already a value of `dtype`, see [`DType::round`]) as
/// little-endian bytes.
fn encode(dtype: DType, x: f64, out: &mut Vec<u8>) {
    // Integers go through i128, which holds every value of every integer dtype.
    let int = x as i128;
    match dtype {
        DType::F32 => out.extend_from_slice(&(x as f32).to_le_bytes()),
        DType::F64 => out.extend_from_slice(&x.to_le_bytes()),
        DType::F16 => out.extend_from_slice(&half::f16::from_f64(x).to_le_bytes()),
        DType::BF16 => out.extend_from_slice(&half::bf16::from_f64(x).to_le_bytes()),
        DType::I32 => out.extend_from_slice(&(int as i32).to_le_bytes()),
        // Saturating, as DType::round is for these two.
        DType::I64 => out.extend_from_slice(&(x as i64).to_le_bytes()),
        DType::U8 => out.push(int as u8),
        DType::Bool => out.push(u8::from(x != 0.0)),
        DType::I8 => out.extend_from_slice(&(int as i8).to_le_bytes()),
        DType::I16 => out.extend_from_slice(&(int as i16).to_le_bytes()),
        DType::U16 => out.extend_from_slice(&(int as u16).to_le_bytes()),
        DType::U32 => out.extend_from_slice(&(int as u32).to_le_bytes()),
        DType::U64 if x >= 0.0 => out.extend_from_slice(&(x as u64).to_le_bytes()),
        DType::U64 => out.extend_from_slice(&(int as u64).to_le_bytes()),
    }
}

fn decode(dtype: DType, c: &[u8]) -> f64 {
    let b2 = || [c[0], c[1]];
    let b4 = || [c[0], c[1], c[2], c[3]];
    let b8 = || [c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]];
    match dtype {
        DType::F32 => f32::from_le_bytes(b4()) as f64,
        DType::F64 => f64::from_le_bytes(b8()),
        DType::F16 => half::f16::from_le_bytes(b2()).to_f64(),
        DType::BF16 => half::bf16::from_le_bytes(b2()).to_f64(),
        DType::I32 => i32::from_le_bytes(b4()) as f64,
        DType::I64 => i64::from_le_bytes(b8()) as f64,
        DType::U8 => c[0] as f64,
        DType::Bool => f64::from(u8::from(c[0] != 0)),
        DType::I8 => c[0] as i8 as f64,
        DType::I16 => i16::from_le_bytes(b2()) as f64,
        DType::U16 => u16::from_le_bytes(b2()) as f64,
        DType::U32 => u32::from_le_bytes(b4()) as f64,
        DType::U64 => u64::from_le_bytes(b8()) as f64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_every_dtype() {
        for dtype in DType::ALL {
            let ty = TensorType::new(dtype, &[5]);
            let h = HostTensor::new(ty.clone(), vec![1.0, -2.0, 3.0, 0.0, 7.0]);
            // Unsigned types wrap -2 and bool holds 0/1: rounding is the oracle.
            let t = Tensor::from_host(&h);
            assert_eq!(t.bytes().len(), ty.size_bytes());
            let back = t.to_host();
            assert_eq!(back.ty, h.ty);
            assert_eq!(back.data, h.data, "{dtype}");
        }
        let e = Tensor::from_bytes(TensorType::new(DType::F32, &[2]), vec![0u8; 7]).unwrap_err();
        assert!(e.contains("needs 8 bytes"), "{e}");
    }
}
