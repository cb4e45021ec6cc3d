//! `star`: every shard goes to one point, one n-ary op combines them there,
//! and the result is copied straight to every device that needs it.
//!
//! The point is `reduce_at`, or (a candidate each) every device of the
//! group and the staging CPU. A collective with nothing to combine has no
//! point: its value goes from its source straight to every target.

use super::algorithm::{name_at, Algorithm, Ask, Lowering};
use super::arrange;
use super::emit::{Emitter, Held};
use super::site::Broken;
use fuel_graph_ext::graph::ValueId;
use fuel_graph_ext::{Device, ReduceOp};
use std::fmt;

/// Every shard to one point.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Star {
    /// Where the shards are combined; `None` for a collective with nothing
    /// to combine (`broadcast`, `all_gather`).
    pub at: Option<Device>,
}

/// Every point where the shards may meet, or the one point for a
/// collective with nothing to combine.
pub(super) fn candidates(ask: &Ask<'_>) -> Result<Vec<Lowering>, String> {
    let Ask { site, opts, topo } = *ask;
    if site.reduce_op().is_none() {
        return Ok(vec![Lowering::Star(Star { at: None })]);
    }
    let points = match opts.reduce_at {
        Some(d) => vec![d],
        None => {
            let mut p = arrange::unique(&site.devs);
            if !p.contains(&topo.staging) {
                p.push(topo.staging);
            }
            p
        }
    };
    Ok(points
        .into_iter()
        .map(|d| Lowering::Star(Star { at: Some(d) }))
        .collect())
}

impl Algorithm for Star {
    fn spread(&self, em: &mut Emitter<'_>, v: ValueId, targets: &[Device]) -> Result<Held, Broken> {
        let (_, mut held, rest) = em.spread_start(v, targets)?;
        for d in rest {
            em.reach(&mut held, v, d)?;
        }
        Ok(held)
    }

    fn combine(&self, em: &mut Emitter<'_>, op: ReduceOp) -> Result<Vec<ValueId>, Broken> {
        let at = self
            .at
            .ok_or_else(|| em.site.broken("star has no point to combine at"))?;
        let site = em.site;
        let total = em.combine(op.combiner(), &site.vals, at)?;
        em.deliver(op, total, self)
    }
}

impl fmt::Display for Star {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        name_at(f, "star", self.at)
    }
}
