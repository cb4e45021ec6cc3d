//! HostDriver across threads: joins, all_reduce in every element type and
//! reduce op, send/recv, the SPMD communicator, and every error path. Every
//! wait is bounded (200 ms to a few seconds), and threads are joined with a
//! deadline, so a hang fails the test instead of stalling it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use fuel_collective::driver::{HostCommunicator, HostUniqueId};
use fuel_collective::{
    Call, CollectiveDriver, CommunicationId, Communicator, Driver, DriverCommunicator, DriverError,
    HostDriver, JoinOptions, P2p,
};
use fuel_graph_ext::interp::HostTensor;
use fuel_graph_ext::{DType, Device, LazyGraph, ReduceOp, TensorType};
use fuel_test_support::ranks::on_ranks;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::Duration;

const SHORT: Duration = Duration::from_millis(200);
const LONG: Duration = Duration::from_secs(10);

fn fresh(name: &str) -> HostUniqueId {
    static N: AtomicU64 = AtomicU64::new(0);
    let id = CommunicationId::new(format!("{name}-{}", N.fetch_add(1, Ordering::Relaxed)));
    HostDriver::group_id(&id).unwrap()
}

fn on_ranks_20<T: Send + 'static>(
    n: usize,
    f: impl Fn(usize) -> T + Send + Clone + 'static,
) -> Vec<T> {
    on_ranks(n, Duration::from_secs(20), f)
}

fn join(
    id: HostUniqueId,
    n: usize,
    rank: usize,
    t: Duration,
) -> Result<HostCommunicator, DriverError> {
    HostDriver::join_with(id, n, rank, JoinOptions::with_timeout(t))
}

/// A value in 0..=3 that every element type can hold, distinct per rank and index.
fn val(rank: usize, i: usize) -> u8 {
    ((rank * 3 + i) % 4) as u8
}

fn encode(elem: DType, x: f64) -> Vec<u8> {
    match elem {
        DType::Bool => vec![u8::from(x != 0.0)],
        DType::I8 => (x as i8).to_le_bytes().to_vec(),
        DType::U8 => (x as u8).to_le_bytes().to_vec(),
        DType::I16 => (x as i16).to_le_bytes().to_vec(),
        DType::U16 => (x as u16).to_le_bytes().to_vec(),
        DType::I32 => (x as i32).to_le_bytes().to_vec(),
        DType::U32 => (x as u32).to_le_bytes().to_vec(),
        DType::I64 => (x as i64).to_le_bytes().to_vec(),
        DType::U64 => (x as u64).to_le_bytes().to_vec(),
        DType::F16 => half::f16::from_f64(x).to_le_bytes().to_vec(),
        DType::BF16 => half::bf16::from_f64(x).to_le_bytes().to_vec(),
        DType::F32 => (x as f32).to_le_bytes().to_vec(),
        DType::F64 => x.to_le_bytes().to_vec(),
    }
}

/// The expected reduction of small non-negative values, computed exactly.
fn expected(elem: DType, op: ReduceOp, vals: &[f64]) -> f64 {
    let n = vals.len() as f64;
    if elem == DType::Bool {
        let b: Vec<bool> = vals.iter().map(|v| *v != 0.0).collect();
        let any = b.iter().any(|x| *x);
        let all = b.iter().all(|x| *x);
        // Mean counts the trues in a wide accumulator and divides by the
        // number of ranks, truncating: true only when every rank's is.
        return f64::from(u8::from(match op {
            ReduceOp::Sum | ReduceOp::Max => any,
            ReduceOp::Product | ReduceOp::Min | ReduceOp::Mean => all,
        }));
    }
    let r = match op {
        ReduceOp::Sum => vals.iter().sum(),
        ReduceOp::Product => vals.iter().product(),
        ReduceOp::Max => vals.iter().cloned().fold(f64::MIN, f64::max),
        ReduceOp::Min => vals.iter().cloned().fold(f64::MAX, f64::min),
        ReduceOp::Mean => vals.iter().sum::<f64>() / n,
    };
    let float = matches!(elem, DType::F16 | DType::BF16 | DType::F32 | DType::F64);
    if float {
        r
    } else {
        r.trunc()
    }
}

