//! The transport casts on Vulkan (f32 to bf16 or f16 and back, each run by
//! its own entry point of `transport_cast.wgsl`) against the interpreter,
//! bit for bit, NaNs included: every 16-bit pattern widened, and f32s at
//! and beside every rounding midpoint of both half types, subnormals,
//! infinities and NaNs narrowed, at odd lengths (the last word holds one
//! element) and even ones. `SKIP:` without a Vulkan device, unless
//! `FUEL_REQUIRE_VULKAN=1`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use fuel_graph_ext::half::{bf16, f16};
use fuel_graph_ext::interp::{interpret, HostTensor};
use fuel_graph_ext::{text, Device};
use fuel_test_support::{assert_no_leaks, devices_or_skip};
use std::collections::BTreeMap;

/// f32 bit patterns around every bf16 and f16 rounding case.
fn f32_patterns() -> Vec<u32> {
    let mut v: Vec<u32> = (0..=u16::MAX)
        .flat_map(|h| {
            let b = u32::from(h) << 16;
            [b, b | 0x7fff, b | 0x8000, b | 0x8001, b | 1]
        })
        .collect();
    for h in 0..=u16::MAX {
        let w = f16::from_bits(h).to_f32().to_bits();
        v.extend([w + 0xfff, w + 0x1000, w + 0x1001]);
    }
    for k in 0..2048u32 {
        let m = (((f64::from(k) + 0.5) * 2f64.powi(-24)) as f32).to_bits();
        v.extend([m - 1, m, m + 1]);
    }
    v.extend([
        1,
        0x807f_ffff,
        0x7f80_0001,
        0xff80_0001,
        0x7fbf_ffff,
        0x477f_f000,
    ]);
    v
}

/// Every result of `src` on `vulkan:0` against the interpreter's bytes.
fn check(src: &str, inputs: &BTreeMap<String, HostTensor>) {
    let g = text::parse(src).unwrap();
    let exe = fuel_test_support::compile_env(&g, &[Device::vulkan(0)]).unwrap();
    let want = interpret(&g, inputs).unwrap();
    let got = exe.run_host(inputs).unwrap();
    let lines: Vec<&str> = src.lines().filter(|l| l.contains("= cast")).collect();
    for (k, (g, w)) in got.iter().zip(&want).enumerate() {
        let (gb, wb) = (g.bytes(), w.bytes());
        assert_eq!(gb.len(), wb.len());
        if let Some(at) = gb.iter().zip(wb).position(|(a, b)| a != b) {
            panic!(
                "{}: byte {at} of {}: got {:#04x}, want {:#04x}",
                lines.get(k).unwrap_or(&"?").trim(),
                gb.len(),
                gb[at],
                wb[at]
            );
        }
    }
    assert_no_leaks(&exe);
}

#[test]
fn vulkan_transport_casts_equal_the_interpreter_bit_for_bit() {
    let v0 = Device::vulkan(0);
    if !devices_or_skip(
        "vulkan_transport_casts_equal_the_interpreter_bit_for_bit",
        &[v0],
    ) {
        return;
    }
    let wide: Vec<f32> = f32_patterns().into_iter().map(f32::from_bits).collect();
    let halves: Vec<u16> = (0..=u16::MAX).collect();
    let bfs: Vec<bf16> = halves.iter().map(|h| bf16::from_bits(*h)).collect();
    let hfs: Vec<f16> = halves.iter().map(|h| f16::from_bits(*h)).collect();
    // Both parities of each: the full lists, and one element fewer.
    for cut in [0, 1] {
        let (nw, nh) = (wide.len() - cut, halves.len() - cut);
        let src = format!(
            "graph @transport_casts {{
  %0 = input \"w\" @{v0} : f32[{nw}]
  %1 = input \"b\" @{v0} : bf16[{nh}]
  %2 = input \"h\" @{v0} : f16[{nh}]
  %3 = cast %0 {{to=bf16}} @{v0} : bf16[{nw}]
  %4 = cast %0 {{to=f16}} @{v0} : f16[{nw}]
  %5 = cast %1 {{to=f32}} @{v0} : f32[{nh}]
  %6 = cast %2 {{to=f32}} @{v0} : f32[{nh}]
  return %3, %4, %5, %6
}}
"
        );
        let inputs: BTreeMap<String, HostTensor> = [
            ("w", HostTensor::from_slice(&[nw], &wide[..nw]).unwrap()),
            ("b", HostTensor::from_slice(&[nh], &bfs[..nh]).unwrap()),
            ("h", HostTensor::from_slice(&[nh], &hfs[..nh]).unwrap()),
        ]
        .map(|(k, v)| (k.to_string(), v))
        .into();
        check(&src, &inputs);
    }
}
