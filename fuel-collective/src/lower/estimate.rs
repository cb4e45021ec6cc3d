//! What a candidate lowering would cost: it is lowered for real on a small
//! scratch graph, and the nodes it adds go to the cost model.
//!
//! [`graph_steps`] is the adapter between graphs and the pure cost model
//! ([`crate::cost`], which never sees a graph): the lowered graph's plan,
//! built by the runtime's own rules ([`crate::cost::price`]), becomes the
//! model's [`Step`]s. The scratch graph
//! holds only the collective's operands and the copies of them that the
//! real graph already has, so `auto` stays linear in the number of
//! collectives, and an [`EstimateCache`] keyed by everything an estimate
//! depends on lets a chain of identical collectives be estimated once.

use super::algorithm::Lowering;
use super::closed_form::{self as closed, StarClass};
use super::emit::Emitter;
use super::site::CollectiveSite;
use super::star::Star;
use crate::cost::{estimate_with, price, runner_of, Estimate, Step};
use fuel_graph_ext::graph::{NodeId, ValueId};
use fuel_graph_ext::pass::PassError;
use fuel_graph_ext::passes::Transfers;
use fuel_graph_ext::topology::Runner;
use fuel_graph_ext::{DType, Device, Graph, Op, PlanError, TensorType, Topology};
use rustc_hash::FxHashMap;
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};

/// The graph a collective's candidates are estimated in, and the stand-ins
/// of its operands there.
#[derive(Clone, Debug)]
pub(super) struct Scratch {
    graph: Graph,
    vals: Vec<ValueId>,
    /// Every operand is a distinct value with no copies yet, so the closed
    /// forms ([`super::closed_form`]) apply.
    fresh: bool,
    /// Star estimates, one per class of equivalent points (closed forms,
    /// and an all_gather's join points).
    stars: RefCell<FxHashMap<(StarClass, bool), Estimate>>,
}

impl Scratch {
    /// The scratch graph for `site` in `g` (see [`EstimateKey::read`]).
    #[cfg(test)]
    pub fn new(g: &Graph, site: &CollectiveSite) -> Result<Scratch, PassError> {
        Ok(Scratch::of(&EstimateKey::read(g, site)?))
    }

    /// The scratch graph `key` describes: its nodes added in order, so each
    /// gets the index the key's operands already name.
    pub fn of(key: &EstimateKey) -> Scratch {
        let mut graph = Graph::new("estimate");
        graph.reserve(key.nodes.len(), key.nodes.len());
        for (i, (op, operands, ty)) in key.nodes.iter().enumerate() {
            let v = graph.add_value(op.clone(), operands, ty.clone());
            debug_assert_eq!(v, stand_in(i), "a fresh graph numbers nodes in order");
        }
        let fresh = key.nodes.len() == key.vals.len()
            && key.nodes.iter().all(|n| matches!(n.0, Op::Input { .. }));
        Scratch {
            graph,
            vals: key.vals.clone(),
            fresh,
            stars: RefCell::default(),
        }
    }

    /// The estimate of `site` lowered with `lowering`: in closed form where
    /// one applies ([`super::closed_form`]), else by lowering it into a copy of
    /// the scratch graph and estimating the nodes that adds.
    pub fn estimate(
        &self,
        site: &CollectiveSite,
        lowering: &Lowering,
        topo: &Topology,
    ) -> Result<Estimate, PassError> {
        if !self.fresh {
            return self.estimate_by_graph(site, lowering, topo);
        }
        // Star points of one class cost the same (`closed::StarClass`):
        // a combining collective's, priced in closed form, and an
        // all_gather's join points, priced by graph, once per class.
        let class = match lowering {
            Lowering::Star(Star {
                at: Some(at),
                parts,
            }) if site.reduce_op().is_some() || matches!(site.op, Op::AllGather { .. }) => {
                Some((closed::star_class(site, *at, topo), *parts))
            }
            _ => None,
        };
        if let Some(e) = class.and_then(|c| self.stars.borrow().get(&c).copied()) {
            return Ok(e);
        }
        let e = match closed::estimate(site, lowering, topo) {
            Some(e) => e,
            None => self.estimate_by_graph(site, lowering, topo)?,
        };
        if let Some(c) = class {
            self.stars.borrow_mut().insert(c, e);
        }
        Ok(e)
    }

