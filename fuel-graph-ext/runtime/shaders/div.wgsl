// `div {by=N}` for every dtype the Vulkan backend holds, with 32-bit
// integer arithmetic only, so the result is exact on any device: the
// shader's float `/` may be 2.5 ulp off, and 64-bit integers need a
// device feature. Integers divide toward zero; floats give the exact
// quotient rounded once to nearest, ties to even (subnormals included),
// by long division of the significand. N is 1 to 2^32 - 1 (kernels.rs
// refuses larger divisors at compile time).
//
// Codes: 0 f32, 1 f16, 2 f64, 3 i32, 4 u32, 5 i64, 6 u64, 7 bf16 (as
// cast.wgsl). Binding 0 is the operand and binding 8 the result, as 32-bit
// words. Invocation `i` writes one unit: two 16-bit elements (one word;
// of odd length, the last word's high half is kept as it was), one 32-bit
// element, or one 64-bit element (two words).

struct Params { n: u32, row_stride: u32, dtype: u32, elems: u32, by: u32 }

@group(0) @binding(0) var<storage, read> src: array<u32>;
@group(0) @binding(8) var<storage, read_write> dst: array<u32>;
var<immediate> p: Params;

// 64-bit values as vec2<u32> (x: low word, y: high word).

fn bit_of(v: vec2<u32>, i: u32) -> u32 {
    if (i >= 32u) {
        return (v.y >> (i - 32u)) & 1u;
    }
    return (v.x >> i) & 1u;
}

fn bit_len(v: vec2<u32>) -> u32 {
    if (v.y != 0u) {
        return 33u + firstLeadingBit(v.y);
    }
    if (v.x != 0u) {
        return 1u + firstLeadingBit(v.x);
    }
    return 0u;
}

// v >> s, for s from 1 to 63.
fn shr(v: vec2<u32>, s: u32) -> vec2<u32> {
    if (s >= 32u) {
        return vec2<u32>(v.y >> (s - 32u), 0u);
    }
    return vec2<u32>((v.x >> s) | (v.y << (32u - s)), v.y >> s);
}

// Whether any bit below bit `s` is set.
fn low_bits(v: vec2<u32>, s: u32) -> bool {
    if (s == 0u) {
        return false;
    }
    if (s >= 32u) {
        let m = select((1u << (s - 32u)) - 1u, 0u, s == 32u);
        return v.x != 0u || (v.y & m) != 0u;
    }
    return (v.x & ((1u << s) - 1u)) != 0u;
}

fn add1(v: vec2<u32>) -> vec2<u32> {
    let x = v.x + 1u;
    return vec2<u32>(x, v.y + select(0u, 1u, x == 0u));
}

fn negate(v: vec2<u32>) -> vec2<u32> {
    return add1(vec2<u32>(~v.x, ~v.y));
}

// Long division by `d`: the quotient so far and the remainder (< d).
struct LongDiv { q: vec2<u32>, r: u32 }

// One step: the remainder takes the next dividend bit, the quotient one
// more bit. The remainder's top bit is kept as a carry, so `d` may use
// all 32 bits.
fn step(s: LongDiv, bit: u32, d: u32) -> LongDiv {
    let carry = s.r >> 31u;
    var r = (s.r << 1u) | bit;
    var q = vec2<u32>(s.q.x << 1u, (s.q.y << 1u) | (s.q.x >> 31u));
    if (carry == 1u || r >= d) {
        r = r - d;
        q.x = q.x | 1u;
    }
    return LongDiv(q, r);
}

// a / d for a 64-bit a, truncated.
fn div64(a: vec2<u32>, d: u32) -> vec2<u32> {
    var s = LongDiv(vec2<u32>(0u, 0u), 0u);
    let len = bit_len(a);
    for (var b = len; b > 0u; b = b - 1u) {
        s = step(s, bit_of(a, b - 1u), d);
    }
    return s.q;
}

// m * 2^ex / d (m not zero, below 2^53; d >= 2) rounded to `prec`
// significant bits, nearest even, with bits no finer than 2^min_lsb:
// returns the significand and the weight of its last bit.
struct Rounded { mant: vec2<u32>, lsb: i32 }

fn div_round(m: vec2<u32>, ex: i32, d: u32, prec: u32, min_lsb: i32) -> Rounded {
    var s = LongDiv(vec2<u32>(0u, 0u), 0u);
    for (var b = bit_len(m); b > 0u; b = b - 1u) {
        s = step(s, bit_of(m, b - 1u), d);
    }
    // More quotient bits until there are prec + 2 of them (a guard bit
    // and one more); the remainder is the sticky rest.
    var k = 0;
    for (var it = 0u; it < 96u && bit_len(s.q) < prec + 2u; it = it + 1u) {
        s = step(s, 0u, d);
        k = k + 1;
    }
    let len = i32(bit_len(s.q));
    let shift = max(len - i32(prec), min_lsb - (ex - k));
    var mant = vec2<u32>(0u, 0u);
    var guard = 0u;
    var sticky = s.r != 0u;
    if (shift > len) {
        // Below half of the last place: rounds to zero.
        sticky = true;
    } else {
        let sh = u32(shift);
        mant = shr(s.q, sh);
        guard = bit_of(s.q, sh - 1u);
        sticky = sticky || low_bits(s.q, sh - 1u);
    }
    if (guard == 1u && (sticky || (mant.x & 1u) == 1u)) {
        mant = add1(mant);
    }
    return Rounded(mant, ex - k + shift);
}

