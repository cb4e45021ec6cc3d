//! Topology: which device pairs have a direct copy path, and what links cost.
//!
//! A pure helper with no graph in sight. [`Topology::route`] answers, for an
//! ordered device pair, whether one copy can move the bytes or whether they
//! must be staged through a CPU. [`Topology::link`] gives the bandwidth and
//! latency the cost model uses. The defaults are documented in
//! `docs/lowering.md`; a topology file (see [`Topology::parse`]) overrides them.

use crate::device::{Device, DeviceKind};
use std::collections::{BTreeMap, BTreeSet};

pub mod bounds;
mod curve;

pub use curve::Curve;

/// How bytes get from one device to another.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// One copy does it.
    Direct,
    /// Two copies: source to this CPU, then CPU to destination.
    Staged(Device),
}

/// The class of a direct link, which decides its default cost.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LinkClass {
    /// Source and destination are the same device.
    SameDevice,
    /// Between two host arenas.
    HostHost,
    /// Between the host and a CUDA GPU.
    HostCuda,
    /// Between the host and a Vulkan device.
    HostVulkan,
    /// Between two CUDA GPUs with peer access.
    CudaPeer,
}

impl LinkClass {
    /// Every class.
    pub const ALL: [LinkClass; 5] = [
        LinkClass::SameDevice,
        LinkClass::HostHost,
        LinkClass::HostCuda,
        LinkClass::HostVulkan,
        LinkClass::CudaPeer,
    ];
    /// The name used in topology files.
    pub fn as_str(self) -> &'static str {
        match self {
            LinkClass::SameDevice => "same-device",
            LinkClass::HostHost => "host-host",
            LinkClass::HostCuda => "host-cuda",
            LinkClass::HostVulkan => "host-vulkan",
            LinkClass::CudaPeer => "cuda-peer",
        }
    }
}

/// Where a topology's figures come from. The `lower-collectives` note says
/// it, so a reader knows whether its estimates were measured here.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// [`Topology::default`]: the documented defaults.
    Defaults,
    /// [`Topology::parse`] of a topology file; the name, where known.
    File(Option<String>),
    /// The calibration cache: when it was measured, and on what.
    Calibrated {
        /// The day, `YYYY-MM-DD` (UTC).
        date: String,
        /// What it measured, e.g. `cpu (AMD EPYC, 2 cores), vulkan (llvmpipe ..., mapped)`.
        on: String,
    },
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Defaults => {
                f.write_str("defaults: not calibrated here; run `fuel-opt calibrate`")
            }
            Source::File(None) => f.write_str("topology file"),
            Source::File(Some(name)) => write!(f, "topology file {name}"),
            Source::Calibrated { date, on } => write!(f, "calibrated {date} on {on}"),
        }
    }
}

/// What one link class costs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LinkCost {
    /// Sustained bandwidth of a copy, in GB/s (10^9 bytes per second), by
    /// the copy's size.
    pub bandwidth: Curve,
    /// Fixed cost per copy in microseconds.
    pub latency_us: f64,
    /// Bandwidth, in GB/s, of a copy the executor defers into the fold that
    /// reads it (`plan::Work::Defer`): the fold moves the bytes
    /// itself (or reads a mapped buffer in place), so there is no latency
    /// and often less than a copy's traffic.
    pub deferred_gbps: f64,
}

impl LinkCost {
    /// A link with this bandwidth at every size and this latency, whose
    /// deferred copies move at the same bandwidth.
    pub fn new(bandwidth_gbps: f64, latency_us: f64) -> LinkCost {
        LinkCost {
            bandwidth: Curve::flat(bandwidth_gbps),
            latency_us,
            deferred_gbps: bandwidth_gbps,
        }
    }

    /// Estimated microseconds to move `bytes` over this link.
    pub fn time_us(&self, bytes: usize) -> f64 {
        self.time_us_at(bytes, bytes)
    }

    /// [`LinkCost::time_us`] within work whose data is `working` bytes
    /// ([`Curve::us_at`]).
    pub fn time_us_at(&self, bytes: usize, working: usize) -> f64 {
        self.latency_us + self.bandwidth.us_at(bytes, working)
    }

    /// Estimated microseconds for a fold to move `bytes` it took over as a
    /// deferred copy.
    pub fn deferred_us(&self, bytes: usize) -> f64 {
        bytes as f64 / (self.deferred_gbps * 1e3)
    }
}

