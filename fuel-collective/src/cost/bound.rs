//! How fast any schedule of one collective could be: a lower bound that
//! no lowering, present or future, can beat on the given topology.
//!
//! A pure helper beside the cost model, with no graph in sight. [`bound`]
//! takes a collective ([`Collective`]: what each rank holds and needs, in
//! bytes), its group's devices and the topology, and returns the largest
//! of three terms, each a time no schedule can go under:
//!
//! - **The cut term.** Split the group's devices in two, `S` and the rest.
//!   The bytes `S` needs from the rest (an all-reduce's reduced shard, the
//!   other ranks' shards of an all-gather, `S`'s shares of a
//!   reduce-scatter, what the rest sends `S` in an all-to-all, the root's
//!   shard of a broadcast, the reduced shard a reduce's root needs) must
//!   cross into `S`, and they cannot cross faster than `S`'s devices take
//!   them in. A device takes bytes in one copy at a time (the cost model
//!   charges every copy to its destination's worker), so its intake is the
//!   fastest link into it from outside `S`; `S` takes in the sum of its
//!   devices' intakes. The staging CPU, where it is not in the group, is a
//!   relay: a node with no bytes of its own whose intake is its one worker
//!   (its node capacity), and each cut is tried with it on either side.
//!   The term is the largest bytes-over-intake over every split: all
//!   `2^n` of them up to [`ENUMERATE_MAX`] devices. Above that, the splits
//!   that minimum cuts propose (`bound/flow.rs`): with every link at its capacity,
//!   a max-flow between each ordered pair of devices (one pair per pair of
//!   twin classes: devices that swap without changing the network or the
//!   demand) gives the side of a minimum cut that holds the second, and
//!   the side and the rest are tried; so are the splits that cut off one
//!   device, all but one, or one device kind. Each is priced by the
//!   intake above (a cut's sum of capacities is at least the intake, so
//!   the minimum cuts are proposals, never the figure), so the term stays
//!   a lower bound, looser than every split's can be. The max-flows get a
//!   budget of a few milliseconds: a group with too many classes for
//!   every pair gets those to and from one device (a root, else the
//!   first); one too large for those gets the other splits alone.
//!   [`Splits`] and the note say which.
//! - **The latency term.** Every result depends on some input on another
//!   device; the bytes take at least the fixed costs of the hops between
//!   them: the longest, over such pairs, of the cheapest path's fixed
//!   costs.
//! - **The host-memory term** (`bound/staged.rs`'s doc). Every byte that leaves
//!   a GPU island (CUDA devices joined by peer links or a driver, or a
//!   Vulkan device) goes into a CPU, and every byte a CUDA island takes in
//!   comes out of one: the cuts around the islands say how many, and each
//!   is written or read in host memory (twice where the island's own
//!   memory is the host's), so the bytes a group of GPUs beside CPUs must
//!   stage are counted whatever the schedule. Where every device keeps its
//!   data in host memory (CPUs, `host-memory` kinds) and no collective
//!   driver serves them, a reduction's folds also read every shard and
//!   write the result there; an all-gather's result is written once, an
//!   all-to-all's on each CPU. A result that reaches another CPU by a copy
//!   counts nothing (host outputs share one buffer). All of it at the
//!   host's memory bandwidth (twice a host-to-host copy's, as the cost
//!   model counts it, at the size of half the traffic or more).
//! - **The compute term.** A reduction of `n` shards reads every shard's
//!   bytes in folds (each shard is an operand of some fold; `n-1` shards'
//!   where a collective driver serves one of the kinds, since a driver
//!   combines shards outside any fold); the folds cannot read faster than
//!   every device that can fold, together (or one at a time, where every
//!   device is a CPU: the executor then runs every step on the caller's
//!   thread), each at the rate of a fold of as many inputs as there are
//!   ranks (the model prices a fold of `k` inputs as `2 (k + 1) / 3`
//!   two-input ones, so wider folds read faster).
//!
//! The figures are the cost model's own, at their best over the sizes a
//! step of this collective can have: a copy's bandwidth or, where the
//! executor may defer the copy into the fold that reads it, the deferred
//! rate; a copy between two host arenas is free (the executor shares the
//! buffer), and so is one from the host into a Vulkan device (which
//! imports the host's buffer). So the bound is a lower bound of the model's estimate of every
//! candidate, which the property test `bound_props` checks, and the
//! estimate over the bound says how much a better schedule could save.

