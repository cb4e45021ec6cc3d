//! Host-to-Vulkan copies elided into views of imported host memory
//! (`VK_EXT_external_memory_host`, `exec::schedule::Work::Import`), on
//! lavapipe: the plan says which copies became views, the Vulkan device's
//! allocator makes no buffer for them (the host arena counts the bytes
//! once), and every result equals the interpreter's bit for bit with the
//! view in every operand position of every Vulkan kernel. The same graph
//! with import off (`Options::import_host_buffers: false`, and
//! `FUEL_VULKAN_IMPORT=0` in a child process) copies instead, with the same
//! results; a bad `FUEL_VULKAN_IMPORT` is refused. Faults at every point
//! leak nothing. Without Vulkan the tests print `SKIP: <reason>`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use fuel_graph_ext::interp::{deterministic_inputs, interpret, HostTensor};
use fuel_graph_ext::{text, Device, Graph};
use fuel_runtime::exec::{self, Executable};
use fuel_test_support::{assert_no_leaks, devices_or_skip, fail_at_every_point};

const DEVS: [Device; 2] = [Device::cpu(0), Device::vulkan(0)];
/// Elements per tensor: 64 KiB of i32, several host pages.
const N: usize = 16384;

/// Two host kernel results copied to vulkan:0, each read there as operand
/// 0, 1 and 2 of folds, by div, slice and concat; one of them copied again
/// as a graph output that nothing else reads (it shares the host buffer:
/// the caller gets host bytes either way); and one copy of a caller's
/// input (read where the caller holds it on lavapipe, as inputs there
/// are).
fn graph(dtype: &str) -> String {
    let t = format!("{dtype}[{N}]");
    let half = N / 2;
    format!(
        "graph @import {{
  %0 = input \"a\" @cpu:0 : {t}
  %1 = input \"b\" @cpu:0 : {t}
  %2 = add %0, %1 @cpu:0 : {t}
  %3 = max %0, %1 @cpu:0 : {t}
  %4 = copy %2 -> vulkan:0 : {t}
  %5 = copy %3 -> vulkan:0 : {t}
  %6 = input \"c\" @vulkan:0 : {t}
  %7 = add %4, %6 @vulkan:0 : {t}
  %8 = mul %6, %5 @vulkan:0 : {t}
  %9 = add %6, %6, %4 @vulkan:0 : {t}
  %10 = min %4, %5 @vulkan:0 : {t}
  %11 = div %5 {{by=3}} @vulkan:0 : {t}
  %12 = slice %4 {{axis=0, len={half}, start={half}}} @vulkan:0 : {dtype}[{half}]
  %13 = concat %6, %5 {{axis=0}} @vulkan:0 : {dtype}[{}]
  %14 = copy %0 -> vulkan:0 : {t}
  %15 = add %14, %4 @vulkan:0 : {t}
  %16 = copy %3 -> vulkan:0 : {t}
  return %7, %8, %9, %10, %11, %12, %13, %15, %16
}}
",
        2 * N
    )
}

/// `src` compiled with import on (the defaults) and off.
fn on_and_off(src: &str) -> (Graph, Executable, Executable) {
    let (g, on) = compiled(src, exec::Options::default());
    let off = exec::Options {
        import_host_buffers: false,
        ..Default::default()
    };
    let (_, off) = compiled(src, off);
    (g, on, off)
}

fn compiled(src: &str, options: exec::Options) -> (Graph, Executable) {
    let g = text::parse(src).unwrap();
    // Import off in the environment (`FUEL_VULKAN_IMPORT=0`) turns it off here too.
    let env = exec::Options::from_env().unwrap_or_else(|e| panic!("{e}"));
    let options = exec::Options {
        import_host_buffers: options.import_host_buffers && env.import_host_buffers,
        ..options
    };
    let exe = exec::Compiler::new(&g)
        .devices(&DEVS)
        .options(options)
        .runtime(exec::RuntimeOptions::from_env().unwrap_or_else(|e| panic!("{e}")))
        .compile()
        .unwrap();
    (g, exe)
}

