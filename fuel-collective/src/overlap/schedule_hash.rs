//! The schedule a graph's node order gives, as what the ranks of a world
//! must agree on, and its hash: [`schedule_steps`] and [`schedule_hash`].
//!
//! `schedule-collectives` decides an order of a lowered graph's steps; the
//! ranks of a world each decide it for their own graph, and they deadlock
//! or wait on one another if they decide differently. What they must agree
//! on is the order in which the steps that meet other ranks or move data
//! between devices are issued (`comm.*`, `driver_all_reduce`, a `copy` or
//! `move` from another device), where those stand among the host
//! framework's compute (`extern` ops), and where each is first waited on.
//! [`schedule_steps`] lists exactly that, in the graph's own order (the
//! order the printer numbers, the plan follows and the scheduled runner
//! dispatches): each such step's kind, placement and types, and the first
//! later step of the list that reads it, directly or through local steps.
//! Local plumbing (folds, casts, slices, inputs) and what differs from
//! rank to rank by design (input and output names, a `comm.*` node's
//! `rank` and its communicator's local id, notes) are left out.
//!
//! [`schedule_hash`] is a 64-bit FNV-1a hash of that list, written here so
//! it is the same in every process and on every machine (`std`'s hasher is
//! seeded at random per process). Two ranks whose hashes are equal issue
//! the same steps in the same order; `schedule-collectives` writes the
//! hash in its notes, and `examples/mpi_schedule.rs` compares it across
//! the ranks of a world. [`fnv1a`] is the hash itself, which the world's
//! join-time agreement also uses for the topology's fingerprint.

use fuel_graph_ext::graph::NodeId;
use fuel_graph_ext::op::defs::AttrValue;
use fuel_graph_ext::{Graph, Op};
use std::fmt::Write as _;

/// FNV-1a, 64 bits: a fixed hash of `bytes`, continuing from `h` (start
/// from [`FNV_OFFSET`]).
pub fn fnv1a(h: u64, bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .fold(h, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3))
}

/// FNV-1a's starting value.
pub const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

/// One step of a schedule, as every rank of a world must issue it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScheduleStep {
    /// The step without rank-specific names: op, attributes but `rank`,
    /// the extern kernel's name, placement and result types, e.g.
    /// `comm.all_reduce.sum {comm=#0, ranks=2} @cpu:0 : f32[8,8]`.
    pub what: String,
    /// The index (in the list) of the first later step that reads this
    /// one's result, directly or through local steps; `None` when none
    /// does (it is only waited on at the end of the run).
    pub waited_at: Option<usize>,
}

impl std::fmt::Display for ScheduleStep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.waited_at {
            Some(w) => write!(f, "{}, waited on by step {w}", self.what),
            None => write!(f, "{}, waited on at the end", self.what),
        }
    }
}

/// Whether node `id` is a step the ranks must agree on: compute, or a
/// step that communicates.
fn agreed(g: &Graph, id: NodeId) -> bool {
    let Some(n) = g.node(id) else { return false };
    match &n.op {
        Op::Extern(_) | Op::Comm { .. } | Op::DriverAllReduce { .. } => true,
        Op::Copy { to } | Op::Move { to } => n
            .operands
            .first()
            .and_then(|v| g.value_device(*v))
            .is_some_and(|from| from != *to),
        _ => false,
    }
}

/// How a step is written in the list: its op and attributes, an extern's
/// kernel name, where it runs (a copy's source too) and its result types.
/// A `comm.*` node's `rank` is left out, and its `comm` (the id of the
/// process's communicator object, a local handle: threads of one process
/// that play a world's processes number theirs apart) is written as the
/// order in which the list first meets it, `comm=#0`, `comm=#1`, in
/// `comms`.
fn describe(g: &Graph, id: NodeId, comms: &mut Vec<u64>) -> String {
    let Some(n) = g.node(id) else {
        return String::new();
    };
    let mut s = n.op.mnemonic();
    if let Op::Extern(x) = &n.op {
        let _ = write!(s, " \"{}\"", x.name);
    }
    let attrs: Vec<String> =
        n.op.attrs()
            .into_iter()
            .filter(|(k, _)| *k != "rank")
            .map(|(k, v)| match (k, v) {
                ("comm", AttrValue::Int(c)) if n.op.is_comm() => {
                    let k = comms.iter().position(|x| *x == c).unwrap_or_else(|| {
                        comms.push(c);
                        comms.len() - 1
                    });
                    format!("comm=#{k}")
                }
                (k, v) => format!("{k}={v}"),
            })
            .collect();
    if let Op::Comm {
        split: Some(split), ..
    } = &n.op
    {
        let _ = write!(s, " split={split:?}");
    }
    if !attrs.is_empty() {
        let _ = write!(s, " {{{}}}", attrs.join(", "));
    }
    if let (Op::Copy { to } | Op::Move { to }, Some(v)) = (&n.op, n.operands.first()) {
        let from = g.value_device(*v).map_or("?".into(), |d| d.to_string());
        let _ = write!(s, " {from} -> {to}");
    } else if let Some(d) = n.op.device() {
        let _ = write!(s, " @{d}");
    }
    let types: Vec<String> = if n.result_tys.is_empty() {
        vec![n.ty.to_string(); n.num_results()]
    } else {
        n.result_tys.iter().map(ToString::to_string).collect()
    };
    let _ = write!(s, " : {}", types.join(", "));
    s
}

