//! `insert-cross-device-copies`: make every operand local to its consumer.
//!
//! Matches each operand of a placed compute op (`add`/`mul`/`max`/`min`,
//! `div`, `slice`, `concat`) whose value lives on another device. Produces a
//! `copy` to the consumer's device, or two copies through the staging CPU
//! where the topology has no direct path. Copies are shared per (value,
//! device), including copies already in the graph, so running the pass twice
//! changes nothing the second time. Leaves alone inputs, collectives and
//! driver collectives (their operands are meant to be spread out) and
//! existing copies and moves (a
//! transfer written by the user is `split-cross-vendor-copies`' business).

use super::Transfers;
use crate::graph::Graph;
use crate::pass::{Changed, Pass, PassError};
use crate::topology::Topology;
use std::sync::Arc;

/// The pass object.
pub struct InsertCrossDeviceCopies {
    topo: Arc<Topology>,
}

impl InsertCrossDeviceCopies {
    /// With the given topology.
    pub fn new(topo: Arc<Topology>) -> Self {
        InsertCrossDeviceCopies { topo }
    }
}

impl Pass for InsertCrossDeviceCopies {
    fn name(&self) -> &'static str {
        "insert-cross-device-copies"
    }

    fn run(&mut self, g: &mut Graph) -> Result<Changed, PassError> {
        let mut tx = Transfers::new(g);
        let mut changed = false;
        for id in g.topo_order() {
            let Some(n) = g.node(id) else { continue };
            if n.op.is_transfer() || n.op.is_collective() || n.op.is_driver_collective() {
                continue;
            }
            let Some(dev) = n.op.device() else { continue };
            let operands = n.operands.clone();
            for (slot, v) in operands.into_iter().enumerate() {
                if g.value_device(v).is_some_and(|d| d != dev) {
                    let local = tx.to_device(g, &self.topo, v, dev).map_err(|e| {
                        PassError::internal(self.name(), format!("operand {slot}: {e}"))
                    })?;
                    g.set_operand(id, slot, local);
                    changed = true;
                }
            }
        }
        Ok(Changed::from_bool(changed))
    }
}
