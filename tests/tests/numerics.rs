//! Every kernel against the reference interpreter at the edge values of
//! every dtype, bit for bit (any NaN matches any NaN): the n-ary folds, `eq`, `div`
//! by divisors from 1 to 2^64 - 1, every `cast` the IR defines, and `Mean`
//! lowered with every algorithm (summed in its accumulator), on CPU arenas
//! and on a Vulkan device (lavapipe here; `SKIP:` without one, unless
//! `FUEL_REQUIRE_VULKAN=1`). Inputs come from `interp::edge_inputs`, so two
//! operands meet in every pair of edge values.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use fuel_graph_ext::half::f16;
use fuel_graph_ext::interp::{edge_inputs, edge_values, interpret, HostTensor};
use fuel_graph_ext::pass::{DebugOptions, PassContext, PassManager};
use fuel_graph_ext::{op, text, DType, Device, Topology};
use fuel_runtime::exec::{self, ExecError, Tensor};
use fuel_test_support::{assert_no_leaks, devices_or_skip};
use std::collections::BTreeMap;
use std::sync::Arc;

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
    // `eq` compares exactly two: both orders, and an operand with itself.
    for (a, b) in [(0, 1), (1, 0), (0, 0)] {
        lines.push(format!("  %{} = eq %{a}, %{b} @{dev} : {t}", lines.len()));
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
    let exe = fuel_test_support::compile_env(&g, &[dev])?;
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
const VULKAN: [DType; 8] = [
    DType::F32,
    DType::F16,
    DType::BF16,
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
    let e = fuel_test_support::compile_env(&g, &[v0])
        .err()
        .expect("refused")
        .to_string();
    assert!(
        e.contains("`div {by=4294967296}` is not supported on vulkan:0"),
        "{e}"
    );
}

/// `all_reduce`, `reduce_scatter` and `reduce` means of two `dtype` shards
/// on `devs`, lowered with `algorithm` (the `driver` one through the host
/// driver), run, and compared with the interpreter's meaning of the
/// original graph. Two ranks, so that every algorithm adds the same two
/// values (float addition is commutative, not associative).
fn mean_case(dtype: DType, devs: [Device; 2], algorithm: &str) -> Result<(), ExecError> {
    let len = edge_values(dtype).len();
    let n = len * len;
    let [d0, d1] = devs;
    let src = format!(
        "graph @mean {{
  %0 = input \"a\" @{d0} : {dtype}[2,{n}]
  %1 = input \"b\" @{d1} : {dtype}[2,{n}]
  %2:2 = all_reduce.mean %0, %1 : {dtype}[2,{n}]
  %3:2 = reduce_scatter.mean %0, %1 {{axis=0}} : {dtype}[1,{n}]
  %4 = reduce.mean %0, %1 {{root=1}} : {dtype}[2,{n}]
  return %2#0, %2#1, %3#0, %3#1, %4
}}
"
    );
    let original = text::parse(&src).unwrap();
    let topo = Arc::new(if algorithm == "driver" {
        Topology::parse("driver cpu\n").unwrap()
    } else {
        Topology::default()
    });
    let mut lowered = original.clone();
    let pipeline = fuel_collective::pipeline_with(&format!("algorithm={algorithm}"));
    PassManager::new(
        &fuel_collective::registry(),
        &pipeline,
        PassContext {
            topology: topo.clone(),
        },
        DebugOptions::verifying(),
    )
    .unwrap()
    .run(&mut lowered)
    .unwrap_or_else(|e| panic!("{dtype} {algorithm}: {e}"));
    let exe = exec::compile_with(&lowered, &devs, &topo)?;
    let inputs = edge_inputs(&original);
    let want = interpret(&original, &inputs).unwrap();
    let got = exe.run_host(&inputs).unwrap();
    for (k, (g, w)) in got.iter().zip(&want).enumerate() {
        if let Err(e) = g.check_same(w) {
            panic!(
                "{dtype} mean, {algorithm}, result {k}: {e}\n{}",
                text::print(&lowered)
            );
        }
    }
    assert_no_leaks(&exe);
    Ok(())
}

