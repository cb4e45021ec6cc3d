//! World goldens: `tests/golden/world/<shape>/<collective>.p<q>.out.fir`
//! and `.out.dot` pin process q's lowered graph of one world collective,
//! for every process of three worlds: 2 × [cpu:0], 4 × [cpu:0, vulkan:0]
//! and 2 × [cuda:0, cuda:1, vulkan:0] under a topology that declares
//! `driver cuda` (its `comm.*` nodes sit on a CUDA hub), each with all five
//! collectives. The graphs are recorded and lowered by
//! `fuel_collective::WorldProcess`, which needs no communicator, no GPU and
//! no NCCL, and is what `WorldGroup` records with (`tests/tests/world.rs`
//! checks that both lower to the same text); nothing here runs on a device.
//!
//! Besides the text, every case checks the meaning: the P lowered graphs
//! (and the P unlowered ones) run through `interp::interpret_world` give
//! the flat group's result over P·k ranks; each lowered graph verifies at
//! placement level, has exactly one `comm.*` node, on the hub, and parses
//! back to itself; each DOT renders with graphviz when it is installed.
//! `UPDATE_GOLDEN=1 cargo test -p fuel-tests --test world_golden` rewrites
//! the files (and removes stale ones); read the diff before committing.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use fuel_collective::world_cost::driver_kind;
use fuel_collective::WorldProcess;
use fuel_graph_ext::verify::{verify, Level};
use fuel_graph_ext::{dot, text, DType, Device, Graph, LazyTensor, Op, ReduceOp, Topology};
use fuel_test_support::golden_dir;
use fuel_test_support::world::{check_world, record, Case};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The id every golden's `comm.*` nodes carry.
const COMM: u32 = 1;
const D: DType = DType::F32;

/// One world: its folder, P, the local devices and its topology file
/// (in its folder), if any.
struct Shape {
    dir: &'static str,
    processes: usize,
    devices: Vec<Device>,
    topology: Option<&'static str>,
}

fn shapes() -> Vec<Shape> {
    vec![
        Shape {
            dir: "2x-cpu0",
            processes: 2,
            devices: vec![Device::cpu(0)],
            topology: None,
        },
        Shape {
            dir: "4x-cpu0-vulkan0",
            processes: 4,
            devices: vec![Device::cpu(0), Device::vulkan(0)],
            topology: None,
        },
        Shape {
            dir: "2x-cuda0-cuda1-vulkan0",
            processes: 2,
            devices: vec![Device::cuda(0), Device::cuda(1), Device::vulkan(0)],
            topology: Some("nccl.topo"),
        },
    ]
}

/// The five collectives over `n` ranks: (file stem, what the header
/// calls it, the case).
fn collectives(n: usize) -> Vec<(&'static str, String, Case)> {
    vec![
        (
            "all-reduce-sum",
            "all_reduce.sum".into(),
            Case::AllReduce(ReduceOp::Sum),
        ),
        (
            "reduce-mean",
            format!("reduce.mean to rank {}", n - 1),
            Case::Reduce(ReduceOp::Mean, n - 1),
        ),
        (
            "broadcast",
            "broadcast from rank 1".into(),
            Case::Broadcast(1),
        ),
        (
            "all-gather",
            "all_gather along axis 0".into(),
            Case::AllGather,
        ),
        (
            "reduce-scatter-sum",
            "reduce_scatter.sum along axis 0".into(),
            Case::ReduceScatter(ReduceOp::Sum),
        ),
    ]
}

fn list(devices: &[Device]) -> String {
    let names: Vec<String> = devices.iter().map(Device::to_string).collect();
    format!("[{}]", names.join(", "))
}

/// The comment lines every file of a case opens with.
fn header(shape: &Shape, q: usize, what: &str, rows: usize, hub: Device) -> String {
    let (p, n) = (shape.processes, shape.processes * shape.devices.len());
    let topo = match shape.topology {
        None => "the default topology".to_string(),
        Some(f) => format!(
            "{f} (driver cuda: the comm.* node sits on the CUDA hub; recorded and lowered only, never run here)"
        ),
    };
    format!(
        "// World golden: process {q} of {p} x {devs}, {what} of f32[{rows}, 2] over the flat group of {n} ranks, hub {hub}, {topo}.\n\
         // What WorldProcess records and lowers (WorldGroup runs the same graph): the `world:` note names the three parts, the local\n\
         // part (lowered by lower-collectives, whose notes follow), one comm.* node between processes on the hub, and the local spread.\n\
         // Checked: the {p} process graphs through interp::interpret_world equal the flat group's result.\n\
         // Bless: UPDATE_GOLDEN=1 cargo test -p fuel-tests --test world_golden\n",
        devs = list(&shape.devices),
    )
}

