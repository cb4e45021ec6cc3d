//! World collectives in tests: the flat group's meaning over P·k ranks in
//! (process, local index) order, on inputs whose folds are exact in any
//! order; recording one collective through a `WorldProcess`; and checking
//! a world's process graphs with `interp::interpret_world` against that
//! meaning. `tests/tests/world.rs` (which runs the graphs) and
//! `tests/tests/world_golden.rs` (which pins them) share it.

use fuel_collective::{CollectiveError, WorldProcess};
use fuel_graph_ext::interp::{interpret_world, HostTensor};
use fuel_graph_ext::{DType, Graph, LazyGraph, LazyTensor, ReduceOp, TensorType};
use std::collections::BTreeMap;

/// Global rank `g`'s element `j`: small integers, or halves for floats,
/// so every fold of up to 8 of them is exact in any order.
pub fn value(d: DType, g: usize, j: usize) -> f64 {
    let k = ((g * 3 + j * 5) % 7) as f64;
    match d {
        DType::F32 | DType::F64 | DType::F16 | DType::BF16 => k / 2.0 - 1.5,
        DType::U8 | DType::U16 | DType::U32 | DType::U64 | DType::Bool => k,
        _ => k - 3.0,
    }
}

/// Global rank `g`'s shard: `d[rows, 2]` of [`value`]s.
pub fn shard(d: DType, g: usize, rows: usize) -> HostTensor {
    let ty = TensorType::new(d, &[rows, 2]);
    HostTensor::new(ty, (0..rows * 2).map(|j| value(d, g, j)).collect())
}

