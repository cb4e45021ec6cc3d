//! Closed-form estimates: what a star or a ring would cost, worked out from
//! the algorithm's shape without building its graph.
//!
//! `auto` estimates every candidate, and building each one's graph made
//! large groups expensive: the ring over n ranks is about 4n² nodes, and the
//! star has n + 1 candidate points of about 3n nodes each. For a combining
//! collective (`all_reduce`, `reduce`, `reduce_scatter`) whose operands are
//! distinct and not yet copied anywhere, the steps those algorithms add are
//! known in advance: which copies each value needs (direct or staged, per
//! [`Topology::route`]), which fold or slice follows, how the executor will
//! run each copy ([`CopySite::mode`], from its reader), and what waits for
//! what. These functions walk those steps in order and hand each to the
//! cost model's [`Tally`], so the estimate is the one the graph would get
//! ([`super::estimate::Scratch`] builds the graph where these do not apply:
//! a broadcast, an all_gather, an operand that already has copies, the
//! other algorithms), with no node, edge or allocation per step. The ring's
//! steps repeat per ring position and chunk size, so each is priced once.
//!
//! `tests/tests/lowering_props.rs` checks, for random groups, topologies,
//! shapes and kinds, that these estimates equal the graph's.

use super::algorithm::Lowering;
use super::arrange;
use super::site::CollectiveSite;
use crate::cost::{price, runner_for, Estimate, Priced, StepKind, Tally};
use fuel_graph_ext::plan::{
    divides_in_fold, slice_is_view_when, CopyMode, CopySite, Options, SoleReader, HOST_PAGE,
};
use fuel_graph_ext::topology::{Route, Runner};
use fuel_graph_ext::{Device, DeviceKind, Op, ReduceOp, Topology};
use rustc_hash::FxHashMap;

mod class;
pub(super) use class::{star_class, StarClass};

/// The estimate of `lowering` for `site`, or `None` where no closed form
/// applies (then the graph is built). The caller guarantees that the
/// operands are distinct values with no copies yet.
pub(super) fn estimate(
    site: &CollectiveSite,
    lowering: &Lowering,
    topo: &Topology,
) -> Option<Estimate> {
    site.reduce_op()?;
    if site.ranks() < 2 {
        return None;
    }
    match lowering {
        Lowering::Star(s) => Some(star(site, s.at?, topo)),
        Lowering::Ring(_) => ring(site, topo),
        _ => None,
    }
}

/// How the executor runs a copy `src -> dst`.
fn mode(src: Device, dst: Device, is_output: bool, reader: SoleReader) -> CopyMode {
    CopySite {
        src,
        dst,
        is_output,
        reader,
    }
    .mode(&Options::default())
}

/// Whether a host-to-`to` copy of `bytes` whose source the host computed
/// runs as an import (the plan's `Schedule::import_host_copies`, for a source
/// known to be computed): a Vulkan destination and at least a page.
fn imports(to: Device, bytes: usize) -> bool {
    to.kind == DeviceKind::Vulkan && bytes >= HOST_PAGE
}

/// What a moved value is, which decides whether its host-to-Vulkan hop is
/// an import (`Schedule::import_host_copies`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Source {
    /// The host computed it (a fold's result, a copy): imported from a page.
    Computed,
    /// A caller's input: imported where the device reads callers' bytes
    /// in place (`estimate::input_in_place`).
    Caller,
    /// A slice that is a view of another buffer: never imported.
    View,
}

/// Whether a direct hop `from -> to` of `bytes` of `src` is an import.
fn imported(topo: &Topology, src: Source, from: Device, to: Device, bytes: usize) -> bool {
    from.is_cpu()
        && match src {
            Source::Computed => imports(to, bytes),
            Source::Caller => crate::cost::price::input_in_place(topo, to, bytes),
            Source::View => false,
        }
}

