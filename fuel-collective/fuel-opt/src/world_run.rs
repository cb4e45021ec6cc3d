//! `mpirun -n P fuel-opt demo --world`: the demo across processes (feature
//! `mpi`). Every process opens its devices (`--devices`, default `cpu:0`),
//! joins the MPI world, records over P × k devices a world `all_reduce`
//! and a `reduce_scatter` followed by an `all_gather` (`WorldGroup`), lowers
//! and compiles them, and runs them `--runs` times after a first run. Every
//! process checks its results bit for bit against the flat group's meaning
//! (inputs whose sums are exact in any order) and prints one `PROOF` line;
//! rank 0 writes its lowered graph (`world-p0.fir`, `.dot`) under `--out`
//! and prints the report: results per device, bytes between processes,
//! and the measured time.

use crate::demo::DemoArgs;
use crate::Failure;
use fuel_graph_ext::ReduceOp;

/// `--op` as the world demo runs it: every result is checked bit for bit
/// against the flat group's meaning, on small integers whose sums, maxima
/// and minima are exact in any order; a product or mean of them is not, so
/// those are refused rather than run as something else.
pub fn world_op(text: &str) -> Result<ReduceOp, Failure> {
    let op: ReduceOp = text.parse().map_err(Failure::input)?;
    match op {
        ReduceOp::Sum | ReduceOp::Max | ReduceOp::Min => Ok(op),
        _ => Err(Failure::input(format!(
            "demo --world checks every result bit for bit on inputs whose sums, maxima and minima are exact in any order: --op takes sum, max or min there, not {}",
            op.as_str()
        ))),
    }
}

/// Runs the world demo (feature `mpi`).
#[cfg(not(feature = "mpi"))]
pub fn demo(a: &DemoArgs) -> Result<(), Failure> {
    world_op(&a.op)?;
    Err(Failure::input(
        "demo --world needs MPI, and this fuel-opt was built without it; build it with `cargo build --release -p fuel-opt --features mpi` and launch it with `mpirun -n P target/release/fuel-opt demo --world`",
    ))
}

/// Runs the world demo (feature `mpi`).
#[cfg(feature = "mpi")]
pub fn demo(a: &DemoArgs) -> Result<(), Failure> {
    let op = world_op(&a.op)?;
    let (p, np) = imp::process_and_count("demo --world")?;
    let guard = crate::world_guard::Guard::start(
        p,
        np,
        crate::world_guard::timeout(a.world_timeout),
        crate::world_guard::STARTING,
    );
    let res = imp::demo(a, op, (p, np), &guard);
    // Every communicator is gone once `imp::demo` returns.
    guard.step("finalising MPI");
    let fin = fuel_collective::MpiDriver::finalize().map_err(|e| Failure::input(e.to_string()));
    guard.finish();
    res.and(fin)
}

#[cfg(feature = "mpi")]
pub(crate) mod imp {
    use super::{DemoArgs, Failure};
    use crate::outln;
    use crate::world_guard::{join_options, Fingerprint, Guard};
    use fuel_collective::{
        CollectiveDriver, CommunicationId, Driver, DriverCommunicator, MpiDriver, WorldGroup,
    };
    use fuel_graph_ext::interp::HostTensor;
    use fuel_graph_ext::{
        dot, text, DType, Device, LazyGraph, LazyTensor, ReduceOp, TensorType, Topology,
    };
    use std::collections::BTreeMap;
    use std::sync::Arc;
    use std::time::Instant;

    /// This process's index and the process count, from the variables
    /// `mpirun` sets (Open MPI's, or the PMI ones of other launchers);
    /// `cmd` is the subcommand, for the message when neither is set.
    pub(crate) fn process_and_count(cmd: &str) -> Result<(usize, usize), Failure> {
        let var = |names: [&str; 2]| -> Result<usize, Failure> {
            names
                .iter()
                .find_map(|n| std::env::var(n).ok())
                .ok_or_else(|| {
                    Failure::input(format!(
                        "{cmd} runs under MPI, and neither {} is set: launch it as `mpirun -n P fuel-opt {cmd} --devices cpu:0`",
                        names.join(" nor ")
                    ))
                })?
                .parse()
                .map_err(|e| Failure::input(format!("a bad MPI rank variable: {e}")))
        };
        Ok((
            var(["OMPI_COMM_WORLD_RANK", "PMI_RANK"])?,
            var(["OMPI_COMM_WORLD_SIZE", "PMI_SIZE"])?,
        ))
    }

