//! What every test of the workspace shares, written once: the library's
//! unit tests, `fuel-opt`'s and `fuel-collective`'s tests and the
//! cross-crate tests in `tests/tests/` all call it.
//!
//! - [`devices`]: whether a test that needs Vulkan or CUDA runs here, or
//!   prints `SKIP: <reason>` (a failure under `FUEL_REQUIRE_VULKAN=1` /
//!   `FUEL_REQUIRE_CUDA=1`).
//! - [`graphs`]: one shard per device, recording a collective through
//!   `DeviceGroup`, and lowering a graph, through `fuel_collective::run_pipeline` like every caller.
//! - [`run`]: running a graph on devices against the reference interpreter.
//! - [`supported`]: compiling where the devices and dtypes allow it, and
//!   the compile error where they do not.
//! - [`memory`]: what a run leaves behind and may hold (allocator counters,
//!   resident memory).
//! - [`faults`]: a fault at every point one run passes, as the executor
//!   reports them, and the exact messages.
//! - [`golden`]: the golden harness over `tests/golden/`.
//! - [`ranks`]: one thread per rank of an in-process group, with a
//!   deadline.
//! - [`report`]: reading what `fuel-opt` prints (the files a demo lists).
//! - [`viewer`]: pages for the pass viewer's tests (hostile names, a
//!   large graph).
//! - [`world`]: world collectives: the flat group's meaning, recording one
//!   through a `WorldProcess`, checking process graphs with
//!   `interpret_world`.
//!
//! Support code asks the product what it will do; it never models it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

pub mod devices;
pub mod faults;
pub mod golden;
pub mod graphs;
pub mod memory;
pub mod ranks;
pub mod report;
pub mod run;
pub mod viewer;
pub mod world;

#[cfg(feature = "nccl")]
pub use devices::nccl_or_skip;
pub use devices::{devices_or_skip, skip, skip_line, Backend};
pub use faults::{
    assert_exact_fault_messages, expected_fault_message, fail_at_every_point, fault_points,
};
pub use golden::{cases, check_dir, golden_dir, same_meaning};
pub use graphs::{
    all_reduce_graph, demo_graph, lower, lower_on, shards, ALGORITHMS, DEMO_DEVICES, DEVICE_POOL,
};
pub use memory::{all_values_bytes, assert_no_leaks, rss_bytes};
pub use run::{assert_close, compile_env, inputs_and_want, run_and_compare, runs_exactly};
pub use viewer::{chained_all_reduces, hostile_recording, HOSTILE};
pub mod supported;
