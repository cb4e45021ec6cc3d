//! `star`: every shard goes to one point, one n-ary op combines them there,
//! and the result is copied straight to every device that needs it.
//!
//! The point is `reduce_at`, or (a candidate each) every device of the
//! group and the staging CPU. A broadcast has no point: its value goes from
//! its source straight to every target. An `all_gather` has both forms:
//! with no point every shard goes straight to every target, which joins
//! its own copy of the result; with a point (`star@cpu:0`) every shard goes
//! to that device, is joined there once, and the joined result goes
//! straight to every target. Between host arenas the second form pays one
//! concat instead of one per CPU, since the copies of the result share its
//! buffer.

use super::algorithm::{name_at, Algorithm, Ask, Lowering};
use super::arrange;
use super::emit::{Emitter, Held};
use super::site::Broken;
use fuel_graph_ext::graph::ValueId;
use fuel_graph_ext::{Device, Op, ReduceOp};
use std::fmt;

/// Every shard to one point.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Star {
    /// Where the shards are combined (or an `all_gather`'s shards joined);
    /// `None` for a broadcast, and for an `all_gather` that every target
    /// joins itself.
    pub at: Option<Device>,
}

/// Every point where the shards may meet, or the one point for a
/// collective with nothing to combine.
pub(super) fn candidates(ask: &Ask<'_>) -> Result<Vec<Lowering>, String> {
    let Ask { site, opts, topo } = *ask;
    let gathers = matches!(site.op, Op::AllGather { .. });
    if site.reduce_op().is_none() && !gathers {
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
    // An all_gather that every target joins itself comes first, so that
    // it stays `auto`'s pick on a tie, and `reduce_at` leaves it out.
    let own = (gathers && opts.reduce_at.is_none()).then_some(Star { at: None });
    Ok(own
        .into_iter()
        .chain(points.into_iter().map(|d| Star { at: Some(d) }))
        .map(Lowering::Star)
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

    fn join_at(&self) -> Option<Device> {
        self.at
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use fuel_graph_ext::interp::{deterministic_inputs, interpret};
    use fuel_graph_ext::{text, Device, Graph, Op};

    /// `src` lowered by `pipeline`, and the devices its concats run on.
    fn lowered(src: &str, pipeline: &str) -> (Graph, Vec<Device>) {
        let before = text::parse(src).unwrap();
        let mut g = before.clone();
        crate::run_pipeline(&mut g, pipeline, Default::default(), Default::default()).unwrap();
        let inputs = deterministic_inputs(&before);
        assert_eq!(
            interpret(&g, &inputs).unwrap(),
            interpret(&before, &inputs).unwrap(),
            "the lowering changed what the graph computes"
        );
        let joins = g
            .node_ids()
            .filter_map(|id| g.node(id))
            .filter(|n| matches!(n.op, Op::Concat { .. }))
            .map(|n| n.op.device().unwrap())
            .collect();
        (g, joins)
    }

    const CPU4: &str = "graph @g {
  %0 = input \"a\" @cpu:0 : f32[256,64]
  %1 = input \"b\" @cpu:1 : f32[256,64]
  %2 = input \"c\" @cpu:2 : f32[256,64]
  %3 = input \"d\" @cpu:3 : f32[256,64]
  %4:4 = all_gather %0, %1, %2, %3 {axis=0} : f32[1024,64]
  return %4#0, %4#1, %4#2, %4#3
}
";

    /// Between host arenas the copies of a joined result share its buffer,
    /// so `auto` joins once instead of once per CPU.
    #[test]
    fn an_all_gather_over_host_arenas_is_joined_once() {
        let (g, joins) = lowered(CPU4, "lower-collectives");
        assert_eq!(joins, vec![Device::cpu(0)]);
        assert!(g.notes().iter().any(|n| n.contains("chose star@cpu:0")));
    }

    /// `reduce_at` names the point; the star with no point joins on every
    /// target, and stays a candidate of `auto`.
    #[test]
    fn reduce_at_names_where_an_all_gather_is_joined() {
        let (_, joins) = lowered(CPU4, "lower-collectives{algorithm=star, reduce_at=cpu:2}");
        assert_eq!(joins, vec![Device::cpu(2)]);
        let mixed = CPU4
            .replace("@cpu:1", "@vulkan:0")
            .replace("@cpu:3", "@cuda:0");
        let (g, joins) = lowered(
            &mixed,
            "lower-collectives{algorithm=star, reduce_at=vulkan:0}",
        );
        assert_eq!(joins, vec![Device::vulkan(0)]);
        // cuda:0's result is the joined value staged through cpu:0.
        let copies = g
            .node_ids()
            .filter_map(|id| g.node(id))
            .filter(|n| matches!(n.op, Op::Copy { .. }))
            .count();
        assert_eq!(
            copies,
            4 + 3,
            "in: cpu:0, cpu:2 and cuda:0 staged (two); out: cpu:0, cpu:2 and cuda:0 from cpu:0's"
        );
        let (_, joins) = lowered(&mixed, "lower-collectives");
        assert!(joins.len() == 1 || joins.len() == 4, "{joins:?}");
    }
}
