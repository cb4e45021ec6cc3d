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
//! The cache is an `FxHashMap`: every collective asks it a few times per
//! emitted copy, and SipHash made up about a sixth of the instructions of
//! `lower-collectives`. Nothing iterates the map, so its order never shows.

use crate::device::Device;
use crate::graph::{Graph, ValueId};
use crate::op::Op;
use crate::topology::{Route, Topology};
use rustc_hash::FxHashMap;

/// A value [`Transfers`] was asked to move has no type or no device in the
/// graph (it is not a value of the graph, or has no placement): the calling
/// pass broke an invariant.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("a value to be copied has no type or no device")]
pub struct Unplaced;

/// Copy deduplication for one pass run.
#[derive(Debug, Default)]
pub struct Transfers {
    cache: FxHashMap<(ValueId, Device), ValueId>,
    /// Copy nodes this helper created.
    pub created: usize,
}

impl Transfers {
    /// Seeds the cache from every `copy` already in `g`.
    pub fn new(g: &Graph) -> Transfers {
        let mut cache = FxHashMap::default();
        for id in g.node_ids() {
            if let Some(n) = g.node(id) {
                if let (Op::Copy { to }, Some(src)) = (&n.op, n.operands.first()) {
                    cache.entry((*src, *to)).or_insert(ValueId {
                        node: id,
                        result: 0,
                    });
                }
            }
        }
        Transfers { cache, created: 0 }
    }

    /// One copy of `v` to `to` (which the caller knows is a direct hop),
    /// reusing an existing one.
    pub fn hop(&mut self, g: &mut Graph, v: ValueId, to: Device) -> Result<ValueId, Unplaced> {
        if g.value_device(v) == Some(to) {
            return Ok(v);
        }
        if let Some(c) = self.cache.get(&(v, to)) {
            return Ok(*c);
        }
        let ty = g.value_type(v).cloned().ok_or(Unplaced)?;
        let c = g.add_value(Op::Copy { to }, &[v], ty);
        self.created += 1;
        self.cache.insert((v, to), c);
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
