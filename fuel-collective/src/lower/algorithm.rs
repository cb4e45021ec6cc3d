//! The algorithms `lower-collectives` can use, and [`Lowering`]: one
//! algorithm with its parameters.
//!
//! An algorithm is a type that holds its parameters (`Star { at }`,
//! `Tree { root, arity }`, ...) in a file of its own and implements
//! [`Algorithm`]: how one value spreads to many devices, and how the shards
//! of a combining collective meet. Its [`Family`] says how it proposes
//! candidates for one collective and where `algorithm=<name>` goes when it
//! has none. Registering it is one line in the `register_algorithms!` list
//! below: the line names its type and its family, adds its variant to
//! [`Lowering`] and its family to [`ALGORITHMS`], which fixes the names
//! `algorithm=` accepts and the order in which `auto` lists candidates.

use super::emit::{Emitter, Held};
use super::site::{Broken, CollectiveSite};
use super::{
    all_to_all, driver, hierarchical, pairwise, piped, ring, split, star, tree, LowerOptions,
};
use fuel_graph_ext::graph::ValueId;
use fuel_graph_ext::{Device, ReduceOp, Topology};
use std::fmt;

/// How one algorithm lowers a collective.
pub(super) trait Algorithm: fmt::Display {
    /// `v` on every device of `targets`: how a broadcast, each shard of an
    /// all_gather and an all_reduce's total travel. Returns every copy made,
    /// by device (staging CPUs included).
    fn spread(&self, em: &mut Emitter<'_>, v: ValueId, targets: &[Device]) -> Result<Held, Broken>;

    /// Where an `all_gather`'s shards are joined once before the result
    /// spreads, or `None` (the default) where each target joins its own
    /// copies of the shards.
    fn join_at(&self) -> Option<Device> {
        None
    }

    /// Whether target `d` of an `all_gather` joined at [`join_at`]
    /// (Self::join_at) builds its result from the shards it lacks
    /// ([`Emitter::gather_lacking`]) rather than taking the joined result;
    /// no target does by default.
    fn joins_parts_on(&self, _d: Device) -> bool {
        false
    }

    /// The results, in result order, of the collective that `em` lowers,
    /// which combines its shards with `op` (`all_reduce`, `reduce`,
    /// `reduce_scatter`). An algorithm that reduces to one point combines
    /// there and hands the total to [`Emitter::deliver`].
    fn combine(&self, em: &mut Emitter<'_>, op: ReduceOp) -> Result<Vec<ValueId>, Broken>;
}

/// What an algorithm proposes its candidates for: one collective, the
/// pass options and the topology.
#[derive(Clone, Copy)]
pub(super) struct Ask<'a> {
    pub site: &'a CollectiveSite,
    pub opts: &'a LowerOptions,
    pub topo: &'a Topology,
}

/// An algorithm's candidates for one collective, in a fixed order (none
/// where it does not apply), or why it cannot lower that collective at all.
pub(super) type Propose = fn(&Ask<'_>) -> Result<Vec<Lowering>, String>;

/// What the pass knows about an algorithm before it has a collective.
pub(super) struct Family {
    /// The name `algorithm=` accepts.
    pub name: &'static str,
    /// How it proposes candidates.
    pub candidates: Propose,
    /// Where `algorithm=<name>` goes when this algorithm has no candidate.
    pub fallback: Option<Fallback>,
}

impl Family {
    /// An algorithm called `name` that never falls back.
    pub const fn new(name: &'static str, candidates: Propose) -> Family {
        Family {
            name,
            candidates,
            fallback: None,
        }
    }

    /// This family, going to algorithm `to` where it has no candidate,
    /// `because` (the note's words after `algorithm=<name>`).
    pub const fn falls_back_to(self, to: &'static str, because: &'static str) -> Family {
        Family {
            fallback: Some(Fallback { to, because }),
            ..self
        }
    }
}

/// An algorithm to use instead, and the note's reason.
pub(super) struct Fallback {
    /// The algorithm used instead.
    pub to: &'static str,
    /// Why, as the note says it after `algorithm=<name>`.
    pub because: &'static str,
}

/// Looks an algorithm up by name.
pub(super) fn family(name: &str) -> Option<&'static Family> {
    ALGORITHMS.iter().find(|f| f.name == name)
}

/// Declares [`Lowering`], its dispatch to each algorithm and [`ALGORITHMS`]
/// from one list of `Variant(module::Type) = family` lines.
macro_rules! register_algorithms {
    ($($(#[$doc:meta])* $variant:ident($module:ident::$ty:ident) = $family:expr,)+) => {
        /// An algorithm and its parameters: how one collective is lowered.
        /// The pass records it in each [`super::Decision`]; it prints as the
        /// note spells it (`star@cpu:0`, `ring`, `tree{arity=2}`).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum Lowering {
            /// A group of one rank: every result is the shard itself.
            Identity,
            /// An `all_to_all`'s pieces, sent directly or packed per
            /// staging CPU (not an `algorithm=` choice).
            AllToAll(all_to_all::Exchange),
            /// A star whose staged relays travel in pieces: `auto`'s
            /// pipelined candidate (not an `algorithm=` choice; its name
            /// is `star`).
            Piped(piped::Piped),
            $($(#[$doc])* $variant($module::$ty),)+
        }

        impl Lowering {
            /// The algorithm, or `None` for [`Lowering::Identity`].
            pub(super) fn algorithm(&self) -> Option<&dyn Algorithm> {
                match self {
                    Lowering::Identity => None,
                    Lowering::AllToAll(x) => Some(x),
                    Lowering::Piped(p) => Some(p),
                    $(Lowering::$variant(a) => Some(a),)+
                }
            }

            /// The algorithm's name (`identity` for one rank).
            pub fn name(&self) -> &'static str {
                match self {
                    Lowering::Identity => "identity",
                    Lowering::AllToAll(x) => x.name(),
                    Lowering::Piped(_) => "star",
                    $(Lowering::$variant(_) => {
                        const FAMILY: Family = $family;
                        FAMILY.name
                    })+
                }
            }
        }

        /// Every algorithm, in the order `auto` lists candidates (ties go
        /// to the earlier one).
        pub(super) const ALGORITHMS: &[Family] = &[$($family,)+];
    };
}

register_algorithms! {
    /// Every shard to one point.
    Star(star::Star) = Family::new("star", star::candidates),
    /// Islands first, then a hub.
    Hierarchical(hierarchical::Hierarchical) = Family::new("hierarchical", hierarchical::candidates),
    /// Chunks around a ring.
    Ring(ring::Ring) = Family::new("ring", ring::candidates).falls_back_to("tree", ring::UNFIT),
    /// A k-ary tree.
    Tree(tree::Tree) = Family::new("tree", tree::candidates),
    /// Collective drivers inside islands, then a hub.
    Driver(driver::Driver) =
        Family::new("driver", driver::candidates).falls_back_to("hierarchical", driver::UNFIT),
    /// Each share of a reduce_scatter folded once, in parallel.
    Pairwise(pairwise::Pairwise) =
        Family::new("pairwise", pairwise::candidates).falls_back_to("star", pairwise::UNFIT),
    /// An all_reduce folded in two parts on two GPUs at once.
    Split(split::Split) = Family::new("split", split::candidates).falls_back_to("star", split::UNFIT),
}

impl fmt::Display for Lowering {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.algorithm() {
            Some(a) => a.fmt(f),
            None => f.write_str("identity"),
        }
    }
}

/// Writes `name@device`, or `name` alone without a device: how star,
/// hierarchical and driver print.
pub(super) fn name_at(f: &mut fmt::Formatter<'_>, name: &str, at: Option<Device>) -> fmt::Result {
    match at {
        Some(d) => write!(f, "{name}@{d}"),
        None => f.write_str(name),
    }
}
