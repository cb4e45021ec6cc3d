//! A maximum flow and its minimum cut on a small directed graph with real
//! capacities (Dinic's algorithm: shortest augmenting paths, a level
//! graph per phase), for the cut term of a large group in
//! [`super::bound`]: between a pair of nodes, the split that takes in
//! least across its border, every link into the sink's side counted at
//! its capacity. Pure: nodes are indices, capacities numbers. A capacity
//! may be infinite (the cost model's links that move nothing, between
//! host arenas); a pair joined by a path of such links has no finite cut
//! and gets none. The graph is built once and cut between many pairs.

/// A directed graph of `n` nodes with a capacity on each ordered pair,
/// cut between one pair of nodes at a time.
pub(super) struct FlowNet {
    /// Where each node's arcs start in `arcs` (`n + 1` entries).
    start: Vec<usize>,
    /// Arc indices, grouped by their tail.
    arcs: Vec<usize>,
    /// Each arc's head. Arcs come in pairs `2i` and `2i + 1`, one each
    /// way between two nodes, each the other's reverse (`a ^ 1`).
    head: Vec<usize>,
    /// Each arc's capacity.
    cap: Vec<f64>,
    /// Each arc's capacity left over by the current flow.
    left: Vec<f64>,
    /// Each node's distance from the source over arcs with capacity left
    /// (`u32::MAX`: not reached).
    level: Vec<u32>,
    /// Each node's first arc (position in `arcs`) not yet found blocked
    /// in the current phase.
    next: Vec<usize>,
    /// The breadth-first search's queue.
    queue: Vec<usize>,
    /// Capacity left at or under this counts as none: sums of real
    /// capacities round, and a flow must not chase what rounding leaves.
    eps: f64,
}

impl FlowNet {
    /// The graph of `n` nodes whose arc from `u` to `v` has capacity
    /// `cap(u, v)`; a capacity that is not above zero (or not a number)
    /// is no arc.
    pub(super) fn new(n: usize, cap: impl Fn(usize, usize) -> f64) -> FlowNet {
        let positive = |c: f64| if c > 0.0 { c } else { 0.0 };
        let mut ends: Vec<(usize, usize)> = Vec::new();
        let mut caps: Vec<f64> = Vec::new();
        for u in 0..n {
            for v in u + 1..n {
                let (there, back) = (positive(cap(u, v)), positive(cap(v, u)));
                if there > 0.0 || back > 0.0 {
                    ends.extend([(u, v), (v, u)]);
                    caps.extend([there, back]);
                }
            }
        }
        let mut start = vec![0; n + 1];
        for (u, _) in &ends {
            start[u + 1] += 1;
        }
        for u in 0..n {
            start[u + 1] += start[u];
        }
        let mut fill = start.clone();
        let mut arcs = vec![0; ends.len()];
        for (a, (u, _)) in ends.iter().enumerate() {
            arcs[fill[*u]] = a;
            fill[*u] += 1;
        }
        let largest = caps
            .iter()
            .copied()
            .filter(|c| c.is_finite())
            .fold(0.0, f64::max);
        FlowNet {
            start,
            arcs,
            head: ends.iter().map(|e| e.1).collect(),
            left: caps.clone(),
            cap: caps,
            level: vec![u32::MAX; n],
            next: vec![0; n],
            queue: Vec::with_capacity(n),
            eps: (largest * 1e-12).max(f64::MIN_POSITIVE),
        }
    }

    /// A minimum cut between `source` and `sink`: the flow's value, and
    /// the side the source cannot reach through capacity left over by a
    /// maximum flow (the sink's side, by node). `None` where the two are
    /// one node or a path of infinite capacities joins them.
    pub(super) fn min_cut(&mut self, source: usize, sink: usize) -> Option<(f64, Vec<bool>)> {
        let n = self.level.len();
        if source == sink || source >= n || sink >= n {
            return None;
        }
        self.left.clone_from(&self.cap);
        if self.reach(source, f64::INFINITY)[sink] != u32::MAX {
            return None;
        }
        let mut value = 0.0;
        // Each phase lengthens the shortest path left, so there are fewer
        // than `n` of them; the cap only guards against rounding.
        for _ in 0..=n {
            if self.reach(source, self.eps)[sink] == u32::MAX {
                break;
            }
            for u in 0..n {
                self.next[u] = self.start[u];
            }
            loop {
                let pushed = self.push(source, sink, f64::INFINITY);
                if pushed <= 0.0 {
                    break;
                }
                value += pushed;
            }
        }
        let level = self.reach(source, self.eps);
        Some((value, level.iter().map(|l| *l == u32::MAX).collect()))
    }