/// Records and lowers `case` for every process of `shape`; checks the
/// meaning and the rules of a world graph; gives each process's
/// (header, lowered graph).
fn lower_world(
    shape: &Shape,
    topo: &Arc<Topology>,
    case: Case,
    what: &str,
) -> Result<Vec<(String, Graph)>, String> {
    let k = shape.devices.len();
    let rows = shape.processes * k;
    let kind = driver_kind(topo, &shape.devices);
    let (mut lowered, mut unlowered, mut inputs, mut out) = (vec![], vec![], vec![], vec![]);
    for q in 0..shape.processes {
        let w = WorldProcess::new(
            shape.processes,
            q,
            COMM,
            shape.devices.iter().copied(),
            kind,
            topo,
        )
        .map_err(|e| e.to_string())?;
        if shape.topology.is_some() && w.hub().kind != fuel_graph_ext::DeviceKind::Cuda {
            return Err(format!(
                "process {q}: the hub is {}, not a CUDA device",
                w.hub()
            ));
        }
        let name = format!("world_p{q}");
        let rec = record(&w, &name, case, D, rows).map_err(|e| e.to_string())?;
        let refs: Vec<&LazyTensor> = rec.outputs.iter().collect();
        let g = w.lower(&refs, topo.clone()).map_err(|e| e.to_string())?;
        verify(&g, Level::Placement, topo)
            .map_err(|e| format!("process {q} does not verify:\n{e}"))?;
        let comm: Vec<Device> = g
            .topo_order()
            .into_iter()
            .filter_map(|id| match g.node(id).map(|n| &n.op) {
                Some(Op::Comm { device, .. }) => Some(*device),
                _ => None,
            })
            .collect();
        if comm != [w.hub()] {
            return Err(format!(
                "process {q}: comm.* nodes on {comm:?}, expected one on the hub {}",
                w.hub()
            ));
        }
        let printed = text::print(&g);
        let again =
            text::parse(&printed).map_err(|e| format!("process {q} does not parse back: {e}"))?;
        if text::print(&again) != printed {
            return Err(format!(
                "process {q}: print, parse, print is not the same text"
            ));
        }
        unlowered.push(rec.snapshot());
        inputs.push(rec.inputs.clone());
        out.push((header(shape, q, what, rows, w.hub()), g.clone()));
        lowered.push(g);
    }
    check_world(&unlowered, &inputs, case, D, (k, rows)).map_err(|e| format!("unlowered: {e}"))?;
    check_world(&lowered, &inputs, case, D, (k, rows)).map_err(|e| format!("lowered: {e}"))?;
    Ok(out)
}

/// Compares `actual` with the file at `path` (or writes it when blessing);
/// a difference goes into `failures`.
fn compare(path: &Path, actual: &str, bless: bool, failures: &mut String) {
    let expected = std::fs::read_to_string(path).ok();
    match expected {
        Some(e) if e == actual => {}
        _ if bless => std::fs::write(path, actual).unwrap(),
        Some(e) => {
            let diff = similar::TextDiff::from_lines(e.as_str(), actual);
            failures.push_str(&format!(
                "\n=== {} differs\n{}",
                path.display(),
                diff.unified_diff()
                    .context_radius(3)
                    .header("expected", "actual")
            ));
        }
        None => failures.push_str(&format!("\n=== missing {}\n", path.display())),
    }
}

#[test]
fn world_goldens() {
    let bless = std::env::var("UPDATE_GOLDEN").is_ok_and(|v| v == "1");
    let root = golden_dir().join("world");
    let mut failures = String::new();
    let mut written: BTreeSet<PathBuf> = BTreeSet::new();
    for shape in shapes() {
        let dir = root.join(shape.dir);
        std::fs::create_dir_all(&dir).unwrap();
        let topo = match shape.topology {
            None => Topology::default(),
            Some(f) => {
                let p = dir.join(f);
                written.insert(p.clone());
                Topology::parse(&std::fs::read_to_string(&p).unwrap()).unwrap()
            }
        };
        let topo = Arc::new(topo);
        let n = shape.processes * shape.devices.len();
        for (stem, what, case) in collectives(n) {
            let graphs = match lower_world(&shape, &topo, case, &what) {
                Ok(g) => g,
                Err(e) => {
                    failures.push_str(&format!("\n=== {}/{stem}: {e}\n", shape.dir));
                    continue;
                }
            };
            for (q, (head, g)) in graphs.iter().enumerate() {
                for (ext, body) in [("fir", text::print(g)), ("dot", dot::to_dot(g))] {
                    let path = dir.join(format!("{stem}.p{q}.out.{ext}"));
                    compare(&path, &format!("{head}{body}"), bless, &mut failures);
                    written.insert(path);
                }
            }
        }
    }
    // Files no case writes any more.
    for shape in std::fs::read_dir(&root).unwrap().flatten() {
        for f in std::fs::read_dir(shape.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            let p = f.path();
            if written.contains(&p) || p.file_name().is_some_and(|n| n == "README.md") {
                continue;
            }
            if bless {
                std::fs::remove_file(&p).unwrap();
            } else {
                failures.push_str(&format!(
                    "\n=== {} is not written by any case\n",
                    p.display()
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{failures}\nRe-bless after reviewing with: UPDATE_GOLDEN=1 cargo test -p fuel-tests --test world_golden"
    );
    // Three worlds × five collectives, P files of each kind.
    assert_eq!(
        written
            .iter()
            .filter(|p| p.to_string_lossy().ends_with(".out.fir"))
            .count(),
        5 * (2 + 4 + 2)
    );
}

/// Every world DOT renders with graphviz (header comments included).
#[test]
fn world_dots_render() {
    if std::process::Command::new("dot")
        .arg("-V")
        .output()
        .is_err()
    {
        fuel_test_support::skip_line(format_args!(
            "SKIP: graphviz `dot` is not installed (apt-get install graphviz)"
        ));
        return;
    }
    let mut checked = 0;
    for shape in std::fs::read_dir(golden_dir().join("world"))
        .unwrap()
        .flatten()
    {
        for f in std::fs::read_dir(shape.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            let p = f.path();
            if !p.to_string_lossy().ends_with(".out.dot") {
                continue;
            }
            let out = std::process::Command::new("dot")
                .arg("-Tsvg")
                .arg(&p)
                .output()
                .unwrap();
            assert!(
                out.status.success() && out.stdout.starts_with(b"<?xml"),
                "{} does not render: {}",
                p.display(),
                String::from_utf8_lossy(&out.stderr)
            );
            checked += 1;
        }
    }
    assert!(checked >= 5 * 8, "only {checked} world DOT files rendered");
}
