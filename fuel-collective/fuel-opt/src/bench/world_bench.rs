//! `mpirun -n P fuel-opt bench --world`: nccl-tests-style rows for a world
//! all_reduce over P processes × the local `--devices` (feature `mpi`),
//! each beside the bound for its shape, measured in the same run, and the
//! ratio. The bound is the raw `MPI_Allreduce` of the same bytes on host
//! buffers plus, where a process holds more than one shard, the local
//! part's own bound: the single-process bench's host bound for the local
//! group (a k-ary add and k−1 copies of host vectors) and its staging
//! bound (every Vulkan device's download and upload of the bytes).
//!
//! Every process records the world all_reduce (`WorldGroup`, hub chosen
//! with the `--topology` figures), lowers and compiles it once per size,
//! checks its results bit for bit once (small integers, exact in any
//! order), then times `--iters` runs after `--warmup`, each started after
//! an `MPI_Barrier`; the raw bound is timed the same way: an
//! `MPI_Allreduce` (MPI_FLOAT, MPI_SUM) of the same number of bytes per
//! process on host vectors, straight through rsmpi, outside the driver.
//! Rank 0 prints its own medians. `busbw` is `algbw · 2(n-1)/n` with n =
//! P·k ranks, the bound's too.

use super::BenchArgs;
use crate::Failure;

/// Runs the world benchmark (feature `mpi`).
#[cfg(not(feature = "mpi"))]
pub fn bench(_a: &BenchArgs) -> Result<(), Failure> {
    Err(Failure::input(
        "bench --world needs MPI, and this fuel-opt was built without it; build it with `cargo build --release -p fuel-opt --features mpi` and launch it with `mpirun -n P target/release/fuel-opt bench --world --devices cpu:0`",
    ))
}

/// Runs the world benchmark (feature `mpi`).
#[cfg(feature = "mpi")]
pub fn bench(a: &BenchArgs) -> Result<(), Failure> {
    let (p, np) = crate::world_run::imp::process_and_count("bench --world")?;
    let guard = crate::world_guard::Guard::start(
        p,
        np,
        crate::world_guard::timeout(a.world_timeout),
        crate::world_guard::STARTING,
    );
    let res = imp::bench(a, (p, np), &guard);
    // Every communicator is gone once `imp::bench` returns.
    guard.step("finalising MPI");
    let fin = fuel_collective::MpiDriver::finalize().map_err(|e| Failure::input(e.to_string()));
    guard.finish();
    res.and(fin)
}

#[cfg(feature = "mpi")]
mod imp {
    use super::{BenchArgs, Failure};
    use crate::bench::collectives::Collective;
    use crate::bench::staging_bound_us;
    use crate::outln;
    use crate::sizes::{format_size, parse_sizes};
    use crate::world_guard::{Fingerprint, Guard};
    use crate::world_run::imp::{join, local_devices, shards, value};
    use fuel_collective::WorldGroup;
    use fuel_graph_ext::interp::HostTensor;
    use fuel_graph_ext::{DType, Device, LazyGraph, ReduceOp, TensorType, Topology};
    use mpi::collective::SystemOperation;
    use mpi::topology::SimpleCommunicator;
    use mpi::traits::{Communicator, CommunicatorCollectives};
    use std::collections::BTreeMap;
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    fn median(mut v: Vec<Duration>) -> f64 {
        v.sort();
        v.get(v.len() / 2).map_or(0.0, |d| d.as_secs_f64() * 1e6)
    }

    /// What every rank must agree on before any collective runs: the same
    /// sizes, timed the same number of times, planned from the same
    /// figures (ranks that priced the world's plan from different topology
    /// files could plan it differently and wait on each other forever).
    fn fingerprint(a: &BenchArgs, dtype: DType, k: usize, topo: &Topology) -> Fingerprint {
        Fingerprint::default()
            .text("the command", "bench --world")
            .text("--dtype", dtype.as_str())
            .text("--sizes", &a.sizes)
            .number("--iters", a.iters)
            .number("--warmup", a.warmup)
            .number("the local device count", k)
            .text(
                "the cost model's topology (give every rank the same --topology file)",
                &topo.to_text(),
            )
    }

