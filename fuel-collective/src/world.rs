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
//! [`WorldGroup::new`] is the one eager step: the processes compare their
//! local device counts (one small `all_gather`), so a world whose processes
//! disagree fails on every process, naming the first that differs (E0440).
//! Disagreements in dtype, shape, op or sequence surface when the graphs
//! run: the driver compares every call (the MPI driver names the first
//! process whose call differs).

use crate::{CollectiveError, Communicator, DeviceGroup, DriverCommunicator};
use fuel_graph_ext::driver::CollectiveDriver;
use fuel_graph_ext::exec::{Compiler, Executable};
use fuel_graph_ext::interp::HostTensor;
use fuel_graph_ext::{DType, Device, Graph, LazyGraph, LazyTensor, ReduceOp, TensorType, Topology};
use std::sync::Arc;

/// The input name [`WorldGroup::new`] binds for its agreement step.
pub const AGREE_INPUT: &str = "fuel-world-devices";

/// A world of P processes × k local devices, seen from one process.
pub struct WorldGroup<'c, D: CollectiveDriver> {
    comm: &'c DriverCommunicator<D>,
    local: DeviceGroup,
    hub: Device,
}

impl<'c, D: CollectiveDriver> WorldGroup<'c, D> {
    /// This process's part of a world: its local `devices` in local rank
    /// order, talking to the other processes through `comm` (rank p of P).
    /// Compares the local device count with every process (eager: every
    /// process must call `new` at the same point), failing on every
    /// process if any differs. The hub is chosen with the documented
    /// default topology; [`WorldGroup::with_topology`] takes the machine's.
    pub fn new(
        comm: &'c DriverCommunicator<D>,
        devices: impl IntoIterator<Item = Device>,
    ) -> Result<Self, CollectiveError> {
        Self::with_topology(comm, devices, &Topology::default())
    }

    /// [`WorldGroup::new`], with the hub chosen by the cost model for
    /// `topology` ([`crate::world_cost::pick_hub`]).
    pub fn with_topology(
        comm: &'c DriverCommunicator<D>,
        devices: impl IntoIterator<Item = Device>,
        topology: &Topology,
    ) -> Result<Self, CollectiveError> {
        let local = DeviceGroup::new(devices)?;
        let hub = crate::world_cost::pick_hub(topology, local.devices(), D::KIND);
        let g = LazyGraph::new("world-agree");
        let ty = TensorType::new(DType::I64, &[1]);
        let x = g.input(AGREE_INPUT, hub, ty.clone());
        comm.bind(AGREE_INPUT, HostTensor::new(ty, vec![local.size() as f64]));
        let all = comm.all_gather(&x, 0)?;
        let counts = comm.evaluate(&all)?.to_f64();
        let mine = local.size();
        if let Some((peer, theirs)) = counts
            .iter()
            .enumerate()
            .find(|(_, c)| **c as usize != mine)
        {
            return Err(CollectiveError::WorldDeviceCount {
                process: comm.rank(),
                mine,
                peer,
                theirs: *theirs as usize,
            });
        }
        Ok(WorldGroup { comm, local, hub })
    }