/// What computing on one device kind costs: a fixed part per step (a
/// kernel launch, a Vulkan submit and fence), a throughput, and what a
/// fold wider than two inputs costs per extra input.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ComputeCost {
    /// GB/s of input read, by the size of one input.
    pub gbps: Curve,
    /// Microseconds per step, whatever its size.
    pub fixed_us: f64,
    /// What each input of a fold past the second costs, in inputs of the
    /// two-input fold the throughput is measured on (between 0 and 1;
    /// [`WIDE_DEFAULT`] unless calibrated). A fold that streams through
    /// memory pays for the tensors it moves, `inputs + 1`, where the
    /// two-input fold moves three per two inputs read: 2/3 per input. One
    /// whose time goes to each result element (lavapipe's shader) pays
    /// almost nothing per extra input.
    pub wide: f64,
}

/// [`ComputeCost::wide`] where nothing was measured: a fold that streams
/// through memory, priced by the tensors it moves. Measured on the 2-core
/// VM, the 4-CPU star's four-input fold ran at 1.15x the two-input ring's
/// rate per input at 16 MiB (`docs/performance.md`).
pub const WIDE_DEFAULT: f64 = 2.0 / 3.0;

impl ComputeCost {
    /// Estimated microseconds to read `inputs` tensors of `bytes` each.
    pub fn time_us(&self, inputs: usize, bytes: usize) -> f64 {
        self.time_us_at(inputs, bytes, bytes)
    }

    /// [`ComputeCost::time_us`] within work whose data is `working` bytes
    /// ([`Curve::us_at`]), a fold of more than two inputs priced as
    /// [`ComputeCost::fold_inputs`] two-input-fold inputs.
    pub fn time_us_at(&self, inputs: usize, bytes: usize, working: usize) -> f64 {
        self.fixed_us + self.fold_inputs(inputs) * self.gbps.us_at(bytes, working)
    }

    /// What a step of `inputs` inputs costs in two-input-fold inputs:
    /// `inputs` up to two, then [`ComputeCost::wide`] for each one more
    /// (with the default 2/3, a four-input fold costs 3.33, not 4).
    pub fn fold_inputs(&self, inputs: usize) -> f64 {
        if inputs <= 2 {
            inputs as f64
        } else {
            2.0 + self.wide * (inputs - 2) as f64
        }
    }
}

/// The two ways the executor runs a graph (`exec::Executable`): an
/// all-host graph runs its steps one after another on the caller's thread;
/// any other graph hands each step to its device's worker thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Runner {
    /// Every device is a host arena: steps run in order on one thread.
    Inline,
    /// One worker thread per device, a dispatcher between them.
    Threaded,
}

impl Runner {
    /// Both runners.
    pub const ALL: [Runner; 2] = [Runner::Inline, Runner::Threaded];

    /// The name used in topology files.
    pub fn as_str(self) -> &'static str {
        match self {
            Runner::Inline => "inline",
            Runner::Threaded => "threaded",
        }
    }
}

/// What a runner adds to the work itself.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RunnerCost {
    /// Microseconds per step: gathering operands, and for the threaded
    /// runner the hand-off to a worker and the report back.
    pub step_us: f64,
    /// Microseconds per run: setting up and collecting the results.
    pub run_us: f64,
    /// Microseconds of the threaded runner's dispatcher per step (sending
    /// it to its worker, taking its report): the rate at which it can
    /// start steps, however many workers wait. The inline runner has no
    /// dispatcher; its figure is not used.
    pub dispatch_us: f64,
}

