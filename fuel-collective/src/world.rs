//! [`WorldGroup`]: collectives over a world of P processes, each holding
//! one shard on each of its k local devices. The semantics are those of one
//! flat group of P·k ranks ordered (process, local index): global rank
//! `p·k + i` is local device i of process p.
//!
//! Design: a world collective is recorded, lazily, as three parts, each an
//! existing collective, so each is lowered by what lowers it already:
//!
//! 1. the local part, a `DeviceGroup` collective over the k local devices
//!    (`reduce` or `all_gather` onto the hub), lowered by
//!    `lower-collectives` with every algorithm and the cost model;
//! 2. one `comm.*` node per process on the hub, the local device through
//!    which the process talks to the others: the local device of the
//!    driver's kind (a CPU for the host and MPI drivers, a CUDA device for
//!    NCCL) whose local part the cost model prices lowest
//!    ([`crate::world_cost`], with the topology's links), or, when the
//!    process has none, that kind's device 0, reached by a copy (staged
//!    through the host by `split-cross-vendor-copies`);
//! 3. the local spread: a `DeviceGroup::broadcast` from the hub, or for
//!    `reduce_scatter` one slice per local device, so only the slices a
//!    process needs cross between processes and each local device receives
//!    only its own.
//!
//! `Mean` widens to the dtype's mean accumulator, sums locally and between
//! processes, divides by P·k at the hub and narrows: the interpreter's
//! definition over P·k shards. Floats are summed local shards first, then
//! processes, so a float sum may differ in the last bits from a fold in
//! flat rank order; every process gets the same bits (the inter-process
//! step gives every process one result, see `docs/drivers.md`).
//!
//! Recording needs no communicator. [`WorldProcess`] is process p's part
//! of a world of P, built from P, p, the id its `comm.*` nodes carry, the
//! local devices, the driver's device kind and the topology; it records
//! and lowers every collective above. A [`WorldGroup`] is a joined
//! communicator, the agreement step below and a `WorldProcess` (it derefs
//! to it), so what runs is what a `WorldProcess` records: the goldens under
//! `tests/golden/world/` pin it for worlds this machine cannot run (a CUDA
//! hub), and `fuel-opt plan` could lower one for a world of any size.
//!
//! Each collective leaves one `world:` note on the lowered graph (printed
//! at the top of the text IR and in the DOT's legend) naming its three
//! parts: the local part (whose algorithm the `lower-collectives` note for
//! the same local collective gives), the `comm.*` step between processes
//! with its hub and driver, and the local spread.
//!
//! [`WorldGroup::new`] is the one eager step: the processes compare their
//! local device counts and their topologies' fingerprints (one small
//! `all_gather`, [`crate::world_agree`]), so a world whose processes
//! disagree fails on every process, naming the first that differs (E0440
//! for the device count, E0442 for the topology, from which each process
//! would lower and schedule differently).
//! Disagreements in dtype, shape, op or sequence surface when the graphs
//! run: the driver compares every call (the MPI driver names the first
//! process whose call differs).

use crate::world_cost::pick_hub;
use crate::{CollectiveError, Communicator, DeviceGroup, DriverCommunicator};
use fuel_graph_ext::op::CommOp;
use fuel_graph_ext::{
    DType, Device, DeviceKind, Graph, LazyTensor, Op, ReduceOp, TensorType, Topology,
};
use fuel_runtime::driver::CollectiveDriver;
use fuel_runtime::exec::{Compiler, Executable};
use std::ops::Deref;
use std::sync::{Arc, Mutex, MutexGuard};

/// The input name [`WorldGroup::new`] binds for its agreement step.
pub use crate::world_agree::AGREE_INPUT;

