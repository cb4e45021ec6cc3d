//! Which lowering each collective gets, and the [`Decision`] that records
//! it.
//!
//! Every registered algorithm proposes its candidates for the collective
//! (each star point, the hierarchical hub, the ring if it can cut, the tree
//! with the given arity, the driver where the topology has one). Each
//! candidate is estimated on a scratch graph ([`super::estimate`]); `auto`
//! adds the pipelined stars that pay ([`super::piped`]). `auto`
//! keeps the cheapest, ties going to the earlier candidate; `algorithm=x`
//! keeps the cheapest candidate of `x`, or of the algorithm `x` falls back
//! to where `x` has none. The [`Decision`] holds all of it as data; the
//! graph note, the DOT caption and the `tracing` line are its `Display`.

use super::algorithm::{family, Ask, Family, Lowering, ALGORITHMS};
use super::estimate::{EstimateKey, Scratch};
use super::site::CollectiveSite;
use super::{all_to_all, LowerOptions, NAME};
use crate::cost::bound::{bound_widened, Bound, BoundError};
use crate::cost::Estimate;
use fuel_graph_ext::pass::PassError;
use fuel_graph_ext::{Device, Graph, Op, TensorType, Topology};
use std::fmt;
use std::sync::Arc;

/// Every candidate with its estimate, per [`EstimateKey`], for one run of
/// the pass.
pub(super) type EstimateCache = rustc_hash::FxHashMap<EstimateKey, std::sync::Arc<Candidates>>;

/// What `lower-collectives` decided for one collective, and why.
#[derive(Clone, Debug, PartialEq)]
pub struct Decision {
    /// The collective, as it was in the graph.
    pub op: Op,
    /// Its shard type (operand 0's).
    pub ty: TensorType,
    /// Each shard's type, in rank order, where they differ (an uneven
    /// `all_gather`); empty when every shard is `ty`.
    pub uneven: Vec<TensorType>,
    /// Its operands' devices, in rank order.
    pub devices: Vec<Device>,
    /// The lowering used.
    pub lowering: Lowering,
    /// Why that one.
    pub reason: Reason,
    /// Every candidate compared, in the order the algorithms propose them
    /// (none for one rank). `auto` compares every algorithm's;
    /// `algorithm=<name>` estimates only that algorithm's (and, where it
    /// has none, the one it falls back to).
    pub candidates: Arc<Candidates>,
    /// Where the estimates' cost figures come from
    /// ([`fuel_graph_ext::topology::Source`]).
    pub costs: Arc<str>,
}

/// The candidates of one collective, with their text as the note prints
/// it. Rendered once: collectives with equal estimates share one list, and
/// formatting every estimate again for each of them was a tenth of the
/// pass's time on a long chain.
#[derive(Clone, Debug, PartialEq)]
pub struct Candidates {
    list: Vec<Candidate>,
    text: String,
    /// The lower bound on any schedule of the collective
    /// ([`crate::cost::bound`]), or why there is none; `None` for one rank.
    bound: Option<Result<Bound, BoundError>>,
}

impl Candidates {
    /// The list, and its text.
    pub fn new(list: Vec<Candidate>) -> Candidates {
        let text = list
            .iter()
            .map(|c| c.to_string())
            .collect::<Vec<_>>()
            .join(", ");
        Candidates {
            list,
            text,
            bound: None,
        }
    }

    /// The list with the collective's lower bound beside it.
    fn with_bound(mut self, site: &CollectiveSite, topo: &Topology) -> Result<Self, PassError> {
        let (collective, group, widen) = site.pattern()?;
        self.bound = Some(bound_widened(&collective, &group, topo, widen));
        Ok(self)
    }

    /// The lower bound on any schedule of the collective, or why there is
    /// none (`None` for one rank).
    pub fn bound(&self) -> Option<&Result<Bound, BoundError>> {
        self.bound.as_ref()
    }
}

