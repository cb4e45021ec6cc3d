//! NcclDriver on real GPUs. Without libcuda, a GPU or libnccl each test
//! prints `SKIP: <reason>` (or fails when FUEL_REQUIRE_CUDA=1, as
//! `scripts/gpu-check.sh` sets); with them it prints a `PROOF ` line.
//! One rank per visible GPU, each on its own thread (NCCL allows one rank
//! per GPU in a communicator).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use fuel_collective::driver::NcclUniqueId;
use fuel_collective::{
    Call, CollectiveDriver, CommunicationId, Driver, JoinOptions, NcclDriver, P2p,
};
use fuel_graph_ext::{DType, Device, ReduceOp};
use fuel_test_support::ranks::on_ranks;
use fuel_test_support::{nccl_or_skip, skip, Backend};
use std::time::Duration;

/// The number of GPUs, or None after printing why the test skips.
fn gpus() -> Option<usize> {
    match fuel_runtime::backend::cuda::device_count() {
        Err((r, h)) => {
            skip("driver_nccl", Backend::Cuda, &format!("{r} ({h})"));
            None
        }
        Ok(n) => nccl_or_skip("driver_nccl").then_some(n),
    }
}

/// Rank `rank` of `n` in the NCCL group `id`: its GPU (`cuda:<rank>`),
/// opened, and its communicator, joined within a minute.
fn join(
    id: NcclUniqueId,
    n: usize,
    rank: usize,
) -> (
    <NcclDriver as Driver>::Device,
    <NcclDriver as CollectiveDriver>::Communicator,
) {
    let dev = NcclDriver::open(Device::cuda(rank as u32)).unwrap();
    let timeout = JoinOptions::with_timeout(Duration::from_secs(60));
    let comm = NcclDriver::join_on(&dev, id, n, rank, timeout).unwrap();
    (dev, comm)
}

#[test]
fn nccl_all_reduce_and_ring_on_every_gpu() {
    let Some(n) = gpus() else { return };
    let id = NcclDriver::group_id(&CommunicationId::new("nccl-test")).unwrap();
    // The id survives the trip through hex that a launcher would make.
    let id = NcclUniqueId::from_hex(&id.to_hex()).unwrap();
    let results = on_ranks(n, Duration::from_secs(120), move |rank| {
        let (dev, comm) = join(id, n, rank);
        let s = NcclDriver::comm_stream(&comm);
        let count = 1024;
        let host: Vec<u8> = (0..count)
            .flat_map(|i| ((rank * 1000 + i) as f32).to_le_bytes())
            .collect();
        let src = NcclDriver::upload(&dev, &host).unwrap();
        let dst = NcclDriver::alloc(&dev, host.len()).unwrap();
        let mut checked = Vec::new();
        for op in ReduceOp::ALL {
            let (dt, c) = NcclDriver::data_type(DType::F32, host.len() as u64).unwrap();
            NcclDriver::all_reduce(Call(&comm, &src, &dst, dt, s), c, op).unwrap();
            let got = NcclDriver::download(&dst, Duration::from_secs(60)).unwrap();
            for i in [0usize, 1, count - 1] {
                let vals: Vec<f64> = (0..n).map(|r| (r * 1000 + i) as f64).collect();
                let want = match op {
                    ReduceOp::Sum => vals.iter().sum::<f64>(),
                    ReduceOp::Product => vals.iter().product(),
                    ReduceOp::Max => vals.iter().cloned().fold(f64::MIN, f64::max),
                    ReduceOp::Min => vals.iter().cloned().fold(f64::MAX, f64::min),
                    ReduceOp::Mean => vals.iter().sum::<f64>() / n as f64,
                } as f32;
                let have = f32::from_le_bytes(got[i * 4..i * 4 + 4].try_into().unwrap());
                let tol = want.abs() * 1e-6;
                assert!(
                    (have - want).abs() <= tol,
                    "rank {rank} {op:?} [{i}]: {have} vs {want}"
                );
            }
            checked.push(format!("{op:?}"));
        }
        if n > 1 {
            // A ring inside one NCCL group call is what NCCL needs to avoid
            // deadlock; here even ranks send first and odd ranks receive first.
            let next = (rank + 1) % n;
            let prev = (rank + n - 1) % n;
            let (dt, c) = NcclDriver::data_type(DType::F32, host.len() as u64).unwrap();
            if rank % 2 == 0 {
                NcclDriver::send(P2p(&comm, &src, dt, c, next, s)).unwrap();
                NcclDriver::recv(P2p(&comm, &dst, dt, c, prev, s)).unwrap();
            } else {
                NcclDriver::recv(P2p(&comm, &dst, dt, c, prev, s)).unwrap();
                NcclDriver::send(P2p(&comm, &src, dt, c, next, s)).unwrap();
            }
            NcclDriver::synchronize(&comm, s).unwrap();
            let got = NcclDriver::download(&dst, Duration::from_secs(60)).unwrap();
            let first = f32::from_le_bytes(got[..4].try_into().unwrap());
            assert_eq!(first, (prev * 1000) as f32);
            checked.push("send/recv".into());
        }
        checked.join(",")
    });
    println!("PROOF nccl {n} rank(s) on {n} GPU(s): {}", results[0]);
}