/// Runs `exe` three times on the deterministic inputs; every result must
/// equal the interpreter's bit for bit and every allocator must be back at
/// zero. Returns the Vulkan device's buffers made per run.
fn runs_exactly(g: &Graph, exe: &Executable, what: &str) -> usize {
    let inputs = deterministic_inputs(g);
    let want: Vec<HostTensor> = interpret(g, &inputs).unwrap();
    let mut made = Vec::new();
    for round in 0..3 {
        let before = exe.memory(Device::vulkan(0)).unwrap().allocations;
        let got = exe.run_host(&inputs).unwrap();
        assert_eq!(got.len(), want.len());
        for (k, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(g.ty, w.ty, "{what}: result {k}");
            if let Err(e) = g.check_same(w) {
                panic!("{what}, run {round}: result {k} differs from the interpreter: {e}");
            }
        }
        assert_no_leaks(exe);
        made.push(exe.memory(Device::vulkan(0)).unwrap().allocations - before);
    }
    assert!(made.windows(2).all(|w| w[0] == w[1]), "{what}: {made:?}");
    let planned = exe.planned_events().unwrap().allocs;
    assert!(made[0] <= planned, "{what}: {made:?} > {planned}");
    made[0]
}

/// Whether this process runs with host import on (`FUEL_VULKAN_IMPORT`).
fn import_on() -> bool {
    exec::vulkan_import_setting().unwrap()
}

#[test]
fn host_copies_to_vulkan_are_views_and_bit_exact_in_every_position() {
    let test = "host_copies_to_vulkan_are_views_and_bit_exact_in_every_position";
    if !devices_or_skip(test, &DEVS) {
        return;
    }
    for dtype in ["i32", "u32", "f32"] {
        let src = graph(dtype);
        let (g, on, off) = on_and_off(&src);
        let imported = on.imported_copies();
        let in_place = on.inputs_in_place();
        if import_on() {
            // %4 and %5 (kernel results) are views, and so is %14, a copy
            // of the caller's host input: lavapipe reads callers' bytes
            // where they lie. The input %6 on vulkan:0 is read where the
            // caller's bytes lie too. The output %16, which no step reads,
            // holds %3's host buffer itself: no import, no buffer.
            assert_eq!(imported.len(), 3, "{dtype}: {imported:?}");
            assert_eq!(in_place.len(), 1, "{dtype}: {in_place:?}");
            assert_eq!(on.shared_copies().len(), 1, "{dtype}");
        } else {
            assert!(imported.is_empty(), "{dtype}: {imported:?}");
            assert!(in_place.is_empty(), "{dtype}: {in_place:?}");
            assert!(on.shared_copies().is_empty());
        }
        assert!(off.imported_copies().is_empty());
        assert!(off.inputs_in_place().is_empty());
        let made_on = runs_exactly(&g, &on, &format!("{dtype}, import"));
        let made_off = runs_exactly(&g, &off, &format!("{dtype}, no import"));
        // Each view, the shared output and the input read in place save
        // a buffer on vulkan:0, except %14's: without import it is
        // deferred into the add that reads it (uploaded and folded in by
        // a second kernel pass, with no buffer of its own), so importing
        // it saves that pass instead.
        let deferred = usize::from(import_on());
        assert_eq!(
            made_off - made_on,
            imported.len() + on.shared_copies().len() + in_place.len() - deferred,
            "{dtype}: vulkan:0 made {made_on} buffers per run with import, {made_off} without"
        );
        assert_eq!(
            made_on,
            on.planned_events().unwrap().allocs - exec_host_allocs(&on, &g)
        );
    }
}

/// The buffers a run of `exe` makes on its host arena.
fn exec_host_allocs(exe: &Executable, g: &Graph) -> usize {
    let inputs = deterministic_inputs(g);
    let before = exe.memory(Device::cpu(0)).unwrap().allocations;
    exe.run_host(&inputs).unwrap();
    exe.memory(Device::cpu(0)).unwrap().allocations - before
}