use fuel_graph_ext::topology::{ComputeCost, LinkClass};
use fuel_graph_ext::{Device, DeviceKind, Topology};
use std::fmt;

/// Groups of up to this many devices have every split of them tried.
pub const ENUMERATE_MAX: usize = 16;

/// What a collective moves, in bytes, by rank (ranks in group order).
#[derive(Clone, Debug, PartialEq)]
pub enum Collective {
    /// Every rank gets the reduction of every rank's `bytes`.
    AllReduce {
        /// Bytes per shard.
        bytes: usize,
    },
    /// Rank `root` gets the reduction of every rank's `bytes`.
    Reduce {
        /// Bytes per shard.
        bytes: usize,
        /// The rank that gets the result.
        root: usize,
    },
    /// Every rank but `root` gets `root`'s `bytes`.
    Broadcast {
        /// Bytes of the value.
        bytes: usize,
        /// The rank that has it.
        root: usize,
    },
    /// Every rank gets every rank's shard; shard `r` is `shards[r]` bytes.
    AllGather {
        /// Bytes of each rank's shard.
        shards: Vec<usize>,
    },
    /// Every rank holds `bytes`; rank `r` gets `shares[r]` bytes of their
    /// reduction.
    ReduceScatter {
        /// Bytes per operand.
        bytes: usize,
        /// Bytes of each rank's share of the result.
        shares: Vec<usize>,
    },
    /// Rank `i` sends `sends[i * n + j]` bytes to rank `j`.
    AllToAll {
        /// The `n × n` byte counts, row by sender.
        sends: Vec<usize>,
    },
}

impl Collective {
    /// The smallest step a lowering of it can price at its throughputs'
    /// working size ([`super::working_bytes`]): the smallest result a rank
    /// gets. Rates are taken at their best over sizes from this one up.
    fn floor(&self) -> usize {
        let min_pos = |v: &[usize]| v.iter().copied().filter(|b| *b > 0).min().unwrap_or(0);
        match self {
            Collective::AllReduce { bytes }
            | Collective::Reduce { bytes, .. }
            | Collective::Broadcast { bytes, .. } => *bytes,
            Collective::AllGather { shards } => shards.iter().sum(),
            Collective::ReduceScatter { shares, .. } => min_pos(shares),
            Collective::AllToAll { sends } => min_pos(sends),
        }
    }

    /// The largest tensor a lowering of it has, which caps the working
    /// size its steps are priced at: an operand or a result (a `Mean`'s
    /// wider accumulator is already its type here).
    fn ceiling(&self) -> usize {
        match self {
            Collective::AllReduce { bytes }
            | Collective::Reduce { bytes, .. }
            | Collective::Broadcast { bytes, .. }
            | Collective::ReduceScatter { bytes, .. } => *bytes,
            Collective::AllGather { shards } => shards.iter().sum(),
            Collective::AllToAll { sends } => {
                let n = (sends.len() as f64).sqrt() as usize;
                let row = |i: usize| sends[i * n..(i + 1) * n].iter().sum::<usize>();
                let col = |j: usize| (0..n).map(|i| sends[i * n + j]).sum::<usize>();
                (0..n).map(|i| row(i).max(col(i))).max().unwrap_or(0)
            }
        }
    }

