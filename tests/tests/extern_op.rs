//! The `extern` op (`docs/extern.md`): its text form and the refusals of
//! bad cost hints and cycles, what every pass of the default pipeline
//! leaves of it, its meaning through a registered reference function, the
//! CPU `matmul` kernel against that reference, the compile error for a
//! device with no kernel, and kernels that fail, write the wrong number of
//! bytes or panic: each ends the run with an error naming the op and the
//! device, the allocator counters return to zero, and the next run works.

use fuel_graph_ext::interp::{deterministic_inputs, interpret, register_reference, HostTensor};
use fuel_graph_ext::text::{parse, print};
use fuel_graph_ext::verify::{verify, Level};
use fuel_graph_ext::{Device, Graph, Topology};
use fuel_runtime::exec;
use fuel_runtime::kernels::register_cpu;
use fuel_test_support::{assert_no_leaks, lower, run_and_compare};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Two matmuls on two CPUs whose products are all-reduced: the shape of a
/// data-parallel backward step.
const DDP: &str = "graph @ddp {
  %0 = input \"x0\" @cpu:0 : f32[8,16]
  %1 = input \"w\" @cpu:0 : f32[16,4]
  %2 = input \"x1\" @cpu:1 : f32[8,16]
  %3 = input \"w\" @cpu:1 : f32[16,4]
  %4 = extern \"matmul\" %0, %1 {cost=2.5e-5, tile=[4, 4]} @cpu:0 : f32[8,4]
  %5 = extern \"matmul\" %2, %3 @cpu:1 : f32[8,4]
  %6:2 = all_reduce.mean %4, %5 : f32[8,4]
  return %6#0, %6#1
}
";

#[test]
fn extern_lines_round_trip_byte_for_byte() {
    let g = parse(DDP).unwrap();
    assert_eq!(print(&g), DDP);
    // Attributes print sorted, whatever order they were written in.
    let shuffled = DDP.replace("{cost=2.5e-5, tile=[4, 4]}", "{tile=[4, 4], cost=0.000025}");
    assert_eq!(print(&parse(&shuffled).unwrap()), DDP);
    verify(&g, Level::Structural, &Topology::default()).unwrap();
}

#[test]
fn bad_cost_hints_are_refused_at_parse_time_with_their_line() {
    for bad in ["-1.0", "NaN", "inf", "-inf", "1e999"] {
        let src = DDP.replace("cost=2.5e-5", &format!("cost={bad}"));
        let e = parse(&src).unwrap_err();
        assert_eq!(e.line, 6, "{bad}: {e}");
        assert!(e.to_string().contains("finite and 0 or more"), "{bad}: {e}");
    }
    let src = DDP.replace("cost=2.5e-5", "cost=soon");
    let e = parse(&src).unwrap_err().to_string();
    assert!(e.starts_with("6:"), "{e}");
    assert!(e.contains("expected the seconds one call takes"), "{e}");
    // `cost` belongs to extern ops alone.
    let src = "graph @g {\n  %0 = input \"a\" @cpu:0 : f32[4]\n  %1 = div %0 {by=2, cost=1.0} @cpu:0 : f32[4]\n  return %1\n}\n";
    let e = parse(src).unwrap_err().to_string();
    assert!(e.contains("unknown attribute `cost` for `div`"), "{e}");
}

#[test]
fn a_cycle_through_extern_ops_is_refused() {
    let src = "graph @c {
  %0 = input \"a\" @cpu:0 : f32[2,2]
  %1 = extern \"matmul\" %0, %2 @cpu:0 : f32[2,2]
  %2 = extern \"matmul\" %1, %0 @cpu:0 : f32[2,2]
  return %2
}
";
    let g = parse(src).unwrap();
    let e = verify(&g, Level::Structural, &Topology::default()).unwrap_err();
    assert!(e.to_string().contains("has a cycle"), "{e}");
    assert!(interpret(&g, &deterministic_inputs(&g)).is_err());
}

/// Lines of `text` that hold an extern op, with every `%N` written `%`.
fn extern_lines(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| l.contains("extern"))
        .map(|l| {
            let mut out = String::new();
            let mut digits = false;
            for c in l.chars() {
                if digits && c.is_ascii_digit() {
                    continue;
                }
                digits = c == '%';
                out.push(c);
            }
            out
        })
        .collect()
}

