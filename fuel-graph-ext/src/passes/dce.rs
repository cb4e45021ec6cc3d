//! `dce`: dead-code elimination.
//!
//! Matches nodes none of whose results reach a returned value. Produces the
//! same graph without them. Leaves alone inputs, which are the graph's
//! signature even when unused, and SPMD collectives (`comm.*`) with what
//! they read, which other ranks wait for, and `extern` ops with what they
//! read (the host framework's kernel may do more than its result says).

use crate::graph::{Graph, NodeId};
use crate::op::Op;
use crate::pass::{Changed, Pass, PassError};
use std::collections::HashSet;

/// The pass object.
pub struct Dce;

impl Pass for Dce {
    fn name(&self) -> &'static str {
        "dce"
    }

    fn run(&mut self, g: &mut Graph) -> Result<Changed, PassError> {
        let mut live: HashSet<NodeId> = HashSet::new();
        // SPMD collectives are live even when unused: the other ranks wait
        // for this one to arrive.
        let mut stack: Vec<NodeId> = g.outputs().iter().map(|v| v.node).collect();
        stack.extend(g.node_ids().filter(|id| {
            g.node(*id)
                .is_some_and(|n| n.op.is_comm() || n.op.is_extern())
        }));
        while let Some(id) = stack.pop() {
            if !live.insert(id) {
                continue;
            }
            if let Some(n) = g.node(id) {
                stack.extend(
                    n.operands
                        .iter()
                        .map(|v| v.node)
                        .filter(|x| !live.contains(x)),
                );
            }
        }
        let dead: Vec<NodeId> = g
            .node_ids()
            .filter(|id| {
                !live.contains(id) && !matches!(g.node(*id).map(|n| &n.op), Some(Op::Input { .. }))
            })
            .collect();
        for id in &dead {
            g.remove_node(*id);
        }
        Ok(Changed::from_bool(!dead.is_empty()))
    }
}
