//! `fuel-opt demo`: the README's main command. It finds devices, records an
//! all_reduce and a reduce_scatter + all_gather pair with `DeviceGroup`,
//! lowers them with `auto`, dumps text IR, DOT and SVG for every step, runs
//! the result on the real devices, checks it against the reference
//! interpreter, and prints a short report.

use crate::scenario::{self, Shape};
use crate::Failure;
use fuel_collective::lower::estimate_graph;
use fuel_graph_ext::dot::human_bytes;
use fuel_graph_ext::exec::{self, Tensor};
use fuel_graph_ext::interp::{deterministic_inputs, interpret};
use fuel_graph_ext::{DType, DeviceKind, ReduceOp, TensorType};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Instant;

/// `fuel-opt demo` options.
#[derive(clap::Args, Debug)]
pub struct DemoArgs {
    /// Devices to use, e.g. `cpu:0,cpu:1,vulkan:0` (default: 4 CPU devices
    /// plus every Vulkan and CUDA device found).
    #[arg(long)]
    devices: Option<String>,
    /// Elements per shard (rounded up to a multiple of the group size).
    #[arg(long, default_value_t = 1 << 18)]
    elements: usize,
    /// Element type.
    #[arg(long, default_value = "f32")]
    dtype: String,
    /// Reduce op: sum, prod, max, min or mean.
    #[arg(long, default_value = "sum")]
    op: String,
    /// Algorithm for lower-collectives: auto, star, hierarchical, ring, tree or driver.
    #[arg(long, default_value = "auto")]
    algorithm: String,
    /// Where to write the dumps.
    #[arg(long, default_value = "out/demo")]
    out: PathBuf,
    /// Timed runs after the first (the median is reported).
    #[arg(long, default_value_t = 5)]
    runs: usize,
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

    println!("== devices");
    let found = scenario::discover();
    for (d, what) in &found.available {
        println!("  {:<10} {what}", d.to_string());
    }
    for kind in [DeviceKind::Vulkan, DeviceKind::Cuda] {
        if !found.available.iter().any(|(d, _)| d.kind == kind) {
            let why = found
                .unavailable
                .iter()
                .find(|u| u.backend.eq_ignore_ascii_case(kind.as_str()));
            let reason = why.map_or("not found".to_string(), |u| u.reason.clone());
            println!(
                "  {:<10} none: {reason} — {}",
                kind.as_str(),
                hint_for(kind)
            );
        }
    }
    let devices = scenario::pick_devices(a.devices.as_deref(), 4, &found)?;
    let n = devices.len();
    let elements = a.elements.max(1).div_ceil(n) * n;
    let ty = TensorType::new(dtype, &[elements]);
    let names: Vec<String> = devices.iter().map(|d| d.to_string()).collect();
    println!(
        "  using [{}], {elements} x {dtype} per shard ({})",
        names.join(", "),
        human_bytes(ty.size_bytes())
    );

    println!("== graph: all_reduce.{op}, then reduce_scatter.{op} feeding all_gather");
    let g = scenario::build(&devices, &ty, op, Shape::AllReduceAndPair)?;
    let topo = Arc::new(fuel_graph_ext::Topology::default());
    std::fs::create_dir_all(&a.out)
        .map_err(|e| Failure::input(format!("cannot create {}: {e}", a.out.display())))?;
    let (lowered, decisions) = scenario::lower(&g, &a.algorithm, &topo, Some(a.out.clone()))?;
    println!(
        "  lowered with lower-collectives{{algorithm={}}}: chose {}",
        a.algorithm,
        scenario::chosen(&decisions)
    );
    println!(
        "  {} nodes before, {} after",
        g.node_count(),
        lowered.node_count()
    );

    let mut written = dumped_files(&a.out)?;
    let svgs = render_svgs(&written);
    match &svgs {
        Ok(list) => written.extend(list.iter().cloned()),
        Err(hint) => println!("  {hint}"),
    }

