//! Soak: one compiled `Executable` runs thousands of times. After every run
//! each device's allocator is back to zero bytes and buffers; the peak never
//! passes the bytes of all the graph's values on that device; the process
//! RSS grows by less than [`RSS_GROWTH_BOUND`] between the warm-up point and
//! the end; and sampled results equal the interpreter's.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use fuel_graph_ext::interp::{deterministic_inputs, interpret};
use fuel_graph_ext::{DType, Device, ReduceOp};
use fuel_runtime::exec;
use fuel_test_support::devices_or_skip;
use fuel_test_support::{all_reduce_graph, all_values_bytes, assert_close, lower, rss_bytes};
use std::sync::Mutex;

/// RSS may grow this much after warm-up (allocator caches, thread stacks
/// touched late); a per-run leak of even 2 KiB over 9,000 runs passes it.
const RSS_GROWTH_BOUND: usize = 16 << 20;

/// Runs the all-reduce of `devices` `runs` times; RSS is sampled after
/// `warmup` runs and at the end.
/// RSS is per process: one test at a time, and the lock is taken before a
/// test opens any device (loading the Vulkan driver in one test while the
/// other measures would count the driver as growth).
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner())
}

fn soak(devices: &[Device], algorithm: &str, n: usize, runs: usize, warmup: usize) {
    let g = all_reduce_graph(devices, DType::F32, n, ReduceOp::Sum);
    let lowered = lower(&g, &format!("lower-collectives{{algorithm={algorithm}}}"));
    let exe = exec::compile(&lowered, &[]).unwrap();
    let inputs = deterministic_inputs(&g);
    let want = interpret(&g, &inputs).unwrap();
    let bounds: Vec<(Device, usize)> = exe
        .devices()
        .into_iter()
        .map(|d| (d, all_values_bytes(&lowered, d)))
        .collect();
    let mut rss_after_warmup = 0;
    let mut peak_after_warmup = Vec::new();
    for run in 1..=runs {
        let got = exe
            .run_host(&inputs)
            .unwrap_or_else(|e| panic!("run {run}: {e}"));
        for &(d, bound) in &bounds {
            let m = exe.memory(d).unwrap();
            assert_eq!(
                (m.current, m.live_buffers),
                (0, 0),
                "run {run}: {d} still holds {} bytes in {} buffers",
                m.current,
                m.live_buffers
            );
            assert!(
                m.peak <= bound,
                "run {run}: {d} peaked at {} bytes, above all its values together ({bound})",
                m.peak
            );
        }
        if run % 500 == 0 || run == 1 {
            assert_close(&got, &want, &format!("run {run}"));
        }
        if run == warmup {
            rss_after_warmup = rss_bytes();
            peak_after_warmup = bounds
                .iter()
                .map(|(d, _)| exe.memory(*d).unwrap().peak)
                .collect();
        }
    }
    let rss_end = rss_bytes();
    let growth = rss_end.saturating_sub(rss_after_warmup);
    println!(
        "soak {devices:?} {algorithm}: {runs} runs, RSS {} KiB after {warmup}, {} KiB at the end",
        rss_after_warmup >> 10,
        rss_end >> 10
    );
    assert!(
        growth < RSS_GROWTH_BOUND,
        "RSS grew by {growth} bytes between run {warmup} and run {runs} (bound {RSS_GROWTH_BOUND})"
    );
    let peak_end: Vec<usize> = bounds
        .iter()
        .map(|(d, _)| exe.memory(*d).unwrap().peak)
        .collect();
    println!("peaks after warm-up {peak_after_warmup:?}, at the end {peak_end:?}");
}

#[test]
fn ten_thousand_runs_on_four_cpus() {
    let _one = one_at_a_time();
    let cpus = [
        Device::cpu(0),
        Device::cpu(1),
        Device::cpu(2),
        Device::cpu(3),
    ];
    // Star keeps a run to 11 steps, so 10,000 runs take about 5 s in debug;
    // the fault tests cover the ring's longer schedules.
    soak(&cpus, "star", 256, 10_000, 1_000);
}

/// Fewer runs on Vulkan: every copy and kernel there submits a command
/// buffer and waits on a fence, and on a real driver (or a loaded CI
/// machine) that costs far more than a memcpy; lavapipe here does 500 runs
/// in about 0.3 s. 2,000 runs still show that nothing accumulates per run.
#[test]
fn two_thousand_runs_on_cpu_and_two_vulkan_devices() {
    let _one = one_at_a_time();
    let devs = [Device::cpu(0), Device::vulkan(0), Device::vulkan(1)];
    if !devices_or_skip("two_thousand_runs_on_cpu_and_two_vulkan_devices", &devs) {
        return;
    }
    soak(&devs, "star", 256, 2_000, 500);
}
