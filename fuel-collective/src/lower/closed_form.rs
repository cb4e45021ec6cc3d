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
use crate::cost::{runner_for, Estimate, Priced, StepKind, Tally};
use fuel_graph_ext::plan::{slice_is_view, CopyMode, CopySite, Options, HOST_PAGE};
use fuel_graph_ext::topology::{Route, Runner};
use fuel_graph_ext::{Device, DeviceKind, Op, ReduceOp, Topology};
use rustc_hash::FxHashMap;
use std::hash::{Hash, Hasher};

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

/// What a star point's estimate depends on besides the group: points of
/// one class cost the same, because swapping them maps the group and the
/// topology onto themselves (the cost model has no figure per device index,
/// only per kind; the staging CPU, a `reduce`'s root, the number of ranks
/// on the point and a CUDA device's peers are what set points apart). The
/// pass estimates one point per class, so a star over 1000 CPUs costs two
/// closed forms, not 1001.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) struct StarClass {
    kind: fuel_graph_ext::DeviceKind,
    staging: bool,
    ranks_on: usize,
    root: bool,
    /// A CUDA device with a declared peer is a class of its own.
    peered_cuda: Option<u32>,
    /// For a `reduce_scatter`: the shares `at` keeps (their lengths, and
    /// whether each slice is a view), hashed. Shares differ with a split
    /// or the default partition's remainder, and a view costs less than a
    /// slice that copies, so two points of one kind are alike only when
    /// they keep alike shares (the others' shares are the rest).
    kept_shares: u64,
}

/// The class of the star point `at` for `site`.
pub(super) fn star_class(site: &CollectiveSite, at: Device, topo: &Topology) -> StarClass {
    let peered = at.kind == fuel_graph_ext::DeviceKind::Cuda
        && site
            .devs
            .iter()
            .any(|d| d.kind == at.kind && *d != at && topo.has_peer(at.index, d.index));
    let kept_shares = match site.scatter() {
        Ok(Some((axis, shares))) => {
            let mut kept: Vec<(usize, bool)> = site
                .devs
                .iter()
                .zip(&shares)
                .filter(|(d, _)| **d == at)
                .map(|(_, &(start, len))| (len, slice_is_view(at, &site.ty, axis, start, len)))
                .collect();
            kept.sort_unstable();
            let mut h = rustc_hash::FxHasher::default();
            kept.hash(&mut h);
            h.finish()
        }
        _ => 0,
    };
    StarClass {
        kind: at.kind,
        staging: at == topo.staging,
        ranks_on: site.devs.iter().filter(|d| **d == at).count(),
        root: site.root().and_then(|r| site.devs.get(r)) == Some(&at),
        peered_cuda: peered.then_some(at.index),
        kept_shares,
    }
}

/// How the executor runs a copy `src -> dst`.
fn mode(src: Device, dst: Device, is_output: bool, one_fold_reader: bool) -> CopyMode {
    CopySite {
        src,
        dst,
        is_output,
        one_fold_reader,
    }
    .mode(&Options::default())
}

/// Whether a host-to-`to` copy of `bytes` whose source the host computed
/// runs as an import (the rule of `estimate::imported_hop`, for a source
/// known to be computed): a Vulkan destination and at least a page.
fn imports(to: Device, bytes: usize) -> bool {
    to.kind == DeviceKind::Vulkan && bytes >= HOST_PAGE
}

/// What a moved value is, which decides whether its host-to-Vulkan hop is
/// an import (`estimate::imported_hop`).
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