#[test]
fn the_default_pipeline_leaves_extern_ops_alone() {
    let g = parse(DDP).unwrap();
    let lowered = lower(&g, fuel_collective::DEFAULT_PIPELINE);
    let out = print(&lowered);
    assert_eq!(extern_lines(DDP).len(), 2);
    assert_eq!(extern_lines(&out), extern_lines(DDP), "{out}");
    // Its operands are still the inputs it was given: nothing was put
    // between them (the lowering's copies all feed the all_reduce).
    for n in lowered.node_ids().filter_map(|id| lowered.node(id)) {
        if n.op.is_extern() {
            for v in &n.operands {
                let op = &lowered.node(v.node).unwrap().op;
                assert_eq!(op.mnemonic(), "input", "{out}");
            }
        }
    }
    let inputs = deterministic_inputs(&g);
    assert_eq!(
        interpret(&lowered, &inputs).unwrap(),
        interpret(&g, &inputs).unwrap()
    );
}

#[test]
fn cse_never_merges_and_dce_never_removes_extern_ops() {
    let src = "graph @g {
  %0 = input \"a\" @cpu:0 : f32[2,2]
  %1 = extern \"matmul\" %0, %0 @cpu:0 : f32[2,2]
  %2 = extern \"matmul\" %0, %0 @cpu:0 : f32[2,2]
  %3 = extern \"matmul\" %0, %0 @cpu:0 : f32[2,2]
  %4 = add %1, %2 @cpu:0 : f32[2,2]
  return %4
}
";
    let lowered = lower(&parse(src).unwrap(), "cse,dce");
    assert_eq!(
        print(&lowered).matches("extern").count(),
        3,
        "{}",
        print(&lowered)
    );
    // The same graph with `add`s in place of the extern ops loses two
    // (counted as nodes: cse's note names the op it merged).
    let plain = src.replace("extern \"matmul\"", "add");
    let lowered = lower(&parse(&plain).unwrap(), "cse,dce");
    assert_eq!(print(&lowered).matches(" = add ").count(), 2);
}

#[test]
fn matmul_runs_on_cpus_and_matches_its_reference() {
    let lowered = print(&lower(
        &parse(DDP).unwrap(),
        fuel_collective::DEFAULT_PIPELINE,
    ));
    let (exe, got) = run_and_compare(&lowered, &[]);
    // Both ranks hold the mean of the two products; check one entry by
    // hand so the test does not lean on the reference alone.
    let g = parse(DDP).unwrap();
    let inputs = deterministic_inputs(&g);
    let (x0, x1, w) = (
        inputs["x0"].to_f64(),
        inputs["x1"].to_f64(),
        inputs["w"].to_f64(),
    );
    let dot = |x: &[f64]| (0..16).map(|p| x[p] * w[p * 4]).sum::<f64>();
    assert_eq!(got[0].to_f64()[0], (dot(&x0) + dot(&x1)) / 2.0);
    // A second run of the same executable gives the same bytes.
    assert_eq!(exe.run_host(&inputs).unwrap(), got);
    // f64 too, through dgemm.
    run_and_compare(&lowered.replace("f32", "f64"), &[]);
}

#[test]
fn a_device_without_a_kernel_is_a_compile_error_naming_op_device_and_fix() {
    register_reference("only_reference", |x, args| {
        Ok(args[0].clone()).map(|t: HostTensor| HostTensor::new(x.ty.clone(), t.to_f64()))
    });
    let src = "graph @g {\n  %0 = input \"a\" @cpu:1 : f32[4]\n  %1 = extern \"only_reference\" %0 @cpu:1 : f32[4]\n  return %1\n}\n";
    let g = parse(src).unwrap();
    // The interpreter has its meaning ...
    interpret(&g, &deterministic_inputs(&g)).unwrap();
    // ... the executor has no kernel.
    let e = exec::compile(&g, &[]).err().unwrap().to_string();
    assert_eq!(
        e,
        "`extern \"only_reference\"` on cpu:1 has no kernel for that device; register one with fuel_runtime::kernels::register_cpu(name, fn) before compiling"
    );
}

/// A graph whose one extern op is `name`, on cpu:0, fed from cpu:1 (so the
/// run holds buffers on both devices when the kernel fails).
fn faulty(name: &str) -> Graph {
    let src = format!("graph @g {{\n  %0 = input \"a\" @cpu:1 : f32[4,4]\n  %1 = copy %0 -> cpu:0 : f32[4,4]\n  %2 = extern \"{name}\" %1, %1 @cpu:0 : f32[4,4]\n  %3 = add %2, %1 @cpu:0 : f32[4,4]\n  return %3\n}}\n");
    parse(&src).unwrap()
}

