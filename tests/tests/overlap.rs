//! Overlap of collectives with compute (issue 33): the runner's dispatch
//! orders (`Dispatch::InOrder` keeps each lane to the schedule's order,
//! `Dispatch::AfterCompute` holds communication until the compute is done),
//! seen through kernels that log when they run; and the
//! `schedule-collectives` pass: what it matches and leaves alone, that its
//! order computes what the graph did (on the interpreter and on the
//! devices, in order), that it is deterministic, and its errors.

use fuel_graph_ext::interp::{deterministic_inputs, interpret, register_reference, HostTensor};
use fuel_graph_ext::text::{parse, print};
use fuel_graph_ext::{Graph, Topology};
use fuel_runtime::exec::{self, Dispatch, RuntimeOptions};
use fuel_runtime::kernels::register_cpu;
use fuel_test_support::{assert_no_leaks, lower};
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

/// Registers a CPU kernel `name` that copies its first operand, after
/// sleeping `ms`, and then appends `name` to `log`; its reference copies.
fn logging(name: &'static str, ms: u64, log: &'static Mutex<Vec<&'static str>>) {
    register_cpu(name, move |_, ins, out| {
        std::thread::sleep(Duration::from_millis(ms));
        out.copy_from_slice(&ins[0].bytes[..out.len()]);
        log.lock().unwrap().push(name);
        Ok(out.len())
    });
    register_reference(name, |_, args| Ok(args[0].clone()));
}

/// Runs `g` with `dispatch` and returns the order the kernels logged in.
fn run_logged(
    g: &Graph,
    dispatch: Dispatch,
    log: &'static Mutex<Vec<&'static str>>,
) -> Vec<&'static str> {
    log.lock().unwrap().clear();
    let runtime = RuntimeOptions {
        dispatch,
        ..RuntimeOptions::default()
    };
    let exe = exec::Compiler::new(g).runtime(runtime).compile().unwrap();
    let inputs = deterministic_inputs(g);
    let got = exe.run_host(&inputs).unwrap();
    assert_eq!(got, interpret(g, &inputs).unwrap());
    assert_no_leaks(&exe);
    log.lock().unwrap().clone()
}

