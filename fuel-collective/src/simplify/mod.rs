//! `simplify-collectives`, one file per job: `simplify_collectives.rs` is
//! the pass (options, sweeps, the cost model's veto, the notes; its doc
//! says what each rule matches, produces and leaves alone, and which rules
//! are bit-exact), `lattice.rs` the replication lattice (pure: read off the
//! graph, also used by [`crate::grad`]), `rules.rs` the pure matchers,
//! `cost.rs` the estimates of what a rewrite adds and removes, and
//! `edit.rs` the graph rewrite. This file only declares them and says
//! what the folder exports.

mod cost;
mod lattice;
mod rules;
mod simplify_collectives;
pub(crate) mod edit;

pub use lattice::Replication;
pub use simplify_collectives::{SimplifyCollectives, SimplifyOptions, NAME, OPTIONS};
#[cfg(test)]
mod tests;
