//! `fuel-opt bench`: collective benchmarks in the nccl-tests format.
//!
//! For each size (bytes per rank) it records the collective of
//! `--collective` (all_reduce by default; `collectives.rs` has the others)
//! with `DeviceGroup`, lowers it, compiles it once, and times
//! `Executable::run_into` into one reused output vector (median over
//! `--iters` after `--warmup`). `algbw` is the collective's data size (the
//! bytes per rank; all_gather's gathered result) over the median time, and
//! `busbw` is `algbw` times nccl-tests' factor (`2(n-1)/n` for all_reduce).
//! `#wrong` counts elements that differ from the reference interpreter in
//! the last run.
//!
//! In the same run it measures the host's own bound for the same data
//! movement (for all_reduce one n-ary add over the n shards plus n-1
//! memcpys of the result), done with plain loops on host memory (the
//! faster of one thread and the CPU kernels' own rayon pool). The add works
//! on integers of the element's width, because the bound is about memory
//! traffic, not arithmetic. `ratio = algbw / bound` says how close to that
//! limit the collective runs. `model_bound_us` is the cost model's lower
//! bound on any schedule of the lowered collectives
//! (`fuel_collective::cost::bound`), each one's summed.
//!
//! For groups with Vulkan devices the bound adds
//! each Vulkan device's own download and upload of the bytes per rank
//! ([`staging_bound_us`]): the staging-copy bound. It calls the backend's
//! `download`/`upload`, so it follows whatever path the backend takes (a
//! memcpy through mapped storage buffers where the device allows it, the
//! staging buffer otherwise; the header names it): when transfers get
//! faster, the bound gets faster with them.

use crate::bench::collectives::Collective;
use crate::outln;

pub mod collectives;
pub mod eager_bench;
mod host_bound;
pub mod many;
pub mod plot;
mod step_ddp;
pub mod validate;

use crate::setup::{self, Shape};
use crate::sizes::{format_size, parse_sizes};
use crate::Failure;
use fuel_graph_ext::interp::{interpret, try_deterministic_inputs};
use fuel_graph_ext::{DType, ReduceOp, TensorType, Topology};
use fuel_runtime::exec::{self, Tensor};
use host_bound::vulkan_transfer_path;
pub use host_bound::{host_moves_us, staging_bound_us};
use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::sync::Arc;
use std::time::Instant;

