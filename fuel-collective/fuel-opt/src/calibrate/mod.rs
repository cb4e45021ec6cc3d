//! `fuel-opt calibrate` (and `bench --calibrate`): measures what the cost
//! model assumes, with the executor itself, and keeps it in the
//! calibration cache (`fuel_runtime::calibration`) or a topology file.
//!
//! Each figure is fitted so that the model's own estimate of a small
//! calibration graph ([`fuel_collective::lower::estimate_run_on`]: inputs,
//! steps, outputs, the runner's cost per run) equals its measured median.
//! The estimate is affine in each figure (or in its inverse, for
//! throughputs), so two graphs give two equations:
//!
//! - runners: a chain of 1 and of 33 shared host copies (the inline step
//!   cost, from the slope), a chain of 1 and 33 `div`s on `cpu:0` run
//!   inline (the CPU's fixed cost per computation from the slope, the run
//!   cost from one div) and on the threaded runner (its step and run cost;
//!   only where the group has a device other than a CPU, since an all-host
//!   graph always runs inline);
//! - links: one copy between two devices of each class among the group's
//!   (and `cpu:0 -> cpu:1`), at 4 KiB (the latency) and at 64 KiB, 1 MiB
//!   and 4 MiB (the bandwidth curve's points: caches make small copies
//!   faster per byte than large ones);
//! - computation: a two-input `add` on each device kind at the same sizes:
//!   the fixed cost (for CPUs from the div chain) and the throughput curve;
//!   and a four-input `add` at 4 MiB: what each input past the second
//!   costs (`reduce KIND .. wide=`);
//! - deferred copies: a GPU shard copied to `cpu:0` straight into an `add`
//!   there (the executor defers it into the add), 4 MiB: their bandwidth.
//!
//! The graphs are timed once; the fits then run eight times over, each
//! with the others' latest figures, since every graph pays a little of
//! every other figure.

use crate::outln;
use crate::setup;
use crate::Failure;
use fuel_collective::lower::estimate_run_on_with;
use fuel_graph_ext::interp::deterministic_inputs;
use fuel_graph_ext::topology::{Curve, LinkClass, Runner};
use fuel_graph_ext::Tensor;
use fuel_graph_ext::{text, Device, DeviceKind, Graph, Topology};
use fuel_runtime::exec;
use std::collections::BTreeMap;
use std::time::Instant;

/// The sizes links and computations are timed at: the smallest fixes the
/// latency or fixed cost, the others a point of the throughput curve each.
const SIZES: [usize; 5] = [4 << 10, 64 << 10, 1 << 20, 4 << 20, 16 << 20];
const BIG: usize = 4 << 20;
/// The size of the four-input add ([`wide_add_graph`]): large enough that
/// a fold's fixed cost hides little of what its inputs cost, and not the
/// largest, where this VM's CPU folds swing between two speeds from one
/// timing to the next (a two-input add at 16 MiB took 1127 us in one
/// calibration and 1987-2162 us in three others, at 4 MiB 485-500 us in
/// all four), so the two-input and four-input adds could be timed at
/// different speeds and the fit read that as a cost per input.
const WIDE: usize = BIG;
const CHAIN: usize = 33;

/// How long to measure.
#[derive(Clone, Copy, Debug)]
pub struct Effort {
    /// Timed runs per graph (the median counts).
    pub iters: usize,
    /// Untimed runs first.
    pub warmup: usize,
    /// Passes over every graph: each graph's time is the median of its
    /// passes' medians, so a burst of load on a shared machine that
    /// slows one pass does not set a figure.
    pub passes: usize,
}

/// One timed calibration graph.
struct Timed {
    graph: Graph,
    /// The runner it ran on.
    runner: Runner,
    /// Its median, microseconds.
    us: f64,
    /// The process's CPU time per run (every thread, user and system),
    /// microseconds: how much of a run kept the host's cores busy.
    cpu_us: f64,
    /// The plan options it was compiled with, which the model prices it
    /// under too.
    options: exec::Options,
}