/// Registers the `kernels` (name, milliseconds each sleeps) logging to a
/// log of their own, and checks that `src` run with each dispatch of
/// `want` runs them in its order.
fn dispatch_orders(kernels: &[(&'static str, u64)], src: &str, want: &[(Dispatch, [&str; 3])]) {
    let log: &'static Mutex<Vec<&str>> = Box::leak(Box::new(Mutex::new(Vec::new())));
    for (name, ms) in kernels {
        logging(name, *ms, log);
    }
    let g = parse(src).unwrap();
    for (dispatch, order) in want {
        assert_eq!(
            run_logged(&g, *dispatch, log),
            *order,
            "{dispatch:?} on\n{src}"
        );
    }
}

/// Priority dispatch: cpu:0 has two steps out (its first kernel running,
/// a quick one queued behind it) while two more of its steps come ready,
/// the later one in the schedule first. When the lane has room it takes
/// the one that comes first in the schedule (FIFO takes the one that came
/// ready first); and a lane whose first step in the schedule is not ready
/// runs a later ready one rather than wait (in-order waits).
#[test]
fn priority_dispatch_takes_the_first_ready_step_in_schedule_order() {
    static LOG: Mutex<Vec<&str>> = Mutex::new(Vec::new());
    let graph = |block_ms: u64, src_ms: u64, tag: &'static str| {
        let name =
            |s: &str| -> &'static str { Box::leak(format!("pr_{tag}_{s}").into_boxed_str()) };
        let names = [name("block"), name("filler"), name("late"), name("early")];
        let src = name("src");
        for (n, ms) in names.iter().zip([block_ms, 0, 0, 0]) {
            logging(n, ms, &LOG);
        }
        logging(src, src_ms, &LOG);
        let [block, filler, late, early] = names;
        let g = parse(&format!(
            "graph @priority {{
  %0 = input \"a\" @cpu:0 : f32[4]
  %1 = extern \"{block}\" %0 @cpu:0 : f32[4]
  %2 = extern \"{filler}\" %0 @cpu:0 : f32[4]
  %3 = input \"b\" @cpu:1 : f32[4]
  %4 = extern \"{src}\" %3 @cpu:1 : f32[4]
  %5 = copy %4 -> cpu:0 : f32[4]
  %6 = extern \"{late}\" %5 @cpu:0 : f32[4]
  %7 = input \"c\" @cpu:0 : f32[4]
  %8 = extern \"{early}\" %7 @cpu:0 : f32[4]
  return %1, %2, %6, %8
}}
"
        ))
        .unwrap();
        (g, names, src)
    };
    let on_cpu0 = |log: Vec<&'static str>, src: &str| -> Vec<&'static str> {
        log.into_iter().filter(|n| *n != src).collect()
    };
    // The lane is full until both are ready: first in the schedule wins.
    let (g, [block, filler, late, early], src) = graph(150, 20, "busy");
    let fifo = on_cpu0(run_logged(&g, Dispatch::Fifo, &LOG), src);
    assert_eq!(fifo, [block, filler, early, late]);
    let priority = on_cpu0(run_logged(&g, Dispatch::Priority, &LOG), src);
    assert_eq!(priority, [block, filler, late, early]);
    // The lane has room before the first in the schedule is ready: the
    // ready one runs (in order, the lane would wait).
    let (g, [block, filler, late, early], src) = graph(10, 150, "idle");
    let priority = on_cpu0(run_logged(&g, Dispatch::Priority, &LOG), src);
    assert_eq!(priority, [block, filler, early, late]);
    let in_order = on_cpu0(run_logged(&g, Dispatch::InOrder, &LOG), src);
    assert_eq!(in_order, [block, filler, late, early]);
}

/// Each case: the logging kernels (name, milliseconds each sleeps), a
/// graph of them, and the order each dispatch runs them in.
#[test]
fn each_dispatch_runs_the_kernels_in_its_order() {
    let cases = [
        // On cpu:0, step %3 reads what cpu:1's slow kernel sends, and step
        // %4 is ready at once. FIFO runs %4 first; in order, the lane
        // waits for %3.
        (
            &[("io_slow_source", 80), ("io_first", 0), ("io_second", 0)],
            "graph @order {
  %0 = input \"a\" @cpu:1 : f32[4]
  %1 = extern \"io_slow_source\" %0 @cpu:1 : f32[4]
  %2 = copy %1 -> cpu:0 : f32[4]
  %3 = extern \"io_first\" %2 @cpu:0 : f32[4]
  %4 = input \"b\" @cpu:0 : f32[4]
  %5 = extern \"io_second\" %4 @cpu:0 : f32[4]
  return %3, %5
}
",
            &[
                (Dispatch::Fifo, ["io_second", "io_slow_source", "io_first"]),
                (
                    Dispatch::InOrder,
                    ["io_slow_source", "io_first", "io_second"],
                ),
            ],
        ),
        // cpu:1's quick kernel feeds a copy to cpu:2, whose kernel logs;
        // cpu:0's kernel is slow. FIFO lets cpu:2 run at once; after
        // compute, the copy waits for cpu:0's kernel, and the kernel that
        // reads the copy (which reads something communicated) is not
        // waited for.
        (
            &[("ac_slow", 80), ("ac_quick", 0), ("ac_reader", 0)],
            "graph @after {
  %0 = input \"a\" @cpu:0 : f32[4]
  %1 = extern \"ac_slow\" %0 @cpu:0 : f32[4]
  %2 = input \"b\" @cpu:1 : f32[4]
  %3 = extern \"ac_quick\" %2 @cpu:1 : f32[4]
  %4 = copy %3 -> cpu:2 : f32[4]
  %5 = extern \"ac_reader\" %4 @cpu:2 : f32[4]
  return %1, %5
}
",
            &[
                (Dispatch::Fifo, ["ac_quick", "ac_reader", "ac_slow"]),
                (Dispatch::AfterCompute, ["ac_quick", "ac_slow", "ac_reader"]),
            ],
        ),
    ];
    for (kernels, src, want) in cases {
        dispatch_orders(kernels, src, want);
    }
}

