//! Eight threads each build a `DeviceGroup`, record a collective, lower it
//! with `lower-collectives`, compile and run it, all at the same time on the
//! same devices. Every result must equal the interpreter's, and the main
//! thread waits with a deadline, so a deadlock fails the test instead of
//! hanging it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use fuel_graph_ext::interp::{deterministic_inputs, interpret};
use fuel_graph_ext::{exec, DType, Device, ReduceOp};
use fuel_tests::{assert_no_leaks, devices_or_skip};
use std::sync::mpsc;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};
use support::{all_reduce_graph, assert_close, lower};

/// Generous: the whole test takes about a second here. Only a hang gets near it.
const DEADLINE: Duration = Duration::from_secs(120);

/// One thread's work.
#[derive(Clone, Debug)]
struct Job {
    devices: Vec<Device>,
    dtype: DType,
    op: ReduceOp,
    algorithm: &'static str,
    n: usize,
    runs: usize,
}

/// Builds, lowers, compiles and runs `job` `job.runs` times; checks every
/// result against the interpreter on the graph before lowering.
fn work(job: &Job, start: &Barrier) -> Result<(), String> {
    start.wait();
    let g = all_reduce_graph(&job.devices, job.dtype, job.n, job.op);
    let lowered = lower(
        &g,
        &format!("lower-collectives{{algorithm={}}}", job.algorithm),
    );
    // An empty list opens what the lowered graph uses (staging CPUs too).
    let exe = exec::compile(&lowered, &[]).map_err(|e| e.to_string())?;
    let inputs = deterministic_inputs(&g);
    let want = interpret(&g, &inputs).map_err(|e| e.to_string())?;
    for run in 0..job.runs {
        let got = exe
            .run_host(&inputs)
            .map_err(|e| format!("run {run}: {e}"))?;
        assert_close(&got, &want, &format!("{job:?} run {run}"));
    }
    assert_no_leaks(&exe);
    Ok(())
}

/// Runs every job on its own thread, all released at once, and waits for
/// all of them until [`DEADLINE`].
fn run_all(jobs: Vec<Job>) {
    let start = Arc::new(Barrier::new(jobs.len()));
    let (tx, rx) = mpsc::channel();
    for (i, job) in jobs.iter().cloned().enumerate() {
        let (tx, start) = (tx.clone(), start.clone());
        std::thread::Builder::new()
            .name(format!("job-{i}"))
            .spawn(move || {
                let res =
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| work(&job, &start)))
                        .unwrap_or_else(|p| {
                            Err(p
                                .downcast_ref::<String>()
                                .cloned()
                                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                                .unwrap_or_else(|| "panicked".into()))
                        });
                let _ = tx.send((i, res));
            })
            .unwrap();
    }
    drop(tx);
    let until = Instant::now() + DEADLINE;
    let mut done = vec![false; jobs.len()];
    let mut failures = Vec::new();
    for _ in 0..jobs.len() {
        let left = until.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok((i, res)) => {
                done[i] = true;
                if let Err(e) = res {
                    failures.push(format!("job {i} ({:?}): {e}", jobs[i]));
                }
            }
            Err(_) => {
                let stuck: Vec<usize> = (0..jobs.len()).filter(|i| !done[*i]).collect();
                panic!("jobs {stuck:?} did not finish within {DEADLINE:?}: deadlock or hang");
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

fn cpus(n: u32) -> Vec<Device> {
    (0..n).map(Device::cpu).collect()
}

#[test]
fn eight_threads_on_shared_cpu_devices() {
    let algorithms = ["ring", "star", "tree", "hierarchical"];
    let jobs = (0..8)
        .map(|i| Job {
            // Every thread uses cpu:0 and cpu:1; some add cpu:2 and cpu:3.
            devices: cpus(2 + (i as u32 % 3)),
            dtype: [DType::F32, DType::I32][i % 2],
            op: [ReduceOp::Sum, ReduceOp::Max, ReduceOp::Mean][i % 3],
            algorithm: algorithms[i % 4],
            n: 1000 + 37 * i,
            runs: 50,
        })
        .collect();
    run_all(jobs);
}

#[test]
fn eight_threads_on_shared_cpu_and_vulkan_devices() {
    let v = [Device::cpu(0), Device::vulkan(0), Device::vulkan(1)];
    if !devices_or_skip("eight_threads_on_shared_cpu_and_vulkan_devices", &v) {
        return;
    }
    let groups = [
        vec![Device::cpu(0), Device::vulkan(0)],
        vec![Device::vulkan(0), Device::vulkan(1)],
        vec![Device::cpu(0), Device::vulkan(0), Device::vulkan(1)],
        vec![Device::cpu(1), Device::vulkan(1), Device::cpu(0)],
    ];
    let algorithms = ["star", "ring", "tree", "auto"];
    let jobs = (0..8)
        .map(|i| Job {
            devices: groups[i % 4].clone(),
            // f32 and i32 have kernels on every backend; sums of the small
            // deterministic inputs are exact, a mean divides within tolerance.
            dtype: [DType::F32, DType::I32][i % 2],
            op: [ReduceOp::Sum, ReduceOp::Min, ReduceOp::Mean, ReduceOp::Max][(i / 2) % 4],
            algorithm: algorithms[i % 4],
            n: 3000 + 11 * i,
            runs: 25,
        })
        .collect();
    run_all(jobs);
}

#[test]
fn one_executable_shared_by_eight_threads() {
    // `run` takes one run at a time; callers on other threads wait their turn.
    let devs = cpus(3);
    let g = all_reduce_graph(&devs, DType::F32, 500, ReduceOp::Sum);
    let lowered = lower(&g, "lower-collectives{algorithm=ring}");
    let exe = Arc::new(exec::compile(&lowered, &[]).unwrap());
    let inputs = Arc::new(deterministic_inputs(&g));
    let want = Arc::new(interpret(&g, &inputs).unwrap());
    let (tx, rx) = mpsc::channel();
    for i in 0..8 {
        let (exe, inputs, want, tx) = (exe.clone(), inputs.clone(), want.clone(), tx.clone());
        std::thread::spawn(move || {
            let res = (0..25).try_for_each(|run| {
                let got = exe
                    .run_host(&inputs)
                    .map_err(|e| format!("run {run}: {e}"))?;
                got.iter()
                    .zip(want.iter())
                    .try_for_each(|(g, w)| g.check_same(w))
                    .map_err(|e| format!("run {run}: {e}"))
            });
            let _ = tx.send((i, res));
        });
    }
    drop(tx);
    let until = Instant::now() + DEADLINE;
    for _ in 0..8 {
        match rx.recv_timeout(until.saturating_duration_since(Instant::now())) {
            Ok((i, res)) => {
                if let Err(e) = res {
                    panic!("thread {i}: {e}");
                }
            }
            Err(_) => panic!("a thread did not finish within {DEADLINE:?}: deadlock or hang"),
        }
    }
    assert_no_leaks(&exe);
}
