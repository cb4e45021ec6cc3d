//! The cost model: how long a lowered collective is expected to take.
//!
//! A pure helper, with no graph in sight. A lowering is described as a list
//! of [`Step`]s, each a transfer over one direct link, a computation on one
//! device, a driver call, or the caller's bytes going in or coming out, with
//! the steps it waits for. A staged hop is two transfer steps, one per link,
//! because the lowering builds it as two copies.
//!
//! **What a step costs.** The executor runs a graph one of two ways
//! ([`Runner`]): an all-host graph runs its steps one after another on the
//! caller's thread, any other graph hands each step to its device's worker.
//! Every step pays its runner's fixed cost per step (`runner ... step=`);
//! on top of it
//!
//! - a copy costs `latency + bytes / bandwidth` of its link class, unless
//!   the executor shares it (a host-to-host copy that is not an output:
//!   nothing moves, only the runner's bookkeeping, the inline step cost) or
//!   defers it into the fold that reads it (`bytes / deferred`, no latency
//!   and no step of its own; a GPU fold also pays one more kernel's fixed
//!   cost per deferred operand, since it uploads and folds each in turn):
//!   [`CopyMode`], the executor's own rule;
//! - a computation costs `fixed + inputs * bytes / throughput` of its
//!   device kind (an n-ary fold reads `n` inputs; `div` reads one, and
//!   costs nothing of its own where the plan runs it inside its fold);
//! - a `concat` or a copying `slice` ([`StepKind::layout`]) is a kernel
//!   reading one input on a CPU, and a region copy within the device on a
//!   GPU: its kernels' fixed cost plus the bytes at the same-device figures
//!   (host-to-host ones where the device's memory is the host's);
//! - a driver all-reduce costs what [`driver_us`] says;
//! - an input or output on a GPU crosses the host link once (on a CPU the
//!   executor lends the caller's buffer: only the step cost).
//!
//! **How steps overlap.** The estimate is the larger of two bounds on the
//! finishing time: the longest chain of dependent steps (the critical path),
//! with the threaded runner's dispatcher work added to it, and the busiest
//! resource's total work. (Every step passes through the one dispatcher
//! thread, which shares the cores with the workers; measured, its work adds
//! to a run rather than hiding under it.) With the inline runner
//! there is one resource, the caller's thread, so the estimate is the sum of
//! all steps. With the threaded runner each device's worker is a resource
//! (a copy runs on its destination's worker, a deferred copy inside its
//! reader's fold; a step's hand-off is latency on its chain, not work of
//! its worker), the dispatcher thread has the `dispatch` cost of every step
//! a worker runs, shared copies and reading outputs back, and host
//! memory: every byte a step reads or writes in host memory (a staging
//! CPU's copies in and out, a host fold's inputs and result, and both ends
//! of a transfer or kernel on a `host-memory` device such as lavapipe)
//! counts against twice the host-to-host copy bandwidth (a copy reads and
//! writes each byte), so transfers that look independent still contend for
//! it. Where the topology gives the host's core count, the cores are a
//! resource too: the work of each worker step on a host-side device (a
//! kernel of a `host-kernels` kind such as lavapipe once per core, since
//! measured alone it had them all), the CPU part of every hand-off and the
//! dispatcher's starts, over the count.
//! Latency-bound small messages therefore favour few steps
//! (star), bandwidth-bound large ones favour spreading bytes over many
//! devices (ring), where the devices really run side by side.
//!
//! [`estimate`] adds the runner's fixed cost per run only when asked to
//! (a whole run, `fuel_collective::lower::estimate_run`); candidates of one
//! collective are compared without it.

pub mod bound;
pub mod price;
pub mod priced_run;

