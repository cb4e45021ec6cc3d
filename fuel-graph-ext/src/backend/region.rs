//! Byte regions: what slices, concats and the layout steps of collectives
//! copy. Pure functions of tensor types; every backend carries a list of
//! regions out as plain copies.

use crate::dtype::TensorType;

/// One contiguous byte range copied from an operand into the result.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Region {
    /// Which operand of the step.
    pub operand: usize,
    /// Byte offset in that operand.
    pub src: usize,
    /// Byte offset in the result.
    pub dst: usize,
    /// Bytes.
    pub len: usize,
}

/// Splits `shape` around `axis` into (outer, extent, inner) element counts.
// Callers pass types the verifier (or `infer_type`) accepted, so `axis` is below the rank.
fn around(shape: &[usize], axis: usize) -> (usize, usize, usize) {
    let outer = shape[..axis].iter().product();
    let inner = shape[axis + 1..].iter().product();
    (outer, shape[axis], inner)
}

/// Appends a region, merging it into the previous one when both are contiguous.
fn push_region(out: &mut Vec<Region>, r: Region) {
    if r.len == 0 {
        return;
    }
    if let Some(last) = out.last_mut() {
        if last.operand == r.operand && last.src + last.len == r.src && last.dst + last.len == r.dst
        {
            last.len += r.len;
            return;
        }
    }
    out.push(r);
}

/// The byte regions of `slice {axis, start, len}` of a `ty` tensor.
pub fn slice_regions(ty: &TensorType, axis: usize, start: usize, len: usize) -> Vec<Region> {
    let es = ty.dtype.size_bytes();
    let (outer, extent, inner) = around(&ty.shape, axis);
    let mut out = Vec::new();
    for o in 0..outer {
        push_region(
            &mut out,
            Region {
                operand: 0,
                src: (o * extent + start) * inner * es,
                dst: o * len * inner * es,
                len: len * inner * es,
            },
        );
    }
    out
}

/// The byte regions of `concat {axis}` of tensors typed `tys`.
pub fn concat_regions(tys: &[&TensorType], axis: usize) -> Vec<Region> {
    let Some(first) = tys.first() else {
        return Vec::new();
    };
    let es = first.dtype.size_bytes();
    let (outer, _, inner) = around(&first.shape, axis);
    let mut out = Vec::new();
    let mut dst = 0;
    for o in 0..outer {
        for (p, t) in tys.iter().enumerate() {
            let row = t.shape[axis] * inner * es;
            push_region(
                &mut out,
                Region {
                    operand: p,
                    src: o * row,
                    dst,
                    len: row,
                },
            );
            dst += row;
        }
    }
    out
}
