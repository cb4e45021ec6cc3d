//! The `simplify-collectives` pass: rewrite collectives into cheaper ones
//! that compute the same values.
//!
//! **Matches**, each rule with whether it keeps every bit (*exact*: the
//! result is bit for bit what the reference interpreter gives for the
//! input graph) or needs `reassociate=true` (the values may differ in
//! rounding, or in where an integer wraps):
//!
//! - `duplicate` (exact): a collective with the same op, attributes and
//!   operands as an earlier one. Its uses read the earlier one.
//! - `gather-of-scatter` (exact): an `all_gather` whose operands are every
//!   result of one `reduce_scatter`, in rank order, gathered along the axis
//!   it cut (any split). It becomes an `all_reduce` of the scatter's
//!   operands with the same reduce op.
//! - `sliced-all-reduce` (exact): an `all_reduce` whose every result is
//!   used once, by a `slice` along one axis, rank r's slice starting where
//!   rank r−1's ends and the last ending at the extent. It becomes a
//!   `reduce_scatter` with those extents as its split (none when they are
//!   the default partition).
//! - `sliced-gather` (exact): a `slice` of an `all_gather` result that takes
//!   exactly the part of the rank whose device it is on. It is that rank's
//!   operand.
//! - `merge-reduces`: `all_reduce(x) ⊕ all_reduce(y)` on every rank, the two
//!   over the same devices with the same type and op, ⊕ the op they reduce
//!   with (`add` for `sum`, `max`, `min`). It becomes `all_reduce(x ⊕ y)`.
//!   Exact for `max` and `min`, and for `sum` of integers (wrapping adds
//!   in any order give the same bits); a float `sum` rounds in another
//!   order, so it needs `reassociate=true`.
//! - `replicated-reduce` (exact): an `all_reduce` whose operands are
//!   replicas of one value (the replication lattice, `lattice.rs`; two
//!   `all_reduce`s in a row are the common case). `max` and `min` give the
//!   value itself; `sum` and `prod` a local `add`/`mul` of N copies (the
//!   interpreter's left fold, so the same bits); `mean` the same fold in
//!   its accumulator, a `div` and the cast back, or with `reassociate=true`
//!   the value itself (which can differ where N copies round or wrap).
//! - `replicated-broadcast` (exact): a `broadcast` of a value that has a
//!   replica on every target device (other than the broadcast's own
//!   results). Each result is that replica.
//! - `all-to-all-inverse` (exact): an `all_to_all` over every result of
//!   another along the same axis, whose pieces are the transpose of the
//!   first's. Each result is the first one's operand of that rank.
//!
//! **Produces** the rewritten graph, with the nodes a rewrite left unused
//! removed. When a rule fired, one note per rewrite names the rule and
//! what it replaced, and one note per replica set of the result lists its
//! values as this pass's output numbers them (`replicated: {..} on [..]`).
//!
//! **Declines** a rewrite that adds a collective (`gather-of-scatter`,
//! `sliced-all-reduce`, `merge-reduces`) when the cost model says the
//! collectives it adds take longer than the ones it makes unused: a
//! `reduce_scatter` whose results are also used elsewhere stays, so an
//! `all_reduce` in place of the `all_gather` alone would cost more. Each
//! lowered alone, `auto`, on the pass's topology (`cost.rs`). A declined
//! or inexact match gets a note saying why; a graph where nothing matched
//! gets none.
//!
//! **Leaves alone** everything else: SPMD `comm.*` nodes (each rank's graph
//! holds one rank), `driver_all_reduce`, and collectives with no partner
//! that matches a rule. The rules run in sweeps: the lattice is computed
//! once per sweep, every rewrite that overlaps no other of the sweep is
//! applied, and the pass sweeps again until nothing fires.

use super::cost::{estimate_us, Spec};
use super::lattice::Replication;
use super::rules::{self, order_free, Rewrite};
use super::edit;
use fuel_graph_ext::graph::{NodeId, ValueId};
use fuel_graph_ext::pass::{Changed, Pass, PassError, PassOptions};
use fuel_graph_ext::{Device, Graph, Op, Topology};
use std::collections::BTreeSet;
use std::sync::Arc;

/// The pass name.
pub const NAME: &str = "simplify-collectives";

/// The options `simplify-collectives` accepts.
pub const OPTIONS: &[(&str, &str)] = &[(
    "reassociate",
    "true lets rules change the order of a float sum or a mean's rounding (default false: only bit-exact rules)",
)];

/// Sweeps before the pass stops, whatever still matches (each sweep
/// removes a collective, so real graphs stop far earlier).
const MAX_SWEEPS: usize = 64;

/// What the pass was asked to do.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SimplifyOptions {
    /// `reassociate=true`: rules may reorder float sums and means.
    pub reassociate: bool,
}

