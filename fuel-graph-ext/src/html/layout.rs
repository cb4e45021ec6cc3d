//! A layered layout of one graph, in Rust, so the viewer needs no graphviz.
//!
//! Each device is a vertical band (a column of the picture, like a DOT
//! cluster), unplaced nodes (collectives not yet lowered) get a band of
//! their own at the right, and each node sits in the row of its longest
//! path from an input. Within one band and row, nodes are ordered by the
//! mean position of their operands (one barycentre sweep, top down), then
//! by their `%` number, so crossings stay few and the result depends on the
//! graph alone. Linear in the graph's size apart from the sorts, which keeps
//! 10k-node graphs quick; edges are drawn straight or as one curve, never
//! routed.

use crate::graph::{Graph, NodeId};
use crate::Device;
use std::collections::BTreeMap;

/// Width of a node box, in pixels.
pub const NODE_W: f64 = 170.0;
/// Height of a node box.
pub const NODE_H: f64 = 34.0;
/// Gap between boxes in a row.
const GAP_X: f64 = 14.0;
/// Gap between rows.
const GAP_Y: f64 = 30.0;
/// Padding inside a band, and above the first row (for the band's title).
const PAD: f64 = 12.0;
const TITLE: f64 = 22.0;

/// One band: a device, or `None` for nodes with no single device.
#[derive(Clone, Debug, PartialEq)]
pub struct Band {
    /// The device, if any.
    pub device: Option<Device>,
    /// Left edge and width.
    pub x: f64,
    /// Width.
    pub w: f64,
    /// How many nodes it holds.
    pub count: usize,
}

/// A node's place: the top-left corner of its box and its band.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Placed {
    /// The node.
    pub id: NodeId,
    /// Left.
    pub x: f64,
    /// Top.
    pub y: f64,
    /// Index into [`Layout::bands`].
    pub band: usize,
}

/// A laid-out graph.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Layout {
    /// The nodes, in topological order.
    pub nodes: Vec<Placed>,
    /// (operand's index, user's index) into `nodes`, once per operand slot
    /// that reads another node (repeats kept: `add %1, %1` is two edges).
    pub edges: Vec<(usize, usize)>,
    /// The bands, left to right.
    pub bands: Vec<Band>,
    /// The picture's size.
    pub width: f64,
    /// The picture's height.
    pub height: f64,
}

/// Lays out `g` in topological order `order`.
pub fn layout(g: &Graph, order: &[NodeId]) -> Layout {
    let index: BTreeMap<NodeId, usize> = order.iter().enumerate().map(|(i, id)| (*id, i)).collect();
    let mut row = vec![0usize; order.len()];
    let mut edges = Vec::new();
    for (i, id) in order.iter().enumerate() {
        let Some(n) = g.node(*id) else { continue };
        for v in &n.operands {
            if let Some(&j) = index.get(&v.node) {
                edges.push((j, i));
                row[i] = row[i].max(row[j] + 1);
            }
        }
    }
    // Bands: devices in their order, then the unplaced.
    let mut band_of_device: BTreeMap<Option<Device>, usize> = BTreeMap::new();
    for id in order {
        let d = g.node(*id).and_then(|n| n.op.device());
        band_of_device.entry(d).or_insert(0);
    }
    let mut keys: Vec<Option<Device>> = band_of_device.keys().copied().collect();
    keys.sort_by_key(|d| (d.is_none(), *d));
    for (k, d) in keys.iter().enumerate() {
        band_of_device.insert(*d, k);
    }
    let band: Vec<usize> = order
        .iter()
        .map(|id| {
            let d = g.node(*id).and_then(|n| n.op.device());
            band_of_device.get(&d).copied().unwrap_or(0)
        })
        .collect();
    // Slots within (band, row), one barycentre sweep top down.
    let mut operands: Vec<Vec<usize>> = vec![Vec::new(); order.len()];
    for &(j, i) in &edges {
        operands[i].push(j);
    }
    let rows = row.iter().max().map_or(0, |r| r + 1);
    let mut by_row: Vec<Vec<usize>> = vec![Vec::new(); rows];
    for (i, r) in row.iter().enumerate() {
        by_row[*r].push(i);
    }
    let mut slot = vec![0.0f64; order.len()];
    let mut widest = vec![0usize; keys.len()];
    for members in &by_row {
        let mut cells: BTreeMap<usize, Vec<(f64, usize)>> = BTreeMap::new();
        for &i in members {
            let ops = &operands[i];
            let bary = if ops.is_empty() {
                i as f64
            } else {
                ops.iter().map(|&j| slot[j]).sum::<f64>() / ops.len() as f64
            };
            cells.entry(band[i]).or_default().push((bary, i));
        }
        for (b, mut cell) in cells {
            cell.sort_by(|a, c| a.0.total_cmp(&c.0).then(a.1.cmp(&c.1)));
            for (k, (_, i)) in cell.iter().enumerate() {
                slot[*i] = k as f64;
            }
            if let Some(w) = widest.get_mut(b) {
                *w = (*w).max(cell.len());
            }
        }
    }
    let mut bands = Vec::with_capacity(keys.len());
    let mut x = PAD;
    for (k, d) in keys.iter().enumerate() {
        let n = widest.get(k).copied().unwrap_or(1).max(1) as f64;
        let w = n * NODE_W + (n - 1.0) * GAP_X + 2.0 * PAD;
        bands.push(Band {
            device: *d,
            x,
            w,
            count: band.iter().filter(|b| **b == k).count(),
        });
        x += w + PAD;
    }
    let nodes = order
        .iter()
        .enumerate()
        .map(|(i, id)| {
            let bx = bands.get(band[i]).map_or(0.0, |b| b.x);
            Placed {
                id: *id,
                x: bx + PAD + slot[i] * (NODE_W + GAP_X),
                y: TITLE + PAD + row[i] as f64 * (NODE_H + GAP_Y),
                band: band[i],
            }
        })
        .collect();
    Layout {
        nodes,
        edges,
        bands,
        width: x,
        height: TITLE + 2.0 * PAD + rows as f64 * (NODE_H + GAP_Y),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text;

    #[test]
    fn rows_follow_paths_and_bands_follow_devices() {
        let g = text::parse(
            "graph @g {\n  %0 = input \"a\" @cpu:0 : f32[4]\n  %1 = input \"b\" @cpu:1 : f32[4]\n  %2 = copy %1 -> cpu:0 : f32[4]\n  %3 = add %0, %2 @cpu:0 : f32[4]\n  return %3\n}\n",
        )
        .unwrap();
        let order = g.topo_order();
        let l = layout(&g, &order);
        assert_eq!(l.bands.len(), 2);
        assert_eq!(l.nodes.len(), 4);
        assert_eq!(l.edges.len(), 3);
        let last = l.nodes.last().unwrap();
        assert!(last.y > l.nodes[0].y, "the add is below its operands");
        assert_eq!(layout(&g, &order), l, "deterministic");
        assert!(l.width > 2.0 * NODE_W && l.height > 3.0 * NODE_H);
    }
}