    /// Bytes that must be folded: `(n-1)` shards' worth, for a reduction.
    fn fold_bytes(&self, ranks: usize) -> f64 {
        let others = ranks.saturating_sub(1) as f64;
        match self {
            Collective::AllReduce { bytes }
            | Collective::Reduce { bytes, .. }
            | Collective::ReduceScatter { bytes, .. } => others * *bytes as f64,
            _ => 0.0,
        }
    }

    /// Whether rank `to`'s result depends on rank `from`'s input.
    fn depends(&self, from: usize, to: usize) -> bool {
        match self {
            Collective::AllReduce { .. } => true,
            Collective::Reduce { root, .. } => to == *root,
            Collective::Broadcast { root, .. } => from == *root,
            Collective::AllGather { shards } => shards.get(from).is_some_and(|b| *b > 0),
            Collective::ReduceScatter { shares, .. } => shares.get(to).is_some_and(|b| *b > 0),
            Collective::AllToAll { sends } => {
                let n = (sends.len() as f64).sqrt() as usize;
                sends.get(from * n + to).is_some_and(|b| *b > 0)
            }
        }
    }
}

/// Which term of [`bound`] binds.
#[derive(Clone, Debug, PartialEq)]
pub enum Binding {
    /// Nothing has to move or be folded (one rank, or no bytes).
    Nothing,
    /// The bytes `side` needs, over the rate it can take them in.
    Cut {
        /// The devices on the receiving side.
        side: Vec<Device>,
        /// Bytes that must cross into it.
        bytes: f64,
        /// GB/s it can take in.
        gbps: f64,
    },
    /// The fixed costs of the cheapest path from `from` to `to`.
    Latency {
        /// Where an input lies.
        from: Device,
        /// Where a result that depends on it goes.
        to: Device,
    },
    /// The bytes a reduction reads and writes in host memory, over its
    /// bandwidth, where every device keeps its data there.
    Memory {
        /// Bytes read and written.
        bytes: f64,
        /// GB/s of host memory, reads and writes together.
        gbps: f64,
    },
    /// The least time of the host driver's ring, which moves an all-CPU
    /// all-reduce's bytes outside the host-memory count, where that is
    /// below the host-memory term.
    HostDriver,
    /// The bytes every fold together must read, over the devices' fold
    /// throughputs together.
    Compute {
        /// Bytes of fold input.
        bytes: f64,
        /// GB/s of fold input, every folding device together.
        gbps: f64,
    },
}

/// Which splits the cut term tried.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Splits {
    /// Every split of the group ([`ENUMERATE_MAX`] devices or fewer).
    Every,
    /// A larger group: the splits that minimum cuts between its devices
    /// propose (a max-flow between each ordered pair of twin classes),
    /// and those that cut off one device, all but one, or one device kind.
    /// Looser than every split can be; the note says so.
    MinCuts,
    /// A larger group with too many classes of devices for a max-flow
    /// between every pair: the minimum cuts to and from one device only
    /// (a reduce's or broadcast's root, else the first), which include the
    /// least cut of all, and the splits of [`Splits::MinCuts`]'s others.
    MinCutsFromOne,
    /// A group too large for max-flows at all: the splits that cut off
    /// one device, all but one, or one device kind.
    Few,
}

/// A lower bound on any schedule of one collective, and what binds it.
#[derive(Clone, Debug, PartialEq)]
pub struct Bound {
    /// Microseconds no schedule can go under.
    pub us: f64,
    /// The term that gives it.
    pub binding: Binding,
    /// Which splits the cut term tried.
    pub splits: Splits,
}

/// Why there is no finite bound.
#[derive(Clone, Debug, PartialEq)]
pub enum BoundError {
    /// No link brings bytes to `device`, which needs them.
    Unreachable {
        /// The device no link reaches.
        device: Device,
    },
    /// The collective's byte counts do not fit the group.
    Shape(String),
}

impl fmt::Display for BoundError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BoundError::Unreachable { device } => write!(
                f,
                "no link of the topology reaches {device}, which needs bytes from the other devices: the bound is infinite; give {device} a link (or leave it out of the group)"
            ),
            BoundError::Shape(why) => write!(f, "cannot bound this collective: {why}"),
        }
    }
}

