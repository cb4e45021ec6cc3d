// The NaN and sign tests of f32 (and f16, which computes in f32) that
// `minmax.wgsl`'s max and min compare with. Pasted into elementwise.wgsl
// by build.rs, `minmax.wgsl` after it.
fn is_nan(x: C) -> bool {
    return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u;
}
fn is_neg(x: C) -> bool {
    return (bitcast<u32>(x) >> 31u) == 1u;
}
