//! The overlap simulator: a pure list scheduler over priced steps, with no
//! graph in sight.
//!
//! The threaded runner gives every device two lanes, a compute worker and
//! (on host arenas and Vulkan devices) a copy thread, and runs what each
//! lane receives one step after another; steps that need no device (a
//! shared buffer, a deferred operand, an input read in place) take no lane.
//! [`simulate`] plays a list of [`Task`]s through those lanes under one
//! [`Policy`]: whenever a lane can start something, it starts the waiting
//! task the policy ranks first. The result is a [`Timeline`]: the order in
//! which the tasks were issued (a topological order, which
//! `schedule-collectives` makes the graph's own), each task's start and
//! end, and what the run held and left exposed. The same function prices
//! the runner's orders as they are ([`Policy::Fifo`], [`Policy::InOrder`],
//! [`Policy::Priority`], [`Policy::AfterCompute`]), which is how the pass compares its choice
//! with them. The pass's own policies never start a collective (a piece
//! of [`collectives`]) before the ones that come before it in the list,
//! so every rank of a world issues them in one order.

pub use fuel_graph_ext::plan::lanes::Lane;
#[cfg(test)]
use fuel_graph_ext::Device;

/// What a task is, for the policies and the exposure count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// The host framework's compute: an `extern` kernel.
    Compute,
    /// A graph input.
    Input,
    /// A step that moves data between devices or meets other ranks
    /// (`fuel_graph_ext::plan::lanes::communicates`).
    Comm,
    /// Everything else: the folds of collectives, and the element-wise ops
    /// around them.
    Other,
}

/// One step, priced.
#[derive(Clone, Debug, PartialEq)]
pub struct Task {
    /// The lane it occupies, or `None` for work the dispatcher does itself.
    pub lane: Option<Lane>,
    /// Microseconds it keeps its lane busy.
    pub busy_us: f64,
    /// Microseconds from its start to its result (its hand-off included).
    pub us: f64,
    /// The tasks whose results it reads (earlier in the list).
    pub deps: Vec<usize>,
    /// What it is.
    pub class: Class,
    /// Bytes of its result.
    pub bytes: usize,
}

/// How a lane picks among the tasks it could start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    /// Each lane runs its tasks in list order, waiting for the next one's
    /// operands even when a later one is ready: the runner's in-order
    /// dispatch (`Dispatch::InOrder`).
    InOrder,
    /// Each lane, when free, starts the ready task that comes first in the
    /// list, never waiting while one is ready: the runner's priority
    /// dispatch (`Dispatch::Priority`).
    Priority,
    /// Each lane runs tasks in the order they became ready: the runner's
    /// FIFO dispatch as it is today.
    Fifo,
    /// As [`Policy::Fifo`], but no communication starts before every
    /// `extern` kernel that reads nothing communicated has finished: all
    /// communication after the backward pass, the baseline of a naive
    /// training step (the runner's `Dispatch::AfterCompute`).
    AfterCompute,
    /// The ready task with the longest chain of work after it first.
    CriticalPath,
    /// Any ready task that is not an `extern` kernel first (so a
    /// collective's fold runs as soon as its copies are in, and its result
    /// travels while the next kernel runs), then the longest chain.
    CollectivesFirst,
    /// [`Policy::CriticalPath`] in an active schedule: a lane may wait a
    /// little for a better-ranked task (see `pick`).
    CriticalPathWaiting,
    /// [`Policy::CollectivesFirst`] in an active schedule.
    CollectivesFirstWaiting,
}

impl Policy {
    /// The orders `schedule-collectives` builds (the others model the
    /// runner's dispatch).
    pub fn is_the_pass_own(self) -> bool {
        matches!(
            self,
            Policy::CriticalPath
                | Policy::CollectivesFirst
                | Policy::CriticalPathWaiting
                | Policy::CollectivesFirstWaiting
        )
    }

    /// The policy's name in notes and tables.
    pub fn name(self) -> &'static str {
        match self {
            Policy::InOrder => "in-order",
            Policy::Priority => "priority",
            Policy::Fifo => "fifo",
            Policy::AfterCompute => "after-compute",
            Policy::CriticalPath => "critical-path",
            Policy::CollectivesFirst => "collectives-first",
            Policy::CriticalPathWaiting => "critical-path/waiting",
            Policy::CollectivesFirstWaiting => "collectives-first/waiting",
        }
    }
}