impl std::error::Error for BoundError {}

/// The lower bound of `collective` over `group` (rank `r` on `group[r]`)
/// on `topo`: the largest of the cut, latency and compute terms (see the
/// module's doc).
pub fn bound(
    collective: &Collective,
    group: &[Device],
    topo: &Topology,
) -> Result<Bound, BoundError> {
    bound_widened(collective, group, topo, 1)
}

/// [`bound`] of a collective whose byte counts are its narrow type's and
/// which a lowering may fold in an accumulator `widen` times as wide (a
/// `Mean` of f16 folded in f32: `widen` 2): its bytes may cross devices
/// narrow, but its steps may be priced at the wide tensors' size.
pub fn bound_widened(
    collective: &Collective,
    group: &[Device],
    topo: &Topology,
    widen: usize,
) -> Result<Bound, BoundError> {
    let ceiling = collective.ceiling().saturating_mul(widen.max(1));
    let sizes = (collective.floor(), ceiling);
    let net = Network::new(group, topo, sizes, drivers_for(collective, topo));
    bound_on(&net, collective, group)
}

/// The collective drivers that may serve `c` on `topo`: the topology's,
/// for an all-reduce (the only collective a driver runs, `lower/driver.rs`);
/// none for any other, whose every byte then moves by copies and folds.
fn drivers_for(c: &Collective, topo: &Topology) -> Vec<DeviceKind> {
    match c {
        Collective::AllReduce { .. } => topo.drivers.iter().copied().collect(),
        _ => Vec::new(),
    }
}

/// [`bound`] on a network already built (the tests build one by hand).
fn bound_on(net: &Network, c: &Collective, group: &[Device]) -> Result<Bound, BoundError> {
    let demand = Demand::new(c, group, net)?;
    let splits = if net.nodes() <= ENUMERATE_MAX {
        Splits::Every
    } else {
        terms::large_splits(net, &demand)
    };
    let mut best = Bound {
        us: 0.0,
        binding: Binding::Nothing,
        splits,
    };
    let mut take = |us: f64, binding: Binding| {
        if us > best.us {
            best.us = us;
            best.binding = binding;
        }
    };
    if let Some((us, side, bytes, gbps)) = cut_term(net, &demand, splits)? {
        take(us, Binding::Cut { side, bytes, gbps });
    }
    if let Some((us, from, to)) = latency_term(net, c, group, &demand) {
        take(us, Binding::Latency { from, to });
    }
    let fold = c.fold_bytes(group.len());
    if fold > 0.0 {
        // Without a collective driver, which combines shards outside any
        // fold, every shard is an operand of some fold, which reads it:
        // all `n` shards' bytes, not `n-1`.
        let reads = if net.driven {
            fold
        } else {
            fold * group.len() as f64 / (group.len() as f64 - 1.0)
        };
        // A fold of more inputs reads them faster: at most as many as
        // the ranks.
        let gbps = net.fold_gbps_wide(group.len());
        take(
            reads / (gbps * 1e3),
            Binding::Compute { bytes: reads, gbps },
        );
    }
    let bytes = staged::host_bytes(net, c, group, &demand);
    if bytes > 0.0 {
        let gbps = net.memory_gbps(bytes);
        let us = bytes / (gbps * 1e3);
        match (net.cpu_driver, c) {
            // The host driver's ring, on the caller's thread for every
            // rank: 2(k-1) shards over the host-to-host link (half the
            // memory figure) and (k-1) shards folded.
            (true, Collective::AllReduce { bytes: m }) => {
                let k = group.len() as f64 - 1.0;
                // Its link at its best from the smallest step up, not at
                // the host-memory count's size (the ring's own steps are
                // smaller than that).
                let link = net.memory_gbps(0.0);
                let driver = 4.0 * k * *m as f64 / (link * 1e3) + fold / (net.fold_gbps() * 1e3);
                if driver < us {
                    take(driver, Binding::HostDriver);
                } else {
                    take(us, Binding::Memory { bytes, gbps });
                }
            }
            // `cpu_driver` is set for all-reduces alone ([`drivers_for`]).
            _ => take(us, Binding::Memory { bytes, gbps }),
        }
    }
    Ok(best)
}