    /// Global rank `g`'s element `j`: small integers, exact in every sum.
    pub(crate) fn value(g: usize, j: usize) -> f64 {
        ((g * 3 + j * 5) % 7) as f64 - 3.0
    }

    /// Joins the world's group `name` as process `p` of `np`, on `cpu:0`,
    /// with the runtime options of the environment; `fail` words an error.
    pub(crate) fn join(
        name: &str,
        (p, np): (usize, usize),
        guard: &Guard,
        fail: &dyn Fn(&dyn std::fmt::Display) -> Failure,
    ) -> Result<DriverCommunicator<MpiDriver>, Failure> {
        let id = MpiDriver::group_id(&CommunicationId::new(name)).map_err(|e| fail(&e))?;
        let comm =
            MpiDriver::join_with(id, np, p, join_options(guard.timeout())).map_err(|e| fail(&e))?;
        let dev = MpiDriver::open(Device::cpu(0)).map_err(|e| fail(&e))?;
        let runtime = fuel_runtime::exec::RuntimeOptions::from_env().map_err(|e| fail(&e))?;
        Ok(DriverCommunicator::<MpiDriver>::new(comm, dev, guard.timeout()).with_runtime(runtime))
    }

    /// Process `p`'s inputs in `g`: one `ty` shard per local device, shard
    /// i of global rank `p * k + i` holding [`value`]s; and their values.
    pub(crate) fn shards(
        g: &LazyGraph,
        devices: &[Device],
        ty: &TensorType,
        p: usize,
    ) -> (Vec<LazyTensor>, BTreeMap<String, HostTensor>) {
        let k = devices.len();
        let mut inputs = BTreeMap::new();
        let shards = devices
            .iter()
            .enumerate()
            .map(|(i, d)| {
                let name = format!("s{i}");
                let vals = (0..ty.num_elements())
                    .map(|j| value(p * k + i, j))
                    .collect();
                inputs.insert(name.clone(), HostTensor::new(ty.clone(), vals));
                g.input(&name, *d, ty.clone())
            })
            .collect();
        (shards, inputs)
    }

    /// Element `j` of `op` over the flat group of `n` ranks' [`value`]s.
    fn flat(op: ReduceOp, n: usize, j: usize) -> f64 {
        let each = (0..n).map(|q| value(q, j));
        match op {
            ReduceOp::Max => each.fold(f64::MIN, f64::max),
            ReduceOp::Min => each.fold(f64::MAX, f64::min),
            _ => each.sum(),
        }
    }

    /// Parses `--devices` (default `cpu:0`).
    pub(crate) fn local_devices(list: Option<&str>) -> Result<Vec<Device>, Failure> {
        list.unwrap_or("cpu:0")
            .split(',')
            .map(|d| {
                d.trim()
                    .parse::<Device>()
                    .map_err(|e| Failure::input(e.to_string()))
            })
            .collect()
    }