/// Process p's part of a world of P processes × k local devices: what
/// records and lowers its graph, with no communicator joined. Its `comm.*`
/// nodes carry the id given to [`WorldProcess::new`]; a graph that is to
/// run is recorded through a [`WorldGroup`], which gives its
/// communicator's id.
pub struct WorldProcess {
    processes: usize,
    process: usize,
    comm: u32,
    driver: DeviceKind,
    local: DeviceGroup,
    hub: Device,
    /// One `world:` note per recorded collective, with its graph's id.
    notes: Mutex<Vec<(u64, String)>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn list(devices: &[Device]) -> String {
    let names: Vec<String> = devices.iter().map(Device::to_string).collect();
    format!("[{}]", names.join(", "))
}

impl WorldProcess {
    /// Process `process` of `processes`, holding one shard on each of
    /// `devices` (local rank order), whose `comm.*` nodes carry `comm` and
    /// go through the collective driver of `driver`'s kind (`Cpu`: MPI or
    /// the host driver; `Cuda`: NCCL; see
    /// [`crate::world_cost::driver_kind`]). The hub is chosen by the cost
    /// model for `topology` ([`crate::world_cost::pick_hub`]). Nothing is
    /// compared with the other processes: that is [`WorldGroup::new`]'s
    /// eager step.
    pub fn new(
        processes: usize,
        process: usize,
        comm: u32,
        devices: impl IntoIterator<Item = Device>,
        driver: DeviceKind,
        topology: &Topology,
    ) -> Result<Self, CollectiveError> {
        if process >= processes {
            return Err(CollectiveError::WorldProcessOutOfRange { process, processes });
        }
        let local = DeviceGroup::new(devices)?;
        let hub = pick_hub(topology, local.devices(), driver);
        Ok(WorldProcess {
            processes,
            process,
            comm,
            driver,
            local,
            hub,
            notes: Mutex::new(Vec::new()),
        })
    }

    /// P, the number of processes.
    pub fn processes(&self) -> usize {
        self.processes
    }
    /// This process's index p.
    pub fn process(&self) -> usize {
        self.process
    }
    /// The local devices, in local rank order.
    pub fn devices(&self) -> &[Device] {
        self.local.devices()
    }
    /// The device the inter-process step runs on.
    pub fn hub(&self) -> Device {
        self.hub
    }
    /// The kind of the driver between processes.
    pub fn driver(&self) -> DeviceKind {
        self.driver
    }
    /// The id this process's `comm.*` nodes carry.
    pub fn comm_id(&self) -> u32 {
        self.comm
    }
    /// P·k, the number of ranks of the flat group.
    pub fn size(&self) -> usize {
        self.processes * self.local.size()
    }

    /// The local index of the hub, if the hub is a local device.
    fn hub_index(&self) -> Option<usize> {
        self.devices().iter().position(|d| *d == self.hub)
    }

    /// `t` on the hub.
    fn to_hub(&self, t: LazyTensor) -> Result<LazyTensor, CollectiveError> {
        if t.device() == Some(self.hub) {
            Ok(t)
        } else {
            Ok(t.copy_to(self.hub)?)
        }
    }

    /// Records the step between processes: one `comm.*` node reading `t`
    /// (on the hub), among the P processes.
    fn between(&self, t: &LazyTensor, kind: CommOp) -> Result<LazyTensor, CollectiveError> {
        let op = Op::Comm {
            kind,
            comm: self.comm,
            ranks: self.processes,
            device: self.hub,
            rank: None,
            split: None,
        };
        let mut r = t.graph().record(op, &[t])?;
        r.pop()
            .ok_or_else(|| CollectiveError::Driver("recording the collective gave no value".into()))
    }

    /// The local reduction of `shards` (widened for Mean) on the hub, and
    /// what the note says of it.
    fn local_reduce(
        &self,
        shards: &[LazyTensor],
        op: ReduceOp,
    ) -> Result<(LazyTensor, String), CollectiveError> {
        let (wide, wire) = self.widened(shards, op)?;
        let root = self.hub_index().unwrap_or(0);
        let part = self.local.reduce(&wide, wire, root)?;
        let mut said = format!("reduce.{wire}");
        if let (ReduceOp::Mean, Some(w), Some(s)) = (op, wide.first(), shards.first()) {
            if w.ty().dtype != s.ty().dtype {
                said.push_str(&format!(" of the shards cast to {}", w.ty().dtype));
            }
        }
        said.push_str(&format!(
            " over {} onto {}",
            list(self.devices()),
            self.devices()[root]
        ));
        if self.devices()[root] != self.hub {
            said.push_str(&format!(", copied to the hub {}", self.hub));
        }
        Ok((self.to_hub(part)?, said))
    }

