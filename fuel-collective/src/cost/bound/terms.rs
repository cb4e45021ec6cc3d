//! The cut and latency terms of [`super::bound`]: what each split of the
//! group must take in, over what it can, tried over every split (or, for a
//! large group, the splits that minimum cuts between its devices propose
//! and a few more), and the cheapest paths' fixed costs.

use super::flow::FlowNet;
use super::{BoundError, Collective, Network, Splits};
use fuel_graph_ext::Device;

/// What each node needs from the others, by node (not rank: two ranks on
/// one device are one node). The relay, if any, is the last node and
/// needs nothing.
#[derive(Clone, Debug)]
pub(super) struct Demand {
    kind: Kind,
    /// Nodes other than the relay.
    k: usize,
}

#[derive(Clone, Debug)]
enum Kind {
    /// A side with some node but not all needs `bytes`.
    Everyone(f64),
    /// A side holding `root` but not every node needs `bytes`.
    ToRoot(f64, usize),
    /// A side with some node but not `root` needs `bytes`.
    FromRoot(f64, usize),
    /// A side with some node needs the shards of the nodes outside it.
    Gather(Vec<f64>),
    /// A side without every node needs its nodes' shares.
    Scatter(Vec<f64>),
    /// A side needs what the nodes outside send its nodes (`k × k`).
    Exchange(Vec<f64>),
}

impl Demand {
    /// The demand of `c` over `group`, its ranks placed on `net`'s nodes.
    pub fn new(c: &Collective, group: &[Device], net: &Network) -> Result<Demand, BoundError> {
        let k = net.nodes();
        let node = |r: usize| -> Result<usize, BoundError> {
            let d = group
                .get(r)
                .ok_or_else(|| BoundError::Shape(format!("rank {r} is not in the group")))?;
            net.devices
                .iter()
                .position(|x| x == d)
                .ok_or_else(|| BoundError::Shape(format!("{d} is not a node")))
        };
        let per_rank = |v: &[usize], what: &str| -> Result<Vec<f64>, BoundError> {
            if v.len() != group.len() {
                return Err(BoundError::Shape(format!(
                    "{} {what} for {} ranks",
                    v.len(),
                    group.len()
                )));
            }
            let mut out = vec![0.0; k];
            for (r, b) in v.iter().enumerate() {
                out[node(r)?] += *b as f64;
            }
            Ok(out)
        };
        let kind = match c {
            Collective::AllReduce { bytes } => Kind::Everyone(*bytes as f64),
            Collective::Reduce { bytes, root } => Kind::ToRoot(*bytes as f64, node(*root)?),
            Collective::Broadcast { bytes, root } => Kind::FromRoot(*bytes as f64, node(*root)?),
            Collective::AllGather { shards } => Kind::Gather(per_rank(shards, "shards")?),
            Collective::ReduceScatter { shares, .. } => Kind::Scatter(per_rank(shares, "shares")?),
            Collective::AllToAll { sends } => {
                let n = group.len();
                if sends.len() != n * n {
                    return Err(BoundError::Shape(format!(
                        "{} send counts for {n} ranks: expected {}",
                        sends.len(),
                        n * n
                    )));
                }
                let mut m = vec![0.0; k * k];
                for i in 0..n {
                    for j in 0..n {
                        let (u, v) = (node(i)?, node(j)?);
                        if u != v {
                            m[u * k + v] += sends[i * n + j] as f64;
                        }
                    }
                }
                Kind::Exchange(m)
            }
        };
        Ok(Demand { kind, k })
    }

    /// Bytes the side `inside` (over the `k` nodes) needs from outside it.
    pub(super) fn need(&self, inside: &[bool]) -> f64 {
        let k = self.k;
        let some = inside[..k].iter().any(|x| *x);
        let all = inside[..k].iter().all(|x| *x);
        if !some || all {
            return 0.0;
        }
        match &self.kind {
            Kind::Everyone(b) => *b,
            Kind::ToRoot(b, root) => {
                if inside[*root] {
                    *b
                } else {
                    0.0
                }
            }
            Kind::FromRoot(b, root) => {
                if inside[*root] {
                    0.0
                } else {
                    *b
                }
            }
            Kind::Gather(s) => (0..k).filter(|v| !inside[*v]).map(|v| s[v]).sum(),
            Kind::Scatter(s) => (0..k).filter(|v| inside[*v]).map(|v| s[v]).sum(),
            Kind::Exchange(m) => {
                let mut total = 0.0;
                for v in (0..k).filter(|v| inside[*v]) {
                    for u in (0..k).filter(|u| !inside[*u]) {
                        total += m[u * k + v];
                    }
                }
                total
            }
        }
    }
}

