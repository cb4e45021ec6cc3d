//! `lower-collectives` options, its decisions (and the notes that show
//! them) and determinism.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use fuel_collective::lower::{decisions, Candidate, Reason, Star, Tree};
use fuel_collective::{Decision, Lowering};
use fuel_graph_ext::pass::{DebugOptions, PassError};
use fuel_graph_ext::{dot, text, Device, Op, ReduceOp, Topology};
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

/// Runs `pipeline` on `src`; returns the text IR, the DOT and what every
/// `lower-collectives` in it decided.
fn run(src: &str, pipeline: &str) -> Result<(String, String, Vec<Decision>), PassError> {
    let mut g = text::parse(src).unwrap();
    let topo = Arc::new(Topology::default().with_peer(0, 1));
    let pm = fuel_collective::run_pipeline(&mut g, pipeline, topo, DebugOptions::default())?;
    let decisions = decisions(&pm).into_iter().cloned().collect();
    Ok((text::print(&g), dot::to_dot(&g), decisions))
}

#[test]
fn lowering_twice_is_byte_identical() {
    for alg in ["auto", "star", "hierarchical", "ring", "tree"] {
        let p = format!("lower-collectives{{algorithm={alg}}}");
        let a = run(MIX8, &p).unwrap();
        let b = run(MIX8, &p).unwrap();
        assert_eq!(a, b, "{alg}");
        // A second run in one pipeline finds nothing left to lower.
        let (fir, dot, _) = run(MIX8, &format!("{p},{p}")).unwrap();
        assert_eq!((a.0, a.1), (fir, dot), "{alg}");
    }
}

/// The estimated candidates of a decision, by algorithm name.
fn estimated(d: &Decision) -> Vec<(Lowering, f64)> {
    d.candidates
        .iter()
        .filter_map(|c| match c {
            Candidate::Estimated { lowering, estimate } => Some((*lowering, estimate.total_us())),
            Candidate::Unfit { .. } => None,
        })
        .collect()
}

#[test]
fn decisions_record_the_choice_and_every_estimate() {
    let (fir, dot, decisions) = run(MIX8, "lower-collectives").unwrap();
    assert_eq!(decisions.len(), 2, "one decision per collective:\n{fir}");
    assert_eq!(decisions[0].op, Op::AllReduce { op: ReduceOp::Mean });
    assert_eq!(decisions[1].op, Op::AllGather { axis: 0 });
    for d in &decisions {
        assert_eq!(d.reason, Reason::Cheapest);
        assert_eq!(d.devices.len(), 8);
        let est = estimated(d);
        for family in ["star", "hierarchical", "ring", "tree"] {
            assert!(
                est.iter().any(|(l, _)| l.name() == family),
                "{family} missing from {d}"
            );
        }
        // auto keeps the first of the cheapest.
        let best = est
            .iter()
            .fold(None::<&(Lowering, f64)>, |b, c| match b {
                Some(b) if b.1 <= c.1 => Some(b),
                _ => Some(c),
            })
            .unwrap();
        assert_eq!(d.lowering, best.0, "{d}");
        // The note is the decision's text, in the IR and the DOT.
        assert!(fir.contains(&format!("  // {d}\n")), "{d}\n{fir}");
        assert!(d.to_string().contains(&format!(" chose {} (", d.lowering)));
    }
    assert!(
        dot.contains("label=\"lower-collectives: all_reduce.mean"),
        "{dot}"
    );
    // The all_reduce combines: every star candidate has a point.
    assert!(estimated(&decisions[0])
        .iter()
        .all(|(l, _)| !matches!(l, Lowering::Star(Star { at: None, .. }))));
    let body: Vec<&str> = fir.lines().filter(|l| !l.starts_with("  //")).collect();
    assert!(
        body.iter()
            .all(|l| !l.contains("all_reduce") && !l.contains("all_gather")),
        "{fir}"
    );
}

#[test]
fn reduce_at_picks_the_star_point() {
    let (fir, _, d) = run(MIX8, "lower-collectives{algorithm=star, reduce_at=cuda:1}").unwrap();
    assert_eq!(
        d[0].lowering,
        Lowering::Star(Star::at(Some(Device::cuda(1))))
    );
    assert_eq!(d[0].reason, Reason::Asked("star"));
    assert!(
        fir.contains("add") && fir.contains("@cuda:1 : f32[8]"),
        "{fir}"
    );
    let (_, _, d) = run(MIX8, "lower-collectives{algorithm=tree, arity=4}").unwrap();
    assert_eq!(d[0].lowering, Lowering::Tree(Tree { root: 0, arity: 4 }));
}