/// `fuel-opt bench` options.
#[derive(clap::Args, Debug)]
pub struct BenchArgs {
    /// Devices, e.g. `cpu:0,cpu:1,cpu:2,cpu:3` (the default).
    #[arg(long, default_value = "cpu:0,cpu:1,cpu:2,cpu:3")]
    devices: String,
    /// Reduce op: sum, prod, max, min or mean.
    #[arg(long, default_value = "sum")]
    op: String,
    /// Element type.
    #[arg(long, default_value = "f32")]
    dtype: String,
    /// Algorithm: auto, star, hierarchical, ring, tree, driver, pairwise or split.
    #[arg(long, default_value = "auto")]
    algorithm: String,
    /// Bytes per rank: a comma list (`64K,1M`) or a doubling range (`4K..64M`).
    #[arg(long, default_value = "4K..16M")]
    sizes: String,
    /// Timed iterations per size.
    #[arg(long, default_value_t = 20)]
    iters: usize,
    /// Untimed iterations before timing.
    #[arg(long, default_value_t = 3)]
    warmup: usize,
    /// Print CSV instead of the table.
    #[arg(long)]
    csv: bool,
    /// A topology file for the cost model (e.g. from `bench --calibrate`).
    #[arg(long)]
    topology: Option<std::path::PathBuf>,
    /// Measure link bandwidth/latency and reduce throughput among the
    /// devices with the executor, and write a topology file (`--out`).
    #[arg(long)]
    calibrate: bool,
    /// Where `--calibrate` writes the topology.
    #[arg(long, default_value = "out/topology.topo")]
    out: std::path::PathBuf,
    /// Check the cost model: run every fixed algorithm at every size, print
    /// each one's estimate beside its measured median, mark `auto`'s pick
    /// and the measured best, and summarise (see `validate.rs`).
    #[arg(long)]
    validate: bool,
    /// The collective to time: all_reduce, all_gather, reduce_scatter,
    /// broadcast or all_to_all (`--count`, `--combine` and `--transport`
    /// apply to all_reduce only).
    #[arg(long, value_enum, default_value = "all_reduce")]
    collective: crate::bench::collectives::Collective,
    /// Measure every fixed algorithm (star, hierarchical, ring, tree) and
    /// draw bus bandwidth against size, log axes, into this SVG file.
    #[arg(long, value_name = "FILE.svg")]
    plot: Option<std::path::PathBuf>,
    /// Independent all_reduces of the given size per iteration (a training
    /// step's gradients); sizes and bandwidths count all of them.
    #[arg(long, default_value_t = 1)]
    count: usize,
    /// With `combine-collectives` (on, the default pipeline) or without.
    #[arg(long, value_enum, default_value = "on")]
    combine: crate::bench::many::Combine,
    /// `combine-collectives{threshold=..}` (bytes per rank, e.g. 8M)
    /// instead of the cost model's threshold.
    #[arg(long)]
    combine_threshold: Option<String>,
    /// `lower-collectives{transport=..}`: f32 crosses devices as bf16, f16,
    /// bf16-staged or f16-staged (off by default).
    #[arg(long)]
    transport: Option<String>,
    /// `lower-collectives{chunks=..}`: values relayed through the staging
    /// CPU travel in pieces (auto or 1..64; off by default).
    #[arg(long)]
    chunks: Option<String>,
    /// Copy every slice into a buffer of its own instead of running the
    /// slices of one contiguous run as views of their operand
    /// (`exec::Options::view_slices`), to measure what views save.
    #[arg(long)]
    copy_slices: bool,
    /// The eager all_reduce (`DeviceGroup::all_reduce_now`, and
    /// `all_reduce_lent` on one `Vec<f32>` per rank) beside the plain loop
    /// a user would write, f32, timed in turns in one run.
    #[arg(long)]
    eager: bool,
    /// A training step instead of one collective: `ddp` times a
    /// data-parallel backward pass (`--layers` matmul gradients per device,
    /// each all_reduced, then an update) after the compute, FIFO and as
    /// `schedule-collectives` orders it (see `step_ddp.rs`).
    #[arg(long, value_enum)]
    step: Option<StepKind>,
    /// With --step: layers of the step.
    #[arg(long, default_value_t = 4)]
    layers: usize,
    /// With --step: each gradient is f32[width, width].
    #[arg(long, default_value_t = 512)]
    width: usize,
    /// With --step: rows of each device's batch (the matmul's inner size).
    #[arg(long, default_value_t = 256)]
    batch: usize,
    /// Across MPI processes (`mpirun -n P`, feature `mpi`): a world
    /// all_reduce over P x the local `--devices`, beside raw MPI_Allreduce.
    #[arg(long)]
    world: bool,
    /// With --world: seconds a rank waits for the others (to start, to
    /// agree, for each size) before every rank ends with an error; default 30.
    #[arg(long, value_name = "SECONDS")]
    world_timeout: Option<usize>,
}

mod world_bench;

/// The training steps `--step` times.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum StepKind {
    /// A data-parallel backward pass.
    Ddp,
}

/// The algorithms `--plot` draws, one line each.
const PLOTTED: [&str; 4] = ["star", "hierarchical", "ring", "tree"];

/// One measured row.
#[derive(Clone, Debug)]
pub struct Row {
    /// Bytes per rank.
    pub size: usize,
    /// Elements per rank.
    pub count: usize,
    /// Algorithm actually used.
    pub algorithm: String,
    /// Median microseconds per all_reduce.
    pub time_us: f64,
    /// Bytes per rank / time, GB/s.
    pub algbw: f64,
    /// algbw * 2(n-1)/n.
    pub busbw: f64,
    /// Wrong elements.
    pub wrong: usize,
    /// The host bound, GB/s.
    pub bound: f64,
    /// The cost model's lower bound on any schedule
    /// (`fuel_collective::cost::bound`), microseconds: each lowered
    /// collective's, summed.
    pub model_bound_us: f64,
}