impl std::ops::Deref for Candidates {
    type Target = [Candidate];
    fn deref(&self) -> &[Candidate] {
        &self.list
    }
}

/// The candidates as the note lists them: `star@cpu:0 1.20us (2 hops), ...`.
impl fmt::Display for Candidates {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// Why a [`Decision`] chose its lowering.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    /// A group of one rank: there is nothing to exchange.
    OneRank,
    /// `algorithm=auto`: the cheapest estimate.
    Cheapest,
    /// `algorithm=<name>` asked for it (the cheapest of its candidates).
    Asked(&'static str),
    /// `exchange=<name>` asked for this `all_to_all` lowering.
    Exchange(&'static str),
    /// `algorithm=<asked>` has no candidate for this collective, `because`
    /// says why, so the cheapest candidate of `to` was used.
    FellBack {
        /// The algorithm asked for.
        asked: &'static str,
        /// The algorithm used instead.
        to: &'static str,
        /// Why the asked one cannot lower this collective.
        because: &'static str,
    },
}

/// One candidate a [`Decision`] compared.
#[derive(Clone, Debug, PartialEq)]
pub enum Candidate {
    /// A lowering and the cost model's estimate of it.
    Estimated {
        /// The lowering.
        lowering: Lowering,
        /// Its estimate.
        estimate: Estimate,
    },
    /// An algorithm that cannot lower this collective, and why.
    Unfit {
        /// The algorithm's name.
        algorithm: &'static str,
        /// Why not.
        why: String,
    },
}

/// Picks the lowering of `site`. Candidates are estimated once per
/// [`EstimateKey`] in a run (`cache`).
pub(super) fn choose(
    g: &Graph,
    site: &CollectiveSite,
    opts: &LowerOptions,
    topo: &Topology,
    costs: &Arc<str>,
    cache: &mut EstimateCache,
) -> Result<Decision, PassError> {
    let decision = |lowering, reason, candidates| Decision {
        op: site.op.clone(),
        ty: site.ty.clone(),
        uneven: site.uneven.clone(),
        devices: site.devs.clone(),
        lowering,
        reason,
        candidates,
        costs: costs.clone(),
    };
    if site.ranks() == 1 && !matches!(site.op, Op::Broadcast { .. }) {
        let none = Arc::new(Candidates::new(Vec::new()));
        return Ok(decision(Lowering::Identity, Reason::OneRank, none));
    }
    let key = EstimateKey::read(g, site)?;
    let candidates = match cache.get(&key) {
        Some(c) => c.clone(),
        None if matches!(site.op, Op::AllToAll { .. }) => {
            // all_to_all has its own lowerings; `algorithm=` is not asked.
            let scratch = Scratch::of(&key);
            let mut out = Vec::new();
            for x in all_to_all::candidates(site, topo, opts.exchange)? {
                let lowering = Lowering::AllToAll(x);
                let estimate = scratch.estimate(site, &lowering, topo)?;
                out.push(Candidate::Estimated { lowering, estimate });
            }
            let c = Arc::new(Candidates::new(out).with_bound(site, topo)?);
            cache.insert(key, c.clone());
            c
        }
        None => {
            let c = estimate_all(&Scratch::of(&key), site, opts, topo)?;
            cache.insert(key, c.clone());
            c
        }
    };
    let cheapest = |name: Option<&str>| {
        candidates
            .iter()
            .filter_map(|c| match c {
                Candidate::Estimated { lowering, estimate } => Some((lowering, estimate)),
                Candidate::Unfit { .. } => None,
            })
            .filter(|(l, _)| name.is_none_or(|n| l.name() == n))
            .fold(None::<(&Lowering, &Estimate)>, |best, cur| match best {
                Some(b) if b.1.total_us() <= cur.1.total_us() => Some(b),
                _ => Some(cur),
            })
            .map(|(l, _)| *l)
    };
    let (lowering, reason) = match opts.algorithm {
        _ if matches!(site.op, Op::AllToAll { .. }) => match opts.exchange {
            Some(x) => (Some(Lowering::AllToAll(x)), Reason::Exchange(x.name())),
            None => (cheapest(None), Reason::Cheapest),
        },
        None => (cheapest(None), Reason::Cheapest),
        Some(name) => {
            let asked = family(name)
                .ok_or_else(|| site.broken(format!("no algorithm is named `{name}`")))?;
            match (cheapest(Some(asked.name)), &asked.fallback) {
                (Some(l), _) => (Some(l), Reason::Asked(asked.name)),
                (None, Some(fb)) => (
                    cheapest(Some(fb.to)),
                    Reason::FellBack {
                        asked: asked.name,
                        to: fb.to,
                        because: fb.because,
                    },
                ),
                (None, None) => (None, Reason::Asked(asked.name)),
            }
        }
    };
    // Star, hierarchical and tree always have a candidate, and the
    // algorithms without one fall back to those.
    let lowering =
        lowering.ok_or_else(|| site.broken(format!("no candidate is left for {reason}")))?;
    Ok(decision(lowering, reason, candidates))
}

/// The candidates for `site`, estimated: every algorithm's for `auto`;
/// for `algorithm=<name>` only that algorithm's, and where it has none,
/// the algorithm it falls back to (so `algorithm=star` never estimates the
/// ring).
fn estimate_all(
    scratch: &Scratch,
    site: &CollectiveSite,
    opts: &LowerOptions,
    topo: &Topology,
) -> Result<Arc<Candidates>, PassError> {
    let ask = Ask { site, opts, topo };
    let mut out = Vec::new();
    let add = |fam: &Family, out: &mut Vec<Candidate>| -> Result<usize, PassError> {
        match (fam.candidates)(&ask) {
            Ok(list) => {
                let n = list.len();
                for lowering in list {
                    let estimate = scratch.estimate(site, &lowering, topo)?;
                    out.push(Candidate::Estimated { lowering, estimate });
                }
                Ok(n)
            }
            Err(why) => {
                out.push(Candidate::Unfit {
                    algorithm: fam.name,
                    why,
                });
                Ok(0)
            }
        }
    };
    match opts.algorithm.and_then(family) {
        None => {
            for fam in ALGORITHMS {
                add(fam, &mut out)?;
            }
            let piped = super::piped::propose(scratch, site, opts, topo, &out)?;
            out.extend(piped);
        }
        Some(asked) => {
            let found = add(asked, &mut out)?;
            if let (0, Some(fb)) = (found, &asked.fallback) {
                if let Some(to) = family(fb.to) {
                    add(to, &mut out)?;
                }
            }
        }
    }
    Ok(Arc::new(Candidates::new(out).with_bound(site, topo)?))
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::OneRank => f.write_str("one rank, nothing to exchange"),
            Reason::Cheapest => f.write_str("auto: cheapest estimate"),
            Reason::Asked(name) => write!(f, "algorithm={name}"),
            Reason::Exchange(name) => write!(f, "exchange={name}"),
            Reason::FellBack { asked, to, because } => {
                write!(f, "algorithm={asked} {because}, fell back to {to}")
            }
        }
    }
}

