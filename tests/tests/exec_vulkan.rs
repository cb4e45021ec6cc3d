//! End-to-end executor tests with Vulkan devices (lavapipe here). Without
//! Vulkan each test prints `SKIP: <reason>`, unless `FUEL_REQUIRE_VULKAN=1`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use fuel_graph_ext::interp::{deterministic_inputs, interpret};
use fuel_graph_ext::{text, Device};
use fuel_runtime::exec;
use fuel_test_support::graphs::kernels;
use fuel_test_support::supported::{compile_error, compile_where_supported};
use fuel_test_support::{
    assert_no_leaks, devices_or_skip, fail_at_every_point, run_and_compare, runs_exactly,
};

const V0: Device = Device::vulkan(0);
const V1: Device = Device::vulkan(1);
const C0: Device = Device::cpu(0);

/// A graph of `ty` values whose sum on vulkan:0 (`%6`) adds `a` there,
/// `b` from vulkan:1 staged through cpu:0, and `c` uploaded from cpu:0;
/// then `rest`: the lines after `%6`, and the return.
fn staged_sum(ty: &str, rest: &str) -> String {
    format!(
        "graph @staged {{
  %0 = input \"a\" @vulkan:0 : {ty}
  %1 = input \"b\" @vulkan:1 : {ty}
  %2 = input \"c\" @cpu:0 : {ty}
  %3 = copy %1 -> cpu:0 : {ty}
  %4 = copy %3 -> vulkan:0 : {ty}
  %5 = copy %2 -> vulkan:0 : {ty}
  %6 = add %0, %4, %5 @vulkan:0 : {ty}
{rest}}}
"
    )
}

/// A graph of `ty` values that folds `a` on vulkan:0 by `op` with `b`
/// uploaded from cpu:0 and `a` again (`%3`), and divides that by `by`
/// (`%4`); then `rest`: the lines after `%4`, and the return.
fn fold_with_an_upload(ty: &str, op: &str, by: u32, rest: &str) -> String {
    format!(
        "graph @upload {{
  %0 = input \"a\" @vulkan:0 : {ty}
  %1 = input \"b\" @cpu:0 : {ty}
  %2 = copy %1 -> vulkan:0 : {ty}
  %3 = {op} %0, %2, %0 @vulkan:0 : {ty}
  %4 = div %3 {{by={by}}} @vulkan:0 : {ty}
{rest}}}
"
    )
}

#[test]
fn all_reduce_cpu_and_vulkan() {
    if !devices_or_skip("all_reduce_cpu_and_vulkan", &[C0, V0]) {
        return;
    }
    for (op, dtype) in [
        ("add", "f32"),
        ("max", "i32"),
        ("mul", "i32"),
        ("min", "f32"),
    ] {
        let src = format!(
            "graph @ar {{
  %0 = input \"a\" @cpu:0 : {dtype}[70000]
  %1 = input \"b\" @vulkan:0 : {dtype}[70000]
  %2 = copy %1 -> cpu:0 : {dtype}[70000]
  %3 = {op} %0, %2 @cpu:0 : {dtype}[70000]
  %4 = copy %3 -> vulkan:0 : {dtype}[70000]
  return %3, %4
}}
"
        );
        run_and_compare(&src, &[C0, V0]);
    }
}

#[test]
fn two_vulkan_devices_staged_through_the_host() {
    if !devices_or_skip("two_vulkan_devices_staged_through_the_host", &[V0, V1, C0]) {
        return;
    }
    // All-reduce over [vulkan:0, vulkan:1, cpu:0], reduced on vulkan:0; the
    // vulkan:1 shard travels vulkan:1 -> cpu:0 -> vulkan:0 and back.
    let src = staged_sum(
        "f32[5000]",
        "  %7 = copy %6 -> cpu:0 : f32[5000]
  %8 = copy %7 -> vulkan:1 : f32[5000]
  return %6, %8, %7
",
    );
    run_and_compare(&src, &[V0, V1, C0]);
}

