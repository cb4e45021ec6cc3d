//! Multi-process check of `MpiDriver`'s collectives, launched by
//! `scripts/mpi-check.sh` on 4 processes. For every element type and
//! every reduce op it runs `all_reduce`, `reduce_scatter` (even and
//! uneven), `reduce`, and for every element type `all_gather` (even and
//! uneven), `broadcast` and `all_to_all_v`, and checks each result bit for
//! bit against an oracle folded here in rank order. The inputs are chosen
//! so every fold is exact (small integers, dyadic floats), so any order
//! MPI folds in gives the oracle's bits, and a wrong op, slice or rank is
//! caught. Then float sums whose rounding does depend on order are checked
//! to be bit-identical on every rank; the gather-then-fold fallback is
//! checked never to run; a join with one rank absent must name exactly
//! that rank; and ranks that disagree (count, collective, all_to_all
//! split) must fail on every rank. Prints `PROOF rank R ...` or exits
//! non-zero.

use fuel_collective::driver::{MpiCommunicator, MpiDriver};
use fuel_collective::{Call, CollectiveDriver, CommunicationId, Driver, DriverError, JoinOptions};
use fuel_graph_ext::interp::HostTensor;
use fuel_graph_ext::{DType, Device, ReduceOp, TensorType};
use std::sync::Arc;
use std::time::Duration;

#[path = "common/launch.rs"]
mod launch;
use launch::env_usize;

type Res<T> = Result<T, String>;
type Dev = Arc<fuel_runtime::backend::cpu::Arena>;

const T: Duration = Duration::from_secs(60);

fn e(x: DriverError) -> String {
    x.to_string()
}

/// Rank `r`'s element `i`: exact in every dtype, and every fold of four
/// of them is exact too (floats are multiples of 1/2 up to 2 in size).
fn value(d: DType, r: usize, i: usize) -> f64 {
    let k = (r * 3 + i * 5) % 7;
    match d {
        DType::F32 | DType::F64 | DType::F16 | DType::BF16 => {
            [-2.0, -1.0, -0.5, 0.5, 1.0, 1.5, 2.0][k]
        }
        DType::I8 | DType::I16 | DType::I32 | DType::I64 => k as f64 - 3.0,
        DType::Bool => f64::from(u8::from(!i.is_multiple_of(3) || r == i % 4)),
        _ => k as f64,
    }
}

fn tensor(d: DType, vals: Vec<f64>) -> HostTensor {
    HostTensor::new(TensorType::new(d, &[vals.len()]), vals)
}

/// Rank `r`'s `n` elements starting at element `from`.
fn input(d: DType, r: usize, from: usize, n: usize) -> HostTensor {
    tensor(d, (from..from + n).map(|i| value(d, r, i)).collect())
}

/// The fold of every rank's element `i`, in rank order, as the IR defines it.
fn fold(d: DType, op: ReduceOp, ranks: usize, i: usize) -> f64 {
    let vals: Vec<f64> = (0..ranks).map(|r| value(d, r, i)).collect();
    let float = matches!(d, DType::F32 | DType::F64 | DType::F16 | DType::BF16);
    match op {
        ReduceOp::Sum => vals.iter().sum(),
        ReduceOp::Product => vals.iter().product(),
        ReduceOp::Max => vals.iter().cloned().fold(f64::MIN, f64::max),
        ReduceOp::Min => vals.iter().cloned().fold(f64::MAX, f64::min),
        ReduceOp::Mean => {
            let m = vals.iter().sum::<f64>() / ranks as f64;
            if float {
                m
            } else {
                m.trunc()
            }
        }
    }
}

fn check(what: String, got: Vec<u8>, want: HostTensor) -> Res<()> {
    let got = HostTensor::from_bytes(want.ty.clone(), got).map_err(|x| format!("{what}: {x}"))?;
    got.check_same(&want).map_err(|x| format!("{what}: {x}"))
}

struct Ctx {
    comm: MpiCommunicator,
    dev: Dev,
    rank: usize,
    n: usize,
}

