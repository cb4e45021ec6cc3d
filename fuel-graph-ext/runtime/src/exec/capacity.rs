//! Whether a graph fits its devices, checked before anything is allocated.
//!
//! [`check_buffers`] compares every value's bytes with what its device can
//! hold in one buffer (and, for the values a kernel binds, in one kernel
//! operand: a Vulkan storage buffer's range); [`check_peaks`] compares the
//! bytes each device holds at once when the schedule runs step by step with
//! what it has in all (host arenas share the host's memory, so their peaks
//! add up). Both use the figures the devices report ([`Capacity`]), and
//! their errors say what fits. A graph that passes can still run out of
//! memory (other processes, the threaded runner's overlap); every
//! allocation is fallible, so that is an error too, never an abort.

use crate::error::ExecError;
use fuel_graph_ext::device::Device;
use fuel_graph_ext::graph::{Graph, ValueId};
use fuel_graph_ext::limits::{Capacity, Limit};
use fuel_graph_ext::op::Op;
use fuel_graph_ext::plan::schedule::Schedule;
use fuel_graph_ext::text::Numbering;
use std::collections::HashMap;

/// What limits a value a kernel binds, as [`ExecError::TooLarge`] names
/// it (its catalogue entry, E0720, is told apart by it).
pub(crate) const KERNEL_BUFFER: &str = "one buffer a kernel binds";

/// Checks every node on a device in `caps` against the largest buffer it
/// can make. Devices without a figure are not checked.
pub(super) fn check_buffers(g: &Graph, caps: &HashMap<Device, Capacity>) -> Result<(), ExecError> {
    for id in g.node_ids() {
        let Some(n) = g.node(id) else { continue };
        let Some(device) = n.op.device() else {
            continue;
        };
        let Some(cap) = caps.get(&device) else {
            continue;
        };
        let kernel = matches!(n.op, Op::Elementwise { .. } | Op::Div { .. });
        let (limit, what) = if kernel {
            (&cap.kernel_buffer, KERNEL_BUFFER)
        } else {
            (&cap.buffer, "one buffer")
        };
        let bytes = n.ty.size_bytes();
        if bytes > limit.bytes {
            let value = Numbering::new(g).name(
                g,
                ValueId {
                    node: id,
                    result: 0,
                },
            );
            return Err(ExecError::TooLarge {
                value,
                op: n.op.mnemonic(),
                ty: Box::new(n.ty.clone()),
                device,
                bytes,
                limit: limit.bytes,
                what: format!("{what} ({})", limit.what),
            });
        }
    }
    Ok(())
}

/// Checks each device's step-by-step peak (host arenas together) against
/// its total.
pub(super) fn check_peaks(
    plan: &Schedule,
    caps: &HashMap<Device, Capacity>,
) -> Result<(), ExecError> {
    let peaks = plan.sequential_peak();
    let mut host: Vec<Device> = Vec::new();
    let mut host_need = 0usize;
    let mut host_limit: Option<&Limit> = None;
    let mut sorted: Vec<(&Device, &usize)> = peaks.iter().collect();
    sorted.sort();
    for (device, &need) in sorted {
        let Some(cap) = caps.get(device) else {
            continue;
        };
        if device.is_cpu() {
            host.push(*device);
            host_need = host_need.saturating_add(need);
            host_limit = Some(&cap.total);
        } else if need > cap.total.bytes {
            return Err(ExecError::NotEnoughMemory {
                place: device.to_string(),
                need,
                limit: cap.total.bytes,
                what: cap.total.what.clone(),
            });
        }
    }
    if let Some(limit) = host_limit {
        if host_need > limit.bytes {
            let names: Vec<String> = host.iter().map(Device::to_string).collect();
            return Err(ExecError::NotEnoughMemory {
                place: format!("the host ({})", names.join(", ")),
                need: host_need,
                limit: limit.bytes,
                what: limit.what.clone(),
            });
        }
    }
    Ok(())
}
