//! Eight threads each build a `DeviceGroup`, record a collective, lower it
//! with `lower-collectives`, compile and run it, all at the same time on the
//! same devices; eight threads share one executable; and rayon tasks run
//! one executable (an all-host one from a pool of its own, one with a GPU
//! device from every thread of the global pool), the two shapes of rayon's
//! issue 592. Every result must be right, and the main thread waits with a
//! deadline, so a deadlock fails the test instead of hanging it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use fuel_graph_ext::interp::{deterministic_inputs, interpret};
use fuel_graph_ext::{text, DType, Device, ReduceOp, TensorType};
use fuel_runtime::exec;
use fuel_test_support::{all_reduce_graph, assert_close, lower};
use fuel_test_support::{assert_no_leaks, devices_or_skip};
use std::collections::BTreeMap;
use std::sync::mpsc;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

/// Generous: the whole test takes about a second here. Only a hang gets near it.
const DEADLINE_S: u64 = 120;

/// `secs` seconds, times `FUEL_TEST_DEADLINE_SCALE` (a whole number, default
/// 1): `scripts/sanitize.sh` raises it under ThreadSanitizer, which runs
/// these tests many times slower.
fn deadline(secs: u64) -> Duration {
    let scale = std::env::var("FUEL_TEST_DEADLINE_SCALE")
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .filter(|s| *s >= 1)
        .unwrap_or(1);
    Duration::from_secs(secs * scale)
}

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
/// all of them until [`DEADLINE_S`] (scaled, see [`deadline`]).
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
    let limit = deadline(DEADLINE_S);
    let until = Instant::now() + limit;
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
                panic!("jobs {stuck:?} did not finish within {limit:?}: deadlock or hang");
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
    // Runs on several threads go side by side, each with its own scratch.
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
    let limit = deadline(DEADLINE_S);
    let until = Instant::now() + limit;
    for _ in 0..8 {
        match rx.recv_timeout(until.saturating_duration_since(Instant::now())) {
            Ok((i, res)) => {
                if let Err(e) = res {
                    panic!("thread {i}: {e}");
                }
            }
            Err(_) => panic!("a thread did not finish within {limit:?}: deadlock or hang"),
        }
    }
    assert_no_leaks(&exe);
}

/// Runs `body` on a thread of its own and waits for it at most `limit`:
/// a deadlock fails the test with `what` instead of hanging it.
fn within(limit: Duration, what: &str, body: impl FnOnce() -> Result<(), String> + Send + 'static) {
    let (tx, rx) = mpsc::channel();
    std::thread::Builder::new()
        .name("bounded".into())
        .spawn(move || {
            let res =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)).unwrap_or_else(|p| {
                    Err(p
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_else(|| "panicked".into()))
                });
            let _ = tx.send(res);
        })
        .unwrap();
    match rx.recv_timeout(limit) {
        Ok(Ok(())) => {}
        Ok(Err(e)) => panic!("{what}: {e}"),
        Err(_) => panic!("{what} did not finish within {limit:?}: deadlock"),
    }
}

/// Elements of the big host add: 24 MiB of f32, well above the size at
/// which the CPU kernels split their work over threads.
const BIG: usize = 6 << 20;

/// `a + b` on `cpu:0` over [`BIG`] f32s, and, when `vulkan` is set, a small
/// independent add on `vulkan:0` (which makes the executable run its steps
/// on one worker thread per device instead of on the caller's thread).
fn big_add(vulkan: bool) -> String {
    let mut src = format!(
        "graph @big {{\n  %0 = input \"a\" @cpu:0 : f32[{BIG}]\n  %1 = input \"b\" @cpu:0 : f32[{BIG}]\n  %2 = add %0, %1 @cpu:0 : f32[{BIG}]\n"
    );
    if vulkan {
        src.push_str("  %3 = input \"c\" @vulkan:0 : f32[4]\n  %4 = add %3, %3 @vulkan:0 : f32[4]\n  return %2, %4\n}\n");
    } else {
        src.push_str("  return %2\n}\n");
    }
    src
}

/// Elements after which the big inputs repeat (it divides [`BIG`]).
const PERIOD: usize = 1024;

