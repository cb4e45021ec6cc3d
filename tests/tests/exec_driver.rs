//! Collective nodes through the collective drivers, on CPU and Vulkan:
//! `driver_all_reduce` islands run by `HostDriver` in a graph that also uses
//! Vulkan (the threaded runner), with faults and allocator counters; and SPMD
//! `comm.*` nodes in graphs that mix `cpu:0` and `vulkan:0` on every rank,
//! four ranks as threads, compiled once and run several times, checked
//! against `interp::interpret_world`. Without Vulkan the Vulkan tests print
//! `SKIP:` (or fail under `FUEL_REQUIRE_VULKAN=1`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use fuel_collective::{
    CollectiveDriver, CommunicationId, Communicator, Driver, DriverCommunicator, HostDriver,
    JoinOptions,
};
use fuel_graph_ext::interp::{deterministic_inputs, interpret, HostTensor};
use fuel_graph_ext::{DType, Device, Graph, LazyGraph, ReduceOp, TensorType, Topology};
use fuel_runtime::exec::{self, FaultPoint};
use fuel_test_support::ranks::on_ranks;
use fuel_test_support::world::assert_rounds_match_world;
use fuel_test_support::{all_reduce_graph, assert_no_leaks, devices_or_skip, lower_on};
use std::collections::BTreeMap;
use std::time::Duration;

const C0: Device = Device::cpu(0);
const C1: Device = Device::cpu(1);
const C2: Device = Device::cpu(2);
const V0: Device = Device::vulkan(0);

/// An all_reduce of `dtype[n]` shards over `devices` recorded through a
/// `DeviceGroup`, and the same graph lowered with `algorithm=driver`
/// against `topo`.
fn driver_lowered(
    devices: &[Device],
    (dtype, n): (DType, usize),
    op: ReduceOp,
    topo: &Topology,
) -> (Graph, Graph) {
    let original = all_reduce_graph(devices, dtype, n, op);
    let lowered = lower_on(
        &original,
        &fuel_collective::pipeline_with("algorithm=driver"),
        topo,
    );
    (original, lowered)
}

/// A `driver cpu` island inside a group that also holds a Vulkan device: the
/// executor uses worker threads, the island runs through `HostDriver` on
/// one of them, and the Vulkan rank is staged through the host. Results
/// equal the interpreter's; a fault at every kernel and allocation of the
/// run (the island's included) leaves every allocator at zero, and the
/// next run succeeds.
#[test]
fn host_driver_island_in_a_graph_with_vulkan() {
    if !devices_or_skip("host_driver_island_in_a_graph_with_vulkan", &[C0, V0]) {
        return;
    }
    let devs = [C0, C1, C2, V0];
    let topo = Topology::parse("driver cpu\n").unwrap();
    for (dtype, op) in [
        (DType::F32, ReduceOp::Sum),
        (DType::I32, ReduceOp::Max),
        (DType::U32, ReduceOp::Mean),
    ] {
        let (original, lowered) = driver_lowered(&devs, (dtype, 3000), op, &topo);
        let text = fuel_graph_ext::text::print(&lowered);
        assert!(text.contains("= driver_all_reduce."), "{text}");
        let exe = exec::compile_with(&lowered, &devs, &topo).unwrap();
        assert_eq!(exe.driver_islands(), vec![("host", vec![C0, C1, C2])]);
        let inputs = deterministic_inputs(&original);
        let want = interpret(&original, &inputs).unwrap();
        for round in 0..3 {
            assert_eq!(
                exe.run_host(&inputs).unwrap(),
                want,
                "{op} {dtype} round {round}"
            );
            assert_no_leaks(&exe);
        }
        let mut faults = 0;
        for point in (0..40)
            .map(|nth| FaultPoint::Kernel { nth })
            .chain((0..60).map(|nth| FaultPoint::Alloc { nth }))
        {
            exe.inject_fault(point);
            match exe.run_host(&inputs) {
                Ok(got) => assert_eq!(got, want, "{point:?} past the last event"),
                Err(e) => {
                    assert!(e.to_string().contains("injected"), "{point:?}: {e}");
                    faults += 1;
                }
            }
            assert_no_leaks(&exe);
        }
        assert!(faults > 5, "only {faults} faults fired");
        assert_eq!(exe.run_host(&inputs).unwrap(), want, "after the faults");
        assert_no_leaks(&exe);
    }
}

