//! [`DriverCommunicator`]: the SPMD [`Communicator`] over any
//! [`CollectiveDriver`], one rank per thread or process.
//!
//! Design: collectives run **eagerly** through the driver when they are
//! recorded. The communicator evaluates the operand's lazy graph with the
//! reference interpreter (inputs come from [`DriverCommunicator::bind`]),
//! runs the collective on the driver's comm stream, and returns the result
//! as a new `input` node of the same lazy graph whose value it binds, so the
//! rest of the rank's graph keeps building on it and
//! [`DriverCommunicator::evaluate`] sees the collective's result. Recording a
//! driver-collective node in the graph instead (run by the executor on the
//! comm stream) needs a new `Op` variant and is future work (see
//! `docs/drivers.md`).
//!
//! `all_gather` and `reduce_scatter` are composed from the driver's
//! primitives: the gather is a send to every peer and a receive from every
//! peer, the scatter an `all_reduce` of which each rank keeps its slice.
//! `barrier` is an `all_reduce` of one byte.

use super::{CollectiveDriver, DriverError, ElemType};
use crate::{CollectiveError, Communicator};
use fuel_graph_ext::exec::Tensor;
use fuel_graph_ext::interp::{interpret, HostTensor};
use fuel_graph_ext::{Device, LazyTensor, ReduceOp, TensorType};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// One rank of an SPMD world whose collectives go through driver `D`.
pub struct DriverCommunicator<D: CollectiveDriver> {
    comm: D::Communicator,
    dev: D::Device,
    rank: usize,
    size: usize,
    timeout: Duration,
    bound: Mutex<BTreeMap<String, HostTensor>>,
    seq: AtomicU64,
}

fn drv(e: DriverError) -> CollectiveError {
    CollectiveError::Driver(e.to_string())
}

impl<D: CollectiveDriver> DriverCommunicator<D> {
    /// Wraps a joined communicator; buffers live on `dev`; reading results
    /// back waits at most `timeout`.
    pub fn new(comm: D::Communicator, dev: D::Device, timeout: Duration) -> Self {
        let (rank, size) = D::rank_and_size(&comm);
        DriverCommunicator {
            comm,
            dev,
            rank,
            size,
            timeout,
            bound: Mutex::new(BTreeMap::new()),
            seq: AtomicU64::new(0),
        }
    }

    /// The driver communicator underneath.
    pub fn inner(&self) -> &D::Communicator {
        &self.comm
    }

    /// Feeds the lazy graph's input `name` with `value`.
    pub fn bind(&self, name: &str, value: HostTensor) {
        self.lock().insert(name.to_string(), value);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, HostTensor>> {
        self.bound.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The value of `t` given the bound inputs and earlier collective results.
    pub fn evaluate(&self, t: &LazyTensor) -> Result<HostTensor, CollectiveError> {
        let mut g = t.graph().snapshot();
        g.set_outputs(vec![t.value()]);
        let inputs = self.lock().clone();
        let mut out = interpret(&g, &inputs)
            .map_err(|e| CollectiveError::Driver(format!("evaluating the operand: {e}")))?;
        out.pop()
            .ok_or_else(|| CollectiveError::Driver("evaluating the operand gave no value".into()))
    }

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
        let out = self.run_reduce(t.bytes(), t.ty().dtype.into(), op)?;
        to_tensor(t.ty().clone(), out)
    }

    /// Every rank gets rank `root`'s `t`.
    pub fn broadcast_tensor(&self, t: &Tensor, root: usize) -> Result<Tensor, DriverError> {
        super::check_rank(root, self.size)?;
        if self.rank == root {
            let (dt, count) = D::data_type(t.ty().dtype.into(), t.bytes().len() as u64)?;
            let src = D::upload(&self.dev, t.bytes())?;
            let s = D::comm_stream(&self.comm);
            for peer in (0..self.size).filter(|p| *p != root) {
                D::send(&self.comm, &src, dt, count, peer, s)?;
            }
            D::synchronize(&self.comm, s)?;
            return Ok(t.clone());
        }
        let (dt, count) = D::data_type(t.ty().dtype.into(), t.bytes().len() as u64)?;
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
        let (dt, count) = D::data_type(ty.dtype.into(), n as u64).map_err(drv)?;
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
            .run_reduce(t.bytes(), ty.dtype.into(), op)
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

    /// Records `value` as a new input of `like`'s graph and binds it.
    fn record(&self, like: &LazyTensor, what: &str, value: Tensor) -> LazyTensor {
        let seq = self.seq.fetch_add(1, Ordering::Relaxed);
        let name = format!("{what}#{seq}@rank{}", self.rank);
        let device = like.device().unwrap_or(Device::cpu(0));
        let t = like.graph().input(&name, device, value.ty().clone());
        self.bind(&name, value.to_host());
        t
    }

    fn eval_tensor(&self, t: &LazyTensor) -> Result<Tensor, CollectiveError> {
        Ok(Tensor::from_host(&self.evaluate(t)?))
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

impl<D: CollectiveDriver> Communicator for DriverCommunicator<D> {
    fn rank(&self) -> usize {
        self.rank
    }

    fn world_size(&self) -> usize {
        self.size
    }

    fn all_reduce(&self, tensor: &LazyTensor, op: ReduceOp) -> Result<LazyTensor, CollectiveError> {
        let v = self.eval_tensor(tensor)?;
        let out = self.all_reduce_tensor(&v, op).map_err(drv)?;
        Ok(self.record(tensor, "all_reduce", out))
    }

    fn broadcast(&self, tensor: &LazyTensor, root: usize) -> Result<LazyTensor, CollectiveError> {
        if root >= self.size {
            return Err(CollectiveError::RootOutOfRange {
                root,
                size: self.size,
            });
        }
        let v = self.eval_tensor(tensor)?;
        let out = self.broadcast_tensor(&v, root).map_err(drv)?;
        Ok(self.record(tensor, "broadcast", out))
    }

    fn all_gather(&self, tensor: &LazyTensor, axis: usize) -> Result<LazyTensor, CollectiveError> {
        check_axis(axis, &tensor.ty())?;
        let v = self.eval_tensor(tensor)?;
        let out = self.all_gather_tensor(&v, axis)?;
        Ok(self.record(tensor, "all_gather", out))
    }

    fn reduce_scatter(
        &self,
        tensor: &LazyTensor,
        op: ReduceOp,
        axis: usize,
    ) -> Result<LazyTensor, CollectiveError> {
        let ty = tensor.ty();
        check_axis(axis, &ty)?;
        if !ty.shape[axis].is_multiple_of(self.size) {
            return Err(CollectiveError::NotDivisible {
                axis,
                extent: ty.shape[axis],
                size: self.size,
            });
        }
        let v = self.eval_tensor(tensor)?;
        let out = self.reduce_scatter_tensor(&v, op, axis)?;
        Ok(self.record(tensor, "reduce_scatter", out))
    }

    fn barrier(&self) -> Result<(), CollectiveError> {
        self.barrier_now().map_err(drv)
    }
}
