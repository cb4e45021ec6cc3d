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

// f16 bits to f32 bits (exact; `cast.wgsl`'s).
fn f16_to_f32(h: u32) -> u32 {
    let sign = (h & 0x8000u) << 16u;
    let e = (h >> 10u) & 0x1fu;
    let f = h & 0x3ffu;
    if (e == 0x1fu) {
        // Infinity, or a NaN made quiet (as the interpreter's widening is).
        return sign | 0x7f800000u | select(0u, 0x400000u | (f << 13u), f != 0u);
    }
    if (e == 0u) {
        if (f == 0u) {
            return sign;
        }
        // f * 2^-24 with the leading one at bit b: exponent b - 24.
        let b = firstLeadingBit(f);
        return sign | ((b + 103u) << 23u) | ((f << (23u - b)) & 0x7fffffu);
    }
    return sign | ((e + 112u) << 23u) | (f << 13u);
}

// f32 bits to f16 bits, rounded to nearest even (`cast.wgsl`'s).
fn f32_to_f16(x: u32) -> u32 {
    let sign = (x >> 16u) & 0x8000u;
    let e = (x >> 23u) & 0xffu;
    let f = x & 0x7fffffu;
    if (e == 0xffu) {
        // Infinity, or the quiet NaN of that sign, with no payload (the
        // interpreter's bits).
        return sign | 0x7c00u | select(0u, 0x200u, f != 0u);
    }
    if (e == 0u) {
        // An f32 subnormal is below half of f16's smallest subnormal.
        return sign;
    }
    var te = i32(e) - 112;
    if (te >= 31) {
        return sign | 0x7c00u;
    }
    let m = f | 0x800000u;
    var shift = 13u;
    if (te < 1) {
        shift = 13u + u32(1 - te);
        te = 0;
    }
    if (shift >= 25u) {
        // Below half the smallest subnormal.
        return sign;
    }
    var q = m >> shift;
    let guard = (m >> (shift - 1u)) & 1u;
    let sticky = (m & ((1u << (shift - 1u)) - 1u)) != 0u;
    if (guard == 1u && (sticky || (q & 1u) == 1u)) {
        q = q + 1u;
    }
    var bits = q;
    if (te > 0) {
        bits = (u32(te - 1) << 10u) + q;
    }
    return sign | min(bits, 0x7c00u);
}

// bf16 bits to f32 bits (exact); a NaN is made quiet (`cast.wgsl`'s).
fn bf16_to_f32(h: u32) -> u32 {
    if ((h & 0x7fffu) > 0x7f80u) {
        return (h | 0x40u) << 16u;
    }
    return h << 16u;
}

// f32 bits to bf16 bits, rounded to nearest even; a NaN, however low its
// payload, becomes the quiet NaN of its sign (`cast.wgsl`'s).
fn f32_to_bf16(x: u32) -> u32 {
    if ((x & 0x7fffffffu) > 0x7f800000u) {
        return ((x >> 16u) & 0x8000u) | 0x7fc0u;
    }
    return (x + 0x7fffu + ((x >> 16u) & 1u)) >> 16u;
}

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
