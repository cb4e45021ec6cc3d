//! Eager collectives: one call that records, lowers, compiles and runs.
//!
//! [`DeviceGroup::all_reduce_now`] (and `broadcast_now`, `all_gather_now`,
//! `reduce_scatter_now`, `reduce_scatter_split_now`) is a documented
//! shortcut over the lazy API for the common path: it takes host
//! [`Tensor`]s, shard `i` being rank `i`'s data. The first call for a given
//! collective and shard types records a one-collective [`LazyGraph`], lowers
//! it with [`DEFAULT_PIPELINE`](crate::DEFAULT_PIPELINE) for the devices'
//! calibrated [`Topology`](fuel_graph_ext::Topology) (the defaults where none is cached, as the lazy
//! path's `calibration::topology_for` gives), compiles it and keeps the
//! [`Executable`] in the group's cache; every later call with the same key
//! only runs it. So a training loop that calls it every step compiles once.
//! The key is (collective and its arguments, every shard's type); the group
//! is the one whose cache it is (clones share it). At most
//! [`CACHE_ENTRIES`] executables are kept, the oldest dropped first.
//!
//! Shapes change only where the signature says so: `all_reduce_now` and
//! `broadcast_now` write their results over the caller's tensors (same
//! type in, same type out), while `all_gather_now` and the reduce_scatters
//! take the shards by reference and return new tensors. An uneven
//! reduce_scatter is asked for (`reduce_scatter_split_now`), never implied.
//!
//! Memory: the in-place calls hand the tensors' buffers over rather than
//! copying them (`Executable::run_donating`): a rank's result is written
//! over that rank's own shard once nothing reads the shard any more, as
//! `torch.distributed.all_reduce(t)` does. Where a shard is still being
//! read when its result is written (a star's root folds its own shard),
//! the result goes into a buffer the executable kept from the call before
//! (that call's leftover shard), and this call's shard is kept for the
//! next. A loop that keeps no clones of its shards allocates no tensor
//! memory after its first call; a shard the caller still shares through a
//! clone is never written. If a call fails halfway, a shard whose result
//! was already being written over it is left empty (a tensor of its type
//! with no bytes), and every other shard holds its values.
//! [`DeviceGroup::all_reduce_lent`] takes the caller's own memory, a
//! `&mut [T]` per rank: the values are copied into buffers the group keeps,
//! reduced in place there, and copied back.
//!
//! Errors are the lazy path's own: a wrong shard count, dtype or shape is
//! the [`CollectiveError`] recording gives, and compile or run errors are
//! the executor's, so nothing here needs an error of its own.

use crate::group::{CollectiveError, DeviceGroup};
use fuel_graph_ext::elem::{ElemError, Element};
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
#[derive(thiserror::Error)]
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
    /// Lent memory of another element type or length than the shards'.
    #[error(transparent)]
    Elem(#[from] ElemError),
}

impl EagerError {
    /// The catalogue's code of the error underneath, where it has one.
    pub fn code(&self) -> Option<&'static str> {
        match self {
            EagerError::Collective(e) => e.code(),
            EagerError::Topology(e) => e.code(),
            EagerError::Pass(e) => e.code(),
            EagerError::Exec(e) => e.code(),
            EagerError::Elem(e) => e.code(),
        }
    }
}
fuel_graph_ext::debug_as_message!(EagerError);

/// Which collective an eager call runs, with its arguments.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Kind {
    AllReduce(ReduceOp),
    Broadcast(usize),
    AllGather(usize),
    ReduceScatter(ReduceOp, usize, Option<Vec<usize>>),
}

/// One compiled eager collective and the host buffers its calls keep.
struct Compiled {
    exe: Executable,
    /// The graph's input names, in rank order.
    names: Vec<String>,
    /// The buffers the next call writes its results into: the tensors the
    /// caller handed in last time (swapped out for the results), or the
    /// results of the last lent call. Taken for a call and put back after,
    /// so two calls at once never share them (the second allocates).
    spare: Mutex<Vec<Tensor>>,
    /// A lent call's input buffers, which the caller's values are copied
    /// into.
    staged: Mutex<Vec<Tensor>>,
    /// The in-place calls' input map, kept so a call allocates no names.
    given: Mutex<BTreeMap<String, Tensor>>,
    /// Output k may take input k's bytes (`Executable::run_donating`).
    donate: Vec<Option<String>>,
}

