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
/// With no elements after `axis`, or none along it, there is nothing to
/// copy, so `outer` is 0 then: no caller loops over the rows of an empty
/// tensor (a verified `u8[2^62,0]` has 2^62 of them, whether it is cut
/// along axis 0 or along its empty axis 1). The interpreter slices and
/// joins its tensors by the same split.
pub(crate) fn around(shape: &[usize], axis: usize) -> (usize, usize, usize) {
    let inner: usize = shape[axis + 1..].iter().product();
    let outer = if inner == 0 || shape[axis] == 0 {
        0
    } else {
        shape[..axis].iter().product()
    };
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

/// A list with room for every region of a slice or concat along `axis` of
/// `ty` tensors from `parts` operands (one per row and operand at most),
/// or the allocation error: a tensor of many short rows has many regions,
/// so the schedule reserves them fallibly before building them.
pub fn try_region_list(
    ty: &TensorType,
    axis: usize,
    parts: usize,
) -> Result<Vec<Region>, std::collections::TryReserveError> {
    let (outer, _, _) = around(&ty.shape, axis);
    let mut out = Vec::new();
    out.try_reserve_exact(outer.saturating_mul(parts))?;
    Ok(out)
}

/// Where `slice {axis, start, len}` of a `ty` tensor starts in its
/// operand's bytes, when its bytes are one contiguous run there (every dim
/// before `axis` is 1, or the slice takes the whole axis); `None` when it
/// is several runs, or empty.
pub fn slice_run(ty: &TensorType, axis: usize, start: usize, len: usize) -> Option<usize> {
    let es = ty.dtype.size_bytes();
    let (outer, extent, inner) = around(&ty.shape, axis);
    if outer == 0 || len == 0 {
        return None;
    }
    if outer == 1 {
        return Some(start * inner * es);
    }
    (start == 0 && len == extent).then_some(0)
}

/// The byte regions of `slice {axis, start, len}` of a `ty` tensor.
pub fn slice_regions(ty: &TensorType, axis: usize, start: usize, len: usize) -> Vec<Region> {
    let mut out = Vec::new();
    slice_regions_into(&mut out, ty, axis, start, len);
    out
}

/// [`slice_regions`], appended to `out`.
pub fn slice_regions_into(
    out: &mut Vec<Region>,
    ty: &TensorType,
    axis: usize,
    start: usize,
    len: usize,
) {
    let es = ty.dtype.size_bytes();
    let (outer, extent, inner) = around(&ty.shape, axis);
    for o in 0..outer {
        push_region(
            out,
            Region {
                operand: 0,
                src: (o * extent + start) * inner * es,
                dst: o * len * inner * es,
                len: len * inner * es,
            },
        );
    }
}

/// The byte regions of `concat {axis}` of tensors typed `tys`.
pub fn concat_regions(tys: &[&TensorType], axis: usize) -> Vec<Region> {
    let mut out = Vec::new();
    concat_regions_into(&mut out, tys, axis);
    out
}

/// [`concat_regions`], appended to `out`.
pub fn concat_regions_into(out: &mut Vec<Region>, tys: &[&TensorType], axis: usize) {
    // The rows are counted on a part with entries along the axis; with
    // none, the join is empty.
    let Some(first) = tys.iter().find(|t| t.shape[axis] > 0) else {
        return;
    };
    let es = first.dtype.size_bytes();
    let (outer, _, inner) = around(&first.shape, axis);
    let mut dst = 0;
    for o in 0..outer {
        for (p, t) in tys.iter().enumerate() {
            let row = t.shape[axis] * inner * es;
            push_region(
                out,
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
}