use fuel_graph_ext::plan::CopyMode;
use fuel_graph_ext::topology::{LinkClass, Runner};
use fuel_graph_ext::{Device, DeviceKind, Topology};
use rustc_hash::FxHashMap;
use std::fmt;

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
        /// How the executor runs it.
        mode: CopyMode,
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
    /// A concat on the host that takes some operands deferred: its result
    /// is `bytes`, but it copies only `copied` of them itself; each
    /// deferred operand lands in its place as a transfer of its own
    /// ([`price::deferred`]). Priced as [`StepKind::layout`] of `copied`
    /// bytes, while [`working_bytes`] still reads the result's size.
    Join {
        /// The host arena it runs on.
        device: Device,
        /// Bytes of its result.
        bytes: usize,
        /// Bytes it copies from operands on its own device.
        copied: usize,
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
    /// An `extern` op's kernel on `device`, writing `bytes`: `us`
    /// microseconds where its cost hint says, else priced as a kernel that
    /// reads and writes `bytes` once.
    Extern {
        /// Where it runs.
        device: Device,
        /// Bytes of its result.
        bytes: usize,
        /// Its cost hint, in microseconds.
        us: Option<f64>,
    },
    /// The caller's `bytes` become a graph input on `device`.
    Input {
        /// Where the input lives.
        device: Device,
        /// Its size.
        bytes: usize,
        /// Read where the caller's tensor lies (a large input on a Vulkan
        /// device in host memory, [`crate::cost::price::input_in_place`]):
        /// the dispatcher's bookkeeping, no bytes.
        in_place: bool,
    },
    /// A graph output on `device` is read back to the caller.
    Output {
        /// Where the output lives.
        device: Device,
        /// Its size.
        bytes: usize,
        /// A host output whose step could not write the caller's tensor
        /// (its buffer is lent to imports, or is a view of another): the
        /// runner copies it out after the run, a memcpy on its own thread.
        /// A host output that is not copied out costs nothing.
        copied_out: bool,
    },
}

impl StepKind {
    /// A `concat`, or a `slice` that copies, on `device`: `bytes` written
    /// from its operands' regions. A host arena runs it as a kernel; a GPU
    /// as a region copy within the device (`vkCmdCopyBuffer`), which is no
    /// shader and must not be priced at its fold throughput (on lavapipe a
    /// fold reads well under 1 GB/s, a region copy runs at memcpy speed).
    pub fn layout(device: Device, bytes: usize) -> StepKind {
        if device.is_cpu() {
            StepKind::Compute {
                device,
                inputs: 1,
                bytes,
            }
        } else {
            StepKind::Transfer {
                from: device,
                to: device,
                bytes,
                mode: CopyMode::Moves,
            }
        }
    }

    /// A concat of `bytes` on `device` that copies `copied` of them itself
    /// (the rest arrive as deferred operands): [`StepKind::Join`] where it
    /// takes any, else [`StepKind::layout`].
    pub fn join(device: Device, bytes: usize, copied: usize) -> StepKind {
        if copied < bytes && device.is_cpu() {
            StepKind::Join {
                device,
                bytes,
                copied,
            }
        } else {
            StepKind::layout(device, bytes)
        }
    }

    /// The bytes it moves, or of each tensor it reads (a join: its result).
    pub fn bytes(&self) -> usize {
        match *self {
            StepKind::Transfer { bytes, .. }
            | StepKind::Join { bytes, .. }
            | StepKind::Compute { bytes, .. }
            | StepKind::Extern { bytes, .. }
            | StepKind::Driver { bytes, .. }
            | StepKind::Input { bytes, .. }
            | StepKind::Output { bytes, .. } => bytes,
        }
    }

