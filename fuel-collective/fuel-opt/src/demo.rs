//! `fuel-opt demo`: the README's main command. It finds devices, records an
//! all_reduce and a reduce_scatter + all_gather pair with `DeviceGroup`,
//! lowers them with `auto`, dumps text IR, DOT and SVG for every step, runs
//! the result on the real devices, checks it against the reference
//! interpreter, and prints a short report.
//!
//! `--out DIR` holds only files the demo wrote ([`OutDir`]): a DIR with
//! anything else in it is refused, symlinks are never followed, and the
//! report lists only this run's files.

use crate::outdir::OutDir;
use crate::outln;
use crate::setup::{self, Shape};
use crate::Failure;
use fuel_collective::lower::estimate_run;
use fuel_graph_ext::dot::human_bytes;
use fuel_graph_ext::dtype::MAX_TENSOR_BYTES;
use fuel_graph_ext::interp::{interpret, try_deterministic_inputs};
use fuel_graph_ext::topology::Source;
use fuel_graph_ext::Tensor;
use fuel_graph_ext::{DType, DeviceKind, ReduceOp, TensorType};
use fuel_graph_ext::{Device, Topology};
use fuel_runtime::calibration;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::time::Instant;

/// The pass viewer's file in the demo's folder.
const VIEWER: &str = "index.html";

/// `fuel-opt demo` options.
#[derive(clap::Args, Debug)]
pub struct DemoArgs {
    /// Devices to use, e.g. `cpu:0,cpu:1,vulkan:0` (default: 4 CPU devices
    /// plus every Vulkan and CUDA device found).
    #[arg(long)]
    pub(crate) devices: Option<String>,
    /// Elements per shard (rounded up to a multiple of the group size).
    #[arg(long, default_value_t = 1 << 18)]
    pub(crate) elements: usize,
    /// Element type.
    #[arg(long, default_value = "f32")]
    pub(crate) dtype: String,
    /// Reduce op: sum, prod, max, min or mean.
    #[arg(long, default_value = "sum")]
    pub(crate) op: String,
    /// Algorithm for lower-collectives: auto, star, hierarchical, ring, tree, driver, pairwise or split.
    #[arg(long, default_value = "auto")]
    algorithm: String,
    /// Where to write the dumps.
    #[arg(long, default_value = "out/demo")]
    pub(crate) out: PathBuf,
    /// Timed runs after the first (the median is reported).
    #[arg(long, default_value_t = 20)]
    pub(crate) runs: usize,
    /// Across MPI processes: `mpirun -n P fuel-opt demo --world` (feature `mpi`; see `world_run.rs`).
    #[arg(long)]
    pub(crate) world: bool,
    /// With --world: seconds a rank waits for the others (to start, to
    /// agree, for each run) before every rank ends with an error; default 30.
    #[arg(long, value_name = "SECONDS")]
    pub(crate) world_timeout: Option<usize>,
}

fn hint_for(kind: DeviceKind) -> &'static str {
    match kind {
        DeviceKind::Vulkan => {
            "`apt-get install mesa-vulkan-drivers libvulkan1` gives a software device (lavapipe)"
        }
        DeviceKind::Cuda => {
            "install the NVIDIA driver (libcuda.so) on a machine with an NVIDIA GPU"
        }
        DeviceKind::Cpu => "",
    }
}