#[test]
fn all_reduce_every_elem_type_and_op_across_2_to_8_threads() {
    for n in [2usize, 3, 5, 8] {
        let id = fresh("allreduce");
        let results = on_ranks(n, Duration::from_secs(20), move |rank| {
            let comm = join(id, n, rank, LONG).unwrap();
            let dev = HostDriver::open(Device::cpu(rank as u32)).unwrap();
            let s = HostDriver::comm_stream(&comm);
            let mut checked = 0;
            for elem in DType::ALL {
                for op in ReduceOp::ALL {
                    let count = 5;
                    let bytes: Vec<u8> = (0..count)
                        .flat_map(|i| encode(elem, f64::from(val(rank, i))))
                        .collect();
                    let src = HostDriver::upload(&dev, &bytes).unwrap();
                    let dst = HostDriver::alloc(&dev, bytes.len()).unwrap();
                    let (dt, c) = HostDriver::data_type(elem, bytes.len() as u64).unwrap();
                    assert_eq!(c, count);
                    HostDriver::all_reduce(Call(&comm, &src, &dst, dt, s), c, op).unwrap();
                    let got = HostDriver::download(&dst, LONG).unwrap();
                    for i in 0..count {
                        let vals: Vec<f64> = (0..n).map(|r| f64::from(val(r, i))).collect();
                        let want = encode(elem, expected(elem, op, &vals));
                        let es = elem.size_bytes();
                        assert_eq!(
                            &got[i * es..(i + 1) * es],
                            &want[..],
                            "{n} ranks, {elem}, {op:?}, element {i}, rank {rank}"
                        );
                    }
                    checked += 1;
                }
            }
            HostDriver::synchronize(&comm, s).unwrap();
            checked
        });
        assert!(results.iter().all(|c| *c == 13 * 5), "{results:?}");
    }
}

#[test]
fn in_place_all_reduce_waits_for_the_compute_fence() {
    let id = fresh("inplace");
    let out = on_ranks_20(2, move |rank| {
        let comm = join(id, 2, rank, LONG).unwrap();
        let dev = HostDriver::open(Device::cpu(0)).unwrap();
        let buf = HostDriver::alloc(&dev, 4).unwrap();
        // The compute side has issued its write but not done it yet.
        let write = buf.fence.begin_write();
        let s = HostDriver::comm_stream(&comm);
        HostDriver::all_reduce(Call(&comm, &buf, &buf, DType::I32, s), 1, ReduceOp::Sum).unwrap();
        // Enqueueing returned at once; now "compute" writes and settles.
        let compute = HostDriver::new_stream(&dev).unwrap();
        let b = buf.buffer.clone();
        compute.submit(move || {
            let mut held = b.lock().unwrap();
            let own = held.get_mut().expect("the driver's own buffer");
            own.bytes_mut()[..4].copy_from_slice(&(10 + rank as i32).to_le_bytes());
            drop(held);
            write.complete();
        });
        HostDriver::synchronize(&comm, s).unwrap();
        let got = HostDriver::download(&buf, LONG).unwrap();
        i32::from_le_bytes(got[..4].try_into().unwrap())
    });
    assert_eq!(out, vec![21, 21]);
}

fn i32_at(bytes: &[u8]) -> i32 {
    i32::from_le_bytes(bytes[..4].try_into().unwrap())
}

#[test]
fn download_right_after_an_in_place_all_reduce_waits_for_it() {
    // Rank 0 holds 10 and rank 1 holds 5; the in-place sum is 15. Rank 1
    // is late, so rank 0's download comes while its job still waits for
    // rank 1: it must wait too, and not read the old 10.
    let id = fresh("inplace-read");
    let out = on_ranks_20(2, move |rank| {
        let comm = join(id, 2, rank, LONG).unwrap();
        let dev = HostDriver::open(Device::cpu(0)).unwrap();
        let mine = if rank == 0 { 10i32 } else { 5 };
        let buf = HostDriver::upload(&dev, &mine.to_le_bytes()).unwrap();
        if rank == 1 {
            std::thread::sleep(Duration::from_millis(150));
        }
        let s = HostDriver::comm_stream(&comm);
        HostDriver::all_reduce(Call(&comm, &buf, &buf, DType::I32, s), 1, ReduceOp::Sum).unwrap();
        let got = i32_at(&HostDriver::download(&buf, LONG).unwrap());
        HostDriver::synchronize(&comm, s).unwrap();
        got
    });
    assert_eq!(
        out,
        vec![15, 15],
        "a download returned the buffer before its all-reduce"
    );
}