#[test]
fn kernels_on_vulkan() {
    if !devices_or_skip("kernels_on_vulkan", &[V0]) {
        return;
    }
    run_and_compare(&kernels(V0, V0), &[V0]);
}

#[test]
fn f16_on_vulkan_where_supported() {
    if !devices_or_skip("f16_on_vulkan_where_supported", &[V0, C0]) {
        return;
    }
    let src = fold_with_an_upload(
        "f16[1000]",
        "add",
        2,
        "  %5 = max %4, %0 @vulkan:0 : f16[1000]
  return %3, %5
",
    );
    let g = text::parse(&src).unwrap();
    if compile_where_supported("f16_on_vulkan_where_supported", &g, &[V0, C0]).is_some() {
        run_and_compare(&src, &[V0, C0]);
    }
}

/// bf16 on every Vulkan device, which needs no device feature: inputs,
/// uploads, copies staged between two Vulkan devices, slices that are
/// views (whole words at a 256-byte offset, which every device allows)
/// and copies (at an odd element), concat,
/// folds chained past eight operands, div, casts both ways and downloads,
/// of odd lengths so that a 32-bit word holds the last element and nothing
/// else; bit for bit as the interpreter computes.
#[test]
fn bf16_on_vulkan() {
    if !devices_or_skip("bf16_on_vulkan", &[V0, V1, C0]) {
        return;
    }
    let src = staged_sum(
        "bf16[3001]",
        "  %7 = slice %6 {axis=0, len=1000, start=128} @vulkan:0 : bf16[1000]
  %8 = slice %6 {axis=0, len=1001, start=7} @vulkan:0 : bf16[1001]
  %9 = mul %7, %7 @vulkan:0 : bf16[1000]
  %10 = concat %7, %8, %9 {axis=0} @vulkan:0 : bf16[3001]
  %11 = div %10 {by=3} @vulkan:0 : bf16[3001]
  %12 = max %11, %10 @vulkan:0 : bf16[3001]
  %13 = min %10, %11, %12, %10, %11, %12, %10, %11, %12, %10 @vulkan:0 : bf16[3001]
  %14 = cast %13 {to=f32} @vulkan:0 : f32[3001]
  %15 = div %14 {by=7} @vulkan:0 : f32[3001]
  %16 = cast %15 {to=bf16} @vulkan:0 : bf16[3001]
  %17 = copy %16 -> cpu:0 : bf16[3001]
  %18 = copy %17 -> vulkan:1 : bf16[3001]
  %19 = add %18, %18 @vulkan:1 : bf16[3001]
  return %6, %7, %8, %9, %10, %11, %12, %13, %16, %19
",
    );
    let (exe, _) = run_and_compare(&src, &[V0, V1, C0]);
    let g = text::parse(&src).unwrap();
    let numbering = text::Numbering::new(&g);
    let viewed: Vec<usize> = exe
        .viewed_slices()
        .into_iter()
        .filter_map(|n| numbering.number(n))
        .collect();
    assert_eq!(viewed, [7], "the slice at a 256-byte offset is a view");
}

#[test]
fn f64_and_i64_on_vulkan_where_supported() {
    if !devices_or_skip("f64_and_i64_on_vulkan_where_supported", &[V0, C0]) {
        return;
    }
    for dtype in ["f64", "i64", "u64", "u32"] {
        let t = format!("{dtype}[3000]");
        let src = fold_with_an_upload(
            &t,
            "mul",
            4,
            &format!(
                "  %5 = min %4, %0 @vulkan:0 : {t}
  %6 = slice %5 {{axis=0, len=1000, start=7}} @vulkan:0 : {dtype}[1000]
  return %3, %5, %6
"
            ),
        );
        let g = text::parse(&src).unwrap();
        let what = format!("f64_and_i64_on_vulkan_where_supported: {dtype}");
        if compile_where_supported(&what, &g, &[V0, C0]).is_some() {
            run_and_compare(&src, &[V0, C0]);
        }
    }
}

