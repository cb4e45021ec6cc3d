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

use super::prologue::{check_rank, lock};
use super::{Call, CollectiveDriver, DeviceResource, DriverError, P2p};
use crate::backend::fault::Faults;
use crate::backend::{self, concat_regions, slice_regions, Buf, Ctx, Region};
use crate::exec::ExecError;
use fuel_graph_ext::device::DeviceKind;
use fuel_graph_ext::dtype::TensorType;
use fuel_graph_ext::op::{CommOp, ReduceOp};
use std::cell::Cell;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One `comm.*` step as the executor hands it to a [`GraphComm`].
pub struct CommCall<'a> {
    /// What to do.
    pub op: CommOp,
    /// An uneven `all_to_all`'s N×N split (entry `i*N + j`: what rank i
    /// sends rank j along the axis), the same on every rank; `None` for
    /// equal pieces.
    pub split: Option<&'a [usize]>,
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
    /// The caller's previous output bytes for this step, which a host
    /// result is written into instead of a fresh buffer (`None` when the
    /// result is not an output or the caller has none to give).
    pub reuse: Option<Arc<[u8]>>,
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

    /// Checks, at once, that every rank holds the same all_to_all `split`
    /// (N×N) and an operand of type `ty` that differs from the others'
    /// only along `axis`: the round an uneven `comm.all_to_all` runs first
    /// on a driver that cannot compare counts (NCCL). Every rank must call
    /// it; on a disagreement every rank gets the same
    /// [`DriverError::SplitDisagree`] (E0961).
    pub fn agree_on_split(
        &self,
        split: &[usize],
        ty: &TensorType,
        axis: usize,
    ) -> Result<(), DriverError> {
        let comm = lock(&self.comm);
        agree::<D>(&comm, &self.dev, self.timeout, split, ty, axis)
    }

    /// Returns once every rank has called it: a one-byte all-reduce on the
    /// communicator's device, run at once.
    pub fn barrier(&self) -> Result<(), DriverError> {
        let comm = lock(&self.comm);
        let (dt, count) = D::data_type(fuel_graph_ext::dtype::DType::U8, 1)?;
        let src = D::upload(&self.dev, &[1u8])?;
        let dst = D::alloc(&self.dev, 1)?;
        let s = D::comm_stream(&comm);
        D::all_reduce(Call(&*comm, &src, &dst, dt, s), count, ReduceOp::Sum)?;
        D::synchronize(&comm, s)?;
        D::download(&dst, self.timeout).map(|_| ())
    }
}

/// The state of one [`GraphComm::run`].
struct Run<'a, D: CollectiveDriver> {
    comm: &'a D::Communicator,
    dev: &'a D::Device,
    timeout: Duration,
    call: &'a CommCall<'a>,
    stream: D::CommStream,
    rank: usize,
    ranks: usize,
    /// The caller's output bytes, until the first allocation takes them.
    reuse: Cell<Option<Arc<[u8]>>>,
}