const ALGORITHMS: [&str; 7] = [
    "star",
    "hierarchical",
    "ring",
    "tree",
    "driver",
    "pairwise",
    "split",
];

#[test]
fn means_at_every_edge_with_every_algorithm_on_cpus() {
    for dtype in DType::ALL {
        for algorithm in ALGORITHMS {
            mean_case(dtype, [Device::cpu(0), Device::cpu(1)], algorithm)
                .unwrap_or_else(|e| panic!("{dtype} {algorithm}: {e}"));
        }
    }
}

#[test]
fn means_at_every_edge_with_every_algorithm_on_vulkan() {
    let devs = [Device::vulkan(0), Device::cpu(0)];
    if !devices_or_skip("means_at_every_edge_with_every_algorithm_on_vulkan", &devs) {
        return;
    }
    for dtype in VULKAN {
        let pairwise = ["pairwise, reduce_at=vulkan:0", "pairwise, reduce_at=cpu:0"];
        for algorithm in ["star", "hierarchical", "ring", "tree"]
            .into_iter()
            .chain(pairwise)
        {
            match mean_case(dtype, devs, algorithm) {
                Ok(()) => {}
                Err(ExecError::Unsupported { reason, .. }) => {
                    fuel_test_support::skip_line(format_args!("SKIP: means_at_every_edge_with_every_algorithm_on_vulkan: {dtype}: {reason}"));
                    break;
                }
                Err(e) => panic!("{dtype} {algorithm}: {e}"),
            }
        }
    }
}

/// The examples of issue 12: the f16 mean of 40000 and 40000 was `inf`, the
/// u8 mean of 200 and 200 was 72 (sums that overflowed before dividing).
#[test]
fn the_mean_of_two_large_values_is_that_value() {
    let mut cases = vec![(DType::F16, vec![Device::cpu(0), Device::cpu(1)])];
    cases.push((DType::U8, vec![Device::cpu(0), Device::cpu(1)]));
    if devices_or_skip(
        "the_mean_of_two_large_values_is_that_value",
        &[Device::vulkan(0)],
    ) {
        cases.push((DType::F16, vec![Device::vulkan(0), Device::cpu(0)]));
    }
    for (dtype, devs) in cases {
        let src = format!(
            "graph @m {{\n  %0 = input \"a\" @{} : {dtype}[2]\n  %1 = input \"b\" @{} : {dtype}[2]\n  %2:2 = all_reduce.mean %0, %1 : {dtype}[2]\n  return %2#0, %2#1\n}}\n",
            devs[0], devs[1]
        );
        let mut g = text::parse(&src).unwrap();
        PassManager::new(
            &fuel_collective::registry(),
            fuel_collective::DEFAULT_PIPELINE,
            PassContext::default(),
            DebugOptions::verifying(),
        )
        .unwrap()
        .run(&mut g)
        .unwrap();
        let exe = fuel_test_support::compile_env(&g, &devs).unwrap();
        let inputs: BTreeMap<String, Tensor> = if dtype == DType::F16 {
            let x = [f16::from_f32(40000.0), f16::MAX];
            [("a", x), ("b", x)]
                .map(|(k, v)| (k.to_string(), Tensor::from_slice(&[2], &v).unwrap()))
                .into()
        } else {
            [("a", [200u8, 255]), ("b", [200u8, 255])]
                .map(|(k, v)| (k.to_string(), Tensor::from_slice(&[2], &v).unwrap()))
                .into()
        };
        for out in exe.run(&inputs).unwrap() {
            if dtype == DType::F16 {
                let v = out.to_vec::<f16>().unwrap();
                assert_eq!(v, [f16::from_f32(40000.0), f16::MAX], "{devs:?}");
            } else {
                assert_eq!(out.to_vec::<u8>().unwrap(), [200, 255], "{devs:?}");
            }
        }
        assert_no_leaks(&exe);
    }
}

