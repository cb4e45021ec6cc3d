//! A world that never hangs: the fingerprint the ranks compare before they
//! start, and the watchdog with its flight recorder.
//!
//! Under `mpirun` a rank that exits at once, prints `--help`, or runs with
//! other flags (`--runs 50` on one rank, `--runs 1` on another) leaves the
//! others waiting inside MPI, which has no timeout. So every world command
//! ([`Guard::start`]) runs a watchdog thread: each step (starting MPI and
//! joining, comparing fingerprints, each run, finalising) must end within
//! `--world-timeout` seconds (default 30), or the rank prints what it was
//! doing and the last collectives it issued (op, sequence number, types:
//! the flight recorder, as NCCL's and PyTorch's) and ends with exit 1
//! without waiting for MPI; `mpirun` then ends the others, whose own
//! watchdogs bound them too. A rank that never starts MPI cannot be named
//! by the others (MPI does not say who is missing while it starts): the
//! message says so.
//!
//! Before any collective runs, the ranks exchange a [`Fingerprint`] of
//! their program (the command, op, dtype, sizes, runs, device count and a
//! hash of the collectives the lowered graph issues) in one
//! `MPI_Allgather` and refuse to start on a difference, every rank naming
//! the first rank that differs and the field.

// Without MPI only the unit tests compile this module, and they leave the
// watchdog thread and the timeouts unused.
#![cfg_attr(not(feature = "mpi"), allow(dead_code))]

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The default `--world-timeout`, seconds.
pub const DEFAULT_TIMEOUT_S: usize = 30;

/// The first step of every world command.
pub const STARTING: &str = "starting MPI and joining the world (while MPI starts it cannot say which rank is missing: one that exited, printed --help, or never ran fuel-opt)";

/// `--world-timeout` as a duration (default [`DEFAULT_TIMEOUT_S`]).
pub fn timeout(flag: Option<usize>) -> Duration {
    Duration::from_secs(flag.unwrap_or(DEFAULT_TIMEOUT_S) as u64)
}

/// The join options of a world whose steps may each take `timeout`: the
/// join gives up a little sooner than the watchdog, so its error, which
/// names the ranks never heard from, comes first; collectives wait as long
/// as a step.
#[cfg(feature = "mpi")]
pub fn join_options(timeout: Duration) -> fuel_runtime::driver::JoinOptions {
    fuel_runtime::driver::JoinOptions {
        join_timeout: timeout.mul_f64(0.75),
        op_timeout: timeout,
    }
}

/// How many collectives the flight recorder keeps.
const RECORDED: usize = 8;

/// The most fields a fingerprint holds (the words exchanged are fixed).
pub const FIELDS: usize = 12;

/// One field: its name, the word exchanged, and how this rank shows it.
#[derive(Clone, Debug)]
struct Field {
    name: &'static str,
    word: u64,
    shown: String,
}

/// What a rank is about to run, compared across ranks before it starts.
#[derive(Clone, Debug, Default)]
pub struct Fingerprint {
    fields: Vec<Field>,
}

