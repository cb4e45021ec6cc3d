//! The cost model: how long a lowered collective is expected to take.
//!
//! A pure helper, with no graph in sight. A lowering is described as a list
//! of [`Step`]s, each a transfer over one direct link or a computation on one
//! device, with the steps it waits for. A staged hop is two transfer steps,
//! one per link, because the lowering builds it as two copies. A transfer
//! costs `latency + bytes / bandwidth` of its link class
//! ([`fuel_graph_ext::topology::LinkCost::time_us`]); a computation costs
//! `inputs * bytes / reduce_throughput` of its device kind
//! ([`Topology::reduce_us`]).
//!
//! Steps on different links and devices may overlap, steps on one link (or
//! one device) may not. So the estimate is the larger of two lower bounds on
//! the finishing time: the longest chain of dependent steps (the critical
//! path), and the busiest resource's total work (a link is an ordered device
//! pair; a device's compute is one resource; host memory, shared by every
//! host-to-host copy and every CPU computation, is one resource). Latency-bound small messages
//! therefore favour few steps (star), bandwidth-bound large ones favour
//! spreading bytes over many links (ring).

use fuel_graph_ext::{Device, Topology};
use std::collections::BTreeMap;

/// What one step does.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum StepKind {
    /// `bytes` over the direct link `from -> to`.
    Transfer {
        /// Source device.
        from: Device,
        /// Destination device.
        to: Device,
        /// Bytes moved.
        bytes: usize,
    },
    /// `device` reads `inputs` tensors of `bytes` each and writes one.
    Compute {
        /// Where it runs.
        device: Device,
        /// How many tensors it reads.
        inputs: usize,
        /// Bytes per tensor.
        bytes: usize,
    },
    /// One rank's share of an all-reduce that a collective driver runs over
    /// `ranks` devices of `device`'s kind.
    Driver {
        /// The rank's device.
        device: Device,
        /// Ranks in the driver call.
        ranks: usize,
        /// Bytes per shard.
        bytes: usize,
        /// Whether every pair of the call's devices has a direct peer link
        /// (otherwise the driver's traffic crosses the host).
        peered: bool,
    },
}

/// One step and the steps (by index, all earlier) it waits for.
#[derive(Clone, Debug, PartialEq)]
pub struct Step {
    /// What it does.
    pub kind: StepKind,
    /// Indices of earlier steps it depends on.
    pub deps: Vec<usize>,
}

/// The estimate of one lowering.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Estimate {
    /// The longest chain of dependent steps, in microseconds.
    pub critical_path_us: f64,
    /// The busiest link's or device's total work, in microseconds.
    pub busiest_us: f64,
    /// Transfer steps (a staged hop counts two).
    pub transfers: usize,
    /// Bytes over all links.
    pub bytes_moved: usize,
}

impl Estimate {
    /// The estimated time: the larger of the two lower bounds.
    pub fn total_us(&self) -> f64 {
        self.critical_path_us.max(self.busiest_us)
    }
}

/// Microseconds one step takes on its own.
pub fn step_us(topo: &Topology, kind: &StepKind) -> f64 {
    match *kind {
        StepKind::Transfer { from, to, bytes } => topo.transfer_us(from, to, bytes),
        StepKind::Compute {
            device,
            inputs,
            bytes,
        } => topo.reduce_us(device, inputs, bytes),
        StepKind::Driver {
            device,
            ranks,
            bytes,
            peered,
        } => driver_us(topo, device, ranks, bytes, peered),
    }
}

/// A driver all-reduce modelled as a ring: each rank sends and receives
/// `2(k-1)/k` of the shard in `2(k-1)` steps over the links its driver uses
/// (CUDA peer links where every pair is peered, else the host-CUDA link;
/// host-host for CPUs), and reduces `(k-1)/k` of it.
pub fn driver_us(topo: &Topology, device: Device, ranks: usize, bytes: usize, peered: bool) -> f64 {
    use fuel_graph_ext::topology::LinkClass;
    if ranks <= 1 {
        return 0.0;
    }
    let k = ranks as f64;
    let class = match device.kind {
        fuel_graph_ext::DeviceKind::Cuda if peered => LinkClass::CudaPeer,
        fuel_graph_ext::DeviceKind::Cuda => LinkClass::HostCuda,
        _ => LinkClass::HostHost,
    };
    let link = topo.link(class);
    let moved = 2.0 * (k - 1.0) / k * bytes as f64;
    2.0 * (k - 1.0) * link.latency_us
        + moved / (link.bandwidth_gbps * 1e3)
        + topo.reduce_us(device, 1, bytes) * (k - 1.0) / k
}

/// A resource a step occupies: a directed link, or a device's compute.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Resource {
    Link(Device, Device),
    Compute(Device),
    /// Host memory: every copy between two host arenas and every CPU
    /// computation. Host arenas share the host's cores and memory bus (the
    /// executor even runs an all-host graph's steps one after another), so
    /// their work does not overlap the way separate links do.
    Host,
}