#[test]
fn nccl_refuses_types_it_cannot_name_without_crashing() {
    // Pure: runs everywhere.
    for e in [DType::Bool, DType::I16, DType::U16] {
        assert!(NcclDriver::data_type(e, 8).is_err());
    }
    let Some(_) = gpus() else { return };
    let id = NcclDriver::group_id(&CommunicationId::new("nccl-id-shared")).unwrap();
    let again = NcclDriver::group_id(&CommunicationId::new("nccl-id-shared")).unwrap();
    assert_eq!(id, again);
    println!("PROOF nccl group_id minted once: {id:?}");
}

/// SPMD `comm.*` nodes over NCCL, one rank per GPU (each on its own thread):
/// the operand is computed on the rank's GPU, the collectives run on the
/// executor's buffers there (no copy through the host), and the results
/// feed more GPU work. Each rank compiles once and runs twice; every run
/// equals the world oracle `interpret_world` and frees everything.
#[test]
fn nccl_spmd_comm_all_reduce_keeps_the_buffer_on_the_gpu() {
    use fuel_collective::{Communicator, DriverCommunicator};
    use fuel_graph_ext::interp::HostTensor;
    use fuel_graph_ext::{LazyGraph, TensorType};
    use std::collections::BTreeMap;
    let Some(n) = gpus() else { return };
    let id = NcclDriver::group_id(&CommunicationId::new("nccl-spmd-graph")).unwrap();
    let results = on_ranks(n, Duration::from_secs(120), move |rank| {
        let gpu = Device::cuda(rank as u32);
        let (dev, comm) = join(id, n, rank);
        let c = DriverCommunicator::<NcclDriver>::new(comm, dev, Duration::from_secs(60));
        let g = LazyGraph::new("rank");
        let ty = TensorType::new(DType::F32, &[n * 4, 256]);
        let x = g.input("x", gpu, ty.clone());
        let y = x.add(&x).unwrap();
        let s = c.all_reduce(&y, ReduceOp::Sum).unwrap();
        let b = c.broadcast(&s, n - 1).unwrap();
        let ag = c.all_gather(&b, 1).unwrap();
        let rs = c.reduce_scatter(&y, ReduceOp::Max, 0).unwrap();
        let z = s.mul(&x).unwrap();
        let outs = [&z, &ag, &rs];
        let exe = c.compile(&outs).unwrap();
        assert_eq!(
            exe.devices(),
            vec![gpu],
            "the rank's graph is on its GPU only"
        );
        let mut graph = g.snapshot();
        graph.set_outputs(outs.iter().map(|t| t.value()).collect());
        let mut rounds = Vec::new();
        for round in 0..2 {
            let data = (0..ty.num_elements())
                .map(|i| ((rank * 5 + i + round * 3) % 9) as f64 - 4.0)
                .collect();
            let input = BTreeMap::from([("x".to_string(), HostTensor::new(ty.clone(), data))]);
            let got = exe.run_host(&input).unwrap();
            assert_eq!(exe.memory(gpu).unwrap().current, 0, "rank {rank} leaks");
            rounds.push((input, got));
        }
        (graph, rounds)
    });
    fuel_test_support::world::assert_rounds_match_world(&results);
    println!("PROOF nccl spmd: {n} rank(s), one per GPU, comm.all_reduce/broadcast/all_gather/reduce_scatter on the GPU buffers, compiled once, 2 runs equal interpret_world");
}