impl Timed {
    /// The model's estimate of this graph under `topo`. The graph was
    /// compiled and run, so it has a plan; were it refused, the estimate is
    /// infinite and no fit takes it.
    fn model(&self, topo: &Topology) -> f64 {
        estimate_run_on_with(&self.graph, topo, self.runner, &self.options)
            .map_or(f64::INFINITY, |e| e.total_us())
    }
}

/// Times `src` (text IR) compiled for `devices`.
fn time(src: &str, devices: &[Device], effort: Effort) -> Result<Timed, Failure> {
    time_with(src, devices, effort, exec::Options::default())
}

/// [`time`] compiled with the plan `options`.
fn time_with(
    src: &str,
    devices: &[Device],
    effort: Effort,
    options: exec::Options,
) -> Result<Timed, Failure> {
    let graph = text::parse(src).map_err(|e| Failure::input(format!("calibration graph: {e}")))?;
    let topology = fuel_graph_ext::Topology::default();
    let exe = crate::run::compiler(&graph, devices, &topology, options)?
        .compile()
        .map_err(|e| Failure::input(format!("calibration compile failed: {e}")))?;
    let inputs: BTreeMap<String, Tensor> = deterministic_inputs(&graph)
        .iter()
        .map(|(k, v)| (k.clone(), Tensor::from_host(v)))
        .collect();
    let mut outs = Vec::new();
    let mut times = Vec::with_capacity(effort.iters);
    let mut cpu = 0.0;
    for it in 0..effort.warmup + effort.iters.max(1) {
        let c = cpu_time_us();
        let t = Instant::now();
        exe.run_into(&inputs, &mut outs)
            .map_err(|e| Failure::input(format!("calibration run failed: {e}")))?;
        if it >= effort.warmup {
            times.push(t.elapsed().as_secs_f64() * 1e6);
            cpu += cpu_time_us() - c;
        }
    }
    let cpu_us = cpu / effort.iters.max(1) as f64;
    // The runner the executable took: inline for all-host groups, and for
    // graphs whose GPU steps are all the runner's own (a Vulkan input read
    // in place and copied to the host).
    let runner = if exe.runs_inline() {
        Runner::Inline
    } else {
        Runner::Threaded
    };
    Ok(Timed {
        graph,
        runner,
        us: setup::median_us(&mut times),
        cpu_us,
        options,
    })
}

/// The process's CPU time so far (every thread, user and system), in
/// microseconds; 0 where the host cannot say.
fn cpu_time_us() -> f64 {
    // SAFETY: `getrusage` fills the struct it is given and nothing else.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a valid pointer to a zeroed `rusage`.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) } != 0 {
        return 0.0;
    }
    let us = |t: libc::timeval| t.tv_sec as f64 * 1e6 + t.tv_usec as f64;
    us(u.ru_utime) + us(u.ru_stime)
}

fn elems(bytes: usize) -> usize {
    (bytes / 4).max(1)
}

/// `k` copies bouncing between cpu:0 and cpu:1; only the last is an output.
fn copy_chain(k: usize) -> String {
    let mut s = String::from("graph @cal {\n  %0 = input \"a\" @cpu:0 : f32[1]\n");
    for i in 1..=k {
        let to = if i % 2 == 1 { "cpu:1" } else { "cpu:0" };
        s += &format!("  %{i} = copy %{} -> {to} : f32[1]\n", i - 1);
    }
    s + &format!("  return %{k}\n}}\n")
}

/// `k` chained `div {by=1}` on cpu:0.
fn div_chain(k: usize) -> String {
    let mut s = String::from("graph @cal {\n  %0 = input \"a\" @cpu:0 : f32[1]\n");
    for i in 1..=k {
        s += &format!("  %{i} = div %{} {{by=1}} @cpu:0 : f32[1]\n", i - 1);
    }
    s + &format!("  return %{k}\n}}\n")
}