/// Device connectivity and link costs.
#[derive(Clone, Debug, PartialEq)]
pub struct Topology {
    /// Ordered CUDA pairs with peer access (stored both ways).
    peers: BTreeSet<(u32, u32)>,
    /// The CPU that staged copies go through.
    pub staging: Device,
    /// Cost per link class.
    links: BTreeMap<LinkClass, LinkCost>,
    /// Cost of computing, per device kind.
    compute: BTreeMap<DeviceKind, ComputeCost>,
    /// Cost of each runner.
    runners: BTreeMap<Runner, RunnerCost>,
    /// Device kinds whose collective driver (NCCL, host driver) is available.
    pub drivers: BTreeSet<DeviceKind>,
    /// Device kinds (besides the CPU) whose memory is the host's: an
    /// integrated GPU, or lavapipe. Their transfers and kernels load host
    /// memory on both ends.
    pub host_memory: BTreeSet<DeviceKind>,
    /// Device kinds (besides the CPU) whose kernels the host's cores run,
    /// each dispatch spread over all of them: lavapipe (`host-kernels
    /// KIND`). A kernel measured alone had every core, so in the cores
    /// bound it counts its time once per core. Implies `host-memory`.
    pub host_kernels: BTreeSet<DeviceKind>,
    /// The host's cores, which every host-side worker shares (a `cores`
    /// line; the calibrator writes the machine's): the threaded runner's
    /// hand-offs, host kernels and the kernels of a host-memory device all
    /// run on them. `None` (the default) sets no such bound.
    cores: Option<u32>,
    /// Host CPU time one threaded hand-off takes (waking a worker, the
    /// report back), microseconds: the part of the runner's `step` cost
    /// that keeps a core busy rather than waiting (`cores N handoff=US`).
    handoff_cpu_us: f64,
    /// The storage-buffer offset alignment a Vulkan device binds a view at
    /// (its `minStorageBufferOffsetAlignment`; a `view-align vulkan N`
    /// line, which the calibrator writes from the devices it opened), or
    /// [`ASSUMED_VIEW_ALIGN`] where no line says.
    vulkan_view_align: usize,
    /// The link between two processes of a world (`fuel_collective::world`):
    /// what one inter-process message costs, whatever carries it (shared
    /// memory on one machine, a network between machines).
    process: LinkCost,
    /// Where the figures come from.
    source: Source,
}

/// The default process link: 12 GB/s and 5 µs, roughly a 100 Gb/s
/// InfiniBand or RoCE link between machines, as seen by MPI (an estimate,
/// not measured here: no such network is at hand). Processes on one machine
/// talk faster through shared memory; a `process` line says so.
pub const DEFAULT_PROCESS_LINK: (f64, f64) = (12.0, 5.0);

impl Default for Topology {
    /// The documented defaults (`docs/lowering.md`): figures `fuel-opt
    /// calibrate` measured on the development VM (2 cores, lavapipe for
    /// Vulkan), rounded; the CUDA figures are estimates, no GPU was
    /// measured. A machine of its own is calibrated instead.
    fn default() -> Self {
        let curve = |pts: &[(usize, f64)]| Curve::new(pts).unwrap_or(Curve::flat(1.0));
        let (k64, m1, m4) = (64 << 10, 1 << 20, 4 << 20);
        let link = |bandwidth: Curve, latency_us: f64, deferred_gbps: f64| LinkCost {
            bandwidth,
            latency_us,
            deferred_gbps,
        };
        let links = [
            (LinkClass::SameDevice, LinkCost::new(200.0, 2.0)),
            (
                LinkClass::HostHost,
                link(curve(&[(k64, 32.0), (m1, 18.0), (m4, 11.0)]), 0.2, 11.0),
            ),
            (LinkClass::HostCuda, LinkCost::new(25.0, 10.0)),
            (
                LinkClass::HostVulkan,
                link(curve(&[(k64, 20.0), (m1, 15.0), (m4, 11.0)]), 1.0, 15.0),
            ),
            (LinkClass::CudaPeer, LinkCost::new(100.0, 8.0)),
        ]
        .into_iter()
        .collect();
        let compute = [
            (
                DeviceKind::Cpu,
                curve(&[(k64, 40.0), (m1, 16.0), (m4, 14.0)]),
                0.15,
            ),
            (DeviceKind::Cuda, Curve::flat(1000.0), 10.0),
            (
                DeviceKind::Vulkan,
                curve(&[(k64, 0.6), (m1, 0.3), (m4, 0.25)]),
                30.0,
            ),
        ]
        .into_iter()
        .map(|(k, gbps, fixed_us)| {
            let wide = WIDE_DEFAULT;
            (
                k,
                ComputeCost {
                    gbps,
                    fixed_us,
                    wide,
                },
            )
        })
        .collect();
        let runners = [
            (
                Runner::Inline,
                RunnerCost {
                    step_us: 0.1,
                    run_us: 0.3,
                    dispatch_us: 0.1,
                },
            ),
            (
                Runner::Threaded,
                RunnerCost {
                    step_us: 3.5,
                    run_us: 1.0,
                    dispatch_us: 1.5,
                },
            ),
        ]
        .into_iter()
        .collect();
        Topology {
            peers: BTreeSet::new(),
            staging: Device::cpu(0),
            links,
            compute,
            runners,
            drivers: BTreeSet::new(),
            host_memory: BTreeSet::new(),
            host_kernels: BTreeSet::new(),
            cores: None,
            handoff_cpu_us: 0.0,
            vulkan_view_align: ASSUMED_VIEW_ALIGN,
            process: LinkCost::new(DEFAULT_PROCESS_LINK.0, DEFAULT_PROCESS_LINK.1),
            source: Source::Defaults,
        }
    }
}

