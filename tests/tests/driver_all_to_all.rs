//! `CollectiveDriver::all_to_all` over `HostDriver` ranks that are threads:
//! even and uneven splits, one where a rank receives nothing, each checked
//! against the reference interpreter's `all_to_all` of the same operands;
//! and ranks that disagree on the split, which fail every rank (E0960)
//! instead of hanging. Then the SPMD `comm.all_to_all` that
//! `DriverCommunicator::all_to_all` records, run by 4 rank threads along an
//! outer and an inner axis and checked against `interpret_world`: even, and
//! uneven with an N×N split (one rank receiving nothing); ranks that record
//! different splits all fail (E0960); bad splits are refused when recorded.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use fuel_collective::{
    Call, CollectiveDriver, CommunicationId, Communicator, Driver, DriverCommunicator, DriverError,
    HostDriver, JoinOptions,
};
use fuel_graph_ext::interp::{interpret, interpret_world, HostTensor};
use fuel_graph_ext::{text, DType, Device, Graph, LazyGraph, TensorType};
use fuel_test_support::ranks::on_ranks;
use std::collections::BTreeMap;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(20);

/// Rank `rank`'s operand: `rows` rows of 2 i32 values, distinct per rank.
fn operand(rank: usize, rows: usize) -> HostTensor {
    let ty = TensorType::new(DType::I32, &[rows, 2]);
    let data = (0..rows * 2)
        .map(|i| (rank * 100 + i) as f64 - 7.0)
        .collect();
    HostTensor::new(ty, data)
}

/// One all_to_all over `split` (row i: what rank i sends each rank, rows
/// of 2 elements each) as `recv_split` says each rank expects; gives
/// every rank's result or error.
fn run(
    name: &str,
    split: &[Vec<usize>],
    recv_split: &[Vec<usize>],
) -> Vec<Result<HostTensor, DriverError>> {
    let n = split.len();
    let id = HostDriver::group_id(&CommunicationId::new(name)).unwrap();
    let (split, recv_split) = (split.to_vec(), recv_split.to_vec());
    on_ranks(n, Duration::from_secs(60), move |rank| {
        let comm = HostDriver::join_with(id, n, rank, JoinOptions::with_timeout(WAIT)).unwrap();
        let dev = HostDriver::open(Device::cpu(0)).unwrap();
        let rows: usize = split[rank].iter().sum();
        let x = operand(rank, rows);
        let send: Vec<usize> = split[rank].iter().map(|r| r * 2).collect();
        let recv: Vec<usize> = (0..n).map(|i| recv_split[i][rank] * 2).collect();
        let out_rows: usize = (0..n).map(|i| recv_split[i][rank]).sum();
        let src = HostDriver::upload(&dev, x.bytes()).unwrap();
        let dst = HostDriver::alloc(&dev, out_rows * 2 * 4).unwrap();
        let s = HostDriver::comm_stream(&comm);
        HostDriver::all_to_all(Call(&comm, &src, &dst, DType::I32, s), &send, &recv)?;
        let synced = HostDriver::synchronize(&comm, s);
        let bytes = HostDriver::download(&dst, WAIT)?;
        synced?;
        let ty = TensorType::new(DType::I32, &[out_rows, 2]);
        Ok(HostTensor::from_bytes(ty, bytes).unwrap())
    })
}

/// The interpreter's answer: an in-process `all_to_all` of the same
/// operands with the same split.
fn oracle(split: &[Vec<usize>]) -> Vec<HostTensor> {
    let n = split.len();
    let mut src = String::from("graph @a2a {\n");
    let mut inputs = BTreeMap::new();
    for (r, row) in split.iter().enumerate() {
        let rows: usize = row.iter().sum();
        src += &format!("  %{r} = input \"s{r}\" @cpu:{r} : i32[{rows},2]\n");
        inputs.insert(format!("s{r}"), operand(r, rows));
    }
    let flat: Vec<String> = split.iter().flatten().map(|e| e.to_string()).collect();
    let ops: Vec<String> = (0..n).map(|r| format!("%{r}")).collect();
    let tys: Vec<String> = (0..n)
        .map(|j| format!("i32[{},2]", split.iter().map(|row| row[j]).sum::<usize>()))
        .collect();
    let rets: Vec<String> = (0..n).map(|j| format!("%{n}#{j}")).collect();
    src += &format!(
        "  %{n}:{n} = all_to_all {} {{axis=0, split=[{}]}} : {}\n  return {}\n}}\n",
        ops.join(", "),
        flat.join(", "),
        tys.join(", "),
        rets.join(", ")
    );
    let g = text::parse(&src).unwrap_or_else(|e| panic!("{e}\n{src}"));
    interpret(&g, &inputs).unwrap()
}

