//! `split`: an `all_reduce` cut in two parts that two GPUs fold at once,
//! joined once on the staging CPU, from which every other device takes
//! what it lacks.
//!
//! A star folds the whole value on one device. Between GPUs of two vendors
//! every byte crosses host memory, and where that memory is the busiest
//! resource the star's point decides the traffic: folding on a CUDA device
//! stages every other shard into it and its result out again (four shards'
//! bytes in host memory on `[cuda:0, vulkan:0, cpu:0]`), folding on a
//! Vulkan device that imports host buffers costs three, but chains a
//! download, the fold, a download and an upload one after another.
//! `split@a+b{q/4}` cuts every shard along its outermost axis of two
//! entries or more: GPU `a` folds the first part and GPU `b` the last `q`
//! quarters, side by side. Each folded part is copied once into the
//! staging CPU, where one `concat` joins them (the copies are deferred
//! into it, so each byte is written once); that joined value is the CPU
//! ranks' result, a Vulkan device imports it whole, a CUDA device keeps
//! the part it folded and takes the other part from it, and any other GPU
//! takes the result from a peer that has it, or whole from the CPU. On
//! the PCIe workstation (`pcie-cuda-vulkan.topo`) the model puts it at
//! 1.17x the bound from 4 MiB up, where the best star was 1.33x.
//!
//! It has candidates for an `all_reduce` whose group holds two GPUs with no
//! direct path between them (the first such pair, in rank order), whose
//! shards have an axis of two entries or more: one per fraction `b` folds,
//! a quarter, a half and three quarters. Elsewhere it has none, and
//! `algorithm=split` falls back to the star.

use super::algorithm::{Algorithm, Ask, Lowering};
use super::arrange;
use super::emit::{Emitter, Held};
use super::site::Broken;
use super::star::Star;
use fuel_graph_ext::graph::ValueId;
use fuel_graph_ext::topology::Route;
use fuel_graph_ext::{Device, DeviceKind, Op, ReduceOp, TensorType};
use std::fmt;

/// An all_reduce folded in two parts, on `a` and on `b`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Split {
    /// The GPU that folds the first part.
    pub a: Device,
    /// The GPU that folds the last part.
    pub b: Device,
    /// How many quarters of the value `b` folds (1 to 3).
    pub quarters: u8,
}

/// The fractions proposed, in quarters folded by the second GPU.
const QUARTERS: [u8; 3] = [1, 2, 3];

/// Why `algorithm=split` falls back to the star, as the note says it.
pub(super) const UNFIT: &str =
    "lowers an all_reduce over two GPUs with no direct path between them only";

/// The axis a value of type `ty` is cut along, and its extent: the
/// outermost axis of two entries or more (so each part is one contiguous
/// run when the axes outside it have one entry); `None` for an empty
/// value or one with no such axis.
fn cut_axis(ty: &TensorType) -> Option<(usize, usize)> {
    if ty.size_bytes() == 0 {
        return None;
    }
    ty.shape.iter().copied().enumerate().find(|(_, e)| *e >= 2)
}

/// Where the value is cut: the first part's length, so that the second
/// has about `quarters` quarters of `extent` and neither is empty.
fn first_len(extent: usize, quarters: u8) -> usize {
    let second = (extent * usize::from(quarters) + 2) / 4;
    extent - second.clamp(1, extent - 1)
}

/// One candidate per fraction for an all_reduce whose group holds two GPUs
/// with no direct path between them; none elsewhere.
pub(super) fn candidates(ask: &Ask<'_>) -> Result<Vec<Lowering>, String> {
    let site = ask.site;
    if !matches!(site.op, Op::AllReduce { .. }) || cut_axis(&site.ty).is_none() {
        return Ok(Vec::new());
    }
    let gpus: Vec<Device> = arrange::unique(&site.devs)
        .into_iter()
        .filter(|d| !d.is_cpu())
        .collect();
    let pair = gpus.iter().enumerate().find_map(|(i, a)| {
        gpus[i + 1..]
            .iter()
            .find(|b| matches!(ask.topo.route(*a, **b), Route::Staged(_)))
            .map(|b| (*a, *b))
    });
    Ok(pair.map_or_else(Vec::new, |(a, b)| {
        QUARTERS
            .iter()
            .map(|&quarters| Lowering::Split(Split { a, b, quarters }))
            .collect()
    }))
}

impl Algorithm for Split {
    /// As the star spreads, straight to every target (`split` lowers
    /// nothing that spreads; this serves the trait).
    fn spread(&self, em: &mut Emitter<'_>, v: ValueId, targets: &[Device]) -> Result<Held, Broken> {
        Star::at(None).spread(em, v, targets)
    }

