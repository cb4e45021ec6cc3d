//! Deduplicated copy chains: "give me `v` on device `d`".
//!
//! [`Transfers`] remembers, per (source value, target device), the copy that
//! already carries it, seeded from the copies the graph holds. Asking twice
//! returns the same value, so each value crosses a given link at most once,
//! and a pass built on it is idempotent. Hops the topology calls staged are
//! built as two copies through its staging CPU, each deduplicated too.
//!
//! A value with no type or no device cannot be moved: the helper returns
//! [`Unplaced`] and the calling pass reports its broken invariant, instead
//! of a copy with a made-up type.
//!
//! The cache is indexed by the source's node index, not hashed: every
//! collective asks it a few times per emitted copy, almost always about
//! values made a moment ago. A hash table scatters those asks over the
//! whole table, which outgrows the core's cache on long graphs (lowering
//! 20k collectives took 2.1-2.2 times as long as 10k); a per-node list head
//! and copies appended in the order they are made keep each ask near the
//! last. Nothing iterates the cache, so its order never shows.

use crate::device::Device;
use crate::graph::{Graph, ValueId};
use crate::op::Op;
use crate::topology::{Route, Topology};

/// A value [`Transfers`] was asked to move has no type or no device in the
/// graph (it is not a value of the graph, or has no placement): the calling
/// pass broke an invariant.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("a value to be copied has no type or no device")]
pub struct Unplaced;

/// Copy deduplication for one pass run.
#[derive(Debug, Default)]
pub struct Transfers {
    /// By source node index: one more than the index in `copies` of the
    /// newest copy known of one of its results (0: none).
    head: Vec<u32>,
    /// Every copy known, in the order it was learnt.
    copies: Vec<Known>,
    /// Copy nodes this helper created.
    pub created: usize,
}

/// A copy of result `result` of some node to `to`, and the next copy known
/// of the same node (one more than its index in `copies`; 0: none).
#[derive(Clone, Copy, Debug)]
struct Known {
    result: u32,
    to: Device,
    copy: ValueId,
    next: u32,
}

impl Transfers {
    /// Seeds the cache from every `copy` already in `g`.
    pub fn new(g: &Graph) -> Transfers {
        let mut tx = Transfers::default();
        for id in g.node_ids() {
            if let Some(n) = g.node(id) {
                if let (Op::Copy { to }, Some(src)) = (&n.op, n.operands.first()) {
                    // The first copy in node order is the one reused.
                    if tx.known(*src, *to).is_none() {
                        tx.learn(
                            *src,
                            *to,
                            ValueId {
                                node: id,
                                result: 0,
                            },
                        );
                    }
                }
            }
        }
        tx
    }

    /// The copy of `v` to `to` already known.
    fn known(&self, v: ValueId, to: Device) -> Option<ValueId> {
        let mut at = *self.head.get(v.node.0.index())?;
        while let Some(k) = at.checked_sub(1).and_then(|i| self.copies.get(i as usize)) {
            if k.result == v.result && k.to == to {
                return Some(k.copy);
            }
            at = k.next;
        }
        None
    }

    /// Records `copy` as the copy of `v` to `to`.
    fn learn(&mut self, v: ValueId, to: Device, copy: ValueId) {
        let i = v.node.0.index();
        if self.head.len() <= i {
            self.head.resize(i + 1, 0);
        }
        let next = self.head[i];
        self.copies.push(Known {
            result: v.result,
            to,
            copy,
            next,
        });
        // A graph of 2^32 copies does not fit in memory long before this.
        self.head[i] = u32::try_from(self.copies.len()).unwrap_or(u32::MAX);
    }

    /// One copy of `v` to `to` (which the caller knows is a direct hop),
    /// reusing an existing one.
    pub fn hop(&mut self, g: &mut Graph, v: ValueId, to: Device) -> Result<ValueId, Unplaced> {
        if g.value_device(v) == Some(to) {
            return Ok(v);
        }
        if let Some(c) = self.known(v, to) {
            return Ok(c);
        }
        let ty = g.value_type(v).cloned().ok_or(Unplaced)?;
        let c = g.add_value(Op::Copy { to }, &[v], ty);
        self.created += 1;
        self.learn(v, to, c);
        Ok(c)
    }