impl Ctx {
    fn up(&self, t: &HostTensor) -> Res<fuel_collective::DeviceResource<MpiDriver>> {
        MpiDriver::upload(&self.dev, t.bytes()).map_err(e)
    }
    fn buf(&self, d: DType, n: usize) -> Res<fuel_collective::DeviceResource<MpiDriver>> {
        MpiDriver::alloc(&self.dev, n * d.size_bytes()).map_err(e)
    }
}

fn reductions(c: &Ctx, d: DType, op: ReduceOp) -> Res<()> {
    let (r, n) = (c.rank, c.n);
    let s = MpiDriver::comm_stream(&c.comm);
    // all_reduce of 7 elements (runs of 2,2,2,1) and of 3 (one empty run).
    for count in [7, 3] {
        let src = c.up(&input(d, r, 0, count))?;
        let dst = c.buf(d, count)?;
        MpiDriver::all_reduce(Call(&c.comm, &src, &dst, d, s), count, op).map_err(e)?;
        let want = tensor(d, (0..count).map(|i| fold(d, op, n, i)).collect());
        check(
            format!("all_reduce {d} {op:?} x{count}"),
            MpiDriver::download(&dst, T).map_err(e)?,
            want,
        )?;
    }
    // reduce_scatter: 3 elements per rank.
    let k = 3;
    let src = c.up(&input(d, r, 0, k * n))?;
    let dst = c.buf(d, k)?;
    if !MpiDriver::reduce_scatter(Call(&c.comm, &src, &dst, d, s), k, op).map_err(e)? {
        return Err("reduce_scatter not served by MPI".into());
    }
    let want = tensor(d, (r * k..r * k + k).map(|i| fold(d, op, n, i)).collect());
    check(
        format!("reduce_scatter {d} {op:?}"),
        MpiDriver::download(&dst, T).map_err(e)?,
        want,
    )?;
    // reduce_scatter_v: rank r gets r % 3 elements (rank 0 none).
    let counts: Vec<usize> = (0..n).map(|x| x % 3).collect();
    let total: usize = counts.iter().sum();
    let at: usize = counts[..r].iter().sum();
    let src = c.up(&input(d, r, 0, total))?;
    let dst = c.buf(d, counts[r].max(1))?;
    MpiDriver::reduce_scatter_uneven(Call(&c.comm, &src, &dst, d, s), &counts, op).map_err(e)?;
    let mut got = MpiDriver::download(&dst, T).map_err(e)?;
    got.truncate(counts[r] * d.size_bytes());
    let want = tensor(d, (at..at + counts[r]).map(|i| fold(d, op, n, i)).collect());
    check(format!("reduce_scatter_v {d} {op:?}"), got, want)?;
    // reduce onto the last rank.
    let src = c.up(&input(d, r, 0, 5))?;
    let dst = c.buf(d, 5)?;
    MpiDriver::reduce(&c.comm, &src, &dst, d, 5, op, n - 1, s).map_err(e)?;
    let got = MpiDriver::download(&dst, T).map_err(e)?;
    if r == n - 1 {
        let want = tensor(d, (0..5).map(|i| fold(d, op, n, i)).collect());
        check(format!("reduce {d} {op:?}"), got, want)?;
    } else if got.iter().any(|b| *b != 0) {
        return Err(format!(
            "reduce {d} {op:?}: rank {r} is not the root but its destination was written"
        ));
    }
    Ok(())
}

