//! Overlap of collectives with the compute around them, one file per job:
//! `simulate.rs` is the pure list scheduler that plays priced steps
//! through the threaded runner's lanes, `tasks.rs` turns a lowered graph's
//! plan into its priced steps (the cost model's own prices), and
//! `schedule_collectives.rs` is the `schedule-collectives` pass, which
//! picks an order with them and gives it to the graph.

mod schedule_collectives;
pub mod simulate;
pub mod tasks;

pub use schedule_collectives::{
    was_scheduled, ScheduleCollectives, ScheduleOptions, Scheduled, NAME, OPTIONS,
};
