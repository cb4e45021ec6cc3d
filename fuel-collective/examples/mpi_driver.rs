//! Multi-process check of `MpiDriver`, launched by `scripts/mpi-check.sh`:
//! `mpirun -n 4 --oversubscribe --allow-run-as-root target/debug/examples/mpi_driver`.
//! Every rank all-reduces (every element type, every op, and in place), passes a ring of
//! send/recv, gathers and reduce-scatters with a count per rank
//! (`MPI_Allgatherv`, `MPI_Reduce_scatter`), runs the SPMD communicator
//! (an uneven `comm.all_to_all` included), and prints `PROOF rank R ok` or
//! exits non-zero.

use fuel_collective::driver::MpiDriver;
use fuel_collective::{
    Call, CollectiveDriver, CommunicationId, Communicator, Driver, DriverCommunicator, P2p,
};
use fuel_graph_ext::interp::HostTensor;
use fuel_graph_ext::{DType, Device, LazyGraph, ReduceOp, TensorType};
use std::time::Duration;

#[path = "common/launch.rs"]
mod launch;
use launch::env_usize;

fn run() -> Result<usize, String> {
    let rank = env_usize(&["OMPI_COMM_WORLD_RANK", "PMI_RANK"])?;
    let n = env_usize(&["OMPI_COMM_WORLD_SIZE", "PMI_SIZE"])?;
    let e = |x: fuel_collective::DriverError| x.to_string();
    let id = MpiDriver::group_id(&CommunicationId::new("mpi-check")).map_err(e)?;
    let comm = MpiDriver::join(id, n, rank).map_err(e)?;
    // The driver told glibc to keep freed memory (MPI's per-call
    // temporaries reuse it instead of faulting in fresh pages).
    if fuel_runtime::driver::mpi::keep_freed::freed_memory_stays(16 << 20) == Some(false) {
        return Err("after the MPI driver started, a freed 16 MiB buffer left the heap (FUEL_MPI_KEEP_FREED)".into());
    }
    let dev = MpiDriver::open(Device::cpu(0)).map_err(e)?;
    let s = MpiDriver::comm_stream(&comm);
    let t = Duration::from_secs(30);

    // all_reduce of i64 values rank*100+i: check every op.
    let count = 6;
    let bytes: Vec<u8> = (0..count)
        .flat_map(|i| ((rank * 100 + i) as i64).to_le_bytes())
        .collect();
    for op in ReduceOp::ALL {
        let src = MpiDriver::upload(&dev, &bytes).map_err(e)?;
        let dst = MpiDriver::alloc(&dev, bytes.len()).map_err(e)?;
        let (dt, c) = MpiDriver::data_type(DType::I64, bytes.len() as u64).map_err(e)?;
        MpiDriver::all_reduce(Call(&comm, &src, &dst, dt, s), c, op).map_err(e)?;
        let got = MpiDriver::download(&dst, t).map_err(e)?;
        for i in 0..count {
            let vals: Vec<i64> = (0..n).map(|r| (r * 100 + i) as i64).collect();
            let want = match op {
                ReduceOp::Sum => vals.iter().sum(),
                ReduceOp::Product => vals.iter().fold(1i64, |a, b| a.wrapping_mul(*b)),
                ReduceOp::Max => *vals.iter().max().unwrap_or(&0),
                ReduceOp::Min => *vals.iter().min().unwrap_or(&0),
                ReduceOp::Mean => vals.iter().sum::<i64>() / n as i64,
            };
            let mut b = [0u8; 8];
            b.copy_from_slice(&got[i * 8..i * 8 + 8]);
            let have = i64::from_le_bytes(b);
            if have != want {
                return Err(format!(
                    "rank {rank}: all_reduce {op:?} element {i}: got {have}, want {want}"
                ));
            }
        }
    }
    // In place: the source is the destination (one buffer, one fence), and
    // a download right after the call reads the sum.
    let buf = MpiDriver::upload(&dev, &((rank + 1) as i32).to_le_bytes()).map_err(e)?;
    MpiDriver::all_reduce(Call(&comm, &buf, &buf, DType::I32, s), 1, ReduceOp::Sum).map_err(e)?;
    let got = MpiDriver::download(&buf, t).map_err(e)?;
    let want = (1..=n as i32).sum::<i32>();
    if got != want.to_le_bytes() {
        return Err(format!(
            "rank {rank}: in-place all_reduce gave {got:?}, want {want}"
        ));
    }

    // Every element type carries through a sum (values 0/1 fit all of them).
    for elem in DType::ALL {
        let es = elem.size_bytes();
        let src = MpiDriver::alloc(&dev, 4 * es).map_err(e)?;
        let dst = MpiDriver::alloc(&dev, 4 * es).map_err(e)?;
        MpiDriver::all_reduce(Call(&comm, &src, &dst, elem, s), 4, ReduceOp::Max).map_err(e)?;
        let got = MpiDriver::download(&dst, t).map_err(e)?;
        if got.iter().any(|b| *b != 0) {
            return Err(format!("rank {rank}: {elem} max of zeros is not zero"));
        }
    }

    // A ring of send/recv: even ranks send first, odd ranks receive first.
    let next = (rank + 1) % n;
    let prev = (rank + n - 1) % n;
    let msg: Vec<u8> = (rank as f32 * 1.5).to_le_bytes().repeat(3);
    let src = MpiDriver::upload(&dev, &msg).map_err(e)?;
    let dst = MpiDriver::alloc(&dev, msg.len()).map_err(e)?;
    if rank.is_multiple_of(2) {
        MpiDriver::send(P2p(&comm, &src, DType::F32, 3, next, s)).map_err(e)?;
        MpiDriver::recv(P2p(&comm, &dst, DType::F32, 3, prev, s)).map_err(e)?;
    } else {
        MpiDriver::recv(P2p(&comm, &dst, DType::F32, 3, prev, s)).map_err(e)?;
        MpiDriver::send(P2p(&comm, &src, DType::F32, 3, next, s)).map_err(e)?;
    }
    let got = MpiDriver::download(&dst, t).map_err(e)?;
    if got != (prev as f32 * 1.5).to_le_bytes().repeat(3) {
        return Err(format!("rank {rank}: ring recv from {prev} got {got:?}"));
    }

    // Counts per rank through the trait (MPI_Allgatherv, MPI_Reduce_scatter):
    // rank r contributes and receives r % 3 i32 elements (rank 0 nothing).
    let counts: Vec<usize> = (0..n).map(|r| r % 3).collect();
    let total: usize = counts.iter().sum();
    let ints = |b: &[u8]| -> Vec<i32> {
        b.chunks_exact(4)
            .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect()
    };
    let mine: Vec<u8> = (0..counts[rank])
        .flat_map(|i| ((rank * 100 + i) as i32).to_le_bytes())
        .collect();
    let src = MpiDriver::upload(&dev, &mine).map_err(e)?;
    let dst = MpiDriver::alloc(&dev, total * 4).map_err(e)?;
    let native =
        MpiDriver::all_gather_uneven(Call(&comm, &src, &dst, DType::I32, s), &counts).map_err(e)?;
    let got = ints(&MpiDriver::download(&dst, t).map_err(e)?);
    let want: Vec<i32> = (0..n)
        .flat_map(|r| (0..counts[r]).map(move |i| (r * 100 + i) as i32))
        .collect();
    if !native || got != want {
        return Err(format!(
            "rank {rank}: all_gather_uneven gave {got:?}, want {want:?}"
        ));
    }
    let full: Vec<u8> = (0..total)
        .flat_map(|i| ((rank * 10 + i) as i32).to_le_bytes())
        .collect();
    let src = MpiDriver::upload(&dev, &full).map_err(e)?;
    let dst = MpiDriver::alloc(&dev, counts[rank] * 4).map_err(e)?;
    let native = MpiDriver::reduce_scatter_uneven(
        Call(&comm, &src, &dst, DType::I32, s),
        &counts,
        ReduceOp::Sum,
    )
    .map_err(e)?;
    let got = ints(&MpiDriver::download(&dst, t).map_err(e)?);
    let start: usize = counts[..rank].iter().sum();
    let want: Vec<i32> = (start..start + counts[rank])
        .map(|i| (0..n).map(|r| (r * 10 + i) as i32).sum())
        .collect();
    if !native || got != want {
        return Err(format!(
            "rank {rank}: reduce_scatter_uneven gave {got:?}, want {want:?}"
        ));
    }

    // The SPMD communicator over MPI.
    let c = DriverCommunicator::<MpiDriver>::new(comm, dev, t);
    let g = LazyGraph::new("mpi-rank");
    let ty = TensorType::new(DType::F32, &[4]);
    let x = g.input("x", Device::cpu(0), ty.clone());
    c.bind("x", HostTensor::new(ty, vec![rank as f64; 4]));
    let sum = c.all_reduce(&x, ReduceOp::Sum).map_err(|e| e.to_string())?;
    let ag = c.all_gather(&x, 0).map_err(|e| e.to_string())?;
    let b = c.broadcast(&x, n - 1).map_err(|e| e.to_string())?;
    c.barrier().map_err(|e| e.to_string())?;
    let total = (0..n).sum::<usize>() as f64;
    let sv = c.evaluate(&sum).map_err(|e| e.to_string())?.to_f64();
    let av = c.evaluate(&ag).map_err(|e| e.to_string())?.to_f64();
    let bv = c.evaluate(&b).map_err(|e| e.to_string())?.to_f64();
    if sv != vec![total; 4] || bv != vec![(n - 1) as f64; 4] {
        return Err(format!("rank {rank}: spmd sum {sv:?} broadcast {bv:?}"));
    }
    let want: Vec<f64> = (0..n).flat_map(|r| [r as f64; 4]).collect();
    if av != want {
        return Err(format!("rank {rank}: spmd all_gather {av:?}"));
    }
    // all_to_all along the inner axis of an f32[2, n]: rank r's column j
    // goes to rank j, so rank r's result[row][i] is rank i's [row][r].
    let ty2 = TensorType::new(DType::F32, &[2, n]);
    let y = g.input("y", Device::cpu(0), ty2.clone());
    let y_data = (0..2 * n).map(|i| (rank * 100 + i) as f64).collect();
    c.bind("y", HostTensor::new(ty2, y_data));
    let a2a = c.all_to_all(&y, 1, None).map_err(|e| e.to_string())?;
    let a2av = c.evaluate(&a2a).map_err(|e| e.to_string())?.to_f64();
    let want: Vec<f64> = (0..2)
        .flat_map(|row| (0..n).map(move |i| (i * 100 + row * n + rank) as f64))
        .collect();
    if a2av != want {
        return Err(format!("rank {rank}: spmd all_to_all {a2av:?}"));
    }
    // An uneven all_to_all along axis 0: rank i sends rank j (i + 2j) % 3
    // rows of an f32[R, 2], R being row i's sum; rank j gets column j's sum,
    // rank i's piece at row i's offset of column j.
    let split: Vec<usize> = (0..n * n).map(|k| (k / n + 2 * (k % n)) % 3).collect();
    let rows = |i: usize| -> usize { split[i * n..(i + 1) * n].iter().sum() };
    let tz = TensorType::new(DType::F32, &[rows(rank), 2]);
    let z = g.input("z", Device::cpu(0), tz.clone());
    let z_data = (0..rows(rank) * 2)
        .map(|i| (rank * 100 + i) as f64)
        .collect();
    c.bind("z", HostTensor::new(tz, z_data));
    let uneven = c
        .all_to_all(&z, 0, Some(&split))
        .map_err(|e| e.to_string())?;
    let uv = c.evaluate(&uneven).map_err(|e| e.to_string())?.to_f64();
    let want: Vec<f64> = (0..n)
        .flat_map(|i| {
            let before: usize = split[i * n..i * n + rank].iter().sum();
            let len = split[i * n + rank];
            (before * 2..(before + len) * 2).map(move |k| (i * 100 + k) as f64)
        })
        .collect();
    if uv != want {
        return Err(format!(
            "rank {rank}: spmd uneven all_to_all {uv:?}, want {want:?}"
        ));
    }
    drop(c);
    Ok(rank)
}

fn main() {
    // Every communicator is gone once `run` returns, so finalising works
    // whether it succeeded or not.
    let res = run();
    let res = MpiDriver::finalize().map_err(|e| e.to_string()).and(res);
    match res {
        Ok(rank) => println!("PROOF rank {rank} ok: all_reduce (5 ops, 13 types, in place), send/recv ring, all_gather_uneven/reduce_scatter_uneven, spmd all_reduce/all_gather/broadcast/barrier/all_to_all (even and uneven)"),
        Err(msg) => {
            launch::say_err(&format!("FAIL: {msg}"));
            std::process::exit(1);
        }
    }
}