/// One cached executable and what it was compiled for.
struct Entry {
    kind: Kind,
    types: Vec<TensorType>,
    compiled: Arc<Compiled>,
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
    /// result, of the same type. The first call for a shape, dtype and
    /// `op` compiles; the others only run (see
    /// [`DeviceGroup::eager_compiles`]).
    ///
    /// No bytes are copied in or out: the tensors' buffers are handed to
    /// the executor, and the results come back in the buffers the previous
    /// call was handed (a clone of a shard keeps its old values, and costs
    /// the next call an allocation).
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
        self.run_in_place(Kind::AllReduce(op), shards)
    }

    /// [`all_reduce_now`](Self::all_reduce_now) over memory the caller
    /// lends for the call, one slice per rank (one-dimensional shards of
    /// `slices[i].len()` elements), reduced in place as
    /// `torch.distributed.all_reduce(t)` does. The values are copied into
    /// buffers the group keeps and the results copied back: no tensor
    /// memory allocated after the first call, and two copies of each shard
    /// more than `all_reduce_now` (see `docs/performance.md`).
    ///
    /// ```
    /// use fuel_collective::DeviceGroup;
    /// use fuel_graph_ext::{Device, ReduceOp};
    ///
    /// let group = DeviceGroup::new([Device::cpu(0), Device::cpu(1)])?;
    /// let (mut a, mut b) = (vec![1.0f32, 2.0], vec![3.0f32, 6.0]);
    /// group.all_reduce_lent(&mut [&mut a, &mut b], ReduceOp::Sum)?;
    /// assert_eq!((a, b), (vec![4.0, 8.0], vec![4.0, 8.0]));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn all_reduce_lent<T: Element>(
        &self,
        slices: &mut [&mut [T]],
        op: ReduceOp,
    ) -> Result<(), EagerError> {
        let types: Vec<TensorType> = slices
            .iter()
            .map(|s| TensorType::new(T::DTYPE, &[s.len()]))
            .collect();
        let c = self.cached(Kind::AllReduce(op), types.clone())?;
        let mut staged = take(&c.staged);
        if staged.iter().map(Tensor::ty).ne(types.iter()) {
            staged = types.into_iter().map(Tensor::zeros).collect();
        }
        for (t, s) in staged.iter_mut().zip(slices.iter()) {
            t.copy_from_slice(s)?;
        }
        // The staged tensors are this group's own: the in-place call
        // writes the results over them.
        self.run_in_place(Kind::AllReduce(op), &mut staged)?;
        for (t, s) in staged.iter().zip(slices.iter_mut()) {
            t.copy_to_slice(s)?;
        }
        put_back(&c.staged, staged);
        Ok(())
    }

    /// Every rank's tensor becomes rank `root`'s: the eager form of
    /// [`DeviceGroup::broadcast`]. `tensors` holds one tensor per rank, all
    /// of one type; only `tensors[root]`'s values are read. Buffers are
    /// handed over as in [`all_reduce_now`](Self::all_reduce_now).
    pub fn broadcast_now(&self, tensors: &mut [Tensor], root: usize) -> Result<(), EagerError> {
        self.run_in_place(Kind::Broadcast(root), tensors)
    }

    /// Every rank's result is all shards joined along `axis`: the eager
    /// form of [`DeviceGroup::all_gather`]. The results are new tensors
    /// (of another shape than the shards), one per rank.
    pub fn all_gather_now(
        &self,
        shards: &[Tensor],
        axis: usize,
    ) -> Result<Vec<Tensor>, EagerError> {
        self.run_returning(Kind::AllGather(axis), shards)
    }

    /// Rank `i`'s result is the `i`-th of N equal slices along `axis` of
    /// the reduction: the eager form of [`DeviceGroup::reduce_scatter`].
    /// An extent the group size does not divide is refused (E0410); give
    /// the split with [`reduce_scatter_split_now`](Self::reduce_scatter_split_now).
    pub fn reduce_scatter_now(
        &self,
        shards: &[Tensor],
        op: ReduceOp,
        axis: usize,
    ) -> Result<Vec<Tensor>, EagerError> {
        let extent = shards.first().and_then(|t| t.ty().shape.get(axis).copied());
        if let Some(extent) = extent.filter(|e| e % self.size().max(1) != 0) {
            return Err(CollectiveError::NotDivisible {
                axis,
                extent,
                size: self.size(),
            }
            .into());
        }
        self.run_returning(Kind::ReduceScatter(op, axis, None), shards)
    }

    /// Rank `i`'s result is `split[i]` entries along `axis` of the
    /// reduction: the eager form of [`DeviceGroup::reduce_scatter_split`].
    pub fn reduce_scatter_split_now(
        &self,
        shards: &[Tensor],
        op: ReduceOp,
        axis: usize,
        split: &[usize],
    ) -> Result<Vec<Tensor>, EagerError> {
        self.run_returning(Kind::ReduceScatter(op, axis, Some(split.to_vec())), shards)
    }

    /// The topology this group's devices lower for: this machine's
    /// calibration of them where the cache holds one (`fuel-opt
    /// calibrate`), the defaults elsewhere. The eager calls lower with it;
    /// pass it to [`run_pipeline`](crate::run_pipeline) on the lazy path
    /// too, so both choose the same algorithm for the same collective.
    pub fn topology(&self) -> Result<fuel_graph_ext::Topology, CacheError> {
        fuel_runtime::calibration::topology_for(self.devices())
    }

    /// How many executables this group (and its clones) compiled for eager
    /// calls so far: one per distinct collective and shard types while the
    /// cache holds them.
    pub fn eager_compiles(&self) -> usize {
        self.eager.compiles.lock().map_or(0, |c| *c)
    }

    /// Runs `kind` over `shards` with the cached executable, compiling it
    /// on the first call, and swaps the results into `shards` (the results
    /// have the shards' types).
    fn run_in_place(&self, kind: Kind, shards: &mut [Tensor]) -> Result<(), EagerError> {
        let c = self.cached_for(kind, shards.iter().map(Tensor::ty), || {
            shards.iter().map(|t| t.ty().clone()).collect()
        })?;
        let mut out = take(&c.spare);
        // The shards are handed over: rank k's result may be written over
        // rank k's shard once nothing reads it any more.
        let mut inputs = c
            .given
            .lock()
            .map(|mut m| std::mem::take(&mut *m))
            .unwrap_or_default();
        for (name, shard) in c.names.iter().zip(shards.iter_mut()) {
            let given = std::mem::replace(shard, Tensor::unfilled(shard.ty().clone()));
            match inputs.get_mut(name) {
                Some(t) => *t = given,
                None => drop(inputs.insert(name.clone(), given)),
            }
        }
        let result = c.exe.run_donating(&mut inputs, &c.donate, &mut out);
        let mut back = c.names.iter().map(|n| {
            let t = inputs.get_mut(n)?;
            Some(std::mem::replace(t, Tensor::unfilled(t.ty().clone())))
        });
        if let Err(e) = result {
            for (shard, given) in shards.iter_mut().zip(back) {
                *shard = given.unwrap_or_else(|| Tensor::unfilled(shard.ty().clone()));
            }
            return Err(e.into());
        }
        // Each shard gets its result; the shards no result was written
        // over are the buffers the next call writes into.
        for ((shard, result), given) in shards.iter_mut().zip(out.iter_mut()).zip(&mut back) {
            std::mem::swap(shard, result);
            if let Some(given) = given {
                *result = given;
            }
        }
        drop(back);
        put_back(&c.spare, out);
        if let Ok(mut m) = c.given.lock() {
            *m = inputs;
        }
        Ok(())
    }

    /// Runs `kind` over `shards` and returns the results as new tensors
    /// (the executor writes into those of its earlier results the caller
    /// has dropped).
    fn run_returning(&self, kind: Kind, shards: &[Tensor]) -> Result<Vec<Tensor>, EagerError> {
        let types: Vec<TensorType> = shards.iter().map(|t| t.ty().clone()).collect();
        let c = self.cached(kind, types)?;
        Ok(c.exe.run(&c.inputs(shards))?)
    }

    /// The executable for `kind` over shards of `types`, compiled now if
    /// the cache does not hold it.
    fn cached(&self, kind: Kind, types: Vec<TensorType>) -> Result<Arc<Compiled>, EagerError> {
        self.cached_for(kind, &types, || types.clone())
    }

    /// [`cached`](Self::cached) for shards of `types` (compared in place),
    /// with `owned` making the key only when it compiles: a call that finds
    /// its executable allocates nothing for the lookup.
    fn cached_for<'t>(
        &self,
        kind: Kind,
        types: impl IntoIterator<Item = &'t TensorType> + Clone,
        owned: impl FnOnce() -> Vec<TensorType>,
    ) -> Result<Arc<Compiled>, EagerError> {
        // Compiling under the lock keeps two threads from compiling one key
        // twice; a group's eager calls are meant for one training loop.
        let mut entries = self.eager.entries.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(e) = entries
            .iter()
            .find(|e| e.kind == kind && e.types.iter().eq(types.clone()))
        {
            return Ok(e.compiled.clone());
        }
        let types = owned();
        let compiled = Arc::new(Compiled {
            exe: self.compile_now(&kind, &types)?,
            names: (0..types.len()).map(input_name).collect(),
            spare: Mutex::new(Vec::new()),
            staged: Mutex::new(Vec::new()),
            given: Mutex::new(BTreeMap::new()),
            donate: (0..types.len()).map(|i| Some(input_name(i))).collect(),
        });
        if let Ok(mut c) = self.eager.compiles.lock() {
            *c += 1;
        }
        if entries.len() >= CACHE_ENTRIES {
            entries.pop_front();
        }
        entries.push_back(Entry {
            kind,
            types,
            compiled: compiled.clone(),
        });
        Ok(compiled)
    }

    /// Records `kind` over inputs of `types` (input `i` on rank `i`'s
    /// device), lowers it with the default pipeline and compiles it.
    fn compile_now(&self, kind: &Kind, types: &[TensorType]) -> Result<Executable, EagerError> {
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
        let results = match *kind {
            Kind::AllReduce(op) => self.all_reduce(&shards, op)?,
            Kind::AllGather(axis) => self.all_gather(&shards, axis)?,
            Kind::ReduceScatter(op, axis, None) => self.reduce_scatter(&shards, op, axis)?,
            Kind::ReduceScatter(op, axis, Some(ref split)) => {
                self.reduce_scatter_split(&shards, op, axis, split)?
            }
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
        let topology = Arc::new(self.topology()?);
        crate::run_pipeline(
            &mut g,
            crate::DEFAULT_PIPELINE,
            topology.clone(),
            DebugOptions::default(),
        )?;
        // Each rank's result is written over the shard it was handed
        // (`run_donating`), not shared with rank 0's: the next call then
        // finds every shard its own and allocates nothing.
        let options = exec::Options {
            share_host_outputs: false,
            ..Default::default()
        };
        Ok(exec::Compiler::new(&g)
            .topology(&topology)
            .options(options)
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

impl Compiled {
    /// The shards as the executable's named inputs (sharing their bytes).
    fn inputs(&self, shards: &[Tensor]) -> BTreeMap<String, Tensor> {
        self.names
            .iter()
            .cloned()
            .zip(shards.iter().cloned())
            .collect()
    }
}

/// The tensors kept in `slot`, leaving it empty.
fn take(slot: &Mutex<Vec<Tensor>>) -> Vec<Tensor> {
    slot.lock()
        .map(|mut s| std::mem::take(&mut *s))
        .unwrap_or_default()
}

/// Keeps `tensors` in `slot` for the next call, unless a call that ran at
/// the same time put its own back first.
fn put_back(slot: &Mutex<Vec<Tensor>>, tensors: Vec<Tensor>) {
    if let Ok(mut s) = slot.lock() {
        if s.is_empty() {
            *s = tensors;
        }
    }
}

/// The graph input that rank `i`'s shard feeds.
fn input_name(i: usize) -> String {
    format!("shard{i}")
}
