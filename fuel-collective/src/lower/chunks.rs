//! Pipelined staged hops (`lower-collectives{chunks=auto|N}`): a large
//! value that crosses two links through the staging CPU travels in pieces,
//! so the second link carries piece `i` while the first carries `i+1`.
//!
//! After every collective is lowered (and after `transport=`), each relay
//! the pass made is rewritten: a copy `m` of a GPU value `a` to the staging
//! CPU whose result is copied on to another GPU (`c`). `a` is cut into `k`
//! contiguous slices along its longest axis where it lies, each slice is
//! copied to the staging CPU and from there to every GPU `m` fed, and the
//! pieces are joined by one `concat` at each end. The chains of different
//! pieces share no node, so the executor's workers run them side by side.
//! Where the staging CPU itself uses `m` (star combining there, or the
//! CPU's own result), the pieces are joined there too. Slicing, copying and
//! joining move bytes unchanged: the result is bit-identical to `k = 1`.
//!
//! **Choosing `k`** (`chunks=auto`). With `t₁(b)`, `t₂(b)` the cost
//! model's time for one copy of `b` bytes over each link (latency plus
//! bytes over bandwidth, plus the runner's step), `k` pieces of a value of
//! `M` bytes take about `t₁(M/k) + t₂(M/k) + (k-1)·max(t₁, t₂)(M/k)`, plus
//! `k` slices and one concat per end. The pass takes the `k` in `1..=64`
//! with the smallest such time; that is close to
//! `sqrt(M·β_fast/α_slow)` and is 1 for values small enough that the fixed
//! cost of another piece outweighs the overlap it buys. `chunks=N` uses
//! `N` (at most the longest axis). The note says which relays were cut and
//! into how many pieces.
//!
//! **Leaves alone** copies that are not such a relay (a direct hop, a CPU
//! to CPU copy), scalars, user copies and copies already in the graph.

use fuel_graph_ext::graph::{NodeId, ValueId};
use fuel_graph_ext::topology::Runner;
use fuel_graph_ext::{Device, Graph, Op, TensorType, Topology};
use std::collections::{BTreeMap, BTreeSet};
use std::str::FromStr;

/// The most pieces `chunks=` accepts.
pub const MAX_CHUNKS: usize = 64;

/// The value of `chunks=`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Chunks {
    /// From the cost model.
    Auto,
    /// This many pieces per relay.
    Fixed(usize),
}

impl FromStr for Chunks {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s == "auto" {
            return Ok(Chunks::Auto);
        }
        match s.parse::<usize>() {
            Ok(k) if (1..=MAX_CHUNKS).contains(&k) => Ok(Chunks::Fixed(k)),
            _ => Err(format!(
                "expected auto or a piece count from 1 to {MAX_CHUNKS}"
            )),
        }
    }
}

impl std::fmt::Display for Chunks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Chunks::Auto => f.write_str("auto"),
            Chunks::Fixed(k) => write!(f, "{k}"),
        }
    }
}

/// Microseconds `k` pieces of `bytes` take from `from` through `mid` to
/// `to` (see the module doc).
pub fn relay_us(
    topo: &Topology,
    from: Device,
    mid: Device,
    to: Device,
    bytes: usize,
    k: usize,
) -> f64 {
    let step = topo.runner(Runner::Threaded).step_us;
    let piece = bytes.div_ceil(k.max(1));
    let t1 = topo.transfer_us_at(from, mid, piece, bytes) + step;
    let t2 = topo.transfer_us_at(mid, to, piece, bytes) + step;
    let pipe = t1 + t2 + (k as f64 - 1.0) * t1.max(t2);
    if k <= 1 {
        return pipe;
    }
    let slices = k as f64 * (topo.compute(from.kind).time_us_at(1, piece, bytes) + step);
    let join = topo.compute(to.kind).time_us_at(1, bytes, bytes) + step;
    pipe + slices + join
}

/// The cheapest piece count for `bytes` on that route, at most `limit`.
pub fn best_k(
    topo: &Topology,
    from: Device,
    mid: Device,
    to: Device,
    bytes: usize,
    limit: usize,
) -> usize {
    let mut best = (1, relay_us(topo, from, mid, to, bytes, 1));
    for k in 2..=limit.min(MAX_CHUNKS) {
        let t = relay_us(topo, from, mid, to, bytes, k);
        if t < best.1 {
            best = (k, t);
        }
    }
    best.0
}