    /// P, the number of processes.
    pub fn processes(&self) -> usize {
        self.comm.world_size()
    }
    /// This process's index p.
    pub fn process(&self) -> usize {
        self.comm.rank()
    }
    /// The local devices, in local rank order.
    pub fn devices(&self) -> &[Device] {
        self.local.devices()
    }
    /// The device the inter-process step runs on.
    pub fn hub(&self) -> Device {
        self.hub
    }
    /// P·k, the number of ranks of the flat group.
    pub fn size(&self) -> usize {
        self.processes() * self.local.size()
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

    /// The local reduction of `shards` (widened for Mean) on the hub.
    fn local_reduce(
        &self,
        shards: &[LazyTensor],
        op: ReduceOp,
    ) -> Result<LazyTensor, CollectiveError> {
        let (shards, op) = self.widened(shards, op)?;
        let root = self.hub_index().unwrap_or(0);
        let part = self.local.reduce(&shards, op, root)?;
        self.to_hub(part)
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

    /// Mean's end on the hub: divide the world's sum by P·k and narrow.
    fn finish(
        &self,
        total: LazyTensor,
        op: ReduceOp,
        dtype: DType,
    ) -> Result<LazyTensor, CollectiveError> {
        if op != ReduceOp::Mean {
            return Ok(total);
        }
        let q = total.div(self.size() as u64)?;
        if q.ty().dtype == dtype {
            Ok(q)
        } else {
            Ok(q.cast(dtype)?)
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

    fn dtype(shards: &[LazyTensor]) -> DType {
        shards.first().map_or(DType::F32, |s| s.ty().dtype)
    }

    /// Every rank gets the reduction of all P·k shards, on its own device.
    pub fn all_reduce(
        &self,
        shards: &[LazyTensor],
        op: ReduceOp,
    ) -> Result<Vec<LazyTensor>, CollectiveError> {
        let part = self.local_reduce(shards, op)?;
        let wire = if op == ReduceOp::Mean {
            ReduceOp::Sum
        } else {
            op
        };
        let total = self.comm.all_reduce(&part, wire)?;
        let total = self.finish(total, op, Self::dtype(shards))?;
        self.spread(&total)
    }

    /// The reduction of all P·k shards on global rank `root`'s device,
    /// on the root's process. Every other process gets the same value on
    /// its hub, and must run it too: it carries that process's part of the
    /// inter-process step. (The communicator has no reduce, so the
    /// processes all-reduce, and only the root's process delivers locally.)
    pub fn reduce(
        &self,
        shards: &[LazyTensor],
        op: ReduceOp,
        root: usize,
    ) -> Result<LazyTensor, CollectiveError> {
        self.check_root(root)?;
        let part = self.local_reduce(shards, op)?;
        let wire = if op == ReduceOp::Mean {
            ReduceOp::Sum
        } else {
            op
        };
        let total = self.comm.all_reduce(&part, wire)?;
        let total = self.finish(total, op, Self::dtype(shards))?;
        let k = self.local.size();
        let to = self.devices()[root % k];
        if root / k != self.process() || to == self.hub {
            return Ok(total);
        }
        Ok(total.copy_to(to)?)
    }

    /// Global rank `root`'s tensor on every rank. Every process passes a
    /// tensor of the same type; on the root's process it must live on the
    /// root's local device, elsewhere only its type is used.
    pub fn broadcast(
        &self,
        tensor: &LazyTensor,
        root: usize,
    ) -> Result<Vec<LazyTensor>, CollectiveError> {
        self.check_root(root)?;
        let k = self.local.size();
        if root / k == self.process() {
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
        }
        let v = self.to_hub(tensor.clone())?;
        let total = self.comm.broadcast(&v, root / k)?;
        self.spread(&total)
    }

    /// Every rank gets all P·k shards joined along `axis`, in (process,
    /// local index) order.
    pub fn all_gather(
        &self,
        shards: &[LazyTensor],
        axis: usize,
    ) -> Result<Vec<LazyTensor>, CollectiveError> {
        let mut here = self.local.all_gather(shards, axis)?;
        let i = self.hub_index().unwrap_or(0);
        let part = self.to_hub(here.swap_remove(i))?;
        let all = self.comm.all_gather(&part, axis)?;
        self.spread(&all)
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
        let ty = shards
            .first()
            .map(LazyTensor::ty)
            .ok_or(CollectiveError::NoShards {
                op: "reduce_scatter",
                size: self.local.size(),
            })?;
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
        let part = self.local_reduce(shards, op)?;
        let wire = if op == ReduceOp::Mean {
            ReduceOp::Sum
        } else {
            op
        };
        let slab = self.comm.reduce_scatter(&part, wire, axis)?;
        let slab = self.finish(slab, op, ty.dtype)?;
        let piece = extent / n;
        self.devices()
            .iter()
            .enumerate()
            .map(|(i, d)| {
                let s = slab.slice(axis, i * piece, piece)?;
                Ok(if *d == self.hub { s } else { s.copy_to(*d)? })
            })
            .collect()
    }

    /// This process's graph with `outputs` as its results, lowered for
    /// `topology` (`DEFAULT_PIPELINE`: the local collectives become copy
    /// chains; the `comm.*` nodes stay for the executor).
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

    /// Compiles a graph [`WorldGroup::lower`] gave, with the communicator
    /// handed to the executor.
    pub fn compile_lowered(&self, g: &Graph) -> Result<Executable, CollectiveError> {
        Compiler::new(g)
            .communicator(self.comm.id(), self.comm.graph_comm())
            .compile()
            .map_err(|e| {
                CollectiveError::Driver(format!(
                    "compiling process {}'s graph: {e}",
                    self.process()
                ))
            })
    }

    /// [`WorldGroup::lower`] then [`WorldGroup::compile_lowered`].
    pub fn compile(
        &self,
        outputs: &[&LazyTensor],
        topology: Arc<Topology>,
    ) -> Result<Executable, CollectiveError> {
        self.compile_lowered(&self.lower(outputs, topology)?)
    }

    fn check_root(&self, root: usize) -> Result<(), CollectiveError> {
        if root >= self.size() {
            return Err(CollectiveError::RootOutOfRange {
                root,
                size: self.size(),
            });
        }
        Ok(())
    }
}