#[test]
fn download_after_two_queued_writers_waits_for_the_second() {
    // Two all-reduces into one destination: 1 + 2 = 3, then 100 + 200 =
    // 300. Rank 1 is late for the second, so rank 0's download comes after
    // the first has finished and before the second has: it must give 300.
    let id = fresh("two-writers");
    let out = on_ranks_20(2, move |rank| {
        let comm = join(id, 2, rank, LONG).unwrap();
        let dev = HostDriver::open(Device::cpu(0)).unwrap();
        let r = rank as i32 + 1;
        let a = HostDriver::upload(&dev, &r.to_le_bytes()).unwrap();
        let b = HostDriver::upload(&dev, &(100 * r).to_le_bytes()).unwrap();
        let dst = HostDriver::alloc(&dev, 4).unwrap();
        let s = HostDriver::comm_stream(&comm);
        HostDriver::all_reduce(Call(&comm, &a, &dst, DType::I32, s), 1, ReduceOp::Sum).unwrap();
        if rank == 1 {
            std::thread::sleep(Duration::from_millis(150));
        }
        HostDriver::all_reduce(Call(&comm, &b, &dst, DType::I32, s), 1, ReduceOp::Sum).unwrap();
        let got = i32_at(&HostDriver::download(&dst, LONG).unwrap());
        HostDriver::synchronize(&comm, s).unwrap();
        got
    });
    assert_eq!(
        out,
        vec![300, 300],
        "a download returned the first writer's result"
    );
}

#[test]
fn two_communicators_writing_one_buffer_take_turns() {
    // Two groups write one buffer of rank 0 from their own comm streams:
    // group A's all-reduce (1 + 2) is issued first, group B's (10 + 20)
    // second, and group A's peer is late. B's write must land after A's,
    // so the buffer ends as 30, and a reader issued after both waits for B.
    let (ida, idb) = (fresh("turn-a"), fresh("turn-b"));
    let (tx, rx) = mpsc::channel();
    let ranks1 = std::thread::spawn(move || {
        let a = join(ida, 2, 1, LONG).unwrap();
        let b = join(idb, 2, 1, LONG).unwrap();
        let dev = HostDriver::open(Device::cpu(1)).unwrap();
        let (sa, sb) = (HostDriver::comm_stream(&a), HostDriver::comm_stream(&b));
        let two = HostDriver::upload(&dev, &2i32.to_le_bytes()).unwrap();
        let twenty = HostDriver::upload(&dev, &20i32.to_le_bytes()).unwrap();
        let (da, db) = (
            HostDriver::alloc(&dev, 4).unwrap(),
            HostDriver::alloc(&dev, 4).unwrap(),
        );
        HostDriver::all_reduce(Call(&b, &twenty, &db, DType::I32, sb), 1, ReduceOp::Sum).unwrap();
        // Rank 0's B write now waits for its A write, which waits for this.
        rx.recv_timeout(LONG).unwrap();
        std::thread::sleep(Duration::from_millis(100));
        HostDriver::all_reduce(Call(&a, &two, &da, DType::I32, sa), 1, ReduceOp::Sum).unwrap();
        HostDriver::synchronize(&a, sa).unwrap();
        HostDriver::synchronize(&b, sb).unwrap();
    });
    let a = join(ida, 2, 0, LONG).unwrap();
    let b = join(idb, 2, 0, LONG).unwrap();
    let dev = HostDriver::open(Device::cpu(0)).unwrap();
    let (sa, sb) = (HostDriver::comm_stream(&a), HostDriver::comm_stream(&b));
    let one = HostDriver::upload(&dev, &1i32.to_le_bytes()).unwrap();
    let ten = HostDriver::upload(&dev, &10i32.to_le_bytes()).unwrap();
    let dst = HostDriver::alloc(&dev, 4).unwrap();
    HostDriver::all_reduce(Call(&a, &one, &dst, DType::I32, sa), 1, ReduceOp::Sum).unwrap();
    HostDriver::all_reduce(Call(&b, &ten, &dst, DType::I32, sb), 1, ReduceOp::Sum).unwrap();
    tx.send(()).unwrap();
    let got = i32_at(&HostDriver::download(&dst, LONG).unwrap());
    HostDriver::synchronize(&a, sa).unwrap();
    HostDriver::synchronize(&b, sb).unwrap();
    ranks1.join().unwrap();
    assert_eq!(
        got, 30,
        "the earlier write landed last, or the read came early"
    );
    assert_eq!(i32_at(&HostDriver::download(&dst, LONG).unwrap()), 30);
}

