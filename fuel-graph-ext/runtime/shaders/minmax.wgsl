// max and min for the floats, the same on every device (WGSL leaves NaN
// to the device): a NaN loses to a number, and -0 counts as less than +0.
// In terms of `is_nan` and `is_neg`, which `minmax_f32.wgsl` and
// `minmax_f64.wgsl` define for their type; build.rs pastes it after
// either.
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