    /// Whether the executor's threaded runner hands this step to the
    /// worker of a device that is not a host arena: a transfer that moves
    /// bytes to a GPU, a kernel or driver call on one, an input uploaded to
    /// one. A shared hop (an import), an input read in place and an output
    /// read back are the runner's own work; a hop to the host runs on the
    /// host's worker. (The executor's rule: `plan::Work::needs_device`.)
    pub fn on_gpu_worker(&self) -> bool {
        match *self {
            StepKind::Transfer { to, mode, .. } => mode != CopyMode::Shared && !to.is_cpu(),
            StepKind::Compute { device, .. }
            | StepKind::Join { device, .. }
            | StepKind::Extern { device, .. }
            | StepKind::Driver { device, .. } => !device.is_cpu(),
            StepKind::Input {
                device, in_place, ..
            } => !in_place && !device.is_cpu(),
            StepKind::Output { .. } => false,
        }
    }
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
    /// The busiest resource's total work, in microseconds (the dispatcher
    /// aside).
    pub busiest_us: f64,
    /// The threaded runner's dispatcher's total work, in microseconds:
    /// every step passes through it, one at a time, and it runs on the
    /// cores the workers need, so its work adds to the critical path rather
    /// than overlapping it (0 for the inline runner).
    pub dispatcher_us: f64,
    /// The runner's fixed cost per run, when the estimate is of a whole run
    /// (0 for a candidate lowering).
    pub run_us: f64,
    /// Transfer steps (a staged hop counts two).
    pub transfers: usize,
    /// Bytes the transfers move (shared copies move none).
    pub bytes_moved: usize,
}

impl Estimate {
    /// The estimated time: the critical path plus the dispatcher's work, or
    /// the busiest resource's work if that is larger, plus the fixed cost
    /// per run.
    pub fn total_us(&self) -> f64 {
        (self.critical_path_us + self.dispatcher_us).max(self.busiest_us) + self.run_us
    }
}

/// The runner the executor uses for steps on `devices`: inline when every
/// one is a host arena.
pub fn runner_for(devices: impl IntoIterator<Item = Device>) -> Runner {
    if devices.into_iter().all(|d| d.is_cpu()) {
        Runner::Inline
    } else {
        Runner::Threaded
    }
}

/// The runner for a list of steps, as the executor picks it: inline when
/// every step is on host arenas ([`runner_for`]), and also when no step
/// would go to a GPU's worker ([`StepKind::on_gpu_worker`]: the GPU steps
/// are all the runner's own work, such as inputs read in place and hops
/// shared as imports).
pub fn runner_of(steps: &[Step]) -> Runner {
    if steps.iter().any(|s| s.kind.on_gpu_worker()) {
        Runner::Threaded
    } else {
        Runner::Inline
    }
}

/// The size throughputs are looked up at for a list of steps: its largest
/// tensor. A chunk of a large tensor streams through the caches as the
/// whole tensor does, so a ring's 1 MiB chunks of a 4 MiB shard run at the
/// 4 MiB figure, not the 1 MiB one.
pub fn working_bytes(steps: &[Step]) -> usize {
    steps.iter().map(|s| s.kind.bytes()).max().unwrap_or(0)
}

/// Microseconds one step takes on its own under `runner`, within work
/// whose largest tensor is `working` bytes ([`working_bytes`]).
pub fn step_us(topo: &Topology, runner: Runner, kind: &StepKind, working: usize) -> f64 {
    let step = topo.runner(runner).step_us;
    let host_link = |d: Device| topo.link(Topology::host_class(d.kind));
    match *kind {
        StepKind::Transfer {
            from,
            to,
            bytes,
            mode,
        } => match mode {
            CopyMode::Moves if from == to => within_us(topo, from, bytes, working) + step,
            CopyMode::Moves => topo.transfer_us_at(from, to, bytes, working) + step,
            CopyMode::Shared => topo.runner(Runner::Inline).step_us,
            // A host fold reads a deferred operand where it lies (or
            // downloads it); a device fold uploads it into scratch and
            // folds it in with a launch of its own (one it uploads
            // straight into its result is priced as a plain copy:
            // `price::deferred`).
            CopyMode::Deferred => {
                let moved = topo
                    .link_class(from, to)
                    .map_or(0.0, |c| topo.link(c).deferred_us(bytes));
                if to.is_cpu() {
                    moved
                } else {
                    moved + topo.compute(to.kind).fixed_us
                }
            }
        },
        StepKind::Compute {
            device,
            inputs,
            bytes,
        } => topo.compute(device.kind).time_us_at(inputs, bytes, working) + step,
        StepKind::Join { device, copied, .. } => {
            topo.compute(device.kind).time_us_at(1, copied, working) + step
        }
        StepKind::Extern { us: Some(us), .. } => us + step,
        StepKind::Extern { device, bytes, .. } => {
            topo.compute(device.kind).time_us_at(1, bytes, working) + step
        }
        StepKind::Driver {
            device,
            ranks,
            bytes,
            peered,
        } => driver_us(topo, device, ranks, bytes, peered, working) + step,
        StepKind::Input { in_place: true, .. } => topo.runner(Runner::Inline).step_us,
        StepKind::Input { device, bytes, .. } if !device.is_cpu() => {
            host_link(device).time_us_at(bytes, working) + step
        }
        StepKind::Input { .. } => step,
        StepKind::Output { device, bytes, .. } if !device.is_cpu() => {
            host_link(device).time_us_at(bytes, working)
        }
        StepKind::Output {
            bytes,
            copied_out: true,
            ..
        } => topo.link(LinkClass::HostHost).time_us_at(bytes, working),
        StepKind::Output { .. } => 0.0,
    }
}