/// Estimates a lowering from its steps. Dependencies that do not point to an
/// earlier step are ignored.
pub fn estimate(topo: &Topology, steps: &[Step]) -> Estimate {
    let mut finish: Vec<f64> = Vec::with_capacity(steps.len());
    let mut busy: BTreeMap<Resource, f64> = BTreeMap::new();
    let mut est = Estimate::default();
    for (i, s) in steps.iter().enumerate() {
        let t = step_us(topo, &s.kind);
        let start = s
            .deps
            .iter()
            .filter(|d| **d < i)
            .filter_map(|d| finish.get(*d))
            .fold(0.0, |a: f64, b| a.max(*b));
        finish.push(start + t);
        let res = match s.kind {
            StepKind::Transfer { from, to, bytes } => {
                est.transfers += 1;
                est.bytes_moved = est.bytes_moved.saturating_add(bytes);
                if from.is_cpu() && to.is_cpu() {
                    Resource::Host
                } else {
                    Resource::Link(from, to)
                }
            }
            StepKind::Compute { device, .. } | StepKind::Driver { device, .. }
                if device.is_cpu() =>
            {
                Resource::Host
            }
            StepKind::Compute { device, .. } | StepKind::Driver { device, .. } => {
                Resource::Compute(device)
            }
        };
        *busy.entry(res).or_insert(0.0) += t;
    }
    est.critical_path_us = finish.iter().fold(0.0, |a: f64, b| a.max(*b));
    est.busiest_us = busy.values().fold(0.0, |a: f64, b| a.max(*b));
    est
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hop(from: Device, to: Device, bytes: usize, deps: &[usize]) -> Step {
        Step {
            kind: StepKind::Transfer { from, to, bytes },
            deps: deps.to_vec(),
        }
    }

    #[test]
    fn chains_add_and_parallel_links_overlap() {
        let t = Topology::default();
        let (h, c) = (Device::cpu(0), Device::cuda(0));
        let one = t.transfer_us(c, h, 1000);
        // Two dependent hops take twice as long as one.
        let chain = estimate(
            &t,
            &[hop(c, h, 1000, &[]), hop(h, Device::cpu(1), 1000, &[0])],
        );
        assert!(
            (chain.critical_path_us - one - t.transfer_us(h, Device::cpu(1), 1000)).abs() < 1e-9
        );
        assert_eq!(chain.transfers, 2);
        // Independent hops on different links overlap ...
        let par = estimate(
            &t,
            &[hop(c, h, 1000, &[]), hop(Device::cuda(1), h, 1000, &[])],
        );
        assert!((par.total_us() - one).abs() < 1e-9);
        // ... but two on one link queue up.
        let same = estimate(&t, &[hop(c, h, 1000, &[]), hop(c, h, 1000, &[])]);
        assert!((same.total_us() - 2.0 * one).abs() < 1e-9);
    }

    #[test]
    fn host_to_host_hops_and_cpu_work_share_host_memory() {
        let t = Topology::default();
        let (a, b, c) = (Device::cpu(0), Device::cpu(1), Device::cpu(2));
        let one = t.transfer_us(b, a, 1 << 20);
        // Two independent host-host hops on different links still queue.
        let two = estimate(&t, &[hop(b, a, 1 << 20, &[]), hop(c, a, 1 << 20, &[])]);
        assert!((two.total_us() - 2.0 * one).abs() < 1e-9);
        // And a CPU reduction queues behind them.
        let add = Step {
            kind: StepKind::Compute {
                device: Device::cpu(3),
                inputs: 2,
                bytes: 1 << 20,
            },
            deps: vec![],
        };
        let r = t.reduce_us(Device::cpu(3), 2, 1 << 20);
        let three = estimate(&t, &[hop(b, a, 1 << 20, &[]), hop(c, a, 1 << 20, &[]), add]);
        assert!((three.total_us() - 2.0 * one - r).abs() < 1e-9);
    }

    #[test]
    fn size_and_compute_matter() {
        let t = Topology::default();
        let (h, v) = (Device::cpu(0), Device::vulkan(0));
        let small = estimate(&t, &[hop(v, h, 64, &[])]).total_us();
        let big = estimate(&t, &[hop(v, h, 1 << 20, &[])]).total_us();
        assert!(big > small);
        let add = Step {
            kind: StepKind::Compute {
                device: v,
                inputs: 4,
                bytes: 1 << 20,
            },
            deps: vec![],
        };
        let on_vulkan = estimate(&t, std::slice::from_ref(&add)).total_us();
        let on_cpu = estimate(
            &t,
            &[Step {
                kind: StepKind::Compute {
                    device: h,
                    inputs: 4,
                    bytes: 1 << 20,
                },
                deps: vec![],
            }],
        )
        .total_us();
        assert!(
            on_vulkan > on_cpu,
            "default vulkan reduce is slower than cpu"
        );
    }
}
