//! [`ElemType`], the element types a driver may carry, and the typed fold
//! the host-side drivers use for `all_reduce`.
//!
//! The arithmetic follows the executor's (`fuel_graph_ext::exec`): integers
//! wrap and divide toward zero; f16 and bf16 compute in f32 and round after
//! every step; `Mean` is the sum divided by the number of ranks (in f64 for
//! floats, then rounded). Bool has no arithmetic of its own: Sum and Max are
//! OR, Product and Min are AND, and Mean is the truncating mean of 0/1
//! values, which is 1 only when every rank holds true, i.e. AND. Shards are
//! folded in rank order, so every rank computes bit-identical results.

use fuel_graph_ext::{DType, ReduceOp};

/// The element types a driver may carry: the graph's own [`DType`].
pub type ElemType = DType;

/// One element type's arithmetic over little-endian bytes.
trait Scalar: Copy {
    const SIZE: usize;
    fn read(b: &[u8]) -> Self;
    fn write(self, b: &mut [u8]);
    fn combine(op: ReduceOp, a: Self, b: Self) -> Self;
    fn div(a: Self, n: usize) -> Self;
}

macro_rules! int_scalar {
    ($($t:ty),*) => {$(
        impl Scalar for $t {
            const SIZE: usize = std::mem::size_of::<$t>();
            fn read(b: &[u8]) -> Self {
                let mut a = [0u8; std::mem::size_of::<$t>()];
                a.copy_from_slice(&b[..Self::SIZE]);
                <$t>::from_le_bytes(a)
            }
            fn write(self, b: &mut [u8]) {
                b[..Self::SIZE].copy_from_slice(&self.to_le_bytes());
            }
            fn combine(op: ReduceOp, a: Self, b: Self) -> Self {
                match op {
                    ReduceOp::Sum | ReduceOp::Mean => a.wrapping_add(b),
                    ReduceOp::Product => a.wrapping_mul(b),
                    ReduceOp::Max => a.max(b),
                    ReduceOp::Min => a.min(b),
                }
            }
            fn div(a: Self, n: usize) -> Self {
                // i128 holds every operand; Rust division truncates toward zero.
                (a as i128 / n as i128) as $t
            }
        }
    )*};
}
int_scalar!(i8, u8, i16, u16, i32, u32, i64, u64);

macro_rules! float_scalar {
    ($($t:ty),*) => {$(
        impl Scalar for $t {
            const SIZE: usize = std::mem::size_of::<$t>();
            fn read(b: &[u8]) -> Self {
                let mut a = [0u8; std::mem::size_of::<$t>()];
                a.copy_from_slice(&b[..Self::SIZE]);
                <$t>::from_le_bytes(a)
            }
            fn write(self, b: &mut [u8]) {
                b[..Self::SIZE].copy_from_slice(&self.to_le_bytes());
            }
            fn combine(op: ReduceOp, a: Self, b: Self) -> Self {
                match op {
                    ReduceOp::Sum | ReduceOp::Mean => a + b,
                    ReduceOp::Product => a * b,
                    ReduceOp::Max => a.max(b),
                    ReduceOp::Min => a.min(b),
                }
            }
            fn div(a: Self, n: usize) -> Self {
                (a as f64 / n as f64) as $t
            }
        }
    )*};
}
float_scalar!(f32, f64);

macro_rules! half_scalar {
    ($($t:ty),*) => {$(
        impl Scalar for $t {
            const SIZE: usize = 2;
            fn read(b: &[u8]) -> Self {
                <$t>::from_le_bytes([b[0], b[1]])
            }
            fn write(self, b: &mut [u8]) {
                b[..2].copy_from_slice(&self.to_le_bytes());
            }
            fn combine(op: ReduceOp, a: Self, b: Self) -> Self {
                <$t>::from_f32(f32::combine(op, a.to_f32(), b.to_f32()))
            }
            fn div(a: Self, n: usize) -> Self {
                <$t>::from_f64(a.to_f64() / n as f64)
            }
        }
    )*};
}
half_scalar!(half::f16, half::bf16);

#[derive(Clone, Copy)]
struct Bool(bool);

