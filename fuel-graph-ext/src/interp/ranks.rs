//! The SPMD world interpreter: every rank's graph evaluated together,
//! meeting at their `comm.*` nodes.
//!
//! Each rank runs until its next `comm.*` node; when every rank waits at
//! one, they must be the same collective, which is then evaluated for all
//! of them (`comm_result` in the parent module). The oracle for SPMD
//! graphs, as `interpret` is for single-process ones.

use super::{comm_result, eval, HostTensor, InterpError};
use crate::dtype::TensorType;
use crate::graph::{Graph, NodeId, ValueId};
use crate::op::{CommOp, Op};
use std::collections::{BTreeMap, HashMap};

/// The state of a world's evaluation: each rank's order, position and
/// values.
struct World<'a> {
    graphs: &'a [Graph],
    inputs: &'a [BTreeMap<String, HostTensor>],
    orders: Vec<Vec<NodeId>>,
    /// Per rank, each `comm` id's ordinal: the order in which the rank
    /// first uses its communicators.
    ordinals: Vec<HashMap<u32, usize>>,
    pos: Vec<usize>,
    envs: Vec<HashMap<ValueId, HostTensor>>,
}

fn vanished() -> InterpError {
    InterpError::Invalid("a node vanished".into())
}

impl World<'_> {
    /// The values of node `id`'s operands on rank `r`.
    fn args_of(&self, r: usize, id: NodeId) -> Result<Vec<HostTensor>, InterpError> {
        let (g, env) = (&self.graphs[r], &self.envs[r]);
        let node = g.node(id).ok_or_else(vanished)?;
        node.operands
            .iter()
            .map(|v| {
                env.get(v).cloned().ok_or_else(|| {
                    let name = crate::text::Numbering::new(g).name(g, *v);
                    InterpError::Invalid(format!("operand {name} is undefined"))
                })
            })
            .collect()
    }

    /// Runs rank `r` up to its next collective.
    fn run_to_collective(&mut self, r: usize) -> Result<(), InterpError> {
        let g = &self.graphs[r];
        while let Some(&id) = self.orders[r].get(self.pos[r]) {
            let node = g.node(id).ok_or_else(vanished)?;
            if node.op.is_comm() {
                break;
            }
            let args = self.args_of(r, id)?;
            let refs: Vec<&HostTensor> = args.iter().collect();
            let results = eval(&node.op, &node.ty, &refs, &self.inputs[r])?;
            for (i, t) in results.into_iter().enumerate() {
                let v = ValueId {
                    node: id,
                    result: i as u32,
                };
                self.envs[r].insert(v, t);
            }
            self.pos[r] += 1;
        }
        Ok(())
    }

    /// The op rank `r` waits at, if it has not finished.
    fn op_at(&self, waiting: &[Option<NodeId>], r: usize) -> Option<Op> {
        waiting[r]
            .and_then(|id| self.graphs[r].node(id))
            .map(|node| node.op.clone())
    }

    /// Checks that every rank waits at the collective rank 0 waits at.
    fn check_same(&self, waiting: &[Option<NodeId>]) -> Result<(), InterpError> {
        let n = self.graphs.len();
        let describe = |r: usize| match self.op_at(waiting, r) {
            Some(op) => format!("rank {r} waits at `{}` {:?}", op.mnemonic(), op.attrs()),
            None => format!("rank {r} has finished"),
        };
        let first = self.op_at(waiting, 0);
        for r in 0..n {
            let same = match (&first, &self.op_at(waiting, r)) {
                (
                    Some(Op::Comm {
                        kind: a,
                        comm: ca,
                        ranks: na,
                        split: sa,
                        ..
                    }),
                    Some(Op::Comm {
                        kind: b,
                        comm: cb,
                        ranks: nb,
                        split: sb,
                        rank: rb,
                        ..
                    }),
                ) => {
                    a == b
                        && self.ordinals[0].get(ca) == self.ordinals[r].get(cb)
                        && na == nb
                        && *na == n
                        && sa == sb
                        && rb.is_none_or(|rb| rb == r)
                }
                _ => false,
            };
            if !same {
                return Err(InterpError::WorldMismatch(format!(
                    "{}, but {}",
                    describe(0),
                    describe(r)
                )));
            }
        }
        Ok(())
    }

    /// Every rank's operand of the collective they wait at, checked to
    /// have one type (or, for an uneven `all_to_all` or `all_gather`, to
    /// differ only along its axis).
    fn operands(&self, waiting: &[Option<NodeId>]) -> Result<Vec<HostTensor>, InterpError> {
        let mut operands = Vec::with_capacity(waiting.len());
        for (r, id) in waiting.iter().enumerate() {
            let id = id.ok_or_else(vanished)?;
            let mut a = self.args_of(r, id)?;
            operands.push(
                a.pop().ok_or_else(|| {
                    InterpError::Invalid("a collective without an operand".into())
                })?,
            );
        }
        let along = match self.op_at(waiting, 0) {
            Some(Op::Comm {
                kind: CommOp::AllToAll { axis } | CommOp::AllGather { axis },
                split: Some(_),
                ..
            }) => Some(axis),
            _ => None,
        };
        let t0 = &operands[0].ty;
        let differs = |t: &TensorType| match along {
            Some(axis) => {
                t.dtype != t0.dtype
                    || t.rank() != t0.rank()
                    || (0..t.rank()).any(|a| a != axis && t.shape[a] != t0.shape[a])
            }
            None => t != t0,
        };
        if operands.iter().any(|t| differs(&t.ty)) {
            return Err(InterpError::WorldMismatch(
                "the ranks' operands have different types".into(),
            ));
        }
        Ok(operands)
    }

    /// Evaluates the collective every rank waits at and moves each past it.
    fn meet(&mut self, waiting: &[Option<NodeId>]) -> Result<(), InterpError> {
        let operands = self.operands(waiting)?;
        let refs: Vec<&HostTensor> = operands.iter().collect();
        for (r, id) in waiting.iter().enumerate() {
            let id = id.ok_or_else(vanished)?;
            let node = self.graphs[r].node(id).ok_or_else(vanished)?;
            let Op::Comm { kind, split, .. } = &node.op else {
                continue;
            };
            crate::op::infer_type(&node.op, &[&operands[r].ty])
                .map_err(|e| InterpError::Invalid(e.to_string()))?;
            let v = ValueId {
                node: id,
                result: 0,
            };
            let t = comm_result(kind, split.as_deref(), &node.ty, &refs, r)?;
            self.envs[r].insert(v, t);
            self.pos[r] += 1;
        }
        Ok(())
    }
}

