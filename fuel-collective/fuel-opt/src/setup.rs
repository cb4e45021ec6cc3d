//! What `demo` and `bench` share: picking devices, building a collective
//! graph with `DeviceGroup`, lowering it, and reading back what the lowering
//! chose and moved.

use crate::Failure;
use fuel_collective::{Decision, DeviceGroup, DEFAULT_PIPELINE};
use fuel_graph_ext::device::parse_device_list;
use fuel_graph_ext::pass::{DebugOptions, PassContext, PassManager};
use fuel_graph_ext::{Device, DeviceKind, Graph, LazyGraph, Op, ReduceOp, TensorType, Topology};
use fuel_runtime::exec::{self, Discovery};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

/// The devices to use: the `--devices` list (each checked against
/// discovery), or `default_cpus` CPU devices plus every Vulkan and CUDA
/// device discovery found.
pub fn pick_devices(
    list: Option<&str>,
    default_cpus: u32,
    found: &Discovery,
) -> Result<Vec<Device>, Failure> {
    match list {
        Some(s) => {
            let devs = parse_device_list(s).map_err(|e| Failure::input(e.to_string()))?;
            if devs.is_empty() {
                return Err(Failure::input("--devices is empty: give e.g. cpu:0,cpu:1"));
            }
            for d in &devs {
                if let Some(why) = found.why_not(*d) {
                    return Err(Failure::input(format!("{d} cannot be used: {why}")));
                }
            }
            Ok(devs)
        }
        None => {
            let mut devs: Vec<Device> = (0..default_cpus).map(Device::cpu).collect();
            devs.extend(
                found
                    .available
                    .iter()
                    .map(|(d, _)| *d)
                    .filter(|d| d.kind != DeviceKind::Cpu),
            );
            Ok(devs)
        }
    }
}

/// Which collectives a scenario records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// One all_reduce.
    AllReduce,
    /// One all_reduce, plus a reduce_scatter whose results feed an all_gather.
    AllReduceAndPair,
}

/// Records the scenario with `DeviceGroup`: shard i is an input on device i.
pub fn build(
    devices: &[Device],
    ty: &TensorType,
    op: ReduceOp,
    shape: Shape,
) -> Result<Graph, Failure> {
    let bad = |e: fuel_collective::CollectiveError| Failure::input(e.to_string());
    let group = DeviceGroup::new(devices.iter().copied()).map_err(bad)?;
    let lazy = LazyGraph::new(match shape {
        Shape::AllReduce => "all_reduce",
        Shape::AllReduceAndPair => "demo",
    });
    let shards: Vec<_> = devices
        .iter()
        .enumerate()
        .map(|(i, d)| lazy.input(&format!("shard{i}"), *d, ty.clone()))
        .collect();
    let out =
        |t: &fuel_graph_ext::LazyTensor| lazy.output(t).map_err(|e| Failure::input(e.to_string()));
    for t in group.all_reduce(&shards, op).map_err(bad)? {
        out(&t)?;
    }
    if shape == Shape::AllReduceAndPair {
        let parts = group.reduce_scatter(&shards, op, 0).map_err(bad)?;
        for t in group.all_gather(&parts, 0).map_err(bad)? {
            out(&t)?;
        }
    }
    Ok(lazy.snapshot())
}

/// The default pipeline with `lower-collectives{algorithm=..}`.
pub fn pipeline(algorithm: &str) -> String {
    if algorithm == "auto" {
        DEFAULT_PIPELINE.to_string()
    } else {
        fuel_collective::pipeline_with(&format!("algorithm={algorithm}"))
    }
}

/// The names of the passes of `pipeline`, in order (what its dumps are
/// called after).
pub fn pass_names(pipeline: &str, topo: &Arc<Topology>) -> Result<Vec<&'static str>, Failure> {
    let cx = PassContext {
        topology: topo.clone(),
    };
    let pm = PassManager::new(
        &fuel_collective::registry(),
        pipeline,
        cx,
        DebugOptions::default(),
    )
    .map_err(|e| Failure::input(e.to_string()))?;
    Ok(pm.pass_names())
}

/// Lowers `g` with `pipeline` (see [`pipeline`]); returns the lowered
/// graph, what the lowering decided per collective, and the dump files
/// written (none without `dump_dir`).
pub fn lower(
    g: &Graph,
    pipeline: &str,
    topo: &Arc<Topology>,
    dump_dir: Option<PathBuf>,
) -> Result<(Graph, Vec<Decision>, Vec<PathBuf>), Failure> {
    let cx = PassContext {
        topology: topo.clone(),
    };
    let debug = DebugOptions {
        dump_dir,
        ..DebugOptions::default()
    };
    let mut pm = PassManager::new(&fuel_collective::registry(), pipeline, cx, debug)
        .map_err(|e| Failure::input(e.to_string()))?;
    let mut out = g.clone();
    let report = pm
        .run(&mut out)
        .map_err(|e| Failure::input(e.to_string()))?;
    let decisions = fuel_collective::lower::decisions(&pm)
        .into_iter()
        .cloned()
        .collect();
    Ok((out, decisions, report.dumped))
}

/// The algorithms the lowering chose (`ring`, `star`), each once, joined
/// with `+` when a graph has several collectives.
pub fn chosen(decisions: &[Decision]) -> String {
    let mut picks: Vec<&str> = Vec::new();
    for d in decisions {
        let name = d.lowering.name();
        if !picks.contains(&name) {
            picks.push(name);
        }
    }
    if picks.is_empty() {
        "none".into()
    } else {
        picks.join("+")
    }
}

/// What a lowered graph's copies on one link do when run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LinkTraffic {
    /// Bytes the copies move.
    pub bytes: usize,
    /// Copies and moves on the link.
    pub copies: usize,
    /// Of those, copies the executable runs by sharing the source's
    /// buffer (no bytes moved; see `exec::Executable::shared_copies`, and
    /// `imported_copies` for host-to-Vulkan views).
    pub shared: usize,
    /// Bytes of the shared copies (which move none of them).
    pub shared_bytes: usize,
}

/// Traffic per (source, destination) link in a lowered graph, as an
/// executable that shares the copies in `shared` runs it.
pub fn link_traffic(
    g: &Graph,
    shared: &std::collections::BTreeSet<fuel_graph_ext::NodeId>,
) -> BTreeMap<(Device, Device), LinkTraffic> {
    let mut out: BTreeMap<(Device, Device), LinkTraffic> = BTreeMap::new();
    for id in g.node_ids() {
        let Some(n) = g.node(id) else { continue };
        if let Op::Copy { to } | Op::Move { to } = n.op {
            if let Some(from) = n.operands.first().and_then(|v| g.value_device(*v)) {
                let e = out.entry((from, to)).or_default();
                e.copies += 1;
                if shared.contains(&id) {
                    e.shared += 1;
                    e.shared_bytes = e.shared_bytes.saturating_add(n.ty.size_bytes());
                } else {
                    e.bytes = e.bytes.saturating_add(n.ty.size_bytes());
                }
            }
        }
    }
    out
}

/// Median of a list of durations in microseconds (0 for an empty list).
pub fn median_us(samples: &mut [f64]) -> f64 {
    if samples.is_empty() {
        return 0.0;
    }
    samples.sort_by(f64::total_cmp);
    let mid = samples.len() / 2;
    if samples.len() % 2 == 1 {
        samples[mid]
    } else {
        (samples[mid - 1] + samples[mid]) / 2.0
    }
}

/// Discovery, once.
pub fn discover() -> Discovery {
    exec::discover()
}
