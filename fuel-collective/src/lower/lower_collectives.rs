//! The `lower-collectives` pass: turn every collective node into copies and
//! local ops.
//!
//! **Matches** every `all_reduce`, `reduce`, `broadcast`, `all_gather`,
//! `reduce_scatter` and `all_to_all` node, in topological order.
//!
//! **Produces** `copy` chains, n-ary element-wise ops (one op with all the
//! inputs that meet at a device, never a chain of binary ops, except in the
//! ring where each step adds exactly two), `div {by=N}` for `Mean`, and
//! `slice`/`concat` where data is cut or joined, and `cast` for a `Mean`
//! whose dtype sums in a wider accumulator (f16, bf16, integers below 64
//! bits, bool; `widen.rs`): each shard is cast up on its device, and the
//! mean cast back where it is divided. Every use of a collective's
//! result is pointed at the new value on the same device and the collective
//! node is removed, so the returned values keep their order. Every hop with
//! no direct path (cross-vendor, Vulkan to Vulkan, CUDA without peer access)
//! becomes two copies through the topology's staging CPU, and each value
//! crosses a given link at most once: all copies go through one
//! `Transfers` cache for the whole run, which also reuses copies already
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
//! - `hierarchical`: each island (see [`super::shape`]) combines its shards
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
//! - `pairwise` (`reduce_scatter` only; elsewhere it falls back to the
//!   star): each rank's share of every shard goes to one device and is
//!   folded there, the shares side by side: on the rank itself, or across
//!   the host/GPU line on `pairwise@<device>` (a CPU rank's share on a fast
//!   GPU, a slow GPU's share on the staging CPU); see `pairwise.rs`.
//! - `split` (`all_reduce` only, over two GPUs with no direct path between
//!   them; elsewhere it falls back to the star): the value is cut in two
//!   parts that the two GPUs fold at once, joined once on the staging CPU,
//!   from which every other device takes what it lacks
//!   (`split@a+b{q/4}`, `b` folding `q` quarters); see `split.rs`.
//! - `auto` (default): lowers with every candidate on a scratch copy,
//!   estimates each with [`crate::cost`], and keeps the cheapest. Its
//!   candidates include a star whose staged relays travel in pieces
//!   (`star@D{chunks=k}`, `piped.rs`) where the model says pieces pay; the
//!   pass cuts that collective's relays once every collective is lowered.
//!
//! Per kind: `reduce` is the all-reduce without the way back (ring:
//! reduce-scatter, then each chunk to the root). `broadcast` and
//! `all_gather` have nothing to combine, so the algorithm only shapes how
//! copies spread: star sends straight to every target (or, for
//! `all_gather`, every shard to one point, joined there once, and the result
//! straight to every target: `star@cpu:0`), hierarchical via one
//! member per island, tree down a tree, and ring as a chain (for
//! `all_gather`, each shard travels its own chain and every rank
//! concatenates). `reduce_scatter` reduces as the algorithm says, slices at
//! the reduction point and sends each rank its slice; its ring form is the
//! first half of the ring all-reduce, cut along the op's own axis. Where the
//! ring cannot cut (one rank, a scalar, or no axis with an entry per rank)
//! it falls back to the tree, and the note says so. Uneven shards: an
//! `all_gather`'s shards may differ along its axis (one with no entries
//! along the axis stays home), and a `reduce_scatter` slices each rank's share, its split or the
//! default partition (the ring only where every share has an entry).
//! `all_to_all` does not use the algorithms: its pieces go `direct`,
//! `packed` per staging CPU, or `joined` on the staging CPU for GPU ranks
//! (`exchange=`, else the cheapest estimate; see `all_to_all.rs`). A group of one rank needs no exchange: results are the
//! shard itself.
//!
//! Every choice is recorded as a [`Decision`] (the lowering, the reason,
//! every candidate's estimate), which the pass keeps until its next run
//! ([`decisions`] reads them from a [`PassManager`]); the graph note and the
//! `tracing` line are its `Display`. Lowering is deterministic: same input,
//! byte-identical output. A broken invariant of the pass is an internal
//! [`PassError`] naming the collective, never a made-up value.
//!

