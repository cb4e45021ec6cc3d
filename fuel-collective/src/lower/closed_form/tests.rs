//! Tests of the closed forms: for random groups, topologies, shapes and
//! kinds, each equals the estimate of the graph its algorithm builds.

use super::super::estimate::Scratch;
use super::super::ring::Ring;
use super::super::star::Star;
use super::*;
use fuel_graph_ext::topology::{ComputeCost, Curve, LinkClass, LinkCost, Runner, RunnerCost};
use fuel_graph_ext::{text, DeviceKind};
use proptest::prelude::*;

const POOL: [Device; 9] = [
    Device::cpu(0),
    Device::cpu(1),
    Device::cpu(2),
    Device::cuda(0),
    Device::cuda(1),
    Device::cuda(2),
    Device::vulkan(0),
    Device::vulkan(1),
    Device::vulkan(2),
];

/// The collective's text IR: one input per rank, then the collective.
fn source(devs: &[Device], kind: usize, mean: bool, shape: &[usize]) -> String {
    let n = devs.len();
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    let ty = format!("f32[{}]", dims.join(","));
    let mut s = String::from("graph @p {\n");
    for (i, d) in devs.iter().enumerate() {
        s += &format!("  %{i} = input \"s{i}\" @{d} : {ty}\n");
    }
    let args: Vec<String> = (0..n).map(|i| format!("%{i}")).collect();
    let op = if mean { "mean" } else { "sum" };
    let (line, results) = match kind {
        0 => (
            format!("  %{n}:{n} = all_reduce.{op} {} : {ty}\n", args.join(", ")),
            n,
        ),
        1 => (
            format!(
                "  %{n} = reduce.{op} {} {{root={}}} : {ty}\n",
                args.join(", "),
                n - 1
            ),
            1,
        ),
        3 => {
            // Uneven: rank 0 keeps all but one row per other rank.
            let mut split = vec![1; n];
            split[0] = shape[0] - (n - 1);
            let tys: Vec<String> = split
                .iter()
                .map(|r| format!("f32[{r},{}]", shape[1]))
                .collect();
            let split: Vec<String> = split.iter().map(|r| r.to_string()).collect();
            (
                format!(
                    "  %{n}:{n} = reduce_scatter.{op} {} {{axis=0, split=[{}]}} : {}\n",
                    args.join(", "),
                    split.join(", "),
                    tys.join(", ")
                ),
                n,
            )
        }
        _ => {
            let mut part = shape.to_vec();
            part[0] /= n;
            let dims: Vec<String> = part.iter().map(|d| d.to_string()).collect();
            (
                format!(
                    "  %{n}:{n} = reduce_scatter.{op} {} {{axis=0}} : f32[{}]\n",
                    args.join(", "),
                    dims.join(",")
                ),
                n,
            )
        }
    };
    s += &line;
    let rets: Vec<String> = if results == 1 {
        vec![format!("%{n}")]
    } else {
        (0..results).map(|i| format!("%{n}#{i}")).collect()
    };
    s + &format!("  return {}\n}}\n", rets.join(", "))
}

fn topology(peers: bool, staging: u32, scale: f64, align: usize) -> Topology {
    let mut t = Topology::default();
    t.set_vulkan_view_align(align).unwrap();
    if peers {
        t = t.with_peer(0, 1);
    }
    t.staging = Device::cpu(staging);
    for c in LinkClass::ALL {
        let l = t.link(c);
        t.set_link(
            c,
            LinkCost {
                bandwidth: Curve::new(&[(16, 3.0 * scale), (256, scale)]).unwrap(),
                latency_us: l.latency_us / scale,
                deferred_gbps: l.deferred_gbps * scale * 1.5,
            },
        );
    }
    for k in DeviceKind::ALL {
        let c = t.compute(k);
        t.set_compute(
            k,
            ComputeCost {
                gbps: c.gbps.map(|_, g| g / scale),
                fixed_us: c.fixed_us * scale,
                // Lavapipe-like at the largest scale: a wide fold costs
                // about what a two-input one does.
                wide: if scale > 2.0 { 0.05 } else { c.wide },
            },
        );
    }
    let th = t.runner(Runner::Threaded);
    t.set_runner(
        Runner::Threaded,
        RunnerCost {
            step_us: th.step_us * scale,
            run_us: th.run_us,
            dispatch_us: th.dispatch_us * scale * 2.0,
        },
    );
    if scale > 1.0 {
        t.host_memory.insert(DeviceKind::Vulkan);
    }
    // Past 2, lavapipe-like: its kernels run on two host cores.
    if scale > 2.0 {
        t.host_kernels.insert(DeviceKind::Vulkan);
        t.set_host_cores(Some(2));
        t.set_handoff_cpu_us(1.0);
    }
    t
}