/// GB/s and fixed microseconds of a copy, by the source's kind, the
/// destination's kind (indices into [`DeviceKind::ALL`]) and peer access
/// (0 without, 1 with); `None` with no direct link.
type Rates = [[[Option<(f64, f64)>; 2]; 3]; 3];

/// The devices a bound is worked on and what each link and fold can do.
/// Nodes are the group's distinct devices, then the staging CPU where it
/// is not one of them (the relay).
#[derive(Clone, Debug)]
struct Network {
    devices: Vec<Device>,
    /// Whether the last device is the relay.
    relay: bool,
    /// Each node's kind, as an index into [`DeviceKind::ALL`].
    kind: Vec<usize>,
    /// Each node's peers (nodes), sorted.
    peer_nodes: Vec<Vec<usize>>,
    /// GB/s and fixed microseconds of one copy from a node of one kind to
    /// a node of another, without and with peer access: `None` with no
    /// direct link; an infinite rate where the executor shares the buffer.
    /// A link's figures depend on the kinds and peer access alone, so a
    /// large group needs no matrix of its pairs.
    rates: Rates,
    /// GB/s of fold input per device.
    fold: Vec<f64>,
    /// Each device's computation figures (for what a wide fold costs).
    fold_cost: Vec<ComputeCost>,
    /// Every node keeps its data in host memory and no collective driver
    /// serves one of their kinds.
    host_only: bool,
    /// A collective driver serves one of the nodes' kinds.
    driven: bool,
    /// The host driver serves the CPUs: it folds their shards with no
    /// host-memory traffic the model counts (`cost::placement`).
    cpus_driven: bool,
    /// Whether each node keeps its data in host memory.
    hmem: Vec<bool>,
    /// The GPU islands ([`staged::islands`]).
    islands: Vec<Vec<usize>>,
    /// The host-to-host copy's figures, and the smallest size a step can
    /// be priced at: host memory moves twice the copy's rate.
    host_host: (fuel_graph_ext::topology::Curve, usize),
    /// How many other nodes each node has peer access with.
    peers: Vec<u32>,
    /// The staging CPU's node.
    staging: usize,
    /// Every node is a CPU and the host driver serves them (an all-reduce
    /// on a topology that declares it): its traffic is its own, so the
    /// host-memory term is no larger than the driver's least time.
    cpu_driver: bool,
}

/// The best a curve gives between `floor` and `ceiling` bytes (from
/// `floor` up with no ceiling).
fn best_in(
    curve: &fuel_graph_ext::topology::Curve,
    (floor, ceiling): (usize, Option<usize>),
) -> f64 {
    let top = ceiling.unwrap_or(usize::MAX).max(floor);
    curve
        .points()
        .iter()
        .filter(|(size, _)| *size > floor && *size < top)
        .map(|p| p.1)
        .chain(ceiling.map(|c| curve.at(c.max(floor).max(1))))
        .fold(curve.at(floor.max(1)), f64::max)
}

