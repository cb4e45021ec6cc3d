//! The bucketing plan of `combine-collectives`, with no graph in sight.
//!
//! A collective costs a fixed part (its steps' latencies and fixed costs,
//! paid however small it is) plus a part per byte. Merging an item into a
//! bucket saves the item's fixed part, and costs it a share of the bucket's
//! `concat` and one `slice` per rank ([`Model`]). An item joins a bucket only
//! when that pays, when the bucket stays within the threshold (bytes per
//! rank), and when the caller's independence check agrees: merging two
//! collectives with a path between them would make a cycle. [`buckets`]
//! places items first fit, in the order given (topological order), so the
//! plan is deterministic.
//!
//! The default threshold is where the fixed part falls to a sixteenth of a
//! bucket's time ([`Model::default_threshold`]): past it, a bigger bucket
//! saves at most a few percent more, while its memory grows with it (a
//! bucket holds its joined operands and its result at once: twice its bytes
//! per rank on every rank).

/// A cost line: `fixed_us + per_byte_us * bytes`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Line {
    /// Microseconds paid at any size.
    pub fixed_us: f64,
    /// Microseconds per byte.
    pub per_byte_us: f64,
}

impl Line {
    /// The line through two measured points `(bytes, us)`; a negative slope
    /// or intercept (rounding in the model) is clamped to zero.
    pub fn through(a: (usize, f64), b: (usize, f64)) -> Line {
        let dx = b.0 as f64 - a.0 as f64;
        let per_byte_us = if dx > 0.0 {
            ((b.1 - a.1) / dx).max(0.0)
        } else {
            0.0
        };
        Line {
            fixed_us: (a.1 - per_byte_us * a.0 as f64).max(0.0),
            per_byte_us,
        }
    }

    /// Microseconds at `bytes`.
    pub fn at(&self, bytes: usize) -> f64 {
        self.fixed_us + self.per_byte_us * bytes as f64
    }
}

/// One collective's estimate by bytes per rank: straight lines between
/// estimates at a few sizes, in increasing order of size, extended past
/// both ends. One line through the smallest and the largest would not do:
/// the runner can change between them (on lavapipe a collective of a page
/// or more per rank runs inline, a smaller one pays its workers'
/// hand-offs), so the cost per size has a step in it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Points(pub [(usize, f64); 4]);

impl Points {
    /// The same cost at every size's line: `line`'s value at each point.
    #[cfg(test)]
    pub fn on(line: Line, sizes: [usize; 4]) -> Points {
        Points(sizes.map(|b| (b, line.at(b))))
    }

    /// The segment for `bytes`: the first one below the second point, the
    /// last one above the third, else the one it falls in.
    fn segment(&self, bytes: usize) -> Line {
        let p = &self.0;
        let i = p[1..p.len() - 1]
            .iter()
            .take_while(|(b, _)| *b <= bytes)
            .count();
        let (a, b) = (p[i], p[i + 1]);
        let dx = b.0 as f64 - a.0 as f64;
        let per_byte_us = if dx > 0.0 { (b.1 - a.1) / dx } else { 0.0 };
        Line {
            fixed_us: a.1 - per_byte_us * a.0 as f64,
            per_byte_us,
        }
    }

    /// Microseconds at `bytes` (never negative).
    pub fn at(&self, bytes: usize) -> f64 {
        self.segment(bytes).at(bytes).max(0.0)
    }

    /// The large sizes' line: the last segment, with a negative slope or
    /// intercept clamped to zero.
    pub fn large(&self) -> Line {
        let n = self.0.len();
        Line::through(self.0[n - 2], self.0[n - 1])
    }

    /// What merging `bytes` into a large bucket saves of a collective of
    /// its own: all of it but what its bytes add to the bucket at the
    /// large sizes' cost per byte.
    pub fn fixed_at(&self, bytes: usize) -> f64 {
        (self.at(bytes) - self.large().per_byte_us * bytes as f64).max(0.0)
    }
}

