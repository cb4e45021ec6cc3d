//! fuel-collective: DeviceGroup collectives and the `lower-collectives` pass.
//!
//! Users build collectives in one of two shapes. [`DeviceGroup`] is for one
//! process that drives several devices and holds every shard; each call
//! records one collective node into the lazy graph. [`Communicator`] is the
//! one-rank-per-process shape (see [`comm`] for why both exist). The
//! [`lower`] pass, registered as `lower-collectives`, rewrites collective
//! nodes into copies and local ops, choosing an algorithm with the pure
//! [`cost`] model and the pure [`lower::shape`] helpers (islands, ring
//! chunks, tree shape). `docs/lowering.md` explains the algorithms with pictures.
//!
//! The collective drivers (host threads, NCCL, MPI) that run a collective as
//! one operation live beside the backends, in `fuel_graph_ext::driver`
//! (the executor runs `driver_all_reduce` and `comm.*` nodes through them);
//! this crate re-exports them as [`driver`] and puts the SPMD
//! [`DriverCommunicator`] on top.
//!
//! [`registry`] gives a pass registry with every pass of the project, and
//! [`run_pipeline`] builds a pipeline from it and runs it: the one way
//! `fuel-opt`, the benches and the tests run a pipeline.

pub mod comm;
pub mod cost;
mod driver_comm;
pub mod group;
pub mod lower;
pub mod world;
pub mod world_cost;

/// The collective drivers, from the runtime (`fuel_graph_ext::driver`).
pub use fuel_graph_ext::driver;

pub use comm::{Communicator, IdentityComm};
#[cfg(feature = "mpi")]
pub use driver::MpiDriver;
#[cfg(feature = "nccl")]
pub use driver::NcclDriver;
pub use driver::{
    CollectiveDriver, CommunicationId, DeviceResource, Driver, DriverError, ElemType, HostDriver,
    JoinOptions,
};
pub use driver_comm::DriverCommunicator;
pub use group::{CollectiveError, DeviceGroup};
pub use lower::{Decision, LowerCollectives, LowerOptions, Lowering};
pub use world::WorldGroup;

use fuel_graph_ext::pass::{
    DebugOptions, PassContext, PassError, PassInfo, PassManager, PassRegistry,
};
use fuel_graph_ext::{Graph, Topology};
use std::sync::Arc;

/// The pipeline that takes a graph with collectives to one an executor can
/// run: lower the collectives, legalise every remaining edge, then clean up.
pub const DEFAULT_PIPELINE: &str =
    "lower-collectives,insert-cross-device-copies,split-cross-vendor-copies,cse,dce";

/// [`DEFAULT_PIPELINE`] with options for `lower-collectives`, such as
/// `algorithm=ring` (empty for the defaults).
pub fn pipeline_with(lower_options: &str) -> String {
    if lower_options.trim().is_empty() {
        DEFAULT_PIPELINE.to_string()
    } else {
        DEFAULT_PIPELINE.replacen(
            "lower-collectives",
            &format!("lower-collectives{{{lower_options}}}"),
            1,
        )
    }
}

/// Adds this crate's passes (`lower-collectives`) to `r`.
pub fn register(r: &mut PassRegistry) {
    r.register(PassInfo {
        name: lower::NAME,
        summary: "lower every collective into copies (staged through a CPU where needed), n-ary element-wise ops, div, slice and concat",
        options: lower::OPTIONS,
        ctor: |o, cx| {
            let opts = LowerOptions::from_pass_options(o)?;
            Ok(Box::new(LowerCollectives::new(opts, cx.topology.clone())))
        },
    });
}

/// A registry with the generic passes of `fuel-graph-ext` and this crate's.
pub fn registry() -> PassRegistry {
    let mut r = PassRegistry::with_builtin();
    register(&mut r);
    r
}

/// Builds `pipeline` from [`registry`] for `topology`, with `debug` saying
/// what to verify, print and dump, and runs it on `g` in place. Returns the
/// pass manager, whose passes keep what they found in the run (read
/// `lower-collectives`' choices with [`lower::decisions`]). A bad pipeline
/// string and a failing pass are both a [`PassError`].
pub fn run_pipeline(
    g: &mut Graph,
    pipeline: &str,
    topology: Arc<Topology>,
    debug: DebugOptions,
) -> Result<PassManager, PassError> {
    let mut pm = PassManager::new(&registry(), pipeline, PassContext { topology }, debug)?;
    pm.run(g)?;
    Ok(pm)
}