#[test]
fn unsupported_dtype_is_a_compile_error_naming_both() {
    if !devices_or_skip("unsupported_dtype_is_a_compile_error_naming_both", &[V0]) {
        return;
    }
    let src = "graph @u {
  %0 = input \"a\" @vulkan:0 : u8[4]
  %1 = add %0, %0 @vulkan:0 : u8[4]
  return %1
}
";
    for dtype in ["u8", "bool", "i8", "i16", "u16"] {
        let e = compile_error(&src.replace("u8", dtype));
        assert!(
            e.contains(&format!("dtype {dtype} is not supported on vulkan:0")),
            "{e}"
        );
    }
}

/// u32 and (with shaderInt64) u64 wrap at their extremes on Vulkan exactly
/// as the interpreter says.
#[test]
fn unsigned_folds_wrap_on_vulkan() {
    if !devices_or_skip("unsigned_folds_wrap_on_vulkan", &[V0, C0]) {
        return;
    }
    use fuel_graph_ext::interp::HostTensor;
    use fuel_graph_ext::{DType, TensorType};
    for (dtype, hi) in [(DType::U32, u32::MAX as f64), (DType::U64, 131072.0)] {
        for op in ["add", "mul", "max", "min"] {
            let src = fold_with_an_upload(&format!("{dtype}[8]"), op, 3, "  return %3, %4\n");
            let g = text::parse(&src).unwrap();
            let what = format!("unsigned_folds_wrap_on_vulkan: {dtype}");
            let Some(exe) = compile_where_supported(&what, &g, &[V0, C0]) else {
                continue;
            };
            let ty = TensorType::new(dtype, &[8]);
            let vals = [hi, hi - 1.0, 0.0, 1.0, 2.0, 3.0, hi, 7.0];
            let inputs = [("a", vals), ("b", [hi, 2.0, 5.0, hi, 0.0, 1.0, 3.0, hi])]
                .into_iter()
                .map(|(n, v)| (n.to_string(), HostTensor::new(ty.clone(), v.to_vec())))
                .collect();
            let got = exe.run_host(&inputs).unwrap();
            assert_eq!(got, interpret(&g, &inputs).unwrap(), "{op} {dtype}");
            assert_no_leaks(&exe);
        }
    }
}

#[test]
fn direct_vulkan_to_vulkan_copy_names_the_split_pass() {
    if !devices_or_skip(
        "direct_vulkan_to_vulkan_copy_names_the_split_pass",
        &[V0, V1],
    ) {
        return;
    }
    let src = "graph @x {
  %0 = input \"a\" @vulkan:0 : f32[4]
  %1 = copy %0 -> vulkan:1 : f32[4]
  return %1
}
";
    let e = compile_error(src);
    assert!(e.contains("split-cross-vendor-copies"), "{e}");
}

/// A fault at every point a run passes (uploads, the copy out, kernels on
/// both sides, allocations) ends that run with its exact message and frees
/// everything, and the next run is correct.
#[test]
fn every_fault_on_vulkan_then_a_clean_run() {
    if !devices_or_skip("every_fault_on_vulkan_then_a_clean_run", &[V0, C0]) {
        return;
    }
    // Under a page, so the input is uploaded and its copy moves bytes.
    let g = text::parse(
        "graph @f {
  %0 = input \"a\" @vulkan:0 : f32[512]
  %1 = input \"b\" @cpu:0 : f32[512]
  %2 = copy %1 -> vulkan:0 : f32[512]
  %3 = add %0, %2 @vulkan:0 : f32[512]
  %4 = copy %3 -> cpu:0 : f32[512]
  %5 = max %4, %1 @cpu:0 : f32[512]
  return %5
}
",
    )
    .unwrap();
    let n = fail_at_every_point(&g, &[V0, C0]);
    // Two copies and two kernels at the least, and their allocations.
    assert!(n > 4, "only {n} fault points");
}

