// max and min for f64, as minmax_f32.wgsl does for f32: a NaN loses to a
// number, and -0 counts as less than +0. naga cannot bitcast an f64, so the
// tests look at the value converted to f32, which keeps a NaN a NaN and
// the sign of every value (a zero's included).
fn is_nan(x: C) -> bool {
    return (bitcast<u32>(f32(x)) & 0x7fffffffu) > 0x7f800000u;
}
fn is_neg(x: C) -> bool {
    return (bitcast<u32>(f32(x)) >> 31u) == 1u;
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
