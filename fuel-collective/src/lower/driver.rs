//! `driver`: an all_reduce through collective drivers. Each driver island
//! (the devices of one kind whose driver the topology declares) reduces its
//! shards with one `driver_all_reduce` per rank, so those shards never leave
//! their devices. With one such island covering every rank, those nodes are
//! the result (Mean divides on each rank). Otherwise each island's partial
//! (from its first member) and the other ranks' shards meet at a hub (chosen as
//! hierarchical chooses it), are combined there, and the total spreads back
//! as in hierarchical.
//!
//! It applies to `all_reduce` only, where the topology declares a driver
//! for two or more of the group's devices; elsewhere it has no candidate
//! and `algorithm=driver` falls back to hierarchical.

use super::algorithm::{name_at, Algorithm, Ask, Lowering};
use super::emit::{Emitter, Held};
use super::site::Broken;
use super::{arrange, hierarchical};
use fuel_graph_ext::graph::ValueId;
use fuel_graph_ext::{Device, DeviceKind, Op, ReduceOp, Topology};
use std::collections::BTreeMap;
use std::fmt;

/// Collective drivers inside the islands they serve, then a hub.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Driver {
    /// Where the islands' partials and the other shards are combined.
    pub hub: Device,
}

/// Why `algorithm=driver` falls back to hierarchical, as the note says it.
pub(super) const UNFIT: &str = "needs an all_reduce over an island of two or more devices with a driver (`driver cpu` or `driver cuda` in the topology)";

/// The driver, for an all_reduce with a driver island; else none.
pub(super) fn candidates(ask: &Ask<'_>) -> Result<Vec<Lowering>, String> {
    let Ask { site, topo, .. } = *ask;
    if !matches!(site.op, Op::AllReduce { .. }) || driver_islands(&site.devs, topo).is_empty() {
        return Ok(Vec::new());
    }
    Ok(vec![Lowering::Driver(Driver {
        hub: hierarchical::hub(ask),
    })])
}

/// The islands a collective driver serves: the distinct devices of `devs`
/// of one kind whose driver the topology declares (the host driver for CPUs,
/// NCCL for CUDA; Vulkan has none), where there are two or more of them. A
/// driver reaches every device of its kind, peer links or not, so these are
/// per kind, not the direct-copy islands of [`arrange::islands`].
fn driver_islands(devs: &[Device], topo: &Topology) -> Vec<Vec<Device>> {
    let mut by_kind: BTreeMap<DeviceKind, Vec<Device>> = BTreeMap::new();
    for d in arrange::unique(devs) {
        if d.kind != DeviceKind::Vulkan && topo.drivers.contains(&d.kind) {
            by_kind.entry(d.kind).or_default().push(d);
        }
    }
    by_kind.into_values().filter(|g| g.len() >= 2).collect()
}

impl Algorithm for Driver {
    /// The hierarchical way.
    fn spread(&self, em: &mut Emitter<'_>, v: ValueId, targets: &[Device]) -> Result<Held, Broken> {
        hierarchical::spread(em, v, targets)
    }

    fn combine(&self, em: &mut Emitter<'_>, op: ReduceOp) -> Result<Vec<ValueId>, Broken> {
        let site = em.site;
        let n = site.ranks();
        // Mean is a sum on the driver, divided where the sum is complete.
        let driver_op = if op == ReduceOp::Mean {
            ReduceOp::Sum
        } else {
            op
        };
        let islands = driver_islands(&site.devs, em.topo);
        let mut per_rank: Vec<Option<ValueId>> = vec![None; n];
        let mut partials: Vec<ValueId> = Vec::new();
        for island in &islands {
            let members: Vec<usize> = (0..n)
                .filter(|r| site.devs.get(*r).is_some_and(|d| island.contains(d)))
                .collect();
            let vals: Vec<ValueId> = members
                .iter()
                .filter_map(|r| site.vals.get(*r).copied())
                .collect();
            for (j, r) in members.iter().enumerate() {
                let node = em.g.add_value(
                    Op::DriverAllReduce {
                        op: driver_op,
                        rank: j,
                        device: site.device(*r)?,
                    },
                    &vals,
                    site.ty.clone(),
                );
                per_rank[*r] = Some(node);
                if j == 0 {
                    partials.push(node);
                }
            }
        }
        if islands.len() == 1 && per_rank.iter().all(Option::is_some) {
            return per_rank
                .into_iter()
                .flatten()
                .map(|v| em.finish(op, v, n))
                .collect();
        }
        // Ranks no driver island covers join at the hub as they are.
        let mut operands = partials;
        operands.extend(
            per_rank
                .iter()
                .zip(&site.vals)
                .filter(|(covered, _)| covered.is_none())
                .map(|(_, v)| *v),
        );
        let total = em.combine(op.combiner(), &operands, self.hub)?;
        em.deliver(op, total, self)
    }
}

impl fmt::Display for Driver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        name_at(f, "driver", Some(self.hub))
    }
}