    fn combine(&self, em: &mut Emitter<'_>, op: ReduceOp) -> Result<Vec<ValueId>, Broken> {
        let site = em.site;
        if !matches!(site.op, Op::AllReduce { .. }) {
            return Err(site.broken("split lowers an all_reduce only"));
        }
        let (axis, extent) = cut_axis(&site.ty)
            .ok_or_else(|| site.broken("split needs an axis of two entries or more to cut"))?;
        let n = site.ranks();
        let cut = first_len(extent, self.quarters);
        // (start, len, the GPU that folds it, the folded part).
        let mut parts = Vec::with_capacity(2);
        for (start, len, at) in [(0, cut, self.a), (cut, extent - cut, self.b)] {
            let mut pieces = Vec::with_capacity(n);
            for v in &site.vals {
                pieces.push(em.slice(*v, axis, start, len)?);
            }
            let folded = em.combine(op.combiner(), &pieces, at)?;
            parts.push((start, len, at, em.finish(op, folded, n)?));
        }
        let hub = em.topo.staging;
        let joined = em.concat(&[parts[0].3, parts[1].3], axis, hub)?;
        let mut held = Held::new();
        held.insert(hub, joined);
        let mut out = Vec::with_capacity(n);
        for d in site.targets() {
            let folded_here = parts.iter().any(|p| p.2 == d);
            let r = match held.get(&d) {
                Some(v) => *v,
                // A CPU shares the joined buffer and a Vulkan device
                // imports it.
                None if d.is_cpu() || d.kind == DeviceKind::Vulkan => em.to(joined, d)?,
                // A GPU that folded no part takes the result from a
                // folding GPU with a direct link to it (a CUDA peer) once
                // that one holds it, else whole from the joined value. Only
                // the two folding GPUs are asked, so a large group costs
                // two route lookups per rank, not one per rank already
                // served.
                None if !folded_here => {
                    let peer = [self.a, self.b].into_iter().find_map(|g| {
                        held.get(&g)
                            .filter(|_| em.topo.route(g, d) == Route::Direct)
                            .copied()
                    });
                    match peer {
                        Some(v) => em.hop(v, d)?,
                        None => em.to(joined, d)?,
                    }
                }
                None => {
                    let mut pieces = Vec::with_capacity(2);
                    for &(start, len, at, v) in &parts {
                        pieces.push(if at == d {
                            v
                        } else {
                            let s = em.slice(joined, axis, start, len)?;
                            em.to(s, d)?
                        });
                    }
                    em.concat(&pieces, axis, d)?
                }
            };
            held.insert(d, r);
            out.push(r);
        }
        Ok(out)
    }
}

impl fmt::Display for Split {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "split@{}+{}{{{}/4}}", self.a, self.b, self.quarters)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::first_len;
    use crate::lower::checked::lowered;
    use fuel_graph_ext::Device;

    /// The PCIe workstation's all_reduce of 4 MiB shards: the best star
    /// (at `cuda:0`, its relays in two pieces) was 1.33x the bound, host
    /// memory bound; `auto` now folds the value in two parts on `cuda:0`
    /// and `vulkan:0` at once, within 1.25x, and the lowered graph computes
    /// what the collective did.
    #[test]
    fn the_pcie_workstation_folds_its_all_reduce_on_both_gpus() {
        let topo = crate::lower::checked::pcie();
        let src = "graph @g {
  %0 = input \"a\" @cuda:0 : f32[1048576]
  %1 = input \"b\" @vulkan:0 : f32[1048576]
  %2 = input \"c\" @cpu:0 : f32[1048576]
  %3:3 = all_reduce.sum %0, %1, %2 : f32[1048576]
  return %3#0, %3#1, %3#2
}
";
        let (_, d, folds) = lowered(src, "lower-collectives", topo);
        assert!(d.to_string().contains("chose split@cuda:0+vulkan:0"), "{d}");
        assert!(d.over_bound().unwrap() <= 1.25, "{d}");
        assert_eq!(folds, vec![Device::cuda(0), Device::vulkan(0)]);
    }

    /// Each part has at least one entry, and the second about the asked
    /// quarters.
    #[test]
    fn the_cut_leaves_no_part_empty() {
        assert_eq!(first_len(2, 1), 1);
        assert_eq!(first_len(2, 3), 1);
        assert_eq!(first_len(3, 2), 1);
        assert_eq!(first_len(8, 1), 6);
        assert_eq!(first_len(8, 2), 4);
        assert_eq!(first_len(8, 3), 2);
        for extent in 2..40 {
            for q in 1..=3 {
                let a = first_len(extent, q);
                assert!(a >= 1 && a < extent, "{extent} {q}");
            }
        }
    }
}
