//! NcclDriver on real GPUs. Without libcuda, a GPU or libnccl each test
//! prints `SKIP: <reason>` (or fails when FUEL_REQUIRE_CUDA=1, as
//! `scripts/gpu-check.sh` sets); with them it prints a `PROOF ` line.
//! One rank per visible GPU, each on its own thread (NCCL allows one rank
//! per GPU in a communicator).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use fuel_collective::driver::nccl::NCCL_HINT;
use fuel_collective::driver::NcclUniqueId;
use fuel_collective::{
    CollectiveDriver, CommunicationId, Driver, ElemType, JoinOptions, NcclDriver,
};
use fuel_graph_ext::{Device, ReduceOp};
use std::sync::mpsc;
use std::time::Duration;

/// The number of GPUs, or None after printing why the test skips.
fn gpus() -> Option<usize> {
    let reason = match fuel_graph_ext::backend::cuda::device_count() {
        Err((r, h)) => format!("{r} ({h})"),
        Ok(n) => {
            if fuel_collective::driver::nccl::library_present() {
                return Some(n);
            }
            format!("libnccl is not loadable; {NCCL_HINT}")
        }
    };
    assert!(
        std::env::var("FUEL_REQUIRE_CUDA").as_deref() != Ok("1"),
        "FUEL_REQUIRE_CUDA=1 but: {reason}"
    );
    println!("SKIP: {reason}");
    None
}

fn per_rank<T: Send + 'static>(
    n: usize,
    f: impl Fn(usize) -> T + Send + Clone + 'static,
) -> Vec<T> {
    let (tx, rx) = mpsc::channel();
    for rank in 0..n {
        let (tx, f) = (tx.clone(), f.clone());
        std::thread::spawn(move || {
            let _ = tx.send((rank, f(rank)));
        });
    }
    drop(tx);
    let mut out: Vec<Option<T>> = (0..n).map(|_| None).collect();
    for _ in 0..n {
        let (r, v) = rx
            .recv_timeout(Duration::from_secs(120))
            .expect("a rank hung or panicked");
        out[r] = Some(v);
    }
    out.into_iter().map(|v| v.unwrap()).collect()
}

#[test]
fn nccl_all_reduce_and_ring_on_every_gpu() {
    let Some(n) = gpus() else { return };
    let id = NcclDriver::group_id(&CommunicationId::new("nccl-test")).unwrap();
    // The id survives the trip through hex that a launcher would make.
    let id = NcclUniqueId::from_hex(&id.to_hex()).unwrap();
    let results = per_rank(n, move |rank| {
        let dev = NcclDriver::open(Device {
            kind: fuel_graph_ext::DeviceKind::Cuda,
            index: rank as u32,
        })
        .unwrap();
        let comm = NcclDriver::join_on(
            &dev,
            id,
            n,
            rank,
            JoinOptions::with_timeout(Duration::from_secs(60)),
        )
        .unwrap();
        let s = NcclDriver::comm_stream(&comm);
        let count = 1024;
        let host: Vec<u8> = (0..count)
            .flat_map(|i| ((rank * 1000 + i) as f32).to_le_bytes())
            .collect();
        let src = NcclDriver::upload(&dev, &host).unwrap();
        let dst = NcclDriver::alloc(&dev, host.len()).unwrap();
        let mut checked = Vec::new();
        for op in ReduceOp::ALL {
            let (dt, c) = NcclDriver::data_type(ElemType::F32, host.len() as u64).unwrap();
            NcclDriver::all_reduce(&comm, &src, &dst, dt, c, op, s).unwrap();
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
            let (dt, c) = NcclDriver::data_type(ElemType::F32, host.len() as u64).unwrap();
            if rank % 2 == 0 {
                NcclDriver::send(&comm, &src, dt, c, next, s).unwrap();
                NcclDriver::recv(&comm, &dst, dt, c, prev, s).unwrap();
            } else {
                NcclDriver::recv(&comm, &dst, dt, c, prev, s).unwrap();
                NcclDriver::send(&comm, &src, dt, c, next, s).unwrap();
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
    for e in [ElemType::Bool, ElemType::I16, ElemType::U16] {
        assert!(NcclDriver::data_type(e, 8).is_err());
    }
    let Some(_) = gpus() else { return };
    let id = NcclDriver::group_id(&CommunicationId::new("nccl-id-shared")).unwrap();
    let again = NcclDriver::group_id(&CommunicationId::new("nccl-id-shared")).unwrap();
    assert_eq!(id, again);
    println!("PROOF nccl group_id minted once: {id:?}");
}