#[test]
fn an_algorithm_without_a_candidate_falls_back() {
    // No topology here declares a driver, and a scalar cannot be cut.
    let (_, _, d) = run(MIX8, "lower-collectives{algorithm=driver}").unwrap();
    assert_eq!(
        d[0].reason,
        Reason::FellBack {
            asked: "driver",
            to: "hierarchical",
            because: "needs an all_reduce over an island of two or more devices with a driver (`driver cpu` or `driver cuda` in the topology)",
        }
    );
    assert_eq!(d[0].lowering.name(), "hierarchical");
    let scalar = "graph @s {\n  %0 = input \"a\" @cpu:0 : f32[]\n  %1 = input \"b\" @cuda:0 : f32[]\n  %2:2 = all_reduce.sum %0, %1 : f32[]\n  return %2#0, %2#1\n}\n";
    let (_, _, d) = run(scalar, "lower-collectives{algorithm=ring}").unwrap();
    assert!(
        matches!(
            d[0].reason,
            Reason::FellBack {
                asked: "ring",
                to: "tree",
                ..
            }
        ),
        "{}",
        d[0]
    );
    assert!(
        d[0].candidates.iter().any(|c| matches!(
            c,
            Candidate::Unfit {
                algorithm: "ring",
                ..
            }
        )),
        "{}",
        d[0]
    );
    assert_eq!(d[0].lowering.name(), "tree");
    // Only the asked algorithm and the one it fell back to were estimated.
    let names: Vec<&str> = d[0]
        .candidates
        .iter()
        .map(|c| match c {
            Candidate::Estimated { lowering, .. } => lowering.name(),
            Candidate::Unfit { algorithm, .. } => algorithm,
        })
        .collect();
    assert_eq!(names, ["ring", "tree"], "{}", d[0]);
}

/// `algorithm=<name>` estimates that algorithm's candidates only: a fixed
/// star over many devices never pays for the ring's estimate.
#[test]
fn a_fixed_algorithm_estimates_only_its_own_candidates() {
    for (alg, family) in [
        ("star", "star"),
        ("hierarchical", "hierarchical"),
        ("ring", "ring"),
        ("tree, arity=3", "tree"),
    ] {
        let (_, _, d) = run(MIX8, &format!("lower-collectives{{algorithm={alg}}}")).unwrap();
        for decision in &d {
            assert!(!decision.candidates.is_empty(), "{decision}");
            for c in decision.candidates.iter() {
                let name = match c {
                    Candidate::Estimated { lowering, .. } => lowering.name(),
                    Candidate::Unfit { algorithm, .. } => algorithm,
                };
                assert_eq!(name, family, "{alg}: {decision}");
            }
        }
    }
    // The star's candidates: every device of the group and the staging CPU.
    let (_, _, d) = run(MIX8, "lower-collectives{algorithm=star}").unwrap();
    assert_eq!(estimated(&d[0]).len(), 7, "{}", d[0]);
    assert!(!d[0].to_string().contains("ring"), "{}", d[0]);
}

#[test]
fn bad_options_are_errors_that_say_what_to_write() {
    let e = run(MIX8, "lower-collectives{algorithm=butterfly}").unwrap_err();
    assert!(
        e.to_string()
            .contains("expected auto, star, hierarchical, ring, tree, driver, pairwise or split"),
        "{e}"
    );
    let e = run(MIX8, "lower-collectives{arity=1}").unwrap_err();
    assert!(e.to_string().contains("2 or more children"), "{e}");
    let e = run(MIX8, "lower-collectives{arity=two}").unwrap_err();
    assert!(matches!(e, PassError::BadOption { .. }), "{e}");
    let e = run(MIX8, "lower-collectives{reduce_at=gpu:0}").unwrap_err();
    assert!(e.to_string().contains("expected `cpu:N`"), "{e}");
    let e = run(MIX8, "lower-collectives{pieces=3}").unwrap_err();
    assert!(
        e.to_string()
            .contains("known options: algorithm, arity, chunks, exchange, reduce_at"),
        "{e}"
    );
}

/// A 3-rank all_to_all of 1 MiB pieces over `[vulkan:0, vulkan:1, cpu:0]`.
const A2A_VK: &str = "graph @a2a {
  %0 = input \"x0\" @vulkan:0 : f32[786432]
  %1 = input \"x1\" @vulkan:1 : f32[786432]
  %2 = input \"x2\" @cpu:0 : f32[786432]
  %3:3 = all_to_all %0, %1, %2 {axis=0} : f32[786432], f32[786432], f32[786432]
  return %3#0, %3#1, %3#2
}
";