/// `k` independent `div`s, alternately on cpu:0 and cpu:1, all outputs.
fn fanout(k: usize) -> String {
    let mut s = String::from(
        "graph @cal {\n  %0 = input \"a\" @cpu:0 : f32[1]\n  %1 = input \"b\" @cpu:1 : f32[1]\n",
    );
    let mut rets = Vec::with_capacity(k);
    for i in 0..k {
        let d = i % 2;
        s += &format!("  %{} = div %{d} {{by=1}} @cpu:{d} : f32[1]\n", i + 2);
        rets.push(format!("%{}", i + 2));
    }
    s + &format!("  return {}\n}}\n", rets.join(", "))
}

fn copy_graph(a: Device, b: Device, bytes: usize) -> String {
    let n = elems(bytes);
    format!(
        "graph @cal {{\n  %0 = input \"a\" @{a} : f32[{n}]\n  %1 = copy %0 -> {b} : f32[{n}]\n  return %1\n}}\n"
    )
}

fn add_graph(d: Device, bytes: usize) -> String {
    let n = elems(bytes);
    format!(
        "graph @cal {{\n  %0 = input \"a\" @{d} : f32[{n}]\n  %1 = input \"b\" @{d} : f32[{n}]\n  %2 = add %0, %1 @{d} : f32[{n}]\n  return %2\n}}\n"
    )
}

/// A four-input add on `d`: with the two-input one, what a wider fold
/// costs per extra input.
fn wide_add_graph(d: Device, bytes: usize) -> String {
    let n = elems(bytes);
    let mut s = "graph @cal {\n".to_string();
    for (i, name) in ["a", "b", "c", "d"].iter().enumerate() {
        s += &format!("  %{i} = input \"{name}\" @{d} : f32[{n}]\n");
    }
    s + &format!("  %4 = add %0, %1, %2, %3 @{d} : f32[{n}]\n  return %4\n}}\n")
}

/// A shard on `gpu` copied into an add on cpu:0: the copy is deferred.
fn deferred_graph(gpu: Device, bytes: usize) -> String {
    let n = elems(bytes);
    format!(
        "graph @cal {{\n  %0 = input \"a\" @{gpu} : f32[{n}]\n  %1 = input \"b\" @cpu:0 : f32[{n}]\n  %2 = copy %0 -> cpu:0 : f32[{n}]\n  %3 = add %1, %2 @cpu:0 : f32[{n}]\n  return %3\n}}\n"
    )
}

/// What the group's Vulkan adapters say about themselves: whether one's
/// memory is the host's, whether one is a CPU device (lavapipe, whose
/// kernels the host's cores run), and the largest offset multiple at which
/// one binds a view (`None` without a Vulkan device).
fn host_side_vulkan(devices: &[Device]) -> (bool, bool, Option<u64>) {
    use fuel_runtime::backend::vulkan::{devices_per_adapter, Instance};
    let Ok(inst) = Instance::open() else {
        return (false, false, None);
    };
    let adapters = inst.adapters();
    let of = |d: &Device| {
        (d.kind == DeviceKind::Vulkan)
            .then(|| {
                adapters
                    // A bad FUEL_VULKAN_DEVICES is reported when the devices open.
                    .get((d.index / devices_per_adapter().unwrap_or(1)) as usize)
            })
            .flatten()
    };
    (
        devices.iter().filter_map(of).any(|a| a.host_memory),
        devices.iter().filter_map(of).any(|a| a.cpu_device),
        devices.iter().filter_map(of).map(|a| a.view_align).max(),
    )
}

