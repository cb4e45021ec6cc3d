//! Overlap of collectives with the compute around them, one file per job:
//! `simulate.rs` is the pure list scheduler that plays priced steps
//! through the threaded runner's lanes, `tasks.rs` turns a lowered graph's
//! plan into its priced steps (the cost model's own prices), and
//! `schedule_collectives.rs` is the `schedule-collectives` pass, which
//! picks an order with them and gives it to the graph, and
//! `schedule_hash.rs` lists and hashes the order every rank of a world
//! must issue alike.

mod schedule_collectives;
mod schedule_hash;
pub mod simulate;
pub mod tasks;

pub use schedule_collectives::{
    was_scheduled, ScheduleCollectives, ScheduleOptions, Scheduled, NAME, OPTIONS,
};
pub use schedule_hash::{fnv1a, schedule_hash, schedule_steps, ScheduleStep, FNV_OFFSET};