    /// For Mean, every shard cast to the mean accumulator and a Sum;
    /// otherwise the shards and op as they are.
    fn widened(
        &self,
        shards: &[LazyTensor],
        op: ReduceOp,
    ) -> Result<(Vec<LazyTensor>, ReduceOp), CollectiveError> {
        if op != ReduceOp::Mean {
            return Ok((shards.to_vec(), op));
        }
        let Some(first) = shards.first() else {
            return Err(CollectiveError::NoShards {
                op: "world collective",
                size: self.local.size(),
            });
        };
        let (dtype, acc) = (first.ty().dtype, first.ty().dtype.mean_accumulator());
        if acc == dtype {
            return Ok((shards.to_vec(), ReduceOp::Sum));
        }
        let wide = shards
            .iter()
            .map(|s| s.cast(acc))
            .collect::<Result<Vec<_>, _>>()?;
        Ok((wide, ReduceOp::Sum))
    }

    /// The reduction of every process's shards on this process's hub:
    /// each process folds its own, the processes all-reduce the parts (a
    /// `Mean` travels as a `Sum`, the wire op), and the hub finishes it.
    /// Also the notes of the local fold and of the finish.
    fn reduced(
        &self,
        shards: &[LazyTensor],
        op: ReduceOp,
    ) -> Result<(LazyTensor, ReduceOp, [String; 2]), CollectiveError> {
        let (part, local) = self.local_reduce(shards, op)?;
        let wire = if op == ReduceOp::Mean {
            ReduceOp::Sum
        } else {
            op
        };
        let total = self.between(&part, CommOp::AllReduce(wire))?;
        let (total, end) = self.finish(total, op, Self::dtype(shards))?;
        Ok((total, wire, [local, end]))
    }

    /// Mean's end on the hub: divide the world's sum by P·k and narrow;
    /// with what the note says of it.
    fn finish(
        &self,
        total: LazyTensor,
        op: ReduceOp,
        dtype: DType,
    ) -> Result<(LazyTensor, String), CollectiveError> {
        if op != ReduceOp::Mean {
            return Ok((total, String::new()));
        }
        let q = total.div(self.size() as u64)?;
        if q.ty().dtype == dtype {
            Ok((q, format!("div by {}", self.size())))
        } else {
            let said = format!("div by {} and cast to {dtype}", self.size());
            Ok((q.cast(dtype)?, said))
        }
    }

    /// `t` (on the hub) on every local device.
    fn spread(&self, t: &LazyTensor) -> Result<Vec<LazyTensor>, CollectiveError> {
        match self.hub_index() {
            Some(i) => self.local.broadcast(t, i),
            None => {
                let first = self.devices()[0];
                self.local.broadcast(&t.copy_to(first)?, 0)
            }
        }
    }

    /// What the note says of [`WorldProcess::spread`].
    fn spread_note(&self) -> String {
        match self.hub_index() {
            Some(_) => format!("broadcast from the hub to {}", list(self.devices())),
            None => format!(
                "copied to {}, then broadcast to {}",
                self.devices()[0],
                list(self.devices())
            ),
        }
    }

    /// Keeps the `world:` note of one collective recorded into `t`'s
    /// graph: its name and type, this process's place in the world, and
    /// its parts: local, between processes, Mean's division on the hub (or
    /// empty), local spread.
    fn note(&self, t: &LazyTensor, what: &str, ty: &TensorType, parts: [String; 4]) {
        let k = self.local.size();
        let first = self.process * k;
        let ranks = if k == 1 {
            format!("flat rank {first}")
        } else {
            format!("flat ranks {first} to {}", first + k - 1)
        };
        let hub = if self.hub_index().is_some() {
            format!(
                "the hub {} (the local {} device whose local part costs least)",
                self.hub, self.driver
            )
        } else {
            format!(
                "the hub {} (not local: this process has no {} device; reached by copies)",
                self.hub, self.driver
            )
        };
        let driver = match self.driver {
            DeviceKind::Cuda => "the cuda driver (NCCL)",
            _ => "the cpu driver (MPI between processes, the host driver between threads)",
        };
        let [local, between, end, spread] = parts;
        let end = if end.is_empty() {
            end
        } else {
            format!("; then {end} on the hub")
        };
        let text = format!(
            "world: {what} of {ty}, process {p} of {pp} with {devs} ({ranks} of {n}). \
             Part 1, local: {local}. Part 2, between processes: {between} on {hub}, one value per process, \
             through {driver}{end}. Part 3, local spread: {spread}",
            p = self.process,
            pp = self.processes,
            devs = list(self.devices()),
            n = self.size(),
        );
        lock(&self.notes).push((t.graph().id(), text));
    }