/// How a list of tasks plays out under one policy.
#[derive(Clone, Debug, PartialEq)]
pub struct Timeline {
    /// Task indices in the order they were issued: every task after the
    /// tasks it reads.
    pub order: Vec<usize>,
    /// Each task's start, in microseconds.
    pub start: Vec<f64>,
    /// Each task's end (its result exists).
    pub end: Vec<f64>,
    /// When the last task ends.
    pub makespan_us: f64,
    /// The busiest compute lane's work.
    pub compute_us: f64,
    /// Time of the run not covered by the busiest compute lane's work:
    /// what communication and waiting add to the compute.
    pub exposed_us: f64,
    /// The most result bytes alive at once (a result lives from its
    /// task's start until its last reader ends; one nobody reads, until
    /// the end).
    pub peak_bytes: usize,
}

/// Plays `tasks` through their lanes under `policy`. Dependencies that do
/// not point to an earlier task are ignored.
pub fn simulate(tasks: &[Task], policy: Policy) -> Timeline {
    simulate_in(tasks, policy, &collectives(tasks))
}

/// [`simulate`] where the pass's own policies start the collectives of
/// `groups` (each task's collective, numbered in the order they must
/// start) in that order.
pub fn simulate_in(tasks: &[Task], policy: Policy, groups: &[Option<usize>]) -> Timeline {
    let n = tasks.len();
    let deps: Vec<Vec<usize>> = tasks
        .iter()
        .enumerate()
        .map(|(i, t)| t.deps.iter().copied().filter(|&d| d < i).collect())
        .collect();
    let mut readers: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, ds) in deps.iter().enumerate() {
        for &d in ds {
            readers[d].push(i);
        }
    }
    let bottom = bottom_levels(tasks, &readers);
    // The kernels that read nothing communicated: what `AfterCompute`
    // finishes before any communication starts.
    let mut after_comm = vec![false; n];
    for i in 0..n {
        after_comm[i] = deps[i]
            .iter()
            .any(|&d| after_comm[d] || tasks[d].class == Class::Comm);
    }
    let externs: Vec<usize> = (0..n)
        .filter(|&i| tasks[i].class == Class::Compute && !after_comm[i])
        .collect();
    let prev_on_lane = prev_on_lane(tasks);
    let mut deps_left: Vec<usize> = deps.iter().map(Vec::len).collect();
    // When each task's operands all exist (once its deps are issued).
    let mut ready_at = vec![0.0f64; n];
    let mut start = vec![0.0f64; n];
    let mut end = vec![0.0f64; n];
    let mut issued = vec![false; n];
    let mut lane_free: std::collections::BTreeMap<Lane, f64> = Default::default();
    let mut candidates: Vec<usize> = (0..n).filter(|&i| deps_left[i] == 0).collect();
    let mut order = Vec::with_capacity(n);
    let mut externs_end: Option<f64> = externs.is_empty().then_some(0.0);
    // The pass's own orders start collectives in the order they come.
    let keeps_order = policy.is_the_pass_own();
    let waits = matches!(
        policy,
        Policy::CriticalPathWaiting | Policy::CollectivesFirstWaiting
    );
    let mut started = vec![false; groups.iter().flatten().max().map_or(0, |m| m + 1)];
    let mut first_unstarted = 0usize;
    // When each collective's first task started (the pass's orders start
    // the next one no earlier).
    let mut first_start = vec![0.0f64; started.len()];
    let mut now = 0.0f64;
    let mut options: Vec<(f64, Rank, usize)> = Vec::new();
    while order.len() < n {
        // The earliest each candidate could start, and its rank.
        options.clear();
        for &i in &candidates {
            if policy == Policy::InOrder && prev_on_lane[i].is_some_and(|p| !issued[p]) {
                continue;
            }
            let mut at = ready_at[i];
            match groups[i] {
                Some(k) if keeps_order && k > first_unstarted => continue,
                Some(k) if keeps_order && k > 0 => at = at.max(first_start[k - 1]),
                // The runner issues in time order: none starts before the last.
                _ if !keeps_order => at = at.max(now),
                _ => {}
            }
            if policy == Policy::AfterCompute && tasks[i].class == Class::Comm {
                match externs_end {
                    Some(e) => at = at.max(e),
                    None => continue,
                }
            }
            if let Some(l) = tasks[i].lane {
                at = at.max(lane_free.get(&l).copied().unwrap_or(0.0));
            }
            options.push((at, rank(policy, tasks, &bottom, &ready_at, i), i));
        }
        let best = pick(&options, tasks, waits);
        let Some((at, i)) = best else { break };
        candidates.retain(|&c| c != i);
        issued[i] = true;
        now = now.max(at);
        order.push(i);
        if let Some(k) = groups[i] {
            if !started[k] {
                first_start[k] = at;
            }
            started[k] = true;
            while started.get(first_unstarted) == Some(&true) {
                first_unstarted += 1;
            }
        }
        start[i] = at;
        end[i] = at + tasks[i].us.max(tasks[i].busy_us);
        if let Some(l) = tasks[i].lane {
            lane_free.insert(l, at + tasks[i].busy_us);
        }
        if externs_end.is_none() && externs.iter().all(|&e| issued[e]) {
            externs_end = Some(externs.iter().map(|&e| end[e]).fold(0.0, f64::max));
        }
        for &r in &readers[i] {
            ready_at[r] = ready_at[r].max(end[i]);
            deps_left[r] -= 1;
            if deps_left[r] == 0 {
                candidates.push(r);
            }
        }
    }
    finish(tasks, &readers, order, start, end)
}