/// A copy of `bytes` within `device` ([`StepKind::layout`]): a memcpy
/// where the device's memory is host memory (a CPU, lavapipe), at the
/// host-to-host figures; else the `same-device` link. A GPU also pays its
/// kernels' fixed cost: the copy is a submission and a fence like a kernel.
fn within_us(topo: &Topology, device: Device, bytes: usize, working: usize) -> f64 {
    let class = if topo.in_host_memory(device.kind) {
        LinkClass::HostHost
    } else {
        LinkClass::SameDevice
    };
    let fixed = if device.is_cpu() {
        0.0
    } else {
        topo.compute(device.kind).fixed_us
    };
    topo.link(class).time_us_at(bytes, working) + fixed
}

/// A driver all-reduce modelled as a ring: each rank sends and receives
/// `2(k-1)/k` of the shard in `2(k-1)` steps over the links its driver uses
/// (CUDA peer links where every pair is peered, else the host-CUDA link;
/// host-host for CPUs), and reduces `(k-1)/k` of it.
pub fn driver_us(
    topo: &Topology,
    device: Device,
    ranks: usize,
    bytes: usize,
    peered: bool,
    working: usize,
) -> f64 {
    if ranks <= 1 {
        return 0.0;
    }
    let k = ranks as f64;
    let class = match device.kind {
        DeviceKind::Cuda if peered => LinkClass::CudaPeer,
        DeviceKind::Cuda => LinkClass::HostCuda,
        _ => LinkClass::HostHost,
    };
    let link = topo.link(class);
    let compute = topo.compute(device.kind);
    2.0 * (k - 1.0) * link.latency_us
        + 2.0 * (k - 1.0) / k * link.bandwidth.us_at(bytes, working)
        + (k - 1.0) / k * compute.gbps.us_at(bytes, working)
}

/// A resource a step occupies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Resource {
    /// The caller's thread, which runs every step of an inline run.
    Caller,
    /// A device's worker thread (threaded runner).
    Worker(Device),
    /// The threaded runner's dispatcher: shared copies, outputs read back.
    Dispatcher,
    /// Host memory, which every worker's host traffic shares.
    HostMemory,
}