impl Demand {
    /// For a reduction, the bytes the side `inside` needs from each node
    /// outside it before any fold combines them (every outside node's
    /// shard holds a part of what the side's results sum); `None` for a
    /// collective that folds nothing, whose [`Demand::need`] is that
    /// already.
    pub(super) fn per_contributor(&self, inside: &[bool]) -> Option<f64> {
        let k = self.k;
        if !inside[..k].iter().any(|x| *x) || inside[..k].iter().all(|x| *x) {
            return Some(0.0);
        }
        match &self.kind {
            Kind::Everyone(b) => Some(*b),
            Kind::ToRoot(b, root) => Some(if inside[*root] { *b } else { 0.0 }),
            Kind::Scatter(s) => Some((0..k).filter(|v| inside[*v]).map(|v| s[v]).sum()),
            Kind::FromRoot(..) | Kind::Gather(_) | Kind::Exchange(_) => None,
        }
    }
}

impl Demand {
    /// The node max-flows start from where not every pair gets one: a
    /// reduce's or broadcast's root, else the first.
    fn source(&self) -> usize {
        match &self.kind {
            Kind::ToRoot(_, root) | Kind::FromRoot(_, root) => *root,
            _ => 0,
        }
    }

    /// Whether swapping nodes `u` and `v` leaves every side's need as it
    /// was.
    fn alike(&self, u: usize, v: usize) -> bool {
        let k = self.k;
        match &self.kind {
            Kind::Everyone(_) => true,
            Kind::ToRoot(_, root) | Kind::FromRoot(_, root) => u != *root && v != *root,
            Kind::Gather(s) | Kind::Scatter(s) => s[u] == s[v],
            Kind::Exchange(m) => {
                m[u * k + v] == m[v * k + u]
                    && (0..k)
                        .filter(|w| *w != u && *w != v)
                        .all(|w| m[u * k + w] == m[v * k + w] && m[w * k + u] == m[w * k + v])
            }
        }
    }
}

/// The tightest cut: microseconds, the receiving side's devices, its
/// bytes and GB/s; `None` where no split needs bytes.
pub(super) type Cut = (f64, Vec<Device>, f64, f64);

/// The cut term over the splits `splits` says.
pub(super) fn cut_term(
    net: &Network,
    demand: &Demand,
    splits: Splits,
) -> Result<Option<Cut>, BoundError> {
    let from_one = match splits {
        Splits::Every => return cut_every(net, demand),
        Splits::Few => return cut_few(net, demand),
        Splits::MinCuts => false,
        Splits::MinCutsFromOne => true,
    };
    let pairs = flow_pairs(
        &twin_classes(net, demand),
        from_one.then(|| demand.source()),
    );
    let mut sides = few_splits(net, demand);
    sides.extend(flow_splits(net, &pairs));
    cut_over(net, demand, sides)
}

/// How much max-flow work the cut term of a large group may do: each
/// max-flow counts the network's nodes squared (its arcs at most), a
/// unit that took 2 to 7 ns on the development VM's release build, so a
/// few milliseconds in all (2 to 8 measured). Every ordered pair of 32
/// devices, no two of them twins, and a relay fits (1.08 million).
const FLOW_WORK: usize = 1_100_000;

/// Which splits a group over [`super::ENUMERATE_MAX`] devices tries: the
/// minimum cuts between every pair of twin classes where their max-flows
/// fit in [`FLOW_WORK`], else those to and from one device where they
/// fit, else none (the few splits alone).
pub(super) fn large_splits(net: &Network, demand: &Demand) -> Splits {
    let n = net.devices.len();
    let work = |flows: usize| flows.saturating_mul(n * n);
    // Two max-flows at the least: a group this large skips the classes.
    if work(2) > FLOW_WORK {
        return Splits::Few;
    }
    let classes = twin_classes(net, demand);
    if work(flow_pairs(&classes, None).len()) <= FLOW_WORK {
        Splits::MinCuts
    } else if work(flow_pairs(&classes, Some(demand.source())).len()) <= FLOW_WORK {
        Splits::MinCutsFromOne
    } else {
        Splits::Few
    }
}

