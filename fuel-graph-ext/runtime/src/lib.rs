//! fuel-runtime: runs the graphs that `fuel-graph-ext` describes.
//!
//! A pass pipeline produces a lowered graph; [`fuel_graph_ext::plan`] says
//! how it will run; this crate runs it. [`exec`] compiles a graph into an
//! [`Executable`] (opens the devices, checks capacities, builds the plan)
//! and runs it on its runners; [`backend`] is the opened devices and their
//! buffers (CPU arenas, Vulkan through ash, CUDA through cudarc), with the
//! Copy arm that carries out every hop; [`driver`] holds the collective
//! drivers (threads over shared memory, NCCL, MPI); [`calibration`]
//! measures a machine's links into a topology. [`ExecError`] sits at the
//! bottom ([`error`]), so the backends and drivers speak it without
//! importing the executor.
//!
//! Every GPU and MPI library is loaded at run time or behind a cargo
//! feature (`vulkan`, `cuda`, `nccl`, `mpi`); with none of them the crate is
//! the CPU executor and the host collective driver.
//!
//! ```
//! use fuel_graph_ext::{DType, Device, LazyGraph, Tensor, TensorType};
//!
//! let graph = LazyGraph::new("tour");
//! let x = graph.input("x", Device::cpu(0), TensorType::new(DType::F32, &[2]));
//! let y = x.copy_to(Device::cpu(1))?;
//! graph.output_named("y", &y)?;
//! let exe = fuel_runtime::compile(&graph.snapshot(), &[])?;
//! let x = Tensor::from_slice(&[2], &[0.5f32, -1.0])?;
//! let out = graph.results(exe.run(&[("x".to_string(), x)].into())?)?;
//! assert_eq!(out.named("y")?.to_vec::<f32>()?, [0.5, -1.0]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

// Unit tests may unwrap; library code may not (the workspace lints say so).
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]
// docs.rs builds with `--cfg docsrs`: mark what each backend feature adds.
#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod backend;
pub mod calibration;
pub mod driver;
pub mod error;
pub mod exec;
pub mod kernels;
mod runtime_codes;

pub use error::ExecError;
pub use exec::{compile, discover, Executable};