    pub(super) fn demo(
        a: &DemoArgs,
        op: ReduceOp,
        (p, np): (usize, usize),
        guard: &Guard,
    ) -> Result<(), Failure> {
        let dtype: DType = a.dtype.parse().map_err(Failure::input)?;
        let devices = local_devices(a.devices.as_deref())?;
        let k = devices.len();
        let n = np * k;
        let elements = a.elements.max(1).div_ceil(n) * n;
        let fail = |e: &dyn std::fmt::Display| Failure::mismatch(format!("process {p}: {e}"));
        let c = join("fuel-opt-world", (p, np), guard, &fail)?;
        guard.step("agreeing on the world's devices");
        let world = WorldGroup::new(&c, devices.iter().copied()).map_err(|e| fail(&e))?;

        let g = LazyGraph::new(&format!("world-p{p}"));
        let ty = TensorType::new(dtype, &[elements]);
        let (shards, inputs) = shards(&g, &devices, &ty, p);
        let sums = world.all_reduce(&shards, op).map_err(|e| fail(&e))?;
        let pieces = world.reduce_scatter(&shards, op, 0).map_err(|e| fail(&e))?;
        let gathered = world.all_gather(&pieces, 0).map_err(|e| fail(&e))?;
        let outs: Vec<_> = sums.iter().chain(&gathered).collect();
        let topo = Arc::new(Topology::default());
        let lowered = world.lower(&outs, topo).map_err(|e| fail(&e))?;
        if p == 0 {
            std::fs::create_dir_all(&a.out)
                .and_then(|()| std::fs::write(a.out.join("world-p0.fir"), text::print(&lowered)))
                .and_then(|()| std::fs::write(a.out.join("world-p0.dot"), dot::to_dot(&lowered)))
                .map_err(|e| {
                    Failure::input(format!(
                        "cannot write the dumps under {}: {e}",
                        a.out.display()
                    ))
                })?;
        }
        // Every rank must run this same program: compared before any
        // collective runs, so a rank with other flags fails every rank
        // instead of leaving the others waiting.
        let issued = crate::world_guard::collectives(&text::print(&lowered));
        guard.step("comparing the ranks' fingerprints");
        let fp = Fingerprint::default()
            .text("the command", "demo --world")
            .text("--op", op.as_str())
            .text("--dtype", dtype.as_str())
            .number("--elements", elements)
            .number("--runs", a.runs)
            .number("the local device count", k)
            .text("the collectives of the lowered graph", &issued.join("\n"));
        crate::world_guard::agree(&fp, p).map_err(|e| fail(&e))?;
        let exe = world.compile_lowered(&lowered).map_err(|e| fail(&e))?;
        let run = |i: usize| {
            guard.step(&format!("run {} of {}", i + 1, a.runs + 1));
            guard.issue(issued.iter().map(String::as_str));
            let got = exe.run_host(&inputs).map_err(|e| fail(&e));
            guard.done();
            got
        };
        let mut got = run(0)?;
        let mut times = Vec::with_capacity(a.runs);
        for i in 0..a.runs {
            let t = Instant::now();
            got = run(i + 1)?;
            times.push(t.elapsed());
        }
        times.sort();
        let want = HostTensor::new(ty.clone(), (0..elements).map(|j| flat(op, n, j)).collect());
        for (i, r) in got.iter().enumerate() {
            r.check_same(&want)
                .map_err(|e| fail(&format!("result {i} ({}): {e}", devices[i % k])))?;
        }
        let names: Vec<String> = devices.iter().map(Device::to_string).collect();
        outln!(
            "PROOF rank {p} of {np}: world all_reduce.{op} and reduce_scatter+all_gather over {np}x[{}] of {elements} {dtype}: {} results exact",
            names.join(","),
            got.len()
        )?;
        if p == 0 {
            let es = dtype.size_bytes();
            // Per process: the float all_reduce is a reduce-scatter and an
            // all-gather between processes; reduce_scatter sends (P-1)/P
            // of the local sum; all_gather receives (P-1) slabs of E/P.
            let wire = 2 * (np - 1) * elements * es / np + (np - 1) * elements * es / np * 2;
            outln!("== world report (rank 0)")?;
            for (i, r) in got.iter().enumerate() {
                outln!("  {} result {i}: {}", devices[i % k], r.digest())?;
            }
            outln!("  bytes between processes, per process and run: {wire}")?;
            if let Some(m) = times.get(times.len() / 2) {
                outln!(
                    "  measured: median of {} runs {:.3} ms",
                    times.len(),
                    m.as_secs_f64() * 1e3
                )?;
            }
            outln!("  dumps: {}/world-p0.fir, world-p0.dot", a.out.display())?;
        }
        Ok(())
    }
}
