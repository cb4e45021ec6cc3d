//! The transport casts on Vulkan, f32 to bf16 or f16 and back (what
//! `transport=bf16|f16` runs on every byte it moves): one pipeline per
//! pair, each an entry point of `shaders/transport_cast.wgsl`, whose
//! invocations convert a whole word of two 16-bit elements with no switch
//! on dtypes. [`VkDev::cast`] routes these four pairs here and every other
//! pair to the generic `cast.wgsl`; both compute with the same integer
//! arithmetic and give the interpreter's bits.

use super::*;
use std::ffi::CStr;

pub(super) const SPV_TRANSPORT_CAST: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/transport_cast.spv"));

/// The pairs (from, to) and their entry points; `VkDev::transport_casts`
/// holds a pipeline of each, in this order.
pub(super) const PAIRS: [(DType, DType, &CStr); 4] = [
    (DType::F32, DType::BF16, c"f32_bf16"),
    (DType::F32, DType::F16, c"f32_f16"),
    (DType::BF16, DType::F32, c"bf16_f32"),
    (DType::F16, DType::F32, c"f16_f32"),
];

impl VkDev {
    /// The transport kernel's pipeline of `from` to `to`, if it is one of
    /// [`PAIRS`].
    pub(super) fn transport_cast(&self, from: DType, to: DType) -> Option<vk::Pipeline> {
        let k = PAIRS.iter().position(|(f, t, _)| (*f, *t) == (from, to))?;
        self.transport_casts.get(k).map(|p| p.pipeline)
    }

