//! What the DOT writer draws as one: groups of like nodes, and each
//! cross-device copy's transfer step.
//!
//! Pure reading of a graph, no drawing. A lowered collective over many
//! devices gives each device's cluster rows of like nodes side by side (a
//! slice per chunk of one input, a copy per rank feeding one `concat`),
//! which make a picture thousands of pixels wide. [`groups`] finds them:
//! at least [`MIN_GROUP`] nodes on one device with the same op kind that
//! read the same operands (a fan-out), copies and moves that all feed
//! one consumer and nothing else (a fan-in), or copies onto one device in
//! the same transfer step (parallel). [`steps`] numbers each copy
//! by the transfers before it on its longest path from an input, a chain
//! of copies counting once (a hop staged through a CPU is one step), so
//! a ring's copies read step 1, 2, ... in the order the ring runs them.

use crate::graph::{Graph, NodeId, ValueId};
use crate::op::Op;
use std::collections::{BTreeMap, HashMap};

/// The fewest like nodes drawn as one.
pub const MIN_GROUP: usize = 2;

/// The groups of `g`'s nodes (each in `order`'s order, groups in the order
/// of their first member). Nodes that are outputs are never grouped.
pub fn groups(g: &Graph, order: &[NodeId]) -> Vec<Vec<NodeId>> {
    let returned: std::collections::HashSet<NodeId> = g.outputs().iter().map(|v| v.node).collect();
    let mut taken: HashMap<NodeId, ()> = HashMap::new();
    let mut out: Vec<Vec<NodeId>> = Vec::new();
    // Fan-out: one device, one op kind, the same operands.
    let mut fan_out: BTreeMap<(String, String, Vec<ValueId>), Vec<NodeId>> = BTreeMap::new();
    for &id in order {
        let Some(n) = g.node(id) else { continue };
        let Some(device) = n.op.device() else {
            continue;
        };
        if returned.contains(&id) || matches!(n.op, Op::Input { .. }) || n.operands.is_empty() {
            continue;
        }
        fan_out
            .entry((device.to_string(), kind(&n.op), n.operands.to_vec()))
            .or_default()
            .push(id);
    }
    for members in fan_out.into_values().filter(|m| m.len() >= MIN_GROUP) {
        for id in &members {
            taken.insert(*id, ());
        }
        out.push(members);
    }
    // Fan-in: copies and moves onto one device whose one consumer is the
    // same node.
    let mut fan_in: BTreeMap<(String, NodeId), Vec<NodeId>> = BTreeMap::new();
    for &id in order {
        let Some(n) = g.node(id) else { continue };
        if !matches!(n.op, Op::Copy { .. } | Op::Move { .. })
            || returned.contains(&id)
            || taken.contains_key(&id)
        {
            continue;
        }
        let consumers = g.consumers(id);
        if let (1, Some(device), Some(c)) = (consumers.len(), n.op.device(), consumers.first()) {
            fan_in.entry((device.to_string(), *c)).or_default().push(id);
        }
    }
    for members in fan_in.into_values().filter(|m| m.len() >= MIN_GROUP) {
        for id in &members {
            taken.insert(*id, ());
        }
        out.push(members);
    }
    // Parallel copies: onto one device in the same transfer step. No path
    // joins two of them (a path through a transfer ends a step), so the
    // drawn group adds no cycle.
    let steps = steps(g, order);
    let mut parallel: BTreeMap<(String, usize), Vec<NodeId>> = BTreeMap::new();
    for &id in order {
        let Some(n) = g.node(id) else { continue };
        let (Some(step), Some(to)) = (steps.get(&id), n.op.device()) else {
            continue;
        };
        if !returned.contains(&id) && !taken.contains_key(&id) {
            parallel
                .entry((to.to_string(), *step))
                .or_default()
                .push(id);
        }
    }
    out.extend(parallel.into_values().filter(|m| m.len() >= MIN_GROUP));
    let position: HashMap<NodeId, usize> =
        order.iter().enumerate().map(|(i, id)| (*id, i)).collect();
    out.sort_by_key(|m| m.first().and_then(|id| position.get(id)).copied());
    out
}

/// The op's kind without its attributes (`slice`, `copy`, `add`).
fn kind(op: &Op) -> String {
    let m = op.mnemonic();
    m.split(['.', ' ']).next().unwrap_or(&m).to_string()
}

/// Each cross-device copy or move's transfer step (1 for the first), by
/// the longest path from an input; `order` must be topological.
pub fn steps(g: &Graph, order: &[NodeId]) -> HashMap<NodeId, usize> {
    let mut depth: HashMap<NodeId, usize> = HashMap::with_capacity(order.len());
    let mut out = HashMap::new();
    for &id in order {
        let Some(n) = g.node(id) else { continue };
        let before = n
            .operands
            .iter()
            .filter_map(|v| depth.get(&v.node))
            .copied()
            .max()
            .unwrap_or(0);
        let mut d = before;
        if let Op::Copy { to } | Op::Move { to } = &n.op {
            let src = n.operands.first();
            let crosses = src
                .and_then(|v| g.value_device(*v))
                .is_some_and(|s| s != *to);
            // A copy of a copy that only feeds it continues its step (a
            // hop staged through a CPU); a copy that is also read where it
            // lands (a ring forwarding a chunk) ends its step.
            let chained = src.is_some_and(|v| {
                g.node(v.node)
                    .is_some_and(|p| matches!(p.op, Op::Copy { .. } | Op::Move { .. }))
                    && g.use_count(*v) == 1
            });
            if crosses {
                if !chained {
                    d = before + 1;
                }
                out.insert(id, d.max(1));
            }
        }
        depth.insert(id, d);
    }
    out
}