/// The graph `src` parses to, and its one collective.
fn parsed(src: &str) -> (fuel_graph_ext::Graph, CollectiveSite) {
    let g = text::parse(src).unwrap();
    let id = g
        .node_ids()
        .find(|id| g.node(*id).is_some_and(|x| x.op.is_collective()))
        .unwrap();
    let site = CollectiveSite::read(&g, id).unwrap();
    (g, site)
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// The closed forms give the estimate the graph gives.
    #[test]
    fn closed_forms_equal_the_graphs_estimate(
        picks in prop::collection::vec(0..POOL.len(), 2..=7),
        kind in 0usize..4,
        mean in any::<bool>(),
        rows in 1usize..4,
        cols in 1usize..9,
        wide in any::<bool>(),
        peers in any::<bool>(),
        staging in 0u32..3,
        scale in prop::sample::select(vec![0.05, 1.0, 20.0]),
        align in prop::sample::select(vec![4usize, 16, 256]),
    ) {
        let devs: Vec<Device> = picks.iter().map(|i| POOL[*i]).collect();
        let n = devs.len();
        // Reduce-scatter needs the cut axis to divide by the ranks.
        // Wide tensors are pages long: host-to-Vulkan hops of computed
        // values become imports, and inputs on Vulkan in host memory
        // are read in place.
        let cols = if wide { cols * 1024 } else { cols };
        let shape = if kind >= 2 { vec![n * rows, cols] } else { vec![rows * 3, cols] };
        let (g, site) = parsed(&source(&devs, kind, mean, &shape));
        let topo = topology(peers, staging, scale, align);
        let scratch = Scratch::new(&g, &site).unwrap();
        let mut lowerings: Vec<Lowering> = arrange::unique(&devs)
            .into_iter()
            .chain([topo.staging])
            .map(|d| Lowering::Star(Star::at(Some(d))))
            .collect();
        lowerings.push(Lowering::Ring(Ring));
        let mut checked = 0;
        for l in &lowerings {
            let Some(closed) = estimate(&site, l, &topo) else { continue };
            let graph = scratch.estimate_by_graph(&site, l, &topo).unwrap();
            // What the pass uses: the closed form, shared by equivalent
            // star points.
            let used = scratch.estimate(&site, l, &topo).unwrap();
            prop_assert!(
                close(used.total_us(), graph.total_us()) && used.transfers == graph.transfers,
                "{l} over {devs:?}, kind {kind}: used {used:?}, graph {graph:?}"
            );
            checked += 1;
            prop_assert!(
                close(closed.critical_path_us, graph.critical_path_us)
                    && close(closed.busiest_us, graph.busiest_us)
                    && close(closed.dispatcher_us, graph.dispatcher_us)
                    && closed.transfers == graph.transfers
                    && closed.bytes_moved == graph.bytes_moved,
                "{l} over {devs:?}, kind {kind}, shape {shape:?}:\nclosed {closed:?}\ngraph  {graph:?}"
            );
        }
        // Every star point has a closed form.
        prop_assert!(checked >= lowerings.len() - 1);
    }
}

/// An all_gather over `devs` of `f32[rows, cols]` shards, or, `uneven`,
/// of shards whose row counts differ by rank.
fn all_gather_source(devs: &[Device], rows: usize, cols: usize, uneven: bool) -> String {
    let n = devs.len();
    let rows_of = |i: usize| if uneven { rows + i % 3 } else { rows };
    let mut s = String::from("graph @g {\n");
    for (i, d) in devs.iter().enumerate() {
        s += &format!(
            "  %{i} = input \"s{i}\" @{d} : f32[{},{cols}]\n",
            rows_of(i)
        );
    }
    let args: Vec<String> = (0..n).map(|i| format!("%{i}")).collect();
    let total: usize = (0..n).map(rows_of).sum();
    s += &format!(
        "  %{n}:{n} = all_gather {} {{axis=0}} : f32[{total},{cols}]\n",
        args.join(", ")
    );
    let rets: Vec<String> = (0..n).map(|i| format!("%{n}#{i}")).collect();
    s + &format!("  return {}\n}}\n", rets.join(", "))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(100))]

    /// An all_gather's join points of one class (`StarClass`) cost the
    /// same, in either form (the joined result whole, or `{parts}`): the
    /// estimate the pass uses for each (the first of its class, priced by
    /// graph) equals the graph's estimate for that point.
    #[test]
    fn all_gather_join_points_of_one_class_cost_the_same(
        picks in prop::collection::vec(0..POOL.len(), 2..=7),
        rows in 1usize..4,
        cols in 1usize..9,
        wide in any::<bool>(),
        uneven in any::<bool>(),
        peers in any::<bool>(),
        staging in 0u32..3,
        scale in prop::sample::select(vec![0.05, 1.0, 20.0]),
        align in prop::sample::select(vec![4usize, 16, 256]),
    ) {
        let devs: Vec<Device> = picks.iter().map(|i| POOL[*i]).collect();
        let cols = if wide { cols * 1024 } else { cols };
        let (g, site) = parsed(&all_gather_source(&devs, rows, cols, uneven));
        let topo = topology(peers, staging, scale, align);
        let scratch = Scratch::new(&g, &site).unwrap();
        let points = arrange::unique(&devs).into_iter().chain([topo.staging]);
        // Each point whole, and a CPU point with the CUDA ranks joining
        // the shards they lack themselves.
        let stars = points.flat_map(|d| [(d, false), (d, true)]).filter(|(d, parts)| !parts || d.is_cpu());
        for (d, parts) in stars {
            let l = Lowering::Star(Star { at: Some(d), parts });
            let graph = scratch.estimate_by_graph(&site, &l, &topo).unwrap();
            let used = scratch.estimate(&site, &l, &topo).unwrap();
            prop_assert!(
                close(used.total_us(), graph.total_us()) && used.transfers == graph.transfers,
                "{l} over {devs:?} (uneven {uneven}): used {used:?}, graph {graph:?}"
            );
        }
    }
}
