//! `ring`: the shards are cut into one chunk per rank along their longest
//! axis (uneven chunks allowed). Chunk `c` travels once around the ring,
//! each rank adding its own piece to the partial it received (one copy and
//! one two-operand op per step, n-1 steps), which leaves the reduced chunk
//! on one rank; then the reduced chunk travels around again so that every
//! rank has a copy, and each rank concatenates the chunks. The ring visits
//! ranks sorted by vendor so that neighbours are mostly direct.
//!
//! `reduce` is the reduce-scatter followed by each chunk to the root;
//! `reduce_scatter` is the first half, cut along the op's own axis. A value
//! with nothing to combine travels as a chain around the sorted targets.
//! Where the ring cannot cut (one rank, a scalar, or no axis with an entry
//! per rank) it has no candidate, and `algorithm=ring` falls back to the
//! tree.

use super::algorithm::{Algorithm, Ask, Lowering};
use super::arrange;
use super::emit::{Emitter, Held};
use super::site::Broken;
use fuel_graph_ext::graph::ValueId;
use fuel_graph_ext::{Device, ElementwiseOp, Op, ReduceOp};
use std::fmt;

/// Chunks around a ring.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Ring;

/// Why `algorithm=ring` falls back to the tree, as the note says it.
pub(super) const UNFIT: &str = "cannot cut this tensor";

/// The ring, unless it cannot cut the site's tensor (then why not).
pub(super) fn candidates(ask: &Ask<'_>) -> Result<Vec<Lowering>, String> {
    let Ask { site, .. } = *ask;
    let n = site.ranks();
    let unfit = match &site.op {
        Op::Broadcast { .. } | Op::AllGather { .. } => None,
        // The ring's chunks are the ranks' shares, so each must have an
        // entry (the default partition of `extent` >= `n` entries does).
        Op::ReduceScatter { axis, .. } => match site.scatter() {
            Ok(Some((_, chunks))) => chunks
                .iter()
                .position(|(_, len)| *len == 0)
                .map(|r| format!("rank {r}'s share of axis {axis} is empty")),
            _ => Some(format!("{} has no axis {axis}", site.ty)),
        },
        _ => arrange::ring_axis(&site.ty.shape, n)
            .is_none()
            .then(|| format!("no axis of {} has an entry per rank", site.ty)),
    };
    match unfit {
        None => Ok(vec![Lowering::Ring(Ring)]),
        Some(why) => Err(why),
    }
}

/// Ring reduce-scatter: chunk `c` (of `chunks`, along `axis`) is summed
/// around the ring visiting ranks in `order` and ends at ring position
/// `ends[c]`. Returns the reduced chunks.
fn reduce_scatter(
    em: &mut Emitter<'_>,
    kind: ElementwiseOp,
    order: &[usize],
    axis: usize,
    chunks: &[(usize, usize)],
    ends: &[usize],
) -> Result<Vec<ValueId>, Broken> {
    let site = em.site;
    let n = order.len();
    let mut out = Vec::with_capacity(chunks.len());
    for (&(start, len), &end) in chunks.iter().zip(ends) {
        let first = (end + 1) % n;
        let mut partial: Option<ValueId> = None;
        for step in 0..n {
            let rank = order[(first + step) % n];
            let own = *site
                .vals
                .get(rank)
                .ok_or_else(|| site.broken(format!("the ring has no rank {rank}")))?;
            let piece = em.slice(own, axis, start, len)?;
            partial = Some(match partial {
                None => piece,
                Some(p) => {
                    let d = em.dev(own)?;
                    let p = em.to(p, d)?;
                    let ty = em.ty(piece)?.clone();
                    em.g.add_value(Op::Elementwise { kind, device: d }, &[p, piece], ty)
                }
            });
        }
        out.push(partial.ok_or_else(|| site.broken("the ring has no ranks"))?);
    }
    Ok(out)
}

impl Algorithm for Ring {
    /// Around the ring from the source: the targets after it in sorted
    /// order, then those before it.
    fn spread(&self, em: &mut Emitter<'_>, v: ValueId, targets: &[Device]) -> Result<Held, Broken> {
        let (src, mut held, mut rest) = em.spread_start(v, targets)?;
        rest.sort();
        let (after, before): (Vec<Device>, Vec<Device>) = rest.into_iter().partition(|d| *d > src);
        let mut prev = v;
        for d in after.into_iter().chain(before) {
            prev = em.reach(&mut held, prev, d)?;
        }
        Ok(held)
    }

    fn combine(&self, em: &mut Emitter<'_>, op: ReduceOp) -> Result<Vec<ValueId>, Broken> {
        let site = em.site;
        let n = site.ranks();
        let order = arrange::vendor_order(&site.devs);
        let cut = |axis: usize| {
            site.ty
                .shape
                .get(axis)
                .and_then(|extent| arrange::chunks(*extent, n))
                .ok_or_else(|| site.broken(format!("the ring cannot cut axis {axis}")))
        };
        let (axis, chunks, ends) = match site.op {
            Op::ReduceScatter { axis, .. } => {
                // Chunk c must end on rank c.
                let ends = (0..n)
                    .map(|c| {
                        order
                            .iter()
                            .position(|r| *r == c)
                            .ok_or_else(|| site.broken(format!("rank {c} is not on the ring")))
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                let (_, chunks) = site
                    .scatter()?
                    .ok_or_else(|| site.broken("a reduce_scatter without a split"))?;
                (axis, chunks, ends)
            }
            _ => {
                let axis = arrange::ring_axis(&site.ty.shape, n)
                    .ok_or_else(|| site.broken("the ring has no axis to cut"))?;
                (axis, cut(axis)?, (0..n).collect())
            }
        };
        let reduced = reduce_scatter(em, op.combiner(), &order, axis, &chunks, &ends)?
            .into_iter()
            .map(|v| em.finish(op, v, n))
            .collect::<Result<Vec<_>, _>>()?;
        match site.op {
            Op::ReduceScatter { .. } => Ok(reduced),
            Op::Reduce { root, .. } => Ok(vec![em.concat(&reduced, axis, site.device(root)?)?]),
            _ => {
                // All-gather half: each reduced chunk travels on around the ring.
                let mut have: Vec<Held> = Vec::with_capacity(n);
                for (v, &end) in reduced.iter().zip(&ends) {
                    let mut held = em.held(*v)?;
                    let mut prev = *v;
                    for step in 1..n {
                        let rank = order[(end + step) % n];
                        prev = em.reach(&mut held, prev, site.device(rank)?)?;
                    }
                    have.push(held);
                }
                em.join(&have, axis, &site.devs)
            }
        }
    }
}

impl fmt::Display for Ring {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ring")
    }
}
