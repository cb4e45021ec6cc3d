//! fuel-collective: DeviceGroup collectives and the `lower-collectives` pass.
//!
//! Users build collectives in one of two shapes. [`DeviceGroup`] is for one
//! process that drives several devices and holds every shard; each call
//! records one collective node into the lazy graph. [`Communicator`] is the
//! one-rank-per-process shape (see [`comm`] for why both exist). The
//! [`lower`] pass, registered as `lower-collectives`, rewrites collective
//! nodes into copies and local ops, choosing an algorithm with the pure
//! [`cost`] model and the pure [`lower::arrange`] helpers (islands, ring
//! chunks, tree shape). `docs/lowering.md` explains the algorithms with pictures.
//!
//! The collective drivers (host threads, NCCL, MPI) that run a collective as
//! one operation live in the runtime, `fuel_runtime::driver` (the executor
//! runs `driver_all_reduce` and `comm.*` nodes through them); this crate
//! re-exports them as `driver` and puts the SPMD `DriverCommunicator` on
//! top. Those, the eager calls and world runs need the runtime, behind the
//! default `runtime` feature; without it the crate is the recording API,
//! the passes and the cost model, with no device code in its build.
//!
//! [`registry`] gives a pass registry with every pass of the project, and
//! [`run_pipeline`] builds a pipeline from it and runs it: the one way
//! `fuel-opt`, the benches and the tests run a pipeline.
//!
//! # A two-minute tour
//!
//! 1. **Devices and a group.** A [`Device`](fuel_graph_ext::Device) is
//!    `cpu:N`, `cuda:N` or `vulkan:N`; a [`DeviceGroup`] is an ordered list
//!    of them, rank `i` being device `i`.
//! 2. **The shortcut.** [`DeviceGroup::all_reduce_now`] takes one host
//!    [`Tensor`](fuel_graph_ext::Tensor) per rank (made with
//!    [`Tensor::from_slice`](fuel_graph_ext::Tensor::from_slice) from
//!    `&[f32]`, `&[half::f16]`, ...) and replaces each with the result; it
//!    compiles once per shape and runs every call after that.
//! 3. **The lazy path.** A [`LazyGraph`](fuel_graph_ext::LazyGraph) records
//!    [`LazyTensor`](fuel_graph_ext::LazyTensor)s: inputs, element-wise ops
//!    and the group's collectives ([`DeviceGroup::all_reduce`], ...), with
//!    nothing running yet.
//! 4. **Lowering.** A [`PassManager`] built
//!    from a pipeline string ([`DEFAULT_PIPELINE`], or
//!    [`pipeline_with`]`("algorithm=ring")`) rewrites each collective into
//!    copies and local ops, choosing an algorithm with the [`cost`] model
//!    and a [`Topology`]. The result prints as
//!    text IR ([`fuel_graph_ext::text::print`]) and DOT
//!    ([`fuel_graph_ext::dot`]).
//! 5. **Running.** `fuel_runtime::compile` opens
//!    the devices once; `Executable::run`
//!    (or `run_into`, which reuses output buffers) runs it with named
//!    inputs, and [`LazyGraph::results`](fuel_graph_ext::LazyGraph::results)
//!    finds each output by the handle it was recorded with.
//! 6. **One rank per thread or process.** `DriverCommunicator` records
//!    `comm.*` collectives that a `CollectiveDriver` (`HostDriver`,
//!    NCCL, MPI) runs at execution time.
//!
//! ```
//! use fuel_collective::DeviceGroup;
//! use fuel_graph_ext::{Device, ReduceOp, Tensor};
//!
//! let group = DeviceGroup::new([Device::cpu(0), Device::cpu(1)])?;
//! let mut shards = vec![Tensor::from_slice(&[2], &[1i32, 2])?, Tensor::from_slice(&[2], &[10i32, 20])?];
//! group.all_reduce_now(&mut shards, ReduceOp::Sum)?;
//! assert_eq!(shards[0].to_vec::<i32>()?, [11, 22]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Every error names the problem and its fix; `docs/errors.md` lists them
//! all with their exact messages.

// docs.rs builds with `--cfg docsrs`: mark what each feature adds.
#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod combine;
pub mod comm;
pub mod cost;
#[cfg(feature = "runtime")]
mod driver_comm;
#[cfg(feature = "runtime")]
pub mod eager;
pub mod grad;
pub mod group;
pub mod lower;
pub mod overlap;
pub mod simplify;
pub mod viewer;
#[cfg(feature = "runtime")]
pub mod world;
#[cfg(feature = "runtime")]
pub mod world_agree;
pub mod world_cost;

/// The collective drivers, from the runtime (`fuel_runtime::driver`).
#[cfg(feature = "runtime")]
pub use fuel_runtime::driver;