/// The star all_reduce the bench times, over 1 MiB per rank, run several
/// times into the same outputs with new inputs each time: buffers come back
/// from the Vulkan pools (mapped on lavapipe) and must hold the new data,
/// and every device's byte counter must return to zero after each run.
#[test]
fn pooled_buffers_carry_new_inputs_across_runs() {
    use fuel_graph_ext::interp::HostTensor;
    if !devices_or_skip("pooled_buffers_carry_new_inputs_across_runs", &[V0, V1, C0]) {
        return;
    }
    let n = 1 << 18;
    let src = format!(
        "graph @ar {{
  %0 = input \"a\" @vulkan:0 : i32[{n}]
  %1 = input \"b\" @vulkan:1 : i32[{n}]
  %2 = input \"c\" @cpu:0 : i32[{n}]
  %3 = copy %0 -> cpu:0 : i32[{n}]
  %4 = copy %1 -> cpu:0 : i32[{n}]
  %5 = add %2, %3, %4 @cpu:0 : i32[{n}]
  %6 = copy %5 -> vulkan:0 : i32[{n}]
  %7 = copy %5 -> vulkan:1 : i32[{n}]
  return %6, %7, %5
}}
"
    );
    let g = text::parse(&src).unwrap();
    let exe = fuel_test_support::compile_env(&g, &[V0, V1, C0]).unwrap();
    let mut outs = Vec::new();
    for round in 0..4 {
        let mut host = deterministic_inputs(&g);
        for (k, t) in host.values_mut().enumerate() {
            let data = (0..t.len())
                .map(|i| ((i * 7 + k * 1000 + round * 100_000) % 1_000_003) as f64 - 500_000.0)
                .collect();
            *t = HostTensor::new(t.ty.clone(), data);
        }
        let inputs: std::collections::BTreeMap<String, exec::Tensor> = host
            .iter()
            .map(|(k, v)| (k.clone(), exec::Tensor::from_host(v)))
            .collect();
        let want = interpret(&g, &host).unwrap();
        exe.run_into(&inputs, &mut outs).unwrap();
        assert_eq!(outs.len(), want.len());
        for (k, (got, w)) in outs.iter().zip(&want).enumerate() {
            assert_eq!(&got.to_host(), w, "round {round}: result {k}");
        }
        assert_no_leaks(&exe);
    }
}

/// Deferred copies (`exec::Options::defer_gpu_copies`) in every
/// position of a fold, on both sides: a Vulkan fold taking host operands
/// first, between and after its own (uploaded into the result, then into
/// one scratch buffer and folded in place, in chunks past 8 operands), and
/// a host fold taking Vulkan operands the same way. Results equal the
/// interpreter's bit for bit, so the left-to-right order is kept.
#[test]
fn folds_with_deferred_operands_in_every_position() {
    if !devices_or_skip("folds_with_deferred_operands_in_every_position", &[V0, C0]) {
        return;
    }
    for (op, dtype) in [
        ("add", "f32"),
        ("max", "i32"),
        ("mul", "f32"),
        ("add", "bf16"),
        ("min", "bf16"),
    ] {
        let mut lines = Vec::new();
        // %0..%4 on cpu:0, %5..%9 on vulkan:0.
        for k in 0..5 {
            lines.push(format!("  %{k} = input \"h{k}\" @cpu:0 : {dtype}[3000]"));
        }
        for k in 5..10 {
            lines.push(format!("  %{k} = input \"v{k}\" @vulkan:0 : {dtype}[3000]"));
        }
        // Each value crosses once, read only by the fold on the other side.
        for k in 0..5 {
            lines.push(format!(
                "  %{} = copy %{k} -> vulkan:0 : {dtype}[3000]",
                10 + k
            ));
            lines.push(format!(
                "  %{} = copy %{} -> cpu:0 : {dtype}[3000]",
                15 + k,
                5 + k
            ));
        }
        // Vulkan fold: host first, own, two hosts, own, host, three own, host:
        // 11 operands, so the in-place folds run in chunks.
        lines.push(format!(
            "  %20 = {op} %10, %5, %11, %12, %6, %13, %7, %8, %9, %14, %5 @vulkan:0 : {dtype}[3000]"
        ));
        // Host fold: Vulkan first, host, two Vulkan, host, Vulkan last.
        lines.push(format!(
            "  %21 = {op} %15, %0, %16, %17, %1, %18, %2, %19 @cpu:0 : {dtype}[3000]"
        ));
        let src = format!(
            "graph @deferred {{\n{}\n  return %20, %21\n}}\n",
            lines.join("\n")
        );
        let g = text::parse(&src).unwrap();
        let plan_defers = exec::schedule::Schedule::new(&g)
            .unwrap()
            .steps
            .iter()
            .filter(|s| matches!(s.work, exec::schedule::Work::Defer { .. }))
            .count();
        assert_eq!(plan_defers, 10, "every crossing copy is deferred");
        run_and_compare(&src, &[V0, C0]);
    }
}

