//! [`DriverCommunicator`]: the SPMD [`Communicator`] over any
//! [`CollectiveDriver`], one rank per thread or process.
//!
//! Design: collectives are **recorded**, not run. Each call adds one
//! `comm.<collective> %x {comm=ID, ranks=N} @device` node to the rank's
//! lazy graph, where `ID` is this communicator's registration with the
//! executor ([`fuel_graph_ext::exec::comm`]). Nothing moves until the rank
//! compiles and runs its graph ([`DriverCommunicator::evaluate`] does that
//! with the inputs given to [`DriverCommunicator::bind`]); the executor then
//! reaches each `comm.*` node in graph order and calls back into this
//! communicator, which runs the collective through its driver on the
//! driver's comm stream (fenced against the buffers it reads and writes).
//! Every rank records the same collectives in the same order, so they meet.
//! The oracle for such graphs is `interp::interpret_world`.
//!
//! `all_gather` and `reduce_scatter` are composed from the driver's
//! primitives: the gather is a send to every peer and a receive from every
//! peer, the scatter an `all_reduce` of which each rank keeps its slice.
//! `barrier` has no tensor to record and runs at once, as an `all_reduce` of
//! one byte.

use super::{CollectiveDriver, DriverError, ElemType};
use crate::{CollectiveError, Communicator};
use fuel_graph_ext::exec::comm::{self, CommHandler};
use fuel_graph_ext::exec::{self, Tensor};
use fuel_graph_ext::interp::HostTensor;
use fuel_graph_ext::op::CommOp;
use fuel_graph_ext::{LazyTensor, Op, ReduceOp, TensorType};
use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::Mutex;
use std::time::Duration;

/// One rank of an SPMD world whose collectives go through driver `D`.
pub struct DriverCommunicator<D: CollectiveDriver + 'static> {
    core: Rc<Core<D>>,
    /// This communicator's registration with the executor.
    id: u32,
    bound: Mutex<BTreeMap<String, HostTensor>>,
}

/// What runs the collectives; the executor holds it (weakly) as a handler.
struct Core<D: CollectiveDriver> {
    comm: D::Communicator,
    dev: D::Device,
    rank: usize,
    size: usize,
    timeout: Duration,
}

fn drv(e: DriverError) -> CollectiveError {
    CollectiveError::Driver(e.to_string())
}

