//! `auto`'s pipelined stars: a star whose values relayed through the
//! staging CPU travel in `k` pieces ([`super::chunks`]), proposed as a
//! candidate of its own and priced by the cost model on the cut graph.
//!
//! A star at a GPU with a shard or a result on a GPU it has no direct path
//! to relays that value through the staging CPU: two copies, the second
//! waiting for the first. Cut into pieces, the second link carries piece
//! `i` while the first carries `i+1`. `chunks=` does that to every relay
//! after the choice; here `auto` weighs it while choosing: for the two
//! cheapest star points that relay, [`propose`] lowers the star, cuts its
//! relays into `k = 2, 4, 8, ...` pieces (while the estimate keeps
//! falling) and prices the result with the cost model like any candidate
//! (each piece's chain on its own workers, so the overlap is the model's,
//! not a formula's). The best `k` is listed as `star@D{chunks=k}` only
//! where it is estimated at least [`MARGIN`] (1%) faster than the whole-value
//! star at `D`,
//! so collectives where pieces do not pay (small values, lavapipe's
//! relays) keep their candidate list as it was.
//!
//! Only pass-through relays are cut: where the staging CPU also uses the
//! relayed value (its own result), `chunks=` joins the pieces there too,
//! a concat that reads and writes every byte in host memory once more, and
//! the model's busiest resource on the GPU machines is host memory already
//! ([`cut`]).
//!
//! The chosen pipelined star is lowered as its star, and the pass cuts the
//! relays that collective made into `k` pieces once every collective is
//! lowered ([`cut`]), as `chunks=k` would. Never proposed under
//! `algorithm=`, `chunks=` or `transport=`.

use super::algorithm::{Algorithm, Lowering};
use super::choose::Candidate;
use super::chunks::{self, Chunks, MAX_CHUNKS};
use super::emit::{Emitter, Held};
use super::estimate::Scratch;
use super::site::{Broken, CollectiveSite};
use super::star::Star;
use super::{LowerOptions, NAME};
use fuel_graph_ext::graph::{NodeId, ValueId};
use fuel_graph_ext::pass::PassError;
use fuel_graph_ext::topology::{Route, Runner};
use fuel_graph_ext::{Device, Graph, ReduceOp, Topology};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// Star points tried in pieces per collective: the cheapest ones that
/// relay (each costs a few graph estimates).
const POINTS: usize = 2;

/// How much faster than the whole star a pipelined star must be estimated
/// to be listed: pieces add steps whose real overheads the model prices
/// only roughly, and a gain within this fraction is not worth the cut (a
/// merged 8 KiB bucket on the default figures gained 0.02%).
const MARGIN: f64 = 0.01;

/// A star whose staged relays travel in `k` pieces.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Piped {
    /// The star (always with a point).
    pub star: Star,
    /// Pieces per relay (at most the value's longest axis).
    pub k: usize,
}

impl Algorithm for Piped {
    fn spread(&self, em: &mut Emitter<'_>, v: ValueId, targets: &[Device]) -> Result<Held, Broken> {
        self.star.spread(em, v, targets)
    }

    fn combine(&self, em: &mut Emitter<'_>, op: ReduceOp) -> Result<Vec<ValueId>, Broken> {
        self.star.combine(em, op)
    }
}

impl fmt::Display for Piped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{{chunks={}}}", self.star, self.k)
    }
}

/// The most a star at `at` could gain by cutting its pass-through relays,
/// by the model: a relay's two hops can overlap at best down to the
/// slower one, so each relay hides at most its faster hop (whole value,
/// latency and runner step included), and the star's critical path
/// crosses at most one relay in and one out. 0 where it relays nothing
/// that [`cut`] would cut. A point whose gain cannot reach [`MARGIN`] is
/// never lowered in pieces: that keeps large groups of small values (a
/// 1000-device star over GPUs) from paying graph estimates for nothing.
fn hidden_us(site: &CollectiveSite, at: Device, topo: &Topology) -> f64 {
    let bytes = site.ty.size_bytes();
    let step = topo.runner(Runner::Threaded).step_us;
    let mid = topo.staging;
    let hidden = |a: Device, b: Device| {
        let staged = !a.is_cpu() && !b.is_cpu() && matches!(topo.route(a, b), Route::Staged(_));
        if !staged {
            return 0.0;
        }
        let t1 = topo.transfer_us(a, mid, bytes) + step;
        let t2 = topo.transfer_us(mid, b, bytes) + step;
        t1.min(t2)
    };
    let most = |it: &mut dyn Iterator<Item = f64>| it.fold(0.0, f64::max);
    let up = most(&mut site.devs.iter().map(|d| hidden(*d, at)));
    let targets = site.targets();
    let down = match targets.contains(&mid) {
        true => 0.0,
        false => most(&mut targets.iter().map(|d| hidden(at, *d))),
    };
    up + down
}