/// A copy `from -> to` of `bytes` in `mode`, or the shared hop of an
/// import when `imported`.
fn hop(from: Device, to: Device, bytes: usize, mode: CopyMode, imported: bool) -> StepKind {
    if imported {
        StepKind::Transfer {
            from,
            to,
            bytes: 0,
            mode: CopyMode::Shared,
        }
    } else {
        StepKind::Transfer {
            from,
            to,
            bytes,
            mode,
        }
    }
}

/// [`hop`] for a copy whose one reader is `reader`: a deferred copy is
/// priced as the plan's pricing prices it ([`price::deferred`]).
fn hop_into(
    (from, to, bytes): (Device, Device, usize),
    mode: CopyMode,
    imported: bool,
    reader: SoleReader,
) -> StepKind {
    if mode == CopyMode::Deferred && !imported {
        price::deferred(from, to, bytes, reader)
    } else {
        hop(from, to, bytes, mode, imported)
    }
}

/// Adds `bytes` going `from -> to` as the lowering moves them, staged
/// through `topo.staging` where the route says so, starting at `start`.
/// `last` is the mode of the copy into `to`, whose one reader is `reader`
/// (the first hop of a staged pair only feeds the second, so it always
/// moves). `src` says what the value
/// is, which decides whether a direct host-to-Vulkan copy of it is an
/// import ([`imported`]); the second hop of a staged pair copies the
/// first's result, which is always computed.
/// Returns when it arrives.
fn move_to(
    tally: &mut Tally<'_>,
    topo: &Topology,
    (from, to, bytes): (Device, Device, usize),
    (last, reader): (CopyMode, SoleReader),
    start: f64,
    src: Source,
) -> f64 {
    if from == to {
        return start;
    }
    match topo.route(from, to) {
        Route::Direct => {
            let imported = imported(topo, src, from, to, bytes);
            let step = hop_into((from, to, bytes), last, imported, reader);
            tally.add(&step, start)
        }
        Route::Staged(s) => {
            let mid = tally.add(&hop(from, s, bytes, CopyMode::Moves, false), start);
            let step = hop_into((s, to, bytes), last, imports(to, bytes), reader);
            tally.add(&step, mid)
        }
    }
}

/// Whether a host-to-`d` delivery of `bytes` (direct from a host `at`, or
/// the second hop through the staging CPU) needs `d`'s worker: a GPU that
/// does not import it.
fn delivery_on_gpu(d: Device, bytes: usize, computed: bool) -> bool {
    let imported = computed && imports(d, bytes);
    !d.is_cpu() && !imported
}

/// The runner the executor takes for a star at `at` (the rule of
/// `cost::runner_of`): inline unless some step goes to a GPU's worker,
/// which is a shard uploaded to a GPU, a fold on one, or a result sent to
/// one that does not import it.
fn star_runner(site: &CollectiveSite, at: Device, topo: &Topology) -> Runner {
    let bytes = site.ty.size_bytes();
    let uploads = site
        .devs
        .iter()
        .any(|&d| !d.is_cpu() && !crate::cost::price::input_in_place(topo, d, bytes));
    if uploads || !at.is_cpu() {
        return Runner::Threaded;
    }
    let gpu_delivery = match site.op {
        Op::Reduce { root, .. } => site
            .devs
            .get(root)
            .is_some_and(|&d| delivery_on_gpu(d, bytes, true)),
        Op::ReduceScatter { axis, .. } => {
            let shares = match site.scatter() {
                Ok(Some((_, shares))) => shares,
                _ => Vec::new(),
            };
            site.devs.iter().zip(&shares).any(|(&d, &(start, len))| {
                let part = site.ty.with_dim(axis, len).size_bytes();
                let computed = !slice_is_view_when(topo, d != at, at, &site.ty, (axis, start, len));
                d != at && delivery_on_gpu(d, part, computed)
            })
        }
        _ => site
            .devs
            .iter()
            .any(|&d| d != at && delivery_on_gpu(d, bytes, true)),
    };
    if gpu_delivery {
        Runner::Threaded
    } else {
        Runner::Inline
    }
}