fn movements(c: &Ctx, d: DType) -> Res<()> {
    let (r, n) = (c.rank, c.n);
    let s = MpiDriver::comm_stream(&c.comm);
    // all_gather: every rank's 3 elements, in rank order.
    let src = c.up(&input(d, r, 0, 3))?;
    let dst = c.buf(d, 3 * n)?;
    MpiDriver::all_gather(Call(&c.comm, &src, &dst, d, s), 3).map_err(e)?;
    let want = tensor(
        d,
        (0..n)
            .flat_map(|q| (0..3).map(move |i| value(d, q, i)))
            .collect(),
    );
    check(
        format!("all_gather {d}"),
        MpiDriver::download(&dst, T).map_err(e)?,
        want,
    )?;
    // all_gather_v: rank q gives (q + 2) % 3 elements (one rank none).
    let counts: Vec<usize> = (0..n).map(|q| (q + 2) % 3).collect();
    let total: usize = counts.iter().sum();
    let src = c.up(&input(d, r, 0, counts[r].max(1)))?;
    let dst = c.buf(d, total)?;
    MpiDriver::all_gather_uneven(Call(&c.comm, &src, &dst, d, s), &counts).map_err(e)?;
    let want = tensor(
        d,
        (0..n)
            .flat_map(|q| (0..counts[q]).map(move |i| value(d, q, i)))
            .collect(),
    );
    check(
        format!("all_gather_v {d}"),
        MpiDriver::download(&dst, T).map_err(e)?,
        want,
    )?;
    // broadcast from rank 1.
    let src = c.up(&input(d, r, 0, 4))?;
    let dst = c.buf(d, 4)?;
    MpiDriver::broadcast(Call(&c.comm, &src, &dst, d, s), 4, 1 % n).map_err(e)?;
    check(
        format!("broadcast {d}"),
        MpiDriver::download(&dst, T).map_err(e)?,
        input(d, 1 % n, 0, 4),
    )?;
    // all_to_all_v: rank i sends (i + j) % 3 elements to rank j, taken
    // from its element (10 * j) on.
    let send: Vec<usize> = (0..n).map(|j| (r + j) % 3).collect();
    let recv: Vec<usize> = (0..n).map(|i| (i + r) % 3).collect();
    let piece = |i: usize, j: usize| (0..(i + j) % 3).map(move |k| value(d, i, 10 * j + k));
    let mine = tensor(d, (0..n).flat_map(|j| piece(r, j)).collect());
    let src = c.up(&mine)?;
    let dst = c.buf(d, recv.iter().sum::<usize>().max(1))?;
    MpiDriver::all_to_all(Call(&c.comm, &src, &dst, d, s), &send, &recv).map_err(e)?;
    let want = tensor(d, (0..n).flat_map(|i| piece(i, r)).collect());
    let mut got = MpiDriver::download(&dst, T).map_err(e)?;
    got.truncate(want.bytes().len());
    check(format!("all_to_all_v {d}"), got, want)
}

/// Float sums and products whose rounding depends on the order: every
/// rank must still hold the same bits.
fn rank_identical(c: &Ctx) -> Res<()> {
    let (r, n) = (c.rank, c.n);
    let s = MpiDriver::comm_stream(&c.comm);
    let count = 1001;
    for d in [DType::F32, DType::F64, DType::F16, DType::BF16] {
        for op in [ReduceOp::Sum, ReduceOp::Product, ReduceOp::Mean] {
            let vals = (0..count)
                .map(|i| 1.0 + ((r * 7919 + i * 104729) % 1000) as f64 / 3001.0)
                .collect();
            let src = c.up(&tensor(d, vals))?;
            let dst = c.buf(d, count)?;
            MpiDriver::all_reduce(Call(&c.comm, &src, &dst, d, s), count, op).map_err(e)?;
            let all = c.buf(d, count * n)?;
            MpiDriver::all_gather(Call(&c.comm, &dst, &all, d, s), count).map_err(e)?;
            let all = MpiDriver::download(&all, T).map_err(e)?;
            let b = count * d.size_bytes();
            if let Some(q) = (1..n).find(|q| all[q * b..(q + 1) * b] != all[..b]) {
                return Err(format!(
                    "all_reduce {d} {op:?}: rank {q}'s result differs from rank 0's"
                ));
            }
        }
    }
    Ok(())
}

