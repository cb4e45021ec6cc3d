//! Multi-process check that every rank of a world schedules a training
//! step alike (issue 33), launched by `scripts/mpi-check.sh` on 2, 3 and 4
//! processes. Each rank joins a `WorldGroup` (which compares the device
//! counts and the topologies' fingerprints of every process), records a
//! data-parallel backward step (per layer an `extern "matmul"` gradient,
//! its all_reduce (Mean) over the world, an update), lowers it, runs
//! `schedule-collectives` and gathers every rank's schedule hash
//! (`overlap::schedule_hash`): all must be equal. Then it runs the
//! scheduled step, each lane by the pass's order, and checks every update
//! bit for bit against the mean computed here from every rank's inputs.
//! Prints `PROOF rank R of N ...` or `FAIL rank R of N: ...` and exits 1.
//!
//! `--topology FILE` plans from a topology file instead of the defaults;
//! `scripts/mpi-check.sh` gives rank 1 another file than the others, and
//! every rank must then fail at the join (E0442) instead of hanging.

use fuel_collective::driver::MpiDriver;
use fuel_collective::overlap::{schedule_hash, schedule_steps, was_scheduled};
use fuel_collective::{
    run_pipeline, CollectiveDriver, CommunicationId, Driver, DriverCommunicator, JoinOptions,
    WorldGroup,
};
use fuel_graph_ext::interp::HostTensor;
use fuel_graph_ext::op::ExternOp;
use fuel_graph_ext::{DType, Device, LazyGraph, ReduceOp, TensorType, Topology};
use fuel_runtime::exec::{Dispatch, RuntimeOptions};
use std::collections::BTreeMap;
use std::time::Duration;

#[path = "common/launch.rs"]
mod launch;
use launch::env_usize;

type Res<T> = Result<T, String>;

const LAYERS: usize = 3;
const BATCH: usize = 8;

/// Layer `l`'s width: the layers differ, as a model's do, so a rank that
/// issued their all_reduces in another order would schedule differently.
fn width(l: usize) -> usize {
    8 + 4 * l
}
const T: Duration = Duration::from_secs(60);

/// `--topology FILE`, else the documented defaults.
fn topology() -> Res<Topology> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.as_slice() {
        [] => Ok(Topology::default()),
        [flag, path] if flag == "--topology" => {
            let text = fuel_graph_ext::textfile::read(path.as_ref(), 1 << 20)
                .map_err(|e| format!("{path}: {e}"))?;
            Topology::parse(&text).map_err(|e| format!("{path}: {e}"))
        }
        _ => Err("usage: mpi_schedule [--topology FILE]".into()),
    }
}

/// Rank `r`'s element `i` of input `what` of layer `l`: a small integer,
/// so every matmul and every sum of them is exact in f32.
fn value(what: usize, l: usize, r: usize, i: usize) -> f64 {
    ((what * 7 + l * 5 + r * 3 + i) % 5) as f64 - 2.0
}

fn input(what: usize, l: usize, r: usize, n: usize) -> Vec<f64> {
    (0..n).map(|i| value(what, l, r, i)).collect()
}

/// The update of layer `l` every rank must get: the f32 mean over the
/// world of each rank's `xt · dy` (exact sums, one rounding in the
/// division), added to a zero weight.
fn expected(l: usize, ranks: usize) -> Vec<f64> {
    let w = width(l);
    let mut sum = vec![0.0f64; w * w];
    for r in 0..ranks {
        let (xt, dy) = (input(0, l, r, w * BATCH), input(1, l, r, BATCH * w));
        for i in 0..w {
            for j in 0..w {
                let dot: f64 = (0..BATCH).map(|k| xt[i * BATCH + k] * dy[k * w + j]).sum();
                sum[i * w + j] += dot;
            }
        }
    }
    sum.iter()
        .map(|s| f64::from(*s as f32 / ranks as f32))
        .collect()
}

