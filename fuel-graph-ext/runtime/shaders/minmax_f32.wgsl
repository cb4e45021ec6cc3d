// max and min for f32 (and f16, which computes in f32), the same on
// every device (WGSL leaves NaN to the device): a NaN loses to a number,
// and -0 counts as less than +0. Pasted into elementwise.wgsl by build.rs.
fn is_nan(x: C) -> bool {
    return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u;
}
fn is_neg(x: C) -> bool {
    return (bitcast<u32>(x) >> 31u) == 1u;
}
fn fmax(x: C, y: C) -> C {
    if (is_nan(x)) { return y; }
    if (is_nan(y) || x > y) { return x; }
    if (y > x || is_neg(x)) { return y; }
    return x;
}
fn fmin(x: C, y: C) -> C {
    if (is_nan(x)) { return y; }
    if (is_nan(y) || x < y) { return x; }
    if (y < x || !is_neg(x)) { return y; }
    return x;
}