/// Element `j` of the reduction of `n` ranks' shards.
pub fn fold(d: DType, op: ReduceOp, n: usize, j: usize) -> f64 {
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

/// One world collective, as the flat group sees it.
#[derive(Clone, Copy, Debug)]
pub enum Case {
    AllReduce(ReduceOp),
    /// The op and the global root rank.
    Reduce(ReduceOp, usize),
    /// The global root rank.
    Broadcast(usize),
    /// Along axis 0.
    AllGather,
    /// Along axis 0.
    ReduceScatter(ReduceOp),
}

/// What `case` gives global rank `g` of `n`, in the flat group, for
/// shards of `rows` rows.
pub fn expected(case: Case, d: DType, n: usize, g: usize, rows: usize) -> HostTensor {
    let row = |vals: Vec<f64>, rows: usize| HostTensor::new(TensorType::new(d, &[rows, 2]), vals);
    match case {
        Case::AllReduce(op) | Case::Reduce(op, _) => {
            row((0..rows * 2).map(|j| fold(d, op, n, j)).collect(), rows)
        }
        Case::Broadcast(root) => shard(d, root, rows),
        Case::AllGather => row(
            (0..n)
                .flat_map(|q| (0..rows * 2).map(move |j| value(d, q, j)))
                .collect(),
            rows * n,
        ),
        Case::ReduceScatter(op) => {
            let piece = rows / n * 2;
            row(
                (g * piece..(g + 1) * piece)
                    .map(|j| fold(d, op, n, j))
                    .collect(),
                rows / n,
            )
        }
    }
}

/// What one process records: its lazy graph, its inputs (`s0`, `s1`, ...,
/// one shard per local device) and its results.
pub struct Recorded {
    pub graph: LazyGraph,
    pub inputs: BTreeMap<String, HostTensor>,
    pub outputs: Vec<LazyTensor>,
}

impl Recorded {
    /// The unlowered graph, with the outputs set.
    pub fn snapshot(&self) -> Graph {
        let mut g = self.graph.snapshot();
        g.set_outputs(self.outputs.iter().map(LazyTensor::value).collect());
        g
    }
}

/// Records `case` over `d[rows, 2]` shards into a new graph `name`
/// through `world` (a `WorldGroup` derefs to its `WorldProcess`).
pub fn record(
    world: &WorldProcess,
    name: &str,
    case: Case,
    d: DType,
    rows: usize,
) -> Result<Recorded, CollectiveError> {
    let (p, k) = (world.process(), world.devices().len());
    let graph = LazyGraph::new(name);
    let ty = TensorType::new(d, &[rows, 2]);
    let mut inputs = BTreeMap::new();
    let shards: Vec<LazyTensor> = world
        .devices()
        .iter()
        .enumerate()
        .map(|(i, dev)| {
            let name = format!("s{i}");
            inputs.insert(name.clone(), shard(d, p * k + i, rows));
            graph.input(&name, *dev, ty.clone())
        })
        .collect();
    let outputs: Vec<LazyTensor> = match case {
        Case::AllReduce(op) => world.all_reduce(&shards, op)?,
        Case::Reduce(op, root) => vec![world.reduce(&shards, op, root)?],
        Case::Broadcast(root) => {
            let i = if root / k == p { root % k } else { 0 };
            world.broadcast(&shards[i], root)?
        }
        Case::AllGather => world.all_gather(&shards, 0)?,
        Case::ReduceScatter(op) => world.reduce_scatter(&shards, op, 0)?,
    };
    Ok(Recorded {
        graph,
        inputs,
        outputs,
    })
}

/// Checks process `q`'s results `got` (of a world with `k` local devices
/// per process and `n` ranks in all) against the flat group's meaning. A
/// reduce gives one result per process: on the root's device on the
/// root's process, on the hub elsewhere.
pub fn check_flat(
    case: Case,
    d: DType,
    (n, k, rows): (usize, usize, usize),
    q: usize,
    got: &[HostTensor],
) -> Result<(), String> {
    let ranks = if matches!(case, Case::Reduce(..)) {
        1
    } else {
        k
    };
    if got.len() != ranks {
        return Err(format!(
            "process {q} gave {} result(s), the flat group {ranks}",
            got.len()
        ));
    }
    for (i, a) in got.iter().enumerate() {
        a.check_same(&expected(case, d, n, q * k + i, rows))
            .map_err(|e| format!("{case:?} {d}: process {q} result {i}: {e}"))?;
    }
    Ok(())
}

/// Runs every process's graph through `interpret_world` and checks each
/// process's results against the flat group's meaning; gives the results.
pub fn check_world(
    graphs: &[Graph],
    inputs: &[BTreeMap<String, HostTensor>],
    case: Case,
    d: DType,
    (k, rows): (usize, usize),
) -> Result<Vec<Vec<HostTensor>>, String> {
    let n = graphs.len() * k;
    let out = interpret_world(graphs, inputs).map_err(|e| format!("interpret_world: {e}"))?;
    for (q, got) in out.iter().enumerate() {
        check_flat(case, d, (n, k, rows), q, got)
            .map_err(|e| format!("interpret_world against the flat group: {e}"))?;
    }
    Ok(out)
}

/// What one rank ran in each round: its inputs and the results it got.
pub type Rounds = Vec<(BTreeMap<String, HostTensor>, Vec<HostTensor>)>;

/// Checks every round of SPMD runs against `interpret_world`: `ranks[r]`
/// is rank r's graph and its rounds (the same number on every rank), and
/// every rank's results of a round must equal what the interpreter gives
/// for that round's inputs, bit for bit.
pub fn assert_rounds_match_world(ranks: &[(Graph, Rounds)]) {
    let graphs: Vec<Graph> = ranks.iter().map(|r| r.0.clone()).collect();
    let rounds = ranks.first().map_or(0, |r| r.1.len());
    for round in 0..rounds {
        let inputs: Vec<_> = ranks.iter().map(|r| r.1[round].0.clone()).collect();
        let want = match interpret_world(&graphs, &inputs) {
            Ok(w) => w,
            Err(e) => panic!("round {round}: interpret_world: {e}"),
        };
        for (rank, r) in ranks.iter().enumerate() {
            let got = &r.1[round].1;
            assert_eq!(got.len(), want[rank].len(), "round {round}, rank {rank}");
            for (k, (g, w)) in got.iter().zip(&want[rank]).enumerate() {
                if let Err(e) = g.check_same(w) {
                    panic!("round {round}, rank {rank}, output {k}: {e}");
                }
            }
        }
    }
}
