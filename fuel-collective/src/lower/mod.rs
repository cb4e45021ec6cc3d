//! `lower-collectives`: turn every collective node into copies and local ops.
//!
//! **Matches** every `all_reduce`, `reduce`, `broadcast`, `all_gather` and
//! `reduce_scatter` node, in topological order.
//!
//! **Produces** `copy` chains, n-ary element-wise ops (one op with all the
//! inputs that meet at a device, never a chain of binary ops, except in the
//! ring where each step adds exactly two), `div {by=N}` for `Mean`, and
//! `slice`/`concat` where data is cut or joined. Every use of a collective's
//! result is pointed at the new value on the same device and the collective
//! node is removed, so the returned values keep their order. Every hop with
//! no direct path (cross-vendor, Vulkan to Vulkan, CUDA without peer access)
//! becomes two copies through the topology's staging CPU, and each value
//! crosses a given link at most once: all copies go through one
//! [`Transfers`] cache for the whole run, which also reuses copies already
//! in the graph. The output verifies at placement level with no further
//! pass.
//!
//! **Leaves alone** every other node, user copies included.
//!
//! **Algorithms** (`algorithm=`):
//!
//! - `star`: every shard goes to one point, one n-ary op combines them there,
//!   and the result is copied to where it is needed. The point is
//!   `reduce_at`, or the cheapest of the group's devices and the staging CPU.
//! - `hierarchical`: each island (see [`shape`]) combines its shards
//!   on one member first, so an island sends one value over its staged link;
//!   the islands' partials are combined at a hub (`reduce_at`, else a
//!   rooted op's root, else the only island's first device, else the group's
//!   first CPU, else the staging CPU); the result goes back to one member of
//!   each island, which passes it on inside the island.
//! - `ring`: the shards are cut into one chunk per rank along their longest
//!   axis (uneven chunks allowed). Chunk `c` travels once around the ring,
//!   each rank adding its own piece to the partial it received (one copy and
//!   one two-operand op per step, n-1 steps), which leaves the reduced chunk
//!   on one rank; then the reduced chunk travels around again so that every
//!   rank has a copy, and each rank concatenates the chunks. The ring visits
//!   ranks sorted by vendor so that neighbours are mostly direct.
//! - `tree`: ranks form an `arity`-ary tree (root first, then the rest sorted
//!   by vendor); each node combines its own shard with its children's
//!   partials in one op, and the result comes back down the same tree.
//! - `auto` (default): lowers with every candidate on a scratch copy,
//!   estimates each with [`crate::cost`], and keeps the cheapest.
//!
//! Per kind: `reduce` is the all-reduce without the way back (ring:
//! reduce-scatter, then each chunk to the root). `broadcast` and
//! `all_gather` have nothing to combine, so the algorithm only shapes how
//! copies spread: star sends straight to every target, hierarchical via one
//! member per island, tree down a tree, and ring as a chain (for
//! `all_gather`, each shard travels its own chain and every rank
//! concatenates). `reduce_scatter` reduces as the algorithm says, slices at
//! the reduction point and sends each rank its slice; its ring form is the
//! first half of the ring all-reduce, cut along the op's own axis. Where the
//! ring cannot cut (one rank, a scalar, or no axis with an entry per rank)
//! it falls back to the tree, and the note says so. A group of one rank
//! needs no exchange: results are the shard itself.
//!
//! Every choice is written as a graph note and logged with `tracing`, with
//! the estimate of each candidate. Lowering is deterministic: same input,
//! byte-identical output.

pub mod shape;

use crate::cost::{estimate, Estimate, Step, StepKind};
use fuel_graph_ext::graph::{NodeId, ValueId};
use fuel_graph_ext::pass::{Changed, Pass, PassError, PassOptions};
use fuel_graph_ext::passes::Transfers;
use fuel_graph_ext::topology::Route;
use fuel_graph_ext::{Device, ElementwiseOp, Graph, Op, ReduceOp, TensorType, Topology};
use rustc_hash::FxHashMap;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

/// The pass name.
pub const NAME: &str = "lower-collectives";

/// The options `lower-collectives` accepts.
pub const OPTIONS: &[(&str, &str)] = &[
    (
        "algorithm",
        "auto (default, cheapest by the cost model), star, hierarchical, ring, tree or driver",
    ),
    (
        "arity",
        "children per node of the tree algorithm, 2 or more (default 2)",
    ),
    (
        "reduce_at",
        "the device where star and hierarchical combine, e.g. cpu:0",
    ),
];

/// Which lowering to use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Algorithm {
    /// Cheapest by the cost model.
    Auto,
    /// Everything to one point.
    Star,
    /// Islands first, then a hub.
    Hierarchical,
    /// Chunks around a ring.
    Ring,
    /// A k-ary tree.
    Tree,
    /// A collective driver inside each island that has one, then a hub.
    Driver,
}

impl Algorithm {
    /// The option spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Algorithm::Auto => "auto",
            Algorithm::Star => "star",
            Algorithm::Hierarchical => "hierarchical",
            Algorithm::Ring => "ring",
            Algorithm::Tree => "tree",
            Algorithm::Driver => "driver",
        }
    }
}