/// `src` (one collective) lowered by `auto` on `topo`, verified after
/// each pass: the graph and the collective's decision.
fn lowered_on(src: &str, topo: Topology) -> (fuel_graph_ext::Graph, Decision) {
    let mut g = text::parse(src).unwrap();
    let pm = fuel_collective::run_pipeline(
        &mut g,
        "lower-collectives",
        Arc::new(topo),
        DebugOptions::verifying(),
    )
    .unwrap();
    let d = decisions(&pm).into_iter().next().cloned().unwrap();
    (g, d)
}

#[test]
fn all_to_all_joins_a_host_memory_gpus_pieces_on_the_host() {
    use fuel_collective::lower::Exchange;
    let lower = |topo: Topology| lowered_on(A2A_VK, topo);
    // Vulkan devices whose memory is the host's (lavapipe): `joined` is
    // weighed and wins, each Vulkan rank's pieces meeting on cpu:0 and
    // going over in one copy.
    let (g, d) = lower(Topology::parse("host-kernels vulkan\ncores 2").unwrap());
    assert_eq!(d.lowering, Lowering::AllToAll(Exchange::JOINED), "{d:?}");
    let est = estimated(&d);
    let of = |x: Exchange| {
        est.iter()
            .find(|(l, _)| *l == Lowering::AllToAll(x))
            .map(|(_, us)| *us)
            .unwrap()
    };
    assert!(of(Exchange::JOINED) < of(Exchange::DIRECT), "{est:?}");
    let concats_on_cpu = g
        .node_ids()
        .filter_map(|id| g.node(id))
        .filter(|n| matches!(n.op, Op::Concat { .. }) && n.op.device() == Some(Device::cpu(0)))
        .count();
    assert_eq!(concats_on_cpu, 3, "{}", text::print(&g));
    // Discrete Vulkan devices (the defaults): not weighed.
    let (_, d) = lower(Topology::default());
    assert!(
        estimated(&d)
            .iter()
            .all(|(l, _)| *l != Lowering::AllToAll(Exchange::JOINED)),
        "{d:?}"
    );
}

/// On the 8-GPU box with an iGPU (`nvlink8-igpu.topo`), `joined` joins the
/// iGPU's pieces on the host and leaves the CUDA ranks direct: their pieces
/// from their peers come straight over NVLink, and a join on the host
/// would cost them one more upload. Before that rule the CUDA ranks were
/// joined too, `joined` priced 2.6x `direct`, and `auto`'s `direct` sat at
/// 1.41x the bound.
#[test]
fn all_to_all_joined_leaves_cuda_ranks_direct() {
    use fuel_collective::lower::Exchange;
    let topo =
        Topology::parse(include_str!("../../examples/topologies/nvlink8-igpu.topo")).unwrap();
    // 4 MiB per rank over the box's ten ranks.
    let devs: Vec<String> = (0..8)
        .map(|i| format!("cuda:{i}"))
        .chain(["vulkan:0".to_string(), "cpu:0".to_string()])
        .collect();
    let mut src = String::from("graph @a2a {\n");
    for (i, d) in devs.iter().enumerate() {
        src += &format!("  %{i} = input \"x{i}\" @{d} : f32[1048580]\n");
    }
    let ops: Vec<String> = (0..10).map(|i| format!("%{i}")).collect();
    let tys = ["f32[1048580]"; 10].join(", ");
    src += &format!(
        "  %10:10 = all_to_all {} {{axis=0}} : {tys}\n",
        ops.join(", ")
    );
    let rets: Vec<String> = (0..10).map(|i| format!("%10#{i}")).collect();
    src += &format!("  return {}\n}}\n", rets.join(", "));
    let before = text::parse(&src).unwrap();
    let (g, d) = lowered_on(&src, topo);
    assert_eq!(d.lowering, Lowering::AllToAll(Exchange::JOINED), "{d:?}");
    assert!(d.over_bound().unwrap() <= 1.1, "{d}");
    // Each CUDA rank joins its own pieces; the iGPU's and the CPU's meet on
    // cpu:0.
    let mut joins: Vec<Device> = g
        .node_ids()
        .filter_map(|id| g.node(id))
        .filter(|n| matches!(n.op, Op::Concat { .. }))
        .filter_map(|n| n.op.device())
        .collect();
    joins.sort();
    let mut want: Vec<Device> = (0..8).map(Device::cuda).collect();
    want.extend([Device::cpu(0), Device::cpu(0)]);
    want.sort();
    assert_eq!(joins, want, "{}", text::print(&g));
    let inputs = fuel_graph_ext::interp::deterministic_inputs(&before);
    assert_eq!(
        fuel_graph_ext::interp::interpret(&g, &inputs).unwrap(),
        fuel_graph_ext::interp::interpret(&before, &inputs).unwrap()
    );
}
