// The NaN and sign tests of f64 that `minmax.wgsl`'s max and min compare
// with, as minmax_f32.wgsl has them for f32. naga cannot bitcast an f64,
// so they look at the value converted to f32, which keeps a NaN a NaN
// and the sign of every value (a zero's included).
fn is_nan(x: C) -> bool {
    return (bitcast<u32>(f32(x)) & 0x7fffffffu) > 0x7f800000u;
}
fn is_neg(x: C) -> bool {
    return (bitcast<u32>(f32(x)) >> 31u) == 1u;
}