/// Each task's collective: the connected pieces of the graph left when
/// inputs and `extern` kernels are taken out (a collective's copies and
/// folds, and the element-wise ops that read them), numbered in task order.
pub fn collectives(tasks: &[Task]) -> Vec<Option<usize>> {
    let n = tasks.len();
    let mut parent: Vec<usize> = (0..n).collect();
    fn root(parent: &mut [usize], mut i: usize) -> usize {
        while parent[i] != i {
            parent[i] = parent[parent[i]];
            i = parent[i];
        }
        i
    }
    let inside = |i: usize| matches!(tasks[i].class, Class::Comm | Class::Other);
    for (i, t) in tasks.iter().enumerate() {
        for &d in t.deps.iter().filter(|&&d| d < n) {
            if inside(i) && inside(d) {
                let (a, b) = (root(&mut parent, i), root(&mut parent, d));
                parent[a.max(b)] = a.min(b);
            }
        }
    }
    let mut number: rustc_hash::FxHashMap<usize, usize> = Default::default();
    (0..n)
        .map(|i| {
            if !inside(i) {
                return None;
            }
            let r = root(&mut parent, i);
            let next = number.len();
            Some(*number.entry(r).or_insert(next))
        })
        .collect()
}

/// `groups` renumbered by when each collective's first task starts in
/// `timeline` (ties by number): the order in which the collectives become
/// ready as the graph runs, a pure function of the graph and the
/// topology, and free of the order a lowering happened to create nodes in.
pub fn by_start(groups: &[Option<usize>], timeline: &Timeline) -> Vec<Option<usize>> {
    let count = groups.iter().flatten().max().map_or(0, |m| m + 1);
    let mut first = vec![f64::MAX; count];
    for (i, g) in groups.iter().enumerate() {
        if let Some(k) = g {
            first[*k] = first[*k].min(timeline.start.get(i).copied().unwrap_or(0.0));
        }
    }
    let mut order: Vec<usize> = (0..count).collect();
    order.sort_by(|a, b| first[*a].total_cmp(&first[*b]).then(a.cmp(b)));
    let mut new = vec![0; count];
    for (n, k) in order.into_iter().enumerate() {
        new[k] = n;
    }
    groups.iter().map(|g| g.map(|k| new[k])).collect()
}

/// Which of `options` (earliest start, rank, task) goes next. The
/// runner's orders never leave a lane idle: the earliest start goes, then
/// the best rank. The pass's own orders build an active schedule (Giffler
/// and Thompson): the option that could finish first fixes a lane and a
/// moment, and among that lane's options that could start before that
/// moment the best rank goes, even if it means the lane waits a little for
/// it (a collective's fold a few microseconds away, say, ahead of a long
/// kernel that is ready now).
fn pick(options: &[(f64, Rank, usize)], tasks: &[Task], active: bool) -> Option<(f64, usize)> {
    let earlier =
        |a: &&(f64, Rank, usize), b: &&(f64, Rank, usize)| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1));
    if !active {
        return options.iter().min_by(earlier).map(|o| (o.0, o.2));
    }
    let done = |o: &(f64, Rank, usize)| match tasks[o.2].lane {
        Some(_) => o.0 + tasks[o.2].busy_us,
        None => o.0 + tasks[o.2].us.max(tasks[o.2].busy_us),
    };
    let first = options
        .iter()
        .min_by(|a, b| done(a).total_cmp(&done(b)).then(a.1.cmp(&b.1)))?;
    let Some(lane) = tasks[first.2].lane else {
        return Some((first.0, first.2));
    };
    let by = done(first);
    options
        .iter()
        .filter(|o| tasks[o.2].lane == Some(lane) && o.0 < by - 1e-9)
        .min_by(|a, b| a.1.cmp(&b.1).then(a.0.total_cmp(&b.0)))
        .or(Some(first))
        .map(|o| (o.0, o.2))
}