impl<D: CollectiveDriver> Run<'_, D> {
    fn exec_err(&self, e: DriverError) -> ExecError {
        ExecError::Spmd {
            op: self.call.mnemonic.to_string(),
            device: self.call.ctx.device(),
            reason: e.to_string(),
        }
    }

    /// A fresh destination of `bytes` on the step's device ([`fresh`]).
    ///
    /// [`fresh`]: Self::fresh
    fn alloc(&self, bytes: usize) -> Result<DeviceResource<D>, ExecError> {
        let buf = self.fresh(bytes)?;
        D::adopt(buf).map_err(|e| self.exec_err(e))
    }

    /// A buffer of `bytes` on the step's device: the caller's output bytes
    /// when they are that long (`Ctx::alloc_reusing`), else a new one.
    fn fresh(&self, bytes: usize) -> Result<Buf, ExecError> {
        let (reuse, keep) = match self.reuse.take() {
            Some(r) if r.len() != bytes => (None, Some(r)),
            r => (r, None),
        };
        self.reuse.set(keep);
        self.call.ctx.alloc_reusing(bytes, self.call.faults, reuse)
    }

    /// Hands back a result buffer the run will not return after all; the
    /// caller's output bytes it held go back for the next allocation.
    #[allow(irrefutable_let_patterns)] // with every GPU backend compiled out
    fn unused(&self, dst: Buf) {
        if let Buf::Cpu(b) = dst {
            if let Ok(bytes) = b.into_shared() {
                self.reuse.set(Some(bytes));
            }
        }
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
        let mut out = self.fresh(bytes)?;
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
                D::all_reduce(Call(comm, &src, &dst, dt, s), count, op).map_err(d)?;
                self.finish(dst)
            }
            CommOp::Broadcast { root } => {
                check_rank(root, self.ranks).map_err(d)?;
                let dst = self.alloc(in_bytes)?;
                if D::broadcast(Call(comm, &src, &dst, dt, s), count, root).map_err(d)? {
                    return self.finish(dst);
                }
                D::group_start().map_err(d)?;
                let posted = if self.rank == root {
                    (0..self.ranks)
                        .filter(|p| *p != root)
                        .try_for_each(|p| D::send(P2p(comm, &src, dt, count, p, s)))
                } else {
                    D::recv(P2p(comm, &dst, dt, count, root, s))
                };
                D::group_end().map_err(d)?;
                posted.map_err(d)?;
                let out = self.finish(dst)?;
                if self.rank == root {
                    self.unused(out);
                    return self.copy_of_src();
                }
                Ok(out)
            }
            CommOp::AllGather { axis } => self.all_gather(&src, dt, count, axis),
            CommOp::AllToAll { axis } => self.all_to_all(src, dt, axis),
            CommOp::ReduceScatter { op, axis } => {
                let ty = call.in_ty;
                let n = self.ranks.max(1);
                let extents = match call.split {
                    Some(split) => {
                        self.agree(split, ty, axis)?;
                        split.to_vec()
                    }
                    None => vec![ty.shape.get(axis).copied().unwrap_or(0) / n; n],
                };
                let start: usize = extents[..self.rank].iter().sum();
                let len = extents[self.rank];
                let outer: usize = ty.shape[..axis.min(ty.rank())].iter().product();
                if outer == 1 {
                    // Each rank's slice is one contiguous run: the driver's
                    // own reduce-scatter, with a count per rank if uneven.
                    let dst = self.alloc(out_bytes)?;
                    let native = if call.split.is_some() {
                        let counts = self.counts(ty, axis, &extents)?;
                        D::reduce_scatter_uneven(Call(comm, &src, &dst, dt, s), &counts, op)
                    } else {
                        D::reduce_scatter(Call(comm, &src, &dst, dt, s), count / n, op)
                    };
                    if native.map_err(d)? {
                        return self.finish(dst);
                    }
                    self.unused(D::reclaim(dst).map_err(d)?);
                }
                let full = self.alloc(in_bytes)?;
                D::all_reduce(Call(comm, &src, &full, dt, s), count, op).map_err(d)?;
                let full = Arc::new(self.finish(full)?);
                let mine = slice_regions(ty, axis, start, len);
                self.regions(&mine, &[full], out_bytes)
            }
            CommOp::Barrier => {
                let one = self.alloc(in_bytes)?;
                D::all_reduce(Call(comm, &src, &one, dt, s), count.min(1), ReduceOp::Max)
                    .map_err(d)?;
                drop(self.finish(one)?);
                self.copy_of_src()
            }
        }
    }

    /// On a driver that cannot compare counts (NCCL), has every rank check
    /// that all hold `split` and operands like `ty` outside `axis`
    /// ([`agree_on_split`]); nothing on the others, which check the
    /// counts themselves.
    fn agree(&self, split: &[usize], ty: &TensorType, axis: usize) -> Result<(), ExecError> {
        if D::CHECKS_COUNTS {
            return Ok(());
        }
        agree_on_split::<D>(self, split, ty, axis).map_err(|e| self.exec_err(e))
    }

    /// The driver's element count of each piece of `t` whose extent along
    /// `axis` is `extents[r]`.
    fn counts(
        &self,
        t: &TensorType,
        axis: usize,
        extents: &[usize],
    ) -> Result<Vec<usize>, ExecError> {
        extents
            .iter()
            .map(|e| {
                let bytes = t.with_dim(axis, *e).size_bytes() as u64;
                D::data_type(t.dtype, bytes)
                    .map(|(_, c)| c)
                    .map_err(|e| self.exec_err(e))
            })
            .collect()
    }

    /// What this rank sends each rank along `axis` (row `rank` of the
    /// split, or equal pieces) and what it receives from each (column
    /// `rank`, or the same equal pieces).
    fn all_to_all_extents(&self, axis: usize) -> (Vec<usize>, Vec<usize>) {
        let n = self.ranks.max(1);
        match self.call.split {
            Some(split) if split.len() == n * n => {
                let row = split[self.rank * n..(self.rank + 1) * n].to_vec();
                let col = split.iter().skip(self.rank).step_by(n).copied().collect();
                (row, col)
            }
            _ => {
                let len = self.call.in_ty.shape.get(axis).copied().unwrap_or(0) / n;
                (vec![len; n], vec![len; n])
            }
        }
    }

    /// This rank's pieces of every rank's operand (along `axis`, cut by
    /// the split or equally), joined in rank order. Along an inner axis the
    /// pieces are packed into contiguous runs first and unpacked after, by
    /// region copies on the device. The driver compares the counts (host,
    /// MPI); for one that cannot (NCCL) the ranks first agree on the split.
    fn all_to_all(
        &self,
        src: DeviceResource<D>,
        dt: D::DataType,
        axis: usize,
    ) -> Result<Buf, ExecError> {
        let call = self.call;
        let d = |e: DriverError| self.exec_err(e);
        let n = self.ranks.max(1);
        let ty = call.in_ty;
        let out_ty = call.out_ty;
        let (sends, recvs) = self.all_to_all_extents(axis);
        if let Some(split) = call.split {
            self.agree(split, ty, axis)?;
        }
        let (send, recv) = (
            self.counts(ty, axis, &sends)?,
            self.counts(out_ty, axis, &recvs)?,
        );
        let outer: usize = ty.shape[..axis.min(ty.rank())].iter().product();
        // The packed operand, kept alive until the exchange is done.
        let mut keep = None;
        let packed =
            if outer == 1 {
                src
            } else {
                let mut regions = Vec::new();
                let (mut start, mut at) = (0, 0);
                for e in &sends {
                    regions.extend(slice_regions(ty, axis, start, *e).into_iter().map(|r| {
                        Region {
                            dst: r.dst + at,
                            ..r
                        }
                    }));
                    start += e;
                    at += ty.with_dim(axis, *e).size_bytes();
                }
                drop(src);
                let buf = Arc::new(self.regions(
                    &regions,
                    std::slice::from_ref(call.src),
                    ty.size_bytes(),
                )?);
                let lent = D::lend(&buf).map_err(d)?;
                keep = Some(buf);
                lent
            };
        let out_bytes = out_ty.size_bytes();
        let flat = self.alloc(out_bytes)?;
        D::all_to_all(
            Call(self.comm, &packed, &flat, dt, self.stream),
            &send,
            &recv,
        )
        .map_err(d)?;
        let flat = self.finish(flat)?;
        drop((packed, keep));
        if outer == 1 {
            return Ok(flat);
        }
        let pieces: Vec<TensorType> = recvs.iter().map(|e| out_ty.with_dim(axis, *e)).collect();
        let mut offsets = Vec::with_capacity(n);
        let mut at = 0;
        for p in &pieces {
            offsets.push(at);
            at += p.size_bytes();
        }
        let tys: Vec<&TensorType> = pieces.iter().collect();
        let unpack: Vec<Region> = concat_regions(&tys, axis)
            .into_iter()
            .map(|r| Region {
                operand: 0,
                src: offsets[r.operand] + r.src,
                ..r
            })
            .collect();
        self.regions(&unpack, &[Arc::new(flat)], out_bytes)
    }

    /// Every rank's operand joined along `axis`, in rank order: operands
    /// of one type, or with a split, of extents `split[r]` along `axis`.
    /// The driver's own all-gather where it has one (with a count per rank
    /// if uneven), else sends and receives; along an inner axis the
    /// rank-major result is then rearranged by region copies.
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
        let ty = call.in_ty;
        let out_bytes = call.out_ty.size_bytes();
        let extents = match call.split {
            Some(split) => {
                self.agree(split, ty, axis)?;
                split.to_vec()
            }
            None => vec![ty.shape.get(axis).copied().unwrap_or(0); self.ranks],
        };
        let pieces: Vec<TensorType> = extents.iter().map(|e| ty.with_dim(axis, *e)).collect();
        let counts = self.counts(ty, axis, &extents)?;
        let tys: Vec<&TensorType> = pieces.iter().collect();
        let layout = concat_regions(&tys, axis);
        let flat = self.alloc(out_bytes)?;
        let native = if call.split.is_some() {
            D::all_gather_uneven(Call(comm, src, &flat, dt, s), &counts)
        } else {
            D::all_gather(Call(comm, src, &flat, dt, s), count)
        };
        if native.map_err(d)? {
            // The driver's result is rank-major: already the answer along
            // an outer axis, else one region copy away.
            let flat = self.finish(flat)?;
            let outer: usize = ty.shape[..axis.min(ty.rank())].iter().product();
            if outer == 1 {
                return Ok(flat);
            }
            let mut offsets = Vec::with_capacity(pieces.len());
            let mut at = 0;
            for p in &pieces {
                offsets.push(at);
                at += p.size_bytes();
            }
            let from_flat: Vec<Region> = layout
                .iter()
                .map(|r| Region {
                    operand: 0,
                    src: offsets[r.operand] + r.src,
                    ..*r
                })
                .collect();
            return self.regions(&from_flat, &[Arc::new(flat)], out_bytes);
        }
        self.unused(D::reclaim(flat).map_err(d)?);
        let mut parts = Vec::with_capacity(self.ranks);
        for (p, piece) in pieces.iter().enumerate() {
            parts.push(if p == self.rank {
                None
            } else {
                Some(self.alloc(piece.size_bytes())?)
            });
        }
        let mine = counts[self.rank];
        D::group_start().map_err(d)?;
        // Each pair orders its exchange by rank (lower sends first), so a
        // driver whose sends block until received cannot deadlock.
        let posted = (0..self.ranks)
            .filter(|p| *p != self.rank)
            .try_for_each(|p| {
                let Some(dst) = &parts[p] else { return Ok(()) };
                if self.rank < p {
                    D::send(P2p(comm, src, dt, mine, p, s))?;
                    D::recv(P2p(comm, dst, dt, counts[p], p, s))
                } else {
                    D::recv(P2p(comm, dst, dt, counts[p], p, s))?;
                    D::send(P2p(comm, src, dt, mine, p, s))
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

/// Before an uneven all-to-all, all-gather or reduce-scatter on a driver
/// that cannot compare counts (NCCL), every rank checks that all hold the
/// same split and the same operand layout outside the axis: one all-reduce (max) of the split, the element count of
/// one axis entry and their complements, so each rank learns the largest
/// and smallest value of every entry. They agree when the two meet; else
/// every rank gets the same reduced values and fails with the same error
/// (E0961), naming the first entry the ranks disagree on.
fn agree_on_split<D: CollectiveDriver>(
    run: &Run<'_, D>,
    split: &[usize],
    ty: &TensorType,
    axis: usize,
) -> Result<(), DriverError> {
    agree::<D>(run.comm, run.dev, run.timeout, split, ty, axis)
}

/// [`agree_on_split`] on a communicator whose buffers live on `dev`.
fn agree<D: CollectiveDriver>(
    comm: &D::Communicator,
    dev: &D::Device,
    timeout: Duration,
    split: &[usize],
    ty: &TensorType,
    axis: usize,
) -> Result<(), DriverError> {
    let stream = D::comm_stream(comm);
    let inner: usize = ty.shape.get(axis + 1..).map_or(1, |s| s.iter().product());
    let outer: usize = ty.shape.get(..axis).map_or(1, |s| s.iter().product());
    let mut mine: Vec<u64> = split.iter().map(|e| *e as u64).collect();
    mine.push(inner as u64);
    mine.push(outer as u64);
    mine.push(ty.dtype as u64);
    let k = mine.len();
    let words: Vec<u64> = mine
        .iter()
        .copied()
        .chain(mine.iter().map(|v| !v))
        .collect();
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    let (dt, count) = D::data_type(fuel_graph_ext::dtype::DType::U64, bytes.len() as u64)?;
    let src = D::upload(dev, &bytes)?;
    let dst = D::alloc(dev, bytes.len())?;
    D::all_reduce(Call(comm, &src, &dst, dt, stream), count, ReduceOp::Max)?;
    D::synchronize(comm, stream)?;
    let got = D::download(&dst, timeout)?;
    let max: Vec<u64> = got
        .chunks_exact(8)
        .map(|c| {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            u64::from_le_bytes(w)
        })
        .collect();
    if max.len() != 2 * k {
        return Err(DriverError::Backend {
            driver: D::NAME,
            call: "all_reduce",
            reason: format!(
                "the split agreement read back {} words, not {}",
                max.len(),
                2 * k
            ),
        });
    }
    split_verdict(&max[..k], &max[k..], split.len(), D::rank_and_size(comm).1)
}

/// The first entry on which the ranks disagree, from the element-wise
/// maximum of every rank's words (`max`) and of their complements
/// (`max_not`, whose complement is the minimum): `nn` split entries, then
/// the elements per axis entry, the entries before the axis and the dtype.
/// A split of `ranks`² entries is an all-to-all's matrix; one of `ranks`
/// entries lists each rank's extent.
fn split_verdict(max: &[u64], max_not: &[u64], nn: usize, ranks: usize) -> Result<(), DriverError> {
    let n = ranks.max(1);
    for (i, (hi, lo_not)) in max.iter().zip(max_not).enumerate() {
        let lo = !lo_not;
        if lo == *hi {
            continue;
        }
        let what = if i < nn && nn == n * n && n > 1 {
            format!("split entry {i} (what rank {} sends rank {})", i / n, i % n)
        } else if i < nn {
            format!("split entry {i} (rank {i}'s extent)")
        } else {
            match i - nn {
                0 => "the operand's element count per axis entry".to_string(),
                1 => "the operand's entry count before the axis".to_string(),
                _ => "the operand's element type (as a number)".to_string(),
            }
        };
        return Err(DriverError::SplitDisagree {
            what,
            low: lo,
            high: *hi,
        });
    }
    Ok(())
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

    fn run(&self, mut call: CommCall<'_>) -> Result<Buf, ExecError> {
        let comm = lock(&self.comm);
        let reuse = Cell::new(call.reuse.take());
        let run = Run::<D> {
            comm: &comm,
            dev: &self.dev,
            timeout: self.timeout,
            call: &call,
            stream: D::comm_stream(&comm),
            rank: self.rank,
            ranks: self.ranks,
            reuse,
        };
        run.run()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::driver::{CommunicationId, Driver, HostDriver, JoinOptions};
    use fuel_graph_ext::device::Device;
    use fuel_graph_ext::dtype::DType;

    /// The agreement round NCCL's uneven all_to_all runs first, over host
    /// ranks: equal splits pass; a rank with another split, or an operand
    /// that differs outside the axis, fails every rank with one message.
    #[test]
    fn ranks_agree_on_a_split_or_all_fail_alike() {
        let ty = TensorType::new(DType::F32, &[3, 2]);
        let split = [1usize, 2, 2, 1];
        let run = |name: &str, other: Option<[usize; 4]>, cols: usize| -> Vec<Result<(), String>> {
            let id = HostDriver::group_id(&CommunicationId::new(name)).unwrap();
            let handles: Vec<_> = (0..2usize)
                .map(|rank| {
                    let ty = if rank == 1 {
                        ty.with_dim(1, cols)
                    } else {
                        ty.clone()
                    };
                    std::thread::spawn(move || {
                        let opts = JoinOptions::with_timeout(Duration::from_secs(20));
                        let comm = HostDriver::join_with(id, 2, rank, opts).unwrap();
                        let dev = HostDriver::open(Device::cpu(0)).unwrap();
                        let s = match (rank, other) {
                            (1, Some(o)) => o,
                            _ => split,
                        };
                        agree::<HostDriver>(&comm, &dev, Duration::from_secs(20), &s, &ty, 0)
                            .map_err(|e| e.to_string())
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        };
        assert!(run("agree-same", None, 2).iter().all(Result::is_ok));
        let bad = run("agree-split", Some([1, 3, 2, 1]), 2);
        let want = "ranks disagree on an uneven collective's split: split entry 1 (what rank 0 sends rank 1) is 2 on some rank(s) and 3 on others; record the same split on every rank (N×N for all_to_all, one extent per rank for all_gather and reduce_scatter), on operands that differ only along the split axis";
        for r in &bad {
            assert_eq!(r.as_ref().unwrap_err(), want);
        }
        let shape = run("agree-shape", None, 5);
        for r in &shape {
            assert!(r.as_ref().unwrap_err().contains(
                "the operand's element count per axis entry is 2 on some rank(s) and 5 on others"
            ));
        }
    }
}
