//! fuel-graph-ext: the lazy multi-device graph and its compiler machinery.
//!
//! The IR ([`graph`], [`op`], [`device`], [`dtype`]), its text form
//! ([`text`]) and pictures ([`dot`]), the [`verify`]er, the pass framework
//! ([`pass`]) with the generic [`passes`], the [`topology`] helper that says
//! which copies are direct, the reference interpreter ([`interp`]) and
//! [`lazy`] tensor builders, and the [`exec`]utor that runs lowered graphs
//! on CPU, Vulkan and CUDA devices. See `docs/ARCHITECTURE.md` for the map.

// Unit tests may unwrap; library code may not (the workspace lints say so).
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

pub mod backend;
pub mod calibration;
pub mod device;
pub mod dot;
pub mod driver;
pub mod dtype;
pub mod elem;
pub mod env;
pub mod exec;
pub mod graph;
pub mod interp;
pub mod lazy;
pub mod op;
pub mod outputs;
pub mod pass;
pub mod passes;
pub mod text;
pub mod topology;
pub mod verify;

pub use device::{Device, DeviceKind};
pub use dtype::{DType, TensorType};
pub use elem::{ElemError, Element};
pub use exec::{compile, discover, ExecError, Executable, Tensor};
pub use graph::{Graph, Node, NodeId, ValueId};
/// The `half` crate, whose `f16` and `bf16` are the element types of the
/// f16 and bf16 dtypes.
pub use half;
pub use lazy::{BuildError, LazyGraph, LazyTensor};
pub use op::{ElementwiseOp, Op, ReduceOp};
pub use outputs::Outputs;
pub use pass::{Changed, DebugOptions, Pass, PassContext, PassError, PassManager, PassRegistry};
pub use topology::Topology;