/// Runs the benchmark.
pub fn bench(a: &BenchArgs) -> Result<(), Failure> {
    if a.collective != Collective::AllReduce
        && (a.count != 1 || a.transport.is_some() || a.validate || a.calibrate || a.world)
    {
        return Err(Failure::input(format!(
            "--collective {} times one collective as recorded: --count, --transport, --validate, --calibrate and --world go with all_reduce only; leave them out or use --collective all_reduce",
            a.collective.name()
        )));
    }
    if a.world {
        return world_bench::bench(a);
    }
    let dtype: DType = a.dtype.parse().map_err(Failure::input)?;
    let op: ReduceOp = a.op.parse().map_err(Failure::input)?;
    let sizes = parse_sizes(&a.sizes).map_err(|e| Failure::input(format!("--sizes: {e}")))?;
    let found = setup::discover();
    let devices = setup::pick_devices(Some(&a.devices), 0, &found)?;
    if a.calibrate {
        return calibrate(a, &devices);
    }
    if a.eager {
        return eager_bench::bench(&devices, op, &sizes, a.iters, a.warmup);
    }
    let topo = Arc::new(crate::load_topology(
        a.topology.as_ref(),
        &devices,
        crate::input::DEFAULT_MAX_INPUT,
    )?);
    if a.step.is_some() {
        let shape = step_ddp::Shape {
            layers: a.layers,
            width: a.width,
            batch: a.batch,
        };
        return step_ddp::bench(&devices, shape, &topo, a.iters, a.warmup);
    }
    if a.validate {
        let sweep = crate::bench::validate::Sweep {
            devices: &devices,
            dtype,
            op,
            sizes: &sizes,
            iters: a.iters,
            warmup: a.warmup,
            topo: &topo,
        };
        return crate::bench::validate::validate(&sweep, a.csv);
    }
    print_header(a, &devices)?;
    let rows = sweep(a, &devices, (dtype, op), &sizes, &topo)?;
    if !a.csv {
        print_footer(&rows)?;
    }
    if let Some(path) = &a.plot {
        let names: Vec<String> = devices.iter().map(|d| d.to_string()).collect();
        let title = format!(
            "{}.{op} of {dtype} over [{}]",
            a.collective.name(),
            names.join(", ")
        );
        let drawn = crate::bench::plot::draw(path, &rows, devices.len(), &title)?;
        if !a.csv {
            match drawn {
                true => outln!("# plot: {}", path.display())?,
                false => outln!("# plot: nothing drawn, every bus bandwidth is 0")?,
            }
        }
    }
    Ok(())
}

/// `bench --calibrate`: times the calibration graphs among `devices` and
/// writes a topology file.
fn calibrate(a: &BenchArgs, devices: &[fuel_graph_ext::Device]) -> Result<(), Failure> {
    let base = crate::file_topology(a.topology.as_ref(), devices)?;
    let effort = crate::calibrate::Effort {
        iters: a.iters,
        warmup: a.warmup,
        passes: 3,
    };
    crate::calibrate::to_file(devices, &base, &a.out, effort)
}

