//! `lower-collectives`, one file per job. `lower_collectives.rs` is the
//! pass: its options, the loop over collectives in topological order,
//! replacing uses, the note (its doc says what it matches, produces and
//! leaves alone, and how each algorithm works). `site.rs` reads a
//! collective off the graph, `choose.rs` picks the lowering, `estimate.rs`
//! prices candidates on a scratch graph (with [`graph_steps`], the adapter
//! to the pure [`crate::cost`] model; `closed.rs` prices star and ring in
//! closed form where it can), `emit.rs` holds the graph surgery
//! every algorithm uses, [`arrange`] the pure planning helpers, and each
//! algorithm has its own file (`star.rs`, `hierarchical.rs`, `ring.rs`,
//! `tree.rs`, `driver.rs`, `pairwise.rs`, `split.rs`), registered in `algorithm.rs`; `widen.rs` casts
//! the shards of a narrow `Mean` to its accumulator first; `all_to_all.rs`
//! has `all_to_all`'s own two lowerings; `transport.rs` makes f32 copies
//! travel as bf16/f16 (`transport=`), `chunks.rs` cuts values relayed
//! through the staging CPU into overlapping pieces (`chunks=`), and `piped.rs`
//! is `auto`'s candidate that does so for one star. This file only
//! declares them and says what the folder exports.

mod algorithm;
mod all_to_all;
pub mod arrange;
#[cfg(test)]
mod checked;
mod choose;
mod chunks;
mod closed_form;
mod driver;
mod emit;
mod estimate;
mod hierarchical;
mod lower_collectives;
mod pairwise;
mod piped;
mod ring;
mod site;
mod split;
mod star;
mod transport;
mod tree;
mod widen;

pub use algorithm::Lowering;
pub use all_to_all::Exchange;
pub use choose::{Candidate, Candidates, Decision, Reason};
pub use chunks::Chunks;
pub use driver::Driver;
pub use estimate::{
    estimate_graph, estimate_run, estimate_run_on, estimate_run_on_with, graph_steps,
};
pub use hierarchical::Hierarchical;
pub use lower_collectives::{decisions, provenance, LowerCollectives, LowerOptions, NAME, OPTIONS};
pub use pairwise::Pairwise;
pub use piped::Piped;
pub use ring::Ring;
pub use split::Split;
pub use star::Star;
pub use transport::Transport;
pub use tree::Tree;
