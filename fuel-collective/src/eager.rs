//! Eager collectives: one call that records, lowers, compiles and runs.
//!
//! [`DeviceGroup::all_reduce_now`] (and `broadcast_now`, `all_gather_now`,
//! `reduce_scatter_now`) is a documented shortcut over the lazy API for the
//! common path: it takes host [`Tensor`]s, shard `i` being rank `i`'s data,
//! and replaces them with the results. The first call for a given
//! collective and shard types records a one-collective [`LazyGraph`], lowers
//! it with [`DEFAULT_PIPELINE`](crate::DEFAULT_PIPELINE) for the devices'
//! calibrated [`Topology`] (the defaults where none is cached), compiles it
//! and keeps the [`Executable`] in the group's cache; every later call with
//! the same key only runs it. So a training loop that calls it every step
//! compiles once. The key is (collective and its arguments, every shard's
//! type); the group is the one whose cache it is (clones share it). At most
//! [`CACHE_ENTRIES`] executables are kept, the oldest dropped first.
//!
//! Errors are the lazy path's own: a wrong shard count, dtype or shape is
//! the [`CollectiveError`] recording gives, and compile or run errors are
//! the executor's, so nothing here needs an error of its own.

use crate::group::{CollectiveError, DeviceGroup};
use fuel_graph_ext::pass::{DebugOptions, PassError};
use fuel_graph_ext::Tensor;
use fuel_graph_ext::{LazyGraph, LazyTensor, ReduceOp, TensorType};
use fuel_runtime::calibration::CacheError;
use fuel_runtime::exec::{self, ExecError, Executable};
use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};

/// How many compiled executables one group keeps for its eager calls.
pub const CACHE_ENTRIES: usize = 64;

/// Why an eager call failed: the error of the step that failed, with its
/// own message (see `docs/errors.md`).
#[derive(Debug, thiserror::Error)]
pub enum EagerError {
    /// The shards do not fit the collective (recording refused them).
    #[error(transparent)]
    Collective(#[from] CollectiveError),
    /// The calibration cache for these devices cannot be used.
    #[error(transparent)]
    Topology(#[from] CacheError),
    /// Lowering failed.
    #[error(transparent)]
    Pass(#[from] PassError),
    /// Compiling or running failed.
    #[error(transparent)]
    Exec(#[from] ExecError),
}

/// Which collective an eager call runs, with its arguments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    AllReduce(ReduceOp),
    Broadcast(usize),
    AllGather(usize),
    ReduceScatter(ReduceOp, usize),
}

/// One cached executable and what it was compiled for.
struct Entry {
    kind: Kind,
    types: Vec<TensorType>,
    exe: Arc<Executable>,
}

/// A group's compiled eager collectives.
#[derive(Default)]
pub struct Cache {
    entries: Mutex<VecDeque<Entry>>,
    compiles: Mutex<usize>,
    runtime: exec::RuntimeOptions,
}

impl std::fmt::Debug for Cache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.entries.lock().map_or(0, |e| e.len());
        write!(f, "Cache({n} executables)")
    }
}

impl DeviceGroup {
    /// This group with its eager calls compiled with `runtime` (the
    /// defaults unless given) and an empty cache of them.
    pub fn with_runtime(mut self, runtime: exec::RuntimeOptions) -> DeviceGroup {
        self.eager = std::sync::Arc::new(Cache {
            runtime,
            ..Cache::default()
        });
        self
    }

    /// Every rank's shard becomes the reduction of all shards: the eager
    /// form of [`DeviceGroup::all_reduce`]. `shards[i]` is rank `i`'s data
    /// (it is placed on `devices()[i]` for the run) and is replaced by the
    /// result. The first call for a shape, dtype and `op` compiles; the
    /// others only run (see [`DeviceGroup::eager_compiles`]).
    ///
    /// ```
    /// use fuel_collective::DeviceGroup;
    /// use fuel_graph_ext::{Device, ReduceOp, Tensor};
    ///
    /// let group = DeviceGroup::new([Device::cpu(0), Device::cpu(1)])?;
    /// let mut grads = vec![
    ///     Tensor::from_slice(&[3], &[1.0f32, 2.0, 3.0])?,
    ///     Tensor::from_slice(&[3], &[3.0f32, 4.0, 5.0])?,
    /// ];
    /// for _step in 0..10 {
    ///     group.all_reduce_now(&mut grads, ReduceOp::Mean)?;
    /// }
    /// assert_eq!(grads[1].to_vec::<f32>()?, [2.0, 3.0, 4.0]);
    /// assert_eq!(group.eager_compiles(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn all_reduce_now(&self, shards: &mut [Tensor], op: ReduceOp) -> Result<(), EagerError> {
        self.run_now(Kind::AllReduce(op), shards)
    }

    /// Every rank's tensor becomes rank `root`'s: the eager form of
    /// [`DeviceGroup::broadcast`]. `tensors` holds one tensor per rank, all
    /// of one type; only `tensors[root]`'s values are read.
    pub fn broadcast_now(&self, tensors: &mut [Tensor], root: usize) -> Result<(), EagerError> {
        self.run_now(Kind::Broadcast(root), tensors)
    }

    /// Every rank's shard becomes all shards joined along `axis`: the eager
    /// form of [`DeviceGroup::all_gather`].
    pub fn all_gather_now(&self, shards: &mut [Tensor], axis: usize) -> Result<(), EagerError> {
        self.run_now(Kind::AllGather(axis), shards)
    }

