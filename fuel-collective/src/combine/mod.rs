//! `combine-collectives`, one file per job: `combine_collectives.rs` is the
//! pass (options, candidates, the independence check, the notes; its doc
//! says what it matches, produces and leaves alone), `plan.rs` the pure
//! bucketing and cost lines, `model.rs` the cost model's figures per
//! group, `surgery.rs` the graph rewrite. This file only declares them and
//! says what the folder exports.

mod combine_collectives;
mod model;
pub mod plan;
mod surgery;

pub use combine_collectives::{Bytes, CombineCollectives, CombineOptions, NAME, OPTIONS};
pub(crate) use combine_collectives::{Candidate, Key};