/// Copies into the host deferred into the concat that reads them
/// (`exec::Options::defer_gpu_copies`), from two Vulkan devices, read
/// where they lie (mapped) and downloaded (staging): along the first axis
/// each operand lands whole in one region and is downloaded straight into
/// it; along the second it lands in one region per row, through a scratch
/// buffer when it cannot be read in place. Results equal the
/// interpreter's, every allocator is back at zero, and the allocations
/// equal the plan's count (`Executable::planned_events`).
#[test]
fn concats_with_deferred_operands_mapped_and_staged() {
    if !devices_or_skip(
        "concats_with_deferred_operands_mapped_and_staged",
        &[V0, V1, C0],
    ) {
        return;
    }
    let src = "graph @joined {
  %0 = input \"a\" @vulkan:0 : i32[6,5]
  %1 = input \"b\" @cpu:0 : i32[6,5]
  %2 = input \"c\" @vulkan:1 : i32[6,5]
  %3 = copy %0 -> cpu:0 : i32[6,5]
  %4 = copy %2 -> cpu:0 : i32[6,5]
  %5 = concat %3, %1, %4 {axis=0} @cpu:0 : i32[18,5]
  %6 = copy %0 -> cpu:0 : i32[6,5]
  %7 = copy %2 -> cpu:0 : i32[6,5]
  %8 = concat %1, %6, %7 {axis=1} @cpu:0 : i32[6,15]
  return %5, %8
}
";
    let g = text::parse(src).unwrap();
    for mapped in [true, false] {
        let runtime = exec::RuntimeOptions {
            vulkan_mapped: mapped,
            ..exec::RuntimeOptions::default()
        };
        let exe = exec::Compiler::new(&g)
            .devices(&[V0, V1, C0])
            .runtime(runtime)
            .compile()
            .unwrap();
        let defers = exec::schedule::Schedule::new(&g)
            .unwrap()
            .steps
            .iter()
            .filter(|s| matches!(s.work, exec::schedule::Work::Defer { .. }))
            .count();
        assert_eq!(defers, 4, "every copy is deferred into its concat");
        let all = |exe: &exec::Executable| -> usize {
            let devices = exe.devices();
            devices
                .iter()
                .map(|d| exe.memory(*d).unwrap().allocations)
                .sum()
        };
        let before = all(&exe);
        // On cpu:0: the input `b`, the two results, and one scratch buffer
        // per Vulkan operand of the second concat when they are downloaded
        // (the first concat downloads each straight into its place).
        let on_host = runs_exactly(&g, &exe, C0, &format!("mapped: {mapped}"));
        assert_eq!(on_host, if mapped { 3 } else { 5 }, "mapped: {mapped}");
        let planned = exe.planned_events().unwrap().allocs;
        assert_eq!((all(&exe) - before) / 3, planned, "mapped: {mapped}");
    }
}
