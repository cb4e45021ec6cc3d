//! `hierarchical`: each island (see [`super::arrange::islands`]) combines its
//! shards on one member first, so an island sends one value over its staged
//! link; the islands' partials meet at a hub, and the result goes back to
//! one member of each island, which passes it on inside the island.
//!
//! The hub is `reduce_at`, else a `reduce`'s root, else the only island's
//! first device, else the group's first CPU, else the staging CPU. A
//! collective with nothing to combine has no hub: its value reaches one
//! member per island, which passes it on.

use super::algorithm::{name_at, Algorithm, Ask, Lowering};
use super::arrange;
use super::emit::{Emitter, Held};
use super::site::Broken;
use fuel_graph_ext::graph::ValueId;
use fuel_graph_ext::{Device, ElementwiseOp, ReduceOp};
use std::fmt;

/// Islands first, then a hub.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Hierarchical {
    /// Where the islands' partials meet (`None`: nothing is combined).
    pub hub: Option<Device>,
}

/// Hierarchical, with its hub where the shards combine.
pub(super) fn candidates(ask: &Ask<'_>) -> Result<Vec<Lowering>, String> {
    let hub = ask.site.reduce_op().map(|_| hub(ask));
    Ok(vec![Lowering::Hierarchical(Hierarchical { hub })])
}

/// Where the islands' partials meet (see the module doc).
pub(super) fn hub(ask: &Ask<'_>) -> Device {
    let Ask { site, opts, topo } = *ask;
    if let Some(d) = opts.reduce_at {
        return d;
    }
    if let Some(d) = site.root().and_then(|r| site.devs.get(r)) {
        return *d;
    }
    let islands = arrange::islands(&site.devs, topo);
    if let [only] = islands.as_slice() {
        if let Some(d) = only.first() {
            return *d;
        }
    }
    site.devs
        .iter()
        .copied()
        .find(|d| d.is_cpu())
        .unwrap_or(topo.staging)
}

/// Islands combine `vals` on one member each, then the partials meet at
/// `at` (the hub's own island feeds the final op directly).
fn reduce(
    em: &mut Emitter<'_>,
    kind: ElementwiseOp,
    vals: &[ValueId],
    at: Device,
) -> Result<ValueId, Broken> {
    let devs = vals
        .iter()
        .map(|v| em.dev(*v))
        .collect::<Result<Vec<_>, _>>()?;
    let mut all = devs.clone();
    all.push(at);
    let mut operands = Vec::new();
    for island in arrange::islands(&all, em.topo) {
        let members: Vec<ValueId> = vals
            .iter()
            .zip(&devs)
            .filter(|(_, d)| island.contains(d))
            .map(|(v, _)| *v)
            .collect();
        if members.is_empty() {
            continue;
        }
        if island.contains(&at) {
            operands.extend(members);
        } else {
            // `members` is not empty, so a device of `devs` is in the island.
            let leader = devs
                .iter()
                .copied()
                .find(|d| island.contains(d))
                .ok_or_else(|| em.site.broken("an island lost its members"))?;
            operands.push(em.combine(kind, &members, leader)?);
        }
    }
    em.combine(kind, &operands, at)
}

/// `v` on every device of `targets`, one copy per island first (to its
/// first member), then inside each island from there. The driver spreads
/// this way too.
pub(super) fn spread(em: &mut Emitter<'_>, v: ValueId, targets: &[Device]) -> Result<Held, Broken> {
    let (src, mut held, rest) = em.spread_start(v, targets)?;
    let mut all = vec![src];
    all.extend(&rest);
    for island in arrange::islands(&all, em.topo) {
        let first = if island.contains(&src) {
            v
        } else {
            let Some(&leader) = island.first() else {
                continue;
            };
            em.reach(&mut held, v, leader)?
        };
        for d in island {
            em.reach(&mut held, first, d)?;
        }
    }
    Ok(held)
}

impl Algorithm for Hierarchical {
    fn spread(&self, em: &mut Emitter<'_>, v: ValueId, targets: &[Device]) -> Result<Held, Broken> {
        spread(em, v, targets)
    }

    fn combine(&self, em: &mut Emitter<'_>, op: ReduceOp) -> Result<Vec<ValueId>, Broken> {
        let hub = self
            .hub
            .ok_or_else(|| em.site.broken("hierarchical has no hub to combine at"))?;
        let site = em.site;
        let total = reduce(em, op.combiner(), &site.vals, hub)?;
        em.deliver(op, total, self)
    }
}

impl fmt::Display for Hierarchical {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        name_at(f, "hierarchical", self.hub)
    }
}
