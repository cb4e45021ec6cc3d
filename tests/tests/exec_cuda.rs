//! Mixed CUDA + Vulkan + CPU groups. Without a CUDA driver (or Vulkan) each
//! test prints `SKIP: <reason>`; with them, a `PROOF` line says what ran
//! where. `scripts/gpu-check.sh` runs exactly these and fails on any SKIP.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use fuel_graph_ext::exec;
use fuel_graph_ext::{text, Device};
use fuel_tests::{devices_or_skip, run_and_compare};

const C0: Device = Device::cpu(0);
const G0: Device = Device::cuda(0);
const V0: Device = Device::vulkan(0);

/// All-reduce over [cpu:0, cuda:0, vulkan:0] reduced on `root`, with the
/// CUDA <-> Vulkan legs staged through cpu:0 (as split-cross-vendor-copies
/// would write them).
fn mixed(op: &str, dtype: &str, root: &str) -> String {
    let n = 100_000;
    let t = format!("{dtype}[{n}]");
    match root {
        "cpu:0" => format!(
            "graph @m {{
  %0 = input \"a\" @cpu:0 : {t}
  %1 = input \"b\" @cuda:0 : {t}
  %2 = input \"c\" @vulkan:0 : {t}
  %3 = copy %1 -> cpu:0 : {t}
  %4 = copy %2 -> cpu:0 : {t}
  %5 = {op} %0, %3, %4 @cpu:0 : {t}
  %6 = copy %5 -> cuda:0 : {t}
  %7 = copy %5 -> vulkan:0 : {t}
  return %5, %6, %7
}}
"
        ),
        _ => format!(
            "graph @m {{
  %0 = input \"a\" @cuda:0 : {t}
  %1 = input \"b\" @vulkan:0 : {t}
  %2 = input \"c\" @cpu:0 : {t}
  %3 = copy %1 -> cpu:0 : {t}
  %4 = copy %3 -> cuda:0 : {t}
  %5 = copy %2 -> cuda:0 : {t}
  %6 = {op} %0, %4, %5 @cuda:0 : {t}
  %7 = div %6 {{by=2}} @cuda:0 : {t}
  %8 = slice %7 {{axis=0, len=50000, start=25000}} @cuda:0 : {dtype}[50000]
  %9 = concat %8, %8 {{axis=0}} @cuda:0 : {t}
  %10 = copy %6 -> cpu:0 : {t}
  %11 = copy %10 -> vulkan:0 : {t}
  %12 = copy %9 -> cpu:0 : {t}
  return %6, %11, %10, %12
}}
"
        ),
    }
}

fn check(test: &str, devices: &[Device], root: &str) {
    if !devices_or_skip(test, devices) {
        return;
    }
    for dtype in ["f32", "i32"] {
        for op in ["add", "max", "min"] {
            let src = mixed(op, dtype, root);
            let (exe, out) = run_and_compare(&src, devices);
            let g = text::parse(&src).unwrap();
            println!(
                "PROOF {test}: {op} over {dtype}[100000] reduced on {root}, devices {:?}, outputs on {:?}, {} results equal the interpreter, digest {}",
                exe.devices().iter().map(|d| d.to_string()).collect::<Vec<_>>(),
                exe.output_devices().iter().map(|d| d.to_string()).collect::<Vec<_>>(),
                out.len(),
                out[0].digest()
            );
            assert_eq!(g.outputs().len(), out.len());
        }
    }
}

#[test]
fn cpu_cuda_vulkan_reduced_on_cpu() {
    check("cpu_cuda_vulkan_reduced_on_cpu", &[C0, G0, V0], "cpu:0");
}

#[test]
fn cuda_vulkan_cpu_reduced_on_cuda_staged_via_host() {
    check(
        "cuda_vulkan_cpu_reduced_on_cuda_staged_via_host",
        &[G0, V0, C0],
        "cuda:0",
    );
}

#[test]
fn direct_cuda_to_vulkan_copy_names_the_split_pass() {
    // Needs no device: the verifier inside compile() rejects it first.
    let src = "graph @x {
  %0 = input \"a\" @cuda:0 : f32[4]
  %1 = copy %0 -> vulkan:0 : f32[4]
  return %1
}
";
    let g = text::parse(src).unwrap();
    let e = exec::compile(&g, &[]).err().unwrap().to_string();
    assert!(e.contains("split-cross-vendor-copies"), "{e}");
}

#[test]
fn cuda_without_a_driver_is_an_error_not_a_panic() {
    let src = "graph @c {
  %0 = input \"a\" @cuda:0 : f32[4]
  %1 = add %0, %0 @cuda:0 : f32[4]
  return %1
}
";
    let g = text::parse(src).unwrap();
    match exec::compile(&g, &[]) {
        Ok(_) => {
            println!("SKIP: cuda_without_a_driver_is_an_error_not_a_panic: a CUDA GPU is present")
        }
        Err(e) => {
            let e = e.to_string();
            assert!(e.contains("cannot open cuda:0"), "{e}");
        }
    }
}
