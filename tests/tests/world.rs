//! World collectives (`fuel_collective::WorldGroup`): P processes × k
//! local devices, here P threads joined through `HostDriver` (the MPI
//! driver runs the same graphs across processes: `scripts/mpi-check.sh`).
//! Each process records all five collectives lazily, lowers and compiles
//! its graph, and runs it; every result is checked bit for bit against the
//! flat group's meaning over P·k ranks in (process, local index) order,
//! on inputs whose folds are exact in any order, and the processes' graphs
//! are checked against `interp::interpret_world`. Each process's graph is
//! also recorded through a `WorldProcess` built without the communicator
//! (as the world goldens are) and must lower to the same text. A world
//! whose processes bring different device counts fails on every process;
//! a `WorldProcess` past its world is refused.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use fuel_collective::world_cost::driver_kind;
use fuel_collective::{
    CollectiveDriver, CollectiveError, CommunicationId, Driver, DriverCommunicator, HostDriver,
    JoinOptions, WorldGroup, WorldProcess,
};
use fuel_graph_ext::interp::HostTensor;
use fuel_graph_ext::{text, DType, Device, DeviceKind, Graph, LazyTensor, ReduceOp, Topology};
use fuel_test_support::devices_or_skip;
use fuel_test_support::world::{check_flat, check_world, record, Case};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(60);
const ROWS: usize = 8;

/// A process's graph (outputs set), inputs and results.
type Run = (Graph, BTreeMap<String, HostTensor>, Vec<HostTensor>);

/// One process: records `case`, compiles, runs. Returns its graph (with
/// the outputs set), its inputs and its results, one per local device
/// that gets one. Also records the same case through a `WorldProcess`
/// built from P, p and the communicator's id alone (as the world goldens
/// are) and checks that it lowers to the same graph, byte for byte.
fn process(
    comm: &DriverCommunicator<HostDriver>,
    devices: &[Device],
    case: Case,
    d: DType,
) -> Result<Run, CollectiveError> {
    let world = WorldGroup::new(comm, devices.iter().copied())?;
    let p = world.process();
    let name = format!("world-p{p}");
    let rec = record(&world, &name, case, d, ROWS)?;
    let refs: Vec<&LazyTensor> = rec.outputs.iter().collect();
    let topo = Arc::new(Topology::default());
    let lowered = world.lower(&refs, topo.clone())?;
    let exe = world.compile_lowered(&lowered)?;
    let got = exe
        .run_host(&rec.inputs)
        .map_err(|e| CollectiveError::Driver(e.to_string()))?;
    let kind = driver_kind(&topo, devices);
    let alone = WorldProcess::new(
        world.processes(),
        p,
        comm.id(),
        devices.iter().copied(),
        kind,
        &topo,
    )?;
    let again = record(&alone, &name, case, d, ROWS)?;
    let refs: Vec<&LazyTensor> = again.outputs.iter().collect();
    assert_eq!(
        text::print(&alone.lower(&refs, topo)?),
        text::print(&lowered),
        "process {p}: a WorldProcess records another graph than the WorldGroup"
    );
    Ok((rec.snapshot(), rec.inputs, got))
}