impl<D: CollectiveDriver + 'static> DriverCommunicator<D> {
    /// Wraps a joined communicator; buffers live on `dev`; reading results
    /// back waits at most `timeout`. Registers it with the executor on this
    /// thread, so this rank's graphs must run on this thread.
    pub fn new(comm: D::Communicator, dev: D::Device, timeout: Duration) -> Self {
        let (rank, size) = D::rank_and_size(&comm);
        let core = Rc::new(Core {
            comm,
            dev,
            rank,
            size,
            timeout,
        });
        let handler: Rc<dyn CommHandler> = core.clone();
        let id = comm::register(&handler);
        DriverCommunicator {
            core,
            id,
            bound: Mutex::new(BTreeMap::new()),
        }
    }

    /// The driver communicator underneath.
    pub fn inner(&self) -> &D::Communicator {
        &self.core.comm
    }

    /// The id its `comm.*` nodes carry.
    pub fn id(&self) -> u32 {
        self.id
    }

    /// Feeds the lazy graph's input `name` with `value`.
    pub fn bind(&self, name: &str, value: HostTensor) {
        self.lock().insert(name.to_string(), value);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, HostTensor>> {
        self.bound.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Compiles this rank's graph with `t` as its output, runs it on the
    /// executor with the bound inputs (every recorded collective meets the
    /// other ranks, which must evaluate the same graph), and returns `t`.
    pub fn evaluate(&self, t: &LazyTensor) -> Result<HostTensor, CollectiveError> {
        let mut g = t.graph().snapshot();
        g.set_outputs(vec![t.value()]);
        let inputs = self.lock().clone();
        let exe = exec::compile(&g, &[]).map_err(|e| {
            CollectiveError::Driver(format!("compiling rank {}'s graph: {e}", self.core.rank))
        })?;
        let mut out = exe.run_host(&inputs).map_err(|e| {
            CollectiveError::Driver(format!("running rank {}'s graph: {e}", self.core.rank))
        })?;
        out.pop()
            .ok_or_else(|| CollectiveError::Driver("the graph returned no value".into()))
    }

    /// Every rank gets the reduction of every rank's `t`, at once.
    pub fn all_reduce_tensor(&self, t: &Tensor, op: ReduceOp) -> Result<Tensor, DriverError> {
        self.core.all_reduce_tensor(t, op)
    }

    /// Every rank gets rank `root`'s `t`, at once.
    pub fn broadcast_tensor(&self, t: &Tensor, root: usize) -> Result<Tensor, DriverError> {
        self.core.broadcast_tensor(t, root)
    }

    /// Every rank gets all ranks' `t` joined along `axis`, at once.
    pub fn all_gather_tensor(&self, t: &Tensor, axis: usize) -> Result<Tensor, CollectiveError> {
        self.core.all_gather_tensor(t, axis)
    }

    /// Rank r gets the r-th slice along `axis` of the reduction, at once.
    pub fn reduce_scatter_tensor(
        &self,
        t: &Tensor,
        op: ReduceOp,
        axis: usize,
    ) -> Result<Tensor, CollectiveError> {
        self.core.reduce_scatter_tensor(t, op, axis)
    }

    /// Returns once every rank has called it.
    pub fn barrier_now(&self) -> Result<(), DriverError> {
        self.core.barrier_now()
    }

    /// Records one `comm.*` node reading `t`.
    fn record(&self, t: &LazyTensor, kind: CommOp) -> Result<LazyTensor, CollectiveError> {
        let device = t
            .device()
            .ok_or_else(|| CollectiveError::Driver("the tensor has no device".into()))?;
        let op = Op::Comm {
            kind,
            comm: self.id,
            ranks: self.core.size,
            device,
        };
        let mut r = t.graph().record(op, &[t])?;
        r.pop()
            .ok_or_else(|| CollectiveError::Driver("recording the collective gave no value".into()))
    }
}

impl<D: CollectiveDriver> Core<D> {
    fn run_reduce(
        &self,
        bytes: &[u8],
        elem: ElemType,
        op: ReduceOp,
    ) -> Result<Vec<u8>, DriverError> {
        let (dt, count) = D::data_type(elem, bytes.len() as u64)?;
        let src = D::upload(&self.dev, bytes)?;
        let dst = D::alloc(&self.dev, bytes.len())?;
        let s = D::comm_stream(&self.comm);
        D::all_reduce(&self.comm, &src, &dst, dt, count, op, s)?;
        D::synchronize(&self.comm, s)?;
        D::download(&dst, self.timeout)
    }

    /// Every rank gets the reduction of every rank's `t`.
    pub fn all_reduce_tensor(&self, t: &Tensor, op: ReduceOp) -> Result<Tensor, DriverError> {
        let out = self.run_reduce(t.bytes(), t.ty().dtype, op)?;
        to_tensor(t.ty().clone(), out)
    }

    /// Every rank gets rank `root`'s `t`.
    pub fn broadcast_tensor(&self, t: &Tensor, root: usize) -> Result<Tensor, DriverError> {
        super::check_rank(root, self.size)?;
        if self.rank == root {
            let (dt, count) = D::data_type(t.ty().dtype, t.bytes().len() as u64)?;
            let src = D::upload(&self.dev, t.bytes())?;
            let s = D::comm_stream(&self.comm);
            for peer in (0..self.size).filter(|p| *p != root) {
                D::send(&self.comm, &src, dt, count, peer, s)?;
            }
            D::synchronize(&self.comm, s)?;
            return Ok(t.clone());
        }
        let (dt, count) = D::data_type(t.ty().dtype, t.bytes().len() as u64)?;
        let dst = D::alloc(&self.dev, t.bytes().len())?;
        let s = D::comm_stream(&self.comm);
        D::recv(&self.comm, &dst, dt, count, root, s)?;
        D::synchronize(&self.comm, s)?;
        to_tensor(t.ty().clone(), D::download(&dst, self.timeout)?)
    }

    /// Every rank gets all ranks' `t` joined along `axis`, in rank order.
    pub fn all_gather_tensor(&self, t: &Tensor, axis: usize) -> Result<Tensor, CollectiveError> {
        let ty = t.ty().clone();
        check_axis(axis, &ty)?;
        let n = t.bytes().len();
        let (dt, count) = D::data_type(ty.dtype, n as u64).map_err(drv)?;
        let s = D::comm_stream(&self.comm);
        let src = D::upload(&self.dev, t.bytes()).map_err(drv)?;
        let mut slots = Vec::new();
        for peer in (0..self.size).filter(|p| *p != self.rank) {
            D::send(&self.comm, &src, dt, count, peer, s).map_err(drv)?;
            let dst = D::alloc(&self.dev, n).map_err(drv)?;
            D::recv(&self.comm, &dst, dt, count, peer, s).map_err(drv)?;
            slots.push((peer, dst));
        }
        D::synchronize(&self.comm, s).map_err(drv)?;
        let mut parts: Vec<Vec<u8>> = vec![Vec::new(); self.size];
        parts[self.rank] = t.bytes().to_vec();
        for (peer, dst) in slots {
            parts[peer] = D::download(&dst, self.timeout).map_err(drv)?;
        }
        let outer: usize = ty.shape[..axis].iter().product();
        let chunk = n / outer.max(1);
        let mut out = Vec::with_capacity(n * self.size);
        for o in 0..outer {
            for p in &parts {
                out.extend_from_slice(&p[o * chunk..(o + 1) * chunk]);
            }
        }
        let ty = ty.with_dim(axis, ty.shape[axis] * self.size);
        to_tensor(ty, out).map_err(drv)
    }

    /// Reduces every rank's `t` and gives rank r the r-th of `size` equal
    /// slices along `axis`.
    pub fn reduce_scatter_tensor(
        &self,
        t: &Tensor,
        op: ReduceOp,
        axis: usize,
    ) -> Result<Tensor, CollectiveError> {
        let ty = t.ty().clone();
        check_axis(axis, &ty)?;
        let extent = ty.shape[axis];
        if !extent.is_multiple_of(self.size) {
            return Err(CollectiveError::NotDivisible {
                axis,
                extent,
                size: self.size,
            });
        }
        let full = self
            .run_reduce(t.bytes(), ty.dtype, op)
            .map_err(drv)?;
        let outer: usize = ty.shape[..axis].iter().product();
        let chunk = full.len() / outer.max(1);
        let part = chunk / self.size;
        let mut out = Vec::with_capacity(full.len() / self.size);
        for o in 0..outer {
            let at = o * chunk + self.rank * part;
            out.extend_from_slice(&full[at..at + part]);
        }
        to_tensor(ty.with_dim(axis, extent / self.size), out).map_err(drv)
    }

    /// Returns once every rank has called it.
    pub fn barrier_now(&self) -> Result<(), DriverError> {
        self.run_reduce(&[1u8], ElemType::U8, ReduceOp::Sum)
            .map(|_| ())
    }
}

fn check_axis(axis: usize, ty: &TensorType) -> Result<(), CollectiveError> {
    if axis >= ty.rank() {
        return Err(CollectiveError::AxisOutOfRange {
            axis,
            ty: ty.clone(),
            rank: ty.rank(),
        });
    }
    Ok(())
}

fn to_tensor(ty: TensorType, bytes: Vec<u8>) -> Result<Tensor, DriverError> {
    Tensor::from_bytes(ty, bytes).map_err(|reason| DriverError::Backend {
        driver: "spmd",
        call: "read back",
        reason,
    })
}

impl<D: CollectiveDriver + 'static> CommHandler for Core<D> {
    fn world_size(&self) -> usize {
        self.size
    }

    fn run(&self, op: &CommOp, input: &Tensor, out: &TensorType) -> Result<Tensor, String> {
        let res = match *op {
            CommOp::AllReduce(r) => self.all_reduce_tensor(input, r).map_err(|e| e.to_string()),
            CommOp::Broadcast { root } => self
                .broadcast_tensor(input, root)
                .map_err(|e| e.to_string()),
            CommOp::AllGather { axis } => self
                .all_gather_tensor(input, axis)
                .map_err(|e| e.to_string()),
            CommOp::ReduceScatter { op, axis } => self
                .reduce_scatter_tensor(input, op, axis)
                .map_err(|e| e.to_string()),
            CommOp::Barrier => self
                .barrier_now()
                .map(|()| input.clone())
                .map_err(|e| e.to_string()),
        }?;
        if res.ty() != out {
            return Err(format!(
                "the driver returned {} where {out} was recorded",
                res.ty()
            ));
        }
        Ok(res)
    }
}

