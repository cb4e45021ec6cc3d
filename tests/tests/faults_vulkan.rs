//! Faults with Vulkan devices (lavapipe here): copies in and out of Vulkan,
//! staged vulkan:0 -> cpu:0 -> vulkan:1 hops and shader kernels fail at
//! every point a run reaches; each failure gives the exact injected-fault
//! message, frees every buffer on every device, and the next run is correct.
//! A failed wait for submitted work loses the device instead: that run and
//! every later one fail saying so, and a fresh compile works again.
//! Without Vulkan the tests print `SKIP: <reason>` (a failure under
//! `FUEL_REQUIRE_VULKAN=1`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use fuel_graph_ext::interp::{deterministic_inputs, interpret};
use fuel_graph_ext::{text, DType, Device, ReduceOp};
use fuel_runtime::exec::FaultPoint;
use fuel_test_support::{
    all_reduce_graph, assert_exact_fault_messages, fail_at_every_point, lower,
};
use fuel_test_support::{assert_no_leaks, devices_or_skip};

const MIXED: [Device; 3] = [Device::cpu(0), Device::vulkan(0), Device::vulkan(1)];

#[test]
fn every_fault_in_a_staged_all_reduce() {
    if !devices_or_skip("every_fault_in_a_staged_all_reduce", &MIXED) {
        return;
    }
    for algorithm in ["star", "ring"] {
        let g = all_reduce_graph(&MIXED, DType::F32, 96, ReduceOp::Sum);
        let lowered = lower(&g, &format!("lower-collectives{{algorithm={algorithm}}}"));
        let n = fail_at_every_point(&lowered, &MIXED);
        assert!(n > 10, "{algorithm}: only {n} fault points");
    }
}

#[test]
fn the_exact_messages_on_vulkan() {
    let devs = [Device::cpu(0), Device::vulkan(0)];
    if !devices_or_skip("the_exact_messages_on_vulkan", &devs) {
        return;
    }
    assert_exact_fault_messages(DType::I32, Device::vulkan(0), "mul");
}

#[test]
fn a_failed_wait_loses_the_device_until_it_is_reopened() {
    let devs = [Device::cpu(0), Device::vulkan(0)];
    if !devices_or_skip("a_failed_wait_loses_the_device_until_it_is_reopened", &devs) {
        return;
    }
    let src = "graph @two {
  %0 = input \"a\" @cpu:0 : i32[4096]
  %1 = copy %0 -> vulkan:0 : i32[4096]
  %2 = mul %1, %1 @vulkan:0 : i32[4096]
  %3 = add %2, %1 @vulkan:0 : i32[4096]
  %4 = copy %3 -> cpu:0 : i32[4096]
  return %4
}
";
    let g = text::parse(src).unwrap();
    let inputs = deterministic_inputs(&g);
    let want = interpret(&g, &inputs).unwrap();
    for nth in 0..2 {
        let exe = fuel_test_support::compile_env(&g, &[]).unwrap();
        assert_eq!(exe.run_host(&inputs).unwrap(), want);
        // The wait of the mul's (nth 0) or the add's (nth 1) dispatch fails
        // after its submit, while the GPU may still be running it.
        exe.inject_fault(FaultPoint::Wait { nth });
        let first = exe.run_host(&inputs).unwrap_err().to_string();
        assert_eq!(
            first,
            "vulkan:0 was lost during `dispatch`: vkWaitForFences failed: ERROR_DEVICE_LOST (injected by `Executable::inject_fault`); reopen the device (compile again)"
        );
        assert_no_leaks(&exe);
        // Every later run reports the loss, and frees what it made.
        for _ in 0..2 {
            let later = exe.run_host(&inputs).unwrap_err().to_string();
            assert!(
                later.starts_with("vulkan:0 was lost during `dispatch`: vkWaitForFences failed")
                    && later.contains("runs nothing more")
                    && later.ends_with("reopen the device (compile again)"),
                "{later}"
            );
            assert_no_leaks(&exe);
        }
        // A fresh compile opens the device again, and it works.
        let again = fuel_test_support::compile_env(&g, &[]).unwrap();
        assert_eq!(again.run_host(&inputs).unwrap(), want);
        assert_no_leaks(&again);
        // Dropping the lost one waits for its device and frees what it kept.
        drop(exe);
    }
}