#[test]
fn alloc_gives_zeros_even_from_a_recycled_buffer() {
    let dev = HostDriver::open(Device::cpu(0)).unwrap();
    // Freed, this buffer goes back to the arena's pool with its bytes.
    drop(HostDriver::upload(&dev, &[0xab; 24]).unwrap());
    let fresh = HostDriver::alloc(&dev, 24).unwrap();
    assert_eq!(HostDriver::download(&fresh, SHORT).unwrap(), vec![0u8; 24]);
}

#[test]
fn send_recv_is_fifo_per_pair_in_every_elem_type() {
    let n = 4;
    let id = fresh("p2p");
    on_ranks(n, Duration::from_secs(20), move |rank| {
        let comm = join(id, n, rank, LONG).unwrap();
        let dev = HostDriver::open(Device::cpu(0)).unwrap();
        let s = HostDriver::comm_stream(&comm);
        let next = (rank + 1) % n;
        let prev = (rank + n - 1) % n;
        for elem in DType::ALL {
            // Two messages to the same peer arrive in order.
            let a: Vec<u8> = (0..3)
                .flat_map(|i| encode(elem, f64::from(val(rank, i))))
                .collect();
            let b: Vec<u8> = (0..3)
                .flat_map(|i| encode(elem, f64::from(val(rank, i + 1))))
                .collect();
            let (sa, sb) = (
                HostDriver::upload(&dev, &a).unwrap(),
                HostDriver::upload(&dev, &b).unwrap(),
            );
            HostDriver::send(P2p(&comm, &sa, elem, 3, next, s)).unwrap();
            HostDriver::send(P2p(&comm, &sb, elem, 3, next, s)).unwrap();
            let ra = HostDriver::alloc(&dev, a.len()).unwrap();
            let rb = HostDriver::alloc(&dev, b.len()).unwrap();
            HostDriver::recv(P2p(&comm, &ra, elem, 3, prev, s)).unwrap();
            HostDriver::recv(P2p(&comm, &rb, elem, 3, prev, s)).unwrap();
            let wa: Vec<u8> = (0..3)
                .flat_map(|i| encode(elem, f64::from(val(prev, i))))
                .collect();
            let wb: Vec<u8> = (0..3)
                .flat_map(|i| encode(elem, f64::from(val(prev, i + 1))))
                .collect();
            assert_eq!(HostDriver::download(&ra, LONG).unwrap(), wa, "{elem}");
            assert_eq!(HostDriver::download(&rb, LONG).unwrap(), wb, "{elem}");
        }
        HostDriver::synchronize(&comm, s).unwrap();
    });
}

#[test]
fn group_id_is_minted_once_and_shared() {
    let name = CommunicationId::new("shared-group-id-test");
    let ids = on_ranks_20(6, move |_| HostDriver::group_id(&name).unwrap());
    assert!(ids.windows(2).all(|w| w[0] == w[1]), "{ids:?}");
    let other = HostDriver::group_id(&CommunicationId::new("shared-group-id-other")).unwrap();
    assert_ne!(ids[0], other);
}

#[test]
fn join_timeout_names_the_missing_ranks() {
    let id = fresh("timeout");
    // Only rank 0 of 3 arrives.
    let e = join(id, 3, 0, SHORT).unwrap_err();
    let msg = e.to_string();
    assert!(
        matches!(&e, DriverError::JoinTimeout { missing, .. } if missing == &vec![1, 2]),
        "{msg}"
    );
    assert!(
        msg.contains("[1, 2]") && msg.contains("FUEL_JOIN_TIMEOUT_MS"),
        "{msg}"
    );
}

#[test]
fn join_timeout_with_two_of_four_present_names_ranks_1_and_3() {
    let id = fresh("timeout2");
    // Ranks 0 and 2 of 4 arrive; 1 and 3 never do. Whether the other
    // arrival was seen depends on thread start-up, so only 1 and 3 are sure.
    let errs = on_ranks_20(2, move |i| join(id, 4, i * 2, SHORT).unwrap_err());
    for e in errs {
        let msg = e.to_string();
        match &e {
            DriverError::JoinTimeout { missing, .. } => {
                assert!(missing.contains(&1) && missing.contains(&3), "{msg}")
            }
            _ => panic!("{msg}"),
        }
    }
}

