//! `MpiDriver` from several threads at once, launched by
//! `scripts/mpi-check.sh` under `mpirun -n 2`: in every process two
//! threads each join a group of their own and run all-reduces (one of them
//! in place) and a send/recv exchange on it at the same time, checking
//! every result. Before MPI ran at `MPI_THREAD_MULTIPLE` with a communicator
//! of its own per group, the two threads' calls overlapped on one
//! `MPI_COMM_WORLD` at `MPI_THREAD_SERIALIZED`: undefined behaviour, and in
//! practice one thread's collective met the other thread's on the peer.
//! Two rounds make the threads' calls overlap for certain (see
//! `forced_overlap`); the rest overlap as the scheduler lets them, and the
//! count is printed. It also checks that `MpiDriver::finalize` refuses
//! while a communicator lives and that a join after it is refused. Prints `PROOF rank R ok: ...`
//! or exits non-zero.

use fuel_collective::driver::MpiDriver;
use fuel_collective::{Call, CollectiveDriver, CommunicationId, Driver, P2p};
use fuel_graph_ext::{DType, Device, ReduceOp};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Duration;

#[path = "common/launch.rs"]
mod launch;
use launch::env_usize;

/// All-reduces per thread.
const ITERS: usize = 400;
/// Elements per all-reduce.
const COUNT: usize = 4;

fn i64s(bytes: &[u8]) -> Vec<i64> {
    bytes
        .chunks(8)
        .map(|c| {
            let mut b = [0u8; 8];
            b.copy_from_slice(c);
            i64::from_le_bytes(b)
        })
        .collect()
}

fn bytes(v: impl Iterator<Item = i64>) -> Vec<u8> {
    v.flat_map(i64::to_le_bytes).collect()
}

/// Calls in flight in this process, and how many started while another
/// was in flight; the barrier both threads pass once joined; and the
/// flags of the forced overlap (see [`forced_overlap`]), one per round.
struct Overlap {
    inside: AtomicUsize,
    overlapped: AtomicUsize,
    calls: AtomicUsize,
    start: Barrier,
    entered: [AtomicBool; 2],
    gate: [AtomicBool; 2],
}

impl Overlap {
    fn call<T>(&self, f: impl FnOnce() -> T) -> T {
        if self.inside.fetch_add(1, Ordering::SeqCst) > 0 {
            self.overlapped.fetch_add(1, Ordering::Relaxed);
        }
        self.calls.fetch_add(1, Ordering::Relaxed);
        let r = f();
        self.inside.fetch_sub(1, Ordering::SeqCst);
        r
    }
}

/// Spins (yielding) until `flag` is set, at most 60 s.
fn wait_for(flag: &AtomicBool, what: &str) -> Result<(), String> {
    let until = std::time::Instant::now() + Duration::from_secs(60);
    while !flag.load(Ordering::SeqCst) {
        if std::time::Instant::now() > until {
            return Err(format!("waited 60 s for {what}"));
        }
        std::thread::yield_now();
    }
    Ok(())
}

/// Two rounds that make the two threads' calls overlap for certain, on
/// rank `round` in round `round`: there thread 1 enters an all-reduce on its
/// group and thread 0 calls its own only once thread 1 is inside; thread
/// 1's call cannot finish yet, since on every other rank thread 1 waits
/// until thread 0's all-reduce has finished. Each sum is checked.
fn forced_overlap(
    g: usize,
    rank: usize,
    n: usize,
    ov: &Overlap,
    comm: &<MpiDriver as CollectiveDriver>::Communicator,
    dev: &<MpiDriver as Driver>::Device,
) -> Result<(), String> {
    let e = |x: fuel_collective::DriverError| format!("thread {g}, forced overlap: {x}");
    let s = MpiDriver::comm_stream(comm);
    for round in 0..2 {
        let holder = rank == round % n;
        let src = MpiDriver::upload(dev, &((rank + 1) as i64).to_le_bytes()).map_err(e)?;
        let dst = MpiDriver::alloc(dev, 8).map_err(e)?;
        let reduce =
            || MpiDriver::all_reduce(Call(comm, &src, &dst, DType::I64, s), 1, ReduceOp::Sum);
        match (g, holder) {
            (1, true) => ov
                .call(|| {
                    ov.entered[round].store(true, Ordering::SeqCst);
                    reduce()
                })
                .map_err(e)?,
            (1, false) => {
                wait_for(&ov.gate[round], "thread 0's all-reduce")?;
                ov.call(reduce).map_err(e)?
            }
            _ => {
                if holder {
                    wait_for(&ov.entered[round], "thread 1 to enter its all-reduce")?;
                }
                ov.call(reduce).map_err(e)?;
                ov.gate[round].store(true, Ordering::SeqCst);
            }
        }
        let got = i64s(&MpiDriver::download(&dst, Duration::from_secs(30)).map_err(e)?);
        let want = (1..=n as i64).sum::<i64>();
        if got != [want] {
            return Err(format!(
                "thread {g}, forced overlap round {round}: got {got:?}, want {want}"
            ));
        }
    }
    Ok(())
}