/// Runs `case` on P threads × `devices`; checks every result against the
/// flat meaning and the graphs against `interpret_world`.
fn world(name: &str, p: usize, devices: &[Device], case: Case, d: DType) {
    let id = HostDriver::group_id(&CommunicationId::new(name)).unwrap();
    let k = devices.len();
    let handles: Vec<_> = (0..p)
        .map(|rank| {
            let devices = devices.to_vec();
            std::thread::spawn(move || {
                let comm =
                    HostDriver::join_with(id, p, rank, JoinOptions::with_timeout(WAIT)).unwrap();
                let dev = HostDriver::open(Device::cpu(0)).unwrap();
                let c = DriverCommunicator::<HostDriver>::new(comm, dev, WAIT);
                process(&c, &devices, case, d)
            })
        })
        .collect();
    let runs: Vec<_> = handles
        .into_iter()
        .map(|h| h.join().unwrap().unwrap_or_else(|e| panic!("{name}: {e}")))
        .collect();
    let n = p * k;
    for (q, (_, _, got)) in runs.iter().enumerate() {
        check_flat(case, d, (n, k, ROWS), q, got).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
    let graphs: Vec<Graph> = runs.iter().map(|r| r.0.clone()).collect();
    let inputs: Vec<_> = runs.iter().map(|r| r.1.clone()).collect();
    let oracle =
        check_world(&graphs, &inputs, case, d, (k, ROWS)).unwrap_or_else(|e| panic!("{name}: {e}"));
    for (q, (o, r)) in oracle.iter().zip(&runs).enumerate() {
        for (a, b) in r.2.iter().zip(o) {
            a.check_same(b)
                .unwrap_or_else(|e| panic!("{name}: process {q} against interpret_world: {e}"));
        }
    }
}

fn every_case(k: usize, p: usize) -> Vec<Case> {
    let n = p * k;
    let mut cases: Vec<Case> = ReduceOp::ALL
        .iter()
        .map(|op| Case::AllReduce(*op))
        .collect();
    cases.extend([
        Case::Reduce(ReduceOp::Sum, n - 1),
        Case::Reduce(ReduceOp::Mean, 1),
        Case::Broadcast(n - 1),
        Case::Broadcast(0),
        Case::AllGather,
        Case::ReduceScatter(ReduceOp::Sum),
        Case::ReduceScatter(ReduceOp::Mean),
        Case::ReduceScatter(ReduceOp::Max),
    ]);
    cases
}

#[test]
fn two_processes_of_one_cpu() {
    let devs = [Device::cpu(0)];
    for (c, case) in every_case(1, 2).into_iter().enumerate() {
        for d in [DType::I32, DType::F32] {
            world(&format!("world-2x1-{c}-{d}"), 2, &devs, case, d);
        }
    }
}

#[test]
fn two_processes_of_two_cpus() {
    let devs = [Device::cpu(0), Device::cpu(1)];
    for (c, case) in every_case(2, 2).into_iter().enumerate() {
        for d in [DType::I32, DType::F32, DType::U8] {
            world(&format!("world-2x2-{c}-{d}"), 2, &devs, case, d);
        }
    }
}

#[test]
fn four_processes_of_a_cpu_and_a_vulkan_device() {
    let devs = [Device::cpu(0), Device::vulkan(0)];
    if !devices_or_skip("four_processes_of_a_cpu_and_a_vulkan_device", &devs) {
        return;
    }
    // ROWS = 8 splits over 4 × 2 ranks.
    for (c, case) in every_case(2, 4).into_iter().enumerate() {
        world(&format!("world-4x2v-{c}"), 4, &devs, case, DType::F32);
    }
}

#[test]
fn processes_with_different_device_counts_fail_on_every_process() {
    let id = HostDriver::group_id(&CommunicationId::new("world-disagree")).unwrap();
    let handles: Vec<_> = (0..3)
        .map(|rank| {
            std::thread::spawn(move || {
                let comm =
                    HostDriver::join_with(id, 3, rank, JoinOptions::with_timeout(WAIT)).unwrap();
                let c = DriverCommunicator::<HostDriver>::new(
                    comm,
                    HostDriver::open(Device::cpu(0)).unwrap(),
                    WAIT,
                );
                let devs: Vec<Device> = (0..if rank == 2 { 1 } else { 2 })
                    .map(Device::cpu)
                    .collect();
                WorldGroup::new(&c, devs).err().map(|e| e.to_string())
            })
        })
        .collect();
    let errs: Vec<Option<String>> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    assert_eq!(
        errs[0].as_deref(),
        Some("process 0 has 2 local device(s) but process 2 has 1; every process of a world group must bring the same number of devices")
    );
    assert!(
        errs[1]
            .as_deref()
            .is_some_and(|e| e.contains("process 2 has 1")),
        "{errs:?}"
    );
    assert!(
        errs[2]
            .as_deref()
            .is_some_and(|e| e.contains("process 2 has 1 local device(s) but process 0 has 2")),
        "{errs:?}"
    );
}

#[test]
fn a_world_process_past_its_world_is_refused() {
    let topo = Topology::default();
    let e = WorldProcess::new(2, 2, 1, [Device::cpu(0)], DeviceKind::Cpu, &topo)
        .err()
        .map(|e| e.to_string());
    assert_eq!(
        e.as_deref(),
        Some("process 2 is out of range for a world of 2 process(es); number the processes 0 to P - 1, with P at least 1")
    );
    assert!(WorldProcess::new(0, 0, 1, [Device::cpu(0)], DeviceKind::Cpu, &topo).is_err());
    assert!(WorldProcess::new(1, 0, 1, [Device::cpu(0)], DeviceKind::Cpu, &topo).is_ok());
}