#[test]
fn join_refuses_bad_ranks_sizes_and_duplicates() {
    let id = fresh("refuse");
    assert!(matches!(
        join(id, 2, 2, SHORT),
        Err(DriverError::BadRank { rank: 2, ranks: 2 })
    ));
    let out = on_ranks_20(2, move |rank| {
        if rank == 0 {
            join(id, 2, 0, Duration::from_secs(2))
                .map(|_| ())
                .map_err(|e| e.to_string())
        } else {
            std::thread::sleep(Duration::from_millis(50));
            let wrong = join(id, 3, 1, SHORT).unwrap_err().to_string();
            assert!(
                wrong.contains("3 ranks") && wrong.contains("formed with 2"),
                "{wrong}"
            );
            let dup = join(id, 2, 0, SHORT).unwrap_err().to_string();
            assert!(dup.contains("already joined"), "{dup}");
            // Now complete the group.
            join(id, 2, 1, Duration::from_secs(2))
                .map(|_| ())
                .map_err(|e| e.to_string())
        }
    });
    assert!(out.iter().all(|r| r.is_ok()), "{out:?}");
}

#[test]
fn data_type_refuses_partial_elements() {
    let e = HostDriver::data_type(DType::F32, 10).unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("10 bytes") && msg.contains("f32") && msg.contains("multiple of 4"),
        "{msg}"
    );
    assert_eq!(
        HostDriver::data_type(DType::BF16, 10).unwrap(),
        (DType::BF16, 5)
    );
}

#[cfg(feature = "nccl")]
#[test]
fn unknown_elem_type_is_an_error_not_a_crash() {
    use fuel_collective::NcclDriver;
    let e = NcclDriver::data_type(DType::I16, 8)
        .unwrap_err()
        .to_string();
    assert!(e.contains("i16") && e.contains("cannot carry"), "{e}");
}

#[test]
fn mismatched_counts_fail_on_every_rank() {
    let id = fresh("mismatch");
    let errs = on_ranks_20(2, move |rank| {
        let comm = join(id, 2, rank, LONG).unwrap();
        let dev = HostDriver::open(Device::cpu(0)).unwrap();
        let count = 2 + rank;
        let src = HostDriver::upload(&dev, &vec![1u8; count * 4]).unwrap();
        let dst = HostDriver::alloc(&dev, count * 4).unwrap();
        let s = HostDriver::comm_stream(&comm);
        HostDriver::all_reduce(Call(&comm, &src, &dst, DType::F32, s), count, ReduceOp::Sum)
            .unwrap();
        let e = HostDriver::download(&dst, LONG).unwrap_err();
        // The sticky error also comes out of synchronize, and the comm is poisoned.
        assert!(HostDriver::synchronize(&comm, s).is_err());
        let again =
            HostDriver::all_reduce(Call(&comm, &src, &dst, DType::F32, s), count, ReduceOp::Sum);
        assert!(
            matches!(again, Err(DriverError::Poisoned { .. })),
            "{again:?}"
        );
        e
    });
    for e in errs {
        let msg = e.to_string();
        assert!(
            matches!(
                e,
                DriverError::Mismatch { .. } | DriverError::PeerGone { .. }
            ),
            "{msg}"
        );
        if let DriverError::Mismatch { .. } = e {
            assert!(msg.contains("2 f32") && msg.contains("3 f32"), "{msg}");
        }
    }
}

#[test]
fn a_dropped_peer_is_an_error_not_a_hang() {
    let id = fresh("dropout");
    let out = on_ranks_20(3, move |rank| {
        let comm = join(id, 3, rank, LONG).unwrap();
        if rank == 2 {
            drop(comm);
            return None;
        }
        let dev = HostDriver::open(Device::cpu(0)).unwrap();
        let src = HostDriver::upload(&dev, &[1, 0, 0, 0]).unwrap();
        let dst = HostDriver::alloc(&dev, 4).unwrap();
        let s = HostDriver::comm_stream(&comm);
        HostDriver::all_reduce(Call(&comm, &src, &dst, DType::I32, s), 1, ReduceOp::Sum).unwrap();
        Some(HostDriver::download(&dst, LONG).unwrap_err())
    });
    for e in out.into_iter().flatten() {
        let msg = e.to_string();
        // Rank 2 left; the other survivor may instead report rank 0/1 failing first.
        assert!(matches!(e, DriverError::PeerGone { .. }), "{msg}");
        assert!(msg.contains("is gone"), "{msg}");
    }
}

