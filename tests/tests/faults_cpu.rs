//! Faults on host arenas only: a run that fails halfway (an injected copy,
//! kernel or allocation failure, at every point a run reaches) ends in the
//! exact error text, frees every buffer, and the next run is correct.
//!
//! CPU only on purpose: `scripts/valgrind-check.sh` runs this binary under
//! valgrind, so it must not load a Vulkan or CUDA driver.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use fuel_graph_ext::interp::deterministic_inputs;
use fuel_graph_ext::{text, DType, Device, ReduceOp};
use fuel_runtime::exec::{self, FaultPoint};
use fuel_test_support::assert_no_leaks;
use fuel_test_support::{
    all_reduce_graph, assert_exact_fault_messages, fail_at_every_point, lower,
};

const CPUS: [Device; 4] = [
    Device::cpu(0),
    Device::cpu(1),
    Device::cpu(2),
    Device::cpu(3),
];

#[test]
fn every_fault_in_a_lowered_ring_all_reduce() {
    let g = all_reduce_graph(&CPUS, DType::F32, 64, ReduceOp::Sum);
    let lowered = lower(&g, "lower-collectives{algorithm=ring}");
    let n = fail_at_every_point(&lowered, &CPUS);
    assert!(n > 20, "the ring should have many fault points, found {n}");
}

#[test]
fn every_fault_in_a_lowered_star_mean() {
    // Star with a mean: copies, one n-ary add, a div, copies back.
    let g = all_reduce_graph(&CPUS, DType::I32, 48, ReduceOp::Mean);
    let lowered = lower(&g, "lower-collectives{algorithm=star, reduce_at=cpu:2}");
    fail_at_every_point(&lowered, &CPUS);
}

#[test]
fn faults_in_moves_slices_and_concats() {
    let src = "graph @m {
  %0 = input \"a\" @cpu:0 : i32[6,4]
  %1 = move %0 -> cpu:1 : i32[6,4]
  %2 = slice %1 {axis=1, len=2, start=1} @cpu:1 : i32[6,2]
  %3 = concat %2, %1, %2 {axis=1} @cpu:1 : i32[6,8]
  %4 = copy %3 -> cpu:0 : i32[6,8]
  return %4
}
";
    let g = text::parse(src).unwrap();
    fail_at_every_point(&g, &[Device::cpu(0), Device::cpu(1)]);
}

#[test]
fn the_exact_messages_of_each_kind() {
    assert_exact_fault_messages(DType::F32, Device::cpu(1), "add");
}

#[test]
fn a_fault_is_armed_for_one_run_only() {
    let g = lower(
        &all_reduce_graph(&CPUS[..2], DType::F32, 8, ReduceOp::Max),
        "lower-collectives",
    );
    let exe = exec::compile(&g, &[]).unwrap();
    let inputs = deterministic_inputs(&g);
    exe.inject_fault(FaultPoint::Kernel { nth: 0 });
    assert!(exe.run_host(&inputs).is_err());
    for _ in 0..3 {
        exe.run_host(&inputs).unwrap();
    }
    assert_no_leaks(&exe);
}