    pub(super) fn bench(
        a: &BenchArgs,
        (p, np): (usize, usize),
        guard: &Guard,
    ) -> Result<(), Failure> {
        let dtype: DType = a.dtype.parse().map_err(Failure::input)?;
        let sizes = parse_sizes(&a.sizes).map_err(|e| Failure::input(format!("--sizes: {e}")))?;
        let devices = local_devices(Some(&a.devices))?;
        let topo = Arc::new(crate::load_topology(
            a.topology.as_ref(),
            &devices,
            crate::input::DEFAULT_MAX_INPUT,
        )?);
        let k = devices.len();
        let n = np * k;
        let fail = |e: &dyn std::fmt::Display| Failure::mismatch(format!("process {p}: {e}"));
        let c = join("fuel-opt-bench-world", (p, np), guard, &fail)?;
        guard.step("comparing the ranks' fingerprints");
        crate::world_guard::agree(&fingerprint(a, dtype, k, &topo), p).map_err(|e| fail(&e))?;
        guard.step("agreeing on the world's devices");
        let world =
            WorldGroup::with_topology(&c, devices.iter().copied(), &topo).map_err(|e| fail(&e))?;
        let raw = SimpleCommunicator::world();
        let names: Vec<String> = devices.iter().map(Device::to_string).collect();
        if p == 0 {
            header(a, &names, world.hub(), np, k)?;
        }
        for size in sizes {
            guard.step(&format!("timing {}", format_size(size)));
            let count = (size / dtype.size_bytes()).max(1);
            let bytes = count * dtype.size_bytes();
            let g = LazyGraph::new(&format!("bench-world-p{p}"));
            let ty = TensorType::new(dtype, &[count]);
            let (shards, inputs) = shards(&g, &devices, &ty, p);
            let sums = world
                .all_reduce(&shards, ReduceOp::Sum)
                .map_err(|e| fail(&e))?;
            let outs: Vec<_> = sums.iter().collect();
            let exe = world.compile(&outs, topo.clone()).map_err(|e| fail(&e))?;
            guard.issue([format!("world all_reduce.sum of {count} x {dtype}").as_str()]);
            let want = HostTensor::new(
                ty.clone(),
                (0..count)
                    .map(|j| (0..n).map(|q| value(q, j)).sum())
                    .collect(),
            );
            let (time_us, wrong) = time_run(&exe, &inputs, &want, a, &raw).map_err(|e| fail(&e))?;
            let mpi_us = raw_bound_us(&raw, bytes, a).map_err(|e| fail(&e));
            guard.done();
            let mpi_us = mpi_us?;
            let local_us = if k > 1 {
                Collective::AllReduce.bound_us(k, bytes, dtype.size_bytes(), a.iters, a.warmup)?
            } else {
                0.0
            } + staging_bound_us(&devices, bytes, a.iters, a.warmup)?;
            let bound_us = mpi_us + local_us;
            if p == 0 {
                let algbw = bytes as f64 / (time_us * 1e3);
                let bus = 2.0 * (n as f64 - 1.0) / n as f64;
                let row = Row {
                    size: format_size(bytes),
                    count,
                    dtype,
                    time_us,
                    algbw,
                    busbw: algbw * bus,
                    wrong,
                    mpi_us,
                    local_us,
                    bound_us,
                    bound_busbw: bytes as f64 / (bound_us * 1e3) * bus,
                };
                row.print(a.csv)?;
            }
            if wrong > 0 {
                return Err(fail(&format!(
                    "{wrong} wrong elements at {} bytes",
                    format_size(bytes)
                )));
            }
        }
        Ok(())
    }

    /// Prints the table's header lines (process 0 only).
    fn header(
        a: &BenchArgs,
        names: &[String],
        hub: Device,
        np: usize,
        k: usize,
    ) -> Result<(), Failure> {
        if a.csv {
            outln!("{}", Row::CSV_HEADER)?;
            return Ok(());
        }
        outln!(
            "# fuel-opt bench --world: all_reduce.sum over {np} processes x [{}] (hub {}), {} iters after {} warmup, rank 0's medians, each run after an MPI_Barrier",
            names.join(","),
            hub,
            a.iters,
            a.warmup
        )?;
        let local = if k > 1 {
            format!(
                "the local group's host bound (a {k}-ary add and {} copies of host vectors)",
                k - 1
            )
        } else {
            "no local host bound (one device per process)".to_string()
        };
        outln!(
            "# bound = mpi + local, same run: mpi = raw MPI_Allreduce (MPI_FLOAT, MPI_SUM) of the same bytes per process on host buffers; local = {local} plus the staging bound (each Vulkan device's download and upload; none without one); ratio = bound time / time, as in every bench table (1.0 is the bound, higher is better)"
        )?;
        outln!(
            "#{:>11} {:>10} {:>6} {:>10} {:>12} {:>12} {:>7} {:>10} {:>10} {:>14} {:>12} {:>6}",
            "size",
            "count",
            "type",
            "time(us)",
            "algbw(GB/s)",
            "busbw(GB/s)",
            "#wrong",
            "mpi(us)",
            "local(us)",
            "bound(us)",
            "bound busbw",
            "ratio"
        )?;
        Ok(())
    }