    fn dtype(shards: &[LazyTensor]) -> DType {
        shards.first().map_or(DType::F32, |s| s.ty().dtype)
    }

    fn shard_type(
        &self,
        shards: &[LazyTensor],
        op: &'static str,
    ) -> Result<TensorType, CollectiveError> {
        shards
            .first()
            .map(LazyTensor::ty)
            .ok_or(CollectiveError::NoShards {
                op,
                size: self.local.size(),
            })
    }

    /// Every rank gets the reduction of all P·k shards, on its own device.
    pub fn all_reduce(
        &self,
        shards: &[LazyTensor],
        op: ReduceOp,
    ) -> Result<Vec<LazyTensor>, CollectiveError> {
        let ty = self.shard_type(shards, "all_reduce")?;
        let (total, wire, [local, end]) = self.reduced(shards, op)?;
        let out = self.spread(&total)?;
        let between = format!("comm.all_reduce.{wire}");
        self.note(
            &total,
            &format!("all_reduce.{op}"),
            &ty,
            [local, between, end, self.spread_note()],
        );
        Ok(out)
    }

    /// The reduction of all P·k shards on global rank `root`'s device,
    /// on the root's process. Every other process gets the same value on
    /// its hub, and must run it too: it carries that process's part of the
    /// inter-process step. (The processes all-reduce, and only the root's
    /// process delivers locally.)
    pub fn reduce(
        &self,
        shards: &[LazyTensor],
        op: ReduceOp,
        root: usize,
    ) -> Result<LazyTensor, CollectiveError> {
        crate::group::check_root(root, self.size())?;
        let ty = self.shard_type(shards, "reduce")?;
        let (total, wire, [local, end]) = self.reduced(shards, op)?;
        let k = self.local.size();
        let to = self.devices()[root % k];
        let (out, spread) = if root / k != self.process() {
            (
                total.clone(),
                format!(
                    "none, the root {root} is on process {}: the result stays on the hub",
                    root / k
                ),
            )
        } else if to == self.hub {
            (total.clone(), format!("none, the root {root} is the hub"))
        } else {
            (
                total.copy_to(to)?,
                format!("copied to the root {root}'s device {to}"),
            )
        };
        let between = format!("comm.all_reduce.{wire}");
        self.note(
            &total,
            &format!("reduce.{op} to rank {root}"),
            &ty,
            [local, between, end, spread],
        );
        Ok(out)
    }

    /// Global rank `root`'s tensor on every rank. Every process passes a
    /// tensor of the same type; on the root's process it must live on the
    /// root's local device, elsewhere only its type is used.
    pub fn broadcast(
        &self,
        tensor: &LazyTensor,
        root: usize,
    ) -> Result<Vec<LazyTensor>, CollectiveError> {
        crate::group::check_root(root, self.size())?;
        let k = self.local.size();
        let local = if root / k == self.process() {
            let want = self.devices()[root % k];
            if tensor.device() != Some(want) {
                return Err(CollectiveError::WrongDevice {
                    index: root % k,
                    found: tensor
                        .device()
                        .map_or_else(|| "no device".to_string(), |d| d.to_string()),
                    expected: want,
                });
            }
            if want == self.hub {
                format!("the root {root}'s shard is on the hub")
            } else {
                format!("the root {root}'s shard, copied from {want} to the hub")
            }
        } else {
            format!(
                "this process's tensor (on {}) to the hub, only its type is used: the root {root} is on process {}",
                tensor
                    .device()
                    .map_or_else(|| "no device".to_string(), |d| d.to_string()),
                root / k
            )
        };
        let v = self.to_hub(tensor.clone())?;
        let total = self.between(&v, CommOp::Broadcast { root: root / k })?;
        let out = self.spread(&total)?;
        let between = format!("comm.broadcast from process {}", root / k);
        self.note(
            &total,
            &format!("broadcast from rank {root}"),
            &tensor.ty(),
            [local, between, String::new(), self.spread_note()],
        );
        Ok(out)
    }

