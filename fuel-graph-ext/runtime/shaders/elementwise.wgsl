// One kernel for the n-ary element-wise ops, for one element type. build.rs
// fills in ENABLE, T (the stored type), C (the type arithmetic runs in; f16
// computes in f32 and rounds once per step), and MAX/MIN (the comparisons:
// the floats' `fmax`/`fmin` below, which define NaN and signed zeros, or
// the integers' built-ins). Division has its own kernel, `div.wgsl`.
//
// Bindings 0..7 are the operands (unused ones repeat operand 0), binding 8 is
// the result. `count` says how many operands are real; `op` is 0 add, 1 mul,
// 2 max, 3 min, 4 eq (a comparison of exactly two operands). With `onto` = 1 the fold starts from the
// result's own element (dst = op(dst, a0, ...)), read through binding 8: the
// result is never also bound as a read-only operand, which would alias. The
// dispatch is 2-D because lavapipe allows at most 65535 groups per axis:
// i = x + y * row_stride.
ENABLE
alias T = TYPE;
alias C = CTYPE;

struct Params { n: u32, row_stride: u32, count: u32, op: u32, by: u32, onto: u32 }

@group(0) @binding(0) var<storage, read> a0: array<T>;
@group(0) @binding(1) var<storage, read> a1: array<T>;
@group(0) @binding(2) var<storage, read> a2: array<T>;
@group(0) @binding(3) var<storage, read> a3: array<T>;
@group(0) @binding(4) var<storage, read> a4: array<T>;
@group(0) @binding(5) var<storage, read> a5: array<T>;
@group(0) @binding(6) var<storage, read> a6: array<T>;
@group(0) @binding(7) var<storage, read> a7: array<T>;
@group(0) @binding(8) var<storage, read_write> dst: array<T>;
var<immediate> p: Params;

FLOATS

fn combine(x: C, y: T) -> C {
    let v = C(y);
    var r: C;
    switch p.op {
        case 0u: { r = x + v; }
        case 1u: { r = x * v; }
        case 2u: { r = MAX(x, v); }
        // eq: 1 where equal, else 0 (a NaN equals nothing, -0 equals +0).
        case 4u: { r = select(C(0), C(1), x == v); }
        default: { r = MIN(x, v); }
    }
    // Round to the stored type after every step, as the interpreter does.
    return C(T(r));
}

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x + gid.y * p.row_stride;
    if (i >= p.n) {
        return;
    }
    var acc: C;
    if (p.onto == 1u) {
        acc = combine(C(dst[i]), a0[i]);
    } else {
        acc = C(a0[i]);
    }
    if (p.count > 1u) { acc = combine(acc, a1[i]); }
    if (p.count > 2u) { acc = combine(acc, a2[i]); }
    if (p.count > 3u) { acc = combine(acc, a3[i]); }
    if (p.count > 4u) { acc = combine(acc, a4[i]); }
    if (p.count > 5u) { acc = combine(acc, a5[i]); }
    if (p.count > 6u) { acc = combine(acc, a6[i]); }
    if (p.count > 7u) { acc = combine(acc, a7[i]); }
    dst[i] = T(acc);
}
