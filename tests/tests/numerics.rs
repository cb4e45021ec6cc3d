//! Every kernel against the reference interpreter at the edge values of
//! every dtype, bit for bit (any NaN matches any NaN): the n-ary folds, `div`
//! by divisors from 1 to 2^64 - 1, and every `cast` the IR defines, on CPU
//! arenas and on a Vulkan device (lavapipe here; `SKIP:` without one, unless
//! `FUEL_REQUIRE_VULKAN=1`). Inputs come from `interp::edge_inputs`, so two
//! operands meet in every pair of edge values.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use fuel_graph_ext::exec::{self, ExecError};
use fuel_graph_ext::interp::{edge_inputs, edge_values, interpret};
use fuel_graph_ext::{op, text, DType, Device};
use fuel_tests::{assert_no_leaks, devices_or_skip};

/// Divisors every backend takes, and those past 32 bits.
const DIVISORS: [u64; 12] = [
    1,
    2,
    3,
    7,
    (1 << 24) - 1,
    1 << 24,
    (1 << 24) + 1,
    1 << 31,
    (1 << 31) + 1,
    3_000_000_000,
    (1 << 32) - 1,
    1000,
];
const WIDE_DIVISORS: [u64; 4] = [1 << 32, (1 << 53) + 1, 1 << 63, u64::MAX];

/// A graph on `dev` over two `dtype` inputs of `n` elements: every fold,
/// `div` by each divisor, and a cast to each of `casts`.
fn graph(dtype: DType, dev: Device, divisors: &[u64], casts: &[DType]) -> String {
    let len = edge_values(dtype).len();
    let n = len * len;
    let t = format!("{dtype}[{n}]");
    let mut lines = vec![
        format!("  %0 = input \"a\" @{dev} : {t}"),
        format!("  %1 = input \"b\" @{dev} : {t}"),
    ];
    for op in ["add", "mul", "max", "min"] {
        lines.push(format!("  %{} = {op} %0, %1 @{dev} : {t}", lines.len()));
        lines.push(format!("  %{} = {op} %1, %0, %1 @{dev} : {t}", lines.len()));
    }
    for by in divisors {
        lines.push(format!(
            "  %{} = div %0 {{by={by}}} @{dev} : {t}",
            lines.len()
        ));
    }
    for to in casts {
        lines.push(format!(
            "  %{} = cast %0 {{to={to}}} @{dev} : {to}[{n}]",
            lines.len()
        ));
    }
    let ret: Vec<String> = (2..lines.len()).map(|i| format!("%{i}")).collect();
    format!(
        "graph @edges {{\n{}\n  return {}\n}}\n",
        lines.join("\n"),
        ret.join(", ")
    )
}

/// Runs `src` on `dev` with edge inputs and checks every result against
/// the interpreter; `Err` with the reason when the backend refuses it.
fn check(src: &str, dev: Device) -> Result<(), ExecError> {
    let g = text::parse(src).unwrap();
    let exe = exec::compile(&g, &[dev])?;
    let inputs = edge_inputs(&g);
    let want = interpret(&g, &inputs).unwrap();
    let got = exe.run_host(&inputs).unwrap();
    assert_eq!(got.len(), want.len());
    let lines: Vec<&str> = src.lines().skip(3).collect();
    for (k, (g, w)) in got.iter().zip(&want).enumerate() {
        if let Err(e) = g.check_same(w) {
            panic!("{}: {e}", lines.get(k).unwrap_or(&"?").trim());
        }
    }
    assert_no_leaks(&exe);
    Ok(())
}

fn casts_from(dtype: DType, held: &[DType]) -> Vec<DType> {
    held.iter()
        .copied()
        .filter(|to| op::cast_defined(dtype, *to).is_ok())
        .collect()
}

#[test]
fn cpu_kernels_equal_the_interpreter_at_every_edge() {
    let mut divisors = DIVISORS.to_vec();
    divisors.extend(WIDE_DIVISORS);
    for dtype in DType::ALL {
        let src = graph(
            dtype,
            Device::cpu(0),
            &divisors,
            &casts_from(dtype, &DType::ALL),
        );
        check(&src, Device::cpu(0)).unwrap_or_else(|e| panic!("{dtype}: {e}"));
    }
}

/// The dtypes Vulkan can hold where the device has the features.
const VULKAN: [DType; 7] = [
    DType::F32,
    DType::F16,
    DType::F64,
    DType::I32,
    DType::U32,
    DType::I64,
    DType::U64,
];

#[test]
fn vulkan_kernels_equal_the_interpreter_at_every_edge() {
    let v0 = Device::vulkan(0);
    if !devices_or_skip("vulkan_kernels_equal_the_interpreter_at_every_edge", &[v0]) {
        return;
    }
    for dtype in VULKAN {
        let src = graph(dtype, v0, &DIVISORS, &casts_from(dtype, &VULKAN));
        match check(&src, v0) {
            Ok(()) => {}
            Err(ExecError::Unsupported { reason, .. }) => {
                println!(
                    "SKIP: vulkan_kernels_equal_the_interpreter_at_every_edge: {dtype}: {reason}"
                );
            }
            Err(e) => panic!("{dtype}: {e}"),
        }
    }
}

/// Vulkan's `div` takes a 32-bit divisor: a larger one is refused when the
/// graph is compiled, naming the divisor, before anything runs.
#[test]
fn vulkan_refuses_a_divisor_past_32_bits_at_compile_time() {
    let v0 = Device::vulkan(0);
    if !devices_or_skip(
        "vulkan_refuses_a_divisor_past_32_bits_at_compile_time",
        &[v0],
    ) {
        return;
    }
    let src = graph(DType::I32, v0, &[1 << 32], &[]);
    let g = text::parse(&src).unwrap();
    let e = exec::compile(&g, &[v0]).err().expect("refused").to_string();
    assert!(
        e.contains("`div {by=4294967296}` is not supported on vulkan:0"),
        "{e}"
    );
}