/// What merging costs and saves for one kind of collective (one group, op
/// and dtype).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Model {
    /// One collective alone, by bytes per rank.
    pub collective: Points,
    /// What one merged item adds: its share of the `concat` on every rank
    /// and its `slice` on every rank, by its bytes per rank.
    pub per_item: Line,
    /// What a merged item whose results are graph outputs adds on top: on
    /// every host rank its slice is a view of the merged result, which the
    /// runner copies out into the caller's tensor, where the all-reduce
    /// alone writes that tensor in place.
    pub read_back: Line,
    /// What a bucket pays once, whatever it holds: its `concat`'s fixed
    /// cost on the slowest rank (on a GPU rank under the threaded runner a
    /// worker's hand-off and a submission).
    pub bucket_us: f64,
}

/// Sixteen times the fixed cost, less one: a bucket of
/// `FIXED_SHARE * fixed / per_byte` bytes spends 1/16 of its time on the
/// fixed part.
const FIXED_SHARE: f64 = 15.0;

/// The largest default threshold, bytes per rank (the memory bound: a
/// bucket needs twice this on each rank while it runs).
pub const MAX_DEFAULT_THRESHOLD: usize = 64 << 20;

impl Model {
    /// What merging an item of `bytes` per rank adds (`output`: its
    /// results are graph outputs).
    pub fn item_us(&self, bytes: usize, output: bool) -> f64 {
        let back = if output {
            self.read_back.at(bytes)
        } else {
            0.0
        };
        self.per_item.at(bytes) + back
    }

    /// True when merging an item of `bytes` per rank saves more than it
    /// costs: the collective's fixed part at its size exceeds the item's
    /// copies.
    pub fn worth(&self, bytes: usize, output: bool) -> bool {
        self.collective.fixed_at(bytes) > self.item_us(bytes, output)
    }

    /// The default threshold, bytes per rank: the bucket size where the
    /// smallest collective's fixed part is 1/16 of the collective's time
    /// at the large sizes' cost per byte, at most
    /// [`MAX_DEFAULT_THRESHOLD`] (and that when the model has no cost per
    /// byte).
    pub fn default_threshold(&self) -> usize {
        let c = self.collective.large();
        if c.per_byte_us <= 0.0 {
            return MAX_DEFAULT_THRESHOLD;
        }
        let fixed = self.collective.fixed_at(self.collective.0[0].0);
        let t = FIXED_SHARE * fixed / c.per_byte_us;
        if t >= MAX_DEFAULT_THRESHOLD as f64 {
            MAX_DEFAULT_THRESHOLD
        } else {
            t.max(0.0) as usize
        }
    }

    /// Microseconds saved by merging items of these sizes (and whether
    /// each one's results are graph outputs) into one collective
    /// (negative: a loss).
    pub fn saving_us(&self, items: &[(usize, bool)]) -> f64 {
        let apart: f64 = items.iter().map(|(b, _)| self.collective.at(*b)).sum();
        let total: usize = items.iter().map(|(b, _)| b).sum();
        let copies: f64 = items.iter().map(|&(b, out)| self.item_us(b, out)).sum();
        apart - (self.collective.at(total) + copies + self.bucket_us)
    }
}

/// One collective the plan may merge.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Item<K> {
    /// What must match for two items to merge (kind, group, op, dtype,
    /// shape outside the joined axis).
    pub key: K,
    /// Bytes per rank.
    pub bytes: usize,
}

/// Why an item was left alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Alone {
    /// Larger than the threshold.
    TooLarge,
    /// Its copies would cost more than the fixed part it saves.
    NotWorth,
    /// Every bucket it fits in depends on it or it on them, and nothing
    /// else could join it.
    NoPartner,
}

/// The plan: buckets of two or more items (indices into the items, in
/// order), and the items left alone with why.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// Buckets to merge, each of two or more items.
    pub buckets: Vec<Vec<usize>>,
    /// Items left as they are.
    pub alone: Vec<(usize, Alone)>,
}

