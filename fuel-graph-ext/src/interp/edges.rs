//! The edge values of every dtype: what tests and the `run` fuzzer feed
//! the kernels to check them against the interpreter where arithmetic is
//! hardest to get right.
//!
//! Integers: 0, ±1, MIN, MIN + 1, MIN / 2, MAX, MAX - 1, MAX / 2 and its
//! neighbour, and a few small odd values. Floats: ±0, ±1, the extreme
//! finite values and half of them, ±infinity, NaN, the smallest normal,
//! the smallest and largest subnormal (and their negatives), and values
//! whose sums and quotients round (0.1, 1/3, 3, 7). Bool: false, true.

use super::HostTensor;
use crate::dtype::DType;
use crate::graph::Graph;
use half::{bf16, f16};
use std::collections::BTreeMap;

/// Inputs for every input of `g` made of edge values, so that the k-th
/// input (in name order) cycles through them `L^k` times slower than
/// element order (`L` values): two inputs of `L^2` elements meet in every
/// pair of edge values, three of `L^3` in every triple.
pub fn edge_inputs(g: &Graph) -> BTreeMap<String, HostTensor> {
    let mut named: Vec<(String, crate::dtype::TensorType)> = g
        .inputs()
        .into_iter()
        .filter_map(|(id, name)| Some((name.to_string(), g.node(id)?.ty.clone())))
        .collect();
    named.sort_by(|a, b| a.0.cmp(&b.0));
    named
        .into_iter()
        .enumerate()
        .map(|(k, (name, ty))| {
            let edges = edge_values(ty.dtype);
            let size = ty.dtype.size_bytes();
            let count = edges.len().max(1);
            let stride = count.saturating_pow(k as u32);
            let mut bytes = Vec::with_capacity(ty.size_bytes());
            for i in 0..ty.num_elements() {
                let at = (i / stride) % count * size;
                bytes.extend_from_slice(edges.bytes().get(at..at + size).unwrap_or(&[]));
            }
            let t = HostTensor::from_parts(ty, bytes);
            (name, t)
        })
        .collect()
}

/// A native float type's edge values: signed zeros and ones, the extremes,
/// infinities, NaN, the smallest normal and the subnormals at both ends,
/// inexact fractions, odd integers, and `$inexact`, the first integer the
/// type cannot hold. A macro, as no trait reaches `f32::MAX` and the like.
macro_rules! float_edges {
    ($t:ident, $max_sub_bits:literal, $inexact:literal) => {{
        let sub = $t::from_bits(1);
        let max_sub = $t::from_bits($max_sub_bits);
        let v = [
            0.0,
            -0.0,
            1.0,
            -1.0,
            $t::MIN,
            $t::MAX,
            $t::MAX / 2.0,
            $t::INFINITY,
            $t::NEG_INFINITY,
            $t::NAN,
            $t::MIN_POSITIVE,
            sub,
            -sub,
            max_sub,
            -max_sub,
            0.1,
            1.0 / 3.0,
            3.0,
            -7.0,
            $inexact,
        ];
        HostTensor::from_slice(&[v.len()], &v)
    }};
}

