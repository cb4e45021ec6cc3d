// The `cast` kernel: converts elements between dtypes with integer
// arithmetic only, so the result does not depend on the device's float
// conversions (their rounding mode and subnormal handling are the
// implementation's choice in Vulkan). Integers wrap (the low bits of the
// sign- or zero-extended value); floats round to nearest, ties to even,
// with subnormals, overflow to infinity, and NaN kept a quiet NaN: made
// quiet when widened, and when narrowed to f16 or bf16 the quiet NaN of
// its sign with no payload, as the interpreter gives.
//
// Codes: 0 f32, 1 f16, 2 f64, 3 i32, 4 u32, 5 i64, 6 u64, 7 bf16
// (kernels.rs). Binding 0 is the source and binding 8 the result, both
// read as 32-bit words (buffers are allocated in whole words). Invocation
// `i` writes one unit of the result: two 16-bit elements (one word), one
// 32-bit element, or one 64-bit element (two words). `n` counts units,
// `elems` elements. A 16-bit result of odd length keeps the high half of
// its last word as it was (it is no element of the result).
//
// Every float conversion goes through f32 bits: from f16 and bf16 exactly,
// from f64 rounded to odd (24 bits hold a second rounding to a 16-bit type
// exactly); to f16 and bf16 rounded once from there.

struct Params { n: u32, row_stride: u32, src_type: u32, dst_type: u32, elems: u32 }

@group(0) @binding(0) var<storage, read> src: array<u32>;
@group(0) @binding(8) var<storage, read_write> dst: array<u32>;
var<immediate> p: Params;

// Element `j` of the source as up to 64 bits (x: low word, y: high word).
// Integers are sign- or zero-extended to 64 bits.
fn load(j: u32) -> vec2<u32> {
    switch p.src_type {
        case 1u, 7u: {
            let w = src[j >> 1u];
            return vec2<u32>((w >> ((j & 1u) * 16u)) & 0xffffu, 0u);
        }
        case 2u, 5u, 6u: {
            return vec2<u32>(src[2u * j], src[2u * j + 1u]);
        }
        case 3u: {
            let w = src[j];
            return vec2<u32>(w, select(0u, 0xffffffffu, (w >> 31u) == 1u));
        }
        default: {
            return vec2<u32>(src[j], 0u);
        }
    }
}

// The four 16-bit conversions are `half_bits.wgsl`'s (build.rs appends it),
// and so are `round_even` and `pack_narrowed`, which f64_to_f32 rounds
// and packs its result with as f32_to_f16 does.

// f32 bits to f64 bits (exact).
fn f32_to_f64(x: u32) -> vec2<u32> {
    let sign = x & 0x80000000u;
    let e = (x >> 23u) & 0xffu;
    let f = x & 0x7fffffu;
    if (e == 0xffu) {
        return vec2<u32>(f << 29u, sign | 0x7ff00000u | (f >> 3u));
    }
    if (e == 0u) {
        if (f == 0u) {
            return vec2<u32>(0u, sign);
        }
        // f * 2^-149 with the leading one at bit b (0..22): the fraction is
        // f without that bit, shifted up by 52 - b (30..52) bits.
        let b = firstLeadingBit(f);
        let rest = f ^ (1u << b);
        let k = 52u - b;
        var lo = 0u;
        var hi = 0u;
        if (k >= 32u) {
            hi = rest << (k - 32u);
        } else {
            hi = rest >> (32u - k);
            lo = rest << k;
        }
        return vec2<u32>(lo, sign | ((b + 874u) << 20u) | hi);
    }
    return vec2<u32>(f << 29u, sign | ((e + 896u) << 20u) | (f >> 3u));
}