pub use comm::{Communicator, IdentityComm};
#[cfg(feature = "mpi")]
pub use driver::MpiDriver;
#[cfg(feature = "nccl")]
pub use driver::NcclDriver;
#[cfg(feature = "runtime")]
pub use driver::{
    Call, CollectiveDriver, CommunicationId, DeviceResource, Driver, DriverError, HostDriver,
    JoinOptions, P2p,
};
/// The graph's [`DType`](fuel_graph_ext::DType) under the name the
/// drivers once gave it; the drivers take `DType` itself. Kept only while
/// a test still names it.
#[cfg(feature = "runtime")]
pub type ElemType = fuel_graph_ext::DType;
#[cfg(feature = "runtime")]
pub use driver_comm::DriverCommunicator;
#[cfg(feature = "runtime")]
pub use eager::EagerError;
pub use group::{CollectiveError, DeviceGroup};
pub use lower::{Decision, LowerCollectives, LowerOptions, Lowering};
#[cfg(feature = "runtime")]
pub use world::{WorldGroup, WorldProcess};

use fuel_graph_ext::pass::{
    DebugOptions, PassContext, PassError, PassInfo, PassManager, PassRegistry,
};
use fuel_graph_ext::{Graph, Topology};
use std::sync::Arc;

/// The pipeline that takes a graph with collectives to one an executor can
/// run: rewrite collectives into cheaper equal ones, merge small independent all-reduces, lower the collectives, legalise every remaining edge, then clean up.
pub const DEFAULT_PIPELINE: &str =
    "simplify-collectives,combine-collectives,lower-collectives,insert-cross-device-copies,split-cross-vendor-copies,cse,dce";

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

/// Adds this crate's passes (`simplify-collectives`, `combine-collectives`,
/// `lower-collectives`, `schedule-collectives`)
/// to `r`, so a graph compiler's own registry can name them in a pipeline.
///
/// ```
/// use fuel_graph_ext::{DebugOptions, PassContext, PassManager, PassRegistry};
///
/// let mut registry = PassRegistry::with_builtin();
/// fuel_collective::register(&mut registry);
/// let pipeline = "lower-collectives{algorithm=ring},insert-cross-device-copies,cse,dce";
/// let pm = PassManager::new(&registry, pipeline, PassContext::default(), DebugOptions::default())?;
/// # let _ = pm;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn register(r: &mut PassRegistry) {
    r.register(PassInfo {
        name: simplify::NAME,
        summary: "rewrite collectives into cheaper ones that compute the same values (all_gather of reduce_scatter into all_reduce, reductions of replicated values into local ops, ...)",
        options: simplify::OPTIONS,
        ctor: |o, cx| {
            let opts = simplify::SimplifyOptions::from_pass_options(o)?;
            Ok(Box::new(simplify::SimplifyCollectives::new(
                opts,
                cx.topology.clone(),
            )))
        },
    });
    r.register(PassInfo {
        name: combine::NAME,
        summary: "merge independent all_reduces of one group, op and dtype into one over their joined shards, where the cost model says it pays",
        options: combine::OPTIONS,
        ctor: |o, cx| {
            let opts = combine::CombineOptions::from_pass_options(o)?;
            Ok(Box::new(combine::CombineCollectives::new(
                opts,
                cx.topology.clone(),
            )))
        },
    });
    r.register(PassInfo {
        name: lower::NAME,
        summary: "lower every collective into copies (staged through a CPU where needed), n-ary element-wise ops, div, slice and concat",
        options: lower::OPTIONS,
        ctor: |o, cx| {
            let opts = LowerOptions::from_pass_options(o)?;
            Ok(Box::new(LowerCollectives::new(opts, cx.topology.clone())))
        },
    });
    r.register(PassInfo {
        name: overlap::NAME,
        summary: "order a lowered graph's steps so its collectives run behind its extern compute (the cost model's list schedule; a graph with no extern op is left alone)",
        options: overlap::OPTIONS,
        ctor: |o, cx| {
            let opts = overlap::ScheduleOptions::from_pass_options(o)?;
            Ok(Box::new(overlap::ScheduleCollectives::new(
                opts,
                cx.topology.clone(),
            )))
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
///
/// ```
/// use fuel_collective::{pipeline_with, run_pipeline, DeviceGroup};
/// use fuel_graph_ext::{DType, Device, LazyGraph, ReduceOp, TensorType, Topology};
/// use std::sync::Arc;
///
/// let group = DeviceGroup::new([Device::cpu(0), Device::cpu(1), Device::cpu(2)])?;
/// let graph = LazyGraph::new("g");
/// let ty = TensorType::new(DType::F32, &[6]);
/// let shards: Vec<_> = group.devices().iter().enumerate()
///     .map(|(i, d)| graph.input(&format!("x{i}"), *d, ty.clone())).collect();
/// for t in group.all_reduce(&shards, ReduceOp::Sum)? { graph.output(&t)?; }
///
/// let mut g = graph.snapshot();
/// run_pipeline(&mut g, &pipeline_with("algorithm=star"), Arc::new(Topology::default()), Default::default())?;
/// let text = fuel_graph_ext::text::print(&g);
/// assert!(text.contains("copy") && !text.contains("= all_reduce")); // lowered
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
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
