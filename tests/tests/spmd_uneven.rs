//! The SPMD `comm.all_gather` of operands whose extents differ per rank
//! (`Communicator::all_gather_uneven`) and `comm.reduce_scatter` with
//! slices of different extents (`Communicator::reduce_scatter_split`, by
//! default `extent / N` each and the remainder on the last rank), recorded
//! by 4 `DriverCommunicator`s over `HostDriver` rank threads, run along an
//! outer axis (the driver's counts-per-rank call) and an inner one (region
//! copies around it), and checked against `interpret_world`; the nodes'
//! text round-trips; ranks that disagree fail on every rank.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use fuel_collective::{
    CollectiveDriver, CommunicationId, Communicator, Driver, DriverCommunicator, HostDriver,
    JoinOptions,
};
use fuel_graph_ext::interp::{interpret_world, HostTensor};
use fuel_graph_ext::{text, DType, Device, Graph, LazyGraph, LazyTensor, ReduceOp, TensorType};
use fuel_test_support::ranks::on_ranks;
use std::collections::BTreeMap;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(20);
const N: usize = 4;

/// One rank's run: its graph (outputs set), its inputs and its results.
type RankRun = (Graph, BTreeMap<String, HostTensor>, Vec<HostTensor>);

/// Each input of a rank, by name, with its shape.
type Shapes = fn(usize) -> Vec<(&'static str, Vec<usize>)>;

/// Runs `record(comm, graph, rank)` on 4 host rank threads (it adds inputs
/// named by `shapes(rank)` and returns the outputs), compiles and runs
/// every rank once, and checks each against `interpret_world`.
fn run_world(
    name: &str,
    shapes: Shapes,
    record: fn(&DriverCommunicator<HostDriver>, &[LazyTensor]) -> Vec<LazyTensor>,
) -> Vec<RankRun> {
    let cpu = Device::cpu(0);
    let id = HostDriver::group_id(&CommunicationId::new(name)).unwrap();
    let results = on_ranks(N, Duration::from_secs(60), move |rank| {
        let comm = HostDriver::join_with(id, N, rank, JoinOptions::with_timeout(WAIT)).unwrap();
        let c = DriverCommunicator::<HostDriver>::new(comm, HostDriver::open(cpu).unwrap(), WAIT);
        let g = LazyGraph::new("rank");
        let mut xs = Vec::new();
        let mut input = BTreeMap::new();
        for (k, (name, shape)) in shapes(rank).into_iter().enumerate() {
            let ty = TensorType::new(DType::F32, &shape);
            xs.push(g.input(name, cpu, ty.clone()));
            let v = (0..ty.num_elements())
                .map(|i| (rank * 1000 + k * 100 + i) as f64 * 0.5)
                .collect();
            input.insert(name.to_string(), HostTensor::new(ty, v));
        }
        let outs = record(&c, &xs);
        let refs: Vec<&LazyTensor> = outs.iter().collect();
        let exe = c.compile(&refs).unwrap();
        let got = exe.run_host(&input).unwrap();
        let mut graph = g.snapshot();
        graph.set_outputs(outs.iter().map(|t| t.value()).collect());
        (graph, input, got)
    });
    let graphs: Vec<Graph> = results.iter().map(|r| r.0.clone()).collect();
    let inputs: Vec<_> = results.iter().map(|r| r.1.clone()).collect();
    let want = interpret_world(&graphs, &inputs).unwrap();
    for (rank, r) in results.iter().enumerate() {
        assert_eq!(r.2.len(), want[rank].len());
        for (k, (g, w)) in r.2.iter().zip(&want[rank]).enumerate() {
            if let Err(e) = g.check_same(w) {
                panic!("rank {rank}, output {k}: {e}");
            }
        }
    }
    results
}

const EXTENTS: [usize; N] = [2, 0, 3, 1];

/// Rank 1 holds nothing; every rank gets the 6 rows (or columns) of all.
#[test]
fn uneven_all_gather_on_4_rank_threads_matches_interpret_world() {
    let results = run_world(
        "spmd-uneven-gather",
        |rank| vec![("a", vec![EXTENTS[rank], 3]), ("b", vec![2, EXTENTS[rank]])],
        |c, xs| {
            vec![
                c.all_gather_uneven(&xs[0], 0, &EXTENTS).unwrap(),
                c.all_gather_uneven(&xs[1], 1, &EXTENTS).unwrap(),
            ]
        },
    );
    for r in &results {
        assert_eq!(r.2[0].ty, TensorType::new(DType::F32, &[6, 3]));
        assert_eq!(r.2[1].ty, TensorType::new(DType::F32, &[2, 6]));
    }
    // Rows of rank 0 then rank 2 then rank 3.
    let row = |rank: usize, i: usize| (rank * 1000 + i) as f64 * 0.5;
    let want: Vec<f64> = (0..6)
        .map(|i| row(0, i))
        .chain((0..9).map(|i| row(2, i)))
        .chain((0..3).map(|i| row(3, i)))
        .collect();
    assert_eq!(results[1].2[0].to_f64(), want);
    let printed = text::print(&results[2].0);
    assert!(
        printed.contains("rank=2, ranks=4, split=[2, 0, 3, 1]} @cpu:0 : f32[6,3]"),
        "{printed}"
    );
    assert_eq!(text::print(&text::parse(&printed).unwrap()), printed);
}

/// The default partition of 10 over 4 ranks (2, 2, 2 and 4) summed, and
/// the split [0, 5, 1, 4] with max, along an outer and an inner axis.
#[test]
fn uneven_reduce_scatter_on_4_rank_threads_matches_interpret_world() {
    let results = run_world(
        "spmd-uneven-scatter",
        |_| vec![("a", vec![10, 2]), ("b", vec![3, 10])],
        |c, xs| {
            let split = [0usize, 5, 1, 4];
            vec![
                c.reduce_scatter_split(&xs[0], ReduceOp::Sum, 0, None)
                    .unwrap(),
                c.reduce_scatter_split(&xs[1], ReduceOp::Sum, 1, None)
                    .unwrap(),
                c.reduce_scatter_split(&xs[0], ReduceOp::Max, 0, Some(&split))
                    .unwrap(),
                c.reduce_scatter_split(&xs[1], ReduceOp::Max, 1, Some(&split))
                    .unwrap(),
            ]
        },
    );
    let default = [2, 2, 2, 4];
    let split = [0, 5, 1, 4];
    for (rank, r) in results.iter().enumerate() {
        assert_eq!(r.2[0].ty, TensorType::new(DType::F32, &[default[rank], 2]));
        assert_eq!(r.2[1].ty, TensorType::new(DType::F32, &[3, default[rank]]));
        assert_eq!(r.2[2].ty, TensorType::new(DType::F32, &[split[rank], 2]));
        assert_eq!(r.2[3].ty, TensorType::new(DType::F32, &[3, split[rank]]));
    }
    // Rank 3's sum: rows 6..10 of every rank's `a`, added.
    let want: Vec<f64> = (12..20)
        .map(|i| (0..N).map(|r| (r * 1000 + i) as f64 * 0.5).sum())
        .collect();
    assert_eq!(results[3].2[0].to_f64(), want);
    let printed = text::print(&results[3].0);
    assert!(
        printed.contains("comm.reduce_scatter.sum %0 {axis=0, comm="),
        "{printed}"
    );
    assert!(
        printed.contains("rank=3, ranks=4, split=[2, 2, 2, 4]}"),
        "{printed}"
    );
    assert_eq!(text::print(&text::parse(&printed).unwrap()), printed);
}

/// Rank 3 gives another list of extents than the others: every rank's run
/// fails (the host driver compares the counts), none hangs.
#[test]
fn ranks_with_different_gather_extents_all_fail() {
    let cpu = Device::cpu(0);
    let id = HostDriver::group_id(&CommunicationId::new("spmd-uneven-gather-bad")).unwrap();
    let errs = on_ranks(N, Duration::from_secs(60), move |rank| {
        let comm = HostDriver::join_with(id, N, rank, JoinOptions::with_timeout(WAIT)).unwrap();
        let c = DriverCommunicator::<HostDriver>::new(comm, HostDriver::open(cpu).unwrap(), WAIT);
        let extents = if rank == 3 { [2, 1, 3, 1] } else { EXTENTS };
        let ty = TensorType::new(DType::F32, &[extents[rank], 3]);
        let g = LazyGraph::new("rank");
        let x = g.input("x", cpu, ty.clone());
        let y = c.all_gather_uneven(&x, 0, &extents).unwrap();
        let exe = c.compile(&[&y]).unwrap();
        let input = BTreeMap::from([(
            "x".to_string(),
            HostTensor::new(ty.clone(), vec![1.0; ty.num_elements()]),
        )]);
        exe.run_host(&input).unwrap_err().to_string()
    });
    for (rank, e) in errs.iter().enumerate() {
        assert!(
            e.contains("`all_gather_uneven` mismatch"),
            "rank {rank}: {e}"
        );
    }
}

/// What the recorder refuses, before any rank meets another: a list of
/// extents of the wrong length or whose own entry is not the tensor's
/// extent, and a split that does not add up to the axis.
#[test]
fn bad_uneven_gathers_and_scatters_are_refused_when_recorded() {
    let cpu = Device::cpu(0);
    let id = HostDriver::group_id(&CommunicationId::new("spmd-uneven-record")).unwrap();
    let msgs = on_ranks(2, Duration::from_secs(60), move |rank| {
        let comm = HostDriver::join_with(id, 2, rank, JoinOptions::with_timeout(WAIT)).unwrap();
        let c = DriverCommunicator::<HostDriver>::new(comm, HostDriver::open(cpu).unwrap(), WAIT);
        let g = LazyGraph::new("rank");
        let x = g.input("x", cpu, TensorType::new(DType::F32, &[4, 2]));
        let err = |r: Result<LazyTensor, _>| {
            r.err()
                .map(|e: fuel_collective::CollectiveError| e.to_string())
                .unwrap_or_default()
        };
        (
            err(c.all_gather_uneven(&x, 0, &[4, 1, 2])),
            err(c.all_gather_uneven(&x, 0, &[3, 3])),
            err(c.reduce_scatter_split(&x, ReduceOp::Sum, 0, Some(&[1, 2]))),
        )
    });
    let (count, own, sum) = &msgs[1];
    assert!(
        count.contains("comm.all_gather split has 3 extent(s) for 2 rank(s)"),
        "{count}"
    );
    assert!(
        own.contains("comm.all_gather split gives rank 1 extent 3 along axis 0, but this rank's operand has extent 4"),
        "{own}"
    );
    assert!(
        sum.contains("split adds up to 3 but axis 0 has extent 4"),
        "{sum}"
    );
}
