//! End-to-end executor tests on host arenas only: lowered graphs written as
//! text IR, results compared exactly with the interpreter.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use fuel_graph_ext::interp::{deterministic_inputs, interpret, HostTensor};
use fuel_graph_ext::{text, DType, Device, TensorType};
use fuel_runtime::exec::{self, ExecError, FaultPoint};
use fuel_test_support::graphs::kernels;
use fuel_test_support::{assert_no_leaks, run_and_compare};
use std::collections::BTreeMap;

const CPUS: [Device; 3] = [Device::cpu(0), Device::cpu(1), Device::cpu(2)];

/// An all-reduce lowered by hand: copies to cpu:0, one n-ary op, copies back.
fn all_reduce(op: &str, dtype: &str, n: usize) -> String {
    format!(
        "graph @ar {{
  %0 = input \"a\" @cpu:0 : {dtype}[{n}]
  %1 = input \"b\" @cpu:1 : {dtype}[{n}]
  %2 = input \"c\" @cpu:2 : {dtype}[{n}]
  %3 = move %1 -> cpu:0 : {dtype}[{n}]
  %4 = copy %2 -> cpu:0 : {dtype}[{n}]
  %5 = {op} %0, %3, %4 @cpu:0 : {dtype}[{n}]
  %6 = copy %5 -> cpu:1 : {dtype}[{n}]
  %7 = copy %5 -> cpu:2 : {dtype}[{n}]
  return %5, %6, %7
}}
"
    )
}

#[test]
fn all_reduce_on_three_cpus_every_op_and_dtype() {
    for dtype in DType::ALL {
        for op in ["add", "mul", "max", "min"] {
            run_and_compare(&all_reduce(op, dtype.as_str(), 1000), &CPUS);
        }
    }
}

/// Values at the edges of `dtype`, so folds overflow and wrap, and division
/// meets the most negative value. The 64-bit integers stay within 2^17, so
/// that a product of three stays below 2^53, where the interpreter's f64
/// stops being exact (it cannot check their wrapping).
fn extremes(dtype: DType, salt: usize) -> Vec<f64> {
    let (lo, hi): (f64, f64) = match dtype {
        DType::I8 => (-128.0, 127.0),
        DType::I16 => (-32768.0, 32767.0),
        DType::I32 => (i32::MIN as f64, i32::MAX as f64),
        DType::U8 => (0.0, 255.0),
        DType::U16 => (0.0, 65535.0),
        DType::U32 => (0.0, u32::MAX as f64),
        DType::I64 => (-131072.0, 131072.0),
        DType::U64 => (0.0, 131072.0),
        DType::Bool => (0.0, 1.0),
        DType::F16 => (-65504.0, 65504.0),
        DType::BF16 | DType::F32 | DType::F64 => (-3.0e38, 3.0e38),
    };
    let base = [lo, hi, lo + 1.0, hi - 1.0, 0.0, 1.0, 3.0, 7.0, 2.0, 5.0];
    (0..20)
        .map(|i| base[(i * 7 + salt * 3) % base.len()])
        .collect()
}

/// Every op on every dtype at its extremes, on three arenas (so the folds,
/// the division and the copies all run), equals the interpreter exactly.
#[test]
fn every_dtype_wraps_and_rounds_at_its_extremes_as_the_interpreter_does() {
    for dtype in DType::ALL {
        for op in ["add", "mul", "max", "min"] {
            let src = all_reduce(op, dtype.as_str(), 20).replace(
                "  return %5, %6, %7",
                &format!("  %8 = div %5 {{by=3}} @cpu:0 : {dtype}[20]\n  return %5, %6, %7, %8"),
            );
            let g = text::parse(&src).unwrap();
            let exe = exec::compile(&g, &CPUS).unwrap();
            let ty = TensorType::new(dtype, &[20]);
            let inputs: BTreeMap<String, HostTensor> = ["a", "b", "c"]
                .iter()
                .enumerate()
                .map(|(k, n)| {
                    (
                        n.to_string(),
                        HostTensor::new(ty.clone(), extremes(dtype, k)),
                    )
                })
                .collect();
            let want = interpret(&g, &inputs).unwrap();
            let got = exe.run_host(&inputs).unwrap();
            for (k, (g, w)) in got.iter().zip(&want).enumerate() {
                if let Err(e) = g.check_same(w) {
                    panic!("{op} {dtype} result {k}: {e}");
                }
            }
            assert_no_leaks(&exe);
        }
    }
}

