// The bit conversions between f32 and the two 16-bit floats, in integer
// arithmetic only, so that every device gives the interpreter's bits: f16
// and bf16 widen exactly, f32 narrows to nearest, ties to even, with
// subnormals, overflow to infinity, and a NaN made the quiet NaN of its
// sign. No kernel of its own: build.rs appends it to the kernels that
// convert (`cast.wgsl`, `transport_cast.wgsl`), since WGSL has no include.

// f16 bits to f32 bits (exact).
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

// f32 bits to f16 bits, rounded to nearest even.
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
        // An f32 subnormal is below 2^-126, far under half of f16's
        // smallest subnormal (2^-25): it rounds to zero.
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
    let guard = (m >> (shift - 1u)) & 1u;
    let sticky = (m & ((1u << (shift - 1u)) - 1u)) != 0u;
    return sign | pack_narrowed(round_even(m >> shift, guard, sticky), te, 10u, 0x7c00u);
}

// `q` rounded to nearest, ties to even, given the first bit cut from below
// it (`guard`) and whether any bit below that was set (`sticky`): one
// more where the cut part is past half, or half and `q` odd.
fn round_even(q: u32, guard: u32, sticky: bool) -> u32 {
    if (guard == 1u && (sticky || (q & 1u) == 1u)) {
        return q + 1u;
    }
    return q;
}

// The bits below the sign of a float with a `frac`-bit fraction, from its
// rounded significand `q` (with the leading one where the biased exponent
// `te` is above 0; `te` 0 is a subnormal). A rounding that carried out of
// the significand runs on into the exponent, and anything past the
// largest finite value is `inf`. f32_to_f16 here and cast.wgsl's
// f64_to_f32 narrow through it.
fn pack_narrowed(q: u32, te: i32, frac: u32, inf: u32) -> u32 {
    var bits = q;
    if (te > 0) {
        bits = (u32(te - 1) << frac) + q;
    }
    return min(bits, inf);
}

// bf16 bits to f32 bits (exact: bf16 is the top half of an f32). A NaN
// is made quiet, as the host's conversion does.
fn bf16_to_f32(h: u32) -> u32 {
    if ((h & 0x7fffu) > 0x7f80u) {
        return (h | 0x40u) << 16u;
    }
    return h << 16u;
}

// f32 bits to bf16 bits, rounded to nearest even: adding just under half
// of bf16's last place, plus one when that place is odd, carries into it
// exactly when the rest is past half, or half with an odd place. The carry
// runs on into the exponent as it should (to infinity past bf16's largest
// value), and subnormals need nothing apart. A NaN, however low its
// payload, becomes the quiet NaN of its sign with no payload, the bits the
// interpreter gives.
fn f32_to_bf16(x: u32) -> u32 {
    if ((x & 0x7fffffffu) > 0x7f800000u) {
        return ((x >> 16u) & 0x8000u) | 0x7fc0u;
    }
    return (x + 0x7fffu + ((x >> 16u) & 1u)) >> 16u;
}

