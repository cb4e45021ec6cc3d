//! What a candidate lowering would cost: it is lowered for real on a small
//! scratch graph, and the nodes it adds go to the cost model.
//!
//! [`graph_steps`] is the adapter between graphs and the pure cost model
//! ([`crate::cost`], which never sees a graph): every copy and compute node
//! becomes a [`Step`] waiting on its operands' steps. The scratch graph
//! holds only the collective's operands and the copies of them that the
//! real graph already has, so `auto` stays linear in the number of
//! collectives, and an [`EstimateCache`] keyed by everything an estimate
//! depends on lets a chain of identical collectives be estimated once.

use super::algorithm::Lowering;
use super::choose::Candidates;
use super::emit::Emitter;
use super::site::CollectiveSite;
use crate::cost::{estimate, Estimate, Step, StepKind};
use fuel_graph_ext::graph::{NodeId, ValueId};
use fuel_graph_ext::pass::PassError;
use fuel_graph_ext::passes::Transfers;
use fuel_graph_ext::{Device, DeviceKind, Graph, Op, TensorType, Topology};
use rustc_hash::FxHashMap;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// The graph a collective's candidates are estimated in, and the stand-ins
/// of its operands there.
#[derive(Clone, Debug)]
pub(super) struct Scratch {
    graph: Graph,
    vals: Vec<ValueId>,
}

impl Scratch {
    /// The scratch graph for `site` in `g`: the collective's operands and
    /// the copies of them that `g` already has (so a shard staged for an
    /// earlier collective is credited, as in the real lowering). Copying the
    /// whole graph per candidate instead made `auto` quadratic.
    pub fn new(g: &Graph, site: &CollectiveSite) -> Result<Scratch, PassError> {
        let mut graph = Graph::new("estimate");
        // Original value -> its stand-in in the scratch graph.
        let mut map: BTreeMap<ValueId, ValueId> = BTreeMap::new();
        let mut vals: Vec<ValueId> = Vec::with_capacity(site.vals.len());
        for (i, v) in site.vals.iter().enumerate() {
            // Walk back through copies to the value they all carry...
            let mut root = *v;
            while let Some(src) = g
                .node(root.node)
                .filter(|n| matches!(n.op, Op::Copy { .. }))
                .and_then(|n| n.operands.first().copied())
            {
                root = src;
            }
            if !map.contains_key(&root) {
                let device = g
                    .value_device(root)
                    .ok_or_else(|| site.broken(format!("shard {i} has no device")))?;
                let input = Op::Input {
                    name: format!("s{i}"),
                    device,
                };
                // Each shard's own type: `all_gather` shards may differ.
                let ty = g.value_type(root).unwrap_or(&site.ty).clone();
                let here = graph.add_value(input, &[], ty);
                map.insert(root, here);
                // ...then copy every chain hanging off it, breadth first.
                let mut queue = vec![(root, here)];
                while let Some((orig, here)) = queue.pop() {
                    for (user, _) in g.users(orig) {
                        let Some(n) = g.node(user) else { continue };
                        if let Op::Copy { to } = n.op {
                            let c = graph.add_value(Op::Copy { to }, &[here], n.ty.clone());
                            let user_val = ValueId {
                                node: user,
                                result: 0,
                            };
                            map.insert(user_val, c);
                            queue.push((user_val, c));
                        }
                    }
                }
            }
            let here = map
                .get(v)
                .ok_or_else(|| site.broken(format!("shard {i} has no stand-in")))?;
            vals.push(*here);
        }
        Ok(Scratch { graph, vals })
    }