/// Runs the demo.
pub fn demo(a: &DemoArgs) -> Result<(), Failure> {
    let dtype: DType = a.dtype.parse().map_err(Failure::input)?;
    let op: ReduceOp = a.op.parse().map_err(Failure::input)?;

    let (devices, ty) = report_devices(a, dtype)?;
    let n = devices.len();

    outln!("== graph: all_reduce.{op}, then reduce_scatter.{op} feeding all_gather")?;
    let g = setup::build(&devices, &ty, op, Shape::AllReduceAndPair)?;
    let topo = Arc::new(costs(&devices)?);
    // The pipeline is checked (an unknown algorithm, say) before the output
    // directory is looked at, so a bad option is reported as itself.
    let pipeline = setup::pipeline(&a.algorithm);
    let passes = setup::pass_names(&pipeline, &topo)?;
    let out = prepare_out(a, &passes)?;
    let (lowered, decisions, dumped) =
        setup::lower(&g, &pipeline, &topo, Some(out.path().to_path_buf()))?;
    report_lowering(a, &g, &lowered, &decisions)?;

    // The pass viewer records the same (deterministic) pipeline once more,
    // step by step; the run below adds its timeline.
    let (_, mut viewer) = fuel_collective::viewer::record(&g, &pipeline, topo.clone())
        .map_err(|e| Failure::input(e.to_string()))?;
    let mut written = drop_unchanged(dumped)?;
    match render_svgs(&out, &written) {
        Ok(list) => written.extend(list),
        Err(hint) => outln!("  {hint}")?,
    }
    written.sort();

    outln!("== run")?;
    let t0 = Instant::now();
    let topology = fuel_graph_ext::Topology::default();
    let exe = crate::run::compiler(&lowered, &devices, &topology, Default::default())?
        .compile()
        .map_err(|e| Failure::input(format!("compile failed: {e}")))?;
    let compile_ms = t0.elapsed().as_secs_f64() * 1e3;
    let host_inputs = try_deterministic_inputs(&g).map_err(|e| Failure::input(e.to_string()))?;
    let inputs: BTreeMap<String, Tensor> = host_inputs
        .iter()
        .map(|(k, v)| (k.clone(), Tensor::from_host(v)))
        .collect();
    let first = exe
        .run(&inputs)
        .map_err(|e| Failure::input(format!("run failed: {e}")))?;
    let mut times = Vec::with_capacity(a.runs);
    for _ in 0..a.runs {
        let t = Instant::now();
        exe.run(&inputs)
            .map_err(|e| Failure::input(format!("run failed: {e}")))?;
        times.push(t.elapsed().as_secs_f64() * 1e6);
    }
    let measured_us = setup::median_us(&mut times);
    let source = format!(
        "one more run of the demo's executable on {n} devices, after the {} timed",
        a.runs
    );
    let (caught, timeline) =
        crate::timeline::capture(&lowered, &topo, &source, || exe.run(&inputs));
    caught.map_err(|e| Failure::input(format!("run failed: {e}")))?;
    let want = interpret(&g, &host_inputs).map_err(|e| Failure::input(e.to_string()))?;

    outln!(
        "== inputs (one per rank, deterministic: the README's `--interpret` gives the formula)"
    )?;
    for (name, t) in &host_inputs {
        outln!("  {name:<10} {}", t.digest())?;
    }
    let bad = report_results(&first, &want, &exe.output_devices(), n)?;

    if first.len() > n {
        outln!(
            "  the all_gather rows equal the all_reduce rows: each rank's reduce_scatter slice is"
        )?;
        outln!(
            "  its part of the same sum, and all_gather joins the slices back into the whole sum"
        )?;
    }
    report_links(&exe, &lowered)?;

    let est = estimate_run(&lowered, &topo)
        .map_err(|e| Failure::input(format!("pricing the lowered demo: {e}")))?;
    outln!("== time")?;
    outln!("  compile            {compile_ms:>10.2} ms")?;
    outln!("  estimated (model)  {:>10.1} us", est.total_us())?;
    outln!("  measured (median of {}) {:>6.1} us", a.runs, measured_us)?;

    viewer.title = format!("fuel-opt demo: {} devices", devices.len());
    viewer.timeline = Some(timeline);
    written.push(out.write(VIEWER, viewer.to_html().as_bytes())?);
    written.sort();
    outln!("== files in {}", a.out.display())?;
    for f in &written {
        outln!("  {}", f.display())?;
    }
    if bad > 0 {
        return Err(Failure::mismatch(format!(
            "{bad} result(s) differ from the reference interpreter"
        )));
    }
    outln!(
        "all {} results match the reference interpreter",
        first.len()
    )?;
    Ok(())
}

/// The demo's output directory, checked to hold nothing but what the demo
/// writes: a text IR, DOT and SVG file per pass (`passes`) and the viewer.
fn prepare_out(a: &DemoArgs, passes: &[&str]) -> Result<OutDir, Failure> {
    let out = OutDir::prepare(&a.out)?;
    let mut names = Vec::new();
    for (i, pass) in std::iter::once(&"input").chain(passes).enumerate() {
        for ext in ["fir", "dot", "svg"] {
            names.push(format!("{i:02}-{pass}.{ext}"));
        }
    }
    names.push(VIEWER.to_string());
    out.will_write(names.iter().map(String::as_str))?;
    Ok(out)
}

