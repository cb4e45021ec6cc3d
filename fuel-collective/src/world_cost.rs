//! World cost: where a world's hub sits, and what a world all_reduce is
//! estimated to cost against a flat ring over all its ranks.
//!
//! A pure helper with no graph in sight, beside [`crate::cost`]. It matches
//! a world of P processes, each with the same k local devices, and a
//! [`Topology`] (its device links and its `process` link); it produces
//! figures in microseconds and the hub choice [`crate::WorldGroup`] uses.
//! It leaves the local lowering alone: `lower-collectives` still picks the
//! local algorithm with the full cost model once the hub is fixed.
//!
//! **The hub.** The inter-process step runs on one local device per
//! process, of the driver's kind (a CPU for the host and MPI drivers, a
//! CUDA device for NCCL). Every candidate costs the same between processes,
//! so the choice is the candidate with the cheapest local part: every other
//! local device's bytes to the hub (staged hops counted as two), the fold
//! of k inputs on the hub, and the result back to every other device, at
//! [`HUB_BYTES`]. Ties keep the earlier local device, so a symmetric
//! machine keeps the first device of the kind. A process without a device
//! of the kind has one candidate, that kind's device 0.
//!
//! **Between processes** the estimate is a ring all-reduce over P
//! processes on the `process` link: `2(P-1)` latencies and `2(P-1)/P` of
//! the bytes over its bandwidth, plus `(P-1)/P` of the bytes folded on the
//! hub. (MPI implementations switch to trees or recursive doubling for
//! small messages; the ring is the bandwidth-bound figure.)
//!
//! **The flat ring** puts all P·k ranks in (process, local index) order on
//! one ring: `2(Pk-1)` steps of `bytes/Pk` each, every step as slow as the
//! ring's slowest hop. A hop between two processes crosses the process link
//! and, for a device that is not a CPU, its host link at each end.

use fuel_graph_ext::{Device, DeviceKind, Topology};

/// The message size the hub is chosen for.
pub const HUB_BYTES: usize = 1 << 20;

/// The devices of `kind` among `devices`, in local order; if none, that
/// kind's device 0 (reached by a copy).
pub fn hub_candidates(devices: &[Device], kind: DeviceKind) -> Vec<Device> {
    let local: Vec<Device> = devices.iter().copied().filter(|d| d.kind == kind).collect();
    if local.is_empty() {
        vec![Device { kind, index: 0 }]
    } else {
        local
    }
}

/// The kind of device a world's step between processes runs on: a CUDA
/// device (NCCL) when the topology declares `driver cuda` and the process
/// has a CUDA device, otherwise a CPU (MPI, or the host driver between
/// threads). `fuel-opt plan` and the world goldens decide it this way.
pub fn driver_kind(topo: &Topology, devices: &[Device]) -> DeviceKind {
    if topo.drivers.contains(&DeviceKind::Cuda)
        && devices.iter().any(|d| d.kind == DeviceKind::Cuda)
    {
        DeviceKind::Cuda
    } else {
        DeviceKind::Cpu
    }
}

/// Estimated microseconds of the local part around `hub`: every other
/// device's `bytes` to the hub, a fold of all k on it, and the result back.
pub fn local_us(topo: &Topology, devices: &[Device], hub: Device, bytes: usize) -> f64 {
    let others = devices.iter().filter(|d| **d != hub);
    let moves: f64 = others
        .map(|d| topo.transfer_us(*d, hub, bytes) + topo.transfer_us(hub, *d, bytes))
        .sum();
    let folded = devices.len() + usize::from(!devices.contains(&hub));
    moves + topo.reduce_us(hub, folded, bytes)
}

/// The hub for `devices` and a driver of `kind`: the candidate with the
/// cheapest local part at [`HUB_BYTES`], the earlier one on a tie.
pub fn pick_hub(topo: &Topology, devices: &[Device], kind: DeviceKind) -> Device {
    let mut best: Option<(Device, f64)> = None;
    for c in hub_candidates(devices, kind) {
        let us = local_us(topo, devices, c, HUB_BYTES);
        if best.is_none_or(|(_, b)| us < b) {
            best = Some((c, us));
        }
    }
    best.map_or(Device { kind, index: 0 }, |(d, _)| d)
}

/// Estimated microseconds of a ring all-reduce of `bytes` over `processes`
/// processes on the topology's process link, folding on `hub`.
pub fn process_ring_us(topo: &Topology, hub: Device, processes: usize, bytes: usize) -> f64 {
    if processes <= 1 {
        return 0.0;
    }
    let (p, link) = (processes as f64, topo.process_link());
    2.0 * (p - 1.0) * link.latency_us
        + 2.0 * (p - 1.0) / p * link.bandwidth.us_at(bytes, bytes)
        + (p - 1.0) / p * topo.compute(hub.kind).gbps.us_at(bytes, bytes)
}

/// What the world lowering picks for an all_reduce of `bytes` per rank, and
/// its estimate: the hub, then local part + inter-process ring.
pub fn world_all_reduce_us(
    topo: &Topology,
    devices: &[Device],
    kind: DeviceKind,
    processes: usize,
    bytes: usize,
) -> (Device, f64) {
    let hub = pick_hub(topo, devices, kind);
    let us = local_us(topo, devices, hub, bytes) + process_ring_us(topo, hub, processes, bytes);
    (hub, us)
}