/// The steps of `g` every rank of a world must issue alike, in the
/// graph's order (see the module's doc).
pub fn schedule_steps(g: &Graph) -> Vec<ScheduleStep> {
    let order = g.topo_order();
    let mut at: rustc_hash::FxHashMap<NodeId, usize> = Default::default();
    let mut listed = Vec::new();
    for id in &order {
        if agreed(g, *id) {
            at.insert(*id, listed.len());
            listed.push(*id);
        }
    }
    // The first listed reader of each node, directly or through unlisted
    // nodes: readers come later in the order, so walk it backwards.
    let mut first: rustc_hash::FxHashMap<NodeId, usize> = Default::default();
    for id in order.iter().rev() {
        let reader = g
            .consumers(*id)
            .iter()
            .filter_map(|c| at.get(c).or_else(|| first.get(c)).copied())
            .min();
        if let Some(r) = reader {
            first.insert(*id, r);
        }
    }
    let mut comms = Vec::new();
    listed
        .iter()
        .map(|id| ScheduleStep {
            what: describe(g, *id, &mut comms),
            waited_at: first.get(id).copied(),
        })
        .collect()
}

/// A fixed 64-bit hash of [`schedule_steps`]: equal on two ranks exactly
/// when (barring a collision) they issue the same steps in the same order
/// and wait on each at the same place.
pub fn schedule_hash(g: &Graph) -> u64 {
    schedule_steps(g).iter().fold(FNV_OFFSET, |h, s| {
        let h = fnv1a(h, s.what.as_bytes());
        let w = s.waited_at.map_or(u64::MAX, |w| w as u64);
        // A separator no description holds, then the wait as 8 bytes.
        fnv1a(fnv1a(h, &[0]), &w.to_le_bytes())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use fuel_graph_ext::text;

    /// One rank's step: two layers' matmul gradients (f32[4,4] and
    /// f32[2,2]), each all-reduced between processes; `first` is the layer
    /// whose all-reduce is issued first, and with `waits` the second
    /// layer's matmul also reads the first layer's reduced gradient. The
    /// input names and the communicator's local id carry the rank, as a
    /// framework's and threads' might.
    fn step(rank: usize, first: usize, waits: bool) -> Graph {
        let c = 7 + rank;
        let extra = if waits { ", %3" } else { "" };
        let layers = [
            format!("  %2 = extern \"matmul\" %0, %1 @cpu:0 : f32[4,4]\n  %3 = comm.all_reduce.sum %2 {{comm={c}, ranks=2}} @cpu:0 : f32[4,4]\n"),
            format!("  %6 = extern \"matmul\" %4, %5{extra} @cpu:0 : f32[2,2]\n  %7 = comm.all_reduce.sum %6 {{comm={c}, ranks=2}} @cpu:0 : f32[2,2]\n"),
        ];
        let src = format!(
            "graph @s {{\n  %0 = input \"x{rank}\" @cpu:0 : f32[4,4]\n  %1 = input \"y{rank}\" @cpu:0 : f32[4,4]\n  %4 = input \"a{rank}\" @cpu:0 : f32[2,4]\n  %5 = input \"b{rank}\" @cpu:0 : f32[4,2]\n{}{}  %8 = add %3, %3 @cpu:0 : f32[4,4]\n  return %8, %7\n}}\n",
            layers[first],
            layers[1 - first]
        );
        text::parse(&src).unwrap_or_else(|e| panic!("{e}\n{src}"))
    }

    #[test]
    fn equal_graphs_hash_alike_and_another_order_does_not() {
        let a = step(0, 0, false);
        assert_eq!(schedule_hash(&a), schedule_hash(&step(0, 0, false)));
        // Rank-specific names and communicator ids do not count.
        assert_eq!(schedule_hash(&a), schedule_hash(&step(1, 0, false)));
        // The other layer's all-reduce issued first does.
        assert_ne!(schedule_hash(&a), schedule_hash(&step(0, 1, false)));
        let steps = schedule_steps(&a);
        assert_eq!(steps.len(), 4, "{steps:?}");
        assert_eq!(
            steps[1].what,
            "comm.all_reduce.sum {comm=#0, ranks=2} @cpu:0 : f32[4,4]"
        );
        assert_eq!(steps[2].what, "extern \"matmul\" @cpu:0 : f32[2,2]");
        // A matmul waits on the all-reduce it reads; the first all-reduce
        // is read only by a local add, so nothing listed waits on it.
        assert_eq!(steps[0].waited_at, Some(1));
        assert_eq!(steps[1].waited_at, None);
    }

    #[test]
    fn where_a_collective_is_waited_on_counts() {
        let (a, b) = (step(0, 0, false), step(0, 0, true));
        let (sa, sb) = (schedule_steps(&a), schedule_steps(&b));
        // The same steps in the same order; only the wait moved.
        let what = |s: &[ScheduleStep]| s.iter().map(|x| x.what.clone()).collect::<Vec<_>>();
        assert_eq!(what(&sa), what(&sb));
        assert_eq!(sb[1].waited_at, Some(2));
        assert_ne!(schedule_hash(&a), schedule_hash(&b));
    }

    #[test]
    fn the_hash_is_fixed_fnv1a() {
        // FNV-1a's published value for "a".
        assert_eq!(fnv1a(FNV_OFFSET, b"a"), 0xaf63_dc4c_8601_ec8c);
        // Pinned: the hash of a fixed graph is the same in every build and
        // process (a per-process seeded hasher would fail this). A change
        // to what is hashed changes it on purpose: update it then.
        assert_eq!(schedule_hash(&step(0, 0, false)), PINNED);
    }

    const PINNED: u64 = 0x4aeb_908f_8888_55b3;
}
