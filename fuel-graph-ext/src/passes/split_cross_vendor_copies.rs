//! `split-cross-vendor-copies`: stage user-written copies that cannot be one hop.
//!
//! Matches every `copy` or `move` whose source and destination have no direct
//! path in the topology (cuda to vulkan, vulkan:0 to vulkan:1, CUDA GPUs
//! without peer access). Produces a first hop to the staging CPU and rewires
//! the original node to start from there: a copy becomes
//! `copy -> cpu, copy -> dst` (the first hop shared with other copies of the
//! same value), a move becomes `move -> cpu, move -> dst`. Leaves alone
//! transfers that are already direct, and every non-transfer op.

use super::Transfers;
use crate::graph::Graph;
use crate::op::Op;
use crate::pass::{Changed, Pass, PassError};
use crate::topology::{Route, Topology};
use std::sync::Arc;

/// The pass object.
pub struct SplitCrossVendorCopies {
    topo: Arc<Topology>,
}

impl SplitCrossVendorCopies {
    /// With the given topology.
    pub fn new(topo: Arc<Topology>) -> Self {
        SplitCrossVendorCopies { topo }
    }
}

impl Pass for SplitCrossVendorCopies {
    fn name(&self) -> &'static str {
        "split-cross-vendor-copies"
    }

    fn run(&mut self, g: &mut Graph) -> Result<Changed, PassError> {
        let mut tx = Transfers::new(g);
        let mut changed = false;
        for id in g.topo_order() {
            let Some(n) = g.node(id) else { continue };
            let (is_move, to) = match n.op {
                Op::Copy { to } => (false, to),
                Op::Move { to } => (true, to),
                _ => continue,
            };
            let Some(&src) = n.operands.first() else {
                continue;
            };
            let Some(from) = g.value_device(src) else {
                continue;
            };
            let Route::Staged(cpu) = self.topo.route(from, to) else {
                continue;
            };
            let ty = n.ty.clone();
            let mid = if is_move {
                g.add_value(Op::Move { to: cpu }, &[src], ty)
            } else {
                tx.hop(g, src, cpu)
                    .map_err(|e| PassError::internal(self.name(), e.to_string()))?
            };
            g.set_operand(id, 0, mid);
            changed = true;
        }
        Ok(Changed::from_bool(changed))
    }
}