/// Whether a Mean's `div` on `at` is a step of its own: not where the
/// schedule folds it into the sum it divides (`Kernel::FoldDiv`), whose
/// price is the fold's.
fn divides_apart(at: Device) -> bool {
    !(Options::default().divide_in_folds && divides_in_fold(at))
}

/// Star at `at`: every shard into one fold, then the delivery.
fn star(site: &CollectiveSite, at: Device, topo: &Topology) -> Estimate {
    let bytes = site.ty.size_bytes();
    let runner = star_runner(site, at, topo);
    // Its largest tensor: the shards and the total.
    let mut tally = Tally::new(topo, runner, bytes);
    // Every shard into the fold at `at`, which is the last copy's one
    // reader.
    let mut ready: f64 = 0.0;
    for (i, &d) in site.devs.iter().enumerate() {
        // The fold takes the shards in rank order.
        let fold = SoleReader::Fold { first: i == 0 };
        let into = (mode(last_src(topo, d, at), at, false, fold), fold);
        let arrives = move_to(&mut tally, topo, (d, at, bytes), into, 0.0, Source::Caller);
        ready = ready.max(arrives);
    }
    let fold = StepKind::Compute {
        device: at,
        inputs: site.ranks(),
        bytes,
    };
    let mut total = tally.add(&fold, ready);
    if site.reduce_op() == Some(ReduceOp::Mean) && divides_apart(at) {
        let div = StepKind::Compute {
            device: at,
            inputs: 1,
            bytes,
        };
        total = tally.add(&div, total);
    }
    // The results are outputs: a copy that ends on a rank moves, except
    // between host arenas, where it shares (the rule of `CopySite::mode`),
    // and the first hop of a staged pair moves (it only feeds the second).
    match site.op {
        Op::Reduce { root, .. } => {
            if let Some(&d) = site.devs.get(root) {
                move_to(
                    &mut tally,
                    topo,
                    (at, d, bytes),
                    (mode(at, d, true, SoleReader::Other), SoleReader::Other),
                    total,
                    Source::Computed,
                );
            }
        }
        Op::ReduceScatter { axis, .. } => {
            // Each rank's (start, len): its split, or the default partition.
            let shares = match site.scatter() {
                Ok(Some((_, shares))) => shares,
                _ => Vec::new(),
            };
            for (&d, &(start, len)) in site.devs.iter().zip(&shares) {
                let part = site.ty.with_dim(axis, len).size_bytes();
                // A slice of one run is a view of the fold's result, which
                // costs the runner's bookkeeping, as a shared copy does; a
                // share bound for another device is read only by its copy
                // into a host arena (to a CPU, or through the staging one).
                let view = slice_is_view_when(topo, d != at, at, &site.ty, (axis, start, len));
                let slice = if view {
                    StepKind::Transfer {
                        from: at,
                        to: at,
                        bytes: 0,
                        mode: CopyMode::Shared,
                    }
                } else {
                    StepKind::layout(at, part)
                };
                let cut = tally.add(&slice, total);
                let src = if view { Source::View } else { Source::Computed };
                let last = (mode(at, d, true, SoleReader::Other), SoleReader::Other);
                move_to(&mut tally, topo, (at, d, part), last, cut, src);
            }
        }
        _ => {
            // The star's spread: from `at` straight to each other device;
            // staged ones go through one copy on the staging CPU, which is
            // reused, as is a copy the staging CPU got as a target.
            // The fold's result is computed, so a host `at`'s copy to a
            // Vulkan rank is an import.
            let copy = |to: Device| {
                hop(
                    at,
                    to,
                    bytes,
                    mode(at, to, true, SoleReader::Other),
                    imported(topo, Source::Computed, at, to, bytes),
                )
            };
            let mut held: FxHashMap<Device, f64> = FxHashMap::default();
            held.insert(at, total);
            for &d in &site.devs {
                if held.contains_key(&d) {
                    continue;
                }
                let done = match topo.route(at, d) {
                    Route::Direct => tally.add(&copy(d), total),
                    Route::Staged(s) => {
                        let mid = match held.get(&s) {
                            Some(&m) => m,
                            None => {
                                let m = tally.add(&copy(s), total);
                                held.insert(s, m);
                                m
                            }
                        };
                        let second = hop(s, d, bytes, CopyMode::Moves, imports(d, bytes));
                        tally.add(&second, mid)
                    }
                };
                held.insert(d, done);
            }
        }
    }
    tally.finish()
}