impl Network {
    /// The network of `group` on `topo`, rates at their best over the
    /// working sizes its steps can be priced at (`sizes`: the smallest
    /// and the largest; host memory from the smallest up, since its
    /// figure is taken at the size of all the traffic), with the
    /// collective drivers `drivers` ([`drivers_for`]).
    fn new(
        group: &[Device],
        topo: &Topology,
        sizes: (usize, usize),
        drivers: Vec<DeviceKind>,
    ) -> Network {
        let (floor, ceiling) = sizes;
        let steps = (floor, Some(ceiling));
        let mut devices: Vec<Device> = Vec::with_capacity(group.len() + 1);
        let mut node_of: rustc_hash::FxHashMap<Device, usize> = Default::default();
        for d in group {
            node_of.entry(*d).or_insert_with(|| {
                devices.push(*d);
                devices.len() - 1
            });
        }
        let relay = !node_of.contains_key(&topo.staging);
        if relay {
            node_of.insert(topo.staging, devices.len());
            devices.push(topo.staging);
        }
        let n = devices.len();
        let kind: Vec<usize> = devices
            .iter()
            .map(|d| {
                DeviceKind::ALL
                    .iter()
                    .position(|k| *k == d.kind)
                    .unwrap_or(0)
            })
            .collect();
        let mut peer_nodes: Vec<Vec<usize>> = vec![Vec::new(); n];
        for (a, b) in topo.peer_pairs() {
            if let (Some(&u), Some(&v)) =
                (node_of.get(&Device::cuda(a)), node_of.get(&Device::cuda(b)))
            {
                peer_nodes[u].push(v);
            }
        }
        peer_nodes.iter_mut().for_each(|p| p.sort_unstable());
        // One pair of nodes of each pair of kinds, with and without peer
        // access, stands for all such pairs.
        let mut rates: Rates = [[[None; 2]; 3]; 3];
        let kinds = &kind;
        let of_kind = move |k: usize| (0..n).filter(move |v| kinds[*v] == k);
        let peered = |u: usize, v: usize| peer_nodes[u].binary_search(&v).is_ok();
        for (ka, from) in rates.iter_mut().enumerate() {
            for (kb, to) in from.iter_mut().enumerate() {
                // A pair without peer access: a few first nodes of `ka`
                // are tried, each against the nodes of `kb` until one is
                // not a peer.
                let plain = of_kind(ka).take(4).find_map(|u| {
                    of_kind(kb)
                        .find(|v| *v != u && !peered(u, *v))
                        .map(|v| (u, v))
                });
                if let Some((u, v)) = plain {
                    to[0] = link_rate(topo, devices[u], devices[v], steps);
                }
                let with_peer = of_kind(ka).find_map(|u| {
                    peer_nodes[u]
                        .iter()
                        .find(|v| kind[**v] == kb)
                        .map(|v| (u, *v))
                });
                if let Some((u, v)) = with_peer {
                    to[1] = link_rate(topo, devices[u], devices[v], steps);
                }
            }
        }
        let peers = peer_nodes.iter().map(|p| p.len() as u32).collect();
        let fold_cost: Vec<ComputeCost> = devices.iter().map(|d| topo.compute(d.kind)).collect();
        let fold = fold_cost.iter().map(|c| best_in(&c.gbps, steps)).collect();
        let all_cpus = devices.iter().all(|d| d.is_cpu());
        let cpu_driver = all_cpus && drivers.contains(&DeviceKind::Cpu);
        let host_only = devices
            .iter()
            .all(|d| topo.in_host_memory(d.kind) && !drivers.contains(&d.kind));
        let islands = staged::islands(&devices, n - usize::from(relay), &peer_nodes, &drivers);
        Network {
            host_only,
            driven: devices.iter().any(|d| drivers.contains(&d.kind)),
            cpus_driven: drivers.contains(&DeviceKind::Cpu),
            hmem: devices
                .iter()
                .map(|d| topo.in_host_memory(d.kind))
                .collect(),
            islands,
            host_host: (topo.link(LinkClass::HostHost).bandwidth, floor),
            peers,
            staging: devices
                .iter()
                .position(|d| *d == topo.staging)
                .unwrap_or(n - 1),
            cpu_driver,
            devices,
            relay,
            kind,
            peer_nodes,
            rates,
            fold,
            fold_cost,
        }
    }

