//! [`DriverCommunicator`]: the SPMD [`Communicator`] over any
//! [`CollectiveDriver`], one rank per thread or process.
//!
//! Design: collectives are **recorded**, not run. Each call adds one
//! `comm.<collective> %x {comm=ID, ranks=N} @device` node to the rank's
//! lazy graph, where `ID` is this communicator's process-unique id. Nothing
//! moves until the rank compiles its graph with this communicator handed to
//! the executor ([`DriverCommunicator::compile`] does that) and runs it; the
//! executor then reaches each `comm.*` node in graph order, on the worker of
//! the node's device, and runs the collective through the driver on the
//! executor's own buffers (with NCCL the data stays on the GPU). Every rank
//! records the same collectives in the same order, so they meet. The oracle
//! for such graphs is `interp::interpret_world`.
//!
//! Compile once, run many times:
//!
//! ```no_run
//! # use fuel_collective::{Communicator, DriverCommunicator, HostDriver};
//! # use fuel_graph_ext::{interp::HostTensor, DType, Device, LazyGraph, ReduceOp, TensorType};
//! # fn rank(c: &DriverCommunicator<HostDriver>, steps: usize) -> Result<(), Box<dyn std::error::Error>> {
//! let g = LazyGraph::new("rank");
//! let ty = TensorType::new(DType::F32, &[1024]);
//! let x = g.input("x", Device::cpu(0), ty.clone());
//! let y = c.all_reduce(&x, ReduceOp::Sum)?;
//! let exe = c.compile(&[&y])?; // once
//! for step in 0..steps {
//!     let x = HostTensor::from_slice(&[1024], &vec![step as f32; 1024])?;
//!     let inputs = [("x".to_string(), x)];
//!     let out = exe.run_host(&inputs.into_iter().collect())?; // many times
//!     # let _ = out;
//! }
//! # Ok(()) }
//! ```
//!
//! [`DriverCommunicator::evaluate`] is the one-off form: it compiles (once
//! per graph and output, then reuses the executable) and runs with the
//! inputs given to [`DriverCommunicator::bind`]. `barrier` has no tensor to
//! record and runs at once.

use crate::{CollectiveError, Communicator};
use fuel_graph_ext::interp::HostTensor;
use fuel_graph_ext::op::{scatter_extents, CommOp};
use fuel_graph_ext::{LazyTensor, Op, ReduceOp, TensorType, ValueId};
use fuel_runtime::driver::{CollectiveDriver, GraphComm, RankComm};
use fuel_runtime::exec::{Compiler, Executable, RuntimeOptions};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// Ids of communicators, process-wide, so two communicators of one thread
/// or graph are never confused.
static NEXT_ID: AtomicU32 = AtomicU32::new(1);

/// Which graph and output `evaluate` compiled last: the graph's id, its
/// length (recording only appends) and the output value.
type CacheKey = (u64, usize, ValueId);