/// A view holds its host buffer, counted once on the host arena: while the
/// Vulkan readers run, vulkan:0 holds no bytes for the copies, so its peak
/// is lower by exactly the elided copies' bytes.
#[test]
fn views_count_their_bytes_once_on_the_host() {
    let test = "views_count_their_bytes_once_on_the_host";
    if !devices_or_skip(test, &DEVS) || !import_on() {
        return;
    }
    let t = format!("i32[{N}]");
    let src = format!(
        "graph @one {{
  %0 = input \"a\" @cpu:0 : {t}
  %1 = add %0, %0 @cpu:0 : {t}
  %2 = copy %1 -> vulkan:0 : {t}
  %3 = add %2, %2 @vulkan:0 : {t}
  return %3
}}
"
    );
    let (g, on, off) = on_and_off(&src);
    assert_eq!(on.imported_copies().len(), 1);
    runs_exactly(&g, &on, "import");
    runs_exactly(&g, &off, "no import");
    let bytes = N * 4;
    let v = |e: &Executable| e.memory(Device::vulkan(0)).unwrap().peak;
    let h = |e: &Executable| e.memory(Device::cpu(0)).unwrap().peak;
    // With import vulkan:0 holds only the sum; without, the copy too.
    assert_eq!(v(&on), bytes, "vulkan:0 peak with import");
    assert_eq!(v(&off), 2 * bytes, "vulkan:0 peak without import");
    // The host holds its input (borrowed) and the view's buffer.
    assert_eq!(h(&on), 2 * bytes, "cpu:0 peak with import");
}

#[test]
fn every_fault_with_imported_views_leaks_nothing() {
    let test = "every_fault_with_imported_views_leaks_nothing";
    if !devices_or_skip(test, &DEVS) {
        return;
    }
    let g = text::parse(&graph("i32")).unwrap();
    let n = fail_at_every_point(&g, &DEVS);
    assert!(n > 10, "{n} faults checked");
}

/// The test above again in a child process with `FUEL_VULKAN_IMPORT=0`
/// (the tests build their options from the environment, as `fuel-opt`
/// does), and a bad value refused.
#[test]
fn the_environment_turns_import_off_and_bad_values_are_refused() {
    let test = "the_environment_turns_import_off_and_bad_values_are_refused";
    if !devices_or_skip(test, &DEVS) {
        return;
    }
    if std::env::var_os("FUEL_IMPORT_CHILD").is_some() {
        return;
    }
    let exe = std::env::current_exe().unwrap();
    for name in [
        "host_copies_to_vulkan_are_views_and_bit_exact_in_every_position",
        "every_fault_with_imported_views_leaks_nothing",
        "inputs_on_vulkan_are_read_where_the_caller_holds_them",
        "a_host_star_over_vulkan_inputs_in_place_runs_inline",
    ] {
        let out = std::process::Command::new(&exe)
            .args(["--exact", name, "--nocapture"])
            .env("FUEL_VULKAN_IMPORT", "0")
            .env("FUEL_IMPORT_CHILD", "1")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{name} with import off:\n{text}");
        assert!(text.contains("1 passed"), "{name} did not run:\n{text}");
    }
    let bad = std::process::Command::new(&exe)
        .args(["--exact", "every_fault_with_imported_views_leaks_nothing"])
        .env("FUEL_VULKAN_IMPORT", "yes")
        .env("FUEL_IMPORT_CHILD", "1")
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&bad.stdout).into_owned() + &String::from_utf8_lossy(&bad.stderr);
    assert!(!bad.status.success());
    assert!(
        text.contains("FUEL_VULKAN_IMPORT=`yes` is not valid: it takes 0 or 1"),
        "{text}"
    );
}

/// Runs `src` three times through `run_into`, which offers the previous
/// outputs' bytes back: every result must equal the interpreter's and
/// nothing may leak. Returns the buffers vulkan:0 made in each run and the
/// outputs of the last.
fn runs_into(src: &str, exe: &Executable) -> (Vec<usize>, Vec<exec::Tensor>) {
    let g = text::parse(src).unwrap();
    let inputs = deterministic_inputs(&g);
    let want = interpret(&g, &inputs).unwrap();
    let tensors: std::collections::BTreeMap<String, exec::Tensor> = inputs
        .iter()
        .map(|(k, v)| (k.clone(), exec::Tensor::from_host(v)))
        .collect();
    let mut outputs = Vec::new();
    let mut made = Vec::new();
    let mut at = Vec::new();
    for round in 0..3 {
        let before = exe.memory(Device::vulkan(0)).unwrap().allocations;
        exe.run_into(&tensors, &mut outputs).unwrap();
        made.push(exe.memory(Device::vulkan(0)).unwrap().allocations - before);
        for (k, (got, w)) in outputs.iter().zip(&want).enumerate() {
            if let Err(e) = got.to_host().check_same(w) {
                panic!("run {round}: result {k} differs from the interpreter: {e}");
            }
        }
        at.push(outputs[0].shared().as_ptr());
        assert_no_leaks(exe);
    }
    // From the second run on, the first output (a host kernel's result
    // the caller holds) is written into the caller's previous bytes.
    assert_eq!(at[1], at[2], "the first output moved to new bytes");
    (made, outputs)
}