impl SimplifyOptions {
    /// Reads `reassociate` from pipeline options.
    pub fn from_pass_options(o: &PassOptions) -> Result<SimplifyOptions, PassError> {
        Ok(SimplifyOptions {
            reassociate: o.parse::<bool>("reassociate")?.unwrap_or(false),
        })
    }
}

/// The pass object.
pub struct SimplifyCollectives {
    opts: SimplifyOptions,
    topo: Arc<Topology>,
}

impl SimplifyCollectives {
    /// With the given options and topology.
    pub fn new(opts: SimplifyOptions, topo: Arc<Topology>) -> SimplifyCollectives {
        SimplifyCollectives { opts, topo }
    }
}

/// What the pass decided about one match.
enum Verdict {
    Apply,
    /// Left alone, with the note's reason.
    Decline(String),
}

impl Pass for SimplifyCollectives {
    fn name(&self) -> &'static str {
        NAME
    }

    fn run(&mut self, g: &mut Graph) -> Result<Changed, PassError> {
        let mut notes = Vec::new();
        let mut declined: BTreeSet<Vec<NodeId>> = BTreeSet::new();
        let mut fired = false;
        for _ in 0..MAX_SWEEPS {
            let rep = Replication::of(g);
            let mut taken: BTreeSet<NodeId> = BTreeSet::new();
            let mut applied = false;
            for rw in rules::find(g, &rep) {
                let touches = rw.touches();
                if declined.contains(&touches) || touches.iter().any(|n| taken.contains(n)) {
                    continue;
                }
                let (before, after) = describe(g, &rw);
                match self.verdict(g, &rw) {
                    Verdict::Decline(why) => {
                        notes.push(format!(
                            "{NAME}: {} declined: {before} stays ({after} was the rewrite): {why}",
                            rw.rule()
                        ));
                        declined.insert(touches);
                    }
                    Verdict::Apply => {
                        let exact = self.exactness(g, &rw);
                        let dead = edit::apply(g, &rw, self.opts.reassociate)
                            .map_err(|m| PassError::internal(NAME, m))?;
                        // A later rewrite of this sweep must not read a
                        // node this one removed: it waits for the next.
                        taken.extend(edit::sweep_dead(g, dead));
                        notes.push(format!(
                            "{NAME}: {}: {before} became {after} ({exact})",
                            rw.rule()
                        ));
                        taken.extend(touches);
                        applied = true;
                    }
                }
            }
            fired |= applied;
            if !applied {
                break;
            }
        }
        if fired {
            let rep = Replication::of(g);
            notes.extend(rep.describe(g).into_iter().map(|l| format!("{NAME}: {l}")));
        }
        for n in notes {
            g.add_note(n);
        }
        Ok(Changed::from_bool(fired))
    }
}

impl SimplifyCollectives {
    fn verdict(&self, g: &Graph, rw: &Rewrite) -> Verdict {
        if let Rewrite::MergeReduces { a, op, .. } = rw {
            let dtype = g.node(*a).map(|n| n.ty.dtype);
            if !self.opts.reassociate && !dtype.is_some_and(|d| order_free(*op, d)) {
                return Verdict::Decline(
                    "a float sum in another order may round differently; give simplify-collectives{reassociate=true} to allow it".into(),
                );
            }
        }
        let Some((added, removed)) = trade(g, rw) else {
            return Verdict::Apply;
        };
        let est = |s: &[Spec]| estimate_us(s, &self.topo);
        match (est(&added), est(&removed)) {
            (Ok(after), Ok(before)) if after <= before => Verdict::Apply,
            (Ok(after), Ok(before)) => Verdict::Decline(format!(
                "the cost model estimates {after:.1}us for the collectives it would add against {before:.1}us for the ones it would remove"
            )),
            (Err(e), _) | (_, Err(e)) => {
                Verdict::Decline(format!("the cost model could not estimate it: {e}"))
            }
        }
    }

    fn exactness(&self, g: &Graph, rw: &Rewrite) -> &'static str {
        match rw {
            Rewrite::MergeReduces { a, op, .. }
                if !g.node(*a).is_some_and(|n| order_free(*op, n.ty.dtype)) =>
            {
                "reassociated"
            }
            Rewrite::ReplicatedReduce {
                op: fuel_graph_ext::ReduceOp::Mean,
                ar,
            } if self.opts.reassociate && g.node(*ar).is_some_and(|n| n.operands.len() > 1) => {
                "reassociated"
            }
            _ => "bit-exact",
        }
    }
}

/// Whether every use of every result of `id` is one of `by` (no output).
fn only_used_by(g: &Graph, id: NodeId, by: &[NodeId]) -> bool {
    let n = g.node(id).map_or(0, |x| x.num_results());
    (0..n as u32).all(|result| {
        let v = ValueId { node: id, result };
        !g.outputs().contains(&v) && g.users(v).iter().all(|(u, _)| by.contains(u))
    })
}