/// Every edge value of `dtype`, as a one-axis tensor (at least two, and
/// the same list on every call).
pub fn edge_values(dtype: DType) -> HostTensor {
    let made = match dtype {
        DType::F32 => float_edges!(f32, 0x007f_ffff, 16_777_217.0),
        DType::F64 => float_edges!(f64, 0x000f_ffff_ffff_ffff, 9_007_199_254_740_993.0),
        DType::F16 => halves(
            f16::from_bits,
            [
                0x0000, 0x8000, 0x3c00, 0xbc00, 0xfbff, 0x7bff, 0x77ff, 0x7c00, 0xfc00, 0x7e00,
                0x0400, 0x0001, 0x8001, 0x03ff, 0x83ff, 0x2e66, 0x3555, 0x4200, 0xc700, 0x6800,
            ],
        ),
        DType::BF16 => halves(
            bf16::from_bits,
            [
                0x0000, 0x8000, 0x3f80, 0xbf80, 0xff7f, 0x7f7f, 0x7eff, 0x7f80, 0xff80, 0x7fc0,
                0x0080, 0x0001, 0x8001, 0x007f, 0x807f, 0x3dcd, 0x3eab, 0x4040, 0xc0e0, 0x4b80,
            ],
        ),
        DType::I8 => signed(i8::MIN.into(), i8::MAX.into(), |v| v as i8),
        DType::I16 => signed(i16::MIN.into(), i16::MAX.into(), |v| v as i16),
        DType::I32 => signed(i32::MIN.into(), i32::MAX.into(), |v| v as i32),
        DType::I64 => signed(i64::MIN.into(), i64::MAX.into(), |v| v as i64),
        DType::U8 => unsigned(u8::MAX.into(), |v| v as u8),
        DType::U16 => unsigned(u16::MAX.into(), |v| v as u16),
        DType::U32 => unsigned(u32::MAX.into(), |v| v as u32),
        DType::U64 => unsigned(u64::MAX.into(), |v| v as u64),
        DType::Bool => HostTensor::from_slice(&[2], &[false, true]),
    };
    // Every list above has the length its shape says.
    made.unwrap_or_else(|_| HostTensor::new(crate::dtype::TensorType::new(dtype, &[0]), vec![]))
}

/// A half-precision type's edge values, from their bits.
fn halves<T: crate::elem::Element>(
    from_bits: fn(u16) -> T,
    bits: [u16; 20],
) -> Result<HostTensor, crate::elem::ElemError> {
    let v: Vec<T> = bits.into_iter().map(from_bits).collect();
    HostTensor::from_slice(&[v.len()], &v)
}

fn signed<T: crate::elem::Element>(
    min: i128,
    max: i128,
    to: impl Fn(i128) -> T,
) -> Result<HostTensor, crate::elem::ElemError> {
    let v: Vec<T> = [
        0,
        1,
        -1,
        min,
        min + 1,
        min / 2,
        max,
        max - 1,
        max / 2,
        max / 2 + 1,
        3,
        -7,
        5,
    ]
    .into_iter()
    .map(to)
    .collect();
    HostTensor::from_slice(&[v.len()], &v)
}

fn unsigned<T: crate::elem::Element>(
    max: i128,
    to: impl Fn(i128) -> T,
) -> Result<HostTensor, crate::elem::ElemError> {
    let v: Vec<T> = [0, 1, 2, max, max - 1, max / 2, max / 2 + 1, 3, 7, 5]
        .into_iter()
        .map(to)
        .collect();
    HostTensor::from_slice(&[v.len()], &v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_dtype_has_its_edges() {
        for d in DType::ALL {
            let t = edge_values(d);
            assert_eq!(t.ty.dtype, d);
            assert!(t.len() >= 2, "{d}");
        }
        let f = edge_values(DType::F16).to_vec::<f16>().unwrap();
        assert!(f.iter().any(|x| x.is_nan()) && f.contains(&f16::MAX));
        assert!(f.contains(&f16::from_bits(1)) && f.contains(&f16::NEG_INFINITY));
        let b = edge_values(DType::BF16).to_vec::<bf16>().unwrap();
        assert!(b.contains(&bf16::MAX) && b.contains(&bf16::MIN) && b.contains(&bf16::NEG_ZERO));
        let i = edge_values(DType::I64).to_vec::<i64>().unwrap();
        assert!(i.contains(&i64::MIN) && i.contains(&i64::MAX) && i.contains(&(i64::MAX / 2)));
    }

    #[test]
    fn two_inputs_meet_in_every_pair() {
        let src = "graph @g {\n  %0 = input \"a\" @cpu:0 : i8[169]\n  %1 = input \"b\" @cpu:0 : i8[169]\n  return %0, %1\n}\n";
        let g = crate::text::parse(src).unwrap();
        let ins = edge_inputs(&g);
        let a = ins["a"].to_vec::<i8>().unwrap();
        let b = ins["b"].to_vec::<i8>().unwrap();
        let mut pairs: Vec<(i8, i8)> = a.into_iter().zip(b).collect();
        pairs.sort_unstable();
        pairs.dedup();
        assert_eq!(pairs.len(), 13 * 13);
    }
}
