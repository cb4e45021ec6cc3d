//! Which node of one step is "the same value" as a node of the step
//! before: the identity the viewer highlights across steps.
//!
//! A [`crate::graph::NodeId`] survives a pass that leaves the node in place,
//! but a removed node's slot may be reused by a node a later pass adds. So a
//! node keeps the identity of the node with its id in the previous step
//! only where that node does the same thing (same mnemonic, same device);
//! otherwise it gets a new identity. Identities are numbered in the order
//! they first appear (steps in order, each in topological order), so they
//! depend on the graphs alone.

use crate::graph::{Graph, NodeId};
use std::collections::BTreeMap;

fn same(a: &Graph, b: &Graph, id: NodeId) -> bool {
    match (a.node(id), b.node(id)) {
        (Some(x), Some(y)) => x.op.device() == y.op.device() && x.op.mnemonic() == y.op.mnemonic(),
        _ => false,
    }
}

/// The identity of every node of every step; `orders` are the steps'
/// topological orders.
pub fn assign(graphs: &[&Graph], orders: &[Vec<NodeId>]) -> Vec<BTreeMap<NodeId, usize>> {
    let mut next = 0usize;
    let mut out: Vec<BTreeMap<NodeId, usize>> = Vec::with_capacity(graphs.len());
    for (k, (g, order)) in graphs.iter().zip(orders).enumerate() {
        let mut ids = BTreeMap::new();
        for &id in order {
            let kept = match (k.checked_sub(1), out.last()) {
                (Some(p), Some(prev)) => graphs
                    .get(p)
                    .filter(|pg| same(pg, g, id))
                    .and_then(|_| prev.get(&id).copied()),
                _ => None,
            };
            let v = kept.unwrap_or_else(|| {
                next += 1;
                next - 1
            });
            ids.insert(id, v);
        }
        out.push(ids);
    }
    out
}
