//! `fuel-opt bench --eager`: the eager all_reduce beside the plain loop a
//! user would write instead, in one run.
//!
//! For each size (bytes per rank) it times three ways of reducing one f32
//! buffer per device of `--devices` and leaving the result in every one:
//! `DeviceGroup::all_reduce_now` on host tensors (buffers handed over and
//! reused, no copy in or out), `DeviceGroup::all_reduce_lent` on one
//! `Vec<f32>` per rank (copied into kept buffers and back), and the
//! obvious loop on one `Vec<f32>` per rank, on one thread: add every other
//! rank's vector into rank 0's (then divide, for `mean`), and copy the
//! result into the others. The three are timed in turns, one call of each
//! per round, so a slow spell of a shared machine falls on all of them
//! alike; each figure is the median of `--iters` calls after `--warmup`.
//! `eager/loop` and `lent/loop` are the ratios of the medians: below 1 is
//! faster than the loop. Each way's last results are checked against the
//! loop's before anything is printed (a different fold order may move a
//! sum by a few ulps, so the check allows what `interp::order` allows).

use crate::outln;
use crate::setup;
use crate::sizes::format_size;
use crate::Failure;
use fuel_collective::DeviceGroup;
use fuel_graph_ext::{Device, ReduceOp, Tensor};
use std::time::Instant;

/// What one size measured, in microseconds (medians).
struct Times {
    eager: f64,
    lent: f64,
    plain: f64,
}

/// Runs `bench --eager` over `devices` at `sizes` (bytes per rank).
pub fn bench(
    devices: &[Device],
    op: ReduceOp,
    sizes: &[usize],
    iters: usize,
    warmup: usize,
) -> Result<(), Failure> {
    if !matches!(op, ReduceOp::Sum | ReduceOp::Mean) {
        return Err(Failure::input(format!(
            "bench --eager times sum and mean (the plain loop adds), not {}; give --op sum or --op mean",
            op.as_str()
        )));
    }
    let group =
        DeviceGroup::new(devices.iter().copied()).map_err(|e| Failure::input(e.to_string()))?;
    let names: Vec<String> = devices.iter().map(|d| d.to_string()).collect();
    outln!(
        "# fuel-opt bench --eager: all_reduce.{} of f32 over [{}], {} iters after {} warmup, median times, taken in turns",
        op.as_str(),
        names.join(", "),
        iters,
        warmup
    )?;
    outln!("# eager: DeviceGroup::all_reduce_now on Tensors (buffers handed over); lent: all_reduce_lent on one Vec<f32> per rank (copied in and out); loop: one thread adds the others into rank 0's Vec and copies it back")?;
    outln!(
        "#{:>11} {:>10} {:>12} {:>12} {:>12} {:>10} {:>10}",
        "size",
        "count",
        "eager(us)",
        "lent(us)",
        "loop(us)",
        "eager/loop",
        "lent/loop"
    )?;
    let mut worst: f64 = 0.0;
    for &size in sizes {
        let count = (size / 4).max(1);
        let t = measure(&group, op, count, iters, warmup)?;
        worst = worst.max(t.eager / t.plain);
        outln!(
            " {:>11} {:>10} {:>12.1} {:>12.1} {:>12.1} {:>10.2} {:>10.2}",
            count * 4,
            count,
            t.eager,
            t.lent,
            t.plain,
            t.eager / t.plain,
            t.lent / t.plain
        )?;
    }
    outln!(
        "# worst eager/loop: {worst:.2} over {} size(s) from {} to {}",
        sizes.len(),
        format_size(sizes.first().copied().unwrap_or(0)),
        format_size(sizes.last().copied().unwrap_or(0))
    )?;
    Ok(())
}