/// A `driver_all_reduce` whose ranks are Vulkan devices has no driver to
/// run it: compile says so before opening anything.
#[test]
fn vulkan_island_is_refused_at_compile_time() {
    let src = "graph @g {\n  %0 = input \"a\" @vulkan:0 : f32[4]\n  %1 = input \"b\" @vulkan:1 : f32[4]\n  %2 = driver_all_reduce.sum %0, %1 {rank=0} @vulkan:0 : f32[4]\n  return %2\n}\n";
    let g = fuel_graph_ext::text::parse(src).unwrap();
    // The verifier needs a driver line for the kind; there is no Vulkan
    // driver, so it refuses first, naming the fix.
    let e = exec::compile(&g, &[]).err().unwrap().to_string();
    assert!(e.contains("driver"), "{e}");
}

/// Rank `rank`'s input in round `round`.
fn rank_input(ty: &TensorType, rank: usize, round: usize) -> HostTensor {
    let n = ty.num_elements();
    HostTensor::new(
        ty.clone(),
        (0..n)
            .map(|i| ((rank * 7 + i * 3 + round * 5) % 11) as f64 - 5.0)
            .collect(),
    )
}

/// Four ranks as threads, each with a graph that computes on `vulkan:0`,
/// meets the others with `comm.*` nodes on `cpu:0` (all_reduce, broadcast,
/// all_gather along an inner axis, reduce_scatter), and goes back to
/// Vulkan. Each rank compiles its graph once (its communicator handed to
/// compile) and runs it three times with new inputs; every run equals the
/// world oracle, and every allocator is back to zero after each run.
#[test]
fn spmd_comm_nodes_in_graphs_that_mix_cpu_and_vulkan_on_4_rank_threads() {
    let test = "spmd_comm_nodes_in_graphs_that_mix_cpu_and_vulkan_on_4_rank_threads";
    if !devices_or_skip(test, &[C0, V0]) {
        return;
    }
    let n = 4;
    let id = HostDriver::group_id(&CommunicationId::new("exec-driver-spmd-vulkan")).unwrap();
    let results = on_ranks(n, Duration::from_secs(60), move |rank| {
        let comm = HostDriver::join_with(
            id,
            n,
            rank,
            JoinOptions::with_timeout(Duration::from_secs(30)),
        )
        .unwrap();
        let c = DriverCommunicator::<HostDriver>::new(
            comm,
            HostDriver::open(C0).unwrap(),
            Duration::from_secs(30),
        );
        let g = LazyGraph::new("rank");
        let ty = TensorType::new(DType::F32, &[2, 8]);
        let x = g.input("x", V0, ty.clone());
        let y = x.mul(&x).unwrap().add(&x).unwrap();
        let on_host = y.copy_to(C0).unwrap();
        let sum = c.all_reduce(&on_host, ReduceOp::Sum).unwrap();
        let b = c.broadcast(&on_host, 2).unwrap();
        let ag = c.all_gather(&sum, 1).unwrap();
        let rs = c.reduce_scatter(&b, ReduceOp::Max, 1).unwrap();
        let back = sum.add(&b).unwrap().copy_to(V0).unwrap();
        let out = back.mul(&y).unwrap();
        let outs = [&out, &ag, &rs];
        let exe = c.compile(&outs).unwrap();
        assert_eq!(exe.communicators(), vec![(c.id(), "host")]);
        let mut graph = g.snapshot();
        graph.set_outputs(outs.iter().map(|t| t.value()).collect());
        let mut rounds = Vec::new();
        for round in 0..3 {
            let input = BTreeMap::from([("x".to_string(), rank_input(&ty, rank, round))]);
            let got = exe.run_host(&input).unwrap();
            for d in exe.devices() {
                assert_eq!(exe.memory(d).unwrap().current, 0, "rank {rank}: {d} leaks");
            }
            rounds.push((input, got));
        }
        (graph, rounds)
    });
    assert!(results
        .iter()
        .all(|r| r.1.iter().all(|(_, got)| got.len() == 3)));
    assert_rounds_match_world(&results);
}