/// The table's header: the CSV column line, or the comment lines (what
/// runs, what the bound is and what `ratio` means) and the column names.
fn print_header(a: &BenchArgs, devices: &[fuel_graph_ext::Device]) -> Result<(), Failure> {
    if a.csv {
        outln!(
            "size,count,type,redop,algorithm,time_us,algbw_gbps,busbw_gbps,wrong,bound_gbps,ratio,model_bound_us"
        )?;
        return Ok(());
    }
    let names: Vec<String> = devices.iter().map(|d| d.to_string()).collect();
    outln!(
        "# fuel-opt bench: {} {} over [{}], {} iters after {} warmup, median times, combine {:?}, slices {}",
        a.count,
        a.collective.name(),
        names.join(", "),
        a.iters,
        a.warmup,
        a.combine,
        if a.copy_slices { "copied" } else { "viewed where contiguous" }
    )?;
    outln!(
        "# bound: {}{}, same run",
        bound_words(a.collective, devices.len()),
        match vulkan_transfer_path(devices) {
            Some(path) => format!(" + each Vulkan device's own download and upload ({path})"),
            None => String::new(),
        }
    )?;
    outln!("# ratio: algbw / bound(GB/s), how close the collective runs to the bound's plain loops; above 1 it moved fewer bytes than they do (a copy between host arenas that shares its buffer moves none)")?;
    outln!(
        "#{:>11} {:>10} {:>6} {:>6} {:>14} {:>10} {:>12} {:>12} {:>7} {:>12} {:>6} {:>14}",
        "size",
        "count",
        "type",
        "redop",
        "algorithm",
        "time(us)",
        "algbw(GB/s)",
        "busbw(GB/s)",
        "#wrong",
        "bound(GB/s)",
        "ratio",
        "model_bound_us"
    )?;
    Ok(())
}

/// nccl-tests' closing lines: the wrong elements over every row and the
/// average bus bandwidth.
fn print_footer(rows: &[Row]) -> Result<(), Failure> {
    let wrong: usize = rows.iter().map(|r| r.wrong).sum();
    let avg = rows.iter().map(|r| r.busbw).sum::<f64>() / rows.len().max(1) as f64;
    outln!(
        "# Out of bounds values : {wrong} {}",
        if wrong == 0 { "OK" } else { "FAILED" }
    )?;
    outln!("# Avg bus bandwidth    : {avg:.3} ")?;
    Ok(())
}

/// Measures and prints every size of the sweep (every plotted algorithm
/// with `--plot`), with a progress bar on a terminal; returns the rows.
fn sweep(
    a: &BenchArgs,
    devices: &[fuel_graph_ext::Device],
    (dtype, op): (DType, ReduceOp),
    sizes: &[usize],
    topo: &Arc<Topology>,
) -> Result<Vec<Row>, Failure> {
    let progress = std::io::stderr().is_terminal();
    let mut rows: Vec<Row> = Vec::new();
    for (i, &size) in sizes.iter().enumerate() {
        if progress {
            let done = i * 30 / sizes.len();
            crate::output::err(format_args!(
                "\r[{}{}] {}/{} sizes, now {:<6}",
                "#".repeat(done),
                ".".repeat(30 - done),
                i,
                sizes.len(),
                format_size(size)
            ));
            let _ = std::io::stderr().flush();
        }
        let algorithms: Vec<&str> = match &a.plot {
            Some(_) => PLOTTED.to_vec(),
            None => vec![a.algorithm.as_str()],
        };
        for algorithm in algorithms {
            let row = measure(
                devices,
                dtype,
                op,
                algorithm,
                size,
                a.iters,
                a.warmup,
                topo,
                (a.count, a.combine, a.combine_threshold.as_deref()),
                (a.transport.as_deref(), a.chunks.as_deref(), a.copy_slices),
                a.collective,
            )?;
            print_row(a.csv, (dtype, op), &row)?;
            rows.push(row);
        }
    }
    if progress {
        crate::output::err(format_args!(
            "\r[{}] {}/{} sizes{:<12}\n",
            "#".repeat(30),
            sizes.len(),
            sizes.len(),
            ""
        ));
    }
    Ok(rows)
}