/// One rank of an SPMD world whose collectives go through driver `D`.
///
/// Four ranks on four threads, each with its own CPU device, over the
/// in-process [`HostDriver`](crate::HostDriver):
///
/// ```
/// use fuel_collective::{CollectiveDriver, CommunicationId, Communicator, Driver, DriverCommunicator, HostDriver};
/// use fuel_graph_ext::{interp::HostTensor, DType, Device, LazyGraph, ReduceOp, TensorType};
/// use std::time::Duration;
///
/// let id = HostDriver::group_id(&CommunicationId::new("doc-example"))?;
/// let ranks: Vec<_> = (0..4usize).map(|rank| {
///     let id = id.clone();
///     std::thread::spawn(move || -> Result<Vec<f32>, String> {
///         let comm = HostDriver::join(id, 4, rank).map_err(|e| e.to_string())?;
///         let dev = HostDriver::open(Device::cpu(rank as u32)).map_err(|e| e.to_string())?;
///         let c = DriverCommunicator::<HostDriver>::new(comm, dev, Duration::from_secs(10));
///         let g = LazyGraph::new("rank");
///         let x = g.input("x", Device::cpu(0), TensorType::new(DType::F32, &[2]));
///         let y = c.all_reduce(&x, ReduceOp::Sum).map_err(|e| e.to_string())?;
///         let mine = HostTensor::from_slice(&[2], &[rank as f32, 1.0]).map_err(|e| e.to_string())?;
///         c.bind("x", mine);
///         let sum = c.evaluate(&y).map_err(|e| e.to_string())?;
///         sum.to_vec::<f32>().map_err(|e| e.to_string())
///     })
/// }).collect();
/// for r in ranks {
///     assert_eq!(r.join().expect("rank thread")?, [6.0, 4.0]); // 0+1+2+3, 1+1+1+1
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct DriverCommunicator<D: CollectiveDriver> {
    rank: Arc<RankComm<D>>,
    id: u32,
    bound: Mutex<BTreeMap<String, HostTensor>>,
    cached: Mutex<Option<(CacheKey, Arc<Executable>)>>,
    runtime: RuntimeOptions,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl<D: CollectiveDriver> DriverCommunicator<D> {
    /// Wraps a joined communicator whose buffers live on `dev`; the barrier
    /// waits at most `timeout` for its result.
    pub fn new(comm: D::Communicator, dev: D::Device, timeout: Duration) -> Self {
        DriverCommunicator {
            rank: Arc::new(RankComm::new(comm, dev, timeout)),
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            bound: Mutex::new(BTreeMap::new()),
            cached: Mutex::new(None),
            runtime: RuntimeOptions::default(),
        }
    }

    /// How its graphs' executables open devices and wait (the defaults
    /// unless given; `fuel-opt` gives [`RuntimeOptions::from_env`]).
    pub fn with_runtime(mut self, runtime: RuntimeOptions) -> Self {
        self.runtime = runtime;
        self
    }

    /// The runtime options its graphs compile with.
    pub fn runtime(&self) -> RuntimeOptions {
        self.runtime
    }

    /// Runs `f` with the driver communicator underneath.
    pub fn with_inner<R>(&self, f: impl FnOnce(&D::Communicator) -> R) -> R {
        self.rank.with_comm(f)
    }

    /// The id its `comm.*` nodes carry.
    pub fn id(&self) -> u32 {
        self.id
    }

    /// This communicator as the executor takes it
    /// (`exec::Compiler::communicator(self.id(), ...)`).
    pub fn graph_comm(&self) -> Arc<dyn GraphComm> {
        self.rank.clone()
    }

    /// Feeds the lazy graph's input `name` with `value` (for `evaluate`).
    pub fn bind(&self, name: &str, value: HostTensor) {
        lock(&self.bound).insert(name.to_string(), value);
    }

    /// Compiles this rank's graph with `outputs` as its results and this
    /// communicator handed to the executor. The executable runs many times;
    /// every rank must run its own the same number of times, in the same
    /// order as its other collectives.
    pub fn compile(&self, outputs: &[&LazyTensor]) -> Result<Executable, CollectiveError> {
        let first = outputs
            .first()
            .ok_or_else(|| CollectiveError::Driver("compile needs at least one output".into()))?;
        let mut g = first.graph().snapshot();
        g.set_outputs(outputs.iter().map(|t| t.value()).collect());
        Compiler::new(&g)
            .runtime(self.runtime)
            .communicator(self.id, self.graph_comm())
            .compile()
            .map_err(|e| {
                CollectiveError::Driver(format!("compiling rank {}'s graph: {e}", self.rank.rank()))
            })
    }

    /// Compiles this rank's graph with `t` as its output (once: later calls
    /// for the same graph and output reuse the executable), runs it on the
    /// bound inputs (every recorded collective meets the other ranks, which
    /// must evaluate the same graph), and returns `t`.
    pub fn evaluate(&self, t: &LazyTensor) -> Result<HostTensor, CollectiveError> {
        let len = t.graph().with_graph(|g| g.node_count());
        let key = (t.graph().id(), len, t.value());
        let exe = {
            let mut cached = lock(&self.cached);
            match &*cached {
                Some((k, exe)) if *k == key => exe.clone(),
                _ => {
                    let exe = Arc::new(self.compile(&[t])?);
                    *cached = Some((key, exe.clone()));
                    exe
                }
            }
        };
        let inputs = lock(&self.bound).clone();
        let mut out = exe.run_host(&inputs).map_err(|e| {
            CollectiveError::Driver(format!("running rank {}'s graph: {e}", self.rank.rank()))
        })?;
        out.pop()
            .ok_or_else(|| CollectiveError::Driver("the graph returned no value".into()))
    }

    /// Records one `comm.*` node reading `t`.
    fn record(&self, t: &LazyTensor, kind: CommOp) -> Result<LazyTensor, CollectiveError> {
        self.record_split(t, kind, None)
    }

    /// Records one `comm.*` node reading `t`, with this rank and `split`
    /// where one is given.
    fn record_split(
        &self,
        t: &LazyTensor,
        kind: CommOp,
        split: Option<Vec<usize>>,
    ) -> Result<LazyTensor, CollectiveError> {
        let device = t
            .device()
            .ok_or_else(|| CollectiveError::Driver("the tensor has no device".into()))?;
        let op = Op::Comm {
            kind,
            comm: self.id,
            ranks: self.rank.ranks(),
            device,
            rank: split.as_ref().map(|_| self.rank.rank()),
            split,
        };
        let mut r = t.graph().record(op, &[t])?;
        r.pop()
            .ok_or_else(|| CollectiveError::Driver("recording the collective gave no value".into()))
    }
}

/// The extent of `ty` along `axis`, or `AxisOutOfRange`.
fn extent_along(axis: usize, ty: &TensorType) -> Result<usize, CollectiveError> {
    ty.shape
        .get(axis)
        .copied()
        .ok_or_else(|| CollectiveError::AxisOutOfRange {
            axis,
            ty: ty.clone(),
            rank: ty.rank(),
        })
}

/// `NotDivisible` unless `size` ranks cut `extent` along `axis` evenly.
fn even_cut(axis: usize, extent: usize, size: usize) -> Result<(), CollectiveError> {
    if extent.is_multiple_of(size) {
        Ok(())
    } else {
        Err(CollectiveError::NotDivisible { axis, extent, size })
    }
}

impl<D: CollectiveDriver> Communicator for DriverCommunicator<D> {
    fn rank(&self) -> usize {
        self.rank.rank()
    }

    fn world_size(&self) -> usize {
        self.rank.ranks()
    }

    fn all_reduce(&self, tensor: &LazyTensor, op: ReduceOp) -> Result<LazyTensor, CollectiveError> {
        self.record(tensor, CommOp::AllReduce(op))
    }

    fn broadcast(&self, tensor: &LazyTensor, root: usize) -> Result<LazyTensor, CollectiveError> {
        let size = self.rank.ranks();
        if root >= size {
            return Err(CollectiveError::RootOutOfRange { root, size });
        }
        self.record(tensor, CommOp::Broadcast { root })
    }

    fn all_gather(&self, tensor: &LazyTensor, axis: usize) -> Result<LazyTensor, CollectiveError> {
        extent_along(axis, &tensor.ty())?;
        self.record(tensor, CommOp::AllGather { axis })
    }

    fn reduce_scatter(
        &self,
        tensor: &LazyTensor,
        op: ReduceOp,
        axis: usize,
    ) -> Result<LazyTensor, CollectiveError> {
        even_cut(axis, extent_along(axis, &tensor.ty())?, self.rank.ranks())?;
        self.record(tensor, CommOp::ReduceScatter { op, axis })
    }

    fn all_gather_uneven(
        &self,
        tensor: &LazyTensor,
        axis: usize,
        extents: &[usize],
    ) -> Result<LazyTensor, CollectiveError> {
        let extent = extent_along(axis, &tensor.ty())?;
        // Every rank's extent equal to this one's: the plain all_gather.
        // Any other list is checked by the typing rule (its length, this
        // rank's entry against its extent, the sum).
        if extents.len() == self.rank.ranks() && extents.iter().all(|e| *e == extent) {
            return self.record(tensor, CommOp::AllGather { axis });
        }
        self.record_split(tensor, CommOp::AllGather { axis }, Some(extents.to_vec()))
    }

    fn reduce_scatter_split(
        &self,
        tensor: &LazyTensor,
        op: ReduceOp,
        axis: usize,
        split: Option<&[usize]>,
    ) -> Result<LazyTensor, CollectiveError> {
        let extent = extent_along(axis, &tensor.ty())?;
        let extents = scatter_extents(split, axis, extent, self.rank.ranks())?;
        if extents.iter().all(|e| Some(e) == extents.first()) {
            return self.record(tensor, CommOp::ReduceScatter { op, axis });
        }
        self.record_split(tensor, CommOp::ReduceScatter { op, axis }, Some(extents))
    }

    fn all_to_all(
        &self,
        tensor: &LazyTensor,
        axis: usize,
        split: Option<&[usize]>,
    ) -> Result<LazyTensor, CollectiveError> {
        let extent = extent_along(axis, &tensor.ty())?;
        let size = self.rank.ranks();
        // A split of equal entries is the even cut: recorded as none, so
        // it prints as before. Any other is checked by the typing rule
        // (count, this rank's row against its extent, the column's sum).
        let even = |s: &[usize]| {
            s.len() == size * size
                && s.iter().all(|e| Some(e) == s.first())
                && s.first().and_then(|e| e.checked_mul(size)) == Some(extent)
        };
        let split = split.filter(|s| !even(s));
        if let Some(split) = split {
            return self.record_split(tensor, CommOp::AllToAll { axis }, Some(split.to_vec()));
        }
        even_cut(axis, extent, size)?;
        self.record(tensor, CommOp::AllToAll { axis })
    }

    fn barrier(&self) -> Result<(), CollectiveError> {
        self.rank
            .barrier()
            .map_err(|e| CollectiveError::Driver(e.to_string()))
    }
}