impl fmt::Display for Candidate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Candidate::Estimated { lowering, estimate } => write!(
                f,
                "{lowering} {:.2}us ({} hops)",
                estimate.total_us(),
                estimate.transfers
            ),
            Candidate::Unfit { algorithm, why } => write!(f, "{algorithm} n/a ({why})"),
        }
    }
}

/// Devices as a comma list.
fn list(f: &mut fmt::Formatter<'_>, items: &[impl fmt::Display]) -> fmt::Result {
    for (i, d) in items.iter().enumerate() {
        if i > 0 {
            f.write_str(", ")?;
        }
        write!(f, "{d}")?;
    }
    Ok(())
}

/// The note: `lower-collectives: <collective>: chose <lowering> (<reason>);
/// estimates: <candidates>; costs: <where the figures come from>`.
impl fmt::Display for Decision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let bytes = self.ty.size_bytes();
        match &self.op {
            Op::Broadcast { to } => {
                write!(f, "{NAME}: broadcast of {} ({bytes} B) from ", self.ty)?;
                list(f, &self.devices)?;
                f.write_str(" to [")?;
                list(f, to)?;
                f.write_str("]")?;
            }
            op if !self.uneven.is_empty() => {
                let total: usize = self.uneven.iter().map(TensorType::size_bytes).sum();
                write!(f, "{NAME}: {} of uneven shards [", op.mnemonic())?;
                list(f, &self.uneven)?;
                write!(f, "] ({total} B in all) over [")?;
                list(f, &self.devices)?;
                f.write_str("]")?;
            }
            op => {
                write!(
                    f,
                    "{NAME}: {} of {} ({bytes} B per shard) over [",
                    op.mnemonic(),
                    self.ty
                )?;
                list(f, &self.devices)?;
                f.write_str("]")?;
            }
        }
        if self.reason == Reason::OneRank {
            return write!(f, ": {}", self.reason);
        }
        write!(
            f,
            ": chose {} ({}); estimates: {}",
            self.lowering, self.reason, self.candidates
        )?;
        match self.candidates.bound() {
            Some(Ok(b)) => {
                write!(f, "; bound: {b}")?;
                if let Some(ratio) = self.over_bound() {
                    write!(f, ", est/bound {ratio:.2}")?;
                }
            }
            Some(Err(e)) => write!(f, "; bound: none ({e})")?,
            None => {}
        }
        write!(f, "; costs: {}", self.costs)
    }
}