/// The cut term over every split of at most [`super::ENUMERATE_MAX`]
/// nodes, each a bit mask: each node's sources sorted by rate once, so a
/// side's intake is, per node inside, the first source outside; what a
/// side needs comes from tables built once over all masks.
fn cut_every(net: &Network, demand: &Demand) -> Result<Option<Cut>, BoundError> {
    let k = net.nodes();
    let n = net.devices.len();
    let sources: Vec<Vec<(u32, f64)>> = (0..n)
        .map(|v| {
            let mut s: Vec<(u32, f64)> = (0..n)
                .filter(|u| *u != v)
                .map(|u| (1u32 << u, net.cap(u, v)))
                .filter(|x| x.1 > 0.0)
                .collect();
            s.sort_by(|a, b| b.1.total_cmp(&a.1));
            s
        })
        .collect();
    let intake = |mask: u32| -> f64 {
        let (mut total, mut m) = (0.0, mask);
        while m != 0 {
            let v = m.trailing_zeros() as usize;
            m &= m - 1;
            if let Some((_, c)) = sources[v].iter().find(|(bit, _)| mask & bit == 0) {
                total += c;
            }
        }
        total
    };
    let need = demand.table();
    let full = (1u32 << k) - 1;
    let relay = net.relay.then_some(1u32 << k);
    let mut best: Option<(f64, u32, f64, f64)> = None;
    for mask in 1..full {
        let bytes = need.at(mask, full);
        if bytes <= 0.0 {
            continue;
        }
        let mut gbps = intake(mask);
        if let Some(r) = relay {
            gbps = gbps.min(intake(mask | r));
        }
        if gbps <= 0.0 {
            let device = net.devices[mask.trailing_zeros() as usize];
            return Err(BoundError::Unreachable { device });
        }
        let us = bytes / (gbps * 1e3);
        if best.is_none_or(|b| us > b.0) {
            best = Some((us, mask, bytes, gbps));
        }
    }
    Ok(best.map(|(us, mask, bytes, gbps)| {
        let side = (0..k)
            .filter(|v| mask & (1 << v) != 0)
            .map(|v| net.devices[v]);
        (us, side.collect(), bytes, gbps)
    }))
}

/// What each mask of nodes needs, in a form read in constant time.
enum Table<'a> {
    /// As [`Kind::Everyone`], [`Kind::ToRoot`], [`Kind::FromRoot`].
    Plain(&'a Kind),
    /// Bytes of the nodes in each mask (gather: what the rest holds is
    /// the total less it; scatter: the side's shares).
    Sums {
        sums: Vec<f64>,
        total: f64,
        gather: bool,
    },
    /// For an exchange: what each mask's nodes receive in all, and what
    /// they send one another.
    Exchange { received: Vec<f64>, inner: Vec<f64> },
}

impl Table<'_> {
    /// Bytes the side `mask` needs (`full`: every node).
    fn at(&self, mask: u32, full: u32) -> f64 {
        let i = mask as usize;
        match self {
            Table::Plain(kind) => match kind {
                Kind::Everyone(b) => *b,
                Kind::ToRoot(b, root) if mask & (1 << root) != 0 && mask != full => *b,
                Kind::FromRoot(b, root) if mask & (1 << root) == 0 => *b,
                _ => 0.0,
            },
            Table::Sums {
                sums,
                total,
                gather,
            } => {
                if *gather {
                    total - sums[i]
                } else {
                    sums[i]
                }
            }
            Table::Exchange { received, inner } => received[i] - inner[i],
        }
    }
}

impl Demand {
    /// The demand over every mask of the `k` nodes.
    fn table(&self) -> Table<'_> {
        let k = self.k;
        let size = 1usize << k;
        // Each mask's value from the mask without its lowest node.
        let by_low = |f: &dyn Fn(usize, usize) -> f64| {
            let mut t = vec![0.0; size];
            for mask in 1..size {
                let low = mask.trailing_zeros() as usize;
                let rest = mask & (mask - 1);
                t[mask] = t[rest] + f(low, rest);
            }
            t
        };
        match &self.kind {
            Kind::Gather(s) | Kind::Scatter(s) => Table::Sums {
                sums: by_low(&|v, _| s[v]),
                total: s.iter().sum(),
                gather: matches!(self.kind, Kind::Gather(_)),
            },
            Kind::Exchange(m) => {
                let col: Vec<f64> = (0..k).map(|v| (0..k).map(|u| m[u * k + v]).sum()).collect();
                let received = by_low(&|v, _| col[v]);
                let inner = by_low(&|v, rest| {
                    (0..k)
                        .filter(|w| rest & (1 << w) != 0)
                        .map(|w| m[v * k + w] + m[w * k + v])
                        .sum()
                });
                Table::Exchange { received, inner }
            }
            kind => Table::Plain(kind),
        }
    }
}

/// The cut term over the few splits of a large group alone, without the
/// minimum cuts' (what a group too large for max-flows gets).
pub(super) fn cut_few(net: &Network, demand: &Demand) -> Result<Option<Cut>, BoundError> {
    cut_over(net, demand, few_splits(net, demand))
}