/// A repeatable generator of 32-bit patterns (64-bit LCG, high bits).
struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> u32 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 32) as u32
    }
}

/// Appends node `body` as the next `%N` line.
fn push(lines: &mut Vec<String>, body: String) {
    lines.push(format!("  %{} = {body}", lines.len()));
}

/// bf16 inputs beyond the edge values, of odd lengths so that the last
/// 32-bit word holds half an element: "a" is every bf16 bit pattern (and
/// one more), "b" pseudo-random patterns; "w" is f32 patterns at every
/// bf16 value plus just under, at and just over half of bf16's last place
/// (the ties), and NaNs whose payload lies only in the bits rounding drops;
/// "x" (with f64) is f64 values at those ties and one f64 step either side,
/// and values past f32's range.
fn bf16_patterns(f64_too: bool) -> (String, BTreeMap<String, HostTensor>) {
    use fuel_graph_ext::half::bf16;
    let v0 = Device::vulkan(0);
    let a: Vec<bf16> = (0..=0x1_0000u32)
        .map(|i| bf16::from_bits(i as u16))
        .collect();
    let mut r = Lcg(3);
    let b: Vec<bf16> = (0..a.len())
        .map(|_| bf16::from_bits(r.next() as u16))
        .collect();
    let mut w: Vec<f32> = Vec::new();
    for h in 0..=0xffffu32 {
        for low in [0u32, 0x0001, 0x7fff, 0x8000, 0x8001, 0xffff] {
            w.push(f32::from_bits(h << 16 | low));
        }
    }
    // The NaNs (and infinities) with low payloads only.
    for bits in [
        0x7f80_0001u32,
        0xff80_0001,
        0x7f80_8000,
        0x7f80_ffff,
        0x7f7f_8000,
    ] {
        w.push(f32::from_bits(bits));
    }
    if w.len().is_multiple_of(2) {
        w.push(f32::from_bits(0x3f80_8000));
    }
    let mut x: Vec<f64> = Vec::new();
    for h in (0..=0xffffu32).step_by(7) {
        let tie = f64::from(f32::from_bits(h << 16 | 0x8000));
        if tie.is_finite() && tie != 0.0 {
            let t = tie.to_bits();
            x.extend([tie, f64::from_bits(t + 1), f64::from_bits(t - 1)]);
        }
    }
    x.extend([
        1e39,
        -1e39,
        1e300,
        f64::MAX,
        f64::from_bits(1),
        -f64::from_bits(1),
        f64::MIN_POSITIVE,
        f64::NAN,
        f64::from_bits(0x7ff0_0000_0000_0001),
        1.0 + 2f64.powi(-8) + 2f64.powi(-45),
        1.0 + 2f64.powi(-8) - 2f64.powi(-45),
    ]);
    if x.len().is_multiple_of(2) {
        x.push(-3.0);
    }
    let (na, nw, nx) = (a.len(), w.len(), x.len());
    let t = format!("bf16[{na}]");
    let mut lines = vec![
        format!("  %0 = input \"a\" @{v0} : {t}"),
        format!("  %1 = input \"b\" @{v0} : {t}"),
        format!("  %2 = input \"w\" @{v0} : f32[{nw}]"),
    ];
    for op in ["add", "mul", "max", "min"] {
        push(&mut lines, format!("{op} %0, %1 @{v0} : {t}"));
        push(
            &mut lines,
            format!("{op} %1, %0, %1, %0, %1, %0, %1, %0, %1, %0 @{v0} : {t}"),
        );
    }
    for by in [2u64, 3, 7, 1000, 1 << 20, (1 << 32) - 1] {
        push(&mut lines, format!("div %0 {{by={by}}} @{v0} : {t}"));
    }
    push(&mut lines, format!("cast %0 {{to=f32}} @{v0} : f32[{na}]"));
    push(&mut lines, format!("cast %0 {{to=f16}} @{v0} : f16[{na}]"));
    push(
        &mut lines,
        format!("cast %2 {{to=bf16}} @{v0} : bf16[{nw}]"),
    );
    push(&mut lines, format!("cast %2 {{to=f16}} @{v0} : f16[{nw}]"));
    let f16_of_a = lines.len() - 3;
    push(
        &mut lines,
        format!("cast %{f16_of_a} {{to=bf16}} @{v0} : {t}"),
    );
    let mut inputs: BTreeMap<String, HostTensor> = [
        ("a", HostTensor::from_slice(&[na], &a).unwrap()),
        ("b", HostTensor::from_slice(&[na], &b).unwrap()),
        ("w", HostTensor::from_slice(&[nw], &w).unwrap()),
    ]
    .map(|(k, v)| (k.to_string(), v))
    .into();
    if f64_too {
        let xi = lines.len();
        lines.push(format!("  %{xi} = input \"x\" @{v0} : f64[{nx}]"));
        push(&mut lines, format!("cast %0 {{to=f64}} @{v0} : f64[{na}]"));
        push(
            &mut lines,
            format!("cast %{xi} {{to=bf16}} @{v0} : bf16[{nx}]"),
        );
        inputs.insert("x".into(), HostTensor::from_slice(&[nx], &x).unwrap());
    }
    let ret: Vec<String> = (3..lines.len())
        .filter(|i| !lines[*i].contains("input"))
        .map(|i| format!("%{i}"))
        .collect();
    let src = format!(
        "graph @bf16 {{\n{}\n  return {}\n}}\n",
        lines.join("\n"),
        ret.join(", ")
    );
    (src, inputs)
}