/// A star's root result on cpu:0 (%3), returned there and on vulkan:0
/// (%4); with `read`, a kernel on vulkan:0 reads %4 too (%5, returned).
fn lend(read: bool) -> String {
    let (kernel, ret) = if read {
        (format!("  %5 = mul %4, %1 @vulkan:0 : f32[{N}]\n"), ", %5")
    } else {
        (String::new(), "")
    };
    format!(
        "graph @lend {{
  %0 = input \"a\" @cpu:0 : f32[{N}]
  %1 = input \"b\" @vulkan:0 : f32[{N}]
  %2 = copy %1 -> cpu:0 : f32[{N}]
  %3 = add %0, %2 @cpu:0 : f32[{N}]
  %4 = copy %3 -> vulkan:0 : f32[{N}]
{kernel}  return %3, %4{ret}
}}
"
    )
}

/// A star's root result is a graph output and is also returned on Vulkan,
/// where nothing reads it: that copy shares the host buffer (the caller
/// gets host bytes either way), so the result is written straight into the
/// caller's output bytes and both outputs are one tensor, run after run,
/// with no buffer made on vulkan:0. With import off it is copied to the
/// device and read back.
#[test]
fn an_output_returned_on_vulkan_shares_the_host_result_run_after_run() {
    let test = "an_output_returned_on_vulkan_shares_the_host_result_run_after_run";
    if !devices_or_skip(test, &DEVS) {
        return;
    }
    let src = lend(false);
    let (_, exe) = compiled(&src, exec::Options::default());
    assert!(exe.imported_copies().is_empty());
    assert_eq!(exe.shared_copies().len(), usize::from(import_on()));
    let (made, outputs) = runs_into(&src, &exe);
    // Without import, the input %1 and the copy %4; with it, neither (the
    // input is read in place, the copy shares).
    let want_made = if import_on() { 0 } else { 2 };
    assert!(made.iter().all(|&m| m == want_made), "{made:?}");
    if import_on() {
        assert_eq!(outputs[0].shared().as_ptr(), outputs[1].shared().as_ptr());
    }
}

/// The same root result read by a Vulkan kernel as well as returned there:
/// that copy is a view of the host buffer (an import), so the buffer stays
/// in the arena's block, the host output is copied out of it after the
/// run, and the returned view is read back; every result stays exact run
/// after run, and vulkan:0 makes only the kernel's buffer.
#[test]
fn an_output_vulkan_reads_is_imported_run_after_run() {
    let test = "an_output_vulkan_reads_is_imported_run_after_run";
    if !devices_or_skip(test, &DEVS) {
        return;
    }
    let src = lend(true);
    let (_, exe) = compiled(&src, exec::Options::default());
    assert_eq!(exe.imported_copies().len(), usize::from(import_on()));
    assert!(exe.shared_copies().is_empty());
    let (made, _) = runs_into(&src, &exe);
    // The kernel's result %5 always; without import, the input %1 and the
    // copy %4 too.
    let want_made = if import_on() { 1 } else { 3 };
    assert!(made.iter().all(|&m| m == want_made), "{made:?}");
}