/// Everything timed for one calibration.
struct Measured {
    copies: [Timed; 2],
    divs: [Timed; 2],
    threaded_divs: Option<[Timed; 2]>,
    /// 33 independent divs on two CPUs' workers: the dispatcher's rate.
    fanout: Option<Timed>,
    /// A copy per link class, one per size of [`SIZES`].
    links: Vec<(LinkClass, Device, Device, Vec<Timed>)>,
    /// A two-input add per device kind, one per size of [`SIZES`].
    adds: Vec<(DeviceKind, Vec<Timed>)>,
    /// A four-input add per device kind, at the largest size, in the
    /// order of `adds`.
    wide_adds: Vec<(DeviceKind, Timed)>,
    deferred: Vec<(LinkClass, Timed)>,
}

/// Measures the figures for `devices` and returns `base` with them in it.
/// `say` gets one line per figure.
pub fn measure(
    devices: &[Device],
    base: &Topology,
    effort: Effort,
    say: &mut dyn FnMut(String),
) -> Result<Topology, Failure> {
    let first = measure_once(devices, base, effort)?;
    let mut others = Vec::with_capacity(effort.passes.saturating_sub(1));
    for _ in 1..effort.passes {
        others.push(measure_once(devices, base, effort)?);
    }
    let m = merge(first, others);
    let mut base = base.clone();
    let (host_memory, host_kernels, view_align) = host_side_vulkan(devices);
    if host_memory {
        base.host_memory.insert(DeviceKind::Vulkan);
    }
    if host_kernels {
        base.host_kernels.insert(DeviceKind::Vulkan);
    }
    // The model binds views where the devices do; a figure the topology
    // cannot hold (a driver reporting more than 256) keeps the default.
    let align = view_align.and_then(|a| usize::try_from(a).ok());
    if let Some(a) = align.filter(|a| base.set_vulkan_view_align(*a).is_ok()) {
        say(format!("view-align vulkan {a}: the Vulkan devices bind a view of a buffer at any multiple of {a} bytes"));
    }
    let mut topo = fit::fit(&m, &base);
    // The calibration graphs are single chains, which the cores do not
    // bound: the fit is the model without them, and the count (the
    // machine's) is for the graphs lowered later.
    topo.set_host_cores(
        std::thread::available_parallelism()
            .ok()
            .and_then(|n| u32::try_from(n.get()).ok()),
    );
    report(&m, &topo, say);
    if topo.in_host_memory(DeviceKind::Vulkan) {
        say("host-memory vulkan: the Vulkan adapter's memory is the host's (a CPU device or an integrated GPU)".into());
    }
    if topo.kernels_on_host_cores(DeviceKind::Vulkan) {
        say("host-kernels vulkan: the host's cores run the Vulkan adapter's kernels (a CPU device), so they count against the cores once per core".into());
    }
    // What is written must read back.
    Topology::parse(&topo.to_text()).map_err(|e| {
        Failure::input(format!(
            "calibration gave a figure a topology file cannot hold: {e}"
        ))
    })?;
    Ok(topo)
}