impl Plan {
    /// Keeps the buckets `pays` accepts; the others' items are left alone
    /// as [`Alone::NotWorth`].
    pub fn keep_if(mut self, mut pays: impl FnMut(&[usize]) -> bool) -> Plan {
        let (keep, drop): (Vec<_>, Vec<_>) = self.buckets.into_iter().partition(|b| pays(b));
        self.buckets = keep;
        self.alone
            .extend(drop.into_iter().flatten().map(|i| (i, Alone::NotWorth)));
        self.alone.sort_unstable();
        self
    }
}

/// Places `items` into buckets, first fit in the order given.
///
/// `worth(i)` says whether item `i` pays for merging at all (see
/// [`Model::worth`]). `independent(buckets, b, i)` says whether item `i`
/// may join bucket `b` given every bucket planned so far (the caller checks
/// that no path joins them once every bucket is seen as one node). A
/// bucket never exceeds `threshold(key)` bytes.
pub fn buckets<K: Eq>(
    items: &[Item<K>],
    threshold: impl Fn(&K) -> usize,
    mut worth: impl FnMut(usize) -> bool,
    mut independent: impl FnMut(&[Vec<usize>], usize, usize) -> bool,
) -> Plan {
    let mut open: Vec<Vec<usize>> = Vec::new();
    let mut sums: Vec<usize> = Vec::new();
    let mut alone = Vec::new();
    for (i, it) in items.iter().enumerate() {
        let threshold = threshold(&it.key);
        if it.bytes > threshold {
            alone.push((i, Alone::TooLarge));
            continue;
        }
        if !worth(i) {
            alone.push((i, Alone::NotWorth));
            continue;
        }
        let fit = (0..open.len()).find(|&b| {
            items[open[b][0]].key == it.key
                && sums[b] + it.bytes <= threshold
                && independent(&open, b, i)
        });
        match fit {
            Some(b) => {
                open[b].push(i);
                sums[b] += it.bytes;
            }
            None => {
                open.push(vec![i]);
                sums.push(it.bytes);
            }
        }
    }
    let mut plan = Plan::default();
    for b in open {
        if b.len() >= 2 {
            plan.buckets.push(b);
        } else {
            alone.push((b[0], Alone::NoPartner));
        }
    }
    alone.sort_unstable();
    plan.alone = alone;
    plan
}

#[cfg(test)]
mod tests {
    use super::*;

    fn items(sizes: &[usize]) -> Vec<Item<u8>> {
        sizes.iter().map(|&bytes| Item { key: 0, bytes }).collect()
    }

    #[test]
    fn buckets_stay_within_the_threshold_and_keep_order() {
        let p = buckets(
            &items(&[40, 40, 40, 10, 100]),
            |_| 100,
            |_| true,
            |_, _, _| true,
        );
        assert_eq!(p.buckets, vec![vec![0, 1, 3]]);
        assert_eq!(p.alone, vec![(2, Alone::NoPartner), (4, Alone::NoPartner)]);
    }

    #[test]
    fn larger_than_threshold_and_unprofitable_items_stay_alone() {
        let p = buckets(
            &items(&[10, 500, 10, 10]),
            |_| 100,
            |i| i != 3,
            |_, _, _| true,
        );
        assert_eq!(p.buckets, vec![vec![0, 2]]);
        assert_eq!(p.alone, vec![(1, Alone::TooLarge), (3, Alone::NotWorth)]);
    }

    #[test]
    fn different_keys_never_share_a_bucket() {
        let its = vec![
            Item { key: 'a', bytes: 1 },
            Item { key: 'b', bytes: 1 },
            Item { key: 'a', bytes: 1 },
            Item { key: 'b', bytes: 1 },
        ];
        let p = buckets(&its, |_| 100, |_| true, |_, _, _| true);
        assert_eq!(p.buckets, vec![vec![0, 2], vec![1, 3]]);
    }

    #[test]
    fn dependent_items_go_to_another_bucket() {
        // Item 1 depends on item 0; 2 is free.
        let p = buckets(
            &items(&[1, 1, 1]),
            |_| 100,
            |_| true,
            |open, b, i| !(i == 1 && open[b].contains(&0)),
        );
        assert_eq!(p.buckets, vec![vec![0, 2]]);
        assert_eq!(p.alone, vec![(1, Alone::NoPartner)]);
    }

