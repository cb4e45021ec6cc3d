//! Mean in a wider type: the casts around a `Mean` that sums in its
//! accumulator.
//!
//! A `Mean` of f16, bf16, the integers narrower than 64 bits or bool sums
//! in `DType::mean_accumulator` (docs/text-ir.md), so that the sum cannot
//! overflow where the mean fits. [`widen_mean`] casts each shard to the
//! accumulator on its own device and hands the algorithms a site whose
//! shards are those casts; every sum, partial sum across devices and the
//! `div` then run in the accumulator, and `Emitter::finish` casts the mean
//! back to the dtype where the division happens, so that results travel
//! to the ranks at their own width. f32, f64, i64 and u64 are their own
//! accumulators and lower as they always did; a group of one rank needs no
//! sum.

use super::site::CollectiveSite;
use fuel_graph_ext::{Graph, Op, ReduceOp, TensorType};

/// `site` ready to lower: as it is, or, for a `Mean` that sums in a wider
/// type, with its shards cast to the accumulator (new nodes in `g`) and a
/// note that says so.
pub(super) fn widen_mean(
    g: &mut Graph,
    site: CollectiveSite,
) -> Result<(CollectiveSite, Option<String>), String> {
    let dtype = site.ty.dtype;
    let acc = dtype.mean_accumulator();
    if site.reduce_op() != Some(ReduceOp::Mean) || acc == dtype || site.ranks() < 2 {
        return Ok((site, None));
    }
    let ty = TensorType {
        dtype: acc,
        shape: site.ty.shape.clone(),
    };
    let vals: Vec<_> = site
        .vals
        .iter()
        .zip(&site.devs)
        .map(|(v, d)| {
            g.add_value(
                Op::Cast {
                    to: acc,
                    device: *d,
                },
                &[*v],
                ty.clone(),
            )
        })
        .collect();
    let first = *vals
        .first()
        .ok_or_else(|| format!("`{}` has no operands", site.op.mnemonic()))?;
    let note = format!(
        "lower-collectives: {} of {} sums in {acc}: each shard is cast to {acc} on its device, and the mean back to {dtype} where it is divided (Mean's accumulator, docs/text-ir.md)",
        site.op.mnemonic(),
        site.ty
    );
    Ok((
        CollectiveSite {
            first,
            vals,
            ty,
            narrow: Some(dtype),
            ..site
        },
        Some(note),
    ))
}