fn run(rank: usize, n: usize) -> Res<String> {
    let topo = topology()?;
    let id =
        MpiDriver::group_id(&CommunicationId::new("mpi-schedule")).map_err(|e| e.to_string())?;
    let comm = MpiDriver::join_with(id, n, rank, JoinOptions::with_timeout(T))
        .map_err(|e| e.to_string())?;
    let dev = MpiDriver::open(Device::cpu(0)).map_err(|e| e.to_string())?;
    let runtime = RuntimeOptions {
        dispatch: Dispatch::Priority, // each lane by the order the pass chose
        ..Default::default()
    };
    let dc = DriverCommunicator::<MpiDriver>::new(comm, dev, T).with_runtime(runtime);
    // Compares device counts and topologies: a difference fails here.
    let world =
        WorldGroup::with_topology(&dc, [Device::cpu(0)], &topo).map_err(|e| e.to_string())?;
    let cpu = Device::cpu(0);
    let f32s = |shape: &[usize]| TensorType::new(DType::F32, shape);
    let graph = LazyGraph::new("mpi_schedule");
    let mut outs = Vec::new();
    for l in (0..LAYERS).rev() {
        // Input names carry the rank, as a framework's might: the hash
        // leaves names out.
        let wd = width(l);
        let xt = graph.input(&format!("xt{l}.{rank}"), cpu, f32s(&[wd, BATCH]));
        let dy = graph.input(&format!("dy{l}.{rank}"), cpu, f32s(&[BATCH, wd]));
        let grad = xt
            .call_extern(ExternOp::new("matmul", cpu, f32s(&[wd, wd])), &[&dy])
            .map_err(|e| e.to_string())?;
        let mean = world
            .all_reduce(&[grad], ReduceOp::Mean)
            .map_err(|e| e.to_string())?;
        let w = graph.input(&format!("w{l}"), cpu, f32s(&[wd, wd]));
        let g = mean.first().ok_or("all_reduce gave no result")?;
        outs.push((l, w.add(g).map_err(|e| e.to_string())?));
    }
    let refs: Vec<_> = outs.iter().map(|(_, t)| t).collect();
    let mut g = world
        .lower(&refs, world.topology())
        .map_err(|e| e.to_string())?;
    run_pipeline(
        &mut g,
        "schedule-collectives",
        world.topology(),
        Default::default(),
    )
    .map_err(|e| e.to_string())?;
    let chose = g
        .notes()
        .iter()
        .find_map(|n| n.strip_prefix("schedule-collectives: chose "))
        .and_then(|n| n.split(" (").next())
        .map(str::to_string);
    let (Some(chose), Some(_)) = (chose, was_scheduled(&g)) else {
        return Err("schedule-collectives left no note on the step".into());
    };
    let (hash, steps) = (schedule_hash(&g), schedule_steps(&g).len());
    let rows = world.gather_words(&[hash]).map_err(|e| e.to_string())?;
    for (q, row) in rows.iter().enumerate() {
        let theirs = row.first().copied().unwrap_or_default();
        if theirs != hash {
            return Err(format!(
                "rank {q} scheduled the step differently: its schedule hash is {theirs:016x}, this rank's {hash:016x}"
            ));
        }
    }
    let exe = world.compile_lowered(&g).map_err(|e| e.to_string())?;
    let mut inputs = BTreeMap::new();
    for l in 0..LAYERS {
        let (wd, t) = (width(l), |shape: &[usize], v| {
            HostTensor::new(f32s(shape), v)
        });
        inputs.insert(
            format!("xt{l}.{rank}"),
            t(&[wd, BATCH], input(0, l, rank, wd * BATCH)),
        );
        inputs.insert(
            format!("dy{l}.{rank}"),
            t(&[BATCH, wd], input(1, l, rank, BATCH * wd)),
        );
        inputs.insert(format!("w{l}"), t(&[wd, wd], vec![0.0; wd * wd]));
    }
    let got = exe.run_host(&inputs).map_err(|e| e.to_string())?;
    for ((l, _), out) in outs.iter().zip(&got) {
        if out.to_f64() != expected(*l, n) {
            return Err(format!("layer {l}'s update differs from the world's mean"));
        }
    }
    Ok(format!(
        "schedule hash {hash:016x} over {steps} steps ({chose}) equal on all {n} ranks; {LAYERS} layers' updates equal to the world's mean"
    ))
}

fn main() {
    let res = env_usize(&["OMPI_COMM_WORLD_RANK"])
        .and_then(|r| Ok((r, env_usize(&["OMPI_COMM_WORLD_SIZE"])?)));
    let (rank, n) = match res {
        Ok(p) => p,
        Err(msg) => {
            launch::say_err(&format!("FAIL: {msg}"));
            std::process::exit(1);
        }
    };
    // Everything MPI is dropped when `run` returns; the error is printed
    // before finalize, so every rank says it before any exits.
    let res = run(rank, n);
    if let Err(msg) = &res {
        launch::say_err(&format!("FAIL rank {rank} of {n}: {msg}"));
    }
    match (res, MpiDriver::finalize()) {
        (Ok(said), Ok(())) => println!("PROOF rank {rank} of {n}: {said}"),
        (Ok(_), Err(e)) => {
            launch::say_err(&format!("FAIL rank {rank} of {n}: finalize: {e}"));
            std::process::exit(1);
        }
        (Err(_), _) => std::process::exit(1),
    }
}
