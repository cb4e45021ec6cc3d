//! One joined rank as the executor uses it: [`GraphComm`] is the
//! object-safe interface through which a compiled graph's `comm.*` steps
//! run, and [`RankComm`] implements it over any [`CollectiveDriver`].
//!
//! A `comm.*` step runs on the worker of its device, on the executor's own
//! buffers: the operand is lent to the driver and the result is a fresh
//! buffer of the step's device that the driver fills, so with NCCL the data
//! never leaves the GPU. Collectives the driver has natively (NCCL's
//! all_gather, broadcast, reduce_scatter) are used as they are; the others
//! are composed from `send`/`recv` (inside a group call) and `all_reduce`,
//! and any layout a collective along an inner axis needs is a region copy
//! on the device, computed by the same helpers as slice and concat.

use super::common::{check_rank, lock};
use super::{CollectiveDriver, DeviceResource, DriverError};
use crate::backend::fault::Faults;
use crate::backend::{self, concat_regions, slice_regions, Buf, Ctx, Region};
use crate::device::DeviceKind;
use crate::dtype::TensorType;
use crate::exec::ExecError;
use crate::op::{CommOp, ReduceOp};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One `comm.*` step as the executor hands it to a [`GraphComm`].
pub struct CommCall<'a> {
    /// What to do.
    pub op: CommOp,
    /// The node's mnemonic, for errors.
    pub mnemonic: &'a str,
    /// The step's device, where the result is allocated.
    pub ctx: &'a Ctx,
    /// The operand (this rank's tensor).
    pub src: &'a Arc<Buf>,
    /// The operand's type.
    pub in_ty: &'a TensorType,
    /// The result's type.
    pub out_ty: &'a TensorType,
    /// The run's fault points (allocations count).
    pub faults: &'a Faults,
}

/// One rank's membership of an SPMD world, as a compiled graph's `comm.*`
/// steps use it. Handed to `exec::Compiler::communicator` and held by the
/// executable.
pub trait GraphComm: Send + Sync {
    /// This rank.
    fn rank(&self) -> usize;
    /// The world size.
    fn ranks(&self) -> usize;
    /// The driver's name (`host`, `nccl`, `mpi`).
    fn driver(&self) -> &'static str;
    /// The kind of device whose buffers the driver carries.
    fn kind(&self) -> DeviceKind;
    /// Runs one collective; every rank calls it in the same order.
    fn run(&self, call: CommCall<'_>) -> Result<Buf, ExecError>;
}

/// A joined communicator of driver `D`, its device, and how long reading a
/// result back may wait.
pub struct RankComm<D: CollectiveDriver> {
    comm: Mutex<D::Communicator>,
    dev: D::Device,
    rank: usize,
    ranks: usize,
    timeout: Duration,
}

impl<D: CollectiveDriver> RankComm<D> {
    /// Wraps a joined communicator whose buffers live on `dev`.
    pub fn new(comm: D::Communicator, dev: D::Device, timeout: Duration) -> Self {
        let (rank, ranks) = D::rank_and_size(&comm);
        RankComm {
            comm: Mutex::new(comm),
            dev,
            rank,
            ranks,
            timeout,
        }
    }

    /// Runs `f` with the driver communicator underneath.
    pub fn with_comm<R>(&self, f: impl FnOnce(&D::Communicator) -> R) -> R {
        f(&lock(&self.comm))
    }

    /// Returns once every rank has called it: a one-byte all-reduce on the
    /// communicator's device, run at once.
    pub fn barrier(&self) -> Result<(), DriverError> {
        let comm = lock(&self.comm);
        let (dt, count) = D::data_type(crate::dtype::DType::U8, 1)?;
        let src = D::upload(&self.dev, &[1u8])?;
        let dst = D::alloc(&self.dev, 1)?;
        let s = D::comm_stream(&comm);
        D::all_reduce(&comm, &src, &dst, dt, count, ReduceOp::Sum, s)?;
        D::synchronize(&comm, s)?;
        D::download(&dst, self.timeout).map(|_| ())
    }
}

/// The state of one [`GraphComm::run`].
struct Run<'a, D: CollectiveDriver> {
    comm: &'a D::Communicator,
    call: &'a CommCall<'a>,
    stream: D::CommStream,
    rank: usize,
    ranks: usize,
}