/// Evaluates an SPMD world: `graphs[r]` is rank r's graph, fed by
/// `inputs[r]`. Each rank runs until its next `comm.*` node; when every rank
/// waits at one, they must be the same collective (same kind and attributes,
/// the same communicator — matched by the order each rank first uses its
/// communicators, since `comm` ids are local handles — and `ranks` equal to
/// the world size), which is then evaluated for
/// all of them. Returns each rank's outputs. This is the oracle for SPMD
/// graphs, as [`super::interpret`] is for single-process ones.
pub fn interpret_world(
    graphs: &[Graph],
    inputs: &[BTreeMap<String, HostTensor>],
) -> Result<Vec<Vec<HostTensor>>, InterpError> {
    let n = graphs.len();
    if inputs.len() != n {
        return Err(InterpError::WorldMismatch(format!(
            "{n} graph(s) but {} input set(s)",
            inputs.len()
        )));
    }
    let orders: Vec<Vec<NodeId>> = graphs.iter().map(|g| g.topo_order()).collect();
    // A `comm` id is a handle local to its rank's process; ranks match
    // communicators by the order in which each rank first uses them.
    let ordinals = graphs
        .iter()
        .zip(&orders)
        .map(|(g, order)| {
            let mut m = HashMap::new();
            for id in order {
                if let Some(Op::Comm { comm, .. }) = g.node(*id).map(|x| &x.op) {
                    let next = m.len();
                    m.entry(*comm).or_insert(next);
                }
            }
            m
        })
        .collect();
    let mut w = World {
        graphs,
        inputs,
        orders,
        ordinals,
        pos: vec![0; n],
        envs: vec![HashMap::new(); n],
    };
    loop {
        for r in 0..n {
            w.run_to_collective(r)?;
        }
        let waiting: Vec<Option<NodeId>> =
            (0..n).map(|r| w.orders[r].get(w.pos[r]).copied()).collect();
        if waiting.iter().all(Option::is_none) {
            break;
        }
        w.check_same(&waiting)?;
        w.meet(&waiting)?;
    }
    (0..n)
        .map(|r| {
            graphs[r]
                .outputs()
                .iter()
                .map(|v| {
                    w.envs[r]
                        .get(v)
                        .cloned()
                        .ok_or_else(|| InterpError::Invalid("a returned value is undefined".into()))
                })
                .collect()
        })
        .collect()
}