#[test]
fn large_tensors_use_threads_and_free_everything() {
    let (exe, out) = run_and_compare(&all_reduce("add", "f32", 600_000), &CPUS);
    assert_eq!(out[0].len(), 600_000);
    // Peak: a, b, c plus two copies and the sum were never all needed at once.
    let peak = exe.memory(Device::cpu(0)).unwrap().peak;
    assert!(peak > 0 && peak <= 4 * 600_000 * 4, "peak {peak}");
}

#[test]
fn kernels_on_cpu() {
    run_and_compare(&kernels(CPUS[0], CPUS[1]), &CPUS[..2]);
}

#[test]
fn runs_many_times_with_new_inputs() {
    let g = text::parse(&all_reduce("add", "i32", 64)).unwrap();
    let exe = exec::compile(&g, &CPUS).unwrap();
    let mut inputs = deterministic_inputs(&g);
    for round in 0..5 {
        for t in inputs.values_mut() {
            let data = t.to_f64().iter().map(|x| x + 1.0).collect();
            *t = HostTensor::new(t.ty.clone(), data);
        }
        let got = exe.run_host(&inputs).unwrap();
        assert_eq!(got, interpret(&g, &inputs).unwrap(), "round {round}");
    }
    assert_no_leaks(&exe);
}

#[test]
fn faults_halfway_free_everything_and_the_next_run_succeeds() {
    let g = text::parse(&all_reduce("max", "f32", 5000)).unwrap();
    let exe = exec::compile(&g, &CPUS).unwrap();
    let inputs = deterministic_inputs(&g);
    let want = interpret(&g, &inputs).unwrap();
    for point in [
        FaultPoint::Copy { nth: 1 },
        FaultPoint::Copy { nth: 3 },
        FaultPoint::Kernel { nth: 0 },
        FaultPoint::Alloc { nth: 3 },
    ] {
        exe.inject_fault(point);
        let e = exe.run_host(&inputs).unwrap_err();
        match (point, &e) {
            (FaultPoint::Alloc { .. }, ExecError::OutOfMemory { .. }) => {}
            (FaultPoint::Copy { .. } | FaultPoint::Kernel { .. }, ExecError::Injected { .. }) => {}
            _ => panic!("{point:?} gave {e}"),
        }
        assert!(e.to_string().contains("injected"), "{e}");
        assert_no_leaks(&exe);
        assert_eq!(exe.run_host(&inputs).unwrap(), want, "after {point:?}");
        assert_no_leaks(&exe);
    }
}

#[test]
fn missing_and_mistyped_inputs_are_errors() {
    let g = text::parse(&all_reduce("add", "f32", 4)).unwrap();
    let exe = exec::compile(&g, &CPUS).unwrap();
    let mut inputs = deterministic_inputs(&g);
    inputs.remove("b");
    let e = exe.run_host(&inputs).unwrap_err().to_string();
    assert!(e.contains("no data for input \"b\""), "{e}");
    let g2 = text::parse(&all_reduce("add", "i32", 4)).unwrap();
    let e = exe
        .run_host(&deterministic_inputs(&g2))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("is declared f32[4] but the data is i32[4]"),
        "{e}"
    );
    assert_no_leaks(&exe);
}

#[test]
fn leftover_collectives_and_unlisted_devices_are_rejected() {
    let src = "graph @g {
  %0 = input \"a\" @cpu:0 : f32[4]
  %1 = input \"b\" @cpu:1 : f32[4]
  %2:2 = all_reduce.sum %0, %1 : f32[4]
  return %2#0, %2#1
}
";
    let g = text::parse(src).unwrap();
    let e = exec::compile(&g, &[]).err().unwrap().to_string();
    assert!(e.contains("run the `lower-collectives` pass"), "{e}");
    let g = text::parse(&all_reduce("add", "f32", 4)).unwrap();
    let e = exec::compile(&g, &[Device::cpu(0)])
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("uses cpu:1, which is not in the device list"),
        "{e}"
    );
}