/// One relay the pass made: a value to the staging CPU (`m`), then on to
/// GPUs. The value is `m`'s operand as the graph holds it when the relay is
/// cut ([`Relay::source`]), not as it was when the relays were listed: an
/// earlier cut may have replaced it (a chain of collectives relays one
/// collective's result onward), and the id it had may since name a piece.
struct Relay {
    m: NodeId,
    /// The copies of `m` to GPUs.
    on: Vec<NodeId>,
}

/// The relays among `made`, in topological order.
fn relays(g: &Graph, topo: &Topology, made: &BTreeSet<NodeId>) -> Vec<Relay> {
    let mut out = Vec::new();
    for id in g.topo_order() {
        if !made.contains(&id) {
            continue;
        }
        let Some(n) = g.node(id) else { continue };
        let (Op::Copy { to }, Some(&a)) = (&n.op, n.operands.first()) else {
            continue;
        };
        let from = g.value_device(a);
        if *to != topo.staging || from.is_none_or(|d| d.is_cpu()) {
            continue;
        }
        let m = ValueId {
            node: id,
            result: 0,
        };
        let on: Vec<NodeId> = g
            .users(m)
            .into_iter()
            .map(|(u, _)| u)
            .filter(|u| {
                made.contains(u)
                    && g.node(*u)
                        .is_some_and(|un| matches!(un.op, Op::Copy { to } if !to.is_cpu()))
            })
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        if !on.is_empty() {
            out.push(Relay { m: id, on });
        }
    }
    out
}

impl Relay {
    /// The value `m` copies to the staging CPU, now.
    fn source(&self, g: &Graph) -> Option<ValueId> {
        g.node(self.m).and_then(|n| n.operands.first().copied())
    }
}

/// Cuts the relays among `made` into pieces; returns `(bytes, k)` for each
/// relay it cut.
pub(super) fn pipeline(
    g: &mut Graph,
    topo: &Topology,
    made: &BTreeSet<NodeId>,
    chunks: Chunks,
) -> Vec<(usize, usize)> {
    pipeline_by(g, topo, made, |_, _| chunks)
}

/// [`pipeline`] with the piece count of each relay from `chunks`, given
/// the relay's copy to the staging CPU and whether the staging CPU itself
/// uses the relayed value (then it joins the pieces too). The relays are
/// listed once, before any is cut, so a node an earlier cut adds is never
/// taken for a relay of `made`.
pub(super) fn pipeline_by(
    g: &mut Graph,
    topo: &Topology,
    made: &BTreeSet<NodeId>,
    chunks: impl Fn(NodeId, bool) -> Chunks,
) -> Vec<(usize, usize)> {
    let mut cut = Vec::new();
    for r in relays(g, topo, made) {
        let m = ValueId {
            node: r.m,
            result: 0,
        };
        let joined_at_mid =
            g.outputs().contains(&m) || g.users(m).iter().any(|(u, _)| !r.on.contains(u));
        let Some(a) = r.source(g) else { continue };
        let (Some(ty), Some(from)) = (g.value_type(a).cloned(), g.value_device(a)) else {
            continue;
        };
        let Some((axis, extent)) = ty
            .shape
            .iter()
            .copied()
            .enumerate()
            .max_by_key(|(i, e)| (*e, std::cmp::Reverse(*i)))
        else {
            continue;
        };
        let bytes = ty.size_bytes();
        let first_to = match g.node(r.on[0]).map(|n| &n.op) {
            Some(Op::Copy { to }) => *to,
            _ => continue,
        };
        let k = match chunks(r.m, joined_at_mid) {
            Chunks::Fixed(k) => k.min(extent),
            Chunks::Auto => best_k(topo, from, topo.staging, first_to, bytes, extent),
        };
        let Some(parts) = super::arrange::chunks(extent, k).filter(|p| p.len() > 1) else {
            continue;
        };
        cut_relay(g, &r, a, from, &ty, axis, &parts);
        cut.push((bytes, parts.len()));
    }
    cut
}