/// Compiles `g` with each of `dispatches` (and `topo`), runs it `runs`
/// times on `inputs`, checks every result against `want`, and that no
/// buffer is left.
fn runs_right(
    g: &Graph,
    dispatches: &[Dispatch],
    topo: &Topology,
    inputs: &BTreeMap<String, HostTensor>,
    want: &[HostTensor],
    runs: usize,
) {
    for &dispatch in dispatches {
        let runtime = RuntimeOptions {
            dispatch,
            ..RuntimeOptions::default()
        };
        let exe = exec::Compiler::new(g)
            .topology(topo)
            .runtime(runtime)
            .compile()
            .unwrap();
        for _ in 0..runs {
            let got = exe.run_host(inputs).unwrap();
            for (a, b) in got.iter().zip(want) {
                a.check_same(b)
                    .unwrap_or_else(|e| panic!("{dispatch:?}: {e}"));
            }
        }
        assert_no_leaks(&exe);
    }
}

const PIPELINE: &str = "simplify-collectives,combine-collectives,lower-collectives,insert-cross-device-copies,split-cross-vendor-copies,cse,dce";

fn scheduled_pipeline(options: &str) -> String {
    format!("{PIPELINE},schedule-collectives{options}")
}

fn ddp(devices: usize) -> Graph {
    let text = std::fs::read_to_string(format!(
        "{}/golden/passes/extern-ddp-{devices}.fir",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    parse(&text).unwrap()
}

#[test]
fn the_scheduled_ddp_step_computes_what_the_graph_did_in_order_on_the_cpus() {
    for devices in [2, 4] {
        let g = ddp(devices);
        let lowered = lower(&g, PIPELINE);
        let scheduled = lower(&g, &scheduled_pipeline(""));
        let text = print(&scheduled);
        assert!(text.contains("// schedule-collectives: chose "), "{text}");
        assert!(
            text.contains("// schedule-collectives: collective 1 of "),
            "{text}"
        );
        // The same ops, in another order.
        let ops = |g: &Graph| {
            let mut v: Vec<String> = print(g)
                .lines()
                .filter(|l| l.trim_start().starts_with('%'))
                .map(|l| {
                    l.split_once(" = ")
                        .map_or("", |x| x.1)
                        .split(' ')
                        .next()
                        .unwrap_or("")
                        .to_string()
                })
                .collect();
            v.sort();
            v
        };
        assert_eq!(ops(&lowered), ops(&scheduled));
        let inputs = deterministic_inputs(&g);
        let want = interpret(&g, &inputs).unwrap();
        assert_eq!(interpret(&scheduled, &inputs).unwrap(), want);
        let in_order = [Dispatch::Priority, Dispatch::InOrder];
        runs_right(
            &scheduled,
            &in_order,
            &Topology::default(),
            &inputs,
            &want,
            3,
        );
        // A pure function of the graph and topology: the same text twice.
        assert_eq!(print(&lower(&g, &scheduled_pipeline(""))), text);
    }
}

/// The 2-device step with cpu:1 replaced by lavapipe: the scheduled step,
/// run by priority, in order, after compute and FIFO, equals the
/// interpreter.
#[test]
fn the_scheduled_ddp_step_runs_in_every_order_on_cpu_and_vulkan() {
    use fuel_graph_ext::Device;
    let devices = [Device::cpu(0), Device::vulkan(0)];
    if !fuel_test_support::devices_or_skip("the_scheduled_ddp_step_on_vulkan", &devices) {
        return;
    }
    let src = print(&ddp(2)).replace("@cpu:1", "@vulkan:0");
    let g = parse(&src).unwrap();
    let scheduled = lower(&g, &scheduled_pipeline(""));
    assert!(print(&scheduled).contains("schedule-collectives: chose "));
    let inputs = deterministic_inputs(&g);
    let want = interpret(&g, &inputs).unwrap();
    let every = [
        Dispatch::Priority,
        Dispatch::InOrder,
        Dispatch::AfterCompute,
        Dispatch::Fifo,
    ];
    runs_right(&scheduled, &every, &Topology::default(), &inputs, &want, 2);
}

/// The 4-CPU step with its all_reduces carried out by the host driver
/// (`driver_all_reduce` islands: every rank's member on its own compute
/// lane), scheduled and run by priority: islands keep their lanes' order,
/// take no turn of a lane, and complete every member.
#[test]
fn a_scheduled_step_with_driver_islands_runs_in_order() {
    let topo = Topology::parse("driver cpu\n").unwrap();
    let pipeline = format!(
        "{},schedule-collectives",
        PIPELINE.replace("lower-collectives", "lower-collectives{algorithm=driver}")
    );
    let g = ddp(4);
    let scheduled = fuel_test_support::lower_on(&g, &pipeline, &topo);
    let text = print(&scheduled);
    assert!(text.contains("= driver_all_reduce."), "{text}");
    assert!(text.contains("schedule-collectives: chose "), "{text}");
    let inputs = deterministic_inputs(&g);
    let want = interpret(&g, &inputs).unwrap();
    runs_right(&scheduled, &[Dispatch::Priority], &topo, &inputs, &want, 3);
}

#[test]
fn a_graph_without_extern_ops_is_left_alone() {
    let g = parse(
        "graph @plain {
  %0 = input \"a\" @cpu:0 : f32[16]
  %1 = input \"b\" @cpu:1 : f32[16]
  %2:2 = all_reduce.sum %0, %1 : f32[16]
  return %2#0, %2#1
}
",
    )
    .unwrap();
    assert_eq!(
        print(&lower(&g, &scheduled_pipeline(""))),
        print(&lower(&g, PIPELINE))
    );
}

fn pass_error(g: &Graph, pipeline: &str) -> String {
    let mut out = g.clone();
    match fuel_collective::run_pipeline(
        &mut out,
        pipeline,
        std::sync::Arc::new(Topology::default()),
        Default::default(),
    ) {
        Ok(_) => panic!("{pipeline} ran"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn an_unlowered_graph_and_a_bad_policy_are_errors_naming_the_fix() {
    let g = ddp(2);
    let e = pass_error(&g, "schedule-collectives");
    assert!(
        e.contains("still holds a `all_reduce.mean`") && e.contains("after lower-collectives"),
        "{e}"
    );
    let e = pass_error(&g, &scheduled_pipeline("{policy=soonest}"));
    assert!(e.contains("`soonest` is not a policy; use auto"), "{e}");
    let e = pass_error(&g, &scheduled_pipeline("{max_in_flight=lots}"));
    assert!(e.contains("max_in_flight"), "{e}");
}

/// Each forced policy is taken and named; `own` keeps the graph's own
/// order.
#[test]
fn a_forced_policy_is_the_one_chosen() {
    let g = ddp(2);
    let plain = lower(&g, PIPELINE);
    for (policy, named) in [
        ("collectives-first", "collectives-first"),
        ("critical-path", "critical-path"),
        ("own", "own order"),
    ] {
        let scheduled = lower(&g, &scheduled_pipeline(&format!("{{policy={policy}}}")));
        let text = print(&scheduled);
        assert!(
            text.contains(&format!("// schedule-collectives: chose {named}")),
            "{text}"
        );
        if policy == "own" {
            // The same nodes in the same order: only the notes differ.
            let body = |t: &str| {
                t.lines()
                    .filter(|l| !l.contains("// "))
                    .map(String::from)
                    .collect::<Vec<_>>()
            };
            assert_eq!(body(&text), body(&print(&plain)));
        }
    }
}