impl FromStr for Algorithm {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        [
            Algorithm::Auto,
            Algorithm::Star,
            Algorithm::Hierarchical,
            Algorithm::Ring,
            Algorithm::Tree,
            Algorithm::Driver,
        ]
        .into_iter()
        .find(|a| a.as_str() == s)
        .ok_or_else(|| "expected auto, star, hierarchical, ring, tree or driver".to_string())
    }
}

/// What the pass was asked to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LowerOptions {
    /// The algorithm (`auto` compares them all).
    pub algorithm: Algorithm,
    /// Where star and hierarchical combine.
    pub reduce_at: Option<Device>,
    /// Children per tree node.
    pub arity: usize,
}

impl Default for LowerOptions {
    fn default() -> Self {
        LowerOptions {
            algorithm: Algorithm::Auto,
            reduce_at: None,
            arity: 2,
        }
    }
}

impl LowerOptions {
    /// Reads `algorithm`, `reduce_at` and `arity` from pipeline options.
    pub fn from_pass_options(o: &PassOptions) -> Result<LowerOptions, PassError> {
        let mut opts = LowerOptions::default();
        if let Some(a) = o.parse::<Algorithm>("algorithm")? {
            opts.algorithm = a;
        }
        opts.reduce_at = o.parse::<Device>("reduce_at")?;
        if let Some(k) = o.parse::<usize>("arity")? {
            if k < 2 {
                return Err(PassError::BadOption {
                    pass: o.pass.clone(),
                    option: "arity".into(),
                    message: format!("cannot use `{k}`: a tree needs 2 or more children per node"),
                });
            }
            opts.arity = k;
        }
        Ok(opts)
    }
}

/// The pass object.
pub struct LowerCollectives {
    opts: LowerOptions,
    topo: Arc<Topology>,
}

impl LowerCollectives {
    /// With the given options and topology.
    pub fn new(opts: LowerOptions, topo: Arc<Topology>) -> LowerCollectives {
        LowerCollectives { opts, topo }
    }
}

impl Pass for LowerCollectives {
    fn name(&self) -> &'static str {
        NAME
    }

    fn run(&mut self, g: &mut Graph) -> Result<Changed, PassError> {
        let fail = |message: String| PassError::Failed {
            pass: NAME.into(),
            message,
        };
        let mut tx = Transfers::new(g);
        let mut cache = EstimateCache::default();
        let targets: Vec<NodeId> = g
            .topo_order()
            .into_iter()
            .filter(|id| g.node(*id).is_some_and(|n| n.op.is_collective()))
            .collect();
        for id in &targets {
            let spec = Spec::read(g, *id).map_err(fail)?;
            let (choice, note) = choose(g, &spec, &self.opts, &self.topo, &mut cache);
            tracing::info!(target: "lower-collectives", "{note}");
            let results = {
                let mut em = Emitter {
                    g: &mut *g,
                    tx: &mut tx,
                    topo: &self.topo,
                    fallback: spec.first,
                };
                em.lower(&spec, choice)
            };
            if results.len() != spec.num_results {
                return Err(fail(format!(
                    "lowering {} gave {} results for {}",
                    spec.op.mnemonic(),
                    results.len(),
                    spec.num_results
                )));
            }
            for (i, r) in results.into_iter().enumerate() {
                g.replace_all_uses(
                    ValueId {
                        node: *id,
                        result: i as u32,
                    },
                    r,
                );
            }
            g.remove_node(*id);
            g.add_note(note);
        }
        Ok(Changed::from_bool(!targets.is_empty()))
    }
}

/// One collective, read off the graph.
#[derive(Clone, Debug)]
struct Spec {
    op: Op,
    /// Operand 0 (every collective has one).
    first: ValueId,
    vals: Vec<ValueId>,
    devs: Vec<Device>,
    /// The shard type.
    ty: TensorType,
    num_results: usize,
}

impl Spec {
    fn read(g: &Graph, id: NodeId) -> Result<Spec, String> {
        let n = g.node(id).ok_or("a collective vanished")?;
        let vals: Vec<ValueId> = n.operands.to_vec();
        let devs = vals
            .iter()
            .enumerate()
            .map(|(i, v)| {
                g.value_device(*v)
                    .ok_or_else(|| format!("operand {i} of `{}` has no device", n.op.mnemonic()))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let first = *vals
            .first()
            .ok_or_else(|| format!("`{}` has no operands", n.op.mnemonic()))?;
        let ty = g
            .value_type(first)
            .cloned()
            .ok_or_else(|| format!("operand 0 of `{}` is undefined", n.op.mnemonic()))?;
        Ok(Spec {
            op: n.op.clone(),
            first,
            vals,
            devs,
            ty,
            num_results: n.num_results(),
        })
    }

    /// The devices results go to, in result order.
    fn targets(&self) -> Vec<Device> {
        match &self.op {
            Op::Broadcast { to } => to.to_vec(),
            _ => self.devs.clone(),
        }
    }

    fn ranks(&self) -> usize {
        self.vals.len()
    }

    /// The reduce op of a collective that combines shards.
    fn reduce_op(&self) -> Option<ReduceOp> {
        match self.op {
            Op::AllReduce { op } | Op::Reduce { op, .. } | Op::ReduceScatter { op, .. } => Some(op),
            _ => None,
        }
    }

    fn root(&self) -> Option<usize> {
        match self.op {
            Op::Reduce { root, .. } => Some(root),
            _ => None,
        }
    }
}

/// A fully decided lowering.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Choice {
    /// One rank: the results are the shard.
    Trivial,
    Star(Device),
    /// Star for ops with nothing to combine: straight from the source.
    Direct,
    Hierarchical(Device),
    /// Hierarchical for ops with nothing to combine: via one member per island.
    Islands,
    Ring,
    Tree {
        root: usize,
        arity: usize,
    },
    /// `driver_all_reduce` inside each island with a driver, then the
    /// islands' partials combined at this hub.
    Driver(Device),
}

impl fmt::Display for Choice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Choice::Trivial => f.write_str("identity"),
            Choice::Star(d) => write!(f, "star@{d}"),
            Choice::Direct => f.write_str("star"),
            Choice::Hierarchical(d) => write!(f, "hierarchical@{d}"),
            Choice::Islands => f.write_str("hierarchical"),
            Choice::Ring => f.write_str("ring"),
            Choice::Tree { arity, .. } => write!(f, "tree{{arity={arity}}}"),
            Choice::Driver(d) => write!(f, "driver@{d}"),
        }
    }
}