fn check(name: &str, split: &[Vec<usize>]) {
    let got = run(name, split, split);
    let want = oracle(split);
    for (rank, (g, w)) in got.into_iter().zip(&want).enumerate() {
        let g = g.unwrap_or_else(|e| panic!("{name}: rank {rank} failed: {e}"));
        g.check_same(w)
            .unwrap_or_else(|e| panic!("{name}: rank {rank}: {e}"));
    }
}

#[test]
fn even_split_over_4_ranks_matches_the_interpreter() {
    check("a2a-even", &vec![vec![2; 4]; 4]);
}

#[test]
fn uneven_split_over_4_ranks_matches_the_interpreter() {
    let split = vec![
        vec![1, 3, 0, 2],
        vec![2, 0, 1, 1],
        vec![0, 4, 2, 1],
        vec![3, 1, 1, 0],
    ];
    check("a2a-uneven", &split);
}

#[test]
fn a_rank_that_receives_nothing_gets_an_empty_result() {
    // Column 0 is all zeros: rank 0 receives nothing (a zero extent).
    let split = vec![
        vec![0, 1, 2, 0],
        vec![0, 2, 0, 1],
        vec![0, 0, 1, 2],
        vec![0, 1, 2, 0],
    ];
    check("a2a-empty", &split);
}

#[test]
fn ranks_that_pass_different_splits_all_fail_alike() {
    let split = vec![vec![1, 1, 1, 1]; 4];
    // Rank 2 expects two rows from rank 1, which sends one.
    let mut expect = split.clone();
    expect[1][2] = 2;
    let got = run("a2a-mismatch", &split, &expect);
    let msgs: Vec<String> = got
        .into_iter()
        .map(|r| match r {
            Err(e) => e.to_string(),
            Ok(_) => panic!("a rank succeeded although the splits differ"),
        })
        .collect();
    for m in &msgs {
        assert_eq!(m, &msgs[0], "every rank reports the same disagreement");
    }
    assert!(
        msgs[0].contains("rank 1 sends 2 i32 element(s) to rank 2, which expects 4"),
        "{}",
        msgs[0]
    );
}

/// Four ranks each record `all_to_all` of an f32[4,8] along axis 0 (whole
/// runs) and axis 1 (packed and unpacked around the exchange), run the
/// graph twice with new inputs, and match `interpret_world`.
#[test]
fn spmd_comm_all_to_all_on_4_rank_threads_matches_interpret_world() {
    let n = 4;
    let cpu = Device::cpu(0);
    let id = HostDriver::group_id(&CommunicationId::new("a2a-spmd")).unwrap();
    let ty = TensorType::new(DType::F32, &[4, 8]);
    let ty2 = ty.clone();
    let results = on_ranks(n, Duration::from_secs(60), move |rank| {
        let comm = HostDriver::join_with(id, n, rank, JoinOptions::with_timeout(WAIT)).unwrap();
        let c = DriverCommunicator::<HostDriver>::new(comm, HostDriver::open(cpu).unwrap(), WAIT);
        let g = LazyGraph::new("rank");
        let x = g.input("x", cpu, ty2.clone());
        let outer = c.all_to_all(&x, 0, None).unwrap();
        let inner = c.all_to_all(&x, 1, None).unwrap();
        let outs = [&outer, &inner];
        let exe = c.compile(&outs).unwrap();
        let mut graph = g.snapshot();
        graph.set_outputs(outs.iter().map(|t| t.value()).collect());
        let mut rounds = Vec::new();
        for round in 0..2 {
            let data = (0..ty2.num_elements())
                .map(|i| (rank * 1000 + round * 100 + i) as f64)
                .collect();
            let input = BTreeMap::from([("x".to_string(), HostTensor::new(ty2.clone(), data))]);
            let got = exe.run_host(&input).unwrap();
            rounds.push((input, got));
        }
        (graph, rounds)
    });
    let graphs: Vec<Graph> = results.iter().map(|r| r.0.clone()).collect();
    for round in 0..2 {
        let inputs: Vec<_> = results.iter().map(|r| r.1[round].0.clone()).collect();
        let want = interpret_world(&graphs, &inputs).unwrap();
        for (rank, r) in results.iter().enumerate() {
            let got = &r.1[round].1;
            assert_eq!(got.len(), 2);
            for (k, (g, w)) in got.iter().zip(&want[rank]).enumerate() {
                assert_eq!(g.ty, ty, "output {k} keeps the operand's type");
                if let Err(e) = g.check_same(w) {
                    panic!("round {round}, rank {rank}, output {k}: {e}");
                }
            }
        }
    }
}