/// How a policy ranks a task among those that could start at the same
/// moment: smaller first.
type Rank = (u8, i64, usize);

fn rank(policy: Policy, tasks: &[Task], bottom: &[f64], ready_at: &[f64], i: usize) -> Rank {
    // Microsecond figures as ordered integers (nanoseconds), so the ranks
    // compare exactly and the choice is the same on every machine.
    let ns = |us: f64| (us * 1e3).round() as i64;
    match policy {
        Policy::InOrder | Policy::Priority => (0, 0, i),
        Policy::Fifo | Policy::AfterCompute => (0, ns(ready_at[i]), i),
        Policy::CriticalPath | Policy::CriticalPathWaiting => (0, -ns(bottom[i]), i),
        Policy::CollectivesFirst | Policy::CollectivesFirstWaiting => (
            u8::from(tasks[i].class == Class::Compute),
            -ns(bottom[i]),
            i,
        ),
    }
}

/// For each task, the task before it on its lane, in list order.
fn prev_on_lane(tasks: &[Task]) -> Vec<Option<usize>> {
    let mut last: std::collections::BTreeMap<Lane, usize> = Default::default();
    tasks
        .iter()
        .enumerate()
        .map(|(i, t)| t.lane.and_then(|l| last.insert(l, i)))
        .collect()
}

/// Each task's own time plus the longest chain of its readers' times.
fn bottom_levels(tasks: &[Task], readers: &[Vec<usize>]) -> Vec<f64> {
    let mut b = vec![0.0f64; tasks.len()];
    for i in (0..tasks.len()).rev() {
        let after = readers[i].iter().map(|&r| b[r]).fold(0.0, f64::max);
        b[i] = tasks[i].us.max(tasks[i].busy_us) + after;
    }
    b
}