fn join(name: &str, n: usize, r: usize) -> Res<MpiCommunicator> {
    let id = MpiDriver::group_id(&CommunicationId::new(name)).map_err(e)?;
    MpiDriver::join_with(id, n, r, JoinOptions::with_timeout(T)).map_err(e)
}

/// Runs `f` on a fresh group; it must fail with a `Mismatch` (or an
/// all_to_all `SplitMismatch`) naming `peer`.
fn must_disagree(
    name: &str,
    c: &Ctx,
    peer: impl Fn(usize) -> usize,
    f: impl FnOnce(&MpiCommunicator) -> Result<(), DriverError>,
) -> Res<()> {
    let comm = join(name, c.n, c.rank)?;
    match f(&comm) {
        Err(DriverError::Mismatch { peer: p, .. }) if p == peer(c.rank) => {}
        // An all_to_all split names the sender of the first bad piece.
        Err(DriverError::SplitMismatch { from, .. }) if from == peer(c.rank) => {}
        other => {
            return Err(format!(
                "{name}: expected a mismatch naming rank {}, got {other:?}",
                peer(c.rank)
            ))
        }
    }
    Ok(())
}

fn disagreements(c: &Ctx) -> Res<()> {
    let (r, n, dev) = (c.rank, c.n, &c.dev);
    let f32s = |k: usize| MpiDriver::alloc(dev, 4 * k);
    // Rank 1 all-reduces 3 elements, the others 2: every rank fails; rank
    // 1 names rank 0, every other rank names rank 1.
    must_disagree(
        "mpi-disagree-count",
        c,
        |r| usize::from(r != 1),
        |comm| {
            let k = if r == 1 { 3 } else { 2 };
            let (a, b) = (f32s(k)?, f32s(k)?);
            MpiDriver::all_reduce(
                Call(comm, &a, &b, DType::F32, MpiDriver::comm_stream(comm)),
                k,
                ReduceOp::Sum,
            )
        },
    )?;
    // The last rank broadcasts while the others all-reduce.
    must_disagree(
        "mpi-disagree-kind",
        c,
        |r| if r == n - 1 { 0 } else { n - 1 },
        |comm| {
            let (a, b) = (f32s(2)?, f32s(2)?);
            let s = MpiDriver::comm_stream(comm);
            if r == n - 1 {
                MpiDriver::broadcast(Call(comm, &a, &b, DType::F32, s), 2, 0).map(|_| ())
            } else {
                MpiDriver::all_reduce(Call(comm, &a, &b, DType::F32, s), 2, ReduceOp::Sum)
            }
        },
    )?;
    // Rank 0 expects one element more from rank 1 than rank 1 sends: every
    // rank names the pair.
    must_disagree(
        "mpi-disagree-split",
        c,
        |_| 1,
        |comm| {
            let send = vec![1usize; n];
            let mut recv = vec![1usize; n];
            if r == 0 {
                recv[1] = 2;
            }
            let (a, b) = (f32s(n)?, f32s(n + 1)?);
            MpiDriver::all_to_all(
                Call(comm, &a, &b, DType::F32, MpiDriver::comm_stream(comm)),
                &send,
                &recv,
            )
        },
    )?;
    Ok(())
}

