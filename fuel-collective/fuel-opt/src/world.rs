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

/// Runs the world demo (feature `mpi`).
#[cfg(not(feature = "mpi"))]
pub fn demo(_a: &DemoArgs) -> Result<(), Failure> {
    Err(Failure::input(
        "demo --world needs MPI, and this fuel-opt was built without it; build it with `cargo build --release -p fuel-opt --features mpi` and launch it with `mpirun -n P target/release/fuel-opt demo --world`",
    ))
}

/// Runs the world demo (feature `mpi`).
#[cfg(feature = "mpi")]
pub fn demo(a: &DemoArgs) -> Result<(), Failure> {
    let res = imp::demo(a);
    // Every communicator is gone once `imp::demo` returns.
    let fin = fuel_collective::MpiDriver::finalize().map_err(|e| Failure::input(e.to_string()));
    res.and(fin)
}

#[cfg(feature = "mpi")]
pub(crate) mod imp {
    use super::{DemoArgs, Failure};
    use crate::outln;
    use fuel_collective::{
        CollectiveDriver, CommunicationId, Driver, DriverCommunicator, MpiDriver, WorldGroup,
    };
    use fuel_graph_ext::interp::HostTensor;
    use fuel_graph_ext::{dot, text, DType, Device, LazyGraph, ReduceOp, TensorType, Topology};
    use std::collections::BTreeMap;
    use std::sync::Arc;
    use std::time::{Duration, Instant};

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

    pub(super) fn demo(a: &DemoArgs) -> Result<(), Failure> {
        let dtype: DType = a.dtype.parse().map_err(Failure::input)?;
        let (p, np) = process_and_count("demo --world")?;
        let devices: Vec<Device> = a
            .devices
            .as_deref()
            .unwrap_or("cpu:0")
            .split(',')
            .map(|d| {
                d.trim()
                    .parse::<Device>()
                    .map_err(|e| Failure::input(e.to_string()))
            })
            .collect::<Result<_, _>>()?;
        let k = devices.len();
        let n = np * k;
        let elements = a.elements.max(1).div_ceil(n) * n;
        let fail = |e: &dyn std::fmt::Display| Failure::mismatch(format!("process {p}: {e}"));
        let id =
            MpiDriver::group_id(&CommunicationId::new("fuel-opt-world")).map_err(|e| fail(&e))?;
        let comm = MpiDriver::join(id, np, p).map_err(|e| fail(&e))?;
        let dev = MpiDriver::open(Device::cpu(0)).map_err(|e| fail(&e))?;
        let runtime = fuel_runtime::exec::RuntimeOptions::from_env().map_err(|e| fail(&e))?;
        let c = DriverCommunicator::<MpiDriver>::new(comm, dev, Duration::from_secs(300))
            .with_runtime(runtime);
        let world = WorldGroup::new(&c, devices.iter().copied()).map_err(|e| fail(&e))?;

        let g = LazyGraph::new(&format!("world-p{p}"));
        let ty = TensorType::new(dtype, &[elements]);
        let mut inputs = BTreeMap::new();
        let shards: Vec<_> = devices
            .iter()
            .enumerate()
            .map(|(i, d)| {
                let name = format!("s{i}");
                let vals = (0..elements).map(|j| value(p * k + i, j)).collect();
                inputs.insert(name.clone(), HostTensor::new(ty.clone(), vals));
                g.input(&name, *d, ty.clone())
            })
            .collect();
        let sums = world
            .all_reduce(&shards, ReduceOp::Sum)
            .map_err(|e| fail(&e))?;
        let pieces = world
            .reduce_scatter(&shards, ReduceOp::Sum, 0)
            .map_err(|e| fail(&e))?;
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
        let exe = world.compile_lowered(&lowered).map_err(|e| fail(&e))?;
        let mut got = exe.run_host(&inputs).map_err(|e| fail(&e))?;
        let mut times = Vec::new();
        for _ in 0..a.runs {
            let t = Instant::now();
            got = exe.run_host(&inputs).map_err(|e| fail(&e))?;
            times.push(t.elapsed());
        }
        times.sort();
        let want = HostTensor::new(
            ty.clone(),
            (0..elements)
                .map(|j| (0..n).map(|q| value(q, j)).sum())
                .collect(),
        );
        for (i, r) in got.iter().enumerate() {
            r.check_same(&want)
                .map_err(|e| fail(&format!("result {i} ({}): {e}", devices[i % k])))?;
        }
        let names: Vec<String> = devices.iter().map(Device::to_string).collect();
        outln!(
            "PROOF rank {p} of {np}: world all_reduce.sum and reduce_scatter+all_gather over {np}x[{}] of {elements} {dtype}: {} results exact",
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