fn finish(
    tasks: &[Task],
    readers: &[Vec<usize>],
    order: Vec<usize>,
    start: Vec<f64>,
    end: Vec<f64>,
) -> Timeline {
    let makespan_us = end.iter().copied().fold(0.0, f64::max);
    let mut per_lane: std::collections::BTreeMap<Lane, f64> = Default::default();
    for t in tasks {
        if let Some(l @ Lane::Compute(_)) = t.lane {
            *per_lane.entry(l).or_insert(0.0) += t.busy_us;
        }
    }
    let compute_us = per_lane.values().copied().fold(0.0, f64::max);
    // Result bytes alive over time: +bytes at a task's start, -bytes when
    // its last reader ends (never, for a result nobody reads).
    let mut events: Vec<(f64, i128)> = Vec::with_capacity(tasks.len() * 2);
    for (i, t) in tasks.iter().enumerate() {
        events.push((start[i], t.bytes as i128));
        if let Some(last) = readers[i].iter().map(|&r| end[r]).reduce(f64::max) {
            events.push((last, -(t.bytes as i128)));
        }
    }
    // Frees before allocations at the same moment.
    events.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let (mut live, mut peak) = (0i128, 0i128);
    for (_, d) in events {
        live += d;
        peak = peak.max(live);
    }
    Timeline {
        order,
        start,
        end,
        makespan_us,
        compute_us,
        exposed_us: (makespan_us - compute_us).max(0.0),
        peak_bytes: usize::try_from(peak).unwrap_or(usize::MAX),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(lane: Option<Lane>, us: f64, deps: &[usize], class: Class) -> Task {
        Task {
            lane,
            busy_us: us,
            us,
            deps: deps.to_vec(),
            class,
            bytes: 100,
        }
    }

    /// Two devices' backward of two layers: per layer a kernel on each,
    /// the second device's gradient copied to the first, folded there, and
    /// the result copied back. Kernels take 100 us, copies 60, folds 10.
    fn two_layers() -> Vec<Task> {
        let (c0, c1) = (Device::cpu(0), Device::cpu(1));
        let k = |d| Some(Lane::Compute(d));
        let mut t = Vec::new();
        for _ in 0..2 {
            let b = t.len();
            t.push(task(k(c0), 100.0, &[], Class::Compute)); // b
            t.push(task(k(c1), 100.0, &[], Class::Compute)); // b+1
            t.push(task(Some(Lane::Copy(c0)), 60.0, &[b + 1], Class::Comm));
            t.push(task(k(c0), 10.0, &[b, b + 2], Class::Other)); // fold
            t.push(task(Some(Lane::Copy(c1)), 60.0, &[b + 3], Class::Comm));
        }
        t
    }

    #[test]
    fn collectives_first_hides_the_first_layers_copies_behind_the_second_kernels() {
        let t = two_layers();
        let after = simulate(&t, Policy::AfterCompute);
        let fifo = simulate(&t, Policy::Fifo);
        let first = simulate(&t, Policy::CollectivesFirst);
        // After compute: 200 of kernels, then both layers' copies in turn.
        assert!(after.makespan_us >= 200.0 + 60.0 + 10.0 + 60.0, "{after:?}");
        assert!(first.makespan_us < after.makespan_us, "{first:?} {after:?}");
        assert!(first.makespan_us <= fifo.makespan_us);
        assert!(first.exposed_us < after.exposed_us);
        // The pass's orders start the collectives in the order they come.
        let groups = collectives(&t);
        for tl in [
            &first,
            &simulate(&t, Policy::CriticalPath),
            &simulate(&t, Policy::CollectivesFirstWaiting),
        ] {
            let first_of = |k| tl.order.iter().position(|&i| groups[i] == Some(k));
            assert!(first_of(0) < first_of(1), "{:?}", tl.order);
        }
        // Every order is topological.
        for tl in [&after, &fifo, &first] {
            let pos: Vec<usize> = {
                let mut p = vec![0; t.len()];
                for (k, &i) in tl.order.iter().enumerate() {
                    p[i] = k;
                }
                p
            };
            for (i, task) in t.iter().enumerate() {
                assert!(task.deps.iter().all(|&d| pos[d] < pos[i]));
            }
        }
    }

    #[test]
    fn in_order_waits_for_the_lane_head_and_replays_a_chosen_order() {
        let t = two_layers();
        let first = simulate(&t, Policy::CollectivesFirst);
        // Renumber the tasks in the chosen issue order; in order, the
        // renumbered list plays out the same.
        let mut new_of = vec![0; t.len()];
        for (k, &i) in first.order.iter().enumerate() {
            new_of[i] = k;
        }
        let renumbered: Vec<Task> = first
            .order
            .iter()
            .map(|&i| Task {
                deps: t[i].deps.iter().map(|&d| new_of[d]).collect(),
                ..t[i].clone()
            })
            .collect();
        let replay = simulate(&renumbered, Policy::InOrder);
        assert!((replay.makespan_us - first.makespan_us).abs() < 1e-9);
        // A lane's head that waits holds back a later ready task.
        let (c0, c1) = (Device::cpu(0), Device::cpu(1));
        let waits = vec![
            task(Some(Lane::Compute(c1)), 50.0, &[], Class::Compute),
            task(Some(Lane::Compute(c0)), 10.0, &[0], Class::Other),
            task(Some(Lane::Compute(c0)), 10.0, &[], Class::Compute),
        ];
        assert_eq!(simulate(&waits, Policy::InOrder).start[2], 60.0);
        assert_eq!(simulate(&waits, Policy::Fifo).start[2], 0.0);
    }

    #[test]
    fn peak_counts_results_until_their_last_reader_ends() {
        let c0 = Device::cpu(0);
        let t = vec![
            task(Some(Lane::Compute(c0)), 10.0, &[], Class::Input),
            task(Some(Lane::Compute(c0)), 10.0, &[0], Class::Other),
            task(Some(Lane::Compute(c0)), 10.0, &[1], Class::Other),
        ];
        // 0 lives until 1 ends (t=20), 1 until 2 ends, 2 forever: at most
        // two results at once (0 frees at 20 before 2 starts there).
        assert_eq!(simulate(&t, Policy::Fifo).peak_bytes, 200);
    }
}