impl Choice {
    fn algorithm(self) -> Algorithm {
        match self {
            Choice::Trivial => Algorithm::Auto,
            Choice::Star(_) | Choice::Direct => Algorithm::Star,
            Choice::Hierarchical(_) | Choice::Islands => Algorithm::Hierarchical,
            Choice::Ring => Algorithm::Ring,
            Choice::Tree { .. } => Algorithm::Tree,
            Choice::Driver(_) => Algorithm::Driver,
        }
    }
}

/// Why the ring cannot lower `spec`, if it cannot.
fn ring_unfit(spec: &Spec) -> Option<String> {
    let n = spec.ranks();
    match &spec.op {
        Op::Broadcast { .. } | Op::AllGather { .. } => None,
        Op::ReduceScatter { axis, .. } => {
            let extent = spec.ty.shape.get(*axis).copied().unwrap_or(0);
            shape::chunks(extent, n)
                .is_none()
                .then(|| format!("axis {axis} has {extent} entries for {n} ranks"))
        }
        _ => shape::ring_axis(&spec.ty.shape, n)
            .is_none()
            .then(|| format!("no axis of {} has an entry per rank", spec.ty)),
    }
}

/// Every candidate lowering of `spec`, in a fixed order, with the reason a
/// family has none.
fn candidates(spec: &Spec, opts: &LowerOptions, topo: &Topology) -> Vec<Result<Choice, String>> {
    let combines = spec.reduce_op().is_some();
    let mut out = Vec::new();
    // Star.
    if combines {
        let points = match opts.reduce_at {
            Some(d) => vec![d],
            None => {
                let mut p = shape::unique(&spec.devs);
                if !p.contains(&topo.staging) {
                    p.push(topo.staging);
                }
                p
            }
        };
        out.extend(points.into_iter().map(|d| Ok(Choice::Star(d))));
    } else {
        out.push(Ok(Choice::Direct));
    }
    // Hierarchical.
    out.push(Ok(if combines {
        Choice::Hierarchical(hub(spec, opts, topo))
    } else {
        Choice::Islands
    }));
    // Ring.
    out.push(match ring_unfit(spec) {
        None => Ok(Choice::Ring),
        Some(why) => Err(format!("ring n/a ({why})")),
    });
    // Tree.
    let root = spec.root().unwrap_or_else(|| {
        opts.reduce_at
            .and_then(|d| spec.devs.iter().position(|x| *x == d))
            .unwrap_or(0)
    });
    out.push(Ok(Choice::Tree {
        root,
        arity: opts.arity,
    }));
    // A collective driver, where an island of two or more devices has one.
    if matches!(spec.op, Op::AllReduce { .. }) && !driver_islands(&spec.devs, topo).is_empty() {
        out.push(Ok(Choice::Driver(hub(spec, opts, topo))));
    }
    out
}

/// The groups a collective driver can serve: the distinct devices of `devs`
/// of one kind whose driver the topology declares (the host driver for CPUs,
/// NCCL for CUDA; Vulkan has none), where there are two or more of them. A
/// driver reaches every device of its kind, peer links or not, so these are
/// per kind, not the direct-copy islands of [`shape::islands`].
fn driver_islands(devs: &[Device], topo: &Topology) -> Vec<Vec<Device>> {
    let mut by_kind: BTreeMap<fuel_graph_ext::DeviceKind, Vec<Device>> = BTreeMap::new();
    for d in shape::unique(devs) {
        if d.kind != fuel_graph_ext::DeviceKind::Vulkan && topo.drivers.contains(&d.kind) {
            by_kind.entry(d.kind).or_default().push(d);
        }
    }
    by_kind.into_values().filter(|g| g.len() >= 2).collect()
}

/// Where hierarchical combines the islands' partials.
fn hub(spec: &Spec, opts: &LowerOptions, topo: &Topology) -> Device {
    if let Some(d) = opts.reduce_at {
        return d;
    }
    if let Some(d) = spec.root().and_then(|r| spec.devs.get(r)) {
        return *d;
    }
    let islands = shape::islands(&spec.devs, topo);
    if let [only] = islands.as_slice() {
        if let Some(d) = only.first() {
            return *d;
        }
    }
    spec.devs
        .iter()
        .copied()
        .find(|d| d.is_cpu())
        .unwrap_or(topo.staging)
}

