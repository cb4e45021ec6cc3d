// The n-ary element-wise ops on bf16, which WGSL has no type for. A bf16 is
// the top half of an f32, so each element is widened to f32 exactly (a
// shift), combined there, and rounded back to bf16 after every step, to
// nearest with ties to even, with integer arithmetic (`narrow`), as the
// interpreter rounds: f32 holds every exact product of two bf16 values and
// has more than twice bf16's precision plus two bits, so the f32 step and
// the rounding to bf16 give the correctly rounded bf16 result.
//
// Elements are stored two to a 32-bit word (element 2i in the low half of
// word i). Invocation `i` writes word `i`: `n` counts words and `elems`
// elements; when `elems` is odd the last word's high half is not an
// element and is written back as it was. The rest is as
// `elementwise.wgsl`: bindings 0..7 are the operands (unused ones repeat
// operand 0), binding 8 the result, `op` is 0 add, 1 mul, 2 max, 3 min,
// and with `onto` = 1 the fold starts from the result's own elements.
// build.rs pastes `minmax_f32.wgsl` and `minmax.wgsl` (fmax, fmin) in
// below the bindings.
alias C = f32;

struct Params { n: u32, row_stride: u32, count: u32, op: u32, elems: u32, onto: u32 }

@group(0) @binding(0) var<storage, read> a0: array<u32>;
@group(0) @binding(1) var<storage, read> a1: array<u32>;
@group(0) @binding(2) var<storage, read> a2: array<u32>;
@group(0) @binding(3) var<storage, read> a3: array<u32>;
@group(0) @binding(4) var<storage, read> a4: array<u32>;
@group(0) @binding(5) var<storage, read> a5: array<u32>;
@group(0) @binding(6) var<storage, read> a6: array<u32>;
@group(0) @binding(7) var<storage, read> a7: array<u32>;
@group(0) @binding(8) var<storage, read_write> dst: array<u32>;
var<immediate> p: Params;

FLOATS

// bf16 bits to the f32 of the same value (exact).
fn widen(h: u32) -> f32 {
    return bitcast<f32>(h << 16u);
}

// An f32 to bf16 bits, rounded to nearest even; overflow goes to infinity
// through the carry, and a NaN stays a NaN (made quiet, so that a payload
// only in the low half cannot turn into infinity).
fn narrow(x: f32) -> u32 {
    let b = bitcast<u32>(x);
    if ((b & 0x7fffffffu) > 0x7f800000u) {
        return (b >> 16u) | 0x40u;
    }
    return (b + 0x7fffu + ((b >> 16u) & 1u)) >> 16u;
}

fn combine(x: u32, y: u32) -> u32 {
    let a = widen(x);
    let b = widen(y);
    var r: f32;
    switch p.op {
        case 0u: { r = a + b; }
        case 1u: { r = a * b; }
        case 2u: { r = fmax(a, b); }
        // eq: 1 where equal, else 0 (a NaN equals nothing, -0 equals +0).
        case 4u: { r = select(0.0, 1.0, a == b); }
        default: { r = fmin(a, b); }
    }
    return narrow(r);
}

// Element `k` (0 low, 1 high) of word `w`.
fn part(w: u32, k: u32) -> u32 {
    return (w >> (16u * k)) & 0xffffu;
}

// The fold of element `k` of word `i`, as bf16 bits.
fn fold(i: u32, k: u32) -> u32 {
    var acc: u32;
    if (p.onto == 1u) {
        acc = combine(part(dst[i], k), part(a0[i], k));
    } else {
        acc = part(a0[i], k);
    }
    if (p.count > 1u) { acc = combine(acc, part(a1[i], k)); }
    if (p.count > 2u) { acc = combine(acc, part(a2[i], k)); }
    if (p.count > 3u) { acc = combine(acc, part(a3[i], k)); }
    if (p.count > 4u) { acc = combine(acc, part(a4[i], k)); }
    if (p.count > 5u) { acc = combine(acc, part(a5[i], k)); }
    if (p.count > 6u) { acc = combine(acc, part(a6[i], k)); }
    if (p.count > 7u) { acc = combine(acc, part(a7[i], k)); }
    return acc;
}

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x + gid.y * p.row_stride;
    if (i >= p.n) {
        return;
    }
    let lo = fold(i, 0u);
    var hi: u32;
    if (2u * i + 1u < p.elems) {
        hi = fold(i, 1u);
    } else {
        hi = part(dst[i], 1u);
    }
    dst[i] = lo | (hi << 16u);
}