    /// Rank `i`'s shard becomes the `i`-th slice along `axis` of the
    /// reduction: the eager form of [`DeviceGroup::reduce_scatter`].
    pub fn reduce_scatter_now(
        &self,
        shards: &mut [Tensor],
        op: ReduceOp,
        axis: usize,
    ) -> Result<(), EagerError> {
        self.run_now(Kind::ReduceScatter(op, axis), shards)
    }

    /// How many executables this group (and its clones) compiled for eager
    /// calls so far: one per distinct collective and shard types while the
    /// cache holds them.
    pub fn eager_compiles(&self) -> usize {
        self.eager.compiles.lock().map_or(0, |c| *c)
    }

    /// Runs `kind` over `shards` with the cached executable, compiling it
    /// on the first call, and puts the results in `shards`.
    fn run_now(&self, kind: Kind, shards: &mut [Tensor]) -> Result<(), EagerError> {
        let types: Vec<TensorType> = shards.iter().map(|t| t.ty().clone()).collect();
        let exe = self.cached(kind, types)?;
        let inputs: BTreeMap<String, Tensor> = shards
            .iter()
            .enumerate()
            .map(|(i, t)| (input_name(i), t.clone()))
            .collect();
        let results = exe.run(&inputs)?;
        for (shard, result) in shards.iter_mut().zip(results) {
            *shard = result;
        }
        Ok(())
    }

    /// The executable for `kind` over shards of `types`, compiled now if
    /// the cache does not hold it.
    fn cached(&self, kind: Kind, types: Vec<TensorType>) -> Result<Arc<Executable>, EagerError> {
        // Compiling under the lock keeps two threads from compiling one key
        // twice; a group's eager calls are meant for one training loop.
        let mut entries = self.eager.entries.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(e) = entries.iter().find(|e| e.kind == kind && e.types == types) {
            return Ok(e.exe.clone());
        }
        let exe = Arc::new(self.compile_now(kind, &types)?);
        if let Ok(mut c) = self.eager.compiles.lock() {
            *c += 1;
        }
        if entries.len() >= CACHE_ENTRIES {
            entries.pop_front();
        }
        entries.push_back(Entry {
            kind,
            types,
            exe: exe.clone(),
        });
        Ok(exe)
    }

    /// Records `kind` over inputs of `types` (input `i` on rank `i`'s
    /// device), lowers it with the default pipeline and compiles it.
    fn compile_now(&self, kind: Kind, types: &[TensorType]) -> Result<Executable, EagerError> {
        let graph = LazyGraph::new(&format!("eager_{kind:?}").to_lowercase());
        let shards: Vec<LazyTensor> = types
            .iter()
            .zip(
                self.devices()
                    .iter()
                    .chain(std::iter::repeat(&self.leader())),
            )
            .enumerate()
            .map(|(i, (ty, d))| graph.input(&input_name(i), *d, ty.clone()))
            .collect();
        let results = match kind {
            Kind::AllReduce(op) => self.all_reduce(&shards, op)?,
            Kind::AllGather(axis) => self.all_gather(&shards, axis)?,
            Kind::ReduceScatter(op, axis) => self.reduce_scatter(&shards, op, axis)?,
            Kind::Broadcast(root) => {
                self.check_broadcast_now(types, root)?;
                let first = shards.first().ok_or(CollectiveError::NoShards {
                    op: "broadcast",
                    size: self.size(),
                })?;
                let src = shards.get(root).unwrap_or(first);
                // Every input is an input of the graph (so a run takes one
                // tensor per rank), but only the root's is read.
                self.broadcast(src, root)?
            }
        };
        for r in &results {
            graph.output(r).map_err(CollectiveError::Build)?;
        }
        let mut g = graph.snapshot();
        let topology = Arc::new(fuel_runtime::calibration::topology_for(self.devices())?);
        crate::run_pipeline(
            &mut g,
            crate::DEFAULT_PIPELINE,
            topology.clone(),
            DebugOptions::default(),
        )?;
        Ok(exec::Compiler::new(&g)
            .topology(&topology)
            .runtime(self.eager.runtime)
            .compile()?)
    }

    /// A broadcast's tensors: one per rank, all of one type (as the
    /// collectives with shards require).
    fn check_broadcast_now(
        &self,
        types: &[TensorType],
        root: usize,
    ) -> Result<(), CollectiveError> {
        if types.len() != self.size() {
            return Err(CollectiveError::ShardCount {
                op: "broadcast",
                shards: types.len(),
                size: self.size(),
            });
        }
        if root >= self.size() {
            return Err(CollectiveError::RootOutOfRange {
                root,
                size: self.size(),
            });
        }
        if let Some(first) = types.first() {
            for (index, ty) in types.iter().enumerate() {
                if ty.dtype != first.dtype {
                    return Err(CollectiveError::DTypeMismatch {
                        index,
                        found: ty.clone(),
                        expected: first.clone(),
                    });
                }
                if ty != first {
                    return Err(CollectiveError::ShapeMismatch {
                        index,
                        found: ty.clone(),
                        expected: first.clone(),
                    });
                }
            }
        }
        Ok(())
    }
}

/// The graph input that rank `i`'s shard feeds.
fn input_name(i: usize) -> String {
    format!("shard{i}")
}