/// Picks the lowering and writes the note that explains it.
fn choose(
    g: &Graph,
    spec: &Spec,
    opts: &LowerOptions,
    topo: &Topology,
    cache: &mut EstimateCache,
) -> (Choice, String) {
    let list = |ds: &[Device]| {
        ds.iter()
            .map(|d| d.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let head = match &spec.op {
        Op::Broadcast { to } => format!(
            "{NAME}: broadcast of {} ({} B) from {} to [{}]",
            spec.ty,
            spec.ty.size_bytes(),
            list(&spec.devs),
            list(to)
        ),
        op => format!(
            "{NAME}: {} of {} ({} B per shard) over [{}]",
            op.mnemonic(),
            spec.ty,
            spec.ty.size_bytes(),
            list(&spec.devs)
        ),
    };
    if spec.ranks() == 1 && !matches!(spec.op, Op::Broadcast { .. }) {
        return (
            Choice::Trivial,
            format!("{head}: one rank, nothing to exchange"),
        );
    }
    let scratch = scratch_for(g, spec);
    let key = EstimateKey::new(spec, scratch.as_ref());
    let (scored, parts) = cache.entry(key).or_insert_with(|| {
        let mut scored: Vec<(Choice, Estimate)> = Vec::new();
        let mut parts: Vec<String> = Vec::new();
        for c in candidates(spec, opts, topo) {
            match c {
                Ok(choice) => {
                    let est = estimate_choice(scratch.as_ref(), spec, choice, topo);
                    parts.push(format!(
                        "{choice} {:.2}us ({} hops)",
                        est.total_us(),
                        est.transfers
                    ));
                    scored.push((choice, est));
                }
                Err(why) => parts.push(why),
            }
        }
        (scored, parts.join(", "))
    });
    let cheapest = |family: Option<Algorithm>| {
        scored
            .iter()
            .filter(|(c, _)| family.is_none_or(|f| c.algorithm() == f))
            .fold(None::<&(Choice, Estimate)>, |best, cur| match best {
                Some(b) if b.1.total_us() <= cur.1.total_us() => Some(b),
                _ => Some(cur),
            })
            .map(|(c, _)| *c)
    };
    let (choice, why) = match opts.algorithm {
        Algorithm::Auto => (cheapest(None), "auto: cheapest estimate".to_string()),
        Algorithm::Ring if ring_unfit(spec).is_some() => (
            cheapest(Some(Algorithm::Tree)),
            "algorithm=ring cannot cut this tensor, fell back to tree".to_string(),
        ),
        Algorithm::Driver if cheapest(Some(Algorithm::Driver)).is_none() => (
            cheapest(Some(Algorithm::Hierarchical)),
            "algorithm=driver needs an all_reduce over an island of two or more devices with a driver (`driver cpu` or `driver cuda` in the topology), fell back to hierarchical".to_string(),
        ),
        forced => (
            cheapest(Some(forced)),
            format!("algorithm={}", forced.as_str()),
        ),
    };
    // A candidate of every family always exists except the ring, which has
    // the tree as its fallback; the default only guards against surprises.
    let choice = choice.unwrap_or(Choice::Tree {
        root: 0,
        arity: opts.arity,
    });
    (
        choice,
        format!("{head}: chose {choice} ({why}); estimates: {parts}"),
    )
}

/// The scratch graph `auto` estimates `spec`'s candidates in: it holds only
/// the collective's operands and the copies of them that `g` already has (so
/// a shard staged for an earlier collective is credited, as in the real
/// lowering). Returns the graph and the operands' stand-ins, or `None` where
/// an operand has no stand-in (every estimate is then the default). Working
/// on a small graph keeps `auto` linear in the number of collectives:
/// copying the whole graph per candidate made it quadratic.
fn scratch_for(g: &Graph, spec: &Spec) -> Option<(Graph, Vec<ValueId>)> {
    let mut scratch = Graph::new("estimate");
    // Original value -> its stand-in in the scratch graph.
    let mut map: BTreeMap<ValueId, ValueId> = BTreeMap::new();
    let mut vals: Vec<ValueId> = Vec::with_capacity(spec.vals.len());
    for (i, (v, d)) in spec.vals.iter().zip(&spec.devs).enumerate() {
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
            let device = g.value_device(root).unwrap_or(*d);
            let input = Op::Input {
                name: format!("s{i}"),
                device,
            };
            let here = scratch.add_value(input, &[], spec.ty.clone());
            map.insert(root, here);
            // ...then copy every chain hanging off it, breadth first.
            let mut queue = vec![(root, here)];
            while let Some((orig, here)) = queue.pop() {
                for (user, _) in g.users(orig) {
                    let Some(n) = g.node(user) else { continue };
                    if let Op::Copy { to } = n.op {
                        let c = scratch.add_value(Op::Copy { to }, &[here], n.ty.clone());
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
        vals.push(*map.get(v)?);
    }
    Some((scratch, vals))
}

/// Everything an estimate of `spec`'s candidates depends on besides the
/// pass options and the topology (fixed for a run): the collective and the
/// whole scratch graph it is lowered into. Equal keys give equal estimates,
/// so a chain of identical collectives is estimated once.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct EstimateKey {
    op: Op,
    ty: TensorType,
    devs: Vec<Device>,
    vals: Option<Vec<ValueId>>,
    nodes: Vec<(Op, Vec<ValueId>, TensorType)>,
}

impl EstimateKey {
    fn new(spec: &Spec, scratch: Option<&(Graph, Vec<ValueId>)>) -> EstimateKey {
        let nodes = scratch
            .map(|(sg, _)| {
                sg.node_ids()
                    .filter_map(|id| sg.node(id))
                    .map(|n| (n.op.clone(), n.operands.to_vec(), n.ty.clone()))
                    .collect()
            })
            .unwrap_or_default();
        EstimateKey {
            op: spec.op.clone(),
            ty: spec.ty.clone(),
            devs: spec.devs.clone(),
            vals: scratch.map(|(_, v)| v.clone()),
            nodes,
        }
    }
}

/// The scored candidates and the estimates part of the note, per
/// [`EstimateKey`], for one run of the pass.
type EstimateCache = FxHashMap<EstimateKey, (Vec<(Choice, Estimate)>, String)>;

/// Lowers `spec` with `choice` into a copy of its scratch graph (see
/// [`scratch_for`]) and estimates the new nodes.
fn estimate_choice(
    scratch: Option<&(Graph, Vec<ValueId>)>,
    spec: &Spec,
    choice: Choice,
    topo: &Topology,
) -> Estimate {
    let Some((scratch, vals)) = scratch else {
        return Estimate::default();
    };
    let Some(&first) = vals.first() else {
        return Estimate::default();
    };
    let mut scratch = scratch.clone();
    let local = Spec {
        first,
        vals: vals.clone(),
        ..spec.clone()
    };
    let before: BTreeSet<NodeId> = scratch.node_ids().collect();
    let mut tx = Transfers::new(&scratch);
    {
        let mut em = Emitter {
            g: &mut scratch,
            tx: &mut tx,
            topo,
            fallback: first,
        };
        em.lower(&local, choice);
    }
    estimate(topo, &graph_steps(&scratch, topo, &before))
}

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
                                && a.kind == fuel_graph_ext::DeviceKind::Cuda
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

/// Graph surgery for one collective.
struct Emitter<'a> {
    g: &'a mut Graph,
    tx: &'a mut Transfers,
    topo: &'a Topology,
    /// The collective's first operand: what an (unreachable) empty list of
    /// values falls back to, instead of a panic.
    fallback: ValueId,
}

impl Emitter<'_> {
    fn dev(&self, v: ValueId) -> Device {
        self.g.value_device(v).unwrap_or(self.topo.staging)
    }

    fn ty(&self, v: ValueId) -> TensorType {
        self.g
            .value_type(v)
            .cloned()
            .unwrap_or_else(|| TensorType::new(fuel_graph_ext::DType::F32, &[]))
    }

    /// `v` on `d`, staged where needed, deduplicated.
    fn to(&mut self, v: ValueId, d: Device) -> ValueId {
        self.tx.to_device(self.g, self.topo, v, d)
    }

    /// All of `vals` moved to `at` and combined by one n-ary op.
    fn combine(&mut self, kind: ElementwiseOp, vals: &[ValueId], at: Device) -> ValueId {
        let local: Vec<ValueId> = vals.iter().map(|v| self.to(*v, at)).collect();
        match local.as_slice() {
            [] => self.to(self.fallback, at),
            [one] => *one,
            many => {
                // `many` has two or more values here.
                let ty = self.ty(many[0]);
                self.g
                    .add_value(Op::Elementwise { kind, device: at }, many, ty)
            }
        }
    }

    /// Applies Mean's division (by the rank count) where the sum ended up.
    fn finish(&mut self, op: ReduceOp, v: ValueId, ranks: usize) -> ValueId {
        if op != ReduceOp::Mean || ranks <= 1 {
            return v;
        }
        let device = self.dev(v);
        let ty = self.ty(v);
        self.g.add_value(
            Op::Div {
                by: ranks as u64,
                device,
            },
            &[v],
            ty,
        )
    }

    fn slice(&mut self, v: ValueId, axis: usize, start: usize, len: usize) -> ValueId {
        let device = self.dev(v);
        let ty = self.ty(v).with_dim(axis, len);
        self.g.add_value(
            Op::Slice {
                axis,
                start,
                len,
                device,
            },
            &[v],
            ty,
        )
    }

    fn concat(&mut self, parts: &[ValueId], axis: usize, at: Device) -> ValueId {
        let local: Vec<ValueId> = parts.iter().map(|v| self.to(*v, at)).collect();
        if let [one] = local.as_slice() {
            return *one;
        }
        let total = local
            .iter()
            .map(|v| self.ty(*v).shape.get(axis).copied().unwrap_or(0))
            .sum();
        let ty = local
            .first()
            .map(|v| self.ty(*v).with_dim(axis, total))
            .unwrap_or_else(|| TensorType::new(fuel_graph_ext::DType::F32, &[]));
        self.g
            .add_value(Op::Concat { axis, device: at }, &local, ty)
    }

    // ---- reducing to one point -------------------------------------------

    /// Islands combine on one member each, then the partials meet at `at`.
    fn reduce_hier(&mut self, kind: ElementwiseOp, vals: &[ValueId], at: Device) -> ValueId {
        let devs: Vec<Device> = vals.iter().map(|v| self.dev(*v)).collect();
        let mut all = devs.clone();
        all.push(at);
        let mut operands = Vec::new();
        for island in shape::islands(&all, self.topo) {
            let members: Vec<ValueId> = vals
                .iter()
                .zip(&devs)
                .filter(|(_, d)| island.contains(d))
                .map(|(v, _)| *v)
                .collect();
            if members.is_empty() {
                continue;
            }
            if island.contains(&at) {
                // The hub's own island feeds the final op directly.
                operands.extend(members);
            } else {
                let leader = devs
                    .iter()
                    .copied()
                    .find(|d| island.contains(d))
                    .unwrap_or(at);
                operands.push(self.combine(kind, &members, leader));
            }
        }
        self.combine(kind, &operands, at)
    }

    /// Combines up an `arity`-ary tree whose root is rank `root`; returns the
    /// total on the root's device.
    fn reduce_tree(
        &mut self,
        kind: ElementwiseOp,
        vals: &[ValueId],
        root: usize,
        arity: usize,
    ) -> ValueId {
        let devs: Vec<Device> = vals.iter().map(|v| self.dev(*v)).collect();
        let order = tree_order(&devs, root);
        let n = order.len();
        let mut children: Vec<Vec<ValueId>> = vec![Vec::new(); n];
        let mut total = vals.first().copied();
        for pos in (0..n).rev() {
            let Some(&rank) = order.get(pos) else {
                continue;
            };
            let (Some(&own), Some(&d)) = (vals.get(rank), devs.get(rank)) else {
                continue;
            };
            let mut inputs = vec![own];
            inputs.extend(children.get(pos).cloned().unwrap_or_default());
            let partial = self.combine(kind, &inputs, d);
            match shape::tree_parent(pos, arity).and_then(|p| children.get_mut(p)) {
                Some(siblings) => siblings.insert(0, partial),
                None => total = Some(partial),
            }
        }
        total.unwrap_or(self.fallback)
    }

    // ---- spreading one value ---------------------------------------------

    /// One more copy of a value that `held` already has on some devices
    /// (its copies, by device): `d` is reached from `from`, through the
    /// staging CPU where the route says so, reusing any copy already held on
    /// `d` or on the staging CPU. So a value never crosses back over a link
    /// to a device that has it.
    fn reach(&mut self, held: &mut BTreeMap<Device, ValueId>, from: ValueId, d: Device) -> ValueId {
        if let Some(v) = held.get(&d) {
            return *v;
        }
        let src = self.dev(from);
        let c = match self.topo.route(src, d) {
            Route::Direct => self.tx.hop(self.g, from, d),
            Route::Staged(cpu) => {
                let mid = match held.get(&cpu) {
                    Some(m) => *m,
                    None => {
                        let m = self.tx.hop(self.g, from, cpu);
                        held.insert(cpu, m);
                        m
                    }
                };
                self.tx.hop(self.g, mid, d)
            }
        };
        held.insert(d, c);
        c
    }

    /// Where `v`'s data already is: `v` itself and, up its chain of copies,
    /// each value it was copied from (a copy holds its source's data). A
    /// value that comes back to a device it was copied from reuses the
    /// original there instead of crossing the link again.
    fn held(&self, v: ValueId) -> BTreeMap<Device, ValueId> {
        let mut held = BTreeMap::new();
        let mut cur = v;
        for _ in 0..self.g.node_count() {
            held.entry(self.dev(cur)).or_insert(cur);
            match self.g.node(cur.node) {
                Some(n) if matches!(n.op, Op::Copy { .. }) => match n.operands.first() {
                    Some(src) => cur = *src,
                    None => break,
                },
                _ => break,
            }
        }
        held
    }

    /// `v` on every device of `targets`, shaped by `alg`; the map holds every
    /// copy made (staging CPUs included).
    fn spread(
        &mut self,
        v: ValueId,
        targets: &[Device],
        alg: Algorithm,
        arity: usize,
    ) -> BTreeMap<Device, ValueId> {
        let src = self.dev(v);
        let mut held = self.held(v);
        let rest: Vec<Device> = shape::unique(targets)
            .into_iter()
            .filter(|d| *d != src)
            .collect();
        match alg {
            Algorithm::Star | Algorithm::Auto => {
                for d in rest {
                    self.reach(&mut held, v, d);
                }
            }
            // A driver choice spreads results the hierarchical way.
            Algorithm::Hierarchical | Algorithm::Driver => {
                let mut all = vec![src];
                all.extend(&rest);
                for island in shape::islands(&all, self.topo) {
                    let first = if island.contains(&src) {
                        v
                    } else {
                        let Some(&leader) = island.first() else {
                            continue;
                        };
                        self.reach(&mut held, v, leader)
                    };
                    for d in island {
                        self.reach(&mut held, first, d);
                    }
                }
            }
            Algorithm::Ring => {
                // Around the ring from the source: the devices after it in
                // sorted order, then those before it.
                let mut sorted = rest;
                sorted.sort();
                let (after, before): (Vec<Device>, Vec<Device>) =
                    sorted.into_iter().partition(|d| *d > src);
                let mut prev = v;
                for d in after.into_iter().chain(before) {
                    prev = self.reach(&mut held, prev, d);
                }
            }
            Algorithm::Tree => {
                let mut sorted = rest;
                sorted.sort();
                let mut nodes = vec![v];
                for (i, d) in sorted.into_iter().enumerate() {
                    let parent = shape::tree_parent(i + 1, arity)
                        .and_then(|p| nodes.get(p).copied())
                        .unwrap_or(v);
                    let c = self.reach(&mut held, parent, d);
                    nodes.push(c);
                }
            }
        }
        held
    }

    // ---- the ring ----------------------------------------------------------

    /// Ring reduce-scatter: chunk `c` (of `chunks`, along `axis`) is summed
    /// around the ring visiting ranks in `order` and ends at ring position
    /// `ends[c]`. Returns the reduced chunks.
    fn ring_reduce_scatter(
        &mut self,
        kind: ElementwiseOp,
        vals: &[ValueId],
        order: &[usize],
        axis: usize,
        chunks: &[(usize, usize)],
        ends: &[usize],
    ) -> Vec<ValueId> {
        let n = order.len();
        let mut out = Vec::with_capacity(chunks.len());
        for (&(start, len), &end) in chunks.iter().zip(ends) {
            let first = (end + 1) % n;
            let mut partial: Option<ValueId> = None;
            for step in 0..n {
                let Some(&rank) = order.get((first + step) % n) else {
                    continue;
                };
                let Some(&own) = vals.get(rank) else { continue };
                let piece = self.slice(own, axis, start, len);
                partial = Some(match partial {
                    None => piece,
                    Some(p) => {
                        let d = self.dev(own);
                        let p = self.to(p, d);
                        let ty = self.ty(piece);
                        self.g
                            .add_value(Op::Elementwise { kind, device: d }, &[p, piece], ty)
                    }
                });
            }
            if let Some(p) = partial {
                out.push(p);
            }
        }
        out
    }

    // ---- per collective ----------------------------------------------------

    fn lower(&mut self, spec: &Spec, choice: Choice) -> Vec<ValueId> {
        let n = spec.ranks();
        let targets = spec.targets();
        if choice == Choice::Trivial {
            return vec![spec.first; spec.num_results];
        }
        let spread_alg = choice.algorithm();
        let arity = match choice {
            Choice::Tree { arity, .. } => arity,
            _ => 2,
        };
        match spec.op.clone() {
            Op::Broadcast { .. } => {
                let map = self.spread(spec.first, &targets, spread_alg, arity);
                pick(&map, &targets)
            }
            Op::AllGather { axis } => {
                let maps: Vec<BTreeMap<Device, ValueId>> = spec
                    .vals
                    .clone()
                    .into_iter()
                    .map(|v| self.spread(v, &targets, spread_alg, arity))
                    .collect();
                let mut joined: BTreeMap<Device, ValueId> = BTreeMap::new();
                for d in shape::unique(&targets) {
                    let parts: Vec<ValueId> =
                        maps.iter().filter_map(|m| m.get(&d).copied()).collect();
                    let j = self.concat(&parts, axis, d);
                    joined.insert(d, j);
                }
                pick(&joined, &targets)
            }
            Op::AllReduce { op } | Op::Reduce { op, .. } | Op::ReduceScatter { op, .. } => {
                let kind = op.combiner();
                if choice == Choice::Ring {
                    return self.lower_ring(spec, op);
                }
                if let Choice::Driver(hub) = choice {
                    return self.lower_driver(spec, op, hub);
                }
                let total = match choice {
                    Choice::Star(p) => self.combine(kind, &spec.vals, p),
                    Choice::Hierarchical(p) => self.reduce_hier(kind, &spec.vals, p),
                    Choice::Tree { root, arity } => self.reduce_tree(kind, &spec.vals, root, arity),
                    _ => self.combine(
                        kind,
                        &spec.vals,
                        spec.devs.first().copied().unwrap_or(self.topo.staging),
                    ),
                };
                let total = self.finish(op, total, n);
                match spec.op {
                    Op::Reduce { root, .. } => {
                        let d = spec.devs.get(root).copied().unwrap_or(self.topo.staging);
                        vec![self.to(total, d)]
                    }
                    Op::ReduceScatter { axis, .. } => {
                        let len = spec.ty.shape.get(axis).copied().unwrap_or(0) / n.max(1);
                        (0..n)
                            .map(|i| {
                                let s = self.slice(total, axis, i * len, len);
                                let d = targets.get(i).copied().unwrap_or(self.topo.staging);
                                self.to(s, d)
                            })
                            .collect()
                    }
                    _ => {
                        let map = self.spread(total, &targets, spread_alg, arity);
                        pick(&map, &targets)
                    }
                }
            }
            _ => Vec::new(),
        }
    }

    /// An all_reduce through collective drivers: each island that has a
    /// driver reduces its shards with one `driver_all_reduce` per rank, so
    /// the shards never leave their devices. With one such island covering
    /// every rank, those nodes are the result (Mean divides on each rank).
    /// Otherwise each island's partial (from its first member) and the other
    /// islands' shards go to `hub`, are combined there, and the total spreads
    /// back as in `hierarchical`.
    fn lower_driver(&mut self, spec: &Spec, op: ReduceOp, hub: Device) -> Vec<ValueId> {
        let n = spec.ranks();
        let kind = op.combiner();
        // Mean is a sum on the driver, divided where the sum is complete.
        let driver_op = if op == ReduceOp::Mean {
            ReduceOp::Sum
        } else {
            op
        };
        let islands = driver_islands(&spec.devs, self.topo);
        let mut covered = vec![false; n];
        let mut per_rank: Vec<Option<ValueId>> = vec![None; n];
        let mut partials: Vec<ValueId> = Vec::new();
        for island in &islands {
            let members: Vec<usize> = (0..n)
                .filter(|r| spec.devs.get(*r).is_some_and(|d| island.contains(d)))
                .collect();
            let vals: Vec<ValueId> = members
                .iter()
                .filter_map(|r| spec.vals.get(*r).copied())
                .collect();
            for (j, r) in members.iter().enumerate() {
                let Some(&device) = spec.devs.get(*r) else {
                    continue;
                };
                let node = self.g.add_value(
                    Op::DriverAllReduce {
                        op: driver_op,
                        rank: j,
                        device,
                    },
                    &vals,
                    spec.ty.clone(),
                );
                per_rank[*r] = Some(node);
                covered[*r] = true;
                if j == 0 {
                    partials.push(node);
                }
            }
        }
        if covered.iter().all(|c| *c) && islands.len() == 1 {
            return per_rank
                .into_iter()
                .map(|v| {
                    let v = v.unwrap_or(self.fallback);
                    self.finish(op, v, n)
                })
                .collect();
        }
        // Ranks no driver island covers join at the hub as they are.
        let mut operands = partials;
        operands.extend(
            (0..n)
                .filter(|r| !covered[*r])
                .filter_map(|r| spec.vals.get(r).copied()),
        );
        let total = self.combine(kind, &operands, hub);
        let total = self.finish(op, total, n);
        let map = self.spread(total, &spec.targets(), Algorithm::Hierarchical, 2);
        pick(&map, &spec.targets())
    }

    fn lower_ring(&mut self, spec: &Spec, op: ReduceOp) -> Vec<ValueId> {
        let n = spec.ranks();
        let kind = op.combiner();
        let order = shape::vendor_order(&spec.devs);
        let (axis, chunks, ends) = match spec.op {
            Op::ReduceScatter { axis, .. } => {
                let extent = spec.ty.shape.get(axis).copied().unwrap_or(0);
                let chunks = shape::chunks(extent, n).unwrap_or_default();
                // Chunk c must end on rank c.
                let ends = (0..n)
                    .map(|c| order.iter().position(|r| *r == c).unwrap_or(0))
                    .collect::<Vec<_>>();
                (axis, chunks, ends)
            }
            _ => {
                let axis = shape::ring_axis(&spec.ty.shape, n).unwrap_or(0);
                let extent = spec.ty.shape.get(axis).copied().unwrap_or(0);
                (
                    axis,
                    shape::chunks(extent, n).unwrap_or_default(),
                    (0..n).collect(),
                )
            }
        };
        let reduced = self.ring_reduce_scatter(kind, &spec.vals, &order, axis, &chunks, &ends);
        let reduced: Vec<ValueId> = reduced.into_iter().map(|v| self.finish(op, v, n)).collect();
        match spec.op {
            Op::ReduceScatter { .. } => reduced,
            Op::Reduce { root, .. } => {
                let d = spec.devs.get(root).copied().unwrap_or(self.topo.staging);
                vec![self.concat(&reduced, axis, d)]
            }
            _ => {
                // All-gather half: each reduced chunk travels on around the ring.
                let mut have: Vec<BTreeMap<Device, ValueId>> = Vec::with_capacity(n);
                for (c, v) in reduced.iter().enumerate() {
                    let mut held = self.held(*v);
                    let end = ends.get(c).copied().unwrap_or(0);
                    let mut prev = *v;
                    for step in 1..n {
                        let Some(&rank) = order.get((end + step) % n) else {
                            continue;
                        };
                        let Some(&d) = spec.devs.get(rank) else {
                            continue;
                        };
                        prev = self.reach(&mut held, prev, d);
                    }
                    have.push(held);
                }
                let mut joined: BTreeMap<Device, ValueId> = BTreeMap::new();
                for d in shape::unique(&spec.devs) {
                    let parts: Vec<ValueId> =
                        have.iter().filter_map(|m| m.get(&d).copied()).collect();
                    let j = self.concat(&parts, axis, d);
                    joined.insert(d, j);
                }
                pick(&joined, &spec.devs)
            }
        }
    }
}

/// Ranks in tree order: `root` first, then the rest sorted by vendor.
fn tree_order(devs: &[Device], root: usize) -> Vec<usize> {
    let mut order = vec![root];
    order.extend(shape::vendor_order(devs).into_iter().filter(|r| *r != root));
    order
}

/// The value on each target device, in target order.
fn pick(map: &BTreeMap<Device, ValueId>, targets: &[Device]) -> Vec<ValueId> {
    targets.iter().filter_map(|d| map.get(d).copied()).collect()
}