    /// Levels from `source` over arcs with more than `over` left (an
    /// infinite `over`: over infinite arcs only).
    fn reach(&mut self, source: usize, over: f64) -> &[u32] {
        self.level.fill(u32::MAX);
        self.level[source] = 0;
        self.queue.clear();
        self.queue.push(source);
        let mut i = 0;
        while let Some(&u) = self.queue.get(i) {
            i += 1;
            for &a in &self.arcs[self.start[u]..self.start[u + 1]] {
                let v = self.head[a];
                let open = if over.is_infinite() {
                    self.left[a].is_infinite()
                } else {
                    self.left[a] > over
                };
                if open && self.level[v] == u32::MAX {
                    self.level[v] = self.level[u] + 1;
                    self.queue.push(v);
                }
            }
        }
        &self.level
    }

    /// One augmenting path from `u` to `sink` along the level graph,
    /// carrying at most `limit`: what it carried (0 where none is left).
    /// Every path has a finite arc (`min_cut` checked), so what it
    /// carries is finite.
    fn push(&mut self, u: usize, sink: usize, limit: f64) -> f64 {
        if u == sink {
            return limit;
        }
        while self.next[u] < self.start[u + 1] {
            let a = self.arcs[self.next[u]];
            let v = self.head[a];
            if self.left[a] > self.eps && self.level[v] == self.level[u].saturating_add(1) {
                let carried = self.push(v, sink, limit.min(self.left[a]));
                if carried > 0.0 {
                    self.left[a] -= carried;
                    self.left[a ^ 1] += carried;
                    return carried;
                }
            }
            self.next[u] += 1;
        }
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::FlowNet;

    /// The textbook network of six nodes (CLRS): a maximum flow of 23.
    fn textbook() -> FlowNet {
        let arcs = [
            (0, 1, 16.0),
            (0, 2, 13.0),
            (1, 2, 10.0),
            (1, 3, 12.0),
            (2, 1, 4.0),
            (2, 4, 14.0),
            (3, 2, 9.0),
            (3, 5, 20.0),
            (4, 3, 7.0),
            (4, 5, 4.0),
        ];
        FlowNet::new(6, |u, v| {
            arcs.iter()
                .find(|a| a.0 == u && a.1 == v)
                .map_or(0.0, |a| a.2)
        })
    }

    #[test]
    fn the_textbook_flow_and_its_cut() {
        let mut g = textbook();
        let (value, sink_side) = g.min_cut(0, 5).unwrap();
        assert!((value - 23.0).abs() < 1e-9, "{value}");
        // The cut {0, 1, 2, 4} | {3, 5}: 12 + 7 + 4 = 23.
        assert_eq!(sink_side, [false, false, false, true, false, true]);
        // The graph is reused: another pair, then the first again.
        let (back, _) = g.min_cut(5, 0).unwrap();
        assert_eq!(back, 0.0);
        assert!((g.min_cut(0, 5).unwrap().0 - 23.0).abs() < 1e-9);
    }

    #[test]
    fn infinite_capacities_stay_infinite() {
        // 0 -inf-> 1 -3-> 2 -inf-> 3, and 0 -inf-> 2 -inf-> 3 joined.
        let cut = |cap: fn(usize, usize) -> f64, s, t| FlowNet::new(4, cap).min_cut(s, t);
        let chain = |u, v| match (u, v) {
            (0, 1) | (2, 3) => f64::INFINITY,
            (1, 2) => 3.0,
            _ => 0.0,
        };
        let (value, side) = cut(chain, 0, 3).unwrap();
        assert_eq!(value, 3.0);
        assert_eq!(side, [false, false, true, true]);
        let joined = |u, v| match (u, v) {
            (0, 2) | (2, 3) => f64::INFINITY,
            _ => 0.0,
        };
        assert_eq!(cut(joined, 0, 3), None);
        // No path at all: a cut of nothing.
        let (value, side) = cut(|_, _| 0.0, 0, 3).unwrap();
        assert_eq!(value, 0.0);
        assert_eq!(side, [false, true, true, true]);
        assert_eq!(cut(chain, 1, 1), None);
    }
}