/// The interpreter's `comm.all_to_all` is not the identity: rank 1's result
/// along axis 0 of 4 one-row operands is every rank's row 1.
#[test]
fn interpret_world_all_to_all_takes_piece_rank_of_every_operand() {
    let src = |r: usize| {
        format!(
            "graph @r{r} {{\n  %0 = input \"x\" @cpu:0 : f32[4]\n  %1 = comm.all_to_all %0 {{axis=0, comm=0, ranks=4}} @cpu:0 : f32[4]\n  return %1\n}}\n"
        )
    };
    let graphs: Vec<Graph> = (0..4).map(|r| text::parse(&src(r)).unwrap()).collect();
    let ty = TensorType::new(DType::F32, &[4]);
    let inputs: Vec<_> = (0..4)
        .map(|r| {
            let data = (0..4).map(|i| (r * 10 + i) as f64).collect();
            BTreeMap::from([("x".to_string(), HostTensor::new(ty.clone(), data))])
        })
        .collect();
    let want = interpret_world(&graphs, &inputs).unwrap();
    assert_eq!(want[1][0].to_f64(), vec![1.0, 11.0, 21.0, 31.0]);
}

/// Runs an SPMD `comm.all_to_all` along axis 0 on 4 host rank threads,
/// rank r recording an operand of `per_rank(r).0` with split
/// `per_rank(r).1`, and returns each rank's error (a run that succeeds
/// fails the test: the ranks disagree).
fn disagreeing_ranks(
    name: &str,
    per_rank: impl Fn(usize) -> (TensorType, Option<Vec<usize>>) + Send + Sync + 'static,
) -> Vec<String> {
    let n = 4;
    let cpu = Device::cpu(0);
    let id = HostDriver::group_id(&CommunicationId::new(name)).unwrap();
    let per_rank = std::sync::Arc::new(per_rank);
    on_ranks(n, Duration::from_secs(60), move |rank| {
        let comm = HostDriver::join_with(id, n, rank, JoinOptions::with_timeout(WAIT)).unwrap();
        let c = DriverCommunicator::<HostDriver>::new(comm, HostDriver::open(cpu).unwrap(), WAIT);
        let (ty, split) = per_rank(rank);
        let g = LazyGraph::new("rank");
        let x = g.input("x", cpu, ty.clone());
        let y = c.all_to_all(&x, 0, split.as_deref()).unwrap();
        let exe = c.compile(&[&y]).unwrap();
        let data = vec![1.0; ty.num_elements()];
        let input = BTreeMap::from([("x".to_string(), HostTensor::new(ty, data))]);
        match exe.run_host(&input) {
            Ok(_) => panic!("rank {rank} ran although the splits differ"),
            Err(e) => e.to_string(),
        }
    })
}