/// Where a step's time goes under `runner`: its resource, and the bytes it
/// reads or writes in host memory (both ends of a transfer, a kernel's
/// inputs and result, when they live in host memory: a CPU's, or a
/// `host-memory` kind's such as lavapipe).
pub fn placement(topo: &Topology, runner: Runner, kind: &StepKind) -> (Resource, usize) {
    let on = |d: Device| match runner {
        Runner::Inline => Resource::Caller,
        Runner::Threaded => Resource::Worker(d),
    };
    let dispatcher = match runner {
        Runner::Inline => Resource::Caller,
        Runner::Threaded => Resource::Dispatcher,
    };
    let host = |d: Device, bytes: usize| {
        if topo.in_host_memory(d.kind) {
            bytes
        } else {
            0
        }
    };
    match *kind {
        StepKind::Transfer {
            from,
            to,
            bytes,
            mode,
        } => match mode {
            CopyMode::Moves => (on(to), host(from, bytes).saturating_add(host(to, bytes))),
            CopyMode::Shared => (dispatcher, 0),
            // A host fold reads an operand in host memory where it lies (a
            // mapped lavapipe buffer): its own read counts it. Else the
            // operand lands in host memory first (a download into scratch,
            // or an upload into a lavapipe buffer).
            CopyMode::Deferred if to.is_cpu() && topo.in_host_memory(from.kind) => (on(to), 0),
            CopyMode::Deferred => (on(to), host(to, bytes)),
        },
        StepKind::Compute {
            device,
            inputs,
            bytes,
        } => (
            on(device),
            host(device, inputs.saturating_add(1).saturating_mul(bytes)),
        ),
        StepKind::Join { device, copied, .. } => {
            (on(device), host(device, copied.saturating_mul(2)))
        }
        StepKind::Driver { device, .. } => (on(device), 0),
        StepKind::Extern { device, bytes, .. } => {
            (on(device), host(device, bytes.saturating_mul(2)))
        }
        // The caller's bytes are host memory; on a CPU they are lent, and
        // an input read in place is the dispatcher's bookkeeping.
        StepKind::Input { in_place: true, .. } => (dispatcher, 0),
        // A host output copied out is read and written in host memory.
        StepKind::Output {
            bytes,
            copied_out: true,
            device,
        } if device.is_cpu() => (dispatcher, bytes.saturating_mul(2)),
        StepKind::Input { device, bytes, .. } | StepKind::Output { device, bytes, .. } => {
            let res = match kind {
                StepKind::Input { .. } => on(device),
                _ => dispatcher,
            };
            if device.is_cpu() {
                (res, 0)
            } else {
                (res, bytes.saturating_add(host(device, bytes)))
            }
        }
    }
}

/// A step's cost, worked out once ([`Tally::price`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Priced {
    /// Microseconds from start to finish.
    pub us: f64,
    /// Microseconds its resource is busy with it.
    pub busy_us: f64,
    /// Where the time goes.
    pub resource: Resource,
    /// Bytes it reads or writes in host memory (a float, so that a run's
    /// sum of huge steps saturates instead of overflowing).
    pub host_bytes: f64,
    /// Microseconds of the dispatcher, for a step a worker runs.
    pub dispatch_us: f64,
    /// For a transfer, the bytes it moves.
    pub moved: Option<usize>,
    /// Microseconds of the host's cores its own work takes (a worker step
    /// on a host-memory device; a kernel of a `host-kernels` kind once per
    /// core, since measured alone it had them all).
    pub core_us: f64,
}

/// Sums work per resource and the longest chain, one step at a time, in
/// an order where every step comes after the steps it waits for.
#[derive(Clone, Debug)]
pub struct Tally<'a> {
    topo: &'a Topology,
    runner: Runner,
    working: usize,
    /// Work on the caller's thread and the dispatcher.
    caller: f64,
    dispatcher: f64,
    /// Work per device worker.
    workers: FxHashMap<Device, f64>,
    /// Bytes read or written in host memory, by every step so far.
    host_bytes: f64,
    /// Work on the host's cores (see [`Tally::cores_load_us`]).
    cores_us: f64,
    est: Estimate,
}

