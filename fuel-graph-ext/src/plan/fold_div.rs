//! Folds that divide their own result. A Mean lowers to a sum and a
//! `div` of it; on a host arena the sum's fold can divide each block while
//! it is still in cache ([`Kernel::FoldDiv`]), so the two are one pass over
//! memory and the sum needs no buffer. [`HeldFolds`] is the schedule's
//! rule for it (under [`Options::divide_in_folds`]): it holds back a fold
//! that only a `div` on the same device reads, and hands the fold's
//! operands to that `div`'s step. The graph is left as it is; only the
//! plan changes, so the text IR, the interpreter and every pass see a
//! `div` of an `add` as before, and the cost model prices the one step.

use super::work::{divides_in_fold, Kernel};
use super::{Options, PlanError};
use crate::device::Device;
use crate::graph::{Graph, Node, NodeId, ValueId};
use crate::op::{ElementwiseOp, Op};
use std::collections::{HashMap, HashSet};

/// The folds [`Options::divide_in_folds`] holds back: an element-wise fold
/// on a device where [`divides_in_fold`] holds, read once and only by a
/// `div` on the same device, and not a graph output, gets no step of its
/// own; the `div` becomes one [`Kernel::FoldDiv`] step over the fold's
/// operands.
pub(super) struct HeldFolds {
    on: bool,
    /// The nodes whose results are graph outputs.
    outputs: HashSet<NodeId>,
    /// Held fold -> its op and operand slots, until its `div` is scheduled.
    held: HashMap<NodeId, (ElementwiseOp, Vec<usize>)>,
}

impl HeldFolds {
    pub(super) fn new(g: &Graph, options: &Options) -> HeldFolds {
        HeldFolds {
            on: options.divide_in_folds,
            outputs: if options.divide_in_folds {
                g.outputs().iter().map(|v| v.node).collect()
            } else {
                Default::default()
            },
            held: HashMap::new(),
        }
    }

    /// For a `div` of a held fold: the fused kernel and the fold's operands.
    pub(super) fn take_for(&mut self, n: &Node) -> Option<(Kernel, Vec<usize>)> {
        let Op::Div { by, .. } = &n.op else {
            return None;
        };
        let (kind, operands) = self.held.remove(&n.operands.first()?.node)?;
        Some((Kernel::FoldDiv { kind, by: *by }, operands))
    }

    /// Holds node `id` back if it is such a fold (`None`); otherwise gives
    /// its operands back to be scheduled.
    pub(super) fn hold(
        &mut self,
        g: &Graph,
        id: NodeId,
        n: &Node,
        device: Device,
        operands: Vec<usize>,
    ) -> Option<Vec<usize>> {
        let Op::Elementwise { kind, .. } = &n.op else {
            return Some(operands);
        };
        if !self.on || !divides_in_fold(device) || self.outputs.contains(&id) {
            return Some(operands);
        }
        let users = g.users(ValueId {
            node: id,
            result: 0,
        });
        let divided_here = match users.as_slice() {
            [(user, 0)] => g
                .node(*user)
                .is_some_and(|u| matches!(u.op, Op::Div { .. }) && u.op.device() == Some(device)),
            _ => false,
        };
        if !divided_here {
            return Some(operands);
        }
        self.held.insert(id, (*kind, operands));
        None
    }

    /// Every held fold found its `div` (each is read by one, scheduled
    /// after it).
    pub(super) fn all_taken(&self) -> Result<(), PlanError> {
        if self.held.is_empty() {
            Ok(())
        } else {
            Err(PlanError::Internal(format!(
                "{} fold(s) held for a division that never came",
                self.held.len()
            )))
        }
    }
}