use super::choose::EstimateCache;
use super::chunks::{self, Chunks};
use super::emit::Emitter;
use super::site::{Broken, CollectiveSite};
use super::transport::{self, Transport};
use super::{algorithm, choose, Decision, Exchange};
use fuel_graph_ext::graph::{NodeId, ValueId};
use fuel_graph_ext::pass::{Changed, Pass, PassError, PassManager, PassOptions};
use fuel_graph_ext::passes::Transfers;
use fuel_graph_ext::{Device, Graph, Op, TensorType, Topology};
use std::str::FromStr;
use std::sync::Arc;

/// The pass name.
pub const NAME: &str = "lower-collectives";

/// The options `lower-collectives` accepts.
pub const OPTIONS: &[(&str, &str)] = &[
    (
        "algorithm",
        "auto (default, cheapest by the cost model), star, hierarchical, ring, tree, driver, pairwise or split",
    ),
    (
        "arity",
        "children per node of the tree algorithm, 2 or more (default 2)",
    ),
    (
        "chunks",
        "auto or 1..64: cut each value relayed through the staging CPU into pieces whose hops overlap; auto asks the cost model; off by default (see chunks.rs)",
    ),
    (
        "exchange",
        "how all_to_all moves its pieces: direct, packed or joined (default: the cheapest estimate)",
    ),
    (
        "reduce_at",
        "the device where star and hierarchical combine (and where star joins an all_gather once, and pairwise folds the shares of the ranks across the host/GPU line from it), e.g. cpu:0",
    ),
    (
        "transport",
        "auto, bf16, f16, bf16-staged or f16-staged: f32 data crosses devices (or only the staging hops) narrow; auto: bf16 where the cost model says it pays; off by default (see transport.rs)",
    ),
];

/// What the pass was asked to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LowerOptions {
    /// The algorithm `algorithm=` names, or `None` for `auto` (compare
    /// them all).
    pub algorithm: Option<&'static str>,
    /// Where star and hierarchical combine.
    pub reduce_at: Option<Device>,
    /// Children per tree node.
    pub arity: usize,
    /// How `all_to_all` moves its pieces (`exchange=`), or `None` for the
    /// cheaper estimate.
    pub exchange: Option<Exchange>,
    /// `transport=`: f32 copies across devices travel narrow (never by
    /// default).
    pub transport: Option<Transport>,
    /// `chunks=`: staged relays travel in pieces (never by default).
    pub chunks: Option<Chunks>,
}

impl Default for LowerOptions {
    fn default() -> Self {
        LowerOptions {
            algorithm: None,
            reduce_at: None,
            arity: 2,
            exchange: None,
            transport: None,
            chunks: None,
        }
    }
}

/// The value of `exchange=`.
struct ExchangeOption(Exchange);

impl FromStr for ExchangeOption {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "direct" => Ok(ExchangeOption(Exchange::DIRECT)),
            "packed" => Ok(ExchangeOption(Exchange::PACKED)),
            "joined" => Ok(ExchangeOption(Exchange::JOINED)),
            _ => Err("expected direct, packed or joined".into()),
        }
    }
}

/// The value of `algorithm=`: `auto`, or the name of a registered algorithm.
struct AlgorithmOption(Option<&'static str>);

impl FromStr for AlgorithmOption {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s == "auto" {
            return Ok(AlgorithmOption(None));
        }
        if let Some(f) = algorithm::family(s) {
            return Ok(AlgorithmOption(Some(f.name)));
        }
        let names: Vec<&str> = algorithm::ALGORITHMS.iter().map(|f| f.name).collect();
        Err(match names.split_last() {
            Some((last, rest)) => format!("expected auto, {} or {last}", rest.join(", ")),
            None => "expected auto".to_string(),
        })
    }
}