/// Whether `g` holds a node `op` over exactly `vs`.
fn exists(g: &Graph, op: &Op, vs: &[ValueId]) -> bool {
    let Some(first) = vs.first() else {
        return false;
    };
    g.users(*first).iter().any(|(u, _)| {
        g.node(*u)
            .is_some_and(|n| n.op == *op && n.operands[..] == *vs)
    })
}

/// The collectives a rewrite adds and those it makes unused, for the
/// rules that add one; `None` for the rules that only remove.
fn trade(g: &Graph, rw: &Rewrite) -> Option<(Vec<Spec>, Vec<Spec>)> {
    let ops = |id: NodeId| g.node(id).map(|n| n.operands.to_vec()).unwrap_or_default();
    // A collective the graph already holds costs nothing more: `duplicate`
    // folds the new one into it.
    let added = |op: Op, vs: &[ValueId]| -> Option<Vec<Spec>> {
        if exists(g, &op, vs) {
            Some(Vec::new())
        } else {
            Some(vec![Spec::over(g, op, vs)?])
        }
    };
    let (added, removed) = match rw {
        Rewrite::GatherOfScatter { ag, rs, op } => {
            let mut removed = vec![Spec::of(g, *ag)?];
            if only_used_by(g, *rs, &[*ag]) {
                removed.push(Spec::of(g, *rs)?);
            }
            (added(Op::AllReduce { op: *op }, &ops(*rs))?, removed)
        }
        Rewrite::SlicedAllReduce {
            ar,
            op,
            axis,
            split,
            ..
        } => {
            let scatter = Op::ReduceScatter {
                op: *op,
                axis: *axis,
                split: split.clone(),
            };
            (added(scatter, &ops(*ar))?, vec![Spec::of(g, *ar)?])
        }
        Rewrite::MergeReduces { a, b, combines, .. } => {
            let merged = Spec::of(g, *a)?;
            let mut removed = Vec::new();
            for id in [*a, *b] {
                if only_used_by(g, id, combines) {
                    removed.push(Spec::of(g, id)?);
                }
            }
            (vec![merged], removed)
        }
        _ => return None,
    };
    Some((added, removed))
}

/// What a rewrite replaces and what it puts in its place, in words.
fn describe(g: &Graph, rw: &Rewrite) -> (String, String) {
    let group = |id: NodeId| -> String {
        let devices: Vec<String> = g
            .node(id)
            .map(|n| {
                n.operands
                    .iter()
                    .filter_map(|v| g.value_device(*v).map(|d: Device| d.to_string()))
                    .collect()
            })
            .unwrap_or_default();
        format!("[{}]", devices.join(", "))
    };
    let name = |id: NodeId| g.node(id).map_or_else(String::new, |n| n.op.mnemonic());
    let ty = |id: NodeId| g.node(id).map_or_else(String::new, |n| n.ty.to_string());
    match rw {
        Rewrite::Duplicate { dup, .. } => (
            format!(
                "a second {} of {} over {}",
                name(*dup),
                ty(*dup),
                group(*dup)
            ),
            "the first".into(),
        ),
        Rewrite::GatherOfScatter { ag, rs, op } => (
            format!(
                "{}({}) of {} over {}",
                name(*ag),
                name(*rs),
                ty(*ag),
                group(*rs)
            ),
            format!("all_reduce.{op}"),
        ),
        Rewrite::SlicedAllReduce { ar, op, .. } => (
            format!(
                "{} of {} over {}, each rank slicing its own part,",
                name(*ar),
                ty(*ar),
                group(*ar)
            ),
            format!("reduce_scatter.{op}"),
        ),
        Rewrite::SlicedGather { operand, .. } => (
            format!(
                "a slice of an all_gather result taking the part of its own rank on {}",
                g.value_device(*operand)
                    .map_or_else(String::new, |d| d.to_string())
            ),
            "that rank's operand".into(),
        ),
        Rewrite::MergeReduces { a, op, .. } => {
            let f = op.combiner().as_str();
            (
                format!(
                    "all_reduce.{op}(x) {f} all_reduce.{op}(y) of {} over {}",
                    ty(*a),
                    group(*a)
                ),
                format!("all_reduce.{op}(x {f} y)"),
            )
        }
        Rewrite::ReplicatedReduce { ar, .. } => (
            format!("{} of a value replicated on {}", name(*ar), group(*ar)),
            "a local computation".into(),
        ),
        Rewrite::ReplicatedBroadcast { bc, replicas } => (
            format!(
                "a broadcast of {} to {} devices that hold a replica already",
                ty(*bc),
                replicas.len()
            ),
            "those replicas".into(),
        ),
        Rewrite::AllToAllInverse { first, .. } => (
            format!(
                "an all_to_all of {} over {} followed by its inverse",
                ty(*first),
                group(*first)
            ),
            "the first one's operands".into(),
        ),
    }
}