    /// Lowers `site` with `lowering` into a copy of the scratch graph and
    /// estimates the nodes that adds.
    pub fn estimate(
        &self,
        site: &CollectiveSite,
        lowering: &Lowering,
        topo: &Topology,
    ) -> Result<Estimate, PassError> {
        let Some(&first) = self.vals.first() else {
            return Err(site.broken("no shards to estimate").into());
        };
        let mut scratch = self.graph.clone();
        let local = CollectiveSite {
            first,
            vals: self.vals.clone(),
            ..site.clone()
        };
        let before: BTreeSet<NodeId> = scratch.node_ids().collect();
        let mut tx = Transfers::new(&scratch);
        Emitter {
            g: &mut scratch,
            tx: &mut tx,
            topo,
            site: &local,
        }
        .lower(lowering)?;
        Ok(estimate(topo, &graph_steps(&scratch, topo, &before)))
    }
}

/// Everything an estimate of a collective's candidates depends on besides
/// the pass options and the topology (fixed for a run): the collective and
/// the whole scratch graph it is lowered into. Equal keys give equal
/// estimates.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct EstimateKey {
    op: Op,
    ty: TensorType,
    devs: Vec<Device>,
    vals: Vec<ValueId>,
    nodes: Vec<(Op, Vec<ValueId>, TensorType)>,
}

impl EstimateKey {
    /// The key of `site` estimated in `scratch`.
    pub fn new(site: &CollectiveSite, scratch: &Scratch) -> EstimateKey {
        let sg = &scratch.graph;
        EstimateKey {
            op: site.op.clone(),
            ty: site.ty.clone(),
            devs: site.devs.clone(),
            vals: scratch.vals.clone(),
            nodes: sg
                .node_ids()
                .filter_map(|id| sg.node(id))
                .map(|n| (n.op.clone(), n.operands.to_vec(), n.ty.clone()))
                .collect(),
        }
    }
}

/// Every candidate with its estimate, per [`EstimateKey`], for one run of
/// the pass.
pub(super) type EstimateCache = FxHashMap<EstimateKey, Arc<Candidates>>;

/// The cost model's view of an already lowered graph: every copy and
/// compute node becomes a [`Step`], waiting on the steps of its operands.
/// Nodes in `skip` (for example those that existed before a lowering) are
/// left out, and so are inputs.
pub fn graph_steps(g: &Graph, topo: &Topology, skip: &BTreeSet<NodeId>) -> Vec<Step> {
    let mut index: BTreeMap<NodeId, usize> = BTreeMap::new();
    let mut steps = Vec::new();
    for id in g.topo_order() {
        if skip.contains(&id) {
            continue;
        }
        let Some(n) = g.node(id) else { continue };
        let bytes = n.ty.size_bytes();
        let kind = match &n.op {
            Op::Input { .. } => continue,
            Op::DriverAllReduce { device, .. } => {
                let devs: Vec<Device> = n
                    .operands
                    .iter()
                    .filter_map(|v| g.value_device(*v))
                    .collect();
                let peered = devs.iter().all(|a| {
                    devs.iter().all(|b| {
                        a == b
                            || (a.kind == b.kind
                                && a.kind == DeviceKind::Cuda
                                && topo.has_peer(a.index, b.index))
                    })
                });
                StepKind::Driver {
                    device: *device,
                    ranks: n.operands.len(),
                    bytes,
                    peered,
                }
            }
            Op::Copy { to } | Op::Move { to } => {
                let Some(from) = n.operands.first().and_then(|v| g.value_device(*v)) else {
                    continue;
                };
                StepKind::Transfer {
                    from,
                    to: *to,
                    bytes,
                }
            }
            op => {
                let Some(device) = op.device() else { continue };
                let inputs = match op {
                    Op::Elementwise { .. } => n.operands.len(),
                    _ => 1,
                };
                StepKind::Compute {
                    device,
                    inputs,
                    bytes,
                }
            }
        };
        let deps = n
            .operands
            .iter()
            .filter_map(|v| index.get(&v.node).copied())
            .collect();
        index.insert(id, steps.len());
        steps.push(Step { kind, deps });
    }
    steps
}

/// The cost model's estimate for a whole lowered graph.
pub fn estimate_graph(g: &Graph, topo: &Topology) -> Estimate {
    estimate(topo, &graph_steps(g, topo, &BTreeSet::new()))
}
