//! The CPU's `cast` kernel: every dtype to every other through `Scalar`'s
//! widening and narrowing, and the casts a narrow transport runs on every
//! byte it moves (f32 to f16 or bf16 and back) in vectorised blocks that
//! give the same bits.

use super::pool::par_chunks;
use super::{view, view_mut, CpuBuf};
use fuel_graph_ext::dtype::DType;
use fuel_graph_ext::elem::{with_scalar, Scalar};

fn cast_typed<S: Scalar, D: Scalar>(src: &[S], out: &mut [D]) {
    par_chunks(out, |off, chunk| {
        let src = &src[off..off + chunk.len()];
        if !cast_direct(src, chunk) {
            for (o, x) in chunk.iter_mut().zip(src) {
                *o = D::narrow(x.widen());
            }
        }
    });
}

/// The casts a narrow transport runs on every byte it moves (f32 to f16
/// or bf16 and back), in blocks the compiler vectorises instead of one
/// element at a time through [`Wide`](fuel_graph_ext::elem::Wide): bf16
/// by the rounding of its bits (to nearest even, as `Scalar::narrow`
/// rounds an f32), f16 by the `half` crate's slice conversions (F16C where
/// the CPU has it, as `Scalar::narrow` uses). A block holding a NaN has its
/// NaNs redone through `Scalar`, so every bit is what `Scalar` gives.
/// False, doing nothing, for other casts.
fn cast_direct<S: Scalar, D: Scalar>(src: &[S], out: &mut [D]) -> bool {
    use half::slice::HalfFloatSliceExt;
    use half::{bf16, f16};
    let n = src.len().min(out.len());
    let (src, out) = (&src[..n], &mut out[..n]);
    // SAFETY: a `Scalar` type is the one storage type of its `DTYPE`, so
    // where the dtypes match below, `S` and `D` are the types named there
    // and `retype` changes nothing but the name.
    unsafe {
        match (S::DTYPE, D::DTYPE) {
            (DType::F32, DType::BF16) => {
                in_blocks(retype::<_, f32>(src), retype_mut::<_, bf16>(out), |s, o| {
                    for (o, x) in o.iter_mut().zip(s) {
                        let b = x.to_bits();
                        *o = bf16::from_bits(
                            (b.wrapping_add(0x7fff + ((b >> 16) & 1)) >> 16) as u16,
                        );
                    }
                })
            }
            (DType::F32, DType::F16) => {
                in_blocks(retype::<_, f32>(src), retype_mut::<_, f16>(out), |s, o| {
                    o.convert_from_f32_slice(s)
                })
            }
            (DType::BF16, DType::F32) => {
                in_blocks(retype::<_, bf16>(src), retype_mut::<_, f32>(out), |s, o| {
                    for (o, x) in o.iter_mut().zip(s) {
                        *o = f32::from_bits(u32::from(x.to_bits()) << 16);
                    }
                })
            }
            (DType::F16, DType::F32) => {
                in_blocks(retype::<_, f16>(src), retype_mut::<_, f32>(out), |s, o| {
                    s.convert_to_f32_slice(o)
                })
            }
            _ => return false,
        }
    }
    true
}

/// Runs `fast` over `src` and `out` a block at a time; in a block that
/// holds a NaN, each NaN's element is then converted by `Scalar` instead.
fn in_blocks<A: Scalar + IsNan, B: Scalar>(
    src: &[A],
    out: &mut [B],
    fast: impl Fn(&[A], &mut [B]),
) {
    const BLOCK: usize = 256;
    for (s, o) in src.chunks(BLOCK).zip(out.chunks_mut(BLOCK)) {
        fast(s, o);
        if s.iter().fold(false, |any, x| any | x.nan()) {
            for (o, x) in o.iter_mut().zip(s).filter(|(_, x)| x.nan()) {
                *o = B::narrow(x.widen());
            }
        }
    }
}

/// `s` as a slice of `B`.
///
/// # Safety
/// `A` and `B` must be the same type.
unsafe fn retype<A, B>(s: &[A]) -> &[B] {
    // SAFETY: the caller's: the same type, so the same layout and length.
    unsafe { std::slice::from_raw_parts(s.as_ptr().cast(), s.len()) }
}