/// A `comm.*` node on a Vulkan device has no driver that carries Vulkan
/// buffers: compile refuses it, naming the communicator's driver.
#[test]
fn comm_node_on_vulkan_is_refused_naming_the_driver() {
    if !devices_or_skip("comm_node_on_vulkan_is_refused_naming_the_driver", &[V0]) {
        return;
    }
    let id = HostDriver::group_id(&CommunicationId::new("exec-driver-vulkan-refused")).unwrap();
    let comm =
        HostDriver::join_with(id, 1, 0, JoinOptions::with_timeout(Duration::from_secs(5))).unwrap();
    let c = DriverCommunicator::<HostDriver>::new(
        comm,
        HostDriver::open(C0).unwrap(),
        Duration::from_secs(5),
    );
    let g = LazyGraph::new("rank");
    let x = g.input("x", V0, TensorType::new(DType::F32, &[4]));
    let s = c.all_reduce(&x, ReduceOp::Sum).unwrap();
    let e = c.compile(&[&s]).err().unwrap().to_string();
    assert!(
        e.contains("is a host communicator, which carries cpu devices"),
        "{e}"
    );
}

/// `run_into` hands a `comm.*` step the caller's previous output tensor to
/// write into: after the first run the reduce_scatter's result (sliced out
/// of an all-reduce on this driver, which no peer reads) lands in the bytes
/// the caller already holds, every run still equals the world oracle, and a
/// tensor the caller keeps a clone of is never overwritten. The
/// all_reduce's and all_gather's results are read by the peer rank's
/// thread, whose reference may outlive the step by a moment (it did under
/// AddressSanitizer), and then the runner takes a new buffer: correct, not
/// in place, so this test does not require it of them.
#[test]
fn spmd_results_are_written_into_the_callers_output_tensors() {
    let n = 2;
    let id = HostDriver::group_id(&CommunicationId::new("exec-driver-spmd-run-into")).unwrap();
    let results = on_ranks(n, Duration::from_secs(60), move |rank| {
        let opts = JoinOptions::with_timeout(Duration::from_secs(30));
        let comm = HostDriver::join_with(id, n, rank, opts).unwrap();
        let c = DriverCommunicator::<HostDriver>::new(
            comm,
            HostDriver::open(C0).unwrap(),
            Duration::from_secs(30),
        );
        let g = LazyGraph::new("rank");
        let ty = TensorType::new(DType::F32, &[4, 8]);
        let x = g.input("x", C0, ty.clone());
        let sum = c.all_reduce(&x, ReduceOp::Sum).unwrap();
        let ag = c.all_gather(&x, 0).unwrap();
        let rs = c.reduce_scatter(&x, ReduceOp::Max, 0).unwrap();
        let outs = [&sum, &ag, &rs];
        let exe = c.compile(&outs).unwrap();
        let mut graph = g.snapshot();
        graph.set_outputs(outs.iter().map(|t| t.value()).collect());
        let mut tensors = Vec::new();
        let mut rounds = Vec::new();
        let mut first: Vec<*const u8> = Vec::new();
        let mut kept = None;
        for round in 0..4 {
            let input = BTreeMap::from([("x".to_string(), rank_input(&ty, rank, round))]);
            let as_tensors = input
                .iter()
                .map(|(k, v)| (k.clone(), fuel_graph_ext::Tensor::from_host(v)))
                .collect();
            exe.run_into(&as_tensors, &mut tensors).unwrap();
            let ptrs: Vec<*const u8> = tensors.iter().map(|t| t.bytes().as_ptr()).collect();
            if round == 0 {
                first = ptrs;
            } else {
                assert_eq!(
                    ptrs[2], first[2],
                    "rank {rank}, round {round}: reduce_scatter in place"
                );
            }
            // The caller keeps the all_gather's tensor of round 1.
            if round == 1 {
                kept = Some((tensors[1].clone(), tensors[1].to_host()));
            }
            for d in exe.devices() {
                assert_eq!(exe.memory(d).unwrap().current, 0, "rank {rank}: {d} leaks");
            }
            let got: Vec<HostTensor> = tensors.iter().map(|t| t.to_host()).collect();
            rounds.push((input, got));
        }
        let (tensor, then) = kept.unwrap();
        assert!(
            tensor.to_host().check_same(&then).is_ok(),
            "rank {rank}: a tensor the caller kept was overwritten"
        );
        (graph, rounds)
    });
    assert_rounds_match_world(&results);
}