/// Inputs on a Vulkan device whose memory is the host's are read where the
/// caller's bytes lie (`DeviceWork::Input { in_place }`): no buffer is made
/// for them, every reader (a Vulkan fold in each operand position, `div`,
/// a slice's view, `concat`, a copy to the host folded there, the input
/// returned as an output, which is the caller's tensor itself) gets the
/// caller's values bit for bit, and the
/// caller's tensors are unchanged afterwards. An input under
/// `INPUT_IN_PLACE_MIN` is uploaded. With import off, nothing is read in
/// place and the results are the same.
#[test]
fn inputs_on_vulkan_are_read_where_the_caller_holds_them() {
    let test = "inputs_on_vulkan_are_read_where_the_caller_holds_them";
    if !devices_or_skip(test, &DEVS) {
        return;
    }
    let half = N / 2;
    let t = format!("f32[{N}]");
    let src = format!(
        "graph @in_place {{
  %0 = input \"a\" @vulkan:0 : {t}
  %1 = input \"b\" @vulkan:0 : {t}
  %2 = input \"small\" @vulkan:0 : f32[64]
  %3 = add %0, %1 @vulkan:0 : {t}
  %4 = mul %1, %3, %0 @vulkan:0 : {t}
  %5 = copy %0 -> cpu:0 : {t}
  %6 = input \"c\" @cpu:0 : {t}
  %7 = add %6, %5 @cpu:0 : {t}
  %8 = slice %1 {{axis=0, len={half}, start={half}}} @vulkan:0 : f32[{half}]
  %9 = max %8, %8 @vulkan:0 : f32[{half}]
  %10 = div %0 {{by=3}} @vulkan:0 : {t}
  %11 = concat %2, %1 {{axis=0}} @vulkan:0 : f32[{}]
  return %0, %3, %4, %7, %9, %10, %11, %8, %2
}}
",
        N + 64
    );
    let (g, on, off) = on_and_off(&src);
    let names = |exe: &Executable| -> Vec<String> {
        exe.inputs_in_place()
            .into_iter()
            .filter_map(|id| match &g.node(id).unwrap().op {
                fuel_graph_ext::Op::Input { name, .. } => Some(name.clone()),
                _ => None,
            })
            .collect()
    };
    if import_on() {
        assert_eq!(names(&on), ["a", "b"]);
    } else {
        assert!(names(&on).is_empty());
    }
    assert!(names(&off).is_empty());
    // vulkan:0 runs kernels here, so both take the worker runner.
    assert!(!on.runs_inline() && !off.runs_inline());
    let inputs = deterministic_inputs(&g);
    let kept = inputs.clone();
    let made_on = runs_exactly(&g, &on, "in place");
    let made_off = runs_exactly(&g, &off, "uploaded");
    assert_eq!(inputs, kept, "a run changed the caller's inputs");
    // The input returned as it is (%0) comes back as the caller's own
    // bytes where vulkan:0 reads it in place: nothing is copied out.
    let tensors: std::collections::BTreeMap<String, exec::Tensor> = inputs
        .iter()
        .map(|(k, v)| (k.clone(), exec::Tensor::from_host(v)))
        .collect();
    let caller_a = tensors["a"].shared().as_ptr();
    for (exe, shares) in [(&on, import_on()), (&off, false)] {
        let out = exe.run(&tensors).unwrap();
        assert_eq!(out[0].shared().as_ptr() == caller_a, shares);
    }
    assert_eq!(
        made_off - made_on,
        names(&on).len(),
        "vulkan:0 made {made_on} buffers per run with inputs in place, {made_off} without"
    );
    let n = fail_at_every_point(&g, &DEVS);
    assert!(n > 10, "{n} faults checked");
}

/// A star on the host over Vulkan shards read in place: the Vulkan steps
/// are all the runner's own work (inputs in place, deferred copies into the
/// host fold, imports of the sum), so the executable runs inline on the
/// caller's thread, with results exact run after run, down to shards of
/// one host page (`INPUT_IN_PLACE_MIN`). Under a page the shard is
/// uploaded by the Vulkan worker and it runs threaded, as it does at every
/// size with import off.
#[test]
fn a_host_star_over_vulkan_inputs_in_place_runs_inline() {
    let test = "a_host_star_over_vulkan_inputs_in_place_runs_inline";
    if !devices_or_skip(test, &DEVS) {
        return;
    }
    let page = exec::views::INPUT_IN_PLACE_MIN / 4;
    for (n, inline) in [(N, import_on()), (page, import_on()), (page / 2, false)] {
        let t = format!("f32[{n}]");
        let src = format!(
            "graph @star {{
  %0 = input \"a\" @cpu:0 : {t}
  %1 = input \"b\" @vulkan:0 : {t}
  %2 = copy %1 -> cpu:0 : {t}
  %3 = add %0, %2 @cpu:0 : {t}
  %4 = copy %3 -> vulkan:0 : {t}
  return %3, %4
}}
"
        );
        let (g, on, off) = on_and_off(&src);
        assert_eq!(on.runs_inline(), inline, "{t}");
        assert!(!off.runs_inline(), "{t}");
        runs_exactly(&g, &on, &format!("{t}, import"));
        runs_exactly(&g, &off, &format!("{t}, no import"));
        if n == N {
            let faults = fail_at_every_point(&g, &DEVS);
            assert!(faults > 3, "{faults} faults checked");
        }
    }
}