impl LowerOptions {
    /// Reads `algorithm`, `reduce_at` and `arity` from pipeline options.
    pub fn from_pass_options(o: &PassOptions) -> Result<LowerOptions, PassError> {
        let mut opts = LowerOptions::default();
        if let Some(AlgorithmOption(a)) = o.parse::<AlgorithmOption>("algorithm")? {
            opts.algorithm = a;
        }
        opts.reduce_at = o.parse::<Device>("reduce_at")?;
        opts.exchange = o.parse::<ExchangeOption>("exchange")?.map(|e| e.0);
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
        opts.transport = o.parse::<Transport>("transport")?;
        opts.chunks = o.parse::<Chunks>("chunks")?;
        if let Some(t) = opts.transport {
            match opts.algorithm {
                None => opts.algorithm = Some("star"),
                Some("star") => {}
                Some(other) => {
                    return Err(PassError::BadOption {
                        pass: o.pass.clone(),
                        option: "transport".into(),
                        message: format!("cannot use `{t}` with algorithm={other}: narrow transport lowers with star, where each element is rounded at most twice; use algorithm=star or auto"),
                    })
                }
            }
        }
        Ok(opts)
    }
}

/// The pass object. After a run it keeps that run's [`Decision`]s.
pub struct LowerCollectives {
    opts: LowerOptions,
    topo: Arc<Topology>,
    decisions: Vec<Decision>,
    provenance: Vec<(NodeId, NodeId)>,
}

impl LowerCollectives {
    /// With the given options and topology.
    pub fn new(opts: LowerOptions, topo: Arc<Topology>) -> LowerCollectives {
        LowerCollectives {
            opts,
            topo,
            decisions: Vec::new(),
            provenance: Vec::new(),
        }
    }

    /// The decisions of the last run, one per collective, in the order the
    /// collectives were lowered (topological order of the input).
    pub fn decisions(&self) -> &[Decision] {
        &self.decisions
    }

    /// Where the last run's nodes came from: (a node it added, the
    /// collective whose lowering added it), the collective's id being the
    /// one it had in the pass's input. Sorted by the added node. A copy
    /// that a later collective reused keeps its first collective. The pass
    /// viewer links a collective to what it was lowered into with this.
    pub fn provenance(&self) -> &[(NodeId, NodeId)] {
        &self.provenance
    }
}

/// Fills the slot that lowering `id` just freed with a placeholder (an
/// input with no name, no operands and no users) and returns it; `None`,
/// with the placeholder removed again, if the graph put it anywhere else.
///
/// The graph refills the most recently freed slot first. Without the
/// placeholder the next collective's first emitted node would land in this
/// slot, below the values it reads, and the lowered graph's index order
/// would stop being topological. Held until the pass ends, every emitted
/// node is appended, so [`Graph::topo_order`] and every whole-graph walk
/// after it (the verifier, printing, planning) run in memory order: on the
/// 20k-collective chain lowering plus verifying took 2.1-2.2 times as long
/// as 10k, and takes 2.0 with the slots held.
fn hold_slot(g: &mut Graph, id: NodeId, ty: TensorType) -> Option<NodeId> {
    let placeholder = g.add_node(
        Op::Input {
            name: String::new(),
            device: Device::cpu(0),
        },
        &[],
        ty,
    );
    if placeholder == id {
        Some(placeholder)
    } else {
        g.remove_node(placeholder);
        None
    }
}

/// The nodes added since `bound` and `vacant` were read (every index at
/// `bound` or above, and the vacant slots below it that are now filled),
/// and the new bound and vacant slots. Reading only those keeps the
/// record of where nodes came from linear in what the pass adds.
fn added_since(g: &Graph, bound: usize, vacant: &mut Vec<usize>) -> (Vec<NodeId>, usize) {
    let id = |i: usize| NodeId(petgraph::stable_graph::NodeIndex::new(i));
    let now = petgraph::visit::NodeIndexable::node_bound(g.petgraph());
    let mut added: Vec<NodeId> = Vec::new();
    vacant.retain(|&i| {
        let filled = g.contains(id(i));
        if filled {
            added.push(id(i));
        }
        !filled
    });
    for i in bound..now {
        if g.contains(id(i)) {
            added.push(id(i));
        } else {
            vacant.push(i);
        }
    }
    (added, now)
}

