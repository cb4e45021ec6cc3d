//! `lower-collectives` options, notes and determinism.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use fuel_graph_ext::pass::{DebugOptions, PassContext, PassError, PassManager};
use fuel_graph_ext::{dot, text, Topology};
use std::sync::Arc;

const MIX8: &str = "graph @mix {
  %0 = input \"a\" @cuda:0 : f32[8]
  %1 = input \"b\" @cpu:0 : f32[8]
  %2 = input \"c\" @vulkan:0 : f32[8]
  %3 = input \"d\" @cuda:1 : f32[8]
  %4 = input \"e\" @cpu:1 : f32[8]
  %5 = input \"f\" @vulkan:1 : f32[8]
  %6 = input \"g\" @cuda:2 : f32[8]
  %7 = input \"h\" @cpu:0 : f32[8]
  %8:8 = all_reduce.mean %0, %1, %2, %3, %4, %5, %6, %7 : f32[8]
  %9:8 = all_gather %8#0, %8#1, %8#2, %8#3, %8#4, %8#5, %8#6, %8#7 {axis=0} : f32[64]
  return %9#7, %8#2, %9#0
}
";

fn run(src: &str, pipeline: &str) -> Result<(String, String), PassError> {
    let mut g = text::parse(src).unwrap();
    let topo = Arc::new(Topology::default().with_peer(0, 1));
    let mut pm = PassManager::new(
        &fuel_collective::registry(),
        pipeline,
        PassContext { topology: topo },
        DebugOptions::default(),
    )?;
    pm.run(&mut g)?;
    Ok((text::print(&g), dot::to_dot(&g)))
}

#[test]
fn lowering_twice_is_byte_identical() {
    for alg in ["auto", "star", "hierarchical", "ring", "tree"] {
        let p = format!("lower-collectives{{algorithm={alg}}}");
        let a = run(MIX8, &p).unwrap();
        let b = run(MIX8, &p).unwrap();
        assert_eq!(a, b, "{alg}");
        // A second run in one pipeline finds nothing left to lower.
        let twice = run(MIX8, &format!("{p},{p}")).unwrap();
        assert_eq!(a, twice, "{alg}");
    }
}

#[test]
fn notes_name_the_choice_and_every_estimate() {
    let (fir, dot) = run(MIX8, "lower-collectives").unwrap();
    let notes: Vec<&str> = fir.lines().filter(|l| l.starts_with("  // ")).collect();
    assert_eq!(notes.len(), 2, "one note per collective:\n{fir}");
    for n in &notes {
        assert!(n.contains("chose "), "{n}");
        for family in ["star", "hierarchical", "ring", "tree{arity=2}"] {
            assert!(n.contains(family), "{family} missing from {n}");
        }
        assert!(n.contains("us ("), "{n}");
    }
    assert!(notes[0].contains("all_reduce.mean"), "{}", notes[0]);
    assert!(
        dot.contains("label=\"lower-collectives: all_reduce.mean"),
        "{dot}"
    );
    assert!(notes[0].contains("star@"), "{}", notes[0]);
    let body: Vec<&str> = fir.lines().filter(|l| !l.starts_with("  //")).collect();
    assert!(
        body.iter()
            .all(|l| !l.contains("all_reduce") && !l.contains("all_gather")),
        "{fir}"
    );
}

#[test]
fn reduce_at_picks_the_star_point() {
    let (fir, _) = run(MIX8, "lower-collectives{algorithm=star, reduce_at=cuda:1}").unwrap();
    assert!(fir.contains("chose star@cuda:1"), "{fir}");
    assert!(
        fir.contains("add") && fir.contains("@cuda:1 : f32[8]"),
        "{fir}"
    );
    let (fir, _) = run(MIX8, "lower-collectives{algorithm=tree, arity=4}").unwrap();
    assert!(fir.contains("chose tree{arity=4}"), "{fir}");
}

#[test]
fn bad_options_are_errors_that_say_what_to_write() {
    let e = run(MIX8, "lower-collectives{algorithm=butterfly}").unwrap_err();
    assert!(
        e.to_string()
            .contains("expected auto, star, hierarchical, ring, tree or driver"),
        "{e}"
    );
    let e = run(MIX8, "lower-collectives{arity=1}").unwrap_err();
    assert!(e.to_string().contains("2 or more children"), "{e}");
    let e = run(MIX8, "lower-collectives{arity=two}").unwrap_err();
    assert!(matches!(e, PassError::BadOption { .. }), "{e}");
    let e = run(MIX8, "lower-collectives{reduce_at=gpu:0}").unwrap_err();
    assert!(e.to_string().contains("expected `cpu:N`"), "{e}");
    let e = run(MIX8, "lower-collectives{chunks=3}").unwrap_err();
    assert!(
        e.to_string()
            .contains("known options: algorithm, arity, reduce_at"),
        "{e}"
    );
}
