//! `auto`'s pipelined star (`star@D{chunks=k}`, issue 35 item 4): on the
//! shipped PCIe workstation a large all_reduce picks the star whose staged
//! relay travels in pieces, its estimate is the model's price of the cut
//! graph (below the whole-value star, never below the bound), the pass
//! emits the pieces it priced, and the lowered graph means what the
//! collective meant (reference interpreter). Small values, `algorithm=`
//! and `chunks=` never see the candidate.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use fuel_collective::lower::{decisions, Candidate, Lowering, Piped, Star};
use fuel_graph_ext::pass::DebugOptions;
use fuel_graph_ext::{DType, Device, Graph, Op, ReduceOp, Topology};
use fuel_test_support::{all_reduce_graph, same_meaning};
use std::sync::Arc;

/// A shipped topology file, `examples/topologies/<name>`.
fn shipped(name: &str) -> Topology {
    let p = format!(
        "{}/../examples/topologies/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    Topology::parse(&std::fs::read_to_string(&p).unwrap()).unwrap()
}

/// One all_reduce.sum over `devices`, f32 of `elements`.
fn all_reduce(devices: &[Device], elements: usize) -> Graph {
    all_reduce_graph(devices, DType::F32, elements, ReduceOp::Sum)
}

/// Lowers `g` with `pipeline` on `topo`: the graph and its one decision.
fn lower(g: &Graph, pipeline: &str, topo: &Topology) -> (Graph, fuel_collective::lower::Decision) {
    let mut out = g.clone();
    let pm = fuel_collective::run_pipeline(
        &mut out,
        pipeline,
        Arc::new(topo.clone()),
        DebugOptions::verifying(),
    )
    .unwrap();
    let d = decisions(&pm);
    assert_eq!(d.len(), 1);
    (out, d[0].clone())
}

fn piped(c: &Candidate) -> Option<(Piped, f64)> {
    match c {
        Candidate::Estimated {
            lowering: Lowering::Piped(p),
            estimate,
        } => Some((*p, estimate.total_us())),
        _ => None,
    }
}

fn whole_star(d: &fuel_collective::lower::Decision, star: Star) -> f64 {
    d.candidates
        .iter()
        .find_map(|c| match c {
            Candidate::Estimated {
                lowering: Lowering::Star(s),
                estimate,
            } if *s == star => Some(estimate.total_us()),
            _ => None,
        })
        .unwrap()
}

fn slices(g: &Graph) -> usize {
    g.node_ids()
        .filter(|id| {
            g.node(*id)
                .is_some_and(|n| matches!(n.op, Op::Slice { .. }))
        })
        .count()
}

#[test]
fn auto_pipelines_the_pcie_workstations_star_and_it_means_the_same() {
    let topo = shipped("pcie-cuda-vulkan.topo");
    let devices = [Device::cuda(0), Device::vulkan(0), Device::cpu(0)];
    // 1 MiB per shard (from 4 MiB up `split`, which folds on both GPUs at
    // once, is cheaper still).
    let g = all_reduce(&devices, 1 << 18);
    let (lowered, d) = lower(&g, "lower-collectives", &topo);
    let Lowering::Piped(p) = d.lowering else {
        panic!("auto chose {}, not a pipelined star: {d}", d.lowering);
    };
    assert!(p.k >= 2, "{p}");
    let (_, est) = d.candidates.iter().find_map(piped).unwrap();
    assert!(est < whole_star(&d, p.star), "{d}");
    assert!(d.over_bound().unwrap() >= 1.0, "below the bound: {d}");
    // The pass emitted the pieces it priced, and they mean the same.
    let (whole, _) = lower(&g, "lower-collectives{algorithm=star}", &topo);
    assert!(slices(&lowered) > slices(&whole), "nothing was cut");
    assert!(
        lowered.notes().iter().any(|n| n.contains("pipelined star")),
        "no note"
    );
    same_meaning(&g, &lowered).unwrap();
}

/// On the NVLink box the model's busiest resource at 4 MiB is host memory
/// (five passes of the value at twice the host-to-host figure), not the
/// relay's chain: pieces buy nothing, and the list is as it was.
#[test]
fn pieces_are_not_listed_where_host_memory_binds() {
    let topo = shipped("nvlink8-igpu.topo");
    let devices: Vec<Device> = (0..8)
        .map(Device::cuda)
        .chain([Device::vulkan(0), Device::cpu(0)])
        .collect();
    let (_, d) = lower(&all_reduce(&devices, 1 << 20), "lower-collectives", &topo);
    assert!(d.candidates.iter().all(|c| piped(c).is_none()), "{d}");
    assert_eq!(d.lowering, Lowering::Star(Star::at(Some(Device::cuda(0)))));
}

#[test]
fn small_values_and_explicit_choices_never_see_the_candidate() {
    let topo = shipped("pcie-cuda-vulkan.topo");
    let devices = [Device::cuda(0), Device::vulkan(0), Device::cpu(0)];
    // 64 KiB: pieces do not pay, the list is as it was.
    let (_, d) = lower(&all_reduce(&devices, 16 << 10), "lower-collectives", &topo);
    assert!(d.candidates.iter().all(|c| piped(c).is_none()), "{d}");
    let big = all_reduce(&devices, 1 << 20);
    for p in [
        "lower-collectives{algorithm=star}",
        "lower-collectives{chunks=auto}",
        "lower-collectives{chunks=1}",
    ] {
        let (_, d) = lower(&big, p, &topo);
        assert!(d.candidates.iter().all(|c| piped(c).is_none()), "{p}: {d}");
    }
    // A host group relays nothing.
    let cpus: Vec<Device> = (0..4).map(Device::cpu).collect();
    let (_, d) = lower(&all_reduce(&cpus, 1 << 20), "lower-collectives", &topo);
    assert!(d.candidates.iter().all(|c| piped(c).is_none()), "{d}");
}