/// The cut term over `sides` (each by node, the relay aside), in order:
/// each split is a real one, its need and intake the model's, so the
/// largest is a lower bound however the sides were chosen. The relay is
/// tried on either side; a side that needs bytes and can take none in is
/// [`BoundError::Unreachable`], naming its first device.
fn cut_over(
    net: &Network,
    demand: &Demand,
    sides: Vec<Vec<bool>>,
) -> Result<Option<Cut>, BoundError> {
    let k = net.nodes();
    let n = net.devices.len();
    let mut best: Option<Cut> = None;
    let mut inside = vec![false; n];
    let mut try_side = |inside: &mut Vec<bool>| -> Result<(), BoundError> {
        let need = demand.need(inside);
        if need <= 0.0 {
            return Ok(());
        }
        let mut gbps = net.intake(inside);
        if net.relay {
            inside[n - 1] = true;
            gbps = gbps.min(net.intake(inside));
            inside[n - 1] = false;
        }
        if gbps <= 0.0 {
            let device = (0..k)
                .find(|v| inside[*v])
                .map_or(net.devices[0], |v| net.devices[v]);
            return Err(BoundError::Unreachable { device });
        }
        let us = need / (gbps * 1e3);
        if best.as_ref().is_none_or(|b| us > b.0) {
            let side = (0..k).filter(|v| inside[*v]).map(|v| net.devices[v]);
            best = Some((us, side.collect(), need, gbps));
        }
        Ok(())
    };
    for side in sides {
        inside[..k].copy_from_slice(&side);
        try_side(&mut inside)?;
    }
    Ok(best)
}

/// The ordered pairs of nodes to cut between, one per pair of twin
/// classes: every pair (`from` `None`), or each class's to and from the
/// node `from` (the global least cut separates `from` from some node, one
/// way or the other, so it is among theirs). Within a class, its first
/// node and its second (or `from` and another).
fn flow_pairs(classes: &[Vec<usize>], from: Option<usize>) -> Vec<(usize, usize)> {
    // The node of `class` to pair with `u`: its first, or another.
    let other = |class: &[usize], u: usize| class.iter().copied().find(|v| *v != u);
    let mut out = Vec::new();
    match from {
        None => {
            for a in classes {
                for b in classes {
                    if let Some(v) = other(b, a[0]) {
                        out.push((a[0], v));
                    }
                }
            }
        }
        Some(s) => {
            for class in classes {
                if let Some(t) = other(class, s) {
                    out.extend([(s, t), (t, s)]);
                }
            }
        }
    }
    out
}

/// The splits minimum cuts propose: for each pair `(u, v)`, the side of
/// a minimum `u`-to-`v` cut that holds `v`, and the rest. The graph is
/// the network's, every link at its capacity (the relay a node like any
/// other), so a cut counts every link into the side where the model's
/// intake counts each device's fastest: cuts rank sides roughly, and
/// [`cut_over`] prices each by the model. A root's cuts (a reduce's, a
/// broadcast's) are among the pairs: the root is a class of its own.
fn flow_splits(net: &Network, pairs: &[(usize, usize)]) -> Vec<Vec<bool>> {
    let k = net.nodes();
    let mut graph = FlowNet::new(net.devices.len(), |u, v| net.cap(u, v));
    let mut out: Vec<Vec<bool>> = Vec::with_capacity(2 * pairs.len());
    for (u, v) in pairs {
        let Some((_, sink_side)) = graph.min_cut(*u, *v) else {
            continue;
        };
        let side = sink_side[..k].to_vec();
        let rest: Vec<bool> = side.iter().map(|x| !x).collect();
        out.extend([side, rest]);
    }
    out.retain(|side| side.iter().any(|x| *x) && !side.iter().all(|x| *x));
    out.sort_unstable();
    out.dedup();
    out
}

/// The devices of a large group in classes of twins: two devices are
/// twins where swapping them changes neither the network (one kind, the
/// same peers besides each other) nor the demand ([`Demand::alike`]), so
/// a minimum cut between a pair of nodes stands for the cuts between
/// every pair of their classes. Each class lists its nodes in order.
fn twin_classes(net: &Network, demand: &Demand) -> Vec<Vec<usize>> {
    let peers_besides = |u: usize, v: usize| net.peer_nodes[u].iter().filter(move |w| **w != v);
    let twins = |u: usize, v: usize| {
        net.kind[u] == net.kind[v]
            && peers_besides(u, v).eq(peers_besides(v, u))
            && demand.alike(u, v)
    };
    let mut classes: Vec<Vec<usize>> = Vec::new();
    for v in 0..net.nodes() {
        match classes.iter_mut().find(|c| twins(c[0], v)) {
            Some(class) => class.push(v),
            None => classes.push(vec![v]),
        }
    }
    classes
}