/// The notes of one run, by the candidate list they print. Collectives
/// with equal estimate keys share one list ([`EstimateCache`]) and most
/// share their whole note, which is then formatted once: formatting each
/// note anew took an eighth of the pass's instructions on a chain of 10k
/// alike all_reduces.
#[derive(Default)]
pub(super) struct Notes {
    by_list: rustc_hash::FxHashMap<usize, Vec<(Decision, Arc<str>)>>,
}

impl Notes {
    /// `d`'s note (its `Display`), formatted once per distinct text.
    pub fn of(&mut self, d: &Decision) -> Arc<str> {
        // Each entry keeps its list alive, so no other list takes its
        // address while the key stands.
        let seen = self
            .by_list
            .entry(Arc::as_ptr(&d.candidates) as usize)
            .or_default();
        if let Some((_, note)) = seen.iter().find(|(s, _)| s.same_note(d)) {
            return note.clone();
        }
        let note: Arc<str> = d.to_string().into();
        seen.push((d.clone(), note.clone()));
        note
    }
}

impl Decision {
    /// Whether `other` prints as this decision does: every field its
    /// `Display` reads, with the candidate list and the cost source the
    /// same shared ones.
    fn same_note(&self, other: &Decision) -> bool {
        Arc::ptr_eq(&self.candidates, &other.candidates)
            && self.costs == other.costs
            && self.lowering == other.lowering
            && self.reason == other.reason
            && self.op == other.op
            && self.ty == other.ty
            && self.uneven == other.uneven
            && self.devices == other.devices
    }

    /// The chosen lowering's estimate.
    pub fn estimate(&self) -> Option<Estimate> {
        self.candidates.iter().find_map(|c| match c {
            Candidate::Estimated { lowering, estimate } if *lowering == self.lowering => {
                Some(*estimate)
            }
            _ => None,
        })
    }

    /// The chosen lowering's estimate over the collective's lower bound
    /// ([`crate::cost::bound`]): how far it is from the best any schedule
    /// could do. `None` with no estimate or no positive bound.
    pub fn over_bound(&self) -> Option<f64> {
        let est = self.estimate()?.total_us();
        match self.candidates.bound() {
            Some(Ok(b)) if b.us > 0.0 => Some(est / b.us),
            _ => None,
        }
    }
}