// f64 bits to f32 bits, rounded to nearest even, or (when `odd`) cut
// toward zero with the last bit set if anything was cut: the rounding to
// odd that keeps a second rounding, to f16, correct.
fn f64_to_f32(v: vec2<u32>, odd: bool) -> u32 {
    let lo = v.x;
    let hi = v.y;
    let sign = hi & 0x80000000u;
    let e = (hi >> 20u) & 0x7ffu;
    let fhi = hi & 0xfffffu;
    if (e == 0x7ffu) {
        if ((fhi | lo) != 0u) {
            return sign | 0x7fc00000u | (fhi << 3u) | (lo >> 29u);
        }
        return sign | 0x7f800000u;
    }
    if (e == 0u && (fhi | lo) == 0u) {
        return sign;
    }
    if (e == 0u) {
        // An f64 subnormal is far below f32's range.
        return sign | select(0u, 1u, odd);
    }
    var te = i32(e) - 896;
    if (te >= 255) {
        return sign | select(0x7f800000u, 0x7f7fffffu, odd);
    }
    // The 53-bit significand, (1 << 52 | fraction), as mh:lo.
    let mh = fhi | 0x100000u;
    var shift = 29u;
    if (te < 1) {
        shift = 29u + u32(1 - te);
        te = 0;
    }
    var q = 0u;
    var guard = 0u;
    var sticky = false;
    if (shift >= 54u) {
        sticky = true;
    } else {
        if (shift >= 32u) {
            q = mh >> (shift - 32u);
        } else {
            q = (mh << (32u - shift)) | (lo >> shift);
        }
        let g = shift - 1u;
        if (g >= 32u) {
            guard = (mh >> (g - 32u)) & 1u;
            sticky = lo != 0u || (mh & ((1u << (g - 32u)) - 1u)) != 0u;
        } else {
            guard = (lo >> g) & 1u;
            sticky = (lo & ((1u << g) - 1u)) != 0u;
        }
    }
    if (odd) {
        if (guard == 1u || sticky) {
            q = q | 1u;
        }
    } else {
        q = round_even(q, guard, sticky);
    }
    return sign | pack_narrowed(q, te, 23u, 0x7f800000u);
}

// Element `j` converted, for a 16-bit result (f16 or bf16).
fn to16(j: u32) -> u32 {
    let v = load(j);
    if (p.src_type == p.dst_type) {
        return v.x & 0xffffu;
    }
    // The source as f32 bits (rounded to odd from f64).
    var x = v.x;
    switch p.src_type {
        case 1u: {
            x = f16_to_f32(v.x);
        }
        case 2u: {
            x = f64_to_f32(v, true);
        }
        case 7u: {
            x = bf16_to_f32(v.x);
        }
        default: {}
    }
    if (p.dst_type == 7u) {
        return f32_to_bf16(x);
    }
    return f32_to_f16(x);
}

// Element `j` converted, for a 32-bit result.
fn to32(j: u32) -> u32 {
    let v = load(j);
    if (p.dst_type == 0u) {
        switch p.src_type {
            case 1u: {
                return f16_to_f32(v.x);
            }
            case 2u: {
                return f64_to_f32(v, false);
            }
            case 7u: {
                return bf16_to_f32(v.x);
            }
            default: {
                return v.x;
            }
        }
    }
    // An integer: the low word is the wrapped value.
    return v.x;
}

// Element `j` converted, for a 64-bit result.
fn to64(j: u32) -> vec2<u32> {
    let v = load(j);
    if (p.dst_type == 2u) {
        switch p.src_type {
            case 0u: {
                return f32_to_f64(v.x);
            }
            case 1u: {
                return f32_to_f64(f16_to_f32(v.x));
            }
            case 7u: {
                return f32_to_f64(bf16_to_f32(v.x));
            }
            default: {
                return v;
            }
        }
    }
    return v;
}

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x + gid.y * p.row_stride;
    if (i >= p.n) {
        return;
    }
    switch p.dst_type {
        case 1u, 7u: {
            let j = 2u * i;
            var hi = dst[i] >> 16u;
            if (j + 1u < p.elems) {
                hi = to16(j + 1u);
            }
            dst[i] = to16(j) | (hi << 16u);
        }
        case 2u, 5u, 6u: {
            let v = to64(i);
            dst[2u * i] = v.x;
            dst[2u * i + 1u] = v.y;
        }
        default: {
            dst[i] = to32(i);
        }
    }
}
