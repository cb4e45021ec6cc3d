//! `cse`: common-subexpression elimination.
//!
//! Matches nodes with the same op, attributes, operands and type. Produces one
//! node per such class (the first in topological order) and points every use
//! of the others at it, then removes them. Leaves alone inputs (two inputs are
//! two arguments even if alike), moves (each consumes its source), SPMD
//! collectives (each meets the other ranks once) and `extern` ops (what the
//! host framework's kernel does is its own: two calls may differ).
//!
//! A fold over several operands that it merges (two collectives' lowerings
//! reducing the same shards on one device, as the demo's all_reduce and
//! reduce_scatter do) is said in a graph note, so the text IR, the DOT
//! legend and the reports show that one collective's reduction now serves
//! another: `cse: merged 1 \`add\` over 4 operands @cpu:0 : f32[8] into an
//! equal one (as when two collectives reduce the same values: one fold now
//! serves both)`.

use crate::graph::{Graph, NodeId, ValueId};
use crate::op::{ElementwiseOp, Op};
use crate::pass::{Changed, Pass, PassError};
use std::collections::{BTreeMap, HashMap};

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
        // Merged folds, counted by what the note says of them.
        let mut folds: BTreeMap<String, usize> = BTreeMap::new();
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
                    if let Some(what) = fold_words(g, id) {
                        *folds.entry(what).or_default() += 1;
                    }
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
        for (what, count) in folds {
            g.add_note(format!(
                "cse: merged {count} {what} into an equal one (as when two collectives reduce the same values: one fold now serves both)"
            ));
        }
        Ok(Changed::from_bool(changed))
    }
}

/// How the note names node `id` if it is a fold (an element-wise op other
/// than `eq`)
/// (`` `add` over 4 operands @cpu:0 : f32[8] ``); `None` for anything else.
fn fold_words(g: &Graph, id: NodeId) -> Option<String> {
    let n = g.node(id)?;
    match (&n.op, n.operands.len()) {
        // `eq` compares two values; it folds nothing, so a merged one is
        // merged silently, as every other op that is not a fold.
        (
            Op::Elementwise {
                kind: ElementwiseOp::Eq,
                ..
            },
            _,
        ) => None,
        (Op::Elementwise { device, .. }, k) if k >= 2 => Some(format!(
            "`{}` over {k} operands @{device} : {}",
            n.op.mnemonic(),
            n.ty
        )),
        _ => None,
    }
}