impl<D: CollectiveDriver + 'static> Communicator for DriverCommunicator<D> {
    fn rank(&self) -> usize {
        self.core.rank
    }

    fn world_size(&self) -> usize {
        self.core.size
    }

    fn all_reduce(&self, tensor: &LazyTensor, op: ReduceOp) -> Result<LazyTensor, CollectiveError> {
        self.record(tensor, CommOp::AllReduce(op))
    }

    fn broadcast(&self, tensor: &LazyTensor, root: usize) -> Result<LazyTensor, CollectiveError> {
        if root >= self.core.size {
            return Err(CollectiveError::RootOutOfRange {
                root,
                size: self.core.size,
            });
        }
        self.record(tensor, CommOp::Broadcast { root })
    }

    fn all_gather(&self, tensor: &LazyTensor, axis: usize) -> Result<LazyTensor, CollectiveError> {
        check_axis(axis, &tensor.ty())?;
        self.record(tensor, CommOp::AllGather { axis })
    }

    fn reduce_scatter(
        &self,
        tensor: &LazyTensor,
        op: ReduceOp,
        axis: usize,
    ) -> Result<LazyTensor, CollectiveError> {
        let ty = tensor.ty();
        check_axis(axis, &ty)?;
        if !ty.shape[axis].is_multiple_of(self.core.size) {
            return Err(CollectiveError::NotDivisible {
                axis,
                extent: ty.shape[axis],
                size: self.core.size,
            });
        }
        self.record(tensor, CommOp::ReduceScatter { op, axis })
    }

    fn barrier(&self) -> Result<(), CollectiveError> {
        self.core.barrier_now().map_err(drv)
    }
}
