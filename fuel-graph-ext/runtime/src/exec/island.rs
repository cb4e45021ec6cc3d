//! `driver_all_reduce` islands: the nodes of one driver all-reduce, run
//! once for every rank through a collective driver that compile joins and
//! the executable keeps: the host driver when every rank is a CPU device,
//! NCCL (one communicator per GPU, made together with `ncclCommInitAll` on
//! the executable's own CUDA devices) when every rank is a CUDA device.
//! The collective is issued for every rank inside one group call, each rank
//! on its own comm stream; the step returns once all are done.

use super::ExecError;
use crate::backend::fault::{Event, Faults};
use crate::backend::{Buf, Ctxs};
use crate::driver::{JoinOptions, LocalAllReduce, LocalGroup};
use fuel_graph_ext::device::{Device, DeviceKind};
use fuel_graph_ext::plan::schedule::{Island, Schedule};
use std::collections::BTreeSet;
use std::sync::Arc;

/// The joined driver of one island.
pub(super) type Joined = Box<dyn LocalAllReduce>;

fn refuse(is: &Island, reason: impl Into<String>) -> ExecError {
    ExecError::DriverAllReduce {
        op: is.mnemonic.clone(),
        device: is.devices.first().copied().unwrap_or(Device::cpu(0)),
        reason: reason.into(),
    }
}

/// Checks every island can run here, before any device is opened.
pub(super) fn check(plan: &Schedule) -> Result<(), ExecError> {
    for is in &plan.islands {
        let kinds: BTreeSet<DeviceKind> = is.devices.iter().map(|d| d.kind).collect();
        match kinds.iter().copied().collect::<Vec<_>>().as_slice() {
            [DeviceKind::Cpu] => {}
            [DeviceKind::Cuda] => check_cuda(plan, is)?,
            [DeviceKind::Vulkan] => {
                return Err(refuse(
                    is,
                    "no collective driver carries vulkan devices; lower this collective without a driver",
                ))
            }
            _ => {
                return Err(refuse(
                    is,
                    "its ranks are on devices of several kinds, which no one collective driver reaches; place every rank on one kind",
                ))
            }
        }
    }
    Ok(())
}

#[cfg(feature = "nccl")]
fn check_cuda(plan: &Schedule, is: &Island) -> Result<(), ExecError> {
    if is.op == fuel_graph_ext::op::ReduceOp::Mean {
        return Err(refuse(
            is,
            "NCCL's average does not round as the reference interpreter does; run it as driver_all_reduce.sum followed by div, the form lower-collectives emits",
        ));
    }
    let distinct: BTreeSet<Device> = is.devices.iter().copied().collect();
    if distinct.len() != is.devices.len() {
        return Err(refuse(
            is,
            "two of its ranks are on one GPU, and NCCL takes one rank per GPU; give every rank its own cuda device",
        ));
    }
    for (r, (&slot, dev)) in is.shards.iter().zip(&is.devices).enumerate() {
        let on = plan.steps.get(slot).map(|s| s.device);
        if on != Some(*dev) {
            return Err(refuse(
                is,
                format!(
                    "rank {r}'s shard is on {} but its result on {dev}; NCCL reduces each rank's shard where it lies, so copy the shard to {dev} first",
                    on.map_or_else(|| "no device".to_string(), |d| d.to_string())
                ),
            ));
        }
    }
    Ok(())
}

#[cfg(not(feature = "nccl"))]
fn check_cuda(_plan: &Schedule, is: &Island) -> Result<(), ExecError> {
    Err(refuse(
        is,
        format!(
            "this build has no NCCL driver (cargo feature `nccl` is off); {}, or lower without `driver cuda` in the topology",
            crate::error::feature_hint("nccl")
        ),
    ))
}

/// Joins the collective driver of every island (after [`check`]).
pub(super) fn join(
    plan: &Schedule,
    ctxs: &Ctxs,
    opts: JoinOptions,
) -> Result<Vec<Joined>, ExecError> {
    let mut out: Vec<Joined> = Vec::with_capacity(plan.islands.len());
    for is in &plan.islands {
        let joined: Joined = match is.devices.first().map(|d| d.kind) {
            Some(DeviceKind::Cuda) => join_cuda(is, ctxs, opts)?,
            _ => Box::new(
                LocalGroup::join_host(is.devices.len(), opts)
                    .map_err(|e| refuse(is, e.to_string()))?,
            ),
        };
        out.push(joined);
    }
    Ok(out)
}