    /// Every rank gets all P·k shards joined along `axis`, in (process,
    /// local index) order.
    pub fn all_gather(
        &self,
        shards: &[LazyTensor],
        axis: usize,
    ) -> Result<Vec<LazyTensor>, CollectiveError> {
        let ty = self.shard_type(shards, "all_gather")?;
        let mut here = self.local.all_gather(shards, axis)?;
        let i = self.hub_index().unwrap_or(0);
        let mut local = format!(
            "all_gather along axis {axis} over {}, {}'s copy kept",
            list(self.devices()),
            self.devices()[i]
        );
        if self.devices()[i] != self.hub {
            local.push_str(&format!(" and copied to the hub {}", self.hub));
        }
        let part = self.to_hub(here.swap_remove(i))?;
        let all = self.between(&part, CommOp::AllGather { axis })?;
        let out = self.spread(&all)?;
        let between = format!("comm.all_gather along axis {axis}");
        self.note(
            &all,
            &format!("all_gather along axis {axis}"),
            &ty,
            [local, between, String::new(), self.spread_note()],
        );
        Ok(out)
    }

    /// Global rank `p·k + i` gets the `(p·k + i)`-th of P·k equal slices
    /// along `axis` of the reduction: the processes reduce-scatter their
    /// local reductions (each process receives only its k slices) and
    /// each local device receives only its own slice.
    pub fn reduce_scatter(
        &self,
        shards: &[LazyTensor],
        op: ReduceOp,
        axis: usize,
    ) -> Result<Vec<LazyTensor>, CollectiveError> {
        let ty = self.shard_type(shards, "reduce_scatter")?;
        if axis >= ty.rank() {
            return Err(CollectiveError::AxisOutOfRange {
                axis,
                ty: ty.clone(),
                rank: ty.rank(),
            });
        }
        let (n, extent) = (self.size(), ty.shape[axis]);
        if extent == 0 || !extent.is_multiple_of(n) {
            return Err(CollectiveError::NotDivisible {
                axis,
                extent,
                size: n,
            });
        }
        let (part, local) = self.local_reduce(shards, op)?;
        let wire = if op == ReduceOp::Mean {
            ReduceOp::Sum
        } else {
            op
        };
        let slab = self.between(&part, CommOp::ReduceScatter { op: wire, axis })?;
        let (slab, end) = self.finish(slab, op, ty.dtype)?;
        let piece = extent / n;
        let out = self
            .devices()
            .iter()
            .enumerate()
            .map(|(i, d)| {
                let s = slab.slice(axis, i * piece, piece)?;
                Ok(if *d == self.hub { s } else { s.copy_to(*d)? })
            })
            .collect::<Result<Vec<_>, CollectiveError>>()?;
        let between = format!(
            "comm.reduce_scatter.{wire} along axis {axis} (this process receives only its {} slice(s))",
            self.local.size()
        );
        let spread = format!(
            "slice i of the hub's {} to local device i of {}, each device only its own",
            slab.ty(),
            list(self.devices())
        );
        self.note(
            &slab,
            &format!("reduce_scatter.{op} along axis {axis}"),
            &ty,
            [local, between, end, spread],
        );
        Ok(out)
    }

    /// This process's graph with `outputs` as its results, lowered for
    /// `topology` (`DEFAULT_PIPELINE`: the local collectives become copy
    /// chains; the `comm.*` nodes stay for the executor). The graph carries
    /// one `world:` note per world collective recorded into it, before
    /// the lowering's own notes.
    pub fn lower(
        &self,
        outputs: &[&LazyTensor],
        topology: Arc<Topology>,
    ) -> Result<Graph, CollectiveError> {
        let first = outputs
            .first()
            .ok_or_else(|| CollectiveError::Driver("compile needs at least one output".into()))?;
        let mut g = first.graph().snapshot();
        g.set_outputs(outputs.iter().map(|t| t.value()).collect());
        let id = first.graph().id();
        for (_, note) in lock(&self.notes).iter().filter(|(g, _)| *g == id) {
            g.add_note(note.clone());
        }
        crate::run_pipeline(
            &mut g,
            crate::DEFAULT_PIPELINE,
            topology,
            Default::default(),
        )
        .map_err(|e| {
            CollectiveError::Driver(format!("lowering process {}'s graph: {e}", self.process()))
        })?;
        Ok(g)
    }
}

/// A world of P processes × k local devices, seen from one process: a
/// joined communicator and the [`WorldProcess`] that records and lowers
/// this process's graph (a `WorldGroup` derefs to it, so its collectives,
/// `lower`, `hub` and the rest are the `WorldProcess`'s).
pub struct WorldGroup<'c, D: CollectiveDriver> {
    comm: &'c DriverCommunicator<D>,
    world: WorldProcess,
    /// The topology the processes agreed on.
    topology: Arc<Topology>,
}