/// Times the three ways at `count` f32s per rank.
fn measure(
    group: &DeviceGroup,
    op: ReduceOp,
    count: usize,
    iters: usize,
    warmup: usize,
) -> Result<Times, Failure> {
    let n = group.size();
    let start = |r: usize| -> Vec<f32> { (0..count).map(|i| ((i * 7 + r) % 13) as f32).collect() };
    let mut plain: Vec<Vec<f32>> = (0..n).map(start).collect();
    let mut lent: Vec<Vec<f32>> = plain.clone();
    let mut shards: Vec<Tensor> = plain
        .iter()
        .map(|v| Tensor::from_slice(&[count], v))
        .collect::<Result<_, _>>()
        .map_err(|e| Failure::input(e.to_string()))?;
    let fail = |e: fuel_collective::EagerError| Failure::input(format!("eager run failed: {e}"));
    let mut samples = [Vec::new(), Vec::new(), Vec::new()];
    for it in 0..warmup + iters {
        // Mean keeps the values where they are; a sum grows them, so each
        // way starts every round from the same values.
        if op == ReduceOp::Sum {
            reset(&mut plain, &mut lent, &mut shards, start)?;
        }
        let t = Instant::now();
        group.all_reduce_now(&mut shards, op).map_err(fail)?;
        let eager = t.elapsed();
        let t = Instant::now();
        let mut slices: Vec<&mut [f32]> = lent.iter_mut().map(Vec::as_mut_slice).collect();
        group.all_reduce_lent(&mut slices, op).map_err(fail)?;
        let lent_t = t.elapsed();
        let t = Instant::now();
        plain_loop(&mut plain, op == ReduceOp::Mean);
        let plain_t = t.elapsed();
        if it >= warmup {
            for (s, d) in samples.iter_mut().zip([eager, lent_t, plain_t]) {
                s.push(d.as_secs_f64() * 1e6);
            }
        }
    }
    check(&plain, &lent, &shards)?;
    let [mut e, mut l, mut p] = samples;
    Ok(Times {
        eager: setup::median_us(&mut e),
        lent: setup::median_us(&mut l),
        plain: setup::median_us(&mut p),
    })
}

/// Puts the starting values back into every way's buffers (outside the
/// timed calls), writing into the buffers each way already holds.
fn reset(
    plain: &mut [Vec<f32>],
    lent: &mut [Vec<f32>],
    shards: &mut [Tensor],
    start: impl Fn(usize) -> Vec<f32>,
) -> Result<(), Failure> {
    for (r, ((p, l), s)) in plain.iter_mut().zip(lent).zip(shards).enumerate() {
        let v = start(r);
        p.copy_from_slice(&v);
        l.copy_from_slice(&v);
        s.copy_from_slice(&v)
            .map_err(|e| Failure::input(e.to_string()))?;
    }
    Ok(())
}

/// The obvious all_reduce on host vectors: rank 0's vector becomes the sum
/// (or mean) of all, then every other rank's a copy of it.
fn plain_loop(bufs: &mut [Vec<f32>], mean: bool) {
    let n = bufs.len() as f32;
    let Some((first, rest)) = bufs.split_first_mut() else {
        return;
    };
    for r in rest.iter() {
        for (a, b) in first.iter_mut().zip(r) {
            *a += *b;
        }
    }
    if mean {
        first.iter_mut().for_each(|a| *a /= n);
    }
    for r in rest {
        r.copy_from_slice(first);
    }
}

/// Every way's last results against the loop's: equal within a relative
/// 1e-5 (the executor may fold in another order than the loop's).
fn check(plain: &[Vec<f32>], lent: &[Vec<f32>], shards: &[Tensor]) -> Result<(), Failure> {
    for (r, (p, l)) in plain.iter().zip(lent).enumerate() {
        let eager = shards[r]
            .to_vec::<f32>()
            .map_err(|e| Failure::input(e.to_string()))?;
        for (way, got) in [("eager", &eager), ("lent", l)] {
            if let Some(i) =
                (0..p.len()).find(|&i| (got[i] - p[i]).abs() > 1e-5 * p[i].abs().max(1.0))
            {
                return Err(Failure::input(format!(
                    "bench --eager: the {way} all_reduce gives {} at rank {r} element {i} where the loop gives {}",
                    got[i], p[i]
                )));
            }
        }
    }
    Ok(())
}