    /// The median time in microseconds of a raw `MPI_Allreduce` (f32 sum)
    /// of `bytes` on host buffers, each run after a barrier: the MPI half
    /// of the bound.
    fn raw_bound_us(
        raw: &SimpleCommunicator,
        bytes: usize,
        a: &BenchArgs,
    ) -> Result<f64, &'static str> {
        let src = vec![1.0f32; bytes.div_ceil(4)];
        let mut dst = vec![0.0f32; src.len()];
        let mut bound = Vec::new();
        for i in 0..a.warmup + a.iters {
            raw.barrier();
            let t = Instant::now();
            raw.all_reduce_into(&src[..], &mut dst[..], SystemOperation::sum());
            if i >= a.warmup {
                bound.push(t.elapsed());
            }
        }
        if dst.first() != Some(&(raw.size() as f32)) {
            return Err("the raw MPI_Allreduce bound gave a wrong sum");
        }
        Ok(median(bound))
    }

    /// Runs the world executable once to check it, then times it as the
    /// single-process bench does; returns the median time in microseconds
    /// and how many elements of the checked runs differ from `want`.
    fn time_run(
        exe: &fuel_runtime::exec::Executable,
        inputs: &BTreeMap<String, HostTensor>,
        want: &HostTensor,
        a: &BenchArgs,
        raw: &SimpleCommunicator,
    ) -> Result<(f64, usize), String> {
        let got = exe.run_host(inputs).map_err(|e| e.to_string())?;
        let wrong: usize = got.iter().map(|r| r.differences(want)).sum();
        // Timed as the single-process bench times: tensors made once and
        // one output vector reused (`run_into`), so the figure is the
        // collective's, not the conversion of host tensors and the
        // first touch of fresh output pages.
        let tensors: BTreeMap<String, fuel_graph_ext::Tensor> = inputs
            .iter()
            .map(|(k, v)| (k.clone(), fuel_graph_ext::Tensor::from_host(v)))
            .collect();
        let mut outs = Vec::new();
        let mut times = Vec::new();
        for i in 0..a.warmup + a.iters {
            raw.barrier();
            let t = Instant::now();
            exe.run_into(&tensors, &mut outs)
                .map_err(|e| e.to_string())?;
            if i >= a.warmup {
                times.push(t.elapsed());
            }
        }
        // The timed runs wrote into the tensors of the runs before
        // them: check the last one's result too.
        let wrong = wrong
            + outs
                .iter()
                .map(|t| t.to_host().differences(want))
                .sum::<usize>();
        let time_us = median(times);
        Ok((time_us, wrong))
    }

    /// One size's figures, as a table row or a CSV line.
    struct Row {
        size: String,
        count: usize,
        dtype: DType,
        time_us: f64,
        algbw: f64,
        busbw: f64,
        wrong: usize,
        mpi_us: f64,
        local_us: f64,
        bound_us: f64,
        bound_busbw: f64,
    }

    impl Row {
        /// The CSV's first line: the columns of the table, in its order.
        const CSV_HEADER: &'static str = "size,count,type,time_us,algbw_gbps,busbw_gbps,wrong,mpi_us,local_us,bound_us,bound_busbw_gbps,ratio";

        /// Prints the row (process 0 only); `ratio` is bound time over
        /// time, as in `bench`.
        fn print(&self, csv: bool) -> Result<(), Failure> {
            let ratio = self.bound_us / self.time_us;
            let (s, c, t) = (&self.size, self.count, self.dtype.to_string());
            let (us, alg, bus, w) = (self.time_us, self.algbw, self.busbw, self.wrong);
            let (mpi, local, bound, bb) =
                (self.mpi_us, self.local_us, self.bound_us, self.bound_busbw);
            if csv {
                outln!("{s},{c},{t},{us:.1},{alg:.4},{bus:.4},{w},{mpi:.1},{local:.1},{bound:.1},{bb:.4},{ratio:.3}")
            } else {
                outln!("{s:>12} {c:>10} {t:>6} {us:>10.1} {alg:>12.3} {bus:>12.3} {w:>7} {mpi:>10.1} {local:>10.1} {bound:>14.1} {bb:>12.3} {ratio:>6.2}")
            }
        }
    }
}