/// One node of each class of a large group: nodes of one kind with as
/// many peers, the staging CPU or not, needing and holding the same bytes
/// are alike to the splits [`few_splits`] makes, so one stands for all.
fn representatives(net: &Network, demand: &Demand) -> Vec<usize> {
    let k = net.nodes();
    let mut seen: Vec<(usize, u32, bool, u64, u64)> = Vec::new();
    let mut out = Vec::new();
    for v in 0..k {
        let d = net.devices[v];
        let (held, needed) = match &demand.kind {
            Kind::Everyone(_) => (0.0, 0.0),
            Kind::ToRoot(_, r) | Kind::FromRoot(_, r) => (f64::from(u8::from(*r == v)), 0.0),
            Kind::Gather(s) | Kind::Scatter(s) => (s[v], 0.0),
            Kind::Exchange(m) => (
                (0..k).map(|w| m[v * k + w]).sum(),
                (0..k).map(|u| m[u * k + v]).sum(),
            ),
        };
        let kind = fuel_graph_ext::DeviceKind::ALL
            .iter()
            .position(|x| *x == d.kind)
            .unwrap_or(0);
        let staging = v == net.staging;
        let key = (
            kind,
            net.peers[v],
            staging,
            held.to_bits(),
            needed.to_bits(),
        );
        if !seen.contains(&key) {
            seen.push(key);
            out.push(v);
        }
    }
    out
}

/// The splits a large group gets: each device alone, all but each device
/// (one of each class, [`representatives`]), and each device kind (and the
/// rest).
fn few_splits(net: &Network, demand: &Demand) -> Vec<Vec<bool>> {
    let k = net.nodes();
    let reps = representatives(net, demand);
    let mut out = Vec::with_capacity(2 * reps.len() + 6);
    for v in reps {
        let mut one = vec![false; k];
        one[v] = true;
        out.push(one.iter().map(|x| !x).collect());
        out.push(one);
    }
    for kind in fuel_graph_ext::DeviceKind::ALL {
        let side: Vec<bool> = net.devices[..k].iter().map(|d| d.kind == kind).collect();
        if side.iter().any(|x| *x) && !side.iter().all(|x| *x) {
            out.push(side.iter().map(|x| !x).collect());
            out.push(side);
        }
    }
    out
}

/// The latency term: microseconds, and the pair of devices it is between.
/// Exact shortest paths for a group whose every split is tried; for a
/// larger one, the cheapest last hop into each device that depends on
/// another (every path ends with one).
pub(super) fn latency_term(
    net: &Network,
    c: &Collective,
    group: &[Device],
    demand: &Demand,
) -> Option<(f64, Device, Device)> {
    let n = net.devices.len();
    let at = |d: &Device| net.devices.iter().position(|x| x == d);
    let mut best: Option<(f64, Device, Device)> = None;
    let mut take = |us: f64, from: Device, to: Device| {
        if us.is_finite() && us > 0.0 && best.is_none_or(|b| us > b.0) {
            best = Some((us, from, to));
        }
    };
    if net.nodes() <= super::ENUMERATE_MAX {
        let mut dist: Vec<f64> = (0..n * n).map(|i| net.hop_us(i / n, i % n)).collect();
        for w in 0..n {
            for u in 0..n {
                for v in 0..n {
                    let via = dist[u * n + w] + dist[w * n + v];
                    if via < dist[u * n + v] {
                        dist[u * n + v] = via;
                    }
                }
            }
        }
        for (i, a) in group.iter().enumerate() {
            for (j, b) in group.iter().enumerate() {
                if let (Some(u), Some(v)) = (at(a), at(b)) {
                    if u != v && c.depends(i, j) {
                        take(dist[u * n + v], *a, *b);
                    }
                }
            }
        }
    } else {
        // One rank on a node of each class.
        for v in representatives(net, demand) {
            let b = &net.devices[v];
            let Some(j) = group.iter().position(|d| d == b) else {
                continue;
            };
            let Some(a) = group
                .iter()
                .enumerate()
                .find(|(i, a)| *a != b && c.depends(*i, j))
                .map(|(_, a)| a)
            else {
                continue;
            };
            let last = (0..n)
                .filter(|u| *u != v)
                .map(|u| net.hop_us(u, v))
                .fold(f64::INFINITY, f64::min);
            take(last, *a, *b);
        }
    }
    best
}
