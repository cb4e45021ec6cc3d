//! What `Compiler::compile` checks and decides before it builds an
//! executable: no collective left, which devices to open, whether every
//! step's dtype and kernel (an `extern` op's included) runs on its device,
//! which runner runs it, and the threaded runner's threads (a compute
//! worker per device and a copy worker per host arena and GPU).

use super::{backend, Ctx, ExecError, Schedule, Work, Worker};
use fuel_graph_ext::device::Device;
use fuel_graph_ext::graph::Graph;
use fuel_graph_ext::topology::Topology;
use std::collections::{BTreeSet, HashMap};

/// Refuses a graph that still holds a collective (lower it first).
pub(super) fn check_no_collectives(g: &Graph) -> Result<(), ExecError> {
    for id in g.node_ids() {
        if let Some(n) = g.node(id) {
            if n.op.is_collective() {
                return Err(ExecError::Collective {
                    op: n.op.mnemonic(),
                });
            }
        }
    }
    Ok(())
}

/// The devices to open: the ones listed (or, with none listed, the ones
/// the graph uses), and the topology's staging CPU where the graph uses
/// it; a used device that is not listed is refused.
pub(super) fn listed_devices(
    g: &Graph,
    devices: &[Device],
    topology: &Topology,
) -> Result<BTreeSet<Device>, ExecError> {
    let used: BTreeSet<Device> = g
        .node_ids()
        .filter_map(|id| g.node(id)?.op.device())
        .collect();
    let mut listed: BTreeSet<Device> = if devices.is_empty() {
        used.clone()
    } else {
        devices.iter().copied().collect()
    };
    // The topology's staging CPU is the lowering's own choice, not the
    // caller's: copies with no direct path are routed through it, so a
    // group of only Vulkan (or only CUDA) devices uses it without
    // listing it. It is opened when the graph uses it (a host arena
    // costs nothing to open).
    if used.contains(&topology.staging) {
        listed.insert(topology.staging);
    }
    for d in &used {
        if !listed.contains(d) {
            return Err(ExecError::DeviceNotListed {
                device: *d,
                listed: listed
                    .iter()
                    .map(|d| d.to_string())
                    .collect::<Vec<_>>()
                    .join(","),
            });
        }
    }
    Ok(listed)
}

/// Checks every step's dtype and kernel against its opened device.
pub(super) fn check_supported(
    plan: &Schedule,
    ctxs: &crate::backend::Ctxs,
) -> Result<(), ExecError> {
    for s in &plan.steps {
        let ctx = ctxs
            .get(&s.device)
            .ok_or_else(|| ExecError::Internal(format!("{} not opened", s.device)))?;
        ctx.supports(s.ty.dtype)?;
        if let Some(k) = s.work.kernel() {
            ctx.supports_kernel(k, s.ty.dtype)?;
            if let backend::Kernel::Extern { op, operands } = k {
                crate::kernels::check(op, operands, s.device)?;
            }
        }
    }
    Ok(())
}

/// Which runner an executable uses: (inline, inline on the kernels' pool).
pub(super) fn runner_shape(plan: &Schedule, ctxs: &crate::backend::Ctxs) -> (bool, bool) {
    // Host arenas share the host's cores: handing their steps to worker
    // threads buys no overlap, only a thread handoff per step, and the
    // kernels of large steps use every core anyway. Such an executable
    // runs its steps in schedule order on the caller's thread. So does
    // one whose GPU steps are all the runner's own work (inputs read in
    // place, imports, deferred or shared copies, views: no submit, no
    // bytes moved), where every step that needs a worker is a host's.
    let on_host = |d: &Device| ctxs.get(d).is_some_and(|c| matches!(c, Ctx::Cpu(_)));
    //
    // A graph with an `extern` kernel on one of several devices runs
    // threaded whatever its devices: its kernels are the host framework's
    // compute, long enough that a copy onto the device (on its copy
    // thread) or another device's work should run beside them.
    let externs = ctxs.len() > 1
        && plan
            .steps
            .iter()
            .any(|s| matches!(s.work.kernel(), Some(backend::Kernel::Extern { .. })));
    let inline = !externs
        && (ctxs.values().all(|c| matches!(c, Ctx::Cpu(_)))
            || (plan.steps.iter().any(|s| !on_host(&s.device))
                && plan
                    .steps
                    .iter()
                    .all(|s| on_host(&s.device) || !s.work.needs_device())));
    let inline_on_pool = inline
        && plan.islands.is_empty()
        && plan
            .steps
            .iter()
            .all(|s| !matches!(s.work, Work::Comm { .. }))
        && plan.steps.iter().any(|s| {
            s.work.kernel().is_some_and(backend::Kernel::is_fold)
                && s.ty.size_bytes() >= backend::cpu::PARALLEL_MIN * 4
        });
    (inline, inline_on_pool)
}

/// Worker threads by device.
pub(super) type Workers = HashMap<Device, Worker>;

/// The threaded runner's threads: one compute worker per opened device,
/// and one copy worker per host arena, Vulkan device and CUDA device.
pub(super) fn start_workers(
    ctxs: &crate::backend::Ctxs,
    spin: std::time::Duration,
) -> Result<(Workers, Workers), ExecError> {
    let spawn = |name: String, what: String| {
        Worker::spawn(name, spin).map_err(|e| crate::backend::worker::spawn_error(what, &e))
    };
    let mut workers = HashMap::new();
    let mut copy_workers = HashMap::new();
    for d in ctxs.keys() {
        workers.insert(
            *d,
            spawn(format!("fuel-{d}"), format!("the worker thread for {d}"))?,
        );
        // A GPU's copies go to its copy lane (a second Vulkan queue, a
        // second CUDA stream), so they need a thread of their own to run
        // beside its kernels; `plan::lanes::has_copy_lane` is the rule.
        if fuel_graph_ext::plan::lanes::kind_has_copy_lane(d.kind) {
            let w = spawn(format!("fuel-{d}-copy"), format!("the copy thread for {d}"))?;
            copy_workers.insert(*d, w);
        }
    }
    Ok((workers, copy_workers))
}
