//! The shape of a lowering: islands, ring order, chunking and tree shape.
//!
//! Nothing here touches a graph; the `lower-collectives` pass asks these
//! functions which devices to group, in which order to visit ranks and how
//! to cut a tensor, and then does the graph surgery itself. Each helper is
//! deterministic: equal inputs give equal plans, with ties broken by rank.
//!
//! **Islands.** An island is a set of devices of one kind in which every
//! ordered pair has a direct copy path per the [`Topology`]. Islands are
//! built greedily in rank order: a device joins the first island it has
//! direct paths to and from with every member, or starts its own. With the
//! default topology every CPU lands in one island (host arenas copy directly,
//! and the CPUs are the hub the other islands stage through), CUDA devices
//! with declared peer access share an island, and every other GPU is an
//! island of one, since GPU-to-GPU copies without peer access go through the
//! staging CPU.

use fuel_graph_ext::{Device, Topology};

/// Unique devices of `devices`, in first-seen order.
pub fn unique(devices: &[Device]) -> Vec<Device> {
    let mut out: Vec<Device> = Vec::with_capacity(devices.len());
    for d in devices {
        if !out.contains(d) {
            out.push(*d);
        }
    }
    out
}

/// Splits the unique devices of `devices` into islands (see the module doc).
/// Islands are ordered by their first member's position in `devices`, and so
/// are the members of each island.
pub fn islands(devices: &[Device], topo: &Topology) -> Vec<Vec<Device>> {
    let mut out: Vec<Vec<Device>> = Vec::new();
    for d in unique(devices) {
        let home = out.iter_mut().find(|island| {
            island
                .iter()
                .all(|m| m.kind == d.kind && topo.is_direct(*m, d) && topo.is_direct(d, *m))
        });
        match home {
            Some(island) => island.push(d),
            None => out.push(vec![d]),
        }
    }
    out
}

/// Ranks sorted by (device kind, device index, rank): the visiting order of
/// rings and trees, so that devices of one vendor sit next to each other and
/// most neighbouring hops are direct.
pub fn vendor_order(devices: &[Device]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..devices.len()).collect();
    order.sort_by_key(|r| (devices.get(*r).copied(), *r));
    order
}

/// `n` contiguous chunks `(start, len)` covering `extent`; the first
/// `extent % n` chunks are one longer (10 over 3 gives 4, 3, 3). `None` if a
/// chunk would be empty or `n` is zero.
pub fn chunks(extent: usize, n: usize) -> Option<Vec<(usize, usize)>> {
    if n == 0 || extent < n {
        return None;
    }
    let (base, extra) = (extent / n, extent % n);
    let mut start = 0;
    Some(
        (0..n)
            .map(|c| {
                let len = base + usize::from(c < extra);
                let chunk = (start, len);
                start += len;
                chunk
            })
            .collect(),
    )
}

/// The axis a ring cuts: the longest one with at least `n` entries, the
/// lowest such axis on ties. `None` for scalars or when every axis is
/// shorter than `n`.
pub fn ring_axis(shape: &[usize], n: usize) -> Option<usize> {
    let mut best: Option<(usize, usize)> = None;
    for (axis, &extent) in shape.iter().enumerate() {
        if extent >= n && best.is_none_or(|(_, e)| extent > e) {
            best = Some((axis, extent));
        }
    }
    best.map(|(axis, _)| axis)
}

/// The parent position of position `pos` in a `arity`-ary tree laid out
/// breadth first (position 0 is the root).
pub fn tree_parent(pos: usize, arity: usize) -> Option<usize> {
    if pos == 0 {
        None
    } else {
        Some((pos - 1) / arity.max(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn islands_table() {
        let (h0, h1) = (Device::cpu(0), Device::cpu(1));
        let (c0, c1, c2) = (Device::cuda(0), Device::cuda(1), Device::cuda(2));
        let (v0, v1) = (Device::vulkan(0), Device::vulkan(1));
        let plain = Topology::default();
        let peers = Topology::default().with_peer(0, 1);
        type Row<'a> = (&'a Topology, Vec<Device>, Vec<Vec<Device>>);
        let table: [Row; 4] = [
            (&plain, vec![h0], vec![vec![h0]]),
            (&plain, vec![c0, h1, h0, h1], vec![vec![c0], vec![h1, h0]]),
            (
                &plain,
                vec![c0, c1, v0, v1],
                vec![vec![c0], vec![c1], vec![v0], vec![v1]],
            ),
            (
                &peers,
                vec![c2, c0, v0, c1, h0],
                vec![vec![c2], vec![c0, c1], vec![v0], vec![h0]],
            ),
        ];
        for (topo, devs, want) in table {
            assert_eq!(islands(&devs, topo), want, "{devs:?}");
        }
    }

    #[test]
    fn chunking_and_axes() {
        assert_eq!(chunks(10, 3), Some(vec![(0, 4), (4, 3), (7, 3)]));
        assert_eq!(chunks(8, 4), Some(vec![(0, 2), (2, 2), (4, 2), (6, 2)]));
        assert_eq!(chunks(2, 3), None);
        assert_eq!(chunks(5, 0), None);
        assert_eq!(ring_axis(&[6, 4], 3), Some(0));
        assert_eq!(ring_axis(&[2, 4], 3), Some(1));
        assert_eq!(ring_axis(&[4, 4], 2), Some(0));
        assert_eq!(ring_axis(&[2, 2], 3), None);
        assert_eq!(ring_axis(&[], 1), None);
        assert_eq!(tree_parent(0, 2), None);
        assert_eq!(
            (1..7).map(|p| tree_parent(p, 2)).collect::<Vec<_>>(),
            [0, 0, 1, 1, 2, 2].map(Some).to_vec()
        );
        assert_eq!(tree_parent(3, 3), Some(0));
        assert_eq!(
            vendor_order(&[
                Device::vulkan(0),
                Device::cpu(1),
                Device::cuda(0),
                Device::cpu(0)
            ]),
            vec![3, 1, 2, 0]
        );
    }
}
