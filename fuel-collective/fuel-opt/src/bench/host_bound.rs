//! The host's own bound for a collective's data movement, measured in the
//! same run as the collective: plain loops over host memory (an n-ary add
//! and copies, on one thread and on the CPU kernels' pool, the faster
//! counting), and each Vulkan device's own download and upload of the same
//! bytes. `ratio` in every bench table is this bound's time over the
//! collective's.

use crate::setup;
use crate::Failure;
use fuel_runtime::backend::cpu;
use std::time::Instant;

/// Median microseconds of a data movement on host memory: with `add`, an
/// n-ary add of `n` buffers of `bytes` into one and then `copies` copies
/// of the sum; without, `copies` copies of `bytes` read from the `n`
/// buffers in turn. It is timed on one thread and split over the CPU
/// kernels' own rayon pool (`cpu::on_kernel_threads`) and the faster of the
/// two counts, so the bound pays no thread start-up the executor does not
/// pay either.
pub fn host_moves_us(
    n: usize,
    add: bool,
    copies: usize,
    bytes: usize,
    elem: usize,
    iters: usize,
    warmup: usize,
) -> Result<f64, Failure> {
    let words = bytes.div_ceil(8);
    let inputs: Vec<Vec<u64>> = (0..n.max(1))
        .map(|i| host_vec(words, i as u64 + 1))
        .collect::<Result<_, _>>()?;
    let mut out = host_vec(if add { words } else { 0 }, 0u64)?;
    let mut dsts: Vec<Vec<u64>> = (0..copies)
        .map(|_| host_vec(words, 0u64))
        .collect::<Result<_, _>>()?;
    let mut best = f64::INFINITY;
    for threads in [1, cpu::kernel_threads()] {
        let mut times = Vec::with_capacity(iters);
        for it in 0..warmup + iters {
            let t = Instant::now();
            let mut work = || {
                if add {
                    parallel_add(&inputs, &mut out, elem, threads);
                }
                for (k, c) in dsts.iter_mut().enumerate() {
                    let src = if add { &out } else { &inputs[k % inputs.len()] };
                    parallel_copy(src, c, threads);
                }
            };
            if threads > 1 {
                cpu::on_kernel_threads(work);
            } else {
                work();
            }
            if it >= warmup {
                times.push(t.elapsed().as_secs_f64() * 1e6);
            }
        }
        best = best.min(setup::median_us(&mut times));
    }
    std::hint::black_box(&dsts);
    Ok(best)
}

/// `len` copies of `v` in a vector allocated fallibly: the bound's buffers
/// are as large as the sizes asked for, and a size the host cannot hold is
/// an error that says what fits, not an abort.
fn host_vec<T: Clone>(len: usize, v: T) -> Result<Vec<T>, Failure> {
    let mut out = Vec::new();
    out.try_reserve_exact(len).map_err(|e| {
        let fits = fuel_runtime::backend::limits::host().map_or(String::new(), |c| {
            format!(
                "; this process may hold at most {} ({})",
                fuel_runtime::backend::limits::Bytes(c.total.bytes),
                c.total.what
            )
        });
        Failure::input(format!(
            "the host bound cannot allocate {}: {e}{fits}; give smaller --sizes",
            fuel_runtime::backend::limits::Bytes(len.saturating_mul(std::mem::size_of::<T>()))
        ))
    })?;
    out.resize(len, v);
    Ok(out)
}

/// How the group's first Vulkan device moves host bytes, as the bound and
/// the executor both see it; `None` without Vulkan devices.
pub(super) fn vulkan_transfer_path(devices: &[fuel_graph_ext::Device]) -> Option<String> {
    let d = devices
        .iter()
        .find(|d| d.kind == fuel_graph_ext::DeviceKind::Vulkan)?;
    let dev = fuel_runtime::backend::vulkan::Instance::open()
        .ok()?
        .open_device(*d)
        .ok()?;
    let path = if dev.host_mapped() {
        "memcpy through mapped storage buffers"
    } else {
        "through the staging buffer"
    };
    let import = match dev.import_status() {
        Ok(_) if dev.reads_inputs_in_place() => "host-arena buffers imported and inputs read in place, so runs may skip moves this bound counts (FUEL_VULKAN_IMPORT=0 turns it off)".to_string(),
        Ok(_) => "host-arena buffers imported (FUEL_VULKAN_IMPORT=0 turns it off)".to_string(),
        Err(why) => format!("host import off: {why}"),
    };
    Some(format!("{path}; {import}"))
}