    println!("== run");
    let t0 = Instant::now();
    let exe = exec::compile(&lowered, &devices)
        .map_err(|e| Failure::input(format!("compile failed: {e}")))?;
    let compile_ms = t0.elapsed().as_secs_f64() * 1e3;
    let host_inputs = deterministic_inputs(&g);
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
    let measured_us = scenario::median_us(&mut times);
    let want = interpret(&g, &host_inputs).map_err(|e| Failure::input(e.to_string()))?;

    println!("== results (checked against the reference interpreter)");
    println!(
        "  {:<4} {:<12} {:<10} {:<8} digest",
        "out", "collective", "device", "check"
    );
    let mut bad = 0;
    for (k, ((t, w), dev)) in first
        .iter()
        .zip(&want)
        .zip(exe.output_devices())
        .enumerate()
    {
        let got = t.to_host();
        let verdict = match got.check_close(w) {
            Ok(()) => "ok".to_string(),
            Err(e) => {
                bad += 1;
                format!("WRONG: {e}")
            }
        };
        let what = if k < n { "all_reduce" } else { "all_gather" };
        println!(
            "  {k:<4} {what:<12} {:<10} {verdict:<8} {}",
            dev.to_string(),
            got.digest()
        );
    }

    println!("== bytes moved per link");
    // Shared host copies and host-to-Vulkan copies that run as views of
    // imported host memory both move nothing.
    let mut elided = exe.shared_copies();
    elided.extend(exe.imported_copies());
    let traffic = scenario::link_traffic(&lowered, &elided);
    let mut total = 0;
    for ((from, to), t) in &traffic {
        let shared = match t.shared {
            0 => String::new(),
            k if k == t.copies => " (shared, no bytes moved)".to_string(),
            k => format!(" ({k} shared, no bytes moved)"),
        };
        println!(
            "  {:<22} {:>10} in {} cop{}{shared}",
            format!("{from} -> {to}"),
            human_bytes(t.bytes),
            t.copies,
            if t.copies == 1 { "y" } else { "ies" }
        );
        total += t.bytes;
    }
    println!("  {:<22} {:>10}", "total", human_bytes(total));

    let est = estimate_graph(&lowered, &topo);
    println!("== time");
    println!("  compile            {compile_ms:>10.2} ms");
    println!("  estimated (model)  {:>10.1} us", est.total_us());
    println!("  measured (median of {}) {:>6.1} us", a.runs, measured_us);

    println!("== files in {}", a.out.display());
    for f in &written {
        println!("  {}", f.display());
    }
    if bad > 0 {
        return Err(Failure::mismatch(format!(
            "{bad} result(s) differ from the reference interpreter"
        )));
    }
    println!(
        "all {} results match the reference interpreter",
        first.len()
    );
    Ok(())
}

fn dumped_files(dir: &Path) -> Result<Vec<PathBuf>, Failure> {
    let rd = std::fs::read_dir(dir)
        .map_err(|e| Failure::input(format!("cannot list {}: {e}", dir.display())))?;
    let mut files: Vec<PathBuf> = rd
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "fir" || x == "dot"))
        .collect();
    files.sort();
    Ok(files)
}

/// Renders every `.dot` to `.svg` with graphviz, or returns a one-line hint.
fn render_svgs(files: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
    let hint = "SVG: graphviz `dot` not found; `apt-get install graphviz` renders the .dot files";
    if Command::new("dot").arg("-V").output().is_err() {
        return Err(hint.into());
    }
    let mut out = Vec::new();
    for f in files
        .iter()
        .filter(|p| p.extension().is_some_and(|x| x == "dot"))
    {
        let svg = f.with_extension("svg");
        let status = Command::new("dot")
            .arg("-Tsvg")
            .arg(f)
            .arg("-o")
            .arg(&svg)
            .status();
        match status {
            Ok(s) if s.success() => out.push(svg),
            Ok(s) => return Err(format!("SVG: `dot -Tsvg {}` failed ({s})", f.display())),
            Err(e) => return Err(format!("SVG: cannot run dot: {e}")),
        }
    }
    Ok(out)
}