/// One row of the table (or of the CSV).
fn print_row(csv: bool, (dtype, op): (DType, ReduceOp), row: &Row) -> Result<(), Failure> {
    let Row {
        size,
        count,
        algorithm,
        time_us,
        algbw,
        busbw,
        wrong,
        bound,
        model_bound_us,
    } = row;
    let ratio = if *bound > 0.0 { algbw / bound } else { 0.0 };
    let (dtype, op) = (dtype.as_str(), op.as_str());
    if csv {
        outln!(
            "{size},{count},{dtype},{op},{algorithm},{time_us:.2},{algbw:.4},{busbw:.4},{wrong},{bound:.4},{ratio:.3},{model_bound_us:.2}"
        )?;
    } else {
        outln!(
            " {size:>11} {count:>10} {dtype:>6} {op:>6} {algorithm:>14} {time_us:>10.1} {algbw:>12.3} {busbw:>12.3} {wrong:>7} {bound:>12.3} {ratio:>6.2} {model_bound_us:>14.1}"
        )?;
    }
    Ok(())
}

/// The header's words for the host bound of `c` over `n` ranks.
fn bound_words(c: Collective, n: usize) -> String {
    let m = n.saturating_sub(1);
    match c {
        Collective::AllReduce => format!("host n-ary add + {m} memcpys of the result"),
        Collective::ReduceScatter => {
            "host n-ary add + one memcpy of the slices out of the result".into()
        }
        Collective::AllGather => format!("{} host memcpys of a shard", n * n),
        Collective::Broadcast => format!("{m} host memcpys of the shard"),
        Collective::AllToAll => format!("{n} host memcpys of a shard, in pieces"),
    }
}

/// Measures one size.
#[allow(clippy::too_many_arguments)]
pub fn measure(
    devices: &[fuel_graph_ext::Device],
    dtype: DType,
    op: ReduceOp,
    algorithm: &str,
    size: usize,
    iters: usize,
    warmup: usize,
    topo: &Arc<Topology>,
    (many, combine, threshold): (usize, crate::bench::many::Combine, Option<&str>),
    (transport, chunks, copy_slices): (Option<&str>, Option<&str>, bool),
    collective: Collective,
) -> Result<Row, Failure> {
    let n = devices.len();
    let count = collective.count(n, size, dtype.size_bytes());
    let ty = TensorType::new(dtype, &[count]);
    let g = if collective != Collective::AllReduce {
        collective.build(devices, &ty, op)?
    } else if many == 1 {
        setup::build(devices, &ty, op, Shape::AllReduce)?
    } else {
        crate::bench::many::build(devices, &ty, op, many)?
    };
    let pipeline = crate::bench::many::pipeline(
        crate::bench::many::with_lower_option(
            crate::bench::many::with_transport(setup::pipeline(algorithm), transport),
            "chunks",
            chunks,
        ),
        combine,
        threshold,
    );
    let (lowered, decisions, _) = setup::lower(&g, &pipeline, topo, None)?;
    let options = exec::Options {
        view_slices: !copy_slices,
        ..Default::default()
    };
    let compiled = crate::run::compiler(&lowered, devices, topo, options)?.compile();
    let exe = compiled.map_err(|e| {
        let hint = fitting_size(&e, size).map_or(String::new(), |s| {
            format!(
                "; the executor has room for at most {} per rank here, and the bench's own reference values need more: try smaller --sizes",
                format_size(s)
            )
        });
        Failure::input(format!("compile failed: {e}{hint}"))
    })?;
    let (time_us, wrong) = time_runs(&g, &exe, iters, warmup)?;
    let bytes = count * dtype.size_bytes() * many;
    let data = collective.data_bytes(n, bytes);
    let algbw = data as f64 / (time_us * 1e3);
    let busbw = algbw * collective.bus_factor(n);
    let bound_us = collective.bound_us(n, bytes, dtype.size_bytes(), iters, warmup)?
        + staging_bound_us(devices, bytes, iters, warmup)?;
    let bound = if bound_us > 0.0 {
        data as f64 / (bound_us * 1e3)
    } else {
        0.0
    };
    Ok(Row {
        size,
        count,
        algorithm: display_algorithm(algorithm, &decisions),
        time_us,
        algbw,
        busbw,
        wrong,
        bound,
        model_bound_us: model_bound_us(&decisions),
    })
}