    /// The figures of a copy from node `u` to node `v`, if they have a
    /// direct link.
    fn rate(&self, u: usize, v: usize) -> Option<(f64, f64)> {
        if u == v {
            return None;
        }
        let peered = self.peer_nodes[u].binary_search(&v).is_ok();
        self.rates[self.kind[u]][self.kind[v]][usize::from(peered)]
    }

    /// Fixed microseconds of a hop from node `u` to node `v`, infinite
    /// with no direct link.
    fn hop_us(&self, u: usize, v: usize) -> f64 {
        self.rate(u, v).map_or(f64::INFINITY, |r| r.1)
    }

    /// Nodes other than the relay.
    fn nodes(&self) -> usize {
        self.devices.len() - usize::from(self.relay)
    }

    /// GB/s of host memory, reads and writes together, for a run that
    /// reads or writes `bytes` there: the model prices host memory at
    /// the size of half its traffic or more (`cost::Tally::finish`), so
    /// at the best figure from that size up.
    fn memory_gbps(&self, bytes: f64) -> f64 {
        let (curve, floor) = &self.host_host;
        let streamed = (bytes / 2.0).min(usize::MAX as f64) as usize;
        2.0 * best_in(curve, ((*floor).max(streamed), None))
    }

    /// GB/s of one copy from node `u` to node `v`.
    fn cap(&self, u: usize, v: usize) -> f64 {
        self.rate(u, v).map_or(0.0, |r| r.0)
    }

    /// GB/s of fold input of every device together, or of the fastest
    /// alone where every device is a CPU (the inline runner: one thread).
    fn fold_gbps(&self) -> f64 {
        self.fold_gbps_wide(2)
    }

    /// [`Network::fold_gbps`] where a fold may take up to `n` inputs: a
    /// wider fold reads them faster (it writes one result for all of
    /// them, [`ComputeCost::fold_inputs`]), at each device's own rate.
    fn fold_gbps_wide(&self, n: usize) -> f64 {
        let n = n.max(2);
        let each = self
            .fold
            .iter()
            .zip(&self.fold_cost)
            .map(|(g, c)| g * n as f64 / c.fold_inputs(n));
        if self.devices.iter().all(|d| d.is_cpu()) {
            each.fold(0.0, f64::max)
        } else {
            each.sum()
        }
    }

    /// GB/s the nodes in `inside` (a mask over every node, the relay's bit
    /// included) take in from the others: each node's fastest link from
    /// outside, summed. A node's fastest link is read per kind outside and
    /// per peer outside, not per node: where every node of a kind outside
    /// is a peer, the link without peer access is counted too, which can
    /// only make the intake larger and the bound lower.
    fn intake(&self, inside: &[bool]) -> f64 {
        let n = self.devices.len();
        let mut kinds_outside = [false; 3];
        for u in (0..n).filter(|u| !inside[*u]) {
            kinds_outside[self.kind[u]] = true;
        }
        let gbps = |r: Option<(f64, f64)>| r.map_or(0.0, |r| r.0);
        let mut total = 0.0;
        for v in (0..n).filter(|v| inside[*v]) {
            let kv = self.kind[v];
            let plain = (0..3)
                .filter(|ko| kinds_outside[*ko])
                .map(|ko| gbps(self.rates[ko][kv][0]))
                .fold(0.0, f64::max);
            // Peer access goes both ways (a `peer` line sets both).
            let peer = self.peer_nodes[v]
                .iter()
                .filter(|u| !inside[**u])
                .map(|u| gbps(self.rates[self.kind[*u]][kv][1]))
                .fold(0.0, f64::max);
            total += plain.max(peer);
        }
        total
    }
}

