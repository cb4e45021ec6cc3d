//! Faults with Vulkan devices (lavapipe here): copies in and out of Vulkan,
//! staged vulkan:0 -> cpu:0 -> vulkan:1 hops and shader kernels fail at
//! every point a run reaches; each failure gives the exact injected-fault
//! message, frees every buffer on every device, and the next run is correct.
//! Without Vulkan the tests print `SKIP: <reason>` (a failure under
//! `FUEL_REQUIRE_VULKAN=1`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use fuel_graph_ext::{DType, Device, ReduceOp};
use fuel_test_support::devices_or_skip;
use fuel_test_support::{
    all_reduce_graph, assert_exact_fault_messages, fail_at_every_point, lower,
};

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
    let src = "graph @one {
  %0 = input \"a\" @cpu:0 : i32[16]
  %1 = copy %0 -> vulkan:0 : i32[16]
  %2 = mul %1, %1 @vulkan:0 : i32[16]
  return %2
}
";
    assert_exact_fault_messages(src, Device::vulkan(0), "mul");
}
