// The transport casts (f32 to bf16 or f16 and back, `transport=bf16|f16`),
// one entry point per pair, so no invocation asks which pair it runs or
// which dtype an element has (`cast.wgsl` switches on both, per element).
// Each invocation handles one 32-bit word of the 16-bit side: a narrowing
// reads two f32 words and writes one word of two halves, a widening reads
// one word and writes two f32 words. The conversions are `cast.wgsl`'s,
// with the same integer arithmetic and so the same bits: round to nearest,
// ties to even, subnormals, overflow to infinity, NaN kept a quiet NaN.
//
// Binding 0 is the source and binding 8 the result, as in every kernel
// (kernels.rs). `n` counts words of the 16-bit side, `elems` elements. Of
// an odd length, the last word holds one element: a narrowing keeps that
// word's high half as it was, a widening writes one f32 (and reads no f32
// past the end).

struct Params { n: u32, row_stride: u32, elems: u32 }

@group(0) @binding(0) var<storage, read> src: array<u32>;
@group(0) @binding(8) var<storage, read_write> dst: array<u32>;
var<immediate> p: Params;

// The four conversions are `half_bits.wgsl`'s, as in `cast.wgsl` (build.rs
// appends it), so both kernels give the same bits.

fn word(gid: vec3<u32>) -> u32 {
    return gid.x + gid.y * p.row_stride;
}

// Word `i` of a narrowed result whose low half is `lo`: `hi` above it, or
// of an odd length's last word, the high half the word had.
fn put_halves(i: u32, lo: u32, hi: u32) {
    if (2u * i + 1u < p.elems) {
        dst[i] = lo | (hi << 16u);
    } else {
        dst[i] = lo | (dst[i] & 0xffff0000u);
    }
}

// Both f32s of word `i`'s halves, or of an odd length's last word, one.
fn put_wide(i: u32, lo: u32, hi: u32) {
    dst[2u * i] = lo;
    if (2u * i + 1u < p.elems) {
        dst[2u * i + 1u] = hi;
    }
}

@compute @workgroup_size(256)
fn f32_bf16(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = word(gid);
    if (i >= p.n) {
        return;
    }
    let lo = f32_to_bf16(src[2u * i]);
    var hi = 0u;
    if (2u * i + 1u < p.elems) {
        hi = f32_to_bf16(src[2u * i + 1u]);
    }
    put_halves(i, lo, hi);
}

@compute @workgroup_size(256)
fn f32_f16(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = word(gid);
    if (i >= p.n) {
        return;
    }
    let lo = f32_to_f16(src[2u * i]);
    var hi = 0u;
    if (2u * i + 1u < p.elems) {
        hi = f32_to_f16(src[2u * i + 1u]);
    }
    put_halves(i, lo, hi);
}

@compute @workgroup_size(256)
fn bf16_f32(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = word(gid);
    if (i >= p.n) {
        return;
    }
    let w = src[i];
    put_wide(i, bf16_to_f32(w & 0xffffu), bf16_to_f32(w >> 16u));
}

@compute @workgroup_size(256)
fn f16_f32(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = word(gid);
    if (i >= p.n) {
        return;
    }
    let w = src[i];
    put_wide(i, f16_to_f32(w & 0xffffu), f16_to_f32(w >> 16u));
}