/// bf16 on Vulkan against the interpreter, bit for bit, past the edge
/// values: every bit pattern folded (in one dispatch and chained past
/// eight operands), divided and cast, and casts to bf16 at every tie, at
/// the largest value, in the subnormals and of NaNs that naive rounding
/// would turn into infinity; odd lengths throughout.
#[test]
fn vulkan_bf16_equals_the_interpreter_at_every_pattern_and_tie() {
    let v0 = Device::vulkan(0);
    let name = "vulkan_bf16_equals_the_interpreter_at_every_pattern_and_tie";
    if !devices_or_skip(name, &[v0]) {
        return;
    }
    for f64_too in [false, true] {
        let (src, inputs) = bf16_patterns(f64_too);
        let g = text::parse(&src).unwrap();
        let exe = match fuel_test_support::compile_env(&g, &[v0]) {
            Ok(e) => e,
            Err(ExecError::Unsupported { dtype, reason, .. }) if f64_too => {
                assert_eq!(dtype, DType::F64, "{reason}");
                fuel_test_support::skip_line(format_args!("SKIP: {name}: f64: {reason}"));
                continue;
            }
            Err(e) => panic!("{e}"),
        };
        let want = interpret(&g, &inputs).unwrap();
        let got = exe.run_host(&inputs).unwrap();
        assert_eq!(got.len(), want.len());
        let ret = src.lines().rev().nth(1).unwrap_or("");
        let names: Vec<&str> = ret
            .trim()
            .trim_start_matches("return ")
            .split(", ")
            .collect();
        for (k, (g, w)) in got.iter().zip(&want).enumerate() {
            if let Err(e) = g.check_same(w) {
                let id = names.get(k).copied().unwrap_or("?");
                let line = src
                    .lines()
                    .find(|l| l.trim_start().starts_with(&format!("{id} =")))
                    .unwrap_or("?");
                panic!("{}: {e}", line.trim());
            }
        }
        assert_no_leaks(&exe);
    }
}