/// The source of the last hop of `from -> to`: `from`, or the staging CPU.
fn last_src(topo: &Topology, from: Device, to: Device) -> Device {
    match topo.route(from, to) {
        Route::Direct => from,
        Route::Staged(s) => s,
    }
}

/// The ring: each chunk summed around it, then (all_reduce) passed on
/// around it and joined on every rank, or (reduce) joined on the root.
fn ring(site: &CollectiveSite, topo: &Topology) -> Option<Estimate> {
    let shape = RingShape::new(site, topo)?;
    let mut tally = Tally::new(topo, shape.runner, shape.working);
    let reduced = shape.reduce_scatter(&mut tally)?;
    match site.op {
        Op::ReduceScatter { .. } => {}
        Op::Reduce { root, .. } => shape.join_on_root(&mut tally, &reduced, *site.devs.get(root)?),
        _ => shape.all_gather(&mut tally, &reduced)?,
    }
    Some(tally.finish())
}

/// The ring's layout: its order, the axis it cuts, its chunks and where
/// each chunk ends.
struct RingShape<'a> {
    site: &'a CollectiveSite,
    topo: &'a Topology,
    n: usize,
    order: Vec<usize>,
    axis: usize,
    /// Each chunk's `(start, len)` along `axis`: a `reduce_scatter`'s
    /// shares (uneven ones included, as the ring's graph cuts them), else
    /// the even cut of [`arrange::chunks`].
    chunks: Vec<(usize, usize)>,
    /// The ring position where each chunk ends.
    ends: Vec<usize>,
    runner: Runner,
    /// Its largest tensor: the joined result, or (reduce_scatter, which
    /// joins nothing) its longest chunk.
    working: usize,
}

/// Each step of one ring position, priced once per chunk size.
struct Position {
    slice: Priced,
    /// The slice when it is a view of the shard (one run).
    view: Priced,
    /// The partial from the previous position: no copy, one, or two.
    hops: Vec<Priced>,
    /// The same when the partial is the first position's slice taken
    /// as a view of its shard (not a value the host computed, so a
    /// direct host-to-Vulkan hop of it is no import).
    hops_of_view: Vec<Priced>,
    add: Priced,
    div: Priced,
}