/// GB/s and fixed microseconds of a copy from `a` to `b` on `topo`, or
/// `None` where they have no direct link (or are the same device).
fn link_rate(
    topo: &Topology,
    a: Device,
    b: Device,
    steps: (usize, Option<usize>),
) -> Option<(f64, f64)> {
    if a == b {
        return None;
    }
    let class = topo.link_class(a, b)?;
    if class == LinkClass::HostHost || (a.is_cpu() && b.kind == DeviceKind::Vulkan) {
        // Host arenas share the buffer, and a Vulkan device imports a host
        // buffer of a page or more (`plan::Caps::imports_host`): nothing
        // moves.
        return Some((f64::INFINITY, 0.0));
    }
    let link = topo.link(class);
    let copy = best_in(&link.bandwidth, steps);
    // A copy across the host link into a host or Vulkan fold may be
    // deferred into it: no latency, the deferred rate.
    let deferrable = a.is_cpu() != b.is_cpu() && (b.is_cpu() || b.kind == DeviceKind::Vulkan);
    if deferrable {
        let fixed = if b.is_cpu() {
            0.0
        } else {
            link.latency_us.min(topo.compute(b.kind).fixed_us)
        };
        Some((copy.max(link.deferred_gbps), fixed))
    } else {
        Some((copy, link.latency_us))
    }
}

mod flow;
mod staged;
mod terms;
use terms::{cut_term, latency_term, Demand};

impl fmt::Display for Bound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}us", micros(self.us))?;
        match &self.binding {
            Binding::Nothing => f.write_str(" (nothing to move)")?,
            Binding::Cut { side, bytes, gbps } => {
                f.write_str(" (the cut {")?;
                // A large side: its first devices, its last and its count.
                let shown: Vec<&Device> = if side.len() > 8 {
                    side[..3].iter().chain(side.last()).collect()
                } else {
                    side.iter().collect()
                };
                for (i, d) in shown.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    if side.len() > 8 && i == 3 {
                        f.write_str("..., ")?;
                    }
                    write!(f, "{d}")?;
                }
                if side.len() > 8 {
                    write!(f, " ({} devices)", side.len())?;
                }
                write!(f, "}}: {} over {} GB/s)", megabytes(*bytes), figure(*gbps))?;
            }
            Binding::Latency { from, to } => write!(f, " (latency from {from} to {to})")?,
            Binding::HostDriver => f.write_str(" (the host driver's ring at its fastest)")?,
            Binding::Memory { bytes, gbps } => write!(
                f,
                " (host memory: {} over {} GB/s)",
                megabytes(*bytes),
                figure(*gbps)
            )?,
            Binding::Compute { bytes, gbps } => write!(
                f,
                " (folds: {} over {} GB/s)",
                megabytes(*bytes),
                figure(*gbps)
            )?,
        }
        f.write_str(match self.splits {
            Splits::Every => "",
            Splits::MinCuts => " [over 16 devices: splits from max-flow min cuts between every pair, plus single-device, all-but-one and per-kind cuts]",
            Splits::MinCutsFromOne => " [over 16 devices: splits from max-flow min cuts to and from one device, plus single-device, all-but-one and per-kind cuts]",
            Splits::Few => " [over 16 devices, too many for max-flows: single-device, all-but-one and per-kind cuts only]",
        })?;
        Ok(())
    }
}

/// Microseconds with two decimals, or three significant digits under one
/// (`381.33`, `0.00123`): a tiny bound still reads as a figure.
fn micros(us: f64) -> String {
    if us >= 1.0 || us <= 0.0 {
        return format!("{us:.2}");
    }
    let decimals = (2.0 - us.log10().floor()).clamp(2.0, 12.0) as usize;
    format!("{us:.decimals$}")
}

/// `4.2 MB`, `65.5 kB`, `512 B`.
fn megabytes(bytes: f64) -> String {
    if bytes >= 1e6 {
        format!("{:.1} MB", bytes / 1e6)
    } else if bytes >= 1e3 {
        format!("{:.1} kB", bytes / 1e3)
    } else {
        format!("{bytes:.0} B")
    }
}

/// A rate with as many digits as it needs: `11`, `14.5`, `0.25`.
fn figure(x: f64) -> String {
    let s = format!("{x:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

#[cfg(test)]
mod tests;