/// SPMD ranks whose operands differ along the axis pass different splits
/// to the driver (rank 3 sends 2 rows to each peer, the others 1): every
/// rank's run fails with the split mismatch (E0960), none hangs.
#[test]
fn spmd_ranks_with_different_splits_all_fail() {
    let errs = disagreeing_ranks("a2a-spmd-bad", |rank| {
        let rows = if rank == 3 { 8 } else { 4 };
        (TensorType::new(DType::F32, &[rows, 2]), None)
    });
    for (rank, e) in errs.iter().enumerate() {
        assert!(
            e.contains("`all_to_all` split mismatch: rank 3 sends 4 f32 element(s) to rank 0, which expects 2"),
            "rank {rank}: {e}"
        );
    }
}

/// A 4×4 split in which rank 2 receives nothing (column 2 is zero) and
/// every rank holds another extent: row i is what rank i sends each rank.
const UNEVEN: [usize; 16] = [1, 2, 0, 0, 0, 1, 0, 3, 2, 0, 0, 1, 1, 1, 0, 0];

/// Rank `rank`'s extent along the split axis: its row's sum.
fn row_sum(split: &[usize], n: usize, rank: usize) -> usize {
    split[rank * n..(rank + 1) * n].iter().sum()
}

/// Four ranks record `comm.all_to_all` with [`UNEVEN`] along axis 0 of an
/// f32[R,3] (whole runs) and axis 1 of an f32[2,R] (packed and unpacked
/// around the exchange), where R is the rank's row sum; the results have
/// the column sums (rank 2's are empty), match `interpret_world`, and the
/// node prints with its rank and split and parses back to the same text.
#[test]
fn spmd_uneven_all_to_all_on_4_rank_threads_matches_interpret_world() {
    let n = 4;
    let cpu = Device::cpu(0);
    let id = HostDriver::group_id(&CommunicationId::new("a2a-spmd-uneven")).unwrap();
    let results = on_ranks(n, Duration::from_secs(60), move |rank| {
        let comm = HostDriver::join_with(id, n, rank, JoinOptions::with_timeout(WAIT)).unwrap();
        let c = DriverCommunicator::<HostDriver>::new(comm, HostDriver::open(cpu).unwrap(), WAIT);
        let rows = row_sum(&UNEVEN, n, rank);
        let (t0, t1) = (
            TensorType::new(DType::F32, &[rows, 3]),
            TensorType::new(DType::F32, &[2, rows]),
        );
        let g = LazyGraph::new("rank");
        let x0 = g.input("x0", cpu, t0.clone());
        let x1 = g.input("x1", cpu, t1.clone());
        let outer = c.all_to_all(&x0, 0, Some(&UNEVEN)).unwrap();
        let inner = c.all_to_all(&x1, 1, Some(&UNEVEN)).unwrap();
        let outs = [&outer, &inner];
        let exe = c.compile(&outs).unwrap();
        let mut graph = g.snapshot();
        graph.set_outputs(outs.iter().map(|t| t.value()).collect());
        let data = |t: &TensorType, k: usize| {
            let v = (0..t.num_elements())
                .map(|i| (rank * 1000 + k * 100 + i) as f64)
                .collect();
            HostTensor::new(t.clone(), v)
        };
        let input = BTreeMap::from([
            ("x0".to_string(), data(&t0, 0)),
            ("x1".to_string(), data(&t1, 1)),
        ]);
        let got = exe.run_host(&input).unwrap();
        (graph, input, got)
    });
    let graphs: Vec<Graph> = results.iter().map(|r| r.0.clone()).collect();
    let inputs: Vec<_> = results.iter().map(|r| r.1.clone()).collect();
    let want = interpret_world(&graphs, &inputs).unwrap();
    for (rank, r) in results.iter().enumerate() {
        let col: usize = (0..n).map(|i| UNEVEN[i * n + rank]).sum();
        assert_eq!(r.2[0].ty, TensorType::new(DType::F32, &[col, 3]));
        assert_eq!(r.2[1].ty, TensorType::new(DType::F32, &[2, col]));
        for (k, (g, w)) in r.2.iter().zip(&want[rank]).enumerate() {
            if let Err(e) = g.check_same(w) {
                panic!("rank {rank}, output {k}: {e}");
            }
        }
    }
    // Rank 0 gets rank 2's first two rows, then rank 3's first row.
    let x = |r: usize, i: usize| (r * 1000 + i) as f64;
    let want0: Vec<f64> = [x(0, 0), x(0, 1), x(0, 2)]
        .into_iter()
        .chain((0..6).map(|i| x(2, i)))
        .chain((0..3).map(|i| x(3, i)))
        .collect();
    assert_eq!(results[0].2[0].to_f64(), want0);
    assert!(results[2].2[0].to_f64().is_empty());
    // The node carries its rank and the split, and round-trips as text.
    let printed = text::print(&graphs[1]);
    assert!(
        printed.contains("rank=1, ranks=4, split=[1, 2, 0, 0, 0, 1, 0, 3, 2, 0, 0, 1, 1, 1, 0, 0]} @cpu:0 : f32[4,3]"),
        "{printed}"
    );
    assert_eq!(text::print(&text::parse(&printed).unwrap()), printed);
    assert!(fuel_graph_ext::dot::to_dot(&graphs[1]).contains("rank=1, ranks=4, split=[1, 2"));
}

