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
//! buffer. Joined at a CPU, it has a third form (`star@cpu:0{parts}`):
//! every CUDA target takes only the shards it lacks (each straight from
//! its rank where a direct path leads there, else sliced out of the joined
//! result) and joins them itself, so the result does not cross its link
//! whole, its own shard included, and the shards already on the host
//! start up at once. A CPU shares the joined result and a Vulkan device
//! imports it, as in the second form.

use super::algorithm::{name_at, Algorithm, Ask, Lowering};
use super::arrange;
use super::emit::{Emitter, Held};
use super::site::Broken;
use fuel_graph_ext::graph::ValueId;
use fuel_graph_ext::{Device, DeviceKind, Op, ReduceOp};
use std::fmt;

/// Every shard to one point.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Star {
    /// Where the shards are combined (or an `all_gather`'s shards joined);
    /// `None` for a broadcast, and for an `all_gather` that every target
    /// joins itself.
    pub at: Option<Device>,
    /// For an `all_gather` joined at `at` (a CPU): each CUDA target joins
    /// the shards it lacks itself instead of taking the joined result.
    pub parts: bool,
}

impl Star {
    /// Every shard to `at` (or, with `None`, the form with no point).
    pub fn at(at: Option<Device>) -> Star {
        Star { at, parts: false }
    }
}