/// One pass: every calibration graph timed once.
fn measure_once(devices: &[Device], base: &Topology, effort: Effort) -> Result<Measured, Failure> {
    let (h0, h1) = (Device::cpu(0), Device::cpu(1));
    let gpu = |kind| devices.iter().copied().find(|d| d.kind == kind);
    let other = devices.iter().copied().find(|d| !d.is_cpu());
    let pair = |t: &dyn Fn(usize) -> String, devs: &[Device]| -> Result<[Timed; 2], Failure> {
        Ok([time(&t(0), devs, effort)?, time(&t(1), devs, effort)?])
    };
    let sweep = |t: &dyn Fn(usize) -> String, devs: &[Device]| -> Result<Vec<Timed>, Failure> {
        SIZES.iter().map(|&b| time(&t(b), devs, effort)).collect()
    };
    let chain = |s: usize| if s == 0 { 1 } else { CHAIN };
    let mut m = Measured {
        copies: pair(&|s| copy_chain(chain(s)), &[h0, h1])?,
        divs: pair(&|s| div_chain(chain(s)), &[h0])?,
        threaded_divs: match other {
            Some(o) => Some(pair(&|s| div_chain(chain(s)), &[h0, o])?),
            None => None,
        },
        fanout: match other {
            Some(o) => Some(time(&fanout(CHAIN), &[h0, h1, o], effort)?),
            None => None,
        },
        links: Vec::new(),
        adds: Vec::new(),
        wide_adds: Vec::new(),
        deferred: Vec::new(),
    };
    let mut ends = vec![(LinkClass::HostHost, h0, h1)];
    if let Some(v) = gpu(DeviceKind::Vulkan) {
        ends.push((LinkClass::HostVulkan, v, h0));
    }
    if let Some(c) = gpu(DeviceKind::Cuda) {
        ends.push((LinkClass::HostCuda, c, h0));
        let peer = devices
            .iter()
            .copied()
            .find(|d| d.kind == DeviceKind::Cuda && *d != c && base.has_peer(c.index, d.index));
        if let Some(p) = peer {
            ends.push((LinkClass::CudaPeer, c, p));
        }
    }
    // A copy between host arenas shares its source's buffer, so it is
    // timed with sharing off: the host-to-host link is a real memcpy's
    // figure (what a copied-out output, a layout copy and a run with
    // sharing off cost).
    let memcpy = exec::Options {
        share_host_copies: false,
        ..Default::default()
    };
    for (class, a, b) in ends {
        let t = if class == LinkClass::HostHost {
            let timed =
                |&bytes: &usize| time_with(&copy_graph(a, b, bytes), &[a, b], effort, memcpy);
            SIZES.iter().map(timed).collect::<Result<Vec<_>, _>>()?
        } else {
            sweep(&|bytes| copy_graph(a, b, bytes), &[a, b])?
        };
        m.links.push((class, a, b, t));
        if class == LinkClass::HostVulkan || class == LinkClass::HostCuda {
            m.deferred
                .push((class, time(&deferred_graph(a, BIG), &[a, h0], effort)?));
        }
    }
    let mut kinds: Vec<Device> = vec![h0];
    kinds.extend(
        DeviceKind::ALL
            .into_iter()
            .filter_map(|k| (k != DeviceKind::Cpu).then(|| gpu(k)).flatten()),
    );
    for d in kinds {
        m.adds
            .push((d.kind, sweep(&|bytes| add_graph(d, bytes), &[d])?));
        m.wide_adds
            .push((d.kind, time(&wide_add_graph(d, WIDE), &[d], effort)?));
    }
    Ok(m)
}

/// `m` and the other passes as one: every graph's time (and CPU time) the
/// median over the passes. Every pass times the same graphs in the same
/// order.
fn merge(mut m: Measured, others: Vec<Measured>) -> Measured {
    let med = |t: &mut Timed, of: Vec<&Timed>| {
        let mut us: Vec<f64> = of.iter().map(|o| o.us).chain([t.us]).collect();
        let mut cpu: Vec<f64> = of.iter().map(|o| o.cpu_us).chain([t.cpu_us]).collect();
        t.us = setup::median_us(&mut us);
        t.cpu_us = setup::median_us(&mut cpu);
    };
    for k in 0..2 {
        med(
            &mut m.copies[k],
            others.iter().map(|o| &o.copies[k]).collect(),
        );
        med(&mut m.divs[k], others.iter().map(|o| &o.divs[k]).collect());
        if let Some(d) = &mut m.threaded_divs {
            let of = others
                .iter()
                .filter_map(|o| o.threaded_divs.as_ref())
                .map(|o| &o[k]);
            med(&mut d[k], of.collect());
        }
    }
    if let Some(f) = &mut m.fanout {
        med(f, others.iter().filter_map(|o| o.fanout.as_ref()).collect());
    }
    for (i, (_, _, _, ts)) in m.links.iter_mut().enumerate() {
        for (j, t) in ts.iter_mut().enumerate() {
            med(
                t,
                others
                    .iter()
                    .filter_map(|o| o.links.get(i)?.3.get(j))
                    .collect(),
            );
        }
    }
    for (i, (_, ts)) in m.adds.iter_mut().enumerate() {
        for (j, t) in ts.iter_mut().enumerate() {
            med(
                t,
                others
                    .iter()
                    .filter_map(|o| o.adds.get(i)?.1.get(j))
                    .collect(),
            );
        }
    }
    med_each(&mut m.deferred, &others, |o| &o.deferred, &med);
    med_each(&mut m.wide_adds, &others, |o| &o.wide_adds, &med);
    m
}

