//! fuel-graph-ext: the lazy multi-device graph and its compiler machinery.
//!
//! The IR ([`graph`], [`op`], [`device`], [`dtype`]), its text form
//! ([`text`]) and pictures ([`dot`]), the [`verify`]er, the pass framework
//! ([`pass`]) with the generic [`passes`], the [`topology`] helper that says
//! which copies are direct, the reference interpreter ([`interp`]) and
//! [`lazy`] tensor builders, and the [`plan`] that says how a lowered graph
//! will run. The crate opens no device: the `fuel-runtime` crate (beside
//! this one) runs graphs on CPU, Vulkan and CUDA devices, and the cost model
//! in `fuel-collective` prices the same [`plan`]. See
//! `docs/ARCHITECTURE.md` for the map.
//!
//! # A two-minute tour
//!
//! - **Values.** A [`TensorType`] is a [`DType`] and a shape; a [`Device`]
//!   is `cpu:N`, `cuda:N` or `vulkan:N`. Host data is a [`Tensor`] (bytes
//!   for the runtime) or an [`interp::HostTensor`] (the interpreter's),
//!   both made from `&[T]` with `from_slice` and read with `to_vec::<T>()`
//!   for every [`Element`] type (`f32`, `half::f16`, `i64`, `bool`, ...).
//! - **Recording.** A [`LazyGraph`] records [`LazyTensor`]s: inputs,
//!   element-wise ops, slices, copies, and collectives (recorded by
//!   `fuel_collective::DeviceGroup`). Nothing runs; types are checked as you
//!   go.
//! - **Compiling a graph.** A [`PassManager`] runs a pipeline string built
//!   from a [`PassRegistry`] (`cse,dce`, plus `lower-collectives` once
//!   `fuel_collective::register` added it). [`text::print`] and
//!   [`dot::to_dot`] show every step; [`verify`] checks one.
//! - **Running.** `fuel_runtime::compile` opens the devices and plans the
//!   buffers once ([`plan::Schedule`]); `Executable::run` (or `run_into`)
//!   runs with named inputs, and [`LazyGraph::results`] finds each output
//!   by its handle or name. The
//!   [`interp`]reter computes the same values on the host, bit for bit, as
//!   the oracle every test compares with.
//!
//! ```
//! use fuel_graph_ext::{DType, Device, LazyGraph, Tensor, TensorType};
//! use fuel_runtime::compile;
//!
//! let graph = LazyGraph::new("tour");
//! let x = graph.input("x", Device::cpu(0), TensorType::new(DType::F32, &[2]));
//! let y = x.copy_to(Device::cpu(1))?;
//! graph.output_named("y", &y)?;
//! let exe = compile(&graph.snapshot(), &[])?;
//! let x = Tensor::from_slice(&[2], &[0.5f32, -1.0])?;
//! let out = graph.results(exe.run(&[("x".to_string(), x)].into())?)?;
//! assert_eq!(out.named("y")?.to_vec::<f32>()?, [0.5, -1.0]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

// Unit tests may unwrap; library code may not (the workspace lints say so).
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

pub mod device;
pub mod dot;
pub mod dtype;
pub mod elem;
pub mod env;
pub mod error_code;
pub mod graph;
pub mod html;
pub mod interp;
pub mod lazy;
pub mod limits;
pub mod op;
pub mod outputs;
pub mod pass;
pub mod passes;
pub mod plan;
pub mod tensor;
pub mod text;
pub mod textfile;
pub mod topology;
pub mod verify;

pub use device::{Device, DeviceKind};
pub use dtype::{DType, TensorType};
pub use elem::{ElemError, Element};
pub use graph::{Graph, Node, NodeId, ValueId};
/// The `half` crate, whose `f16` and `bf16` are the element types of the
/// f16 and bf16 dtypes.
pub use half;
pub use lazy::{BuildError, LazyGraph, LazyTensor};
pub use op::{ElementwiseOp, Op, ReduceOp};
pub use outputs::{OutputError, Outputs};
pub use pass::{Changed, DebugOptions, Pass, PassContext, PassError, PassManager, PassRegistry};
pub use plan::{PlanError, Schedule};
pub use tensor::Tensor;
pub use topology::Topology;