/// Every point where the shards may meet, or the one point for a
/// collective with nothing to combine.
pub(super) fn candidates(ask: &Ask<'_>) -> Result<Vec<Lowering>, String> {
    let Ask { site, opts, topo } = *ask;
    let gathers = matches!(site.op, Op::AllGather { .. });
    if site.reduce_op().is_none() && !gathers {
        return Ok(vec![Lowering::Star(Star::at(None))]);
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
    let own = (gathers && opts.reduce_at.is_none()).then_some(Star::at(None));
    // The parts form where a CUDA rank would otherwise take the joined
    // result whole from a CPU.
    let cuda = site.devs.iter().any(|d| d.kind == DeviceKind::Cuda);
    let mut out: Vec<Lowering> = own.into_iter().map(Lowering::Star).collect();
    for d in points {
        out.push(Lowering::Star(Star::at(Some(d))));
        if gathers && cuda && d.is_cpu() {
            out.push(Lowering::Star(Star {
                at: Some(d),
                parts: true,
            }));
        }
    }
    Ok(out)
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

    fn joins_parts_on(&self, d: Device) -> bool {
        self.parts && d.kind == DeviceKind::Cuda && Some(d) != self.at
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
        name_at(f, "star", self.at)?;
        if self.parts {
            f.write_str("{parts}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use crate::lower::checked;
    use fuel_graph_ext::{Device, Graph, Op};

    /// Four CPUs, one f32[256,64] shard each.
    const CPU4: &str = "graph @g {
  %0 = input \"a\" @cpu:0 : f32[256,64]
  %1 = input \"b\" @cpu:1 : f32[256,64]
  %2 = input \"c\" @cpu:2 : f32[256,64]
  %3 = input \"d\" @cpu:3 : f32[256,64]
  %4:4 = all_gather %0, %1, %2, %3 {axis=0} : f32[1024,64]
  return %4#0, %4#1, %4#2, %4#3
}
";

    /// `src` lowered by `pipeline` on the default topology (checked against
    /// the interpreter), and the devices its concats run on.
    fn lowered(src: &str, pipeline: &str) -> (Graph, Vec<Device>) {
        let (g, _, _) = checked::lowered(src, pipeline, Default::default());
        let joins = g
            .node_ids()
            .filter_map(|id| g.node(id))
            .filter(|n| matches!(n.op, Op::Concat { .. }))
            .map(|n| n.op.device().unwrap())
            .collect();
        (g, joins)
    }

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

    /// The bytes copied into `d`, and from where.
    fn copies_into(g: &Graph, d: Device) -> Vec<(Device, usize)> {
        let mut into: Vec<(Device, usize)> = g
            .node_ids()
            .filter_map(|id| g.node(id))
            .filter(|n| matches!(n.op, Op::Copy { to, .. } if to == d))
            .map(|n| {
                let src = n.operands[0];
                let bytes = g.value_type(src).unwrap().size_bytes();
                (g.value_device(src).unwrap(), bytes)
            })
            .collect();
        into.sort();
        into
    }

    /// The estimate of the candidate named `name`.
    fn estimate_of(d: &crate::lower::Decision, name: &str) -> Option<f64> {
        d.candidates.iter().find_map(|c| match c {
            crate::lower::Candidate::Estimated { lowering, estimate }
                if lowering.to_string() == name =>
            {
                Some(estimate.total_us())
            }
            _ => None,
        })
    }

    /// The golden case's source (`tests/golden/collectives/kinds`).
    const PCIE_GATHER: &str = include_str!(
        "../../../tests/golden/collectives/kinds/all-gather-cuda0-vulkan0-cpu0-parts.fir"
    );

    /// On the PCIe box the joined result crossing to `cuda:0` whole (its
    /// own shard included) kept `auto` at 1.41x the bound; with `{parts}`
    /// `cuda:0` takes the two shards it lacks, the CPU's straight from its
    /// rank, and `auto` is within 1.25x.
    #[test]
    fn a_cuda_rank_takes_only_the_shards_it_lacks() {
        let (g, d, _) = checked::lowered(PCIE_GATHER, "lower-collectives", checked::pcie());
        assert_eq!(d.lowering.to_string(), "star@cpu:0{parts}", "{d}");
        let ratio = d.over_bound().unwrap();
        assert!(ratio <= 1.25, "est/bound {ratio:.2}: {d}");
        let shard = 262144 * 4 * 4;
        // One shard from the joined result on cpu:0 (vulkan:0's), one
        // straight from cpu:0's input; the two buffers differ.
        assert_eq!(
            copies_into(&g, Device::cuda(0)),
            vec![(Device::cpu(0), shard), (Device::cpu(0), shard)]
        );
        assert_eq!(
            copies_into(&g, Device::vulkan(0)),
            vec![(Device::cpu(0), 3 * shard)]
        );
        let whole = estimate_of(&d, "star@cpu:0").unwrap();
        assert!(whole > d.estimate().unwrap().total_us(), "{d}");
    }

    /// A CUDA rank takes a peer's shard over the peer link, and a shard
    /// with no direct path as a slice of the joined result, made once for
    /// every rank that needs it (the golden case, with `cuda:0` and
    /// `cuda:1` made peers).
    #[test]
    fn peers_shards_come_straight_and_host_slices_are_shared() {
        let src = include_str!(
            "../../../tests/golden/collectives/kinds/all-gather-cuda0-cuda1-vulkan0-cpu0-parts.fir"
        );
        let topo = checked::pcie().with_peer(0, 1);
        let (g, d, _) = checked::lowered(
            src,
            "lower-collectives{algorithm=star, reduce_at=cpu:0}",
            topo,
        );
        let shard = 262144 * 4 * 4;
        assert_eq!(d.lowering.to_string(), "star@cpu:0{parts}", "{d}");
        assert!(estimate_of(&d, "star@cpu:0").is_some(), "{d}");
        for (me, peer) in [(0, 1), (1, 0)] {
            assert_eq!(
                copies_into(&g, Device::cuda(me)),
                vec![
                    (Device::cpu(0), shard),
                    (Device::cpu(0), shard),
                    (Device::cuda(peer), shard)
                ],
                "cuda:{me}"
            );
        }
        let slices = g
            .node_ids()
            .filter_map(|id| g.node(id))
            .filter(|n| matches!(n.op, Op::Slice { .. }))
            .count();
        assert_eq!(
            slices, 1,
            "vulkan:0's shard, sliced once for both CUDA ranks"
        );
    }
}