/// `n` f32s, element `i` being `f(i % period)`: one period is computed and
/// the rest copied, which keeps building 24 MiB cheap under the sanitizers.
fn f32_tensor(n: usize, period: usize, f: impl Fn(usize) -> f32) -> exec::Tensor {
    let block: Vec<u8> = (0..period).flat_map(|i| f(i).to_le_bytes()).collect();
    let bytes = block.repeat(n / period);
    exec::Tensor::from_bytes(TensorType::new(DType::F32, &[n]), bytes).unwrap()
}

/// The inputs of [`big_add`].
fn big_inputs(vulkan: bool) -> BTreeMap<String, exec::Tensor> {
    let mut inputs = BTreeMap::new();
    inputs.insert("a".to_string(), f32_tensor(BIG, PERIOD, |i| i as f32));
    inputs.insert("b".to_string(), f32_tensor(BIG, PERIOD, |i| (2 * i) as f32));
    if vulkan {
        inputs.insert("c".to_string(), f32_tensor(4, 4, |i| i as f32));
    }
    inputs
}

/// Runs `exe` on `inputs` (from [`big_inputs`]) and checks the sum: every
/// element of `a + b` is `3 * (i mod PERIOD)`.
fn run_big(
    exe: &exec::Executable,
    inputs: &BTreeMap<String, exec::Tensor>,
    vulkan: bool,
) -> Result<(), String> {
    let out = exe.run(inputs).map_err(|e| e.to_string())?;
    let sum = out[0].bytes();
    for i in [0, 1, PERIOD - 1, PERIOD, BIG / 2 + 7, BIG - 1] {
        let got = f32::from_le_bytes(sum[i * 4..i * 4 + 4].try_into().unwrap());
        let want = (3 * (i % PERIOD)) as f32;
        if got != want {
            return Err(format!("element {i} of a + b is {got}, want {want}"));
        }
    }
    if vulkan {
        let got: Vec<f32> = out[1]
            .bytes()
            .chunks(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        if got != [0.0, 2.0, 4.0, 6.0] {
            return Err(format!("c + c on vulkan:0 is {got:?}"));
        }
    }
    Ok(())
}

#[test]
fn runs_from_rayon_tasks_on_a_cpu_only_executable() {
    // Rayon's issue 592: a pool thread that waits inside a host kernel may
    // take another task, here another run of the same executable. That must
    // neither block on something the first run holds nor run the kernel of
    // another caller while it waits.
    let g = text::parse(&big_add(false)).unwrap();
    let exe = Arc::new(exec::compile(&g, &[]).unwrap());
    let shared = exe.clone();
    let inputs = big_inputs(false);
    within(
        deadline(90),
        "runs from the tasks of a 3-thread rayon pool",
        move || {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(3)
                .build()
                .map_err(|e| e.to_string())?;
            pool.install(|| {
                use rayon::prelude::*;
                (0..12)
                    .into_par_iter()
                    .try_for_each(|_| run_big(&shared, &inputs, false))
            })
        },
    );
    assert_no_leaks(&exe);
}

#[test]
fn runs_from_every_thread_of_the_global_pool_with_a_gpu_device() {
    // Every thread of rayon's global pool is inside `run` (waiting for the
    // device workers, or for its turn) while the cpu:0 worker runs a host
    // kernel: that kernel must not need a thread of the global pool.
    let devs = [Device::cpu(0), Device::vulkan(0)];
    if !devices_or_skip(
        "runs_from_every_thread_of_the_global_pool_with_a_gpu_device",
        &devs,
    ) {
        return;
    }
    let g = text::parse(&big_add(true)).unwrap();
    let exe = Arc::new(exec::compile(&g, &[]).unwrap());
    let shared = exe.clone();
    let inputs = big_inputs(true);
    within(
        deadline(90),
        "runs from every thread of rayon's global pool",
        move || {
            use rayon::prelude::*;
            // More tasks than threads, so that every thread takes one.
            let tasks = 4 * rayon::current_num_threads();
            (0..tasks)
                .into_par_iter()
                .try_for_each(|_| run_big(&shared, &inputs, true))
        },
    );
    assert_no_leaks(&exe);
}
