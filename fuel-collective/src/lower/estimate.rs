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
use super::closed::{self, StarClass};
use super::emit::Emitter;
use super::site::CollectiveSite;
use super::star::Star;
use crate::cost::{estimate_with, runner_of, Estimate, Step, StepKind};
use fuel_graph_ext::exec::schedule::{slice_is_view, CopyMode, CopySite};
use fuel_graph_ext::graph::{NodeId, ValueId};
use fuel_graph_ext::pass::PassError;
use fuel_graph_ext::passes::Transfers;
use fuel_graph_ext::topology::Runner;
use fuel_graph_ext::{DType, Device, DeviceKind, Graph, Op, TensorType, Topology};
use rustc_hash::FxHashMap;
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// The graph a collective's candidates are estimated in, and the stand-ins
/// of its operands there.
#[derive(Clone, Debug)]
pub(super) struct Scratch {
    graph: Graph,
    vals: Vec<ValueId>,
    /// Every operand is a distinct value with no copies yet, so the closed
    /// forms ([`super::closed`]) apply.
    fresh: bool,
    /// Closed-form star estimates, one per class of equivalent points.
    stars: RefCell<FxHashMap<StarClass, Estimate>>,
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
        let fresh = graph.node_count() == vals.len()
            && graph.node_ids().all(|id| {
                graph
                    .node(id)
                    .is_some_and(|n| matches!(n.op, Op::Input { .. }))
            });
        Ok(Scratch {
            graph,
            vals,
            fresh,
            stars: RefCell::default(),
        })
    }

    /// The estimate of `site` lowered with `lowering`: in closed form where
    /// one applies ([`super::closed`]), else by lowering it into a copy of
    /// the scratch graph and estimating the nodes that adds.
    pub fn estimate(
        &self,
        site: &CollectiveSite,
        lowering: &Lowering,
        topo: &Topology,
    ) -> Result<Estimate, PassError> {
        if self.fresh {
            let class = match lowering {
                Lowering::Star(Star { at: Some(at) }) if site.reduce_op().is_some() => {
                    Some(closed::star_class(site, *at, topo))
                }
                _ => None,
            };
            if let Some(e) = class.and_then(|c| self.stars.borrow().get(&c).copied()) {
                return Ok(e);
            }
            if let Some(e) = closed::estimate(site, lowering, topo) {
                if let Some(c) = class {
                    self.stars.borrow_mut().insert(c, e);
                }
                return Ok(e);
            }
        }
        self.estimate_by_graph(site, lowering, topo)
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
        let runner = graph_runner(&scratch, topo);
        Ok(estimate_with(
            topo,
            runner,
            &graph_steps(&scratch, topo, &before),
        ))
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

impl EstimateKey {
    /// The key of `site` estimated in `scratch`.
    pub fn new(site: &CollectiveSite, scratch: &Scratch) -> EstimateKey {
        let sg = &scratch.graph;
        EstimateKey {
            op: site.op.clone(),
            ty: site.ty.clone(),
            narrow: site.narrow,
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
/// Each copy carries the mode the executor gives it ([`CopySite::mode`]:
/// shared, deferred into its fold, or a real copy), read off `g` (its
/// outputs and each copy's readers). Nodes in `skip` (for example those
/// that existed before a lowering) are left out, and so are inputs.
pub fn graph_steps(g: &Graph, topo: &Topology, skip: &BTreeSet<NodeId>) -> Vec<Step> {
    steps_of(g, topo, skip, false)
}

/// [`graph_steps`], with an [`StepKind::Input`] step per input and an
/// [`StepKind::Output`] step per output when `io`.
fn steps_of(g: &Graph, topo: &Topology, skip: &BTreeSet<NodeId>, io: bool) -> Vec<Step> {
    let mut index: BTreeMap<NodeId, usize> = BTreeMap::new();
    let mut steps = Vec::new();
    let options = fuel_graph_ext::exec::Options::default();
    let outputs: BTreeSet<ValueId> = g.outputs().iter().copied().collect();
    for id in g.topo_order() {
        if skip.contains(&id) {
            continue;
        }
        let Some(n) = g.node(id) else { continue };
        let bytes = n.ty.size_bytes();
        let kind = match &n.op {
            Op::Input { device, .. } if io => StepKind::Input {
                device: *device,
                bytes,
                in_place: input_in_place(topo, *device, bytes),
            },
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
                let v = ValueId {
                    node: id,
                    result: 0,
                };
                let readers = g.users(v);
                let one_fold_reader = match readers.as_slice() {
                    [(r, _)] => g.node(*r).is_some_and(
                        |r| matches!(r.op, Op::Elementwise { device, .. } if device == *to),
                    ),
                    _ => false,
                };
                let site = CopySite {
                    src: from,
                    dst: *to,
                    is_output: outputs.contains(&v),
                    one_fold_reader,
                };
                // An import is a view made on the dispatcher's thread: a
                // shared hop, whatever the copy's mode would have been.
                let imported = imported_hop(g, id, topo);
                StepKind::Transfer {
                    from,
                    to: *to,
                    bytes: if imported { 0 } else { bytes },
                    mode: if imported {
                        CopyMode::Shared
                    } else {
                        site.mode(&options)
                    },
                }
            }
            // A slice of one run runs as a view of its operand, as a
            // shared copy does: the runner's bookkeeping, no bytes.
            Op::Slice { device, .. } if viewed_slice(g, n) => StepKind::Transfer {
                from: *device,
                to: *device,
                bytes: 0,
                mode: CopyMode::Shared,
            },
            Op::Slice { device, .. } | Op::Concat { device, .. } => {
                StepKind::layout(*device, bytes)
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
    if io {
        for v in g.outputs() {
            let (Some(device), Some(ty)) = (g.value_device(*v), g.value_type(*v)) else {
                continue;
            };
            let deps = index.get(&v.node).copied().into_iter().collect();
            let bytes = ty.size_bytes();
            // A host output is written straight into the caller's tensor,
            // unless its buffer must stay the arena's (a view of it is
            // imported to Vulkan) or is another buffer's (a slice's view):
            // then the runner copies it out.
            let kind = StepKind::Output {
                device,
                bytes,
                copied_out: device.is_cpu() && read_back_on_host(g, *v, topo),
            };
            steps.push(Step { kind, deps });
        }
    }
    steps
}

/// Whether the runner copies host output `v` out into the caller's tensor
/// rather than having its step write there: a value imported into a Vulkan
/// device (`exec::views::lent_to_imports`: its buffer stays the arena's),
/// or a slice that runs as a view of another buffer.
fn read_back_on_host(g: &Graph, v: ValueId, topo: &Topology) -> bool {
    g.node(v.node).is_some_and(|n| viewed_slice(g, n))
        || g.users(v).iter().any(|(r, _)| imported_hop(g, *r, topo))
}

/// Whether node `n` is a `slice` the executor runs as a view of its
/// operand ([`slice_is_view`]).
fn viewed_slice(g: &Graph, n: &fuel_graph_ext::Node) -> bool {
    let Op::Slice {
        axis,
        start,
        len,
        device,
    } = n.op
    else {
        return false;
    };
    n.operands
        .first()
        .and_then(|v| g.value_type(*v))
        .is_some_and(|t| slice_is_view(device, t, axis, start, len))
}

/// Whether the executor reads an input of `bytes` on `device` where the
/// caller's tensor lies instead of uploading it
/// (`exec::schedule::Schedule::inputs_in_place`): a Vulkan device whose
/// memory is the host's (`host-memory vulkan` in the topology, which
/// calibration writes for lavapipe) and an input of at least
/// `exec::views::INPUT_IN_PLACE_MIN` bytes. The model assumes host import
/// is on, as it does for [`imported_hop`].
pub fn input_in_place(topo: &Topology, device: Device, bytes: usize) -> bool {
    device.kind == DeviceKind::Vulkan
        && topo.in_host_memory(device.kind)
        && bytes >= fuel_graph_ext::exec::views::INPUT_IN_PLACE_MIN
}

/// Whether the executor runs copy `id` as a view of host memory imported
/// into a Vulkan device (`exec::schedule::Work::Import`, on by default where
/// the driver has `VK_EXT_external_memory_host`): a host-to-Vulkan copy of
/// at least a page whose source the host computed (not a slice that is a
/// view), or of a caller's host input where the device reads callers'
/// bytes in place ([`input_in_place`]: host-memory Vulkan, 16 KiB and up).
/// Such a hop moves no bytes, so the model charges it the dispatcher's
/// bookkeeping only. The same rule as the executor's plan
/// (`Schedule::import_host_copies`, `Schedule::import_caller_copies`),
/// read off the graph alone.
pub fn imported_hop(g: &Graph, id: NodeId, topo: &Topology) -> bool {
    let Some(n) = g.node(id) else { return false };
    let (Op::Copy { to } | Op::Move { to }) = n.op else {
        return false;
    };
    let Some(src) = n.operands.first() else {
        return false;
    };
    let from_host = g.value_device(*src).is_some_and(|d| d.is_cpu());
    // Through host-to-host copies (the executor shares their buffers).
    let mut origin = src.node;
    while let Some(o) = g.node(origin) {
        let next = match o.op {
            Op::Copy { to } | Op::Move { to } if to.is_cpu() => o.operands.first(),
            _ => None,
        };
        match next {
            Some(v) if g.value_device(*v).is_some_and(|d| d.is_cpu()) => origin = v.node,
            _ => break,
        }
    }
    // A buffer the arena made: not a caller's input, and not a slice that
    // runs as a view of another buffer. (A graph output qualifies: the
    // runner keeps it in the arena's block and copies it out at the end.)
    let computed = g
        .node(origin)
        .is_some_and(|s| !matches!(s.op, Op::Input { .. }) && !viewed_slice(g, s));
    let caller = g
        .node(origin)
        .is_some_and(|s| matches!(s.op, Op::Input { device, .. } if device.is_cpu()));
    let bytes = n.ty.size_bytes();
    to.kind == DeviceKind::Vulkan
        && from_host
        && ((computed && bytes >= fuel_graph_ext::backend::cpu::HOST_PAGE)
            || (caller && input_in_place(topo, to, bytes)))
}

/// The cost model's estimate for a whole lowered graph's steps (no inputs
/// or outputs, no fixed cost per run).
pub fn estimate_graph(g: &Graph, topo: &Topology) -> Estimate {
    estimate_with(
        topo,
        graph_runner(g, topo),
        &graph_steps(g, topo, &BTreeSet::new()),
    )
}

/// The runner the executor takes for `g` ([`runner_of`] over every step,
/// inputs included: an input uploaded to a GPU keeps its worker busy even
/// where the estimate leaves inputs out).
pub fn graph_runner(g: &Graph, topo: &Topology) -> Runner {
    runner_of(&steps_of(g, topo, &BTreeSet::new(), true))
}

/// The cost model's estimate of one run of a lowered graph as the executor
/// runs it: the caller's inputs going in, every step, the outputs read
/// back, and the runner's fixed cost per run. The runner is the one the
/// graph's devices get (inline when all are host arenas).
pub fn estimate_run(g: &Graph, topo: &Topology) -> Estimate {
    let steps = steps_of(g, topo, &BTreeSet::new(), true);
    run_estimate(topo, runner_of(&steps), &steps)
}

/// [`estimate_run`] on a given runner: an executable compiled for more
/// devices than its graph uses runs threaded even when the graph is all
/// host.
pub fn estimate_run_on(g: &Graph, topo: &Topology, runner: Runner) -> Estimate {
    run_estimate(topo, runner, &steps_of(g, topo, &BTreeSet::new(), true))
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
    /// or returned (a shared hop); a copy of a caller's input (unless the
    /// device reads callers' bytes in place) and a copy under a page do,
    /// as the executor runs them.
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
        let ids: Vec<NodeId> = g.topo_order();
        let copy = |k: usize| {
            ids.iter()
                .copied()
                .filter(|id| matches!(g.node(*id).map(|n| &n.op), Some(Op::Copy { .. })))
                .nth(k)
                .unwrap()
        };
        let imported: Vec<bool> = (0..4)
            .map(|k| imported_hop(&g, copy(k), &Topology::default()))
            .collect();
        // %2 and %5 imported; %3 (an input) and %8 (16 floats) not: their
        // order in topo order may differ, so count, and check bytes moved.
        assert_eq!(imported.iter().filter(|b| **b).count(), 2, "{imported:?}");
        let est = estimate_graph(&g, &Topology::default());
        assert_eq!(est.bytes_moved, 4096 * 4 + 16 * 4);
        // Where Vulkan reads callers' bytes in place (lavapipe), the copy
        // of the caller's input %3 (16 KiB) is imported too.
        let mut lavapipe = Topology::default();
        lavapipe.host_memory.insert(DeviceKind::Vulkan);
        let imported = (0..4)
            .filter(|k| imported_hop(&g, copy(*k), &lavapipe))
            .count();
        assert_eq!(imported, 3);
        assert_eq!(estimate_graph(&g, &lavapipe).bytes_moved, 16 * 4);
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
        lavapipe.host_memory.insert(DeviceKind::Vulkan);
        let v = Device::vulkan(0);
        let big = 1 << 20;
        assert!(input_in_place(&lavapipe, v, big));
        assert!(input_in_place(&lavapipe, v, 4096));
        assert!(!input_in_place(&lavapipe, v, 4095));
        assert!(!input_in_place(&Topology::default(), v, big));
        assert!(!input_in_place(&lavapipe, Device::cpu(0), big));
        let run = |t: &Topology, n: usize| {
            let g = fuel_graph_ext::text::parse(&src(n)).unwrap();
            (estimate_run(&g, t), estimate_graph(&g, t))
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

    /// A host output whose value is also imported to Vulkan, or which is a
    /// slice's view, is copied out by the runner; one its step writes in
    /// place is not.
    #[test]
    fn host_outputs_kept_by_the_arena_are_read_back() {
        let src = "graph @g {
  %0 = input \"a\" @cpu:0 : f32[4096]
  %1 = add %0, %0 @cpu:0 : f32[4096]
  %2 = copy %1 -> vulkan:0 : f32[4096]
  %3 = mul %0, %0 @cpu:0 : f32[4096]
  %4 = slice %3 {axis=0, len=1024, start=0} @cpu:0 : f32[1024]
  %5 = max %0, %0 @cpu:0 : f32[4096]
  return %1, %2, %4, %5
}
";
        let g = fuel_graph_ext::text::parse(src).unwrap();
        let outs = g.outputs().to_vec();
        let back: Vec<bool> = outs
            .iter()
            .map(|v| read_back_on_host(&g, *v, &Topology::default()))
            .collect();
        // %1 (imported by %2) and %4 (a view) are copied out; %5 is not.
        assert_eq!(back, [true, false, true, false]);
    }
}