/// The storage-buffer offset alignment the cost model assumes for a
/// Vulkan view where the topology does not give the device's own: 256
/// bytes, the largest the Vulkan specification lets a device ask for, so
/// an estimate never counts a view that runs as a copy.
pub const ASSUMED_VIEW_ALIGN: usize = 256;

/// The device kinds that have a collective driver: the host driver for
/// CPUs, NCCL for CUDA. Vulkan has none.
pub const DRIVER_KINDS: [DeviceKind; 2] = [DeviceKind::Cpu, DeviceKind::Cuda];

impl Topology {
    /// Where the figures come from.
    pub fn source(&self) -> &Source {
        &self.source
    }

    /// This topology, saying its figures come from `source`.
    pub fn with_source(mut self, source: Source) -> Topology {
        self.source = source;
        self
    }

    /// How many host cores the host-side work shares, if known.
    pub fn host_cores(&self) -> Option<u32> {
        self.cores
    }

    /// Sets [`host_cores`](Self::host_cores).
    pub fn set_host_cores(&mut self, cores: Option<u32>) {
        self.cores = cores;
    }

    /// Host CPU time per threaded hand-off, microseconds (0 unless a
    /// `cores` line or the calibrator says).
    pub fn handoff_cpu_us(&self) -> f64 {
        self.handoff_cpu_us
    }

    /// Sets [`handoff_cpu_us`](Self::handoff_cpu_us).
    pub fn set_handoff_cpu_us(&mut self, us: f64) {
        self.handoff_cpu_us = us;
    }

    /// True if a device of `kind` keeps its data in host memory (CPUs, and
    /// the kinds a `host-memory` line names).
    pub fn in_host_memory(&self, kind: DeviceKind) -> bool {
        kind == DeviceKind::Cpu || self.host_memory.contains(&kind)
    }

    /// The offset multiple at which a device of `kind` binds a view of a
    /// buffer: 1 for a host arena, the `view-align` figure for Vulkan
    /// ([`ASSUMED_VIEW_ALIGN`] by default), `None` for CUDA (no views).
    pub fn view_align(&self, kind: DeviceKind) -> Option<usize> {
        match kind {
            DeviceKind::Cpu => Some(1),
            DeviceKind::Vulkan => Some(self.vulkan_view_align),
            _ => None,
        }
    }

    /// Sets the Vulkan devices' [`view_align`](Self::view_align): a power
    /// of two up to [`ASSUMED_VIEW_ALIGN`], or an error saying so.
    pub fn set_vulkan_view_align(&mut self, align: usize) -> Result<(), String> {
        if !align.is_power_of_two() || align > ASSUMED_VIEW_ALIGN {
            return Err(format!(
                "bad view alignment {align}: a Vulkan device's storage-buffer offset alignment is a power of two up to {ASSUMED_VIEW_ALIGN} bytes, e.g. `view-align vulkan 16`"
            ));
        }
        self.vulkan_view_align = align;
        Ok(())
    }

    /// True if the host's cores run `kind`'s kernels (a `host-kernels`
    /// line: lavapipe).
    pub fn kernels_on_host_cores(&self, kind: DeviceKind) -> bool {
        self.host_kernels.contains(&kind)
    }

    /// Declares peer access between two CUDA devices (both directions).
    pub fn with_peer(mut self, a: u32, b: u32) -> Topology {
        self.peers.insert((a, b));
        self.peers.insert((b, a));
        self
    }

    /// True if cuda:a and cuda:b may copy directly.
    pub fn has_peer(&self, a: u32, b: u32) -> bool {
        self.peers.contains(&(a, b))
    }

    /// Every ordered CUDA pair with peer access (both orders of a `peer`
    /// line), without asking about every pair of a large group.
    pub fn peer_pairs(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        self.peers.iter().copied()
    }

    /// How to get bytes from `src` to `dst`.
    pub fn route(&self, src: Device, dst: Device) -> Route {
        use DeviceKind::*;
        if src == dst || src.kind == Cpu || dst.kind == Cpu {
            return Route::Direct;
        }
        match (src.kind, dst.kind) {
            (Cuda, Cuda) if self.has_peer(src.index, dst.index) => Route::Direct,
            _ => Route::Staged(self.staging),
        }
    }