impl<D: CollectiveDriver> Run<'_, D> {
    fn exec_err(&self, e: DriverError) -> ExecError {
        ExecError::Spmd {
            op: self.call.mnemonic.to_string(),
            device: self.call.ctx.device(),
            reason: e.to_string(),
        }
    }

    /// A fresh destination of `bytes` on the step's device.
    fn alloc(&self, bytes: usize) -> Result<DeviceResource<D>, ExecError> {
        let buf = self.call.ctx.alloc(bytes, self.call.faults)?;
        D::adopt(buf).map_err(|e| self.exec_err(e))
    }

    /// Waits for everything enqueued and takes `dst`'s buffer back.
    fn finish(&self, dst: DeviceResource<D>) -> Result<Buf, ExecError> {
        D::order_compute(&dst).map_err(|e| self.exec_err(e))?;
        D::synchronize(self.comm, self.stream).map_err(|e| self.exec_err(e))?;
        D::reclaim(dst).map_err(|e| self.exec_err(e))
    }

    /// `out` (of `bytes`) gathered on the device from `regions` of `ins`.
    fn regions(
        &self,
        regions: &[Region],
        ins: &[Arc<Buf>],
        bytes: usize,
    ) -> Result<Buf, ExecError> {
        let mut out = self.call.ctx.alloc(bytes, self.call.faults)?;
        backend::gather(
            self.call.ctx,
            self.call.mnemonic,
            regions,
            ins,
            &mut out,
            self.call.faults,
        )?;
        Ok(out)
    }

    /// A copy of the operand (a root's broadcast, a barrier's result).
    fn copy_of_src(&self) -> Result<Buf, ExecError> {
        let n = self.call.in_ty.size_bytes();
        let whole = [Region {
            operand: 0,
            src: 0,
            dst: 0,
            len: n,
        }];
        self.regions(&whole, std::slice::from_ref(self.call.src), n)
    }

    fn run(&self) -> Result<Buf, ExecError> {
        let call = self.call;
        let d = |e: DriverError| self.exec_err(e);
        let in_bytes = call.in_ty.size_bytes();
        let out_bytes = call.out_ty.size_bytes();
        let (dt, count) = D::data_type(call.in_ty.dtype, in_bytes as u64).map_err(d)?;
        let src = D::lend(call.src).map_err(d)?;
        let (comm, s) = (self.comm, self.stream);
        match call.op {
            CommOp::AllReduce(op) => {
                let dst = self.alloc(in_bytes)?;
                D::all_reduce(comm, &src, &dst, dt, count, op, s).map_err(d)?;
                self.finish(dst)
            }
            CommOp::Broadcast { root } => {
                check_rank(root, self.ranks).map_err(d)?;
                let dst = self.alloc(in_bytes)?;
                if D::broadcast(comm, &src, &dst, dt, count, root, s).map_err(d)? {
                    return self.finish(dst);
                }
                D::group_start().map_err(d)?;
                let posted = if self.rank == root {
                    (0..self.ranks)
                        .filter(|p| *p != root)
                        .try_for_each(|p| D::send(comm, &src, dt, count, p, s))
                } else {
                    D::recv(comm, &dst, dt, count, root, s)
                };
                D::group_end().map_err(d)?;
                posted.map_err(d)?;
                let out = self.finish(dst)?;
                if self.rank == root {
                    drop(out);
                    return self.copy_of_src();
                }
                Ok(out)
            }
            CommOp::AllGather { axis } => self.all_gather(&src, dt, count, axis),
            CommOp::AllToAll { axis } => self.all_to_all(src, dt, count, axis),
            CommOp::ReduceScatter { op, axis } => {
                let ty = call.in_ty;
                let len = ty.shape.get(axis).copied().unwrap_or(0) / self.ranks.max(1);
                let outer: usize = ty.shape[..axis.min(ty.rank())].iter().product();
                if outer == 1 {
                    // Each rank's slice is one contiguous run: NCCL's own.
                    let dst = self.alloc(out_bytes)?;
                    let per = count / self.ranks.max(1);
                    if D::reduce_scatter(comm, &src, &dst, dt, per, op, s).map_err(d)? {
                        return self.finish(dst);
                    }
                    drop(dst);
                }
                let full = self.alloc(in_bytes)?;
                D::all_reduce(comm, &src, &full, dt, count, op, s).map_err(d)?;
                let full = Arc::new(self.finish(full)?);
                let mine = slice_regions(ty, axis, self.rank * len, len);
                self.regions(&mine, &[full], out_bytes)
            }
            CommOp::Barrier => {
                let one = self.alloc(in_bytes)?;
                D::all_reduce(comm, &src, &one, dt, count.min(1), ReduceOp::Max, s).map_err(d)?;
                drop(self.finish(one)?);
                self.copy_of_src()
            }
        }
    }

    /// Piece `rank` (along `axis`, of `ranks` equal pieces) of every rank's
    /// operand, joined in rank order. Along an inner axis the pieces are
    /// packed into contiguous runs first and unpacked after, by region
    /// copies on the device.
    fn all_to_all(
        &self,
        src: DeviceResource<D>,
        dt: D::DataType,
        count: usize,
        axis: usize,
    ) -> Result<Buf, ExecError> {
        let call = self.call;
        let d = |e: DriverError| self.exec_err(e);
        let n = self.ranks.max(1);
        let ty = call.in_ty;
        let bytes = ty.size_bytes();
        let len = ty.shape.get(axis).copied().unwrap_or(0) / n;
        let piece = ty.with_dim(axis, len);
        let piece_bytes = piece.size_bytes();
        let outer: usize = ty.shape[..axis.min(ty.rank())].iter().product();
        let counts = vec![count / n; n];
        // The packed operand, kept alive until the exchange is done.
        let mut keep = None;
        let packed = if outer == 1 {
            src
        } else {
            let regions: Vec<Region> = (0..n)
                .flat_map(|j| {
                    slice_regions(ty, axis, j * len, len)
                        .into_iter()
                        .map(move |r| Region {
                            dst: r.dst + j * piece_bytes,
                            ..r
                        })
                })
                .collect();
            drop(src);
            let buf = Arc::new(self.regions(&regions, std::slice::from_ref(call.src), bytes)?);
            let lent = D::lend(&buf).map_err(d)?;
            keep = Some(buf);
            lent
        };
        let flat = self.alloc(bytes)?;
        D::all_to_all(self.comm, &packed, &flat, dt, &counts, &counts, self.stream).map_err(d)?;
        let flat = self.finish(flat)?;
        drop((packed, keep));
        if outer == 1 {
            return Ok(flat);
        }
        let tys = vec![&piece; n];
        let unpack: Vec<Region> = concat_regions(&tys, axis)
            .into_iter()
            .map(|r| Region {
                operand: 0,
                src: r.operand * piece_bytes + r.src,
                ..r
            })
            .collect();
        self.regions(&unpack, &[Arc::new(flat)], bytes)
    }

    /// Every rank's operand joined along `axis`, in rank order.
    fn all_gather(
        &self,
        src: &DeviceResource<D>,
        dt: D::DataType,
        count: usize,
        axis: usize,
    ) -> Result<Buf, ExecError> {
        let call = self.call;
        let d = |e: DriverError| self.exec_err(e);
        let (comm, s) = (self.comm, self.stream);
        let n = call.in_ty.size_bytes();
        let out_bytes = call.out_ty.size_bytes();
        let tys = vec![call.in_ty; self.ranks];
        let layout = concat_regions(&tys, axis);
        let flat = self.alloc(n * self.ranks)?;
        if D::all_gather(comm, src, &flat, dt, count, s).map_err(d)? {
            // NCCL's result is rank-major: already the answer along an
            // outer axis, else one region copy away.
            let flat = self.finish(flat)?;
            let outer: usize = call.in_ty.shape[..axis.min(call.in_ty.rank())]
                .iter()
                .product();
            if outer == 1 {
                return Ok(flat);
            }
            let from_flat: Vec<Region> = layout
                .iter()
                .map(|r| Region {
                    operand: 0,
                    src: r.operand * n + r.src,
                    ..*r
                })
                .collect();
            return self.regions(&from_flat, &[Arc::new(flat)], out_bytes);
        }
        drop(flat);
        let mut parts = Vec::with_capacity(self.ranks);
        for p in 0..self.ranks {
            parts.push(if p == self.rank {
                None
            } else {
                Some(self.alloc(n)?)
            });
        }
        D::group_start().map_err(d)?;
        // Each pair orders its exchange by rank (lower sends first), so a
        // driver whose sends block until received cannot deadlock.
        let posted = (0..self.ranks)
            .filter(|p| *p != self.rank)
            .try_for_each(|p| {
                let Some(dst) = &parts[p] else { return Ok(()) };
                if self.rank < p {
                    D::send(comm, src, dt, count, p, s)?;
                    D::recv(comm, dst, dt, count, p, s)
                } else {
                    D::recv(comm, dst, dt, count, p, s)?;
                    D::send(comm, src, dt, count, p, s)
                }
            });
        D::group_end().map_err(d)?;
        posted.map_err(d)?;
        D::synchronize(comm, s).map_err(d)?;
        let mut ins = Vec::with_capacity(self.ranks);
        for part in parts {
            ins.push(match part {
                Some(p) => Arc::new(D::reclaim(p).map_err(d)?),
                None => call.src.clone(),
            });
        }
        self.regions(&layout, &ins, out_bytes)
    }
}

impl<D: CollectiveDriver> GraphComm for RankComm<D> {
    fn rank(&self) -> usize {
        self.rank
    }

    fn ranks(&self) -> usize {
        self.ranks
    }

    fn driver(&self) -> &'static str {
        D::NAME
    }

    fn kind(&self) -> DeviceKind {
        D::KIND
    }

    fn run(&self, call: CommCall<'_>) -> Result<Buf, ExecError> {
        let comm = lock(&self.comm);
        let run = Run::<D> {
            comm: &comm,
            call: &call,
            stream: D::comm_stream(&comm),
            rank: self.rank,
            ranks: self.ranks,
        };
        run.run()
    }
}