impl Scalar for Bool {
    const SIZE: usize = 1;
    fn read(b: &[u8]) -> Self {
        Bool(b[0] != 0)
    }
    fn write(self, b: &mut [u8]) {
        b[0] = u8::from(self.0);
    }
    fn combine(op: ReduceOp, a: Self, b: Self) -> Self {
        Bool(match op {
            ReduceOp::Sum | ReduceOp::Max => a.0 || b.0,
            ReduceOp::Product | ReduceOp::Min | ReduceOp::Mean => a.0 && b.0,
        })
    }
    fn div(a: Self, _n: usize) -> Self {
        // Mean already folded as AND.
        a
    }
}

fn fold_typed<T: Scalar>(op: ReduceOp, shards: &[&[u8]], count: usize, out: &mut [u8]) {
    let n = shards.len();
    for i in 0..count {
        let at = i * T::SIZE;
        let mut acc = T::read(&shards[0][at..]);
        for s in &shards[1..] {
            acc = T::combine(op, acc, T::read(&s[at..]));
        }
        if op == ReduceOp::Mean {
            acc = T::div(acc, n);
        }
        acc.write(&mut out[at..]);
    }
}

/// Reduces `shards` (in rank order) element by element into `out`.
///
/// Every shard and `out` must hold at least `count` elements of `elem`; the
/// callers check this before folding. With no shards, `out` is untouched.
pub(crate) fn fold(elem: ElemType, op: ReduceOp, shards: &[&[u8]], count: usize, out: &mut [u8]) {
    let need = count * elem.size_bytes();
    if shards.is_empty() || out.len() < need || shards.iter().any(|s| s.len() < need) {
        return;
    }
    match elem {
        ElemType::Bool => fold_typed::<Bool>(op, shards, count, out),
        ElemType::I8 => fold_typed::<i8>(op, shards, count, out),
        ElemType::U8 => fold_typed::<u8>(op, shards, count, out),
        ElemType::I16 => fold_typed::<i16>(op, shards, count, out),
        ElemType::U16 => fold_typed::<u16>(op, shards, count, out),
        ElemType::I32 => fold_typed::<i32>(op, shards, count, out),
        ElemType::U32 => fold_typed::<u32>(op, shards, count, out),
        ElemType::I64 => fold_typed::<i64>(op, shards, count, out),
        ElemType::U64 => fold_typed::<u64>(op, shards, count, out),
        ElemType::F16 => fold_typed::<half::f16>(op, shards, count, out),
        ElemType::BF16 => fold_typed::<half::bf16>(op, shards, count, out),
        ElemType::F32 => fold_typed::<f32>(op, shards, count, out),
        ElemType::F64 => fold_typed::<f64>(op, shards, count, out),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn run<T: Scalar>(elem: ElemType, op: ReduceOp, vals: &[T]) -> T {
        let shards: Vec<Vec<u8>> = vals
            .iter()
            .map(|v| {
                let mut b = vec![0u8; T::SIZE];
                v.write(&mut b);
                b
            })
            .collect();
        let refs: Vec<&[u8]> = shards.iter().map(|s| s.as_slice()).collect();
        let mut out = vec![0u8; T::SIZE];
        fold(elem, op, &refs, 1, &mut out);
        T::read(&out)
    }

    #[test]
    fn integer_ops_wrap_and_truncate() {
        assert_eq!(run(ElemType::U8, ReduceOp::Sum, &[200u8, 100]), 44);
        assert_eq!(run(ElemType::I8, ReduceOp::Mean, &[-7i8, 0]), -3);
        assert_eq!(
            run(ElemType::U64, ReduceOp::Max, &[3u64, u64::MAX]),
            u64::MAX
        );
        assert_eq!(run(ElemType::I16, ReduceOp::Min, &[3i16, -4]), -4);
        assert_eq!(run(ElemType::U32, ReduceOp::Product, &[1u32 << 31, 2]), 0);
    }

    #[test]
    fn floats_and_bools() {
        assert_eq!(run(ElemType::F32, ReduceOp::Mean, &[1.0f32, 2.0]), 1.5);
        let h = run(
            ElemType::F16,
            ReduceOp::Sum,
            &[half::f16::from_f32(2048.0), half::f16::ONE],
        );
        assert_eq!(h.to_f32(), 2048.0);
        assert!(run(ElemType::Bool, ReduceOp::Sum, &[Bool(false), Bool(true)]).0);
        assert!(!run(ElemType::Bool, ReduceOp::Mean, &[Bool(false), Bool(true)]).0);
    }
}
