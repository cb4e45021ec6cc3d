//! The drivers' collectives with a count per rank
//! (`CollectiveDriver::all_gather_uneven`, like `MPI_Allgatherv`, and
//! `reduce_scatter_uneven`, like `MPI_Reduce_scatter`) over `HostDriver`
//! ranks that are threads: counts with a zero among them, checked exactly
//! against the result worked out here; and ranks that pass different
//! counts, which fail every rank instead of hanging. (`MpiDriver`'s are
//! checked by `examples/mpi_driver.rs` under `scripts/mpi-check.sh`.)

#![allow(clippy::unwrap_used, clippy::expect_used)]

use fuel_collective::{
    Call, CollectiveDriver, CommunicationId, Driver, DriverError, HostDriver, JoinOptions,
};
use fuel_graph_ext::{DType, Device, ReduceOp};
use fuel_test_support::ranks::on_ranks;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(20);

/// Rank `rank`'s `len` i32 values, distinct per rank and position.
fn values(rank: usize, len: usize) -> Vec<i32> {
    (0..len).map(|i| (rank * 100 + i) as i32 - 5).collect()
}

fn bytes(v: &[i32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn ints(b: &[u8]) -> Vec<i32> {
    b.chunks_exact(4)
        .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// Joins group `name` as `rank` of `n` and runs `f` with the communicator
/// and a CPU device.
fn with_rank<T>(
    name: &str,
    n: usize,
    rank: usize,
    f: impl FnOnce(&fuel_collective::driver::HostCommunicator, &<HostDriver as Driver>::Device) -> T,
) -> T {
    let id = HostDriver::group_id(&CommunicationId::new(name)).unwrap();
    let comm = HostDriver::join_with(id, n, rank, JoinOptions::with_timeout(WAIT)).unwrap();
    let dev = HostDriver::open(Device::cpu(0)).unwrap();
    f(&comm, &dev)
}

/// Rank r's `counts[r]` elements, gathered on every rank in rank order;
/// rank 1 contributes nothing.
#[test]
fn all_gather_uneven_over_4_host_ranks() {
    let counts = [2usize, 0, 3, 1];
    let got = on_ranks(4, Duration::from_secs(60), move |rank| {
        with_rank("uneven-gather", 4, rank, |comm, dev| {
            let src = HostDriver::upload(dev, &bytes(&values(rank, counts[rank]))).unwrap();
            let dst = HostDriver::alloc(dev, 6 * 4).unwrap();
            let s = HostDriver::comm_stream(comm);
            let native =
                HostDriver::all_gather_uneven(Call(comm, &src, &dst, DType::I32, s), &counts)
                    .unwrap();
            assert!(native, "the host driver has its own uneven all_gather");
            HostDriver::synchronize(comm, s).unwrap();
            ints(&HostDriver::download(&dst, WAIT).unwrap())
        })
    });
    let want: Vec<i32> = (0..4).flat_map(|r| values(r, counts[r])).collect();
    for (rank, g) in got.iter().enumerate() {
        assert_eq!(g, &want, "rank {rank}");
    }
}

/// Every rank holds 6 elements; rank r gets the sum (then the max) of
/// every rank's r-th run, `counts[r]` long; rank 2's is empty.
#[test]
fn reduce_scatter_uneven_over_4_host_ranks() {
    let counts = [1usize, 3, 0, 2];
    for op in [ReduceOp::Sum, ReduceOp::Max] {
        let got = on_ranks(4, Duration::from_secs(60), move |rank| {
            let name = format!("uneven-scatter-{op:?}");
            with_rank(&name, 4, rank, |comm, dev| {
                let src = HostDriver::upload(dev, &bytes(&values(rank, 6))).unwrap();
                let dst = HostDriver::alloc(dev, counts[rank] * 4).unwrap();
                let s = HostDriver::comm_stream(comm);
                let native = HostDriver::reduce_scatter_uneven(
                    Call(comm, &src, &dst, DType::I32, s),
                    &counts,
                    op,
                )
                .unwrap();
                assert!(native);
                HostDriver::synchronize(comm, s).unwrap();
                ints(&HostDriver::download(&dst, WAIT).unwrap())
            })
        });
        let mut start = 0;
        for (rank, g) in got.iter().enumerate() {
            let want: Vec<i32> = (start..start + counts[rank])
                .map(|i| {
                    let each = (0..4).map(|r| values(r, 6)[i]);
                    match op {
                        ReduceOp::Sum => each.sum(),
                        _ => each.max().unwrap(),
                    }
                })
                .collect();
            assert_eq!(g, &want, "{op:?}, rank {rank}");
            start += counts[rank];
        }
    }
}

/// Rank 2 passes other counts than the rest: every rank's collective
/// fails (a mismatch naming the counts), none hangs.
#[test]
fn ranks_that_pass_different_counts_all_fail() {
    let errs = on_ranks(3, Duration::from_secs(60), move |rank| {
        with_rank("uneven-mismatch", 3, rank, |comm, dev| {
            let counts = if rank == 2 { [1usize, 1, 2] } else { [2, 1, 1] };
            let src = HostDriver::upload(dev, &bytes(&values(rank, counts[rank]))).unwrap();
            let dst = HostDriver::alloc(dev, 4 * 4).unwrap();
            let s = HostDriver::comm_stream(comm);
            HostDriver::all_gather_uneven(Call(comm, &src, &dst, DType::I32, s), &counts).unwrap();
            let r: Result<(), DriverError> = HostDriver::synchronize(comm, s);
            r.unwrap_err().to_string()
        })
    });
    for (rank, e) in errs.iter().enumerate() {
        assert!(
            e.contains("`all_gather_uneven` mismatch"),
            "rank {rank}: {e}"
        );
        assert!(
            e.contains("[1, 1, 2]") && e.contains("[2, 1, 1]"),
            "rank {rank}: {e}"
        );
    }
}
