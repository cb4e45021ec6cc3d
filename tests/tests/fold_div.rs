//! A fold that divides its own result (`plan::Kernel::FoldDiv`): on a host
//! arena, an element-wise fold read once, by a `div` on the same device,
//! and not a graph output, runs as one step that divides each block as it
//! folds it (a Mean's sum and division, one pass over memory). Checked
//! here: which folds the plan fuses and which it leaves alone; that the
//! fused run gives the interpreter's bits on every dtype that divides, as
//! the two-step run does; that it makes one buffer fewer per run; and that
//! a fault at every point of it leaks nothing.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use fuel_graph_ext::{text, DType, Device, Graph, Topology};
use fuel_runtime::exec::{self, Executable};
use fuel_test_support::{fail_at_every_point, runs_exactly};

/// %3 (a sum read once, by %4) is fused; %5 is read by a div and by a
/// max, %7 is a graph output, and %9 is divided on another device: those
/// three keep their own steps.
fn graph(dtype: &str) -> String {
    let t = format!("{dtype}[300]");
    format!(
        "graph @fold_div {{
  %0 = input \"a\" @cpu:0 : {t}
  %1 = input \"b\" @cpu:0 : {t}
  %2 = input \"c\" @cpu:0 : {t}
  %3 = add %0, %1, %2 @cpu:0 : {t}
  %4 = div %3 {{by=3}} @cpu:0 : {t}
  %5 = add %0, %2 @cpu:0 : {t}
  %6 = div %5 {{by=2}} @cpu:0 : {t}
  %7 = max %5, %6 @cpu:0 : {t}
  %8 = div %7 {{by=7}} @cpu:0 : {t}
  %9 = mul %1, %2 @cpu:0 : {t}
  %10 = copy %9 -> cpu:1 : {t}
  %11 = div %9 {{by=5}} @cpu:0 : {t}
  %12 = div %10 {{by=5}} @cpu:1 : {t}
  return %4, %7, %8, %11, %12
}}
"
    )
}

fn compiled(g: &Graph, divide_in_folds: bool) -> Executable {
    let options = exec::Options {
        divide_in_folds,
        ..Default::default()
    };
    exec::compile_with_options(
        g,
        &[Device::cpu(0), Device::cpu(1)],
        &Topology::default(),
        options,
    )
    .unwrap()
}

#[test]
fn a_fold_read_once_by_a_div_divides_itself() {
    // Bool has no division.
    for dtype in DType::ALL.into_iter().filter(|d| *d != DType::Bool) {
        let name = dtype.to_string();
        let g = text::parse(&graph(&name)).unwrap();
        let fused = compiled(&g, true);
        let apart = compiled(&g, false);
        let numbering = text::Numbering::new(&g);
        let divided: Vec<usize> = fused
            .divided_folds()
            .into_iter()
            .filter_map(|n| numbering.number(n))
            .collect();
        assert_eq!(divided, [4], "{name}: the divs run inside their fold");
        assert!(apart.divided_folds().is_empty(), "{name}: switched off");
        let made_fused = runs_exactly(&g, &fused, Device::cpu(0), &format!("{name}, fused"));
        let made_apart = runs_exactly(&g, &apart, Device::cpu(0), &format!("{name}, apart"));
        assert_eq!(
            made_apart - made_fused,
            1,
            "{name}: the fused sum has no buffer ({made_fused} buffers per run fused, {made_apart} apart)"
        );
    }
}

#[test]
fn a_fused_fold_that_fails_anywhere_leaks_nothing() {
    let g = text::parse(&graph("f32")).unwrap();
    let checked = fail_at_every_point(&g, &[Device::cpu(0), Device::cpu(1)]);
    assert!(checked > 0);
}

#[test]
fn the_plan_lists_the_fused_step() {
    let g = text::parse(&graph("f16")).unwrap();
    let plan = fuel_graph_ext::plan::Schedule::new(&g).unwrap();
    let listed = fuel_graph_ext::plan::listing::print(&plan, &g, "assumed");
    assert!(listed.contains("fold add, div by 3"), "{listed}");
    // Two adds, a max and a mul in the graph: four fold steps, the sum %3
    // among them as the fused one; five divisions, %4 (fused) among them.
    assert_eq!(listed.matches("fold ").count(), 4, "{listed}");
    assert_eq!(listed.matches("div by").count(), 5, "{listed}");
}
