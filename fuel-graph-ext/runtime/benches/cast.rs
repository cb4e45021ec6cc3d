//! The CPU's `cast` kernels beside a plain copy of the same bytes: a narrow
//! transport (`transport=bf16`) casts every byte it moves, twice, so its
//! casts must run near memory speed to pay (issue 37 asks for 0.8 of
//! memcpy). 4M elements: 16 MiB of f32 and 8 MiB of f16 or bf16.
//!
//! Run: `cargo bench -p fuel-runtime --bench cast`.

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

criterion_group!(benches, casts);
criterion_main!(benches);