/// Where the nodes of every `lower-collectives` pass in `pm`'s pipeline
/// came from ([`LowerCollectives::provenance`]), from its last run.
pub fn provenance(pm: &PassManager) -> Vec<(NodeId, NodeId)> {
    pm.passes_of::<LowerCollectives>()
        .flat_map(|p| p.provenance().iter().copied())
        .collect()
}

/// The decisions of every `lower-collectives` pass in `pm`'s pipeline, from
/// its last run, in pipeline order.
pub fn decisions(pm: &PassManager) -> Vec<&Decision> {
    pm.passes_of::<LowerCollectives>()
        .flat_map(|p| p.decisions())
        .collect()
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
        self.decisions.clear();
        self.provenance.clear();
        let mut bound = petgraph::visit::NodeIndexable::node_bound(g.petgraph());
        let mut vacant: Vec<usize> = (0..bound)
            .filter(|&i| !g.contains(NodeId(petgraph::stable_graph::NodeIndex::new(i))))
            .collect();
        let mut tx = Transfers::new(g);
        let mut cache = EstimateCache::default();
        let mut notes = choose::Notes::default();
        let costs: Arc<str> = self.topo.source().to_string().into();
        let targets: Vec<NodeId> = g
            .topo_order()
            .into_iter()
            .filter(|id| g.node(*id).is_some_and(|n| n.op.is_collective()))
            .collect();
        let before: std::collections::BTreeSet<NodeId> =
            match (self.opts.transport, self.opts.chunks) {
                (None, None) => Default::default(),
                _ => g.node_ids().collect(),
            };
        // The nodes of the collectives lowered as a pipelined star, each
        // with its piece count: cut once every collective is lowered.
        let mut piped: std::collections::BTreeMap<NodeId, usize> = Default::default();
        let mut piped_count = 0;
        // Each lowered collective's slot, held by a placeholder until every
        // collective is lowered (see `hold_slot`).
        let mut held: Vec<NodeId> = Vec::new();
        let mut lower_all = || -> Result<(), PassError> {
            for id in &targets {
                let site = CollectiveSite::read(g, *id).map_err(fail)?;
                let (site, widened) = super::widen::widen_mean(g, site).map_err(fail)?;
                if let Some(note) = widened {
                    g.add_note(note);
                }
                let decision =
                    choose::choose(g, &site, &self.opts, &self.topo, &costs, &mut cache)?;
                let note = notes.of(&decision);
                tracing::info!(target: "lower-collectives", lowering = %decision.lowering, "{note}");
                let results = Emitter {
                    g: &mut *g,
                    tx: &mut tx,
                    topo: &self.topo,
                    site: &site,
                }
                .lower(&decision.lowering)?;
                if results.len() != site.num_results {
                    return Err(fail(format!(
                        "lowering {} gave {} results for {}",
                        site.op.mnemonic(),
                        results.len(),
                        site.num_results
                    )));
                }
                check_result_types(g, *id, &site, &results)?;
                for (i, r) in results.into_iter().enumerate() {
                    g.replace_all_uses(
                        ValueId {
                            node: *id,
                            result: i as u32,
                        },
                        r,
                    );
                }
                let slot_ty = g.node(*id).map(|n| n.ty.clone());
                g.remove_node(*id);
                let (added, now) = added_since(g, bound, &mut vacant);
                match slot_ty.and_then(|ty| hold_slot(g, *id, ty)) {
                    Some(placeholder) => held.push(placeholder),
                    None => vacant.push(id.0.index()),
                }
                if let algorithm::Lowering::Piped(p) = decision.lowering {
                    piped.extend(added.iter().map(|n| (*n, p.k)));
                    piped_count += 1;
                }
                self.provenance.extend(added.into_iter().map(|n| (n, *id)));
                bound = now;
                g.add_note(&*note);
                self.decisions.push(decision);
            }
            Ok(())
        };
        let lowered = lower_all();
        for placeholder in held {
            g.remove_node(placeholder);
        }
        lowered?;
        if let Some(t) = self.opts.transport {
            let made = g.node_ids().filter(|id| !before.contains(id)).collect();
            let topo = &self.topo;
            let price = |g: &Graph| super::estimate_run(g, topo).ok().map(|e| e.total_us());
            let note = transport::decide(g, topo, &made, t, price);
            g.add_note(note);
        }
        if piped_count > 0 {
            let cut = super::piped::cut(g, &self.topo, &piped);
            g.add_note(super::piped::note(piped_count, &cut));
        }
        if let Some(c) = self.opts.chunks {
            let made = g.node_ids().filter(|id| !before.contains(id)).collect();
            let cut = chunks::pipeline(g, &self.topo, &made, c);
            g.add_note(chunks::note(c, &cut));
        }
        self.provenance.retain(|(n, _)| g.contains(*n));
        sort_by_node(&mut self.provenance);
        Ok(Changed::from_bool(!targets.is_empty()))
    }
}