/// World groups whose processes disagree fail on every process, naming
/// the first difference: the last process brings one device where the
/// others bring two; then it all-reduces i32 where the others use f32.
fn world_disagreements(c: &Ctx) -> Res<()> {
    use fuel_collective::{CollectiveError, DriverCommunicator, WorldGroup};
    use fuel_graph_ext::{LazyGraph, Topology};
    let (r, n) = (c.rank, c.n);
    let last = r == n - 1;
    let dc = DriverCommunicator::<MpiDriver>::new(join("mpi-world-count", n, r)?, c.dev.clone(), T);
    let devs: Vec<Device> = (0..if last { 1 } else { 2 }).map(Device::cpu).collect();
    match WorldGroup::new(&dc, devs) {
        Err(CollectiveError::WorldDeviceCount { peer, .. })
            if peer == if last { 0 } else { n - 1 } => {}
        other => {
            return Err(format!(
                "world with unequal device counts: got {:?}",
                other.err()
            ))
        }
    }
    drop(dc);
    let dc = DriverCommunicator::<MpiDriver>::new(join("mpi-world-dtype", n, r)?, c.dev.clone(), T);
    let world =
        WorldGroup::new(&dc, [Device::cpu(0), Device::cpu(1)]).map_err(|x| x.to_string())?;
    let d = if last { DType::I32 } else { DType::F32 };
    let g = LazyGraph::new("world-dtype");
    let ty = TensorType::new(d, &[4]);
    let shards = [
        g.input("a", Device::cpu(0), ty.clone()),
        g.input("b", Device::cpu(1), ty.clone()),
    ];
    let outs = world
        .all_reduce(&shards, ReduceOp::Sum)
        .map_err(|x| x.to_string())?;
    let exe = world
        .compile(
            &outs.iter().collect::<Vec<_>>(),
            Arc::new(Topology::default()),
        )
        .map_err(|x| x.to_string())?;
    let zero = HostTensor::new(ty, vec![0.0; 4]);
    let inputs = [("a".to_string(), zero.clone()), ("b".to_string(), zero)]
        .into_iter()
        .collect();
    match exe.run_host(&inputs) {
        Err(e)
            if e.to_string().contains("mismatch")
                && e.to_string()
                    .contains(&format!("rank {}", if last { 0 } else { n - 1 })) =>
        {
            Ok(())
        }
        other => Err(format!(
            "world all_reduce with unequal dtypes: got {:?}",
            other.map(|_| ()).map_err(|x| x.to_string())
        )),
    }
}

/// Every rank but the last joins; each must name exactly the last.
fn missing_rank(c: &Ctx) -> Res<()> {
    let (r, n) = (c.rank, c.n);
    if r == n - 1 {
        return Ok(());
    }
    let id = MpiDriver::group_id(&CommunicationId::new("mpi-late-join")).map_err(e)?;
    match MpiDriver::join_with(
        id,
        n,
        r,
        JoinOptions::with_timeout(Duration::from_millis(1500)),
    ) {
        Err(DriverError::JoinTimeout { missing, .. }) if missing == vec![n - 1] => Ok(()),
        other => Err(format!(
            "join without rank {}: expected it alone missing, got {:?}",
            n - 1,
            other.err()
        )),
    }
}

fn run() -> Res<usize> {
    let rank = env_usize(&["OMPI_COMM_WORLD_RANK"])?;
    let n = env_usize(&["OMPI_COMM_WORLD_SIZE"])?;
    if n < 2 {
        return Err("run on at least 2 processes".into());
    }
    let c = Ctx {
        comm: join("mpi-collectives", n, rank)?,
        dev: MpiDriver::open(Device::cpu(0)).map_err(e)?,
        rank,
        n,
    };
    for d in DType::ALL {
        for op in ReduceOp::ALL {
            reductions(&c, d, op)?;
        }
        movements(&c, d)?;
    }
    rank_identical(&c)?;
    if MpiDriver::fallback_folds() != 0 {
        return Err(format!(
            "{} reductions took the gather-then-fold fallback",
            MpiDriver::fallback_folds()
        ));
    }
    disagreements(&c)?;
    world_disagreements(&c)?;
    missing_rank(&c)?;
    drop(c);
    Ok(rank)
}

fn main() {
    let res = run();
    let res = MpiDriver::finalize().map_err(|x| x.to_string()).and(res);
    match res {
        Ok(rank) => println!("PROOF rank {rank} ok: 13 dtypes x 5 ops through all_reduce/reduce_scatter(_v)/reduce, all_gather(_v)/broadcast/all_to_all_v exact; float results rank-identical; no fallback fold; disagreements (driver and world) fail every rank; join names exactly the missing rank"),
        Err(msg) => {
            launch::say_err(&format!("FAIL: {msg}"));
            std::process::exit(1);
        }
    }
}