// A float of at most 32 bits divided by `d`: `sign` is its sign bit,
// `frac` the width of its fraction, `emax` its exponent field at its
// largest (infinity and NaN) and `min_lsb` the weight of a subnormal's last
// bit (f32: -149, f16: -24, bf16: -133). A zero, an infinity, a NaN and a
// divisor of 1 give `x` back.
fn div_float(x: u32, d: u32, sign: u32, frac: u32, emax: u32, min_lsb: i32) -> u32 {
    let e = (x >> frac) & emax;
    let f = x & ((1u << frac) - 1u);
    if (e == emax || (e == 0u && f == 0u) || d <= 1u) {
        return x;
    }
    var m = f;
    var ex = min_lsb;
    if (e != 0u) {
        m = f | (1u << frac);
        ex = i32(e) + min_lsb - 1;
    }
    let r = div_round(vec2<u32>(m, 0u), ex, d, frac + 1u, min_lsb);
    // The exponent field is lsb - min_lsb plus the implicit bit the
    // significand carries (none for a subnormal).
    return (x & sign) | ((u32(r.lsb - min_lsb) << frac) + r.mant.x);
}

fn div_f32(x: u32, d: u32) -> u32 {
    return div_float(x, d, 0x80000000u, 23u, 0xffu, -149);
}

// A 16-bit float (f16 or bf16, as `p.dtype` says) divided by `d`.
fn div16(h: u32, d: u32) -> u32 {
    if (p.dtype == 7u) {
        return div_float(h, d, 0x8000u, 7u, 0xffu, -133);
    }
    return div_float(h, d, 0x8000u, 10u, 0x1fu, -24);
}

fn div_f64(v: vec2<u32>, d: u32) -> vec2<u32> {
    let sign = v.y & 0x80000000u;
    let e = (v.y >> 20u) & 0x7ffu;
    let fh = v.y & 0xfffffu;
    if (e == 0x7ffu || (e == 0u && fh == 0u && v.x == 0u) || d <= 1u) {
        return v;
    }
    var m = vec2<u32>(v.x, fh);
    var ex = -1074;
    if (e != 0u) {
        m.y = fh | 0x100000u;
        ex = i32(e) - 1075;
    }
    let r = div_round(m, ex, d, 53u, -1074);
    return vec2<u32>(r.mant.x, sign | ((u32(r.lsb + 1074) << 20u) + r.mant.y));
}

fn div_i32(x: u32, d: u32) -> u32 {
    // The magnitude as u32 (2^31 for the most negative value), divided,
    // and the sign put back; wrapping keeps MIN / 1 at MIN.
    let neg = (x >> 31u) == 1u;
    let q = select(x, 0u - x, neg) / d;
    return select(q, 0u - q, neg);
}

fn div_i64(v: vec2<u32>, d: u32) -> vec2<u32> {
    let neg = (v.y >> 31u) == 1u;
    let q = div64(select(v, negate(v), neg), d);
    return select(q, negate(q), neg);
}

// Element `j` of a 16-bit operand.
fn half_at(j: u32) -> u32 {
    return (src[j >> 1u] >> ((j & 1u) * 16u)) & 0xffffu;
}

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x + gid.y * p.row_stride;
    if (i >= p.n) {
        return;
    }
    let d = p.by;
    switch p.dtype {
        case 0u: {
            dst[i] = div_f32(src[i], d);
        }
        case 1u, 7u: {
            let j = 2u * i;
            var hi = dst[i] >> 16u;
            if (j + 1u < p.elems) {
                hi = div16(half_at(j + 1u), d);
            }
            dst[i] = div16(half_at(j), d) | (hi << 16u);
        }
        case 2u: {
            let v = div_f64(vec2<u32>(src[2u * i], src[2u * i + 1u]), d);
            dst[2u * i] = v.x;
            dst[2u * i + 1u] = v.y;
        }
        case 3u: {
            dst[i] = div_i32(src[i], d);
        }
        case 5u: {
            let v = div_i64(vec2<u32>(src[2u * i], src[2u * i + 1u]), d);
            dst[2u * i] = v.x;
            dst[2u * i + 1u] = v.y;
        }
        case 6u: {
            let v = div64(vec2<u32>(src[2u * i], src[2u * i + 1u]), d);
            dst[2u * i] = v.x;
            dst[2u * i + 1u] = v.y;
        }
        default: {
            dst[i] = src[i] / d;
        }
    }
}