    /// The estimate of `site` lowered with `lowering` into a copy of the
    /// scratch graph: the nodes that adds, through [`graph_steps`].
    pub fn estimate_by_graph(
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
        let results = Emitter {
            g: &mut scratch,
            tx: &mut tx,
            topo,
            site: &local,
        }
        .lower(lowering)?;
        // The results leave the collective: the executor copies into them
        // (it shares or defers only copies that other steps read).
        scratch.set_outputs(results);
        if let Lowering::Piped(p) = lowering {
            // Priced as the pass emits it: this collective's relays in
            // pieces, each piece's chain on the workers it uses.
            let made = scratch
                .node_ids()
                .filter(|id| !before.contains(id))
                .map(|id| (id, p.k))
                .collect();
            super::piped::cut(&mut scratch, topo, &made);
        }
        let plan = price::plan_for(&scratch, topo).map_err(|e| site.broken(e.to_string()))?;
        let steps = price::plan_steps(&plan, topo, &before, false);
        Ok(estimate_with(topo, price::plan_runner(&plan, topo), &steps))
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
    narrow: Option<DType>,
    devs: Vec<Device>,
    vals: Vec<ValueId>,
    nodes: Vec<(Op, Vec<ValueId>, TensorType)>,
}

/// The value of the `i`th node of a fresh graph.
fn stand_in(i: usize) -> ValueId {
    ValueId {
        node: NodeId(petgraph::stable_graph::NodeIndex::new(i)),
        result: 0,
    }
}

impl EstimateKey {
    /// The key of `site` in `g`, read without building the scratch graph
    /// (a chain of alike collectives builds it once, on the first miss):
    /// the collective's operands and the copies of them that `g` already
    /// has (so a shard staged for an earlier collective is credited, as in
    /// the real lowering). Copying the whole graph per candidate instead
    /// made `auto` quadratic.
    pub fn read(g: &Graph, site: &CollectiveSite) -> Result<EstimateKey, PassError> {
        let mut nodes: Vec<(Op, Vec<ValueId>, TensorType)> = Vec::new();
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
                let here = stand_in(nodes.len());
                nodes.push((input, Vec::new(), ty));
                map.insert(root, here);
                // ...then copy every chain hanging off it, breadth first.
                let mut queue = vec![(root, here)];
                while let Some((orig, here)) = queue.pop() {
                    for (user, _) in g.users(orig) {
                        let Some(n) = g.node(user) else { continue };
                        if let Op::Copy { to } = n.op {
                            let c = stand_in(nodes.len());
                            nodes.push((Op::Copy { to }, vec![here], n.ty.clone()));
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
        Ok(EstimateKey {
            op: site.op.clone(),
            ty: site.ty.clone(),
            narrow: site.narrow,
            devs: site.devs.clone(),
            vals,
            nodes,
        })
    }
}

/// The cost model's view of an already lowered graph: its plan
/// ([`price::plan_for`], the runtime's own rules with the devices'
/// capabilities assumed from `topo`), every step of it priced
/// ([`price::plan_steps`]). Nodes in `skip` (for example those that
/// existed before a lowering) are left out, and so are inputs.
pub fn graph_steps(
    g: &Graph,
    topo: &Topology,
    skip: &BTreeSet<NodeId>,
) -> Result<Vec<Step>, PlanError> {
    Ok(price::plan_steps(
        &price::plan_for(g, topo)?,
        topo,
        skip,
        false,
    ))
}

/// The cost model's estimate for a whole lowered graph's steps (no inputs
/// or outputs, no fixed cost per run).
pub fn estimate_graph(g: &Graph, topo: &Topology) -> Result<Estimate, PlanError> {
    let plan = price::plan_for(g, topo)?;
    let steps = price::plan_steps(&plan, topo, &BTreeSet::new(), false);
    Ok(estimate_with(topo, price::plan_runner(&plan, topo), &steps))
}

/// The cost model's estimate of one run of a lowered graph as the executor
/// runs it: the caller's inputs going in, every step, the outputs read
/// back, and the runner's fixed cost per run. The runner is the one the
/// graph's devices get (inline when all are host arenas).
pub fn estimate_run(g: &Graph, topo: &Topology) -> Result<Estimate, PlanError> {
    let plan = price::plan_for(g, topo)?;
    let steps = price::plan_steps(&plan, topo, &BTreeSet::new(), true);
    Ok(run_estimate(topo, runner_of(&steps), &steps))
}

/// [`estimate_run`] on a given runner: an executable compiled for more
/// devices than its graph uses runs threaded even when the graph is all
/// host.
pub fn estimate_run_on(g: &Graph, topo: &Topology, runner: Runner) -> Result<Estimate, PlanError> {
    estimate_run_on_with(g, topo, runner, &Default::default())
}

/// [`estimate_run_on`] for a run compiled with the executor `options`.
pub fn estimate_run_on_with(
    g: &Graph,
    topo: &Topology,
    runner: Runner,
    options: &fuel_graph_ext::plan::Options,
) -> Result<Estimate, PlanError> {
    let plan = price::plan_for_with(g, topo, options)?;
    Ok(run_estimate(
        topo,
        runner,
        &price::plan_steps(&plan, topo, &BTreeSet::new(), true),
    ))
}

fn run_estimate(topo: &Topology, runner: Runner, steps: &[Step]) -> Estimate {
    let mut e = estimate_with(topo, runner, steps);
    e.run_us = topo.runner(runner).run_us;
    e
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// A host kernel's result copied to vulkan:0 moves no bytes, read there
    /// (the plan imports it) or only returned (it shares the host buffer);
    /// a copy of a caller's input
    /// (unless the device reads callers' bytes in place) and a copy under a
    /// page do, as the executor runs them.
    #[test]
    fn imported_hops_move_no_bytes() {
        let src = "graph @g {
  %0 = input \"a\" @cpu:0 : f32[4096]
  %1 = add %0, %0 @cpu:0 : f32[4096]
  %2 = copy %1 -> vulkan:0 : f32[4096]
  %3 = copy %0 -> vulkan:0 : f32[4096]
  %4 = add %2, %3 @vulkan:0 : f32[4096]
  %5 = copy %1 -> vulkan:0 : f32[4096]
  %6 = input \"s\" @cpu:0 : f32[16]
  %7 = add %6, %6 @cpu:0 : f32[16]
  %8 = copy %7 -> vulkan:0 : f32[16]
  %9 = add %8, %8 @vulkan:0 : f32[16]
  return %4, %5, %9
}
";
        let g = fuel_graph_ext::text::parse(src).unwrap();
        let count = |t: &Topology, f: fn(&fuel_graph_ext::plan::Work) -> bool| {
            let plan = price::plan_for(&g, t).unwrap();
            plan.steps.iter().filter(|s| f(&s.work)).count()
        };
        let imports = |t: &Topology| {
            count(t, |w| {
                matches!(w, fuel_graph_ext::plan::Work::Import { .. })
            })
        };
        // %2 imported, %5 (read by nobody but the caller) shares; %3 (an
        // input) and %8 (16 floats) do neither.
        assert_eq!(imports(&Topology::default()), 1);
        let shares = count(&Topology::default(), |w| {
            matches!(w, fuel_graph_ext::plan::Work::Share { .. })
        });
        assert_eq!(shares, 1);
        let est = estimate_graph(&g, &Topology::default()).unwrap();
        assert_eq!(est.bytes_moved, 4096 * 4 + 16 * 4);
        // Where Vulkan reads callers' bytes in place (lavapipe), the copy
        // of the caller's input %3 (16 KiB) is imported too.
        let mut lavapipe = Topology::default();
        lavapipe
            .host_memory
            .insert(fuel_graph_ext::DeviceKind::Vulkan);
        assert_eq!(imports(&lavapipe), 2);
        assert_eq!(estimate_graph(&g, &lavapipe).unwrap().bytes_moved, 16 * 4);
    }

    /// With Vulkan in host memory (lavapipe's calibrated topology), a large
    /// input on a Vulkan device is read in place: the run's estimate loses
    /// its upload, and a small input keeps it. Without host memory every
    /// Vulkan input is an upload.
    #[test]
    fn large_vulkan_inputs_in_host_memory_cost_no_upload() {
        let src = |n: usize| {
            format!(
                "graph @g {{\n  %0 = input \"a\" @vulkan:0 : f32[{n}]\n  %1 = add %0, %0 @vulkan:0 : f32[{n}]\n  return %1\n}}\n"
            )
        };
        let mut lavapipe = Topology::default();
        lavapipe
            .host_memory
            .insert(fuel_graph_ext::DeviceKind::Vulkan);
        let v = Device::vulkan(0);
        let big = 1 << 20;
        assert!(price::input_in_place(&lavapipe, v, big));
        assert!(price::input_in_place(&lavapipe, v, 4096));
        assert!(!price::input_in_place(&lavapipe, v, 4095));
        assert!(!price::input_in_place(&Topology::default(), v, big));
        assert!(!price::input_in_place(&lavapipe, Device::cpu(0), big));
        let run = |t: &Topology, n: usize| {
            let g = fuel_graph_ext::text::parse(&src(n)).unwrap();
            (estimate_run(&g, t).unwrap(), estimate_graph(&g, t).unwrap())
        };
        // The run costs more than the graph's own steps (the output is read
        // back), and less than where the input is uploaded.
        let (in_place, graph) = run(&lavapipe, big / 4);
        let mut uploads = lavapipe.clone();
        uploads.host_memory.clear();
        let (uploaded, _) = run(&uploads, big / 4);
        assert!(
            in_place.total_us() < uploaded.total_us(),
            "{in_place:?} vs {uploaded:?}"
        );
        assert!(in_place.total_us() >= graph.total_us());
    }

    /// A host output whose value a Vulkan kernel reads through an import,
    /// or which is a slice's view, is copied out by the runner; one its
    /// step writes in place is not, and neither is one whose copy to
    /// Vulkan only the caller reads (that copy shares it).
    #[test]
    fn host_outputs_kept_by_the_arena_are_read_back() {
        let src = "graph @g {
  %0 = input \"a\" @cpu:0 : f32[4096]
  %1 = add %0, %0 @cpu:0 : f32[4096]
  %2 = copy %1 -> vulkan:0 : f32[4096]
  %3 = mul %0, %0 @cpu:0 : f32[4096]
  %4 = slice %3 {axis=0, len=1024, start=0} @cpu:0 : f32[1024]
  %5 = max %0, %0 @cpu:0 : f32[4096]
  %6 = add %2, %2 @vulkan:0 : f32[4096]
  return %1, %2, %4, %5, %6
}
";
        let back = |src: &str| -> Vec<bool> {
            let g = fuel_graph_ext::text::parse(src).unwrap();
            let topo = Topology::default();
            let plan = price::plan_for(&g, &topo).unwrap();
            price::plan_steps(&plan, &topo, &BTreeSet::new(), true)
                .iter()
                .filter_map(|s| match s.kind {
                    crate::cost::StepKind::Output { copied_out, .. } => Some(copied_out),
                    _ => None,
                })
                .collect()
        };
        // %1 (imported by %2) and %4 (a view) are copied out; %5 is not;
        // %2, the import of %1, comes back as %1's clone: no step; %6 is
        // read back from the device.
        assert_eq!(back(src), [true, true, false, false]);
        // Without the kernel, %2 shares %1 and %1 is written in place.
        let unread = src.replace("  %6 = add %2, %2 @vulkan:0 : f32[4096]\n", "");
        let unread = unread.replace(", %6\n", "\n");
        assert_eq!(back(&unread), [false, true, false]);
    }
}