/// FNV-1a: a stable hash of text, the same in every process.
fn fnv(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

impl Fingerprint {
    /// Adds a number, exchanged as itself.
    pub fn number(mut self, name: &'static str, n: usize) -> Self {
        self.fields.push(Field {
            name,
            word: n as u64,
            shown: n.to_string(),
        });
        self
    }
    /// Adds text, exchanged as its hash.
    pub fn text(mut self, name: &'static str, s: &str) -> Self {
        self.fields.push(Field {
            name,
            word: fnv(s),
            shown: fuel_graph_ext::text::excerpt::token(s),
        });
        self
    }
    /// The words exchanged: one per field, then zeros, [`FIELDS`] in all.
    pub fn words(&self) -> [u64; FIELDS] {
        let mut w = [0u64; FIELDS];
        for (slot, f) in w.iter_mut().zip(&self.fields) {
            *slot = f.word;
        }
        w
    }
    /// Compares every rank's words (`all[q]` is rank q's) with this
    /// rank's: the first rank and field that differ, as an error naming
    /// them and this rank's value.
    pub fn compare(&self, me: usize, all: &[[u64; FIELDS]]) -> Result<(), String> {
        let mine = self.words();
        for (q, theirs) in all.iter().enumerate() {
            let Some(i) = (0..FIELDS).find(|&i| theirs[i] != mine[i]) else {
                continue;
            };
            let Some(f) = self.fields.get(i) else {
                return Err(format!(
                    "rank {q} runs another fuel-opt build (its fingerprint has a field {i} this one lacks); run the same binary on every rank"
                ));
            };
            let theirs_shown = if f.shown == f.word.to_string() {
                format!(", rank {q} has {}", theirs[i])
            } else {
                String::new()
            };
            return Err(format!(
                "the ranks run different programs: rank {q} differs from rank {me} in {} (rank {me} has {}{theirs_shown}); give every rank the same flags",
                f.name, f.shown
            ));
        }
        Ok(())
    }
}

/// One collective the rank issued.
#[derive(Clone, Debug)]
struct Issued {
    seq: u64,
    what: String,
    done: bool,
}

/// What the watchdog watches: the step under way, since when, and the
/// last collectives issued.
struct State {
    step: String,
    since: Instant,
    next_seq: u64,
    recorded: VecDeque<Issued>,
    finished: bool,
}

/// The watchdog and flight recorder of one rank (see the module docs).
#[derive(Clone)]
pub struct Guard {
    rank: usize,
    ranks: usize,
    timeout: Duration,
    state: Arc<Mutex<State>>,
}

fn lock(m: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Guard {
    /// A guard for rank `rank` of `ranks`, whose steps may each take
    /// `timeout`, with no watchdog thread (see [`Guard::start`]).
    pub fn new(rank: usize, ranks: usize, timeout: Duration) -> Guard {
        Guard {
            rank,
            ranks,
            timeout,
            state: Arc::new(Mutex::new(State {
                step: "starting".into(),
                since: Instant::now(),
                next_seq: 0,
                recorded: VecDeque::new(),
                finished: false,
            })),
        }
    }

    /// [`Guard::new`] and its watchdog thread, which ends the process
    /// (exit 1, after [`Guard::report`] on standard error) when a step
    /// outlasts the timeout. `step` names the first step.
    pub fn start(rank: usize, ranks: usize, timeout: Duration, step: &str) -> Guard {
        let g = Guard::new(rank, ranks, timeout);
        g.step(step);
        let watched = g.clone();
        let spawned = std::thread::Builder::new()
            .name("world-watchdog".into())
            .spawn(move || watched.watch());
        if let Err(e) = spawned {
            // Without a watchdog the world still runs; it is only unbounded.
            crate::output::err(format_args!(
                "fuel-opt: rank {rank}: cannot start the world watchdog ({e}); a rank that stops will not be noticed\n"
            ));
        }
        g
    }

    fn watch(&self) {
        loop {
            std::thread::sleep(Duration::from_millis(50));
            let late = {
                let st = lock(&self.state);
                if st.finished {
                    return;
                }
                st.since.elapsed() > self.timeout
            };
            if late {
                crate::output::err(format_args!("fuel-opt: {}\n", self.report()));
                // Not `exit`: MPI's exit handlers may wait for the very
                // ranks that stopped answering.
                // SAFETY: `_exit` ends the process at once; nothing after it runs.
                unsafe { libc::_exit(1) };
            }
        }
    }

    /// How long each step may take.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Begins a step: the watchdog gives it the whole timeout.
    pub fn step(&self, what: &str) {
        let mut st = lock(&self.state);
        st.step = what.to_string();
        st.since = Instant::now();
    }

    /// Records collectives about to be issued (each a line such as
    /// `comm.all_reduce.sum %3 {comm=1, ranks=2} @cpu:0 : f32[64]`),
    /// numbered in order.
    pub fn issue<'a>(&self, collectives: impl IntoIterator<Item = &'a str>) {
        let mut st = lock(&self.state);
        for what in collectives {
            let seq = st.next_seq;
            st.next_seq += 1;
            st.recorded.push_back(Issued {
                seq,
                what: what.to_string(),
                done: false,
            });
            while st.recorded.len() > RECORDED {
                st.recorded.pop_front();
            }
        }
    }

    /// Marks every recorded collective done.
    pub fn done(&self) {
        for i in lock(&self.state).recorded.iter_mut() {
            i.done = true;
        }
    }

    /// Stops the watchdog.
    pub fn finish(&self) {
        lock(&self.state).finished = true;
    }

    /// What the watchdog prints: the rank, the step that outlasted the
    /// timeout, and the flight recorder.
    pub fn report(&self) -> String {
        let st = lock(&self.state);
        let mut s = format!(
            "rank {} of {}: no progress for {} s while {}: another rank exited, stopped, or runs a different program (every rank must run the same command); raise --world-timeout if one step is slower than that",
            self.rank,
            self.ranks,
            self.timeout.as_secs(),
            st.step
        );
        let _ = write!(s, "\n  last collectives issued by rank {}:", self.rank);
        if st.recorded.is_empty() {
            s.push_str(" none");
        }
        for i in &st.recorded {
            let _ = write!(
                s,
                "\n    #{} {} ({})",
                i.seq,
                i.what,
                if i.done { "done" } else { "issued, not done" }
            );
        }
        s
    }
}

/// The collectives a lowered world graph issues, in its printed order:
/// each `comm.*` line without its result name.
pub fn collectives(printed: &str) -> Vec<String> {
    printed
        .lines()
        .filter_map(|l| l.split_once(" = "))
        .map(|(_, rest)| rest)
        .filter(|rest| rest.starts_with("comm."))
        .map(str::to_string)
        .collect()
}

/// Exchanges fingerprints with every rank of `MPI_COMM_WORLD` (one
/// `MPI_Allgather`) and compares them.
#[cfg(feature = "mpi")]
pub fn agree(fp: &Fingerprint, rank: usize) -> Result<(), String> {
    use mpi::traits::CommunicatorCollectives;
    let world = mpi::topology::SimpleCommunicator::world();
    let mine = fp.words();
    let n = mpi::traits::Communicator::size(&world).max(1) as usize;
    let mut all = vec![0u64; n * FIELDS];
    world.all_gather_into(&mine[..], &mut all[..]);
    let rows: Vec<[u64; FIELDS]> = all
        .chunks_exact(FIELDS)
        .map(|c| {
            let mut r = [0u64; FIELDS];
            r.copy_from_slice(c);
            r
        })
        .collect();
    fp.compare(rank, &rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fp(runs: usize, sizes: &str) -> Fingerprint {
        Fingerprint::default()
            .text("the command", "demo --world")
            .number("--runs", runs)
            .text("--sizes", sizes)
    }

    #[test]
    fn fingerprints_name_the_first_rank_and_field_that_differ() {
        let a = fp(50, "64K");
        assert_eq!(a.compare(0, &[a.words(), a.words()]), Ok(()));
        let e = a
            .compare(0, &[a.words(), fp(1, "64K").words()])
            .unwrap_err();
        assert_eq!(e, "the ranks run different programs: rank 1 differs from rank 0 in --runs (rank 0 has 50, rank 1 has 1); give every rank the same flags");
        let e = fp(1, "1M")
            .compare(1, &[a.words(), fp(1, "1M").words()])
            .unwrap_err();
        assert!(
            e.contains("rank 0 differs from rank 1 in --runs (rank 1 has 1, rank 0 has 50)"),
            "{e}"
        );
        let e = a
            .compare(0, &[a.words(), fp(50, "1M").words()])
            .unwrap_err();
        assert!(
            e.contains("rank 1 differs from rank 0 in --sizes (rank 0 has 64K)"),
            "{e}"
        );
        let mut other = a.words();
        other[FIELDS - 1] = 7;
        assert!(a
            .compare(0, &[other])
            .unwrap_err()
            .contains("another fuel-opt build"));
    }

    #[test]
    fn the_report_names_the_rank_the_step_and_the_last_collectives() {
        let g = Guard::new(1, 2, Duration::from_secs(30));
        assert!(g
            .report()
            .contains("last collectives issued by rank 1: none"));
        g.step("run 3 of 51");
        let lines: Vec<String> = (0..10)
            .map(|i| format!("comm.all_reduce.sum %{i} : f32[4]"))
            .collect();
        g.issue(lines.iter().map(String::as_str));
        g.done();
        g.issue(["comm.all_gather %9 : f32[8]"]);
        let r = g.report();
        assert!(
            r.starts_with("rank 1 of 2: no progress for 30 s while run 3 of 51:"),
            "{r}"
        );
        assert!(!r.contains("#2 "), "only the last {RECORDED} are kept: {r}");
        assert!(
            r.contains("#9 comm.all_reduce.sum %9 : f32[4] (done)"),
            "{r}"
        );
        assert!(
            r.ends_with("#10 comm.all_gather %9 : f32[8] (issued, not done)"),
            "{r}"
        );
    }

    #[test]
    fn collectives_are_the_comm_lines() {
        let g = "graph @w {\n  %0 = input \"s0\" @cpu:0 : f32[4]\n  %1 = comm.all_reduce.sum %0 {comm=1, ranks=2} @cpu:0 : f32[4]\n  return %1\n}\n";
        assert_eq!(
            collectives(g),
            ["comm.all_reduce.sum %0 {comm=1, ranks=2} @cpu:0 : f32[4]"]
        );
    }
}