/// Thread `g`'s work on its own group: every result checked.
fn work(g: usize, rank: usize, n: usize, ov: &Overlap) -> Result<(), String> {
    let e = |x: fuel_collective::DriverError| format!("thread {g}: {x}");
    let id = MpiDriver::group_id(&CommunicationId::new(format!("threads-{g}"))).map_err(e)?;
    let comm = MpiDriver::join(id, n, rank).map_err(e)?;
    ov.start.wait();
    let dev = MpiDriver::open(Device::cpu(g as u32)).map_err(e)?;
    forced_overlap(g, rank, n, ov, &comm, &dev)?;
    let s = MpiDriver::comm_stream(&comm);
    let t = Duration::from_secs(30);
    let value = |r: usize, k: usize, i: usize| (g * 1_000_000 + r * 1000 + k * 10 + i) as i64;
    for k in 0..ITERS {
        let mine = bytes((0..COUNT).map(|i| value(rank, k, i)));
        let want: Vec<i64> = (0..COUNT)
            .map(|i| (0..n).map(|r| value(r, k, i)).sum())
            .collect();
        let src = MpiDriver::upload(&dev, &mine).map_err(e)?;
        let in_place = k % 2 == 1;
        let dst = if in_place {
            src.clone()
        } else {
            MpiDriver::alloc(&dev, mine.len()).map_err(e)?
        };
        ov.call(|| {
            MpiDriver::all_reduce(Call(&comm, &src, &dst, DType::I64, s), COUNT, ReduceOp::Sum)
        })
        .map_err(e)?;
        let got = i64s(&MpiDriver::download(&dst, t).map_err(e)?);
        if got != want {
            return Err(format!(
                "thread {g}, rank {rank}, all_reduce {k} (in place: {in_place}): got {got:?}, want {want:?}"
            ));
        }
        if k == 0 && g == 0 {
            // This thread's communicator is alive: finalising must refuse.
            match MpiDriver::finalize() {
                Err(err) if err.to_string().contains("still use MPI") => {}
                other => return Err(format!("finalize with a live communicator: {other:?}")),
            }
        }
        if k % 50 == 0 {
            // A send/recv exchange with the next rank on this group.
            let next = (rank + 1) % n;
            let prev = (rank + n - 1) % n;
            let out = MpiDriver::alloc(&dev, mine.len()).map_err(e)?;
            if rank.is_multiple_of(2) {
                ov.call(|| MpiDriver::send(P2p(&comm, &src, DType::I64, COUNT, next, s)))
                    .map_err(e)?;
                ov.call(|| MpiDriver::recv(P2p(&comm, &out, DType::I64, COUNT, prev, s)))
                    .map_err(e)?;
            } else {
                ov.call(|| MpiDriver::recv(P2p(&comm, &out, DType::I64, COUNT, prev, s)))
                    .map_err(e)?;
                ov.call(|| MpiDriver::send(P2p(&comm, &src, DType::I64, COUNT, next, s)))
                    .map_err(e)?;
            }
            let got = i64s(&MpiDriver::download(&out, t).map_err(e)?);
            // Not in place (k is even), so `src` still holds the shard.
            let sent: Vec<i64> = (0..COUNT).map(|i| value(prev, k, i)).collect();
            if got != sent {
                return Err(format!(
                    "thread {g}, rank {rank}: recv {k} from {prev} got {got:?}, want {sent:?}"
                ));
            }
        }
    }
    Ok(())
}

fn run() -> Result<String, String> {
    let rank = env_usize(&["OMPI_COMM_WORLD_RANK", "PMI_RANK"])?;
    let n = env_usize(&["OMPI_COMM_WORLD_SIZE", "PMI_SIZE"])?;
    let ov = Arc::new(Overlap {
        inside: AtomicUsize::new(0),
        overlapped: AtomicUsize::new(0),
        calls: AtomicUsize::new(0),
        start: Barrier::new(2),
        entered: [AtomicBool::new(false), AtomicBool::new(false)],
        gate: [AtomicBool::new(false), AtomicBool::new(false)],
    });
    let threads: Vec<_> = (0..2)
        .map(|g| {
            let ov = ov.clone();
            std::thread::Builder::new()
                .name(format!("group-{g}"))
                .spawn(move || work(g, rank, n, &ov))
                .map_err(|e| e.to_string())
        })
        .collect::<Result<_, _>>()?;
    for t in threads {
        t.join().map_err(|_| "a thread panicked".to_string())??;
    }
    let (overlapped, calls) = (
        ov.overlapped.load(Ordering::Relaxed),
        ov.calls.load(Ordering::Relaxed),
    );
    if overlapped == 0 {
        return Err(format!(
            "rank {rank}: none of {calls} calls overlapped, so this run proved nothing; run it again"
        ));
    }
    // Every communicator is gone now.
    MpiDriver::finalize().map_err(|e| format!("finalize: {e}"))?;
    let id = MpiDriver::group_id(&CommunicationId::new("after")).map_err(|e| e.to_string())?;
    match MpiDriver::join(id, n, rank) {
        Err(err) if err.to_string().contains("finalize already ran") => {}
        Err(other) => return Err(format!("join after finalize: {other}")),
        Ok(_) => return Err("join after finalize succeeded".into()),
    }
    Ok(format!(
        "PROOF rank {rank} ok: 2 threads on their own groups, {ITERS} all_reduces each (half in place) and send/recv, every result right; {overlapped} of {calls} calls overlapped; finalize refused while a communicator lived"
    ))
}

fn main() {
    match run() {
        Ok(line) => println!("{line}"),
        Err(msg) => {
            launch::say_err(&format!("FAIL: {msg}"));
            std::process::exit(1);
        }
    }
}
