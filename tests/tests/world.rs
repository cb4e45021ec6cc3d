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
//! whose processes bring different device counts or topologies fails on
//! every process; a `WorldProcess` past its world is refused. A
//! data-parallel step with extern matmuls, scheduled by
//! `schedule-collectives` on every process, has the same schedule hash on
//! each.

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

/// `threads` processes on `HostDriver`, each running `f` with its rank and
/// its communicator; their results in rank order.
fn world_of<T: Send + 'static>(
    name: &str,
    threads: usize,
    f: fn(usize, &DriverCommunicator<HostDriver>) -> T,
) -> Vec<T> {
    let id = HostDriver::group_id(&CommunicationId::new(name)).unwrap();
    let handles: Vec<_> = (0..threads)
        .map(|rank| {
            std::thread::spawn(move || {
                let comm =
                    HostDriver::join_with(id, threads, rank, JoinOptions::with_timeout(WAIT))
                        .unwrap();
                let dev = HostDriver::open(Device::cpu(0)).unwrap();
                f(
                    rank,
                    &DriverCommunicator::<HostDriver>::new(comm, dev, WAIT),
                )
            })
        })
        .collect();
    handles.into_iter().map(|h| h.join().unwrap()).collect()
}

#[test]
fn processes_with_different_topologies_fail_on_every_process() {
    let errs = world_of("world-topology", 3, |rank, c| {
        // Process 1 was given another topology file.
        let bandwidth = if rank == 1 { 20 } else { 10 };
        let file = format!("link host-host bandwidth={bandwidth} latency=1\n");
        let topo = Topology::parse(&file).unwrap();
        WorldGroup::with_topology(c, [Device::cpu(0), Device::cpu(1)], &topo)
            .err()
            .map(|e| (e.code(), e.to_string()))
    });
    for (p, peer) in [(0, 1), (1, 0), (2, 1)] {
        let (code, msg) = errs[p]
            .clone()
            .unwrap_or_else(|| panic!("process {p} joined"));
        assert_eq!(code, Some("E0442"), "{msg}");
        let want = format!("process {p} plans from another topology than process {peer} ");
        assert!(msg.starts_with(&want), "{msg}");
        assert!(
            msg.contains("give every process the same topology file"),
            "{msg}"
        );
    }
    // Different device counts are reported first (E0440).
    let errs = world_of("world-topology-count", 2, |rank, c| {
        let topo = Topology::parse(&format!(
            "link host-host bandwidth={} latency=1\n",
            10 + rank
        ))
        .unwrap();
        let devs: Vec<Device> = (0..1 + rank as u32).map(Device::cpu).collect();
        WorldGroup::with_topology(c, devs, &topo)
            .err()
            .and_then(|e| e.code())
    });
    assert_eq!(errs, [Some("E0440"), Some("E0440")]);
}

/// A data-parallel step recorded by process `rank` of a world over
/// [cpu:0, cpu:1]: per layer (of its own width) each local device's
/// gradient is an extern matmul, all_reduced (Mean) over the world, then
/// added to the weights; lowered and scheduled with the agreed topology.
/// Its schedule hash and the hashes every process gathered.
fn scheduled_step(rank: usize, c: &DriverCommunicator<HostDriver>) -> (u64, Vec<Vec<u64>>) {
    use fuel_graph_ext::op::ExternOp;
    let devs = [Device::cpu(0), Device::cpu(1)];
    let world = WorldGroup::with_topology(c, devs, &Topology::default()).unwrap();
    let g = fuel_graph_ext::LazyGraph::new("world-step");
    let f32s = |shape: &[usize]| fuel_graph_ext::TensorType::new(DType::F32, shape);
    let mut outs = Vec::new();
    for l in (0..3).rev() {
        let w = 8 + 4 * l;
        let grads: Vec<LazyTensor> = devs
            .iter()
            .enumerate()
            .map(|(i, d)| {
                // Names carry the rank: the hash leaves them out.
                let xt = g.input(&format!("xt{l}.{rank}.{i}"), *d, f32s(&[w, 4]));
                let dy = g.input(&format!("dy{l}.{rank}.{i}"), *d, f32s(&[4, w]));
                xt.call_extern(ExternOp::new("matmul", *d, f32s(&[w, w])), &[&dy])
                    .unwrap()
            })
            .collect();
        for (d, m) in devs
            .iter()
            .zip(world.all_reduce(&grads, ReduceOp::Mean).unwrap())
        {
            outs.push(
                g.input(&format!("w{l}"), *d, f32s(&[w, w]))
                    .add(&m)
                    .unwrap(),
            );
        }
    }
    let refs: Vec<&LazyTensor> = outs.iter().collect();
    let mut lowered = world.lower(&refs, world.topology()).unwrap();
    fuel_collective::run_pipeline(
        &mut lowered,
        "schedule-collectives",
        world.topology(),
        Default::default(),
    )
    .unwrap();
    assert!(fuel_collective::overlap::was_scheduled(&lowered).is_some());
    let hash = fuel_collective::overlap::schedule_hash(&lowered);
    (hash, world.gather_words(&[hash]).unwrap())
}

#[test]
fn every_process_schedules_a_world_step_alike() {
    // Threads of one process: their communicators' local ids differ, which
    // the hash leaves out as it does names.
    let got = world_of("world-schedule", 3, scheduled_step);
    let mine: Vec<u64> = got.iter().map(|(h, _)| *h).collect();
    assert!(mine.iter().all(|h| *h == mine[0]), "{mine:x?}");
    for (_, rows) in &got {
        let gathered: Vec<u64> = rows.iter().map(|r| r[0]).collect();
        assert_eq!(gathered, mine);
    }
}