    /// `v` on `to`, through the staging CPU where the topology says so.
    pub fn to_device(
        &mut self,
        g: &mut Graph,
        topo: &Topology,
        v: ValueId,
        to: Device,
    ) -> Result<ValueId, Unplaced> {
        let from = g.value_device(v).ok_or(Unplaced)?;
        match topo.route(from, to) {
            Route::Direct => self.hop(g, v, to),
            Route::Staged(cpu) => {
                let mid = self.hop(g, v, cpu)?;
                self.hop(g, mid, to)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two shards on cuda:0 and cpu:0, an all_reduce of them (two results)
    /// and two copies of input %0 to cpu:0 that the graph already holds.
    fn graph() -> Graph {
        crate::text::parse(
            "graph @t {
  %0 = input \"a\" @cuda:0 : f32[4]
  %1 = input \"b\" @cpu:0 : f32[4]
  %2 = copy %0 -> cpu:0 : f32[4]
  %3 = copy %0 -> cpu:0 : f32[4]
  %4:2 = all_reduce.sum %0, %1 : f32[4]
  return %2, %3, %4#0, %4#1
}",
        )
        .unwrap()
    }

    fn ids(g: &Graph) -> Vec<ValueId> {
        g.topo_order()
            .into_iter()
            .map(|node| ValueId { node, result: 0 })
            .collect()
    }

    #[test]
    fn reuses_the_first_copy_the_graph_holds() {
        let mut g = graph();
        let v = ids(&g);
        let mut tx = Transfers::new(&g);
        let before = g.node_count();
        assert_eq!(tx.hop(&mut g, v[0], Device::cpu(0)), Ok(v[2]));
        assert_eq!((g.node_count(), tx.created), (before, 0));
        // A value already on the device is itself.
        assert_eq!(tx.hop(&mut g, v[1], Device::cpu(0)), Ok(v[1]));
    }

    #[test]
    fn asking_twice_makes_one_copy_per_result_and_device() {
        let mut g = graph();
        let ar = ids(&g)[4].node;
        let r0 = ValueId {
            node: ar,
            result: 0,
        };
        let r1 = ValueId {
            node: ar,
            result: 1,
        };
        let mut tx = Transfers::new(&g);
        let a = tx.hop(&mut g, r0, Device::cpu(1)).unwrap();
        let b = tx.hop(&mut g, r1, Device::cpu(1)).unwrap();
        let c = tx.hop(&mut g, r0, Device::cpu(2)).unwrap();
        assert!(a != b && a != c && b != c, "{a:?} {b:?} {c:?}");
        assert_eq!(tx.hop(&mut g, r1, Device::cpu(1)), Ok(b));
        assert_eq!(tx.hop(&mut g, r0, Device::cpu(1)), Ok(a));
        assert_eq!(tx.hop(&mut g, r0, Device::cpu(2)), Ok(c));
        assert_eq!(tx.created, 3);
        assert_eq!(g.node(b.node).map(|n| n.operands[0]), Some(r1));
    }

    #[test]
    fn a_staged_route_reuses_each_hop() {
        let mut g = graph();
        let v = ids(&g);
        let topo = Topology::default();
        let mut tx = Transfers::new(&g);
        let on_vk = tx
            .to_device(&mut g, &topo, v[0], Device::vulkan(0))
            .unwrap();
        // cuda:0 -> vulkan:0 is staged through a CPU; the graph's copy to
        // cpu:0 is the first hop where the route goes through cpu:0.
        let mid = g.node(on_vk.node).map(|n| n.operands[0]).unwrap();
        assert_eq!(g.value_device(mid), Some(Device::cpu(0)));
        assert_eq!(mid, v[2]);
        assert_eq!(tx.created, 1);
        assert_eq!(
            tx.to_device(&mut g, &topo, v[0], Device::vulkan(0)),
            Ok(on_vk)
        );
        assert_eq!(tx.created, 1);
    }

    #[test]
    fn an_unplaced_value_is_an_error() {
        let mut g = graph();
        let mut tx = Transfers::new(&g);
        let gone = ValueId {
            node: crate::graph::NodeId(petgraph::stable_graph::NodeIndex::new(999)),
            result: 0,
        };
        assert_eq!(tx.hop(&mut g, gone, Device::cpu(1)), Err(Unplaced));
    }
}