/// The pipelined stars worth listing for `site`, given the candidates
/// already estimated (`listed`): see the module doc. Empty unless `auto`
/// chooses without `chunks=`.
pub(super) fn propose(
    scratch: &Scratch,
    site: &CollectiveSite,
    opts: &LowerOptions,
    topo: &Topology,
    listed: &[Candidate],
) -> Result<Vec<Candidate>, PassError> {
    if opts.algorithm.is_some() || opts.chunks.is_some() || opts.transport.is_some() {
        return Ok(Vec::new());
    }
    let extent = site.ty.shape.iter().copied().max().unwrap_or(0);
    if site.reduce_op().is_none() || extent < 2 || !site.uneven.is_empty() {
        return Ok(Vec::new());
    }
    let mut stars: Vec<(Star, f64)> = listed
        .iter()
        .filter_map(|c| match c {
            Candidate::Estimated {
                lowering: Lowering::Star(s @ Star { at: Some(at), .. }),
                estimate,
            } => Some((*s, *at, estimate.total_us())),
            _ => None,
        })
        .filter(|(_, at, whole)| hidden_us(site, *at, topo) > MARGIN * whole)
        .map(|(s, _, whole)| (s, whole))
        .collect();
    stars.sort_by(|a, b| a.1.total_cmp(&b.1));
    let mut out = Vec::new();
    for (star, whole) in stars.into_iter().take(POINTS) {
        let mut best = None;
        let mut to_beat = whole * (1.0 - MARGIN);
        let mut k = 2;
        while k <= extent.min(MAX_CHUNKS) {
            let lowering = Lowering::Piped(Piped { star, k });
            let estimate = scratch.estimate_by_graph(site, &lowering, topo)?;
            if estimate.total_us() >= to_beat {
                break;
            }
            to_beat = estimate.total_us();
            best = Some(Candidate::Estimated { lowering, estimate });
            k *= 2;
        }
        out.extend(best);
    }
    Ok(out)
}

/// Cuts the pass-through relays among `made` (lowered collectives' nodes,
/// each with the piece count its [`Piped`] was priced with) into pieces;
/// returns `(bytes, k)` per relay cut. A relay whose value the staging CPU
/// uses itself (its own result, a fold there) stays whole: joining its
/// pieces there would read and write every byte once more in host memory,
/// which the model counts (on the shipped GPU machines that made every
/// cut star dearer than the whole one).
pub(super) fn cut(
    g: &mut Graph,
    topo: &Topology,
    made: &BTreeMap<NodeId, usize>,
) -> Vec<(usize, usize)> {
    let nodes: BTreeSet<NodeId> = made.keys().copied().collect();
    chunks::pipeline_by(g, topo, &nodes, |m, joined_at_mid| match joined_at_mid {
        true => Chunks::Fixed(1),
        false => Chunks::Fixed(made.get(&m).copied().unwrap_or(1)),
    })
}

/// The note when `auto` chose pipelined stars: how many relays were cut.
pub(super) fn note(collectives: usize, cut: &[(usize, usize)]) -> String {
    let list: Vec<String> = cut
        .iter()
        .map(|(b, k)| format!("{b} bytes in {k}"))
        .collect();
    format!(
        "{NAME}: auto chose a pipelined star for {collectives} collective{}: {} staged relay{} cut into pieces ({}), each piece its own slice/copy/copy chain joined by concat at each end; bit-identical to one piece",
        if collectives == 1 { "" } else { "s" },
        cut.len(),
        if cut.len() == 1 { "" } else { "s" },
        list.join(", ")
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::lower::{decisions, estimate_graph};
    use fuel_graph_ext::text;
    use std::sync::Arc;

    /// 1 MiB all_reduce.sum over cuda:0, vulkan:0, cpu:0 (from 4 MiB up
    /// `split` is cheaper there).
    const SRC: &str = "graph @g {
  %0 = input \"a\" @cuda:0 : f32[262144]
  %1 = input \"b\" @vulkan:0 : f32[262144]
  %2 = input \"c\" @cpu:0 : f32[262144]
  %3:3 = all_reduce.sum %0, %1, %2 : f32[262144]
  return %3#0, %3#1, %3#2
}
";

    fn pcie() -> Topology {
        crate::lower::checked::pcie()
    }

    /// On the PCIe workstation the vulkan:0 -> cpu:0 -> cuda:0 relay is
    /// the chain that binds: auto picks the star with it in pieces, whose
    /// estimate is the model's price of the graph the pass emits, below
    /// the whole star's. The result's relay back (cpu:0's own result too)
    /// stays whole.
    #[test]
    fn auto_prices_the_graph_it_emits() {
        let t = Arc::new(pcie());
        let mut g = text::parse(SRC).unwrap();
        let pm = crate::run_pipeline(&mut g, "lower-collectives", t.clone(), Default::default())
            .unwrap();
        let d = decisions(&pm)[0].clone();
        let Lowering::Piped(p) = d.lowering else {
            panic!("{d}");
        };
        assert_eq!(p.star, Star::at(Some(Device::cuda(0))));
        let est = d.estimate().unwrap().total_us();
        let emitted = estimate_graph(&g, &t).unwrap().total_us();
        assert!((est - emitted).abs() < 1e-6, "{est} vs {emitted}");
        let mut whole = text::parse(SRC).unwrap();
        crate::run_pipeline(
            &mut whole,
            "lower-collectives{algorithm=star, reduce_at=cuda:0}",
            t.clone(),
            Default::default(),
        )
        .unwrap();
        assert!(est < estimate_graph(&whole, &t).unwrap().total_us());
        let note = g.notes().iter().find(|n| n.contains("pipelined")).unwrap();
        assert!(note.contains("1 staged relay cut"), "{note}");
    }
}