/// [`merge`] for one list of keyed times: entry `i` of `mine` with entry
/// `i` of each of the `others`' list `of`.
fn med_each<K>(
    mine: &mut [(K, Timed)],
    others: &[Measured],
    of: impl Fn(&Measured) -> &[(K, Timed)],
    med: &impl Fn(&mut Timed, Vec<&Timed>),
) {
    for (i, (_, t)) in mine.iter_mut().enumerate() {
        med(
            t,
            others
                .iter()
                .filter_map(|o| Some(&of(o).get(i)?.1))
                .collect(),
        );
    }
}

/// One line per measurement and the figure it gave.
fn report(m: &Measured, t: &Topology, say: &mut dyn FnMut(String)) {
    let inline = t.runner(Runner::Inline);
    say(format!(
        "runner inline:   1 / {CHAIN} shared copies {:.1} / {:.1} us => step {:.2} us, run {:.2} us",
        m.copies[0].us, m.copies[1].us, inline.step_us, inline.run_us
    ));
    say(format!(
        "compute cpu:     1 / {CHAIN} divs {:.1} / {:.1} us => fixed {:.2} us",
        m.divs[0].us,
        m.divs[1].us,
        t.compute(DeviceKind::Cpu).fixed_us
    ));
    if let (Some(d), Some(f)) = (&m.threaded_divs, &m.fanout) {
        let th = t.runner(Runner::Threaded);
        say(format!(
            "runner threaded: 1 / {CHAIN} divs {:.1} / {:.1} us, {CHAIN} side by side {:.1} us => step {:.2} us, run {:.2} us, dispatch {:.2} us",
            d[0].us, d[1].us, f.us, th.step_us, th.run_us, th.dispatch_us
        ));
    }
    let times = |g: &[Timed]| {
        g.iter()
            .zip(SIZES)
            .map(|(t, b)| format!("{} {:.1}", crate::sizes::format_size(b), t.us))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let round = |c: Curve| c.map(|_, x| (x * 100.0).round() / 100.0);
    for (class, a, b, g) in &m.links {
        let l = t.link(*class);
        say(format!(
            "link {:<12} {a} -> {b}: {} us => bandwidth {} GB/s, latency {:.2} us",
            class.as_str(),
            times(g),
            round(l.bandwidth),
            l.latency_us
        ));
    }
    for (class, g) in &m.deferred {
        say(format!(
            "deferred {:<8} 4 MiB into an add on cpu:0 {:.1} us => {:.2} GB/s",
            class.as_str(),
            g.us,
            t.link(*class).deferred_gbps
        ));
    }
    for (kind, g) in &m.adds {
        let c = t.compute(*kind);
        say(format!(
            "reduce {kind:<8} add of 2 inputs: {} us => {} GB/s of input read, fixed {:.2} us",
            times(g),
            round(c.gbps),
            c.fixed_us
        ));
    }
    for (kind, g) in &m.wide_adds {
        let c = t.compute(*kind);
        say(format!(
            "reduce {kind:<8} add of 4 inputs: {} {:.1} us => each input past two costs {:.2} of one (wide)",
            crate::sizes::format_size(WIDE),
            g.us,
            c.wide
        ));
    }
}

/// `fuel-opt calibrate` options.
#[derive(clap::Args, Debug)]
pub struct CalibrateArgs {
    /// Devices to calibrate for, e.g. `cpu:0,vulkan:0` (default: cpu:0 and
    /// every Vulkan and CUDA device found). Indices and counts do not
    /// matter: the cache keys on what the devices are.
    #[arg(long)]
    devices: Option<String>,
    /// Timed runs per calibration graph.
    #[arg(long, default_value_t = 7)]
    iters: usize,
    /// Untimed runs first.
    #[arg(long, default_value_t = 2)]
    warmup: usize,
    /// Passes over every graph; each figure comes from the median pass.
    #[arg(long, default_value_t = 3)]
    passes: usize,
    /// Also write the figures as a topology file (for `--topology`).
    #[arg(long)]
    out: Option<std::path::PathBuf>,
}

/// `fuel-opt calibrate`: measures and writes the calibration cache.
pub fn calibrate(a: &CalibrateArgs) -> Result<(), Failure> {
    let found = setup::discover();
    let devices = setup::pick_devices(a.devices.as_deref(), 1, &found)?;
    // The ranges (`flags::BOUNDS`) keep this finite; say up front how much.
    outln!(
        "# calibrating [{}]: {} passes, each running every calibration graph {} times ({} untimed)",
        devices
            .iter()
            .map(Device::to_string)
            .collect::<Vec<_>>()
            .join(", "),
        a.passes,
        a.warmup + a.iters,
        a.warmup
    )?;
    let effort = Effort {
        iters: a.iters,
        warmup: a.warmup,
        passes: a.passes,
    };
    let topo = to_cache(&devices, effort, &mut |l| {
        let _ = outln!("{l}");
    })?;
    if let Some(out) = &a.out {
        write_topology(out, &devices, &topo)?;
        outln!("# wrote {} (read it back with --topology)", out.display())?;
    }
    Ok(())
}

/// Measures `devices` and writes the calibration cache; returns the
/// topology, whose source says it was calibrated.
pub fn to_cache(
    devices: &[Device],
    effort: Effort,
    say: &mut dyn FnMut(String),
) -> Result<Topology, Failure> {
    let topo = measure(devices, &Topology::default(), effort, say)?;
    let date = fuel_runtime::calibration::today();
    let path = fuel_runtime::calibration::write(devices, &topo, &date)
        .map_err(|e| Failure::input(e.to_string()))?;
    say(format!(
        "# wrote {}: lower-collectives uses it for these devices when no --topology is given",
        path.display()
    ));
    fuel_runtime::calibration::topology_for(devices).map_err(|e| Failure::input(e.to_string()))
}

/// `bench --calibrate`: measures and writes a topology file to `out`.
pub fn to_file(
    devices: &[Device],
    base: &Topology,
    out: &std::path::Path,
    effort: Effort,
) -> Result<(), Failure> {
    outln!(
        "# fuel-opt bench --calibrate over {} devices, medians of {}",
        devices.len(),
        effort.iters
    )?;
    let topo = measure(devices, base, effort, &mut |l| {
        let _ = outln!("{l}");
    })?;
    write_topology(out, devices, &topo)?;
    outln!("# wrote {} (read it back with --topology)", out.display())?;
    Ok(())
}

/// Writes `topo` as a topology file with a comment naming `devices`.
pub fn write_topology(
    out: &std::path::Path,
    devices: &[Device],
    topo: &Topology,
) -> Result<(), Failure> {
    if let Some(dir) = out.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .map_err(|e| Failure::input(format!("cannot create `{}`: {e}", dir.display())))?;
    }
    let text = format!(
        "# written by `fuel-opt calibrate` over [{}]\n{}",
        devices
            .iter()
            .map(|d| d.to_string())
            .collect::<Vec<_>>()
            .join(", "),
        topo.to_text()
    );
    std::fs::write(out, text)
        .map_err(|e| Failure::input(format!("cannot write `{}`: {e}", out.display())))
}

mod fit;
#[cfg(test)]
mod tests;