/// NCCL's `ncclCommInitAll` has no timeout to give (`_opts` are the host
/// islands').
#[cfg(feature = "nccl")]
fn join_cuda(is: &Island, ctxs: &Ctxs, _opts: JoinOptions) -> Result<Joined, ExecError> {
    use crate::driver::NcclDriver;
    let devs = is
        .devices
        .iter()
        .map(|d| match ctxs.get(d) {
            Some(crate::backend::Ctx::Cuda(c)) => Ok(c.clone()),
            _ => Err(ExecError::Internal(format!(
                "{d} is not an opened CUDA device"
            ))),
        })
        .collect::<Result<Vec<_>, _>>()?;
    let comms = NcclDriver::init_all(&devs).map_err(|e| refuse(is, e.to_string()))?;
    Ok(Box::new(LocalGroup::<NcclDriver>::from_comms(comms)))
}

#[cfg(not(feature = "nccl"))]
fn join_cuda(is: &Island, _ctxs: &Ctxs, _opts: JoinOptions) -> Result<Joined, ExecError> {
    Err(refuse(is, "this build has no NCCL driver"))
}

/// Runs island `k` on `shards` (rank r's shard at r): every member's result
/// as (its step, its buffer). Each member allocates its result (into
/// `reuse[r]`, the caller's output bytes, where it can) and passes the
/// kernel fault point, as any step does; a rank without a node gets a
/// result too (every rank takes part), allocated outside the fault points
/// and dropped.
pub(super) fn run(
    plan: &Schedule,
    joined: &[Joined],
    k: usize,
    ctxs: &Ctxs,
    shards: &[Arc<Buf>],
    mut reuse: Vec<Option<Arc<[u8]>>>,
    faults: &Faults,
) -> Result<Vec<(usize, Arc<Buf>)>, ExecError> {
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(
        || -> Result<Vec<(usize, Arc<Buf>)>, ExecError> {
            let is = plan
                .islands
                .get(k)
                .ok_or_else(|| ExecError::Internal(format!("no island {k}")))?;
            let driver = joined
                .get(k)
                .ok_or_else(|| ExecError::Internal(format!("island {k} was not joined")))?;
            let bytes = is.ty.size_bytes();
            let mut dsts = Vec::with_capacity(is.devices.len());
            for (r, (d, member)) in is.devices.iter().zip(&is.members).enumerate() {
                let ctx = ctxs
                    .get(d)
                    .ok_or_else(|| ExecError::Internal(format!("{d} not opened")))?;
                if member.is_some() {
                    let into = reuse.get_mut(r).and_then(Option::take);
                    dsts.push(ctx.alloc_reusing(bytes, faults, into)?);
                    if faults.check(Event::Kernel) {
                        return Err(ExecError::Injected {
                            device: *d,
                            op: is.mnemonic.clone(),
                        });
                    }
                } else {
                    dsts.push(ctx.alloc(bytes, &Faults::default())?);
                }
            }
            let outs = driver
                .all_reduce(shards, dsts, is.ty.dtype, is.op)
                .map_err(|e| refuse(is, format!("the {} driver failed: {e}", driver.driver())))?;
            Ok(is
                .members
                .iter()
                .zip(outs)
                .filter_map(|(m, b)| m.map(|step| (step, Arc::new(b))))
                .collect())
        },
    ));
    caught.unwrap_or_else(|p| {
        Err(ExecError::Internal(format!(
            "driver all-reduce {k} panicked: {}",
            super::step::panic_text(&*p)
        )))
    })
}

impl super::Executable {
    /// Runs island `k` on its shards (see [`run`]), taking each member's
    /// output bytes from `reuse` (indexed by step).
    pub(super) fn run_island(
        &self,
        k: usize,
        shards: &[Arc<Buf>],
        reuse: &mut [Option<Arc<[u8]>>],
        faults: &Faults,
    ) -> Result<Vec<(usize, Arc<Buf>)>, ExecError> {
        let per_rank = self.island_reuse(k, reuse);
        run(
            &self.plan,
            &self.islands,
            k,
            &self.ctxs,
            shards,
            per_rank,
            faults,
        )
    }

    /// Island `k`'s members' output bytes, by rank, taken out of `reuse`
    /// (indexed by step).
    pub(super) fn island_reuse(
        &self,
        k: usize,
        reuse: &mut [Option<Arc<[u8]>>],
    ) -> Vec<Option<Arc<[u8]>>> {
        self.plan.islands.get(k).map_or_else(Vec::new, |is| {
            is.members
                .iter()
                .map(|m| m.and_then(|step| reuse.get_mut(step).and_then(Option::take)))
                .collect()
        })
    }
}