impl<'a> Tally<'a> {
    /// An empty tally for steps run by `runner`, whose largest tensor is
    /// `working` bytes ([`working_bytes`]).
    pub fn new(topo: &'a Topology, runner: Runner, working: usize) -> Tally<'a> {
        Tally {
            topo,
            runner,
            working,
            caller: 0.0,
            dispatcher: 0.0,
            workers: FxHashMap::default(),
            host_bytes: 0.0,
            cores_us: 0.0,
            est: Estimate::default(),
        }
    }

    /// Adds a step that can start at `start` (when the steps it waits for
    /// are done); returns when it finishes.
    pub fn add(&mut self, kind: &StepKind, start: f64) -> f64 {
        let p = self.price(kind);
        self.add_priced(&p, start)
    }

    /// What `kind` costs here, worked out once for a step that repeats.
    pub fn price(&self, kind: &StepKind) -> Priced {
        let (resource, host_bytes) = placement(self.topo, self.runner, kind);
        let moved = match *kind {
            // A copy within a device is layout work, not a hop.
            StepKind::Transfer {
                from,
                to,
                mode: CopyMode::Moves,
                ..
            } if from == to => None,
            StepKind::Transfer { bytes, mode, .. } => {
                Some(if mode == CopyMode::Shared { 0 } else { bytes })
            }
            _ => None,
        };
        // The threaded runner's dispatcher starts every step a worker runs.
        let dispatch_us = match resource {
            Resource::Worker(_) => self.topo.runner(Runner::Threaded).dispatch_us,
            _ => 0.0,
        };
        let us = step_us(self.topo, self.runner, kind, self.working);
        // A worker's step costs its worker the work, not the hand-off: that
        // is latency on the step's own chain, and dispatcher time. A
        // deferred copy has no hand-off of its own (its reader moves it,
        // and [`step_us`] adds none), so all of it is work.
        let handoff_us = match (resource, kind) {
            (
                Resource::Worker(_),
                StepKind::Transfer {
                    mode: CopyMode::Deferred,
                    ..
                },
            ) => 0.0,
            (Resource::Worker(_), _) => self.topo.runner(Runner::Threaded).step_us,
            _ => 0.0,
        };
        let busy_us = (us - handoff_us).max(0.0);
        let core_us = match (resource, kind) {
            // A kernel of a `host-kernels` kind streams on every core, but
            // its fixed part (a submission, the wake-ups on the way to its
            // fence) is mostly waiting: one core's worth.
            (Resource::Worker(d), StepKind::Compute { .. })
                if self.topo.kernels_on_host_cores(d.kind) =>
            {
                let fixed = self.topo.compute(d.kind).fixed_us.min(busy_us);
                fixed + (busy_us - fixed) * f64::from(self.topo.host_cores().unwrap_or(1))
            }
            (Resource::Worker(d), _) if self.topo.in_host_memory(d.kind) => busy_us,
            _ => 0.0,
        };
        Priced {
            us,
            busy_us,
            resource,
            host_bytes: host_bytes as f64,
            dispatch_us,
            moved,
            core_us,
        }
    }

    /// [`Tally::add`] of a step priced with [`Tally::price`].
    pub fn add_priced(&mut self, p: &Priced, start: f64) -> f64 {
        match p.resource {
            Resource::Caller => {
                self.caller += p.busy_us;
                self.cores_us += p.busy_us;
            }
            Resource::Dispatcher => {
                self.dispatcher += p.busy_us;
                self.cores_us += p.busy_us;
            }
            Resource::Worker(d) => {
                *self.workers.entry(d).or_insert(0.0) += p.busy_us;
                self.dispatcher += p.dispatch_us;
                // The step's work where the device is the host's, and the
                // part of its hand-off that keeps a core busy (a wake-up,
                // a report back; the rest is waiting).
                self.cores_us += p.core_us + self.topo.handoff_cpu_us() + p.dispatch_us;
            }
            // No step is placed there: it is the sum of their host bytes.
            Resource::HostMemory => {}
        }
        self.host_bytes += p.host_bytes;
        if let Some(bytes) = p.moved {
            self.est.transfers += 1;
            self.est.bytes_moved = self.est.bytes_moved.saturating_add(bytes);
        }
        let end = start + p.us;
        self.est.critical_path_us = self.est.critical_path_us.max(end);
        end
    }

    /// The estimate of every step added.
    pub fn finish(mut self) -> Estimate {
        self.est.dispatcher_us = self.dispatcher;
        self.est.busiest_us = self.workers.values().fold(
            self.caller
                .max(self.memory_load_us())
                .max(self.cores_load_us()),
            |a, b| a.max(*b),
        );
        self.est
    }

    /// Each resource's total work so far, in microseconds: the caller's
    /// thread, each device's worker (by device), host memory and the
    /// host's cores (the dispatcher aside, which [`Estimate`] adds to the
    /// critical path). The largest is [`Estimate::busiest_us`].
    pub fn loads(&self) -> Vec<(Load, f64)> {
        let mut workers: Vec<(Load, f64)> = self
            .workers
            .iter()
            .map(|(d, us)| (Load::Worker(*d), *us))
            .collect();
        workers.sort_by_key(|(l, _)| *l);
        let mut loads = vec![(Load::Caller, self.caller)];
        loads.extend(workers);
        loads.push((Load::HostMemory, self.memory_load_us()));
        loads.push((Load::Cores, self.cores_load_us()));
        loads
    }

    /// Host memory's work: every byte read or written there, at twice the
    /// host-to-host copy bandwidth (a copy reads and writes each byte), at
    /// the size of the data the run streams through it: about half its
    /// traffic, each byte written once and read once (a copy of `s` bytes,
    /// as calibrated, streams `s`). A run whose tensors are each small but
    /// that touches more than the caches hold runs at the larger size's
    /// figure.
    fn memory_load_us(&self) -> f64 {
        if self.host_bytes > 0.0 {
            let streamed = (self.host_bytes / 2.0).min(usize::MAX as f64) as usize;
            let hh = self.topo.link(LinkClass::HostHost).bandwidth;
            self.host_bytes / (2.0 * hh.at(self.working.max(streamed)) * 1e3)
        } else {
            0.0
        }
    }

    /// The host's cores' work: with the threaded runner the workers, the
    /// dispatcher and a host-memory device's kernels share them, so more
    /// of them busy at once than there are cores take turns.
    fn cores_load_us(&self) -> f64 {
        match (self.runner, self.topo.host_cores()) {
            (Runner::Threaded, Some(n)) => self.cores_us / f64::from(n),
            _ => 0.0,
        }
    }
}

/// What a run's work is counted against ([`Tally::loads`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Load {
    /// The caller's thread (the inline runner's every step).
    Caller,
    /// A device's worker thread.
    Worker(Device),
    /// Host memory, at twice the host-to-host copy figure.
    HostMemory,
    /// The host's cores, shared by the workers, the dispatcher and
    /// host-side kernels (where the topology gives their count).
    Cores,
}

