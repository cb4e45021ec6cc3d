//! World collectives (`fuel_collective::WorldGroup`): P processes × k
//! local devices, here P threads joined through `HostDriver` (the MPI
//! driver runs the same graphs across processes: `scripts/mpi-check.sh`).
//! Each process records all five collectives lazily, lowers and compiles
//! its graph, and runs it; every result is checked bit for bit against the
//! flat group's meaning over P·k ranks in (process, local index) order,
//! on inputs whose folds are exact in any order, and the processes' graphs
//! are checked against `interp::interpret_world`. A world whose processes
//! bring different device counts fails on every process.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use fuel_collective::{
    CollectiveDriver, CollectiveError, CommunicationId, Driver, DriverCommunicator, HostDriver,
    JoinOptions, WorldGroup,
};
use fuel_graph_ext::interp::{interpret_world, HostTensor};
use fuel_graph_ext::{DType, Device, Graph, LazyGraph, LazyTensor, ReduceOp, TensorType, Topology};
use fuel_test_support::devices_or_skip;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(60);
const ROWS: usize = 8;

/// Global rank `g`'s element `j`: small integers, or halves for floats,
/// so every fold of up to 8 of them is exact in any order.
fn value(d: DType, g: usize, j: usize) -> f64 {
    let k = ((g * 3 + j * 5) % 7) as f64;
    match d {
        DType::F32 | DType::F64 | DType::F16 | DType::BF16 => k / 2.0 - 1.5,
        DType::U8 | DType::U16 | DType::U32 | DType::U64 | DType::Bool => k,
        _ => k - 3.0,
    }
}

fn shard(d: DType, g: usize) -> HostTensor {
    let ty = TensorType::new(d, &[ROWS, 2]);
    HostTensor::new(ty, (0..ROWS * 2).map(|j| value(d, g, j)).collect())
}

fn fold(d: DType, op: ReduceOp, n: usize, j: usize) -> f64 {
    let v: Vec<f64> = (0..n).map(|g| value(d, g, j)).collect();
    match op {
        ReduceOp::Sum => v.iter().sum(),
        ReduceOp::Product => v.iter().product(),
        ReduceOp::Max => v.iter().cloned().fold(f64::MIN, f64::max),
        ReduceOp::Min => v.iter().cloned().fold(f64::MAX, f64::min),
        ReduceOp::Mean => {
            let m = v.iter().sum::<f64>() / n as f64;
            if matches!(d, DType::F32 | DType::F64) {
                m
            } else {
                m.trunc()
            }
        }
    }
}

/// What one collective gives global rank `g` of `n`, in the flat group.
#[derive(Clone, Copy, Debug)]
enum Case {
    AllReduce(ReduceOp),
    Reduce(ReduceOp, usize),
    Broadcast(usize),
    AllGather,
    ReduceScatter(ReduceOp),
}

fn expected(case: Case, d: DType, n: usize, g: usize) -> HostTensor {
    let row = |vals: Vec<f64>, rows: usize| HostTensor::new(TensorType::new(d, &[rows, 2]), vals);
    match case {
        Case::AllReduce(op) => row((0..ROWS * 2).map(|j| fold(d, op, n, j)).collect(), ROWS),
        Case::Reduce(op, _) => row((0..ROWS * 2).map(|j| fold(d, op, n, j)).collect(), ROWS),
        Case::Broadcast(root) => shard(d, root),
        Case::AllGather => row(
            (0..n)
                .flat_map(|q| (0..ROWS * 2).map(move |j| value(d, q, j)))
                .collect(),
            ROWS * n,
        ),
        Case::ReduceScatter(op) => {
            let piece = ROWS / n * 2;
            row(
                (g * piece..(g + 1) * piece)
                    .map(|j| fold(d, op, n, j))
                    .collect(),
                ROWS / n,
            )
        }
    }
}

/// A process's graph (outputs set), inputs and results.
type Run = (Graph, BTreeMap<String, HostTensor>, Vec<HostTensor>);

/// One process: records `case`, compiles, runs. Returns its graph (with
/// the outputs set), its inputs and its results, one per local device
/// that gets one.
fn process(
    comm: &DriverCommunicator<HostDriver>,
    devices: &[Device],
    case: Case,
    d: DType,
) -> Result<Run, CollectiveError> {
    let world = WorldGroup::new(comm, devices.iter().copied())?;
    let (p, k) = (world.process(), devices.len());
    let g = LazyGraph::new(&format!("world-p{p}"));
    let ty = TensorType::new(d, &[ROWS, 2]);
    let mut inputs = BTreeMap::new();
    let shards: Vec<LazyTensor> = devices
        .iter()
        .enumerate()
        .map(|(i, dev)| {
            let name = format!("s{i}");
            inputs.insert(name.clone(), shard(d, p * k + i));
            g.input(&name, *dev, ty.clone())
        })
        .collect();
    let outs: Vec<LazyTensor> = match case {
        Case::AllReduce(op) => world.all_reduce(&shards, op)?,
        Case::Reduce(op, root) => vec![world.reduce(&shards, op, root)?],
        Case::Broadcast(root) => {
            let i = if root / k == p { root % k } else { 0 };
            world.broadcast(&shards[i], root)?
        }
        Case::AllGather => world.all_gather(&shards, 0)?,
        Case::ReduceScatter(op) => world.reduce_scatter(&shards, op, 0)?,
    };
    let refs: Vec<&LazyTensor> = outs.iter().collect();
    let exe = world.compile(&refs, Arc::new(Topology::default()))?;
    let got = exe
        .run_host(&inputs)
        .map_err(|e| CollectiveError::Driver(e.to_string()))?;
    let mut graph = g.snapshot();
    graph.set_outputs(outs.iter().map(LazyTensor::value).collect());
    Ok((graph, inputs, got))
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
        // A reduce gives one result per process: on the root's device on
        // the root's process, on the hub elsewhere.
        let ranks = if matches!(case, Case::Reduce(..)) {
            1
        } else {
            k
        };
        let want: Vec<HostTensor> = (0..ranks)
            .map(|i| expected(case, d, n, q * k + i))
            .collect();
        assert_eq!(got.len(), want.len(), "{name}: process {q} result count");
        for (i, (a, b)) in got.iter().zip(&want).enumerate() {
            a.check_same(b)
                .unwrap_or_else(|e| panic!("{name} {case:?} {d}: process {q} result {i}: {e}"));
        }
    }
    let graphs: Vec<Graph> = runs.iter().map(|r| r.0.clone()).collect();
    let inputs: Vec<_> = runs.iter().map(|r| r.1.clone()).collect();
    let oracle = interpret_world(&graphs, &inputs)
        .unwrap_or_else(|e| panic!("{name}: interpret_world: {e}"));
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