    #[test]
    fn buckets_that_do_not_pay_are_dropped() {
        let p = buckets(&items(&[1, 1, 1, 1]), |_| 2, |_| true, |_, _, _| true);
        assert_eq!(p.buckets, vec![vec![0, 1], vec![2, 3]]);
        let p = p.keep_if(|b| b[0] == 2);
        assert_eq!(p.buckets, vec![vec![2, 3]]);
        assert_eq!(p.alone, vec![(0, Alone::NotWorth), (1, Alone::NotWorth)]);
    }

    #[test]
    fn the_default_threshold_leaves_a_sixteenth_to_the_fixed_cost() {
        let sizes = [4, 4096, 1 << 20, 16 << 20];
        let m = Model {
            collective: Points::on(
                Line {
                    fixed_us: 200.0,
                    per_byte_us: 0.001,
                },
                sizes,
            ),
            per_item: Line {
                fixed_us: 5.0,
                per_byte_us: 0.0001,
            },
            read_back: Line {
                fixed_us: 1.0,
                per_byte_us: 0.0001,
            },
            bucket_us: 0.0,
        };
        let t = m.default_threshold();
        assert_eq!(t, 3_000_000);
        let c = m.collective;
        let share = c.fixed_at(4) / c.at(t);
        assert!((share - 1.0 / 16.0).abs() < 1e-9, "{share}");
        // With no cost per byte, the memory cap.
        let flat = Model {
            collective: Points::on(
                Line {
                    fixed_us: 1.0,
                    per_byte_us: 0.0,
                },
                sizes,
            ),
            ..m
        };
        assert_eq!(flat.default_threshold(), MAX_DEFAULT_THRESHOLD);
        // Worth it while the item's copies cost less than the fixed part.
        assert!(m.worth(64 << 10, false));
        assert!(!m.worth(4 << 20, false));
        assert!(m.saving_us(&[(65536, false); 100]) > 0.0);
        // An output item also pays its read-back: at 1 MiB per rank the
        // copies alone fit under the fixed part, with the read-back not.
        assert!(m.worth(1 << 20, false));
        assert!(!m.worth(1 << 20, true));
        assert!(m.saving_us(&[(1 << 20, true); 4]) < m.saving_us(&[(1 << 20, false); 4]));
    }

    /// A collective that runs inline from a page up (a small fixed cost)
    /// and pays hand-offs below it: merging items of a page or more saves
    /// only their small fixed part, which a bucket's own fixed cost eats;
    /// items under a page save their hand-offs.
    #[test]
    fn a_step_in_the_cost_is_priced_on_its_own_side() {
        let m = Model {
            collective: Points([
                (4, 200.0),
                (4096, 2.0),
                (1 << 20, 300.0),
                (16 << 20, 4800.0),
            ]),
            per_item: Line {
                fixed_us: 0.3,
                per_byte_us: 1e-5,
            },
            read_back: Line {
                fixed_us: 0.0,
                per_byte_us: 0.0,
            },
            bucket_us: 150.0,
        };
        // On its own side of the step, each point is exact, and sizes in
        // between lie on the segment.
        assert!((m.collective.at(4096) - 2.0).abs() < 1e-9);
        assert!((m.collective.at(4) - 200.0).abs() < 1e-9);
        assert!(m.collective.at(64 << 10) < 20.0);
        // 100 items of a page: apart 200 us, merged about 120 us of
        // collective plus 150 for the bucket: not worth it.
        assert!(m.saving_us(&[(4096, false); 100]) < 0.0);
        // 100 tiny items: apart 20 ms of hand-offs, merged far less.
        assert!(m.saving_us(&[(4, false); 100]) > 0.0);
        assert!(m.worth(4, false));
    }

    #[test]
    fn a_line_through_two_points() {
        let l = Line::through((4, 12.0), (1004, 112.0));
        assert!((l.per_byte_us - 0.1).abs() < 1e-12);
        assert!((l.fixed_us - 11.6).abs() < 1e-9);
        let flat = Line::through((4, 12.0), (1004, 10.0));
        assert_eq!(flat.per_byte_us, 0.0);
    }
}