    /// True if one copy can go from `src` to `dst`.
    pub fn is_direct(&self, src: Device, dst: Device) -> bool {
        self.route(src, dst) == Route::Direct
    }

    /// The class of a direct link, or `None` if the pair needs staging.
    pub fn link_class(&self, src: Device, dst: Device) -> Option<LinkClass> {
        use DeviceKind::*;
        if self.route(src, dst) != Route::Direct {
            return None;
        }
        Some(match (src.kind, dst.kind) {
            _ if src == dst => LinkClass::SameDevice,
            (Cpu, Cpu) => LinkClass::HostHost,
            (Cpu, Cuda) | (Cuda, Cpu) => LinkClass::HostCuda,
            (Cpu, Vulkan) | (Vulkan, Cpu) => LinkClass::HostVulkan,
            (Cuda, Cuda) => LinkClass::CudaPeer,
            // route() never says Direct for these.
            (Cuda, Vulkan) | (Vulkan, Cuda) | (Vulkan, Vulkan) => return None,
        })
    }

    /// The class of the link between the host and a device of `kind`
    /// (inputs arrive over it, outputs leave over it).
    pub fn host_class(kind: DeviceKind) -> LinkClass {
        match kind {
            DeviceKind::Cpu => LinkClass::HostHost,
            DeviceKind::Cuda => LinkClass::HostCuda,
            DeviceKind::Vulkan => LinkClass::HostVulkan,
        }
    }

    /// Cost of a direct link class.
    pub fn link(&self, class: LinkClass) -> LinkCost {
        self.links
            .get(&class)
            .copied()
            .unwrap_or(LinkCost::new(1.0, 100.0))
    }

    /// Overrides the cost of one link class.
    pub fn set_link(&mut self, class: LinkClass, cost: LinkCost) {
        self.links.insert(class, cost);
    }

    /// Cost of one message between two processes of a world.
    pub fn process_link(&self) -> LinkCost {
        self.process
    }

    /// Overrides the cost of the process link.
    pub fn set_process_link(&mut self, cost: LinkCost) {
        self.process = cost;
    }

    /// Cost of computing on a device of `kind`.
    pub fn compute(&self, kind: DeviceKind) -> ComputeCost {
        self.compute.get(&kind).copied().unwrap_or(ComputeCost {
            gbps: Curve::flat(10.0),
            fixed_us: 10.0,
            wide: WIDE_DEFAULT,
        })
    }

    /// Overrides the cost of computing on one device kind.
    pub fn set_compute(&mut self, kind: DeviceKind, cost: ComputeCost) {
        self.compute.insert(kind, cost);
    }

    /// What a runner adds.
    pub fn runner(&self, runner: Runner) -> RunnerCost {
        self.runners.get(&runner).copied().unwrap_or(RunnerCost {
            step_us: 10.0,
            run_us: 10.0,
            dispatch_us: 3.0,
        })
    }

    /// Overrides what a runner adds.
    pub fn set_runner(&mut self, runner: Runner, cost: RunnerCost) {
        self.runners.insert(runner, cost);
    }

    /// Estimated microseconds to move `bytes` from `src` to `dst`, counting a
    /// staged pair as its two hops.
    pub fn transfer_us(&self, src: Device, dst: Device, bytes: usize) -> f64 {
        self.transfer_us_at(src, dst, bytes, bytes)
    }

    /// [`Topology::transfer_us`] within work whose data is `working` bytes
    /// ([`Curve::us_at`]).
    pub fn transfer_us_at(&self, src: Device, dst: Device, bytes: usize, working: usize) -> f64 {
        match self.route(src, dst) {
            Route::Direct => self
                .link_class(src, dst)
                .map_or(0.0, |c| self.link(c).time_us_at(bytes, working)),
            Route::Staged(cpu) => {
                self.transfer_us_at(src, cpu, bytes, working)
                    + self.transfer_us_at(cpu, dst, bytes, working)
            }
        }
    }

    /// Estimated microseconds for `device` to combine `inputs` tensors of `bytes` each.
    pub fn reduce_us(&self, device: Device, inputs: usize, bytes: usize) -> f64 {
        self.compute(device.kind).time_us(inputs, bytes)
    }
}

mod file;
#[cfg(test)]
mod tests;