    /// `dst = src` of `n` elements through `pipe`, a transport kernel: one
    /// invocation per word of the 16-bit side (`n` rounded up to even,
    /// halved), with the element count as the shader's `elems`.
    pub(super) fn cast_transport(
        &self,
        pipe: vk::Pipeline,
        src: &VkBuf,
        dst: &VkBuf,
        n: usize,
        faults: &Faults,
    ) -> Result<(), ExecError> {
        let elems = self.elems32(n, "cast")?;
        self.dispatch_on(pipe, elems, 0, 0, &[src], dst, n.div_ceil(2), false, faults)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fuel_graph_ext::elem::Scalar;
    use half::{bf16, f16};

    /// Every f16 and bf16 pattern widened, and the f32s just below, at and
    /// above every rounding midpoint of both: bf16's (the low 16 bits at
    /// 0x8000), f16's normals (the low 13 at 0x1000) and subnormals (odd
    /// multiples of 2^-25), past f16's largest value, f32 subnormals,
    /// infinities, and NaNs of every kind, signalling ones with payloads
    /// only in bits a narrowing drops.
    fn f32_patterns() -> Vec<u32> {
        let mut v: Vec<u32> = (0..=u16::MAX)
            .flat_map(|h| {
                let b = u32::from(h) << 16;
                [b, b | 0x7fff, b | 0x8000, b | 0x8001, b | 0xffff, b | 1]
            })
            .collect();
        for h in 0..=u16::MAX {
            let w = f16::from_bits(h).to_f32().to_bits();
            v.extend([w, w + 0xfff, w + 0x1000, w + 0x1001, w | 0x1fff]);
        }
        for k in 0..2048u32 {
            let mid = ((f64::from(k) + 0.5) * 2f64.powi(-24)) as f32;
            let m = mid.to_bits();
            v.extend([m - 1, m, m + 1, m | 0x8000_0000]);
        }
        v.extend([
            0x0000_0001,
            0x007f_ffff,
            0x8040_0000,
            0x7f80_0000,
            0xff80_0000,
            0x7f80_0001,
            0xff80_0001,
            0x7fbf_ffff,
            0x7fc0_0000,
            0xffc0_0001,
            0x7f7f_ffff,
            0x477f_f000,
            0x477f_efff,
            0x3380_0000,
            0x3380_0001,
            0x337f_ffff,
        ]);
        v
    }

    /// The bits `Scalar` (the CPU's and the interpreter's rounding) gives.
    fn want<A: Scalar, B: Scalar>(from: impl Fn(u32) -> A, to: impl Fn(B) -> u32, x: u32) -> u32 {
        to(B::narrow(from(x).widen()))
    }

    fn expected(from: DType, to: DType, src: &[u32]) -> Vec<u32> {
        let f32_of = |x: u32| f32::from_bits(x);
        let bf = |x: u32| bf16::from_bits(x as u16);
        let hf = |x: u32| f16::from_bits(x as u16);
        src.iter()
            .map(|&x| match (from, to) {
                (DType::F32, DType::BF16) => want(f32_of, |y: bf16| u32::from(y.to_bits()), x),
                (DType::F32, DType::F16) => want(f32_of, |y: f16| u32::from(y.to_bits()), x),
                (DType::BF16, DType::F32) => want(bf, f32::to_bits, x),
                (DType::F16, DType::F32) => want(hf, f32::to_bits, x),
                _ => unreachable!(),
            })
            .collect()
    }

    /// `v` as little-endian elements of `size` bytes.
    fn pack(v: &[u32], size: usize) -> Vec<u8> {
        v.iter()
            .flat_map(|x| x.to_le_bytes()[..size].to_vec())
            .collect()
    }

    fn unpack(b: &[u8], size: usize) -> Vec<u32> {
        b.chunks_exact(size)
            .map(|c| c.iter().rev().fold(0, |a, x| (a << 8) | u32::from(*x)))
            .collect()
    }

    /// The first element where `got` is not `want`, with both, in hex.
    fn first_difference(got: &[u32], want: &[u32], src: &[u32]) -> Option<String> {
        let k = got.iter().zip(want).position(|(g, w)| g != w)?;
        Some(format!(
            "element {k} of {}: source {:#x}, got {:#x}, want {:#x}",
            want.len(),
            src[k],
            got[k],
            want[k]
        ))
    }

    /// Every transport cast, bit for bit against `Scalar` and against the
    /// generic kernel, over every 16-bit pattern or every f32 rounding case
    /// above, at an odd and an even length and at 1 and 3 elements; a
    /// narrowing of odd length leaves the high half of its last word as it
    /// was.
    #[test]
    fn transport_casts_give_the_bits_scalar_and_the_generic_kernel_give() {
        let Some(inst) = super::super::tests::instance_or_skip(
            "transport_casts_give_the_bits_scalar_and_the_generic_kernel_give",
        ) else {
            return;
        };
        let d = inst.open_device(Device::vulkan(0)).unwrap();
        let faults = Faults::new(None);
        let halves: Vec<u32> = (0..=u32::from(u16::MAX))
            .chain([0x7c01, 0x7f81, 3])
            .collect();
        let wide = f32_patterns();
        for (from, to, _) in PAIRS {
            assert!(d.transport_cast(from, to).is_some());
            let all = if from == DType::F32 { &wide } else { &halves };
            let odd = if all.len().is_multiple_of(2) {
                all.len() - 1
            } else {
                all.len()
            };
            for n in [all.len(), odd, odd - 1, 1, 3] {
                let src = &all[..n];
                let (fs, ts) = (from.size_bytes(), to.size_bytes());
                let mut a = d.alloc(n * fs, &faults).unwrap();
                d.upload(&pack(src, fs), &mut a).unwrap();
                // Whole words and one more, filled with a marker a kernel
                // must not touch past the result's last element.
                let words = (n * ts).div_ceil(4) * 4 + 4;
                let mut got = Vec::new();
                for generic in [false, true] {
                    let mut out = d.alloc(words, &faults).unwrap();
                    d.upload(&vec![0xa5; words], &mut out).unwrap();
                    if generic {
                        d.cast_generic(from, to, &a, &out, n, &faults).unwrap();
                    } else {
                        d.cast(from, to, &a, &out, n, &faults).unwrap();
                    }
                    let mut back = vec![0u8; words];
                    d.download(&out, &mut back).unwrap();
                    assert!(
                        back[n * ts..].iter().all(|b| *b == 0xa5),
                        "{from} to {to}, {n} elements: the bytes past the result changed"
                    );
                    got.push(unpack(&back[..n * ts], ts));
                }
                let want = expected(from, to, src);
                for (g, which) in got.iter().zip(["transport", "generic"]) {
                    if let Some(e) = first_difference(g, &want, src) {
                        panic!("{from} to {to} by the {which} kernel: {e}");
                    }
                }
            }
        }
    }
}