impl<D: CollectiveDriver> Deref for WorldGroup<'_, D> {
    type Target = WorldProcess;
    fn deref(&self) -> &WorldProcess {
        &self.world
    }
}

impl<'c, D: CollectiveDriver> WorldGroup<'c, D> {
    /// This process's part of a world: its local `devices` in local rank
    /// order, talking to the other processes through `comm` (rank p of P).
    /// Compares the local device count and the topology with every process
    /// (eager: every process must call `new` at the same point), failing
    /// on every process if any differs (E0440, E0442). The hub is chosen
    /// with the documented default topology; [`WorldGroup::with_topology`]
    /// takes the machine's.
    pub fn new(
        comm: &'c DriverCommunicator<D>,
        devices: impl IntoIterator<Item = Device>,
    ) -> Result<Self, CollectiveError> {
        Self::with_topology(comm, devices, &Topology::default())
    }

    /// [`WorldGroup::new`], with the hub chosen by the cost model for
    /// `topology` ([`crate::world_cost::pick_hub`]), and `topology`'s
    /// fingerprint compared with every process's
    /// ([`crate::world_agree`]): processes given different topology files
    /// would lower and schedule their graphs differently and wait on each
    /// other, so every process fails here instead, naming the first that
    /// differs (E0442).
    pub fn with_topology(
        comm: &'c DriverCommunicator<D>,
        devices: impl IntoIterator<Item = Device>,
        topology: &Topology,
    ) -> Result<Self, CollectiveError> {
        let world = WorldProcess::new(
            comm.world_size(),
            comm.rank(),
            comm.id(),
            devices,
            D::KIND,
            topology,
        )?;
        crate::world_agree::agree(comm, world.hub(), world.devices().len(), topology)?;
        Ok(WorldGroup {
            comm,
            world,
            topology: Arc::new(topology.clone()),
        })
    }

    /// The topology every process agreed on at the join: lower and
    /// schedule with it ([`WorldProcess::lower`]), so every process makes
    /// the same decisions.
    pub fn topology(&self) -> Arc<Topology> {
        self.topology.clone()
    }

    /// Every process's `words`, row p being process p's (the join-time
    /// exchange, [`crate::world_agree::gather_words`]): for example each
    /// process's `overlap::schedule_hash`, to check they all scheduled
    /// alike. Eager: every process calls it at the same point.
    pub fn gather_words(&self, words: &[u64]) -> Result<Vec<Vec<u64>>, CollectiveError> {
        crate::world_agree::gather_words(self.comm, self.hub(), words)
    }

    /// What records and lowers this process's graph: the same a
    /// [`WorldProcess::new`] with this communicator's P, rank and id
    /// records.
    pub fn recorder(&self) -> &WorldProcess {
        &self.world
    }

    /// Compiles a graph [`WorldProcess::lower`] gave, with the communicator
    /// handed to the executor.
    pub fn compile_lowered(&self, g: &Graph) -> Result<Executable, CollectiveError> {
        Compiler::new(g)
            .runtime(self.comm.runtime())
            .communicator(self.comm.id(), self.comm.graph_comm())
            .compile()
            .map_err(|e| {
                CollectiveError::Driver(format!(
                    "compiling process {}'s graph: {e}",
                    self.process()
                ))
            })
    }

    /// [`WorldProcess::lower`] then [`WorldGroup::compile_lowered`].
    pub fn compile(
        &self,
        outputs: &[&LazyTensor],
        topology: Arc<Topology>,
    ) -> Result<Executable, CollectiveError> {
        self.compile_lowered(&self.lower(outputs, topology)?)
    }
}