#[test]
fn a_silent_peer_times_out_and_recv_names_it() {
    let id = fresh("silent");
    let out = on_ranks_20(2, move |rank| {
        let comm = join(id, 2, rank, SHORT.saturating_mul(5)).unwrap();
        let dev = HostDriver::open(Device::cpu(0)).unwrap();
        let s = HostDriver::comm_stream(&comm);
        if rank == 1 {
            // Hold the communicator until rank 0 has given up.
            std::thread::sleep(Duration::from_secs(2));
            return None;
        }
        let dst = HostDriver::alloc(&dev, 8).unwrap();
        HostDriver::recv(P2p(&comm, &dst, DType::F64, 1, 1, s)).unwrap();
        Some(HostDriver::download(&dst, LONG).unwrap_err().to_string())
    });
    let msg = out[0].clone().unwrap();
    assert!(
        msg.contains("waited") && msg.contains("data from rank 1"),
        "{msg}"
    );
}

#[test]
fn enqueue_checks_buffers_peers_and_streams() {
    let id = fresh("checks");
    on_ranks_20(2, move |rank| {
        let comm = join(id, 2, rank, LONG).unwrap();
        let dev = HostDriver::open(Device::cpu(0)).unwrap();
        let small = HostDriver::alloc(&dev, 4).unwrap();
        let s = HostDriver::comm_stream(&comm);
        let e = HostDriver::send(P2p(&comm, &small, DType::F64, 1, 1 - rank, s)).unwrap_err();
        assert!(e.to_string().contains("needs 8 bytes"), "{e}");
        let e = HostDriver::send(P2p(&comm, &small, DType::U8, 1, rank, s)).unwrap_err();
        assert!(matches!(e, DriverError::BadRank { .. }), "{e}");
        assert!(HostDriver::open(Device {
            kind: fuel_graph_ext::DeviceKind::Cuda,
            index: 0
        })
        .is_err());
    });
}

#[test]
fn spmd_communicator_all_collectives_on_4_threads() {
    let n = 4;
    let id = fresh("spmd");
    let results = on_ranks(n, Duration::from_secs(20), move |rank| {
        let comm = join(id, n, rank, LONG).unwrap();
        let dev = HostDriver::open(Device::cpu(rank as u32)).unwrap();
        let c = DriverCommunicator::<HostDriver>::new(comm, dev, LONG);
        assert_eq!((c.rank(), c.world_size()), (rank, n));
        let g = LazyGraph::new("rank");
        let ty = TensorType::new(DType::F32, &[2, 4]);
        let x = g.input("x", Device::cpu(rank as u32), ty.clone());
        let data: Vec<f64> = (0..8).map(|i| (rank * 10 + i) as f64).collect();
        c.bind("x", HostTensor::new(ty, data));
        let sum = c.all_reduce(&x, ReduceOp::Sum).unwrap();
        let doubled = sum.add(&sum).unwrap();
        let mean = c.all_reduce(&x, ReduceOp::Mean).unwrap();
        let b = c.broadcast(&x, 2).unwrap();
        let ag = c.all_gather(&x, 1).unwrap();
        let rs = c.reduce_scatter(&x, ReduceOp::Max, 1).unwrap();
        c.barrier().unwrap();
        (
            c.evaluate(&doubled).unwrap().to_f64(),
            c.evaluate(&mean).unwrap().to_f64(),
            c.evaluate(&b).unwrap().to_f64(),
            c.evaluate(&ag).unwrap(),
            c.evaluate(&rs).unwrap(),
        )
    });
    for (rank, (doubled, mean, b, ag, rs)) in results.into_iter().enumerate() {
        let sum: Vec<f64> = (0..8)
            .map(|i| (0..n).map(|r| (r * 10 + i) as f64).sum())
            .collect();
        assert_eq!(doubled, sum.iter().map(|v| v * 2.0).collect::<Vec<_>>());
        assert_eq!(mean, sum.iter().map(|v| v / n as f64).collect::<Vec<_>>());
        assert_eq!(b, (0..8).map(|i| (20 + i) as f64).collect::<Vec<_>>());
        assert_eq!(ag.ty, TensorType::new(DType::F32, &[2, 16]));
        // Row o of the gather is every rank's row o, in rank order.
        let want: Vec<f64> = (0..2)
            .flat_map(|o| {
                (0..n).flat_map(move |r| (0..4).map(move |j| (r * 10 + o * 4 + j) as f64))
            })
            .collect();
        assert_eq!(ag.to_f64(), want);
        assert_eq!(rs.ty, TensorType::new(DType::F32, &[2, 1]));
        let max_rank = (n - 1) * 10;
        assert_eq!(
            rs.to_f64(),
            vec![(max_rank + rank) as f64, (max_rank + 4 + rank) as f64]
        );
    }
}