impl<'a> RingShape<'a> {
    fn new(site: &'a CollectiveSite, topo: &'a Topology) -> Option<RingShape<'a>> {
        let n = site.ranks();
        let order = arrange::vendor_order(&site.devs);
        let (axis, chunks, ends) = match site.op {
            Op::ReduceScatter { axis, .. } => {
                let ends = (0..n)
                    .map(|c| order.iter().position(|r| *r == c))
                    .collect::<Option<Vec<_>>>()?;
                let (_, shares) = site.scatter().ok()??;
                (axis, shares, ends)
            }
            _ => {
                let axis = arrange::ring_axis(&site.ty.shape, n)?;
                let chunks = arrange::chunks(*site.ty.shape.get(axis)?, n)?;
                (axis, chunks, (0..n).collect())
            }
        };
        let working = match site.op {
            Op::ReduceScatter { .. } => {
                let longest = chunks.iter().map(|c| c.1).max()?;
                site.ty.with_dim(axis, longest).size_bytes()
            }
            _ => site.ty.size_bytes(),
        };
        Some(RingShape {
            site,
            topo,
            n,
            axis,
            chunks,
            ends,
            runner: runner_for(site.devs.iter().copied()),
            working,
            order,
        })
    }

    /// The mode of the copy that brings the chunk ending at `end` to the
    /// root's concat (its one reader), or `None` where it ends there.
    fn mode_to_root(&self, end: usize, root: Device) -> Option<CopyMode> {
        let from = self.dev(end);
        (from != root).then(|| {
            mode(
                last_src(self.topo, from, root),
                root,
                false,
                SoleReader::Join,
            )
        })
    }

    /// Bytes of the chunks the root's concat takes deferred.
    fn deferred_into_root(&self, root: Device) -> usize {
        self.ends
            .iter()
            .zip(&self.chunks)
            .filter(|(&end, _)| self.mode_to_root(end, root) == Some(CopyMode::Deferred))
            .map(|(_, &(_, len))| self.bytes(len))
            .sum()
    }

    /// The device at ring position `pos` (mod n).
    fn dev(&self, pos: usize) -> Device {
        self.site.devs[self.order[pos % self.n]]
    }

    /// Bytes of a chunk `len` long.
    fn bytes(&self, len: usize) -> usize {
        self.site.ty.with_dim(self.axis, len).size_bytes()
    }

    /// The steps of every position for a chunk of `bytes`.
    fn price_positions(&self, tally: &Tally<'_>, bytes: usize) -> Vec<Position> {
        let topo = self.topo;
        (0..self.n)
            .map(|pos| {
                let d = self.dev(pos);
                let prev = self.dev(pos + self.n - 1);
                let compute = |inputs| StepKind::Compute {
                    device: d,
                    inputs,
                    bytes,
                };
                // The partial received is the fold's first operand, before
                // the rank's own piece.
                let fold = SoleReader::Fold { first: true };
                let hops_from = |src: Source| {
                    if prev == d {
                        return Vec::new();
                    }
                    match topo.route(prev, d) {
                        Route::Direct => {
                            let imported = imported(topo, src, prev, d, bytes);
                            let m = mode(prev, d, false, fold);
                            vec![tally.price(&hop_into((prev, d, bytes), m, imported, fold))]
                        }
                        Route::Staged(s) => vec![
                            tally.price(&hop(prev, s, bytes, CopyMode::Moves, false)),
                            tally.price(&hop_into(
                                (s, d, bytes),
                                mode(s, d, false, fold),
                                imports(d, bytes),
                                fold,
                            )),
                        ],
                    }
                };
                let view = StepKind::Transfer {
                    from: d,
                    to: d,
                    bytes: 0,
                    mode: CopyMode::Shared,
                };
                Position {
                    slice: tally.price(&StepKind::layout(d, bytes)),
                    view: tally.price(&view),
                    hops: hops_from(Source::Computed),
                    hops_of_view: hops_from(Source::View),
                    add: tally.price(&compute(2)),
                    div: tally.price(&compute(1)),
                }
            })
            .collect()
    }

    /// Reduce-scatter: chunk c starts after its end position and goes once
    /// around. Returns each chunk's (finish time, end position).
    fn reduce_scatter(&self, tally: &mut Tally<'_>) -> Option<Vec<(f64, usize)>> {
        let (n, site) = (self.n, self.site);
        let mean = site.reduce_op() == Some(ReduceOp::Mean);
        let mut by_len: Vec<(usize, Vec<Position>)> = Vec::new();
        let mut reduced: Vec<(f64, usize)> = Vec::with_capacity(n);
        for (&(start, len), &end) in self.chunks.iter().zip(&self.ends) {
            if !by_len.iter().any(|(l, _)| *l == len) {
                by_len.push((len, self.price_positions(tally, self.bytes(len))));
            }
            let pos_of = &by_len.iter().find(|(l, _)| *l == len)?.1;
            let first = (end + 1) % n;
            // The first piece travels on to the next device, where one
            // differs: read only by its copy into a host arena (straight to
            // a CPU, or through the staging CPU), so any one run is a view.
            // The others are read by the add on their own device.
            let is_view = |pos: usize| {
                let d = self.dev(pos);
                let copied = pos == first && self.dev(pos + 1) != d;
                slice_is_view_when(self.topo, copied, d, &site.ty, (self.axis, start, len))
            };
            // Each position's piece of the chunk: a view where it is one run.
            let slice = |pos: usize| {
                let p = &pos_of[pos];
                if is_view(pos) {
                    &p.view
                } else {
                    &p.slice
                }
            };
            let mut partial = tally.add_priced(slice(first), 0.0);
            for step in 1..n {
                let p = &pos_of[(first + step) % n];
                let piece = tally.add_priced(slice((first + step) % n), 0.0);
                let mut arrived = partial;
                let hops = if step == 1 && is_view(first) {
                    &p.hops_of_view
                } else {
                    &p.hops
                };
                for h in hops {
                    arrived = tally.add_priced(h, arrived);
                }
                partial = tally.add_priced(&p.add, arrived.max(piece));
            }
            if mean && divides_apart(self.dev(end)) {
                partial = tally.add_priced(&pos_of[end].div, partial);
            }
            reduced.push((partial, end));
        }
        Some(reduced)
    }

    /// Reduce: each reduced chunk to the root, joined there.
    fn join_on_root(&self, tally: &mut Tally<'_>, reduced: &[(f64, usize)], root: Device) {
        let topo = self.topo;
        let mut ready: f64 = 0.0;
        for (&(t, end), &(_, len)) in reduced.iter().zip(&self.chunks) {
            // Each chunk's only reader is the concat on the root.
            let Some(last) = self.mode_to_root(end, root) else {
                ready = ready.max(t);
                continue;
            };
            let hop = (self.dev(end), root, self.bytes(len));
            let last = (last, SoleReader::Join);
            ready = ready.max(move_to(tally, topo, hop, last, t, Source::Computed));
        }
        let full = self.site.ty.size_bytes();
        let joined = price::joined_bytes(full, self.deferred_into_root(root));
        tally.add(&StepKind::join(root, full, joined), ready);
    }

    /// All-gather: each reduced chunk goes on around the ring from its end
    /// position; a device reached before (a repeated device, or the staging
    /// CPU a staged hop went through) is not reached again. Devices are
    /// numbered: the targets in first-seen order, then the staging CPU if
    /// it is not one of them.
    fn all_gather(&self, tally: &mut Tally<'_>, reduced: &[(f64, usize)]) -> Option<()> {
        let topo = self.topo;
        let mut slots: FxHashMap<Device, usize> = FxHashMap::default();
        let mut targets: Vec<Device> = Vec::new();
        for &d in &self.site.devs {
            slots.entry(d).or_insert_with(|| {
                targets.push(d);
                targets.len() - 1
            });
        }
        let staging = *slots.entry(topo.staging).or_insert(targets.len());
        let pos_slot: Vec<usize> = (0..self.n)
            .map(|pos| slots.get(&self.dev(pos)).copied())
            .collect::<Option<Vec<_>>>()?;
        let ways = Ways {
            slots: &slots,
            pos_slot: &pos_slot,
            staging,
        };
        let slot_count = targets.len() + 1;
        let mut at: Vec<f64> = vec![0.0; slot_count];
        let mut ready: Vec<f64> = vec![0.0; targets.len()];
        let mut readers: Vec<usize> = vec![0; slot_count];
        // Bytes each target's concat takes as deferred operands.
        let mut deferred: Vec<usize> = vec![0; slot_count];
        for (&(t, end), &(_, len)) in reduced.iter().zip(&self.chunks) {
            let bytes = self.bytes(len);
            let hops = self.chunk_hops(end, &ways, slot_count);
            // Who reads the copy on each slot: the hops that pass it on,
            // and the concat of a target.
            readers.fill(0);
            for h in &hops {
                readers[h.from.1] += 1;
            }
            at[pos_slot[end]] = t;
            let mut done: Vec<f64> = Vec::with_capacity(hops.len());
            for h in &hops {
                let ((from, _), (to, k)) = (h.from, h.to);
                let start = h.after.map_or(t, |i| done[i]);
                let reader = if k < targets.len() && readers[k] == 0 {
                    SoleReader::Join
                } else {
                    SoleReader::Other
                };
                // Every value passed on is computed (the reduced chunk, or
                // a copy of it), so a host-to-Vulkan hop is an import.
                let imported = imported(topo, Source::Computed, from, to, bytes);
                let m = mode(from, to, false, reader);
                if m == CopyMode::Deferred {
                    deferred[k] += bytes;
                }
                let step = hop_into((from, to, bytes), m, imported, reader);
                let arrived = tally.add(&step, start);
                done.push(arrived);
                at[k] = arrived;
            }
            for (k, r) in ready.iter_mut().enumerate() {
                *r = r.max(at[k]);
            }
        }
        let full = self.site.ty.size_bytes();
        for ((&d, &r), &taken) in targets.iter().zip(&ready).zip(&deferred) {
            tally.add(
                &StepKind::join(d, full, price::joined_bytes(full, taken)),
                r,
            );
        }
        Some(())
    }

    /// The copies that carry the chunk reduced at position `end` around
    /// the ring, in the order the lowering emits them, each after the copy
    /// whose result it reads (`None`: the reduced chunk itself).
    fn chunk_hops(&self, end: usize, ways: &Ways<'_>, slot_count: usize) -> Vec<ChunkHop> {
        // How the value on each slot came to be: `Some(None)` for the
        // reduced chunk, `Some(Some(i))` for hop `i`'s copy.
        let mut made: Vec<Option<Option<usize>>> = vec![None; slot_count];
        let mut hops: Vec<ChunkHop> = Vec::new();
        let push = |hops: &mut Vec<ChunkHop>, made: &mut [Option<Option<usize>>], from, to| {
            let (_, f): (Device, usize) = from;
            let (_, k): (Device, usize) = to;
            hops.push(ChunkHop {
                from,
                to,
                after: made[f].flatten(),
            });
            made[k] = Some(Some(hops.len() - 1));
        };
        made[ways.pos_slot[end]] = Some(None);
        let mut prev = (self.dev(end), ways.pos_slot[end]);
        for step in 1..self.n {
            let (pos, d) = ((end + step) % self.n, self.dev(end + step));
            let k = ways.pos_slot[pos];
            if made[k].is_none() {
                match self.topo.route(prev.0, d) {
                    Route::Direct => push(&mut hops, &mut made, prev, (d, k)),
                    Route::Staged(s) => {
                        let sk = ways.slots.get(&s).copied().unwrap_or(ways.staging);
                        if made[sk].is_none() {
                            push(&mut hops, &mut made, prev, (s, sk));
                        }
                        push(&mut hops, &mut made, (s, sk), (d, k));
                    }
                }
            }
            prev = (d, k);
        }
        hops
    }
}

/// Where the ring's devices sit among the all_gather's slots: each
/// device's slot, each position's, and the staging CPU's.
struct Ways<'a> {
    slots: &'a FxHashMap<Device, usize>,
    pos_slot: &'a [usize],
    staging: usize,
}

/// One copy of an all_gather chunk: `from` and `to` as (device, slot), and
/// the earlier copy of the same chunk it reads, if any.
struct ChunkHop {
    from: (Device, usize),
    to: (Device, usize),
    after: Option<usize>,
}

#[cfg(test)]
mod tests;