/// Median microseconds for every Vulkan device of the group to move `bytes`
/// once each way (a download then an upload) with the backend's own calls
/// and no executor around them; 0 without Vulkan devices. The calls take
/// the backend's own path (mapped memcpy or staging buffer, see
/// `HostAccess`), so a faster transfer path makes this bound faster too.
/// Added to the host bound, it is what a star through the host cannot beat.
pub fn staging_bound_us(
    devices: &[fuel_graph_ext::Device],
    bytes: usize,
    iters: usize,
    warmup: usize,
) -> Result<f64, Failure> {
    use fuel_runtime::backend::{fault::Faults, vulkan::Instance};
    let vk: Vec<_> = devices
        .iter()
        .filter(|d| d.kind == fuel_graph_ext::DeviceKind::Vulkan)
        .collect();
    if vk.is_empty() {
        return Ok(0.0);
    }
    let fail = |e: String| Failure::input(format!("staging bound: {e}"));
    let inst = Instance::open().map_err(|u| fail(u.reason))?;
    let faults = Faults::new(None);
    let mut host = host_vec(bytes, 1u8)?;
    let mut total = 0.0;
    for d in vk {
        let dev = inst.open_device(*d).map_err(|e| fail(e.to_string()))?;
        let mut buf = dev.alloc(bytes, &faults).map_err(|e| fail(e.to_string()))?;
        let mut times = Vec::with_capacity(iters);
        for it in 0..warmup + iters {
            let t = Instant::now();
            dev.download(&buf, &mut host)
                .map_err(|e| fail(e.to_string()))?;
            dev.upload(&host, &mut buf)
                .map_err(|e| fail(e.to_string()))?;
            if it >= warmup {
                times.push(t.elapsed().as_secs_f64() * 1e6);
            }
        }
        total += setup::median_us(&mut times);
    }
    Ok(total)
}

fn lanes_add(acc: &mut [u64], x: &[u64], elem: usize) {
    // Wrapping adds on lanes of the element's width, so the work per byte
    // matches an add of that dtype.
    match elem {
        1 => acc.iter_mut().zip(x).for_each(|(a, b)| {
            let s: [u8; 8] =
                std::array::from_fn(|k| a.to_le_bytes()[k].wrapping_add(b.to_le_bytes()[k]));
            *a = u64::from_le_bytes(s);
        }),
        2 | 4 => acc.iter_mut().zip(x).for_each(|(a, b)| {
            let (lo, hi) = (
                (*a as u32).wrapping_add(*b as u32),
                ((*a >> 32) as u32).wrapping_add((*b >> 32) as u32),
            );
            *a = u64::from(lo) | (u64::from(hi) << 32);
        }),
        _ => acc
            .iter_mut()
            .zip(x)
            .for_each(|(a, b)| *a = a.wrapping_add(*b)),
    }
}

fn parallel_add(inputs: &[Vec<u64>], out: &mut [u64], elem: usize, threads: usize) {
    if threads <= 1 {
        add_range(inputs, out, 0, elem);
        return;
    }
    use rayon::prelude::*;
    let chunk = out.len().div_ceil(threads).max(1);
    out.par_chunks_mut(chunk)
        .enumerate()
        .for_each(|(t, part)| add_range(inputs, part, t * chunk, elem));
}

/// Folds `inputs[.][start..start + out.len()]` into `out`, block by block so
/// the block stays in cache while every input is added.
fn add_range(inputs: &[Vec<u64>], out: &mut [u64], start: usize, elem: usize) {
    const BLOCK: usize = 2048;
    for (b, blk) in out.chunks_mut(BLOCK).enumerate() {
        let off = start + b * BLOCK;
        if let Some(first) = inputs.first() {
            blk.copy_from_slice(&first[off..off + blk.len()]);
        }
        for x in inputs.iter().skip(1) {
            lanes_add(blk, &x[off..off + blk.len()], elem);
        }
    }
}

fn parallel_copy(src: &[u64], dst: &mut [u64], threads: usize) {
    if threads <= 1 {
        dst.copy_from_slice(src);
        return;
    }
    use rayon::prelude::*;
    let chunk = src.len().div_ceil(threads).max(1);
    dst.par_chunks_mut(chunk)
        .zip(src.par_chunks(chunk))
        .for_each(|(d, sp)| d.copy_from_slice(sp));
}
