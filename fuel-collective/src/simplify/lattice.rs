//! The replication lattice: which values hold the same bits on several
//! devices of a group.
//!
//! Every value is either *varying* (nothing is known about its peers) or
//! *replicated*: a member of a replica set, at most one value per device,
//! all holding bit for bit the same tensor. The sets come from the
//! collectives whose results are the same on every rank (`all_reduce`,
//! `all_gather`, and `broadcast`, whose operand joins its results), and
//! spread through copies and through local ops (`add`, `mul`, `max`,
//! `min`, `div`, `cast`, `slice`, `concat`) that do the same thing to
//! replicas of the same sets on different devices. The lattice is read off
//! the graph in one walk in topological order and never changes the graph:
//! `simplify-collectives` computes it once per sweep, and
//! [`crate::grad::transpose`] reads it to skip communication a replicated
//! cotangent does not need.

use fuel_graph_ext::graph::ValueId;
use fuel_graph_ext::text::Numbering;
use fuel_graph_ext::{Device, Graph, Op, TensorType};
use rustc_hash::FxHashMap;
use std::collections::BTreeMap;

/// The replica sets of a graph ([`Replication::of`]).
#[derive(Clone, Debug, Default)]
pub struct Replication {
    set_of: FxHashMap<ValueId, usize>,
    sets: Vec<BTreeMap<Device, ValueId>>,
}

/// A local op with its device erased, with its operands' sets and its
/// type: two nodes with equal keys compute the same bits.
type LocalKey = (Op, Vec<usize>, TensorType);

impl Replication {
    /// Reads the replica sets of `g` (one walk in topological order).
    pub fn of(g: &Graph) -> Replication {
        let mut r = Replication::default();
        let mut locals: FxHashMap<LocalKey, usize> = FxHashMap::default();
        for id in g.topo_order() {
            let Some(n) = g.node(id) else { continue };
            let results = n.num_results();
            let value = |k: usize| ValueId {
                node: id,
                result: k as u32,
            };
            match &n.op {
                Op::AllReduce { .. } | Op::AllGather { .. } => {
                    let set = r.new_set();
                    for k in 0..results {
                        r.join(g, set, value(k));
                    }
                }
                Op::Broadcast { .. } => {
                    let Some(&src) = n.operands.first() else {
                        continue;
                    };
                    let set = match r.set_of.get(&src) {
                        Some(&s) => s,
                        None => {
                            let s = r.new_set();
                            r.join(g, s, src);
                            s
                        }
                    };
                    for k in 0..results {
                        r.join(g, set, value(k));
                    }
                }
                Op::Copy { .. } | Op::Move { .. } => {
                    if let Some(&s) = n.operands.first().and_then(|v| r.set_of.get(v)) {
                        r.join(g, s, value(0));
                    }
                }
                op => {
                    let Some(erased) = erase_device(op) else {
                        continue;
                    };
                    let sets: Option<Vec<usize>> = n
                        .operands
                        .iter()
                        .map(|v| r.set_of.get(v).copied())
                        .collect();
                    let Some(sets) = sets else { continue };
                    let key = (erased, sets, n.ty.clone());
                    let set = match locals.get(&key) {
                        Some(&s) => s,
                        None => {
                            let s = r.new_set();
                            locals.insert(key, s);
                            s
                        }
                    };
                    r.join(g, set, value(0));
                }
            }
        }
        r
    }

    fn new_set(&mut self) -> usize {
        self.sets.push(BTreeMap::new());
        self.sets.len() - 1
    }

    /// Puts `v` in `set` unless the set already has a value on its device.
    fn join(&mut self, g: &Graph, set: usize, v: ValueId) {
        let Some(d) = g.value_device(v) else { return };
        if let Some(members) = self.sets.get_mut(set) {
            if let std::collections::btree_map::Entry::Vacant(e) = members.entry(d) {
                e.insert(v);
                self.set_of.insert(v, set);
            }
        }
    }

    /// The replica set `v` belongs to, if it is replicated.
    pub fn set(&self, v: ValueId) -> Option<usize> {
        self.set_of.get(&v).copied()
    }

    /// The one set every value of `vs` belongs to, if there is one and
    /// `vs` is not empty.
    pub fn common_set(&self, vs: &[ValueId]) -> Option<usize> {
        let first = self.set(*vs.first()?)?;
        vs.iter()
            .all(|v| self.set(*v) == Some(first))
            .then_some(first)
    }

    /// Every member of `v`'s set, `v` included (none when it varies).
    pub fn replicas(&self, v: ValueId) -> Vec<ValueId> {
        self.set(v)
            .and_then(|s| self.sets.get(s))
            .map(|m| m.values().copied().collect())
            .unwrap_or_default()
    }

    /// The member of `v`'s set that lives on `d`.
    pub fn replica_on(&self, v: ValueId, d: Device) -> Option<ValueId> {
        self.sets.get(self.set(v)?)?.get(&d).copied()
    }

    /// Every set with members on two devices or more, as (device, value)
    /// lists in device order.
    pub fn groups(&self) -> impl Iterator<Item = &BTreeMap<Device, ValueId>> {
        self.sets.iter().filter(|s| s.len() > 1)
    }

    /// One line per set of two values or more, naming its members as the
    /// printer numbers `g`: `replicated: {%4#0, %4#1} on [cpu:0, cpu:1]`.
    pub fn describe(&self, g: &Graph) -> Vec<String> {
        let numbering = Numbering::new(g);
        // In the order of each set's first value as printed.
        let mut lines: Vec<((Option<usize>, u32), String)> = self
            .groups()
            .filter(|s| s.values().all(|v| g.contains_value(*v)))
            .map(|s| {
                let names: Vec<String> = s.values().map(|v| numbering.name(g, *v)).collect();
                let devices: Vec<String> = s.keys().map(Device::to_string).collect();
                let first = s
                    .values()
                    .map(|v| (numbering.number(v.node), v.result))
                    .min()
                    .unwrap_or((None, 0));
                let line = format!(
                    "replicated: {{{}}} on [{}]",
                    names.join(", "),
                    devices.join(", ")
                );
                (first, line)
            })
            .collect();
        lines.sort();
        lines.into_iter().map(|(_, l)| l).collect()
    }
}

/// `op` with its device replaced by one fixed device, for the local ops
/// that compute the same bits wherever they run; `None` for every other op.
fn erase_device(op: &Op) -> Option<Op> {
    let d = Device::cpu(0);
    Some(match op {
        Op::Elementwise { kind, .. } => Op::Elementwise {
            kind: *kind,
            device: d,
        },
        Op::Div { by, .. } => Op::Div { by: *by, device: d },
        Op::Cast { to, .. } => Op::Cast { to: *to, device: d },
        Op::Slice {
            axis, start, len, ..
        } => Op::Slice {
            axis: *axis,
            start: *start,
            len: *len,
            device: d,
        },
        Op::Concat { axis, .. } => Op::Concat {
            axis: *axis,
            device: d,
        },
        _ => return None,
    })
}