/// Registers `name` as the matmul kernel, except on its first call, which
/// `first` carries out instead; runs `faulty(name)` twice and returns the
/// first run's error after checking the second run's result and that no
/// buffer is left after either.
fn fail_once(
    name: &str,
    first: impl Fn(&mut [u8]) -> Result<usize, String> + Send + Sync + 'static,
) -> String {
    let calls = AtomicUsize::new(0);
    register_cpu(name, move |x, ins, out| {
        if calls.fetch_add(1, Ordering::SeqCst) == 0 {
            first(out)
        } else {
            fuel_runtime::kernels::matmul_cpu(x, ins, out)
        }
    });
    register_reference(name, fuel_graph_ext::interp::matmul_reference);
    let g = faulty(name);
    let exe = exec::compile(&g, &[]).unwrap();
    let inputs = deterministic_inputs(&g);
    let e = exe.run_host(&inputs).unwrap_err().to_string();
    assert_no_leaks(&exe);
    let got = exe.run_host(&inputs).unwrap();
    assert_eq!(got, interpret(&g, &inputs).unwrap());
    assert_no_leaks(&exe);
    e
}

#[test]
fn a_kernel_that_fails_ends_the_run_naming_op_and_device() {
    let e = fail_once("fails_once", |_| Err("out of tiles".into()));
    assert_eq!(e, "`extern \"fails_once\"` on cpu:0 failed: out of tiles; the run's buffers were released and the next run may try again");
}

#[test]
fn a_kernel_that_writes_the_wrong_byte_count_ends_the_run() {
    let e = fail_once("short_once", |out| Ok(out.len() - 4));
    assert_eq!(e, "`extern \"short_once\"` on cpu:0 wrote 60 bytes, but its result f32[4,4] holds 64; fix the kernel to fill the whole result, or declare the type it computes");
}

#[test]
fn a_kernel_that_panics_ends_the_run() {
    let e = fail_once("panics_once", |_| {
        panic!("index out of bounds in the kernel")
    });
    assert_eq!(e, "`extern \"panics_once\"` on cpu:0 panicked: index out of bounds in the kernel; the run's buffers were released and the next run may try again");
}

/// The registration `docs/extern.md` shows, run end to end.
#[test]
fn a_kernel_registered_as_the_docs_show_runs() {
    use fuel_runtime::kernels::Operand;
    register_reference("scale2", |op, args| {
        let v: Vec<f64> = args[0].to_f64().iter().map(|x| 2.0 * x).collect();
        Ok(HostTensor::new(op.ty.clone(), v))
    });
    register_cpu("scale2", |_op, ins: &[Operand<'_>], out: &mut [u8]| {
        for (o, i) in out.chunks_exact_mut(4).zip(ins[0].bytes.chunks_exact(4)) {
            let x = f32::from_le_bytes([i[0], i[1], i[2], i[3]]);
            o.copy_from_slice(&(2.0 * x).to_le_bytes());
        }
        Ok(out.len())
    });
    let src = "graph @g {\n  %0 = input \"a\" @cpu:0 : f32[6]\n  %1 = extern \"scale2\" %0 @cpu:0 : f32[6]\n  return %1\n}\n";
    let (_, got) = run_and_compare(src, &[]);
    let a = deterministic_inputs(&parse(src).unwrap())["a"].to_f64();
    assert_eq!(
        got[0].to_f64(),
        a.iter().map(|x| 2.0 * x).collect::<Vec<_>>()
    );
}

/// `DDP` with its second rank on `gpu`, lowered and run against the
/// interpreter twice; false (after a `SKIP:` line) where `gpu` cannot open.
fn matmul_on(gpu: Device, test: &str) -> bool {
    if !fuel_test_support::devices_or_skip(test, &[Device::cpu(0), gpu]) {
        return false;
    }
    let src = DDP.replace("@cpu:1", &format!("@{gpu}"));
    let lowered = print(&lower(
        &parse(&src).unwrap(),
        fuel_collective::DEFAULT_PIPELINE,
    ));
    assert!(
        lowered.contains(&format!("extern \"matmul\" %2, %3 @{gpu}")),
        "{lowered}"
    );
    let (exe, got) = run_and_compare(&lowered, &[]);
    let inputs = deterministic_inputs(&parse(&lowered).unwrap());
    assert_eq!(exe.run_host(&inputs).unwrap(), got);
    true
}

/// The shipped WGSL matmul on a Vulkan device, fed from and read back to
/// CPUs, against the interpreter's reference; an f64 matmul there is
/// refused at compile time (the shader takes f32).
#[test]
fn matmul_runs_on_vulkan_and_matches_its_reference() {
    if !matmul_on(Device::vulkan(0), "matmul_runs_on_vulkan") {
        return;
    }
    let f64_src = "graph @g {\n  %0 = input \"a\" @vulkan:0 : f64[2,2]\n  %1 = extern \"matmul\" %0, %0 @vulkan:0 : f64[2,2]\n  return %1\n}\n";
    let e = exec::compile(&parse(f64_src).unwrap(), &[])
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("the GPU matmul kernels take f32, found f64"),
        "{e}"
    );
}