/// Adds `bytes` going `from -> to` as the lowering moves them, staged
/// through `topo.staging` where the route says so, starting at `start`.
/// `last` is the mode of the copy into `to` (the first hop of a staged pair
/// only feeds the second, so it always moves). `src` says what the value
/// is, which decides whether a direct host-to-Vulkan copy of it is an
/// import ([`imported`]); the second hop of a staged pair copies the
/// first's result, which is always computed.
/// Returns when it arrives.
fn move_to(
    tally: &mut Tally<'_>,
    topo: &Topology,
    (from, to, bytes): (Device, Device, usize),
    last: CopyMode,
    start: f64,
    src: Source,
) -> f64 {
    if from == to {
        return start;
    }
    match topo.route(from, to) {
        Route::Direct => {
            let imported = imported(topo, src, from, to, bytes);
            tally.add(&hop(from, to, bytes, last, imported), start)
        }
        Route::Staged(s) => {
            let mid = tally.add(&hop(from, s, bytes, CopyMode::Moves, false), start);
            tally.add(&hop(s, to, bytes, last, imports(to, bytes)), mid)
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
                let computed = !slice_is_view(at, &site.ty, axis, start, len);
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

/// Star at `at`: every shard into one fold, then the delivery.
fn star(site: &CollectiveSite, at: Device, topo: &Topology) -> Estimate {
    let bytes = site.ty.size_bytes();
    let runner = star_runner(site, at, topo);
    // Its largest tensor: the shards and the total.
    let mut tally = Tally::new(topo, runner, bytes);
    // Every shard into the fold at `at`, which is the last copy's one
    // reader.
    let mut ready: f64 = 0.0;
    for &d in &site.devs {
        let into = mode(last_src(topo, d, at), at, false, true);
        let arrives = move_to(&mut tally, topo, (d, at, bytes), into, 0.0, Source::Caller);
        ready = ready.max(arrives);
    }
    let fold = StepKind::Compute {
        device: at,
        inputs: site.ranks(),
        bytes,
    };
    let mut total = tally.add(&fold, ready);
    if site.reduce_op() == Some(ReduceOp::Mean) {
        let div = StepKind::Compute {
            device: at,
            inputs: 1,
            bytes,
        };
        total = tally.add(&div, total);
    }
    // The results are outputs: every copy that ends on a rank moves, and
    // so does the first hop of a staged pair (it only feeds the second).
    match site.op {
        Op::Reduce { root, .. } => {
            if let Some(&d) = site.devs.get(root) {
                move_to(
                    &mut tally,
                    topo,
                    (at, d, bytes),
                    CopyMode::Moves,
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
                // costs the runner's bookkeeping, as a shared copy does.
                let view = slice_is_view(at, &site.ty, axis, start, len);
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
                move_to(&mut tally, topo, (at, d, part), CopyMode::Moves, cut, src);
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
                    CopyMode::Moves,
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
    let n = site.ranks();
    let order = arrange::vendor_order(&site.devs);
    let (axis, ends): (usize, Vec<usize>) = match site.op {
        Op::ReduceScatter { axis, .. } => {
            let ends = (0..n)
                .map(|c| order.iter().position(|r| *r == c))
                .collect::<Option<Vec<_>>>()?;
            (axis, ends)
        }
        _ => (arrange::ring_axis(&site.ty.shape, n)?, (0..n).collect()),
    };
    let chunks = arrange::chunks(*site.ty.shape.get(axis)?, n)?;
    let dev = |pos: usize| site.devs[order[pos % n]];
    let runner = runner_for(site.devs.iter().copied());
    // Its largest tensor: the joined result, or (reduce_scatter, which
    // joins nothing) its first and longest chunk.
    let working = match site.op {
        Op::ReduceScatter { .. } => site.ty.with_dim(axis, chunks.first()?.1).size_bytes(),
        _ => site.ty.size_bytes(),
    };
    let mut tally = Tally::new(topo, runner, working);
    let mean = site.reduce_op() == Some(ReduceOp::Mean);
    // Each step of one ring position, priced once per chunk size.
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
    let price_positions = |tally: &Tally<'_>, bytes: usize| -> Vec<Position> {
        (0..n)
            .map(|pos| {
                let d = dev(pos);
                let prev = dev(pos + n - 1);
                let compute = |inputs| StepKind::Compute {
                    device: d,
                    inputs,
                    bytes,
                };
                let hops_from = |src: Source| {
                    if prev == d {
                        return Vec::new();
                    }
                    match topo.route(prev, d) {
                        Route::Direct => {
                            let imported = imported(topo, src, prev, d, bytes);
                            let m = mode(prev, d, false, true);
                            vec![tally.price(&hop(prev, d, bytes, m, imported))]
                        }
                        Route::Staged(s) => vec![
                            tally.price(&hop(prev, s, bytes, CopyMode::Moves, false)),
                            tally.price(&hop(
                                s,
                                d,
                                bytes,
                                mode(s, d, false, true),
                                imports(d, bytes),
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
    };
    let mut by_len: Vec<(usize, Vec<Position>)> = Vec::new();
    // Reduce-scatter: chunk c starts after its end position and goes once
    // around. `reduced[c]`: (finish time, end position).
    let mut reduced: Vec<(f64, usize)> = Vec::with_capacity(n);
    for (&(start, len), &end) in chunks.iter().zip(&ends) {
        if !by_len.iter().any(|(l, _)| *l == len) {
            let bytes = site.ty.with_dim(axis, len).size_bytes();
            by_len.push((len, price_positions(&tally, bytes)));
        }
        let pos_of = &by_len.iter().find(|(l, _)| *l == len)?.1;
        // Each position's piece of the chunk: a view where it is one run.
        let slice = |pos: usize| {
            let p = &pos_of[pos];
            if slice_is_view(dev(pos), &site.ty, axis, start, len) {
                &p.view
            } else {
                &p.slice
            }
        };
        let first = (end + 1) % n;
        let mut partial = tally.add_priced(slice(first), 0.0);
        let first_is_view = slice_is_view(dev(first), &site.ty, axis, start, len);
        for step in 1..n {
            let p = &pos_of[(first + step) % n];
            let piece = tally.add_priced(slice((first + step) % n), 0.0);
            let mut arrived = partial;
            let hops = if step == 1 && first_is_view {
                &p.hops_of_view
            } else {
                &p.hops
            };
            for h in hops {
                arrived = tally.add_priced(h, arrived);
            }
            partial = tally.add_priced(&p.add, arrived.max(piece));
        }
        if mean {
            partial = tally.add_priced(&pos_of[end].div, partial);
        }
        reduced.push((partial, end));
    }
    let full = site.ty.size_bytes();
    match site.op {
        Op::ReduceScatter { .. } => {}
        Op::Reduce { root, .. } => {
            let root_dev = *site.devs.get(root)?;
            let mut ready: f64 = 0.0;
            for (&(t, end), &(_, len)) in reduced.iter().zip(&chunks) {
                let bytes = site.ty.with_dim(axis, len).size_bytes();
                let from = dev(end);
                // Each chunk's only reader is the concat on the root.
                let last = mode(last_src(topo, from, root_dev), root_dev, false, false);
                let at_root = move_to(
                    &mut tally,
                    topo,
                    (from, root_dev, bytes),
                    last,
                    t,
                    Source::Computed,
                );
                ready = ready.max(at_root);
            }
            let concat = StepKind::layout(root_dev, full);
            tally.add(&concat, ready);
        }
        _ => {
            // All-gather: each reduced chunk goes on around the ring from
            // its end position; a device reached before (a repeated device,
            // or the staging CPU a staged hop went through) is not reached
            // again. Devices are numbered: the targets in first-seen order,
            // then the staging CPU if it is not one of them.
            let mut slots: FxHashMap<Device, usize> = FxHashMap::default();
            let mut targets: Vec<Device> = Vec::new();
            for &d in &site.devs {
                slots.entry(d).or_insert_with(|| {
                    targets.push(d);
                    targets.len() - 1
                });
            }
            let staging = *slots.entry(topo.staging).or_insert(targets.len());
            let pos_slot: Vec<usize> = (0..n)
                .map(|pos| slots.get(&dev(pos)).copied())
                .collect::<Option<Vec<_>>>()?;
            // `seen[k] == c + 1`: chunk c is on slot k, since `at[k]`.
            let slot_count = targets.len() + 1;
            let mut seen: Vec<usize> = vec![0; slot_count];
            let mut at: Vec<f64> = vec![0.0; slot_count];
            let mut ready: Vec<f64> = vec![0.0; targets.len()];
            for (c, (&(t, end), &(_, len))) in reduced.iter().zip(&chunks).enumerate() {
                let bytes = site.ty.with_dim(axis, len).size_bytes();
                // Every value passed on is computed (the reduced chunk, or a
                // copy of it), so a host-to-Vulkan hop is an import.
                let copy = |from: Device, to: Device| {
                    let imported = imported(topo, Source::Computed, from, to, bytes);
                    hop(from, to, bytes, mode(from, to, false, false), imported)
                };
                let mark = c + 1;
                seen[pos_slot[end]] = mark;
                at[pos_slot[end]] = t;
                let mut prev = (dev(end), t);
                for step in 1..n {
                    let (pos, d) = ((end + step) % n, dev(end + step));
                    let k = pos_slot[pos];
                    if seen[k] == mark {
                        prev = (d, at[k]);
                        continue;
                    }
                    let done = match topo.route(prev.0, d) {
                        Route::Direct => tally.add(&copy(prev.0, d), prev.1),
                        Route::Staged(s) => {
                            let sk = slots.get(&s).copied().unwrap_or(staging);
                            let mid = if seen[sk] == mark {
                                at[sk]
                            } else {
                                let m = tally.add(&copy(prev.0, s), prev.1);
                                seen[sk] = mark;
                                at[sk] = m;
                                m
                            };
                            tally.add(&copy(s, d), mid)
                        }
                    };
                    seen[k] = mark;
                    at[k] = done;
                    prev = (d, done);
                }
                for (k, r) in ready.iter_mut().enumerate() {
                    *r = r.max(at[k]);
                }
            }
            for (&d, &r) in targets.iter().zip(&ready) {
                let concat = StepKind::layout(d, full);
                tally.add(&concat, r);
            }
        }
    }
    Some(tally.finish())
}

#[cfg(test)]
mod tests {
    use super::super::estimate::Scratch;
    use super::super::ring::Ring;
    use super::super::star::Star;
    use super::*;
    use fuel_graph_ext::topology::{ComputeCost, Curve, LinkClass, LinkCost, Runner, RunnerCost};
    use fuel_graph_ext::{text, DeviceKind};
    use proptest::prelude::*;

    const POOL: [Device; 9] = [
        Device::cpu(0),
        Device::cpu(1),
        Device::cpu(2),
        Device::cuda(0),
        Device::cuda(1),
        Device::cuda(2),
        Device::vulkan(0),
        Device::vulkan(1),
        Device::vulkan(2),
    ];

    /// The collective's text IR: one input per rank, then the collective.
    fn source(devs: &[Device], kind: usize, mean: bool, shape: &[usize]) -> String {
        let n = devs.len();
        let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
        let ty = format!("f32[{}]", dims.join(","));
        let mut s = String::from("graph @p {\n");
        for (i, d) in devs.iter().enumerate() {
            s += &format!("  %{i} = input \"s{i}\" @{d} : {ty}\n");
        }
        let args: Vec<String> = (0..n).map(|i| format!("%{i}")).collect();
        let op = if mean { "mean" } else { "sum" };
        let (line, results) = match kind {
            0 => (
                format!("  %{n}:{n} = all_reduce.{op} {} : {ty}\n", args.join(", ")),
                n,
            ),
            1 => (
                format!(
                    "  %{n} = reduce.{op} {} {{root={}}} : {ty}\n",
                    args.join(", "),
                    n - 1
                ),
                1,
            ),
            _ => {
                let mut part = shape.to_vec();
                part[0] /= n;
                let dims: Vec<String> = part.iter().map(|d| d.to_string()).collect();
                (
                    format!(
                        "  %{n}:{n} = reduce_scatter.{op} {} {{axis=0}} : f32[{}]\n",
                        args.join(", "),
                        dims.join(",")
                    ),
                    n,
                )
            }
        };
        s += &line;
        let rets: Vec<String> = if results == 1 {
            vec![format!("%{n}")]
        } else {
            (0..results).map(|i| format!("%{n}#{i}")).collect()
        };
        s + &format!("  return {}\n}}\n", rets.join(", "))
    }

    fn topology(peers: bool, staging: u32, scale: f64) -> Topology {
        let mut t = Topology::default();
        if peers {
            t = t.with_peer(0, 1);
        }
        t.staging = Device::cpu(staging);
        for c in LinkClass::ALL {
            let l = t.link(c);
            t.set_link(
                c,
                LinkCost {
                    bandwidth: Curve::new(&[(16, 3.0 * scale), (256, scale)]).unwrap(),
                    latency_us: l.latency_us / scale,
                    deferred_gbps: l.deferred_gbps * scale * 1.5,
                },
            );
        }
        for k in DeviceKind::ALL {
            let c = t.compute(k);
            t.set_compute(
                k,
                ComputeCost {
                    gbps: c.gbps.map(|_, g| g / scale),
                    fixed_us: c.fixed_us * scale,
                },
            );
        }
        let th = t.runner(Runner::Threaded);
        t.set_runner(
            Runner::Threaded,
            RunnerCost {
                step_us: th.step_us * scale,
                run_us: th.run_us,
                dispatch_us: th.dispatch_us * scale * 2.0,
            },
        );
        if scale > 1.0 {
            t.host_memory.insert(DeviceKind::Vulkan);
        }
        // Past 2, lavapipe-like: its kernels run on two host cores.
        if scale > 2.0 {
            t.host_kernels.insert(DeviceKind::Vulkan);
            t.set_host_cores(Some(2));
            t.set_handoff_cpu_us(1.0);
        }
        t
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        /// The closed forms give the estimate the graph gives.
        #[test]
        fn closed_forms_equal_the_graphs_estimate(
            picks in prop::collection::vec(0..POOL.len(), 2..=7),
            kind in 0usize..3,
            mean in any::<bool>(),
            rows in 1usize..4,
            cols in 1usize..9,
            wide in any::<bool>(),
            peers in any::<bool>(),
            staging in 0u32..3,
            scale in prop::sample::select(vec![0.05, 1.0, 20.0]),
        ) {
            let devs: Vec<Device> = picks.iter().map(|i| POOL[*i]).collect();
            let n = devs.len();
            // Reduce-scatter needs the cut axis to divide by the ranks.
            // Wide tensors are pages long: host-to-Vulkan hops of computed
            // values become imports, and inputs on Vulkan in host memory
            // are read in place.
            let cols = if wide { cols * 1024 } else { cols };
            let shape = if kind == 2 { vec![n * rows, cols] } else { vec![rows * 3, cols] };
            let g = text::parse(&source(&devs, kind, mean, &shape)).unwrap();
            let id = g
                .node_ids()
                .find(|id| g.node(*id).is_some_and(|x| x.op.is_collective()))
                .unwrap();
            let site = CollectiveSite::read(&g, id).unwrap();
            let topo = topology(peers, staging, scale);
            let scratch = Scratch::new(&g, &site).unwrap();
            let mut lowerings: Vec<Lowering> = arrange::unique(&devs)
                .into_iter()
                .chain([topo.staging])
                .map(|d| Lowering::Star(Star { at: Some(d) }))
                .collect();
            lowerings.push(Lowering::Ring(Ring));
            let mut checked = 0;
            for l in &lowerings {
                let Some(closed) = estimate(&site, l, &topo) else { continue };
                let graph = scratch.estimate_by_graph(&site, l, &topo).unwrap();
                // What the pass uses: the closed form, shared by equivalent
                // star points.
                let used = scratch.estimate(&site, l, &topo).unwrap();
                prop_assert!(
                    close(used.total_us(), graph.total_us()) && used.transfers == graph.transfers,
                    "{l} over {devs:?}, kind {kind}: used {used:?}, graph {graph:?}"
                );
                checked += 1;
                prop_assert!(
                    close(closed.critical_path_us, graph.critical_path_us)
                        && close(closed.busiest_us, graph.busiest_us)
                        && close(closed.dispatcher_us, graph.dispatcher_us)
                        && closed.transfers == graph.transfers
                        && closed.bytes_moved == graph.bytes_moved,
                    "{l} over {devs:?}, kind {kind}, shape {shape:?}:\nclosed {closed:?}\ngraph  {graph:?}"
                );
            }
            // Every star point has a closed form.
            prop_assert!(checked >= lowerings.len() - 1);
        }
    }
}
