//! The `cast` kernels beside a plain copy of the same bytes: a narrow
//! transport (`transport=bf16`) casts every byte it moves, twice, so its
//! casts must run near memory speed to pay (issue 37 asks for 0.8 of
//! memcpy). 4M elements: 16 MiB of f32 and 8 MiB of f16 or bf16. The CPU's
//! kernels in `cast-4M`; on `vulkan:0` (lavapipe here), in `vk-cast-4M`,
//! each transport cast by its own kernel (`transport_cast.wgsl`) and by the
//! generic one (`cast.wgsl`), beside a same-size `vkCmdCopyBuffer` (a
//! machine without Vulkan prints `SKIP:` for that group).
//!
//! Run: `cargo bench -p fuel-runtime --bench cast` (add `-- vk-cast` for
//! the Vulkan group only).
// A bench that cannot set up or run a kernel has nothing to measure.
#![allow(clippy::unwrap_used)]

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use fuel_graph_ext::DType;
use fuel_runtime::backend::cpu;
use std::hint::black_box;

const N: usize = 4 << 20;

fn casts(c: &mut Criterion) {
    // Two f32s per u64 (and four halves), so the bytes are aligned.
    let f32s: Vec<u64> = (0..N / 2)
        .map(|i| {
            let x = |k: usize| u64::from((k as f32 * 0.37 - 1e5).to_bits());
            x(2 * i) | x(2 * i + 1) << 32
        })
        .collect();
    let f32s = bytes(&f32s);
    let mut g = c.benchmark_group("cast-4M");
    g.throughput(Throughput::Bytes((N * 4) as u64));
    g.sample_size(20);
    let mut wide = vec![0u64; N / 2];
    let mut narrow = vec![0u64; N / 4];
    g.bench_function("memcpy-f32", |b| {
        let dst = bytes_mut(&mut wide);
        b.iter(|| dst.copy_from_slice(black_box(f32s)))
    });
    for (from, to) in [(DType::F32, DType::BF16), (DType::F32, DType::F16)] {
        g.bench_function(format!("{from}-to-{to}"), |b| {
            let dst = bytes_mut(&mut narrow);
            b.iter(|| assert!(cpu::cast_bytes(from, to, black_box(f32s), dst)))
        });
    }
    let src = vec![0x3c00_3c00_3c00_3c00u64; N / 4];
    for from in [DType::BF16, DType::F16] {
        g.bench_function(format!("{from}-to-f32"), |b| {
            let dst = bytes_mut(&mut wide);
            let src = bytes(&src);
            b.iter(|| assert!(cpu::cast_bytes(from, DType::F32, black_box(src), dst)))
        });
    }
    g.finish();
}

/// `v`'s bytes (u64-aligned, as the kernels want them).
fn bytes(v: &[u64]) -> &[u8] {
    // SAFETY: u8 has no alignment and every bit pattern is valid.
    unsafe { std::slice::from_raw_parts(v.as_ptr().cast(), v.len() * 8) }
}

/// `v`'s bytes, writable.
fn bytes_mut(v: &mut [u64]) -> &mut [u8] {
    // SAFETY: as in `bytes`.
    unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr().cast(), v.len() * 8) }
}

/// The Vulkan group: each transport cast by the transport kernel
/// (`cast`, which routes it there) and by the generic one
/// (`cast_generic`), and a copy of the f32 bytes, all on `vulkan:0`.
#[cfg(feature = "vulkan")]
fn vk_casts(c: &mut Criterion) {
    use fuel_graph_ext::Device;
    use fuel_runtime::backend::fault::Faults;
    use fuel_runtime::backend::vulkan::Instance;
    use fuel_runtime::backend::Region;
    let opened = Instance::open()
        .map_err(|u| u.reason)
        .and_then(|i| i.open_device(Device::vulkan(0)).map_err(|e| e.to_string()));
    let dev = match opened {
        Ok(d) => d,
        Err(reason) => {
            eprintln!("SKIP: vk-cast-4M: {reason}");
            return;
        }
    };
    let faults = Faults::new(None);
    let f32s: Vec<u8> = (0..N)
        .flat_map(|k| (k as f32 * 0.37 - 1e5).to_le_bytes())
        .collect();
    let halves: Vec<u8> = (0..N).flat_map(|_| 0x3c00u16.to_le_bytes()).collect();
    let mut wide = dev.alloc(N * 4, &faults).unwrap();
    dev.upload(&f32s, &mut wide).unwrap();
    let mut narrow = dev.alloc(N * 2, &faults).unwrap();
    dev.upload(&halves, &mut narrow).unwrap();
    let wide_out = dev.alloc(N * 4, &faults).unwrap();
    let narrow_out = dev.alloc(N * 2, &faults).unwrap();
    let mut g = c.benchmark_group("vk-cast-4M");
    g.throughput(Throughput::Bytes((N * 4) as u64));
    g.sample_size(10);
    g.warm_up_time(std::time::Duration::from_secs(1));
    g.measurement_time(std::time::Duration::from_secs(4));
    let whole = [Region {
        operand: 0,
        src: 0,
        dst: 0,
        len: N * 4,
    }];
    g.bench_function("copy-f32", |b| {
        b.iter(|| {
            dev.copy_regions("copy", &whole, &[&wide], &wide_out, &faults)
                .unwrap()
        })
    });
    let pairs = [
        (DType::F32, DType::BF16, &wide, &narrow_out),
        (DType::F32, DType::F16, &wide, &narrow_out),
        (DType::BF16, DType::F32, &narrow, &wide_out),
        (DType::F16, DType::F32, &narrow, &wide_out),
    ];
    for (from, to, src, dst) in pairs {
        g.bench_function(format!("{from}-to-{to}-transport"), |b| {
            b.iter(|| dev.cast(from, to, src, dst, N, &faults).unwrap())
        });
        g.bench_function(format!("{from}-to-{to}-generic"), |b| {
            b.iter(|| dev.cast_generic(from, to, src, dst, N, &faults).unwrap())
        });
    }
    g.finish();
}

#[cfg(not(feature = "vulkan"))]
fn vk_casts(_: &mut Criterion) {}

criterion_group!(benches, casts, vk_casts);
criterion_main!(benches);
