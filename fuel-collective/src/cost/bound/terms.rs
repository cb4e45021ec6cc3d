//! The cut and latency terms of [`super::bound`]: what each split of the
//! group must take in, over what it can, tried over every split (or the
//! few a large group gets), and the cheapest paths' fixed costs.

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
    fn need(&self, inside: &[bool]) -> f64 {
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

/// The tightest cut: microseconds, the receiving side's devices, its
/// bytes and GB/s; `None` where no split needs bytes.
pub(super) type Cut = (f64, Vec<Device>, f64, f64);

/// The cut term over the splits `splits` says.
pub(super) fn cut_term(
    net: &Network,
    demand: &Demand,
    splits: Splits,
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
    match splits {
        Splits::Every => {
            for mask in 1u32..(1u32 << k) - 1 {
                for (v, x) in inside.iter_mut().enumerate().take(k) {
                    *x = mask & (1 << v) != 0;
                }
                try_side(&mut inside)?;
            }
        }
        Splits::Few => {
            for side in few_splits(net) {
                inside[..k].copy_from_slice(&side);
                try_side(&mut inside)?;
            }
        }
    }
    Ok(best)
}

/// The splits a large group gets: each device alone, all but each device,
/// and each device kind (and the rest).
fn few_splits(net: &Network) -> Vec<Vec<bool>> {
    let k = net.nodes();
    let mut out = Vec::with_capacity(2 * k + 6);
    for v in 0..k {
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
        let mut dist = net.hop_us.clone();
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
        for (j, b) in group.iter().enumerate() {
            let Some(v) = at(b) else { continue };
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
                .map(|u| net.hop_us[u * n + v])
                .fold(f64::INFINITY, f64::min);
            take(last, *a, *b);
        }
    }
    best
}
