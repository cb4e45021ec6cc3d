//! SPMD collectives inside a compiled graph: the executor's side of
//! `comm.*` nodes.
//!
//! In the SPMD shape every rank (a thread or a process) builds and runs its
//! own graph, and a `comm.<collective>` node meets the other ranks. The
//! executor does not know how to meet them; a communicator does. The
//! communicators a graph needs are handed to compile explicitly
//! ([`super::Compiler::communicator`], under the id its nodes carry as
//! `{comm=ID}`), checked there against the nodes (world size, the device
//! kind the driver carries), and held by the executable. A `comm.*` step
//! then runs like any other step, on the worker of its device, and hands
//! the operand's buffer to the communicator, which fills a buffer of the
//! same device: with NCCL the data stays on the GPU. The executor never
//! calls up into `fuel-collective` and keeps no per-thread registry.

use super::ExecError;
use crate::backend::fault::Faults;
use crate::backend::{Buf, Ctx};
use crate::driver::{CommCall, GraphComm};
use fuel_graph_ext::graph::{Graph, NodeId};
use fuel_graph_ext::op::{CommOp, Op, ReduceOp};
use fuel_graph_ext::plan::schedule::{Schedule, Step, Work};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The communicators of a graph's `comm.*` nodes, by the id they carry,
/// and the splits of its uneven `comm.all_to_all` nodes (read off the
/// graph at compile time, since a step's work names only the collective).
#[derive(Default)]
pub struct CommTable {
    comms: BTreeMap<u32, Arc<dyn GraphComm>>,
    splits: BTreeMap<NodeId, Arc<[usize]>>,
}

impl CommTable {
    /// No communicators.
    pub fn new() -> CommTable {
        CommTable::default()
    }

    /// Hands in communicator `comm` for the nodes with `{comm=id}`.
    pub fn insert(&mut self, id: u32, comm: Arc<dyn GraphComm>) {
        self.comms.insert(id, comm);
    }

    /// The communicator for `{comm=id}`.
    pub fn get(&self, id: &u32) -> Option<&Arc<dyn GraphComm>> {
        self.comms.get(id)
    }

    /// Every communicator, by id.
    pub fn iter(&self) -> std::collections::btree_map::Iter<'_, u32, Arc<dyn GraphComm>> {
        self.comms.iter()
    }

    /// The split of `comm.*` node `node`, if it has one.
    fn split(&self, node: NodeId) -> Option<&[usize]> {
        self.splits.get(&node).map(|s| &s[..])
    }
}

/// Checks every `comm.*` step against the communicator handed in for it,
/// and keeps the splits of `g`'s uneven nodes for the run.
pub(super) fn check(g: &Graph, plan: &Schedule, comms: &mut CommTable) -> Result<(), ExecError> {
    for s in &plan.steps {
        let Work::Comm { comm, ranks, .. } = s.work else {
            continue;
        };
        if let Some(Op::Comm {
            rank: Some(rank),
            split: Some(split),
            ..
        }) = g.node(s.node).map(|n| &n.op)
        {
            if let Some(c) = comms.get(&comm) {
                if *rank != c.rank() {
                    return Err(ExecError::Spmd {
                        op: s.mnemonic.clone(),
                        device: s.device,
                        reason: format!(
                            "the node's split is for rank {rank} but communicator {comm} is rank {}; compile each rank's graph with the communicator that recorded it",
                            c.rank()
                        ),
                    });
                }
            }
            comms.splits.insert(s.node, split.as_slice().into());
        }
        let refuse = |reason: String| ExecError::Spmd {
            op: s.mnemonic.clone(),
            device: s.device,
            reason,
        };
        let Some(c) = comms.get(&comm) else {
            return Err(refuse(format!(
                "no communicator {comm} was handed to compile; pass the communicator that recorded the node (`exec::Compiler::communicator`, or `DriverCommunicator::compile`)"
            )));
        };
        if ranks != c.ranks() {
            return Err(refuse(format!(
                "the node meets {ranks} rank(s) but communicator {comm} has {}; record it with the communicator it runs with",
                c.ranks()
            )));
        }
        let mean = matches!(
            s.work,
            Work::Comm {
                op: CommOp::AllReduce(ReduceOp::Mean)
                    | CommOp::ReduceScatter {
                        op: ReduceOp::Mean,
                        ..
                    },
                ..
            }
        );
        if mean && c.driver() == "nccl" {
            return Err(refuse(
                "NCCL's average is not the interpreter's mean (it scales each shard by 1/N before summing, and sums narrow types without widening); record a sum and `div {by=N}` after it (with `cast`s around them for a narrow dtype), the form lower-collectives emits".into(),
            ));
        }
        if s.device.kind != c.kind() {
            return Err(refuse(format!(
                "communicator {comm} is a {} communicator, which carries {} devices; place the collective on a {} device and copy the value there and back",
                c.driver(),
                c.kind(),
                c.kind()
            )));
        }
    }
    Ok(())
}

/// Runs `comm.*` step `step` through its communicator: the operand's buffer
/// goes in, this rank's result comes back in a new buffer of `ctx` (or in
/// `reuse`, the caller's previous output bytes, where they fit).
pub(super) fn run(
    plan: &Schedule,
    step: &Step,
    comms: &CommTable,
    ctx: &Ctx,
    ins: &[Arc<Buf>],
    reuse: Option<Arc<[u8]>>,
    faults: &Faults,
) -> Result<Buf, ExecError> {
    let Work::Comm { op, comm, .. } = &step.work else {
        return Err(ExecError::Internal("not a comm step".into()));
    };
    let c = comms
        .get(comm)
        .ok_or_else(|| ExecError::Internal(format!("communicator {comm} vanished")))?;
    let (Some(src), Some(in_ty)) = (
        ins.first(),
        step.operands
            .first()
            .and_then(|&o| plan.steps.get(o))
            .map(|s| &s.ty),
    ) else {
        return Err(ExecError::Internal(
            "an SPMD collective without an operand".into(),
        ));
    };
    c.run(CommCall {
        op: *op,
        split: comms.split(step.node),
        mnemonic: &step.mnemonic,
        ctx,
        src,
        in_ty,
        out_ty: &step.ty,
        faults,
        reuse,
    })
}