impl fmt::Display for Load {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Load::Caller => Resource::Caller.fmt(f),
            Load::Worker(d) => Resource::Worker(*d).fmt(f),
            Load::HostMemory => Resource::HostMemory.fmt(f),
            Load::Cores => f.write_str("the host's cores"),
        }
    }
}

impl fmt::Display for Resource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Resource::Caller => f.write_str("the caller's thread"),
            Resource::Worker(d) => write!(f, "{d}'s worker"),
            Resource::Dispatcher => f.write_str("the dispatcher"),
            Resource::HostMemory => f.write_str("host memory"),
        }
    }
}

/// Estimates a lowering from its steps, run by `runner`. Dependencies
/// that do not point to an earlier step are ignored.
pub fn estimate_with(topo: &Topology, runner: Runner, steps: &[Step]) -> Estimate {
    let mut finish: Vec<f64> = Vec::with_capacity(steps.len());
    let mut tally = Tally::new(topo, runner, working_bytes(steps));
    for (i, s) in steps.iter().enumerate() {
        finish.push(tally.add(&s.kind, start_of(s, i, &finish)));
    }
    tally.finish()
}

/// When step `i` may start: when the earlier steps it waits for are done
/// (`finish`, by step). Dependencies that do not point to an earlier
/// step are ignored.
pub(crate) fn start_of(step: &Step, i: usize, finish: &[f64]) -> f64 {
    step.deps
        .iter()
        .filter(|d| **d < i)
        .filter_map(|d| finish.get(*d))
        .fold(0.0, |a: f64, b| a.max(*b))
}

/// Estimates a lowering from its steps, with the runner the executor would
/// use for their devices ([`runner_of`]).
pub fn estimate(topo: &Topology, steps: &[Step]) -> Estimate {
    estimate_with(topo, runner_of(steps), steps)
}

#[cfg(test)]
mod tests;