/// `s` as a mutable slice of `B`.
///
/// # Safety
/// `A` and `B` must be the same type.
unsafe fn retype_mut<A, B>(s: &mut [A]) -> &mut [B] {
    // SAFETY: as in `retype`.
    unsafe { std::slice::from_raw_parts_mut(s.as_mut_ptr().cast(), s.len()) }
}

/// Whether a float element is a NaN, branch-free (so a block's test
/// vectorises).
trait IsNan: Copy {
    fn nan(self) -> bool;
}

impl IsNan for f32 {
    fn nan(self) -> bool {
        self.to_bits() & 0x7fff_ffff > 0x7f80_0000
    }
}

impl IsNan for half::f16 {
    fn nan(self) -> bool {
        self.to_bits() & 0x7fff > 0x7c00
    }
}

impl IsNan for half::bf16 {
    fn nan(self) -> bool {
        self.to_bits() & 0x7fff > 0x7f80
    }
}

/// `out = input` converted from `from` to `to` elements (the `cast` op):
/// integers wrap, floats round to nearest even, as `Scalar::narrow` says.
pub fn cast(from: DType, to: DType, input: &CpuBuf, out: &mut CpuBuf) {
    with_scalar!(from, S => with_scalar!(to, D => cast_typed::<S, D>(input.typed::<S>(), out.typed_mut::<D>())))
}

/// [`cast`] over host bytes that may belong to no arena (the host drivers'
/// Mean widens shards with it); false, doing nothing, when either slice is
/// not aligned for its elements or they hold different counts.
pub fn cast_bytes(from: DType, to: DType, input: &[u8], out: &mut [u8]) -> bool {
    with_scalar!(from, S => with_scalar!(to, D => {
        match (view::<S>(input), view_mut::<D>(out)) {
            (Some(src), Some(dst)) if src.len() == dst.len() => {
                cast_typed::<S, D>(src, dst);
                true
            }
            _ => false,
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The blocked f32/f16/bf16 casts give `Scalar`'s bits for every half
    /// pattern (NaNs, infinities, subnormals, both zeros) and for f32s
    /// around every rounding case, NaNs of every kind included.
    #[test]
    fn direct_casts_give_the_bits_scalar_gives() {
        use fuel_graph_ext::elem::Wide;
        use half::{bf16, f16};
        // A `Scalar`'s bytes (no padding: `Scalar`'s contract).
        fn bits<T: Scalar>(x: &T) -> &[u8] {
            // SAFETY: `x` is a live `T` of `size_of::<T>()` initialised bytes.
            unsafe { std::slice::from_raw_parts((x as *const T).cast(), std::mem::size_of::<T>()) }
        }
        fn check<A: Scalar + std::fmt::Debug, B: Scalar>(src: &[A]) {
            let mut fast = vec![B::narrow(Wide::Int(0)); src.len()];
            assert!(cast_direct(src, &mut fast));
            for (x, got) in src.iter().zip(&fast) {
                let want = B::narrow(x.widen());
                assert_eq!(bits(got), bits(&want), "{x:?}");
            }
        }
        let halves: Vec<u16> = (0..=u16::MAX).collect();
        check::<bf16, f32>(
            &halves
                .iter()
                .map(|b| bf16::from_bits(*b))
                .collect::<Vec<_>>(),
        );
        check::<f16, f32>(
            &halves
                .iter()
                .map(|b| f16::from_bits(*b))
                .collect::<Vec<_>>(),
        );
        // Each half pattern widened, and the f32s just below, at and above
        // every rounding midpoint of both half types.
        let f32s: Vec<f32> = halves
            .iter()
            .flat_map(|h| {
                let b = u32::from(*h) << 16;
                [
                    b,
                    b | 0x7fff,
                    b | 0x8000,
                    b | 0x8001,
                    b | 0xffff,
                    b.wrapping_add(0x1000),
                ]
            })
            .chain((0..=u16::MAX).map(|h| f16::from_bits(h).to_f32().to_bits() + 0x1000))
            .map(f32::from_bits)
            .collect();
        check::<f32, bf16>(&f32s);
        check::<f32, f16>(&f32s);
        // Any other cast is not this path's.
        assert!(!cast_direct(&[1.0f64], &mut [0.0f32]));
    }
}