/// The shipped PTX matmul on a CUDA device, fed from a CPU, against the
/// interpreter's reference (`SKIP:` without a GPU; `scripts/gpu-check.sh`
/// runs it and counts its `PROOF` line).
#[test]
fn matmul_runs_on_cuda_and_matches_its_reference() {
    if matmul_on(Device::cuda(0), "matmul_runs_on_cuda") {
        println!("PROOF extern matmul on cuda:0 (PTX, f32[8,16] x f32[16,4]), all_reduce.mean with cpu:0's: equal to the interpreter, twice");
    }
}

/// A copy onto a host arena runs on the device's copy thread, beside a
/// kernel on its compute worker: `wait_for_copy` on cpu:0 returns only once
/// `copy_arrived` on cpu:1 has run, which needs the copy onto cpu:0 (and
/// back) to finish while `wait_for_copy` still holds cpu:0's worker. With
/// one thread per device the copy would queue behind the kernel and the
/// kernel would give up after 20 s, failing the run.
#[test]
fn a_copy_and_a_kernel_on_one_device_run_at_once() {
    use std::sync::atomic::AtomicBool;
    use std::time::{Duration, Instant};
    static ARRIVED: AtomicBool = AtomicBool::new(false);
    let copy_of_first = |x: &fuel_graph_ext::op::ExternOp,
                         ins: &[fuel_runtime::kernels::Operand<'_>],
                         out: &mut [u8]| {
        let _ = x;
        out.copy_from_slice(ins[0].bytes);
        Ok(out.len())
    };
    register_cpu("wait_for_copy", move |x, ins, out| {
        let start = Instant::now();
        while !ARRIVED.load(Ordering::SeqCst) {
            if start.elapsed() > Duration::from_secs(20) {
                return Err("the copy onto this device never ran beside this kernel".into());
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        copy_of_first(x, ins, out)
    });
    register_cpu("copy_arrived", move |x, ins, out| {
        ARRIVED.store(true, Ordering::SeqCst);
        copy_of_first(x, ins, out)
    });
    for name in ["wait_for_copy", "copy_arrived"] {
        register_reference(name, |_, args| Ok(args[0].clone()));
    }
    let src = "graph @overlap {
  %0 = input \"a\" @cpu:0 : f32[4]
  %1 = input \"x\" @cpu:1 : f32[4]
  %2 = extern \"wait_for_copy\" %0 @cpu:0 : f32[4]
  %3 = copy %1 -> cpu:0 : f32[4]
  %4 = copy %3 -> cpu:1 : f32[4]
  %5 = extern \"copy_arrived\" %4 @cpu:1 : f32[4]
  return %2, %5
}
";
    let g = parse(src).unwrap();
    // Real copies (not shared host buffers), so each needs a thread.
    let options = exec::Options {
        share_host_copies: false,
        ..exec::Options::default()
    };
    let exe = exec::Compiler::new(&g).options(options).compile().unwrap();
    let inputs = deterministic_inputs(&g);
    let got = exe.run_host(&inputs).unwrap();
    assert_eq!(got, interpret(&g, &inputs).unwrap());
    assert_no_leaks(&exe);
}

/// `LazyTensor::call_extern` records the op with its declared type, and
/// refuses an operand on another device than the op's.
#[test]
fn call_extern_records_the_op_and_checks_placement() {
    use fuel_graph_ext::op::ExternOp;
    use fuel_graph_ext::{DType, LazyGraph, TensorType};
    let graph = LazyGraph::new("g");
    let ty = |s: &[usize]| TensorType::new(DType::F32, s);
    let a = graph.input("a", Device::cpu(0), ty(&[2, 3]));
    let b = graph.input("b", Device::cpu(0), ty(&[3, 4]));
    let c = a
        .call_extern(ExternOp::new("matmul", Device::cpu(0), ty(&[2, 4])), &[&b])
        .unwrap();
    assert_eq!(c.ty(), ty(&[2, 4]));
    graph.output(&c).unwrap();
    assert!(print(&graph.snapshot()).contains("extern \"matmul\" %0, %1 @cpu:0 : f32[2,4]"));
    let elsewhere = graph.input("e", Device::cpu(1), ty(&[3, 4]));
    let e = a
        .call_extern(
            ExternOp::new("matmul", Device::cpu(0), ty(&[2, 4])),
            &[&elsewhere],
        )
        .unwrap_err();
    assert!(e.to_string().contains("cpu:1"), "{e}");
    let e = a
        .call_extern(ExternOp::new("matmul", Device::cpu(1), ty(&[2, 4])), &[&b])
        .unwrap_err();
    assert!(e.to_string().contains("cpu:1"), "{e}");
}
