//! `cse`: common-subexpression elimination.
//!
//! Matches nodes with the same op, attributes, operands and type. Produces one
//! node per such class (the first in topological order) and points every use
//! of the others at it, then removes them. Leaves alone inputs (two inputs are
//! two arguments even if alike), moves (each consumes its source), SPMD
//! collectives (each meets the other ranks once) and `extern` ops (what the
//! host framework's kernel does is its own: two calls may differ).

use crate::graph::{Graph, NodeId, ValueId};
use crate::op::Op;
use crate::pass::{Changed, Pass, PassError};
use std::collections::HashMap;

/// The pass object.
pub struct Cse;

impl Pass for Cse {
    fn name(&self) -> &'static str {
        "cse"
    }

    fn run(&mut self, g: &mut Graph) -> Result<Changed, PassError> {
        let mut seen: HashMap<(Op, Vec<ValueId>, crate::dtype::TensorType), NodeId> =
            HashMap::new();
        let mut changed = false;
        for id in g.topo_order() {
            let Some(n) = g.node(id) else { continue };
            if matches!(n.op, Op::Input { .. } | Op::Move { .. })
                || n.op.is_comm()
                || n.op.is_extern()
            {
                continue;
            }
            let key = (n.op.clone(), n.operands.to_vec(), n.ty.clone());
            let results = n.num_results();
            match seen.get(&key) {
                Some(&keep) => {
                    for r in 0..results as u32 {
                        g.replace_all_uses(
                            ValueId {
                                node: id,
                                result: r,
                            },
                            ValueId {
                                node: keep,
                                result: r,
                            },
                        );
                    }
                    g.remove_node(id);
                    changed = true;
                }
                None => {
                    seen.insert(key, id);
                }
            }
        }
        Ok(Changed::from_bool(changed))
    }
}
