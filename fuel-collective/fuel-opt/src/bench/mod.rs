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
pub mod many;
pub mod plot;
pub mod validate;
use crate::setup::{self, Shape};
use crate::sizes::{format_size, parse_sizes};
use crate::Failure;
use fuel_graph_ext::interp::{interpret, try_deterministic_inputs};
use fuel_graph_ext::{DType, ReduceOp, TensorType, Topology};
use fuel_runtime::backend::cpu;
use fuel_runtime::exec::{self, Tensor};
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
    /// Algorithm: auto, star, hierarchical, ring, tree or driver.
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
    let collective = a.collective;
    let found = setup::discover();
    let devices = setup::pick_devices(Some(&a.devices), 0, &found)?;
    if a.calibrate {
        let base = match &a.topology {
            Some(_) => crate::load_topology(
                a.topology.as_ref(),
                &devices,
                crate::input::DEFAULT_MAX_INPUT,
            )?,
            None => Topology::default(),
        };
        let effort = crate::calibrate::Effort {
            iters: a.iters,
            warmup: a.warmup,
            passes: 3,
        };
        return crate::calibrate::to_file(&devices, &base, &a.out, effort);
    }
    let topo = Arc::new(crate::load_topology(
        a.topology.as_ref(),
        &devices,
        crate::input::DEFAULT_MAX_INPUT,
    )?);
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
    let n = devices.len();
    let progress = std::io::stderr().is_terminal();
    if a.csv {
        outln!(
            "size,count,type,redop,algorithm,time_us,algbw_gbps,busbw_gbps,wrong,bound_gbps,ratio,model_bound_us"
        )?;
    } else {
        let names: Vec<String> = devices.iter().map(|d| d.to_string()).collect();
        outln!(
            "# fuel-opt bench: {} {} over [{}], {} iters after {} warmup, median times, combine {:?}, slices {}",
            a.count,
            collective.name(),
            names.join(", "),
            a.iters,
            a.warmup,
            a.combine,
            if a.copy_slices { "copied" } else { "viewed where contiguous" }
        )?;
        outln!(
            "# bound: {}{}, same run",
            bound_words(collective, n),
            match vulkan_transfer_path(&devices) {
                Some(path) => format!(" + each Vulkan device's own download and upload ({path})"),
                None => String::new(),
            }
        )?;
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
    }
    let mut plotted: Vec<Row> = Vec::new();
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
                &devices,
                dtype,
                op,
                algorithm,
                size,
                a.iters,
                a.warmup,
                &topo,
                (a.count, a.combine, a.combine_threshold.as_deref()),
                (a.transport.as_deref(), a.chunks.as_deref(), a.copy_slices),
                collective,
            )?;
            let ratio = if row.bound > 0.0 {
                row.algbw / row.bound
            } else {
                0.0
            };
            if a.csv {
                outln!(
                    "{},{},{},{},{},{:.2},{:.4},{:.4},{},{:.4},{:.3},{:.2}",
                    row.size,
                    row.count,
                    dtype,
                    op,
                    row.algorithm,
                    row.time_us,
                    row.algbw,
                    row.busbw,
                    row.wrong,
                    row.bound,
                    ratio,
                    row.model_bound_us
                )?;
            } else {
                outln!(
                " {:>11} {:>10} {:>6} {:>6} {:>14} {:>10.1} {:>12.3} {:>12.3} {:>7} {:>12.3} {:>6.2} {:>14.1}",
                row.size, row.count, dtype.as_str(), op.as_str(), row.algorithm, row.time_us, row.algbw, row.busbw, row.wrong, row.bound, ratio, row.model_bound_us
            )?;
            }
            plotted.push(row);
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
    if let Some(path) = &a.plot {
        let names: Vec<String> = devices.iter().map(|d| d.to_string()).collect();
        let title = format!(
            "{}.{op} of {dtype} over [{}]",
            collective.name(),
            names.join(", ")
        );
        let drawn = crate::bench::plot::draw(path, &plotted, n, &title)?;
        if !a.csv {
            match drawn {
                true => outln!("# plot: {}", path.display())?,
                false => outln!("# plot: nothing drawn, every bus bandwidth is 0")?,
            }
        }
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

/// Median microseconds of a data movement on host memory: with `add`, an
/// n-ary add of `n` buffers of `bytes` into one and then `copies` copies
/// of the sum; without, `copies` copies of `bytes` read from the `n`
/// buffers in turn. It is timed on one thread and split over the CPU
/// kernels' own rayon pool (`cpu::on_kernel_threads`) and the faster of the
/// two counts, so the bound pays no thread start-up the executor does not
/// pay either.
pub fn host_moves_us(
    n: usize,
    add: bool,
    copies: usize,
    bytes: usize,
    elem: usize,
    iters: usize,
    warmup: usize,
) -> Result<f64, Failure> {
    let words = bytes.div_ceil(8);
    let inputs: Vec<Vec<u64>> = (0..n.max(1))
        .map(|i| host_vec(words, i as u64 + 1))
        .collect::<Result<_, _>>()?;
    let mut out = host_vec(if add { words } else { 0 }, 0u64)?;
    let mut dsts: Vec<Vec<u64>> = (0..copies)
        .map(|_| host_vec(words, 0u64))
        .collect::<Result<_, _>>()?;
    let mut best = f64::INFINITY;
    for threads in [1, cpu::kernel_threads()] {
        let mut times = Vec::with_capacity(iters);
        for it in 0..warmup + iters {
            let t = Instant::now();
            let mut work = || {
                if add {
                    parallel_add(&inputs, &mut out, elem, threads);
                }
                for (k, c) in dsts.iter_mut().enumerate() {
                    let src = if add { &out } else { &inputs[k % inputs.len()] };
                    parallel_copy(src, c, threads);
                }
            };
            if threads > 1 {
                cpu::on_kernel_threads(work);
            } else {
                work();
            }
            if it >= warmup {
                times.push(t.elapsed().as_secs_f64() * 1e6);
            }
        }
        best = best.min(setup::median_us(&mut times));
    }
    std::hint::black_box(&dsts);
    Ok(best)
}

/// `len` copies of `v` in a vector allocated fallibly: the bound's buffers
/// are as large as the sizes asked for, and a size the host cannot hold is
/// an error that says what fits, not an abort.
fn host_vec<T: Clone>(len: usize, v: T) -> Result<Vec<T>, Failure> {
    let mut out = Vec::new();
    out.try_reserve_exact(len).map_err(|e| {
        let fits = fuel_runtime::backend::limits::host().map_or(String::new(), |c| {
            format!(
                "; this process may hold at most {} ({})",
                fuel_runtime::backend::limits::Bytes(c.total.bytes),
                c.total.what
            )
        });
        Failure::input(format!(
            "the host bound cannot allocate {}: {e}{fits}; give smaller --sizes",
            fuel_runtime::backend::limits::Bytes(len.saturating_mul(std::mem::size_of::<T>()))
        ))
    })?;
    out.resize(len, v);
    Ok(out)
}

/// How the group's first Vulkan device moves host bytes, as the bound and
/// the executor both see it; `None` without Vulkan devices.
fn vulkan_transfer_path(devices: &[fuel_graph_ext::Device]) -> Option<String> {
    let d = devices
        .iter()
        .find(|d| d.kind == fuel_graph_ext::DeviceKind::Vulkan)?;
    let dev = fuel_runtime::backend::vulkan::Instance::open()
        .ok()?
        .open_device(*d)
        .ok()?;
    let path = if dev.host_mapped() {
        "memcpy through mapped storage buffers"
    } else {
        "through the staging buffer"
    };
    let import = match dev.import_status() {
        Ok(_) if dev.reads_inputs_in_place() => "host-arena buffers imported and inputs read in place, so runs may skip moves this bound counts (FUEL_VULKAN_IMPORT=0 turns it off)".to_string(),
        Ok(_) => "host-arena buffers imported (FUEL_VULKAN_IMPORT=0 turns it off)".to_string(),
        Err(why) => format!("host import off: {why}"),
    };
    Some(format!("{path}; {import}"))
}

/// Median microseconds for every Vulkan device of the group to move `bytes`
/// once each way (a download then an upload) with the backend's own calls
/// and no executor around them; 0 without Vulkan devices. The calls take
/// the backend's own path (mapped memcpy or staging buffer, see
/// `HostAccess`), so a faster transfer path makes this bound faster too.
/// Added to the host bound, it is what a star through the host cannot beat.
pub fn staging_bound_us(
    devices: &[fuel_graph_ext::Device],
    bytes: usize,
    iters: usize,
    warmup: usize,
) -> Result<f64, Failure> {
    use fuel_runtime::backend::{fault::Faults, vulkan::Instance};
    let vk: Vec<_> = devices
        .iter()
        .filter(|d| d.kind == fuel_graph_ext::DeviceKind::Vulkan)
        .collect();
    if vk.is_empty() {
        return Ok(0.0);
    }
    let fail = |e: String| Failure::input(format!("staging bound: {e}"));
    let inst = Instance::open().map_err(|u| fail(u.reason))?;
    let faults = Faults::new(None);
    let mut host = host_vec(bytes, 1u8)?;
    let mut total = 0.0;
    for d in vk {
        let dev = inst.open_device(*d).map_err(|e| fail(e.to_string()))?;
        let mut buf = dev.alloc(bytes, &faults).map_err(|e| fail(e.to_string()))?;
        let mut times = Vec::with_capacity(iters);
        for it in 0..warmup + iters {
            let t = Instant::now();
            dev.download(&buf, &mut host)
                .map_err(|e| fail(e.to_string()))?;
            dev.upload(&host, &mut buf)
                .map_err(|e| fail(e.to_string()))?;
            if it >= warmup {
                times.push(t.elapsed().as_secs_f64() * 1e6);
            }
        }
        total += setup::median_us(&mut times);
    }
    Ok(total)
}

fn lanes_add(acc: &mut [u64], x: &[u64], elem: usize) {
    // Wrapping adds on lanes of the element's width, so the work per byte
    // matches an add of that dtype.
    match elem {
        1 => acc.iter_mut().zip(x).for_each(|(a, b)| {
            let s: [u8; 8] =
                std::array::from_fn(|k| a.to_le_bytes()[k].wrapping_add(b.to_le_bytes()[k]));
            *a = u64::from_le_bytes(s);
        }),
        2 | 4 => acc.iter_mut().zip(x).for_each(|(a, b)| {
            let (lo, hi) = (
                (*a as u32).wrapping_add(*b as u32),
                ((*a >> 32) as u32).wrapping_add((*b >> 32) as u32),
            );
            *a = u64::from(lo) | (u64::from(hi) << 32);
        }),
        _ => acc
            .iter_mut()
            .zip(x)
            .for_each(|(a, b)| *a = a.wrapping_add(*b)),
    }
}

fn parallel_add(inputs: &[Vec<u64>], out: &mut [u64], elem: usize, threads: usize) {
    if threads <= 1 {
        add_range(inputs, out, 0, elem);
        return;
    }
    use rayon::prelude::*;
    let chunk = out.len().div_ceil(threads).max(1);
    out.par_chunks_mut(chunk)
        .enumerate()
        .for_each(|(t, part)| add_range(inputs, part, t * chunk, elem));
}

/// Folds `inputs[.][start..start + out.len()]` into `out`, block by block so
/// the block stays in cache while every input is added.
fn add_range(inputs: &[Vec<u64>], out: &mut [u64], start: usize, elem: usize) {
    const BLOCK: usize = 2048;
    for (b, blk) in out.chunks_mut(BLOCK).enumerate() {
        let off = start + b * BLOCK;
        if let Some(first) = inputs.first() {
            blk.copy_from_slice(&first[off..off + blk.len()]);
        }
        for x in inputs.iter().skip(1) {
            lanes_add(blk, &x[off..off + blk.len()], elem);
        }
    }
}

fn parallel_copy(src: &[u64], dst: &mut [u64], threads: usize) {
    if threads <= 1 {
        dst.copy_from_slice(src);
        return;
    }
    use rayon::prelude::*;
    let chunk = src.len().div_ceil(threads).max(1);
    dst.par_chunks_mut(chunk)
        .zip(src.par_chunks(chunk))
        .for_each(|(d, sp)| d.copy_from_slice(sp));
}