#[test]
fn spmd_errors_are_collective_errors() {
    let id = fresh("spmd-err");
    on_ranks_20(2, move |rank| {
        let comm = join(id, 2, rank, LONG).unwrap();
        let dev = HostDriver::open(Device::cpu(0)).unwrap();
        let c = DriverCommunicator::<HostDriver>::new(comm, dev, LONG);
        let g = LazyGraph::new("r");
        let x = g.input("x", Device::cpu(0), TensorType::new(DType::I32, &[3]));
        assert!(c
            .broadcast(&x, 5)
            .unwrap_err()
            .to_string()
            .contains("root 5"));
        assert!(c
            .all_gather(&x, 1)
            .unwrap_err()
            .to_string()
            .contains("axis 1"));
        let e = c
            .reduce_scatter(&x, ReduceOp::Sum, 0)
            .unwrap_err()
            .to_string();
        assert!(e.contains("cannot split"), "{e}");
        // Recording is lazy; x is not bound, so running the graph names the
        // problem before any rank reaches the collective.
        let s = c.all_reduce(&x, ReduceOp::Sum).unwrap();
        let e = c.evaluate(&s).unwrap_err().to_string();
        assert!(e.contains("no data for input \"x\""), "{e}");
    });
}

/// The SPMD graphs are recorded, not run: each rank's graph holds
/// `comm.*` nodes, the executor meets the other ranks when it reaches them,
/// and the results equal the world oracle `interpret_world` on the same
/// graphs and inputs.
#[test]
fn spmd_graphs_record_comm_nodes_and_match_the_world_oracle() {
    use fuel_graph_ext::interp::interpret_world;
    use std::collections::BTreeMap;
    let n = 3;
    let id = fresh("spmd-lazy");
    let ranks = on_ranks(n, Duration::from_secs(20), move |rank| {
        let comm = join(id, n, rank, LONG).unwrap();
        let dev = HostDriver::open(Device::cpu(rank as u32)).unwrap();
        let c = DriverCommunicator::<HostDriver>::new(comm, dev, LONG);
        let g = LazyGraph::new("rank");
        let ty = TensorType::new(DType::I32, &[3, 2]);
        let x = g.input("x", Device::cpu(rank as u32), ty.clone());
        let s = c.all_reduce(&x, ReduceOp::Max).unwrap();
        let y = s.add(&x).unwrap();
        let out = c.all_gather(&y, 0).unwrap();
        let text = fuel_graph_ext::text::print(&g.snapshot());
        assert!(
            text.contains(&format!(
                "= comm.all_reduce.max %0 {{comm={}, ranks=3}} @cpu:{rank}",
                c.id()
            )),
            "{text}"
        );
        assert!(text.contains("= comm.all_gather"), "{text}");
        let data: Vec<f64> = (0..6)
            .map(|i| ((rank * 7 + i * 3) % 11) as f64 - 5.0)
            .collect();
        let input = HostTensor::new(ty, data);
        c.bind("x", input.clone());
        let got = c.evaluate(&out).unwrap();
        let mut graph = g.snapshot();
        graph.set_outputs(vec![out.value()]);
        (graph, BTreeMap::from([("x".to_string(), input)]), got)
    });
    let graphs: Vec<_> = ranks.iter().map(|r| r.0.clone()).collect();
    let inputs: Vec<_> = ranks.iter().map(|r| r.1.clone()).collect();
    let want = interpret_world(&graphs, &inputs).unwrap();
    for (rank, (_, _, got)) in ranks.iter().enumerate() {
        assert_eq!(got.ty, TensorType::new(DType::I32, &[9, 2]));
        assert_eq!(got, &want[rank][0], "rank {rank}");
    }
}