/// Ranks that record different split matrices (rank 1 expects three rows
/// from rank 0, which sends two) all fail with the split mismatch (E0960)
/// from the host driver's count check; none hangs.
#[test]
fn spmd_ranks_with_different_split_matrices_all_fail() {
    let errs = disagreeing_ranks("a2a-spmd-uneven-bad", |rank| {
        let mut split = UNEVEN;
        if rank == 1 {
            split[1] = 3;
        }
        let ty = TensorType::new(DType::F32, &[row_sum(&split, 4, rank), 3]);
        (ty, Some(split.to_vec()))
    });
    for (rank, e) in errs.iter().enumerate() {
        assert!(
            e.contains("`all_to_all` split mismatch: rank 0 sends 6 f32 element(s) to rank 1, which expects 9"),
            "rank {rank}: {e}"
        );
    }
}

/// What `DriverCommunicator::all_to_all` refuses when it records (no rank
/// meets another): a split of the wrong count, a row that does not add up
/// to the operand's extent, a column whose sum overflows; and a split of
/// equal entries is recorded as none, printing as the even form.
#[test]
fn spmd_uneven_all_to_all_bad_splits_are_refused_when_recorded() {
    let n = 2;
    let cpu = Device::cpu(0);
    let id = HostDriver::group_id(&CommunicationId::new("a2a-spmd-record")).unwrap();
    let msgs = on_ranks(n, Duration::from_secs(60), move |rank| {
        let comm = HostDriver::join_with(id, n, rank, JoinOptions::with_timeout(WAIT)).unwrap();
        let c = DriverCommunicator::<HostDriver>::new(comm, HostDriver::open(cpu).unwrap(), WAIT);
        let g = LazyGraph::new("rank");
        let x = g.input("x", cpu, TensorType::new(DType::F32, &[4, 2]));
        // Rank 0's row may be fine where rank 1's is not: rank 1 is checked.
        let err = |s: &[usize]| {
            c.all_to_all(&x, 0, Some(s))
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default()
        };
        let even = c.all_to_all(&x, 0, Some(&[2, 2, 2, 2])).unwrap();
        let printed = g.with_graph(text::print);
        let _ = even;
        (
            err(&[2, 2]),
            err(&[1, 3, 3, 2]),
            err(&[0, usize::MAX, 0, 4]),
            printed,
        )
    });
    let (count, row, overflow, printed) = &msgs[1];
    assert!(
        count.contains("all_to_all split has 2 extent(s) for 2 rank(s); give 4"),
        "{count}"
    );
    assert!(
        row.contains("comm.all_to_all split row 1 (what rank 1 sends) adds up to 5 but this rank's operand has extent 4 along axis 0; make row 1 add up to 4"),
        "{row}"
    );
    assert!(
        overflow.contains("`comm.all_to_all` along axis 0 gives a result of more than"),
        "{overflow}"
    );
    assert!(
        printed.contains("comm.all_to_all %0 {axis=0, comm="),
        "{printed}"
    );
    assert!(!printed.contains("split"), "{printed}");
}