/// Sorts `pairs` as `sort_unstable` would, in linear time: the added
/// nodes' indices are dense, so a count per index places each pair (a
/// comparison sort of the 10k-collective chain's 140k pairs took 4% of
/// the pass's instructions). Pairs sharing an added node, which only a
/// removed and reused slot makes, are ordered by their collective.
fn sort_by_node(pairs: &mut Vec<(NodeId, NodeId)>) {
    let Some(&fill) = pairs.first() else { return };
    let bound = pairs
        .iter()
        .map(|(n, _)| n.0.index() + 1)
        .max()
        .unwrap_or(0);
    let mut start = vec![0usize; bound + 1];
    for (n, _) in pairs.iter() {
        start[n.0.index() + 1] += 1;
    }
    for i in 0..bound {
        start[i + 1] += start[i];
    }
    let mut out = vec![fill; pairs.len()];
    let mut next = start.clone();
    for p in pairs.iter() {
        let at = &mut next[p.0 .0.index()];
        out[*at] = *p;
        *at += 1;
    }
    for i in 0..bound {
        if start[i + 1] - start[i] > 1 {
            out[start[i]..start[i + 1]].sort_unstable();
        }
    }
    *pairs = out;
}

/// Each of `results` has the type the collective `id` declared for that
/// result. A lowering that computes another type (an `all_gather` of
/// `f32[0,3]` shards that left out the empty ones and returned `f32[0,3]`
/// for `f32[0,6]`) is a bug in the pass; where the value is a graph result
/// no later node's typing would notice it, so it is checked here.
fn check_result_types(
    g: &Graph,
    id: NodeId,
    site: &CollectiveSite,
    results: &[ValueId],
) -> Result<(), Broken> {
    for (i, r) in results.iter().enumerate() {
        let declared = g.value_type(ValueId {
            node: id,
            result: i as u32,
        });
        let made = g.value_type(*r);
        if declared != made {
            let show = |t: Option<&fuel_graph_ext::TensorType>| {
                t.map_or_else(|| "no type".to_string(), |t| t.to_string())
            };
            return Err(site.broken(format!(
                "result {i} is declared {} but the lowering computes {}",
                show(declared),
                show(made)
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::sort_by_node;
    use fuel_graph_ext::graph::NodeId;
    use proptest::prelude::*;

    /// Notes formatted once and shared ([`super::choose::Notes`]) read as
    /// each decision prints, where alike collectives alternate with others
    /// and with ones over another group.
    #[test]
    fn shared_notes_read_as_each_decision_prints() {
        let mut src = String::from("graph @p {\n");
        src += "  %0 = input \"a\" @cpu:0 : f32[4]\n  %1 = input \"b\" @vulkan:0 : f32[4]\n";
        src += "  %2 = input \"c\" @cpu:0 : f32[9]\n  %3 = input \"d\" @cpu:1 : f32[9]\n";
        let (mut x, mut y) = ("%0".to_string(), "%1".to_string());
        let (mut u, mut v) = ("%2".to_string(), "%3".to_string());
        for i in 0..4 {
            let (a, b) = (4 + 2 * i, 5 + 2 * i);
            src += &format!("  %{a}:2 = all_reduce.sum {x}, {y} : f32[4]\n");
            src += &format!("  %{b}:2 = all_reduce.max {u}, {v} : f32[9]\n");
            (x, y, u, v) = (
                format!("%{a}#0"),
                format!("%{a}#1"),
                format!("%{b}#0"),
                format!("%{b}#1"),
            );
        }
        src += &format!("  return {x}, {y}, {u}, {v}\n}}\n");
        let mut g = fuel_graph_ext::text::parse(&src).unwrap();
        let pm = crate::run_pipeline(
            &mut g,
            "lower-collectives",
            Default::default(),
            Default::default(),
        )
        .unwrap();
        let want: Vec<String> = super::decisions(&pm)
            .iter()
            .map(|d| d.to_string())
            .collect();
        assert_eq!(want.len(), 8);
        let got: Vec<&String> = g
            .notes()
            .iter()
            .filter(|n| n.starts_with("lower-collectives: all_reduce"))
            .collect();
        assert_eq!(got, want.iter().collect::<Vec<_>>());
        // Alike collectives alternate their pick (the result of one sits
        // where the next folds best), so equal notes are not neighbours.
        assert_eq!(want[3], want[7]);
        assert_ne!(want[3], want[5]);
    }

    /// A lowered chain of collectives keeps index order topological: each
    /// emitted node is appended (the lowered collectives' slots are held
    /// until the pass ends, `hold_slot`), and no placeholder is left.
    #[test]
    fn a_lowered_chain_appends_what_it_emits() {
        let mut src = String::from("graph @c {\n");
        src += "  %0 = input \"a\" @cpu:0 : f32[4]\n  %1 = input \"b\" @vulkan:0 : f32[4]\n";
        src += "  %2 = input \"c\" @cuda:0 : f32[4]\n";
        let mut last = ["%0", "%1", "%2"].map(String::from);
        for i in 3..9 {
            src += &format!("  %{i}:3 = all_reduce.sum {} : f32[4]\n", last.join(", "));
            last = [0, 1, 2].map(|r| format!("%{i}#{r}"));
        }
        src += &format!("  return {}\n}}\n", last.join(", "));
        let mut g = fuel_graph_ext::text::parse(&src).unwrap();
        crate::run_pipeline(
            &mut g,
            "lower-collectives",
            Default::default(),
            Default::default(),
        )
        .unwrap();
        let mut inputs = 0;
        for id in g.node_ids() {
            let n = g.node(id).unwrap();
            assert!(
                n.operands.iter().all(|v| v.node < id),
                "{n:?} reads a later node"
            );
            if let fuel_graph_ext::Op::Input { name, .. } = &n.op {
                assert!(!name.is_empty(), "a placeholder was left");
                inputs += 1;
            }
        }
        assert_eq!(inputs, 3);
        assert_eq!(g.topo_order(), g.node_ids().collect::<Vec<_>>());
    }

    fn id(i: u32) -> NodeId {
        NodeId(petgraph::stable_graph::NodeIndex::new(i as usize))
    }

    proptest! {
        /// The counting sort orders pairs as a comparison sort does, pairs
        /// that share an added node (a reused slot) included.
        #[test]
        fn sort_by_node_matches_sort_unstable(raw in prop::collection::vec((0u32..40, 0u32..6), 0..200)) {
            let mut pairs: Vec<(NodeId, NodeId)> = raw.iter().map(|(a, b)| (id(*a), id(*b))).collect();
            let mut want = pairs.clone();
            want.sort_unstable();
            sort_by_node(&mut pairs);
            prop_assert_eq!(pairs, want);
        }
    }
}