/// What the lowering chose, the graph's size before and after, and what a
/// pass merged across collectives (cse's notes: one collective's reduction
/// now serves another).
fn report_lowering(
    a: &DemoArgs,
    g: &fuel_graph_ext::Graph,
    lowered: &fuel_graph_ext::Graph,
    decisions: &[fuel_collective::Decision],
) -> Result<(), Failure> {
    outln!(
        "  lowered with lower-collectives{{algorithm={}}}: chose {}",
        a.algorithm,
        setup::chosen(decisions)
    )?;
    outln!(
        "  {} nodes before, {} after",
        g.node_count(),
        lowered.node_count()
    )?;
    for note in lowered.notes().iter().filter(|n| n.starts_with("cse: ")) {
        outln!("  {note}")?;
    }
    Ok(())
}

/// The `== devices` section: what this machine can open (and why not, for
/// each GPU kind it cannot), the devices picked and the shard type.
fn report_devices(a: &DemoArgs, dtype: DType) -> Result<(Vec<Device>, TensorType), Failure> {
    outln!("== devices")?;
    let found = setup::discover();
    for (d, what) in &found.available {
        outln!("  {:<10} {what}", d.to_string())?;
    }
    for kind in [DeviceKind::Vulkan, DeviceKind::Cuda] {
        if !found.available.iter().any(|(d, _)| d.kind == kind) {
            let why = found
                .unavailable
                .iter()
                .find(|u| u.backend.eq_ignore_ascii_case(kind.as_str()));
            let reason = why.map_or("not found".to_string(), |u| u.reason.clone());
            outln!(
                "  {:<10} none: {reason} — {}",
                kind.as_str(),
                hint_for(kind)
            )?;
        }
    }
    let devices = setup::pick_devices(a.devices.as_deref(), 4, &found)?;
    let n = devices.len();
    let ty = shard_type(a.elements, dtype, n)?;
    let elements = ty.num_elements();
    let names: Vec<String> = devices.iter().map(|d| d.to_string()).collect();
    outln!(
        "  using [{}], {elements} x {dtype} per shard ({})",
        names.join(", "),
        human_bytes(ty.size_bytes())
    )?;
    Ok((devices, ty))
}

/// The `== results` table: each output against the interpreter's, on its
/// device; returns how many differ.
fn report_results(
    first: &[Tensor],
    want: &[fuel_graph_ext::interp::HostTensor],
    output_devices: &[Device],
    n: usize,
) -> Result<usize, Failure> {
    outln!("== results (checked against the reference interpreter)")?;
    outln!(
        "  {:<4} {:<12} {:<10} {:<8} digest",
        "out",
        "collective",
        "device",
        "check"
    )?;
    let mut bad = 0;
    for (k, ((t, w), dev)) in first.iter().zip(want).zip(output_devices).enumerate() {
        let got = t.to_host();
        let verdict = match got.check_same(w) {
            Ok(()) => "ok".to_string(),
            Err(e) => {
                bad += 1;
                format!("WRONG: {e}")
            }
        };
        let what = if k < n { "all_reduce" } else { "all_gather" };
        outln!(
            "  {k:<4} {what:<12} {:<10} {verdict:<8} {}",
            dev.to_string(),
            got.digest()
        )?;
    }
    Ok(bad)
}

/// The `== bytes per link` table: what each device pair's copies move,
/// and which of them move nothing (shared or imported host buffers).
fn report_links(
    exe: &fuel_runtime::exec::Executable,
    lowered: &fuel_graph_ext::Graph,
) -> Result<(), Failure> {
    outln!("== bytes per link (a shared copy reads its source's buffer: no bytes move)")?;
    // Shared host copies and host-to-Vulkan copies that run as views of
    // imported host memory both move nothing.
    let mut elided = exe.shared_copies();
    elided.extend(exe.imported_copies());
    let traffic = setup::link_traffic(lowered, &elided);
    let mut total: usize = 0;
    for ((from, to), t) in &traffic {
        let all = t.bytes.saturating_add(t.shared_bytes);
        let copies = format!(
            "{} cop{}",
            t.copies,
            if t.copies == 1 { "y" } else { "ies" }
        );
        let shared = match t.shared {
            0 => String::new(),
            k if k == t.copies => ", all shared without copying".to_string(),
            k => format!(
                ", of which {} ({k} cop{}) shared without copying",
                human_bytes(t.shared_bytes),
                if k == 1 { "y" } else { "ies" }
            ),
        };
        outln!(
            "  {:<22} {:>10} in {copies}{shared}",
            format!("{from} -> {to}"),
            human_bytes(all),
        )?;
        total = total.saturating_add(t.bytes);
    }
    outln!("  {:<22} {:>10} moved", "total", human_bytes(total))?;
    Ok(())
}

