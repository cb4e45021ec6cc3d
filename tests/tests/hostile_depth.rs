//! Depth: no walk over a graph recurses in proportion to its size.
//!
//! A 200 000-node chain, alternating between two CPU devices so that every
//! link needs a copy, ending in an all_reduce, is parsed, verified, printed,
//! drawn as DOT, lowered with the default pipeline, interpreted, compiled
//! and run, all on a thread with the 8 MiB stack a main thread gets by
//! default. The test spawns that thread itself, so the test harness's own
//! stack size does not decide the outcome. A recursive walk anywhere (the
//! interpreter's cycle check used petgraph's recursive DFS, which
//! overflowed at about 50 000 nodes) aborts the test binary with a stack
//! overflow.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use fuel_graph_ext::interp::{deterministic_inputs, interpret};
use fuel_graph_ext::pass::{DebugOptions, PassContext, PassManager};
use fuel_graph_ext::verify::{verify, Level};
use fuel_graph_ext::{dot, text, Topology};
use fuel_runtime::exec;
use std::fmt::Write;
use std::sync::Arc;

/// The main thread's default stack on Linux (`ulimit -s` 8192).
const MAIN_STACK: usize = 8 << 20;

/// `n` nodes: two inputs, then `max`es alternating between cpu:0 and
/// cpu:1 (each reads the previous value, from the other device, and the
/// one before it, from its own), and an all_reduce of the last two.
fn chain(n: usize) -> String {
    let mut s = String::with_capacity(n * 48);
    s.push_str("graph @chain {\n");
    s.push_str("  %0 = input \"a\" @cpu:0 : i32[4]\n");
    s.push_str("  %1 = input \"b\" @cpu:1 : i32[4]\n");
    for k in 2..n {
        let _ = writeln!(
            s,
            "  %{k} = max %{}, %{} @cpu:{} : i32[4]",
            k - 1,
            k - 2,
            k % 2
        );
    }
    let _ = writeln!(
        s,
        "  %{n}:2 = all_reduce.sum %{}, %{} : i32[4]",
        n - 2,
        n - 1
    );
    let _ = writeln!(s, "  return %{n}#0, %{n}#1\n}}");
    s
}

fn on_main_sized_stack(f: impl FnOnce() + Send + 'static) {
    std::thread::Builder::new()
        .name("main-sized".into())
        .stack_size(MAIN_STACK)
        .spawn(f)
        .unwrap()
        .join()
        .expect("the walk panicked");
}

#[test]
fn a_200k_node_chain_goes_through_everything_on_an_8_mib_stack() {
    on_main_sized_stack(|| {
        let src = chain(200_000);
        let g = text::parse(&src).unwrap();
        assert_eq!(g.node_count(), 200_001);
        let topo = Arc::new(Topology::default());
        verify(&g, Level::Structural, &topo).unwrap();
        assert!(g.is_acyclic());
        let printed = text::print(&g);
        assert_eq!(text::print(&text::parse(&printed).unwrap()), printed);
        assert!(dot::to_dot(&g).starts_with("digraph"));
        let mut lowered = g.clone();
        let cx = PassContext {
            topology: topo.clone(),
        };
        PassManager::new(
            &fuel_collective::registry(),
            fuel_collective::DEFAULT_PIPELINE,
            cx,
            DebugOptions::verifying(),
        )
        .unwrap()
        .run(&mut lowered)
        .unwrap();
        let inputs = deterministic_inputs(&g);
        let want = interpret(&g, &inputs).unwrap();
        assert_eq!(interpret(&lowered, &inputs).unwrap(), want);
        let exe = exec::compile(&lowered, &[]).unwrap();
        let got = exe.run_host(&inputs).unwrap();
        assert_eq!(got, want);
        // Dropping deep graphs and executables must not recurse either.
        drop((g, lowered, exe));
    });
}