/// Rewrites one relay into `parts.len()` independent chains.
fn cut_relay(
    g: &mut Graph,
    r: &Relay,
    a: ValueId,
    from: Device,
    ty: &TensorType,
    axis: usize,
    parts: &[(usize, usize)],
) {
    let staging_ty = |g: &Graph, v: ValueId| g.value_type(v).cloned();
    let mid_dev = g.value_device(ValueId {
        node: r.m,
        result: 0,
    });
    let Some(mid) = mid_dev else { return };
    let mut mids = Vec::with_capacity(parts.len());
    for (start, len) in parts {
        let piece_ty = ty.with_dim(axis, *len);
        let s = g.add_value(
            Op::Slice {
                axis,
                start: *start,
                len: *len,
                device: from,
            },
            &[a],
            piece_ty.clone(),
        );
        mids.push(g.add_value(Op::Copy { to: mid }, &[s], piece_ty));
    }
    let m = ValueId {
        node: r.m,
        result: 0,
    };
    let mut joined: BTreeMap<Device, ValueId> = BTreeMap::new();
    for c in &r.on {
        let Some(Op::Copy { to }) = g.node(*c).map(|n| n.op.clone()) else {
            continue;
        };
        let Some(cty) = staging_ty(
            g,
            ValueId {
                node: *c,
                result: 0,
            },
        ) else {
            continue;
        };
        let old = ValueId {
            node: *c,
            result: 0,
        };
        if let Some(j) = joined.get(&to).copied() {
            g.replace_all_uses(old, j);
            g.remove_node(*c);
            continue;
        }
        let pieces: Vec<ValueId> = mids
            .iter()
            .map(|p| {
                let pty = g.value_type(*p).cloned().unwrap_or_else(|| cty.clone());
                g.add_value(Op::Copy { to }, &[*p], pty)
            })
            .collect();
        let j = g.add_value(Op::Concat { axis, device: to }, &pieces, cty);
        joined.insert(to, j);
        g.replace_all_uses(old, j);
        g.remove_node(*c);
    }
    if g.users(m).is_empty() && !g.outputs().contains(&m) {
        g.remove_node(r.m);
    } else {
        let j = g.add_value(Op::Concat { axis, device: mid }, &mids, ty.clone());
        g.replace_all_uses(m, j);
        g.remove_node(r.m);
    }
}

/// The note the pass adds when `chunks=` is set.
pub(super) fn note(chunks: Chunks, cut: &[(usize, usize)]) -> String {
    let mut s = format!(
        "{}: chunks={chunks}: {} staged relay{} cut into pieces",
        super::NAME,
        cut.len(),
        if cut.len() == 1 { "" } else { "s" }
    );
    if cut.is_empty() {
        s.push_str(match chunks {
            Chunks::Auto => " (no value relayed through the staging CPU between two GPUs is large enough for pieces to pay by the cost model, or there is none)",
            Chunks::Fixed(_) => " (no value is relayed through the staging CPU between two GPUs)",
        });
    } else {
        let list: Vec<String> = cut
            .iter()
            .map(|(b, k)| format!("{b} bytes in {k}"))
            .collect();
        s.push_str(&format!(" ({}), each piece its own slice/copy/copy chain joined by concat at each end; bit-identical to one piece", list.join(", ")));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_values_parse_and_print() {
        for s in ["auto", "1", "4", "64"] {
            let c: Chunks = s.parse().unwrap();
            assert_eq!(c.to_string(), s);
        }
        for s in ["0", "65", "many", "-1"] {
            assert!(s.parse::<Chunks>().is_err(), "{s}");
        }
    }

    #[test]
    fn small_values_stay_whole_and_large_ones_are_cut() {
        // cuda:0 -> cuda:1 without peer access is staged through cpu:0;
        // both links cost the same, so pieces nearly halve a large relay.
        let topo = Topology::default();
        let (c0, c1, cpu) = (Device::cuda(0), Device::cuda(1), Device::cpu(0));
        assert_eq!(best_k(&topo, c0, cpu, c1, 256, 64), 1);
        let m = 64 << 20;
        let big = best_k(&topo, c0, cpu, c1, m, 1 << 24);
        assert!((2..=MAX_CHUNKS).contains(&big), "64 MiB: {big}");
        assert!(relay_us(&topo, c0, cpu, c1, m, big) < 0.7 * relay_us(&topo, c0, cpu, c1, m, 1));
        // lavapipe's slices and joins are compute at a fraction of the
        // link's speed: the model keeps a Vulkan relay whole.
        let (v0, v1) = (Device::vulkan(0), Device::vulkan(1));
        assert_eq!(best_k(&topo, v0, cpu, v1, m, 1 << 24), 1);
    }
}