/// The type of one shard: `elements` rounded up to a multiple of the
/// group size `n`, refused when it cannot be addressed (the message says
/// how many elements fit).
fn shard_type(elements: usize, dtype: DType, n: usize) -> Result<TensorType, Failure> {
    let max = MAX_TENSOR_BYTES / dtype.size_bytes() / n * n;
    let rounded = elements.max(1).div_ceil(n).checked_mul(n);
    match rounded {
        Some(e) if e <= max => Ok(TensorType::new(dtype, &[e])),
        _ => Err(Failure::input(format!(
            "--elements {elements}: that many {dtype} elements per shard take more than {MAX_TENSOR_BYTES} bytes, the most one tensor can address; give at most {max} (and what the devices hold: compile says)"
        ))),
    }
}

/// The cost figures for `devices`: this machine's calibration cache, made
/// on the first run (a few seconds, with a progress line), or the
/// defaults where there is no cache folder.
fn costs(devices: &[Device]) -> Result<Topology, Failure> {
    let topo = fuel_runtime::calibration::topology_for(devices)
        .map_err(|e| Failure::input(e.to_string()))?;
    let Some((path, _)) = calibration::cache_file(devices) else {
        outln!("== costs: {}", topo.source())?;
        return Ok(topo);
    };
    if *topo.source() != Source::Defaults {
        outln!("== costs: {} ({})", topo.source(), path.display())?;
        return Ok(topo);
    }
    outln!(
        "== costs: calibrating these devices once for the cost model (`{}` redoes it)",
        calibration::command(devices)
    )?;
    let effort = crate::calibrate::Effort {
        iters: 3,
        warmup: 1,
        passes: 3,
    };
    let started = Instant::now();
    let mut said = Ok(());
    let topo = crate::calibrate::to_cache(devices, effort, &mut |line| {
        if said.is_ok() {
            said = outln!("  {line}");
        }
    })?;
    said?;
    outln!(
        "  done in {:.1} s: {}",
        started.elapsed().as_secs_f64(),
        topo.source()
    )?;
    Ok(topo)
}

/// Drops the dump of every pass that changed nothing (its `.fir` is the
/// step before it, byte for byte, and so is its `.dot`), saying "no
/// change" for it instead, and returns the files kept.
fn drop_unchanged(mut dumped: Vec<PathBuf>) -> Result<Vec<PathBuf>, Failure> {
    dumped.sort();
    let mut previous: Option<String> = None;
    let mut dropped: Vec<PathBuf> = Vec::new();
    for fir in dumped
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "fir"))
    {
        let text = std::fs::read_to_string(fir)
            .map_err(|e| Failure::input(format!("cannot read {}: {e}", fir.display())))?;
        if previous.as_deref() == Some(text.as_str()) {
            let dot = fir.with_extension("dot");
            for f in [fir, &dot] {
                std::fs::remove_file(f)
                    .map_err(|e| Failure::input(format!("cannot remove {}: {e}", f.display())))?;
                dropped.push(f.clone());
            }
            let step = fir
                .file_stem()
                .map_or(String::new(), |s| s.to_string_lossy().into_owned());
            outln!("  {step}: no change (no file written)")?;
        }
        previous = Some(text);
    }
    dumped.retain(|p| !dropped.contains(p));
    Ok(dumped)
}

/// Renders each dumped `.dot` to an `.svg` beside it with graphviz (its
/// output read from a pipe and written by [`OutDir`], so graphviz opens no
/// path in the directory), or returns a one-line hint.
fn render_svgs(out: &OutDir, files: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
    let hint = "SVG: graphviz `dot` not found; `apt-get install graphviz` renders the .dot files";
    if Command::new("dot").arg("-V").output().is_err() {
        return Err(hint.into());
    }
    let mut written = Vec::new();
    for f in files
        .iter()
        .filter(|p| p.extension().is_some_and(|x| x == "dot"))
    {
        let Some(name) = f
            .with_extension("svg")
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
        else {
            continue;
        };
        let run = Command::new("dot").arg("-Tsvg").arg(f).output();
        match run {
            Ok(o) if o.status.success() => {
                written.push(out.write(&name, &o.stdout).map_err(|e| e.message)?);
            }
            Ok(o) => {
                return Err(format!(
                    "SVG: `dot -Tsvg {}` failed ({})",
                    f.display(),
                    o.status
                ))
            }
            Err(e) => return Err(format!("SVG: cannot run dot: {e}")),
        }
    }
    Ok(written)
}