/// Estimated microseconds of one ring all-reduce over all `processes` ×
/// `devices` ranks in (process, local index) order.
pub fn flat_ring_us(topo: &Topology, devices: &[Device], processes: usize, bytes: usize) -> f64 {
    let n = processes * devices.len();
    let (Some(first), Some(last)) = (devices.first(), devices.last()) else {
        return 0.0;
    };
    if n <= 1 {
        return 0.0;
    }
    let chunk = bytes.div_ceil(n);
    let mut hop: f64 = devices
        .windows(2)
        .map(|w| topo.transfer_us(w[0], w[1], chunk))
        .fold(0.0, f64::max);
    let host = |d: Device| {
        if d.is_cpu() {
            0.0
        } else {
            topo.transfer_us(d, topo.staging, chunk)
        }
    };
    if processes > 1 {
        let between = host(*last) + topo.process_link().time_us(chunk) + host(*first);
        hop = hop.max(between);
    } else {
        hop = hop.max(topo.transfer_us(*last, *first, chunk));
    }
    let fold = devices
        .iter()
        .map(|d| topo.reduce_us(*d, 2, chunk))
        .fold(0.0, f64::max);
    2.0 * (n as f64 - 1.0) * hop + (n as f64 - 1.0) * fold
}

#[cfg(test)]
mod tests {
    use super::*;
    use fuel_graph_ext::topology::LinkCost;

    #[test]
    fn a_symmetric_process_keeps_its_first_device_of_the_kind() {
        let t = Topology::default();
        let devs = [Device::cuda(0), Device::cuda(1), Device::vulkan(0)];
        assert_eq!(pick_hub(&t, &devs, DeviceKind::Cuda), Device::cuda(0));
        let devs = [Device::vulkan(0), Device::cpu(0)];
        assert_eq!(pick_hub(&t, &devs, DeviceKind::Cpu), Device::cpu(0));
        assert_eq!(
            pick_hub(&t, &[Device::vulkan(0)], DeviceKind::Cpu),
            Device::cpu(0)
        );
    }

    #[test]
    fn a_world_talks_through_nccl_only_where_the_topology_declares_it() {
        let devs = [Device::cuda(0), Device::cuda(1), Device::vulkan(0)];
        let mut t = Topology::default();
        assert_eq!(driver_kind(&t, &devs), DeviceKind::Cpu);
        t.drivers.insert(DeviceKind::Cuda);
        assert_eq!(driver_kind(&t, &devs), DeviceKind::Cuda);
        assert_eq!(pick_hub(&t, &devs, driver_kind(&t, &devs)), Device::cuda(0));
        // Without a CUDA device the declaration does not matter.
        let no_cuda = [Device::cpu(0), Device::vulkan(0)];
        assert_eq!(driver_kind(&t, &no_cuda), DeviceKind::Cpu);
    }

    #[test]
    fn the_hub_is_the_device_with_the_cheapest_links_not_the_first() {
        // cuda:1 has peer access to both others; cuda:0 and cuda:2 only to
        // cuda:1, so through cuda:0 the cuda:2 bytes are staged.
        let t = Topology::default().with_peer(0, 1).with_peer(1, 2);
        let devs = [Device::cuda(0), Device::cuda(1), Device::cuda(2)];
        assert_eq!(pick_hub(&t, &devs, DeviceKind::Cuda), Device::cuda(1));
        let (a, b) = (
            local_us(&t, &devs, Device::cuda(0), HUB_BYTES),
            local_us(&t, &devs, Device::cuda(1), HUB_BYTES),
        );
        assert!(b < a, "{b} < {a}");
        // Without the peers every candidate is alike: the first stays.
        let flat = Topology::default();
        assert_eq!(pick_hub(&flat, &devs, DeviceKind::Cuda), Device::cuda(0));
    }

    #[test]
    fn the_process_link_prices_the_step_between_processes() {
        let mut t = Topology::default();
        let hub = Device::cpu(0);
        assert_eq!(process_ring_us(&t, hub, 1, 1 << 20), 0.0);
        let fast = process_ring_us(&t, hub, 4, 1 << 20);
        t.set_process_link(LinkCost::new(1.0, 50.0));
        let slow = process_ring_us(&t, hub, 4, 1 << 20);
        assert!(slow > fast, "{slow} > {fast}");
        // 6 latencies of 50 µs and 1.5 MiB at 1 GB/s, plus the fold.
        let floor = 6.0 * 50.0 + 1.5 * (1 << 20) as f64 / 1e3;
        assert!(slow > floor && slow < floor * 1.1, "{slow} vs {floor}");
    }

    #[test]
    fn the_flat_ring_pays_its_slowest_hop_on_every_step() {
        let t = Topology::default();
        let devs = [Device::cpu(0), Device::cpu(1)];
        let one = flat_ring_us(&t, &devs, 2, 1 << 20);
        let mut slow = t.clone();
        slow.set_process_link(LinkCost::new(0.5, 100.0));
        assert!(flat_ring_us(&slow, &devs, 2, 1 << 20) > one);
        assert_eq!(flat_ring_us(&t, &devs[..1], 1, 1 << 20), 0.0);
    }
}