/// The cost model's lower bound of a lowering's collectives, summed
/// (0 where a collective has none).
fn model_bound_us(decisions: &[fuel_collective::Decision]) -> f64 {
    decisions
        .iter()
        .filter_map(|d| match d.candidates.bound() {
            Some(Ok(b)) => Some(b.us),
            _ => None,
        })
        .sum()
}

/// For a compile refused for its size, the largest power of two bytes per
/// rank that would fit, scaling `size` by what the devices have over what
/// the graph needs.
fn fitting_size(e: &exec::ExecError, size: usize) -> Option<usize> {
    let (have, need) = match e {
        exec::ExecError::NotEnoughMemory { need, limit, .. } => (*limit, *need),
        exec::ExecError::TooLarge { bytes, limit, .. } => (*limit, *bytes),
        _ => return None,
    };
    let fits = (size as f64 * have as f64 / need.max(1) as f64) as usize;
    (fits >= 1).then(|| 1usize << fits.ilog2())
}

/// Times `exe` (the lowering of `g`): the median microseconds of `iters`
/// runs after `warmup`, each `Executable::run_into` into one reused output
/// vector, and how many elements of the last run differ from the reference
/// interpreter's result for `g`.
pub fn time_runs(
    g: &fuel_graph_ext::Graph,
    exe: &exec::Executable,
    iters: usize,
    warmup: usize,
) -> Result<(f64, usize), Failure> {
    Ok(time_each(g, &[exe], iters, warmup)?[0])
}

/// [`time_runs`] for several lowerings of `g` at once, taken in turns: each
/// is warmed up, then every round times one run of each, so a slow spell of
/// a shared machine falls on all of them alike rather than on whichever
/// was being timed then. Where there are several, each timed run follows an
/// untimed one of the same executable, so it starts with its own data in
/// the caches, as a run of a loop does.
pub fn time_each(
    g: &fuel_graph_ext::Graph,
    exes: &[&exec::Executable],
    iters: usize,
    warmup: usize,
) -> Result<Vec<(f64, usize)>, Failure> {
    let host_inputs = try_deterministic_inputs(g).map_err(|e| Failure::input(e.to_string()))?;
    let inputs: BTreeMap<String, Tensor> = host_inputs
        .iter()
        .map(|(k, v)| (k.clone(), Tensor::from_host(v)))
        .collect();
    // One output vector per executable, the same every time: `run_into`
    // overwrites it in place, as a training loop would.
    let mut last: Vec<Vec<Tensor>> = vec![Vec::new(); exes.len()];
    let run = |exe: &exec::Executable, out: &mut Vec<Tensor>| {
        exe.run_into(&inputs, out)
            .map_err(|e| Failure::input(format!("run failed: {e}")))
    };
    for (exe, out) in exes.iter().zip(&mut last) {
        for _ in 0..warmup {
            run(exe, out)?;
        }
    }
    let rewarm = exes.len() > 1;
    let mut times = vec![Vec::with_capacity(iters); exes.len()];
    for _ in 0..iters {
        for ((exe, out), samples) in exes.iter().zip(&mut last).zip(&mut times) {
            if rewarm {
                run(exe, out)?;
            }
            let t = Instant::now();
            run(exe, out)?;
            samples.push(t.elapsed().as_secs_f64() * 1e6);
        }
    }
    let want = interpret(g, &host_inputs).map_err(|e| Failure::input(e.to_string()))?;
    let count = want.first().map_or(0, |w| w.ty.num_elements());
    Ok(last
        .iter()
        .zip(&mut times)
        .map(|(out, samples)| {
            let mut wrong = want.len().saturating_sub(out.len()) * count;
            for (got, w) in out.iter().zip(&want) {
                wrong += got.to_host().differences(w);
            }
            (setup::median_us(samples), wrong)
        })
        .collect())
}

fn display_algorithm(requested: &str, decisions: &[fuel_collective::Decision]) -> String {
    let chosen = setup::chosen(decisions);
    if requested == "auto" {
        format!("auto:{chosen}")
    } else {
        chosen
    }
}
