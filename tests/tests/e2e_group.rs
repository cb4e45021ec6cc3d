//! End to end through the public API: `DeviceGroup` records collectives,
//! `lower-collectives` and the legalising passes lower them, the executor
//! runs the result on real CPU and Vulkan devices, and every value must equal
//! the reference interpreter's result for the *unlowered* graph, exactly
//! (inputs are small integers, so float sums are exact too), with no buffer
//! left behind.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use fuel_collective::DeviceGroup;
use fuel_graph_ext::interp::{deterministic_inputs, interpret, HostTensor};
use fuel_graph_ext::{DType, Device, Graph, LazyGraph, ReduceOp, TensorType};
use fuel_runtime::exec;
use fuel_test_support::{assert_no_leaks, devices_or_skip, lower, lower_on, shards};

/// Every algorithm `algorithm=` names; `pairwise` lowers the
/// reduce_scatter and falls back to the star for the rest; `split` lowers
/// the all_reduce over two GPUs with no direct path (two Vulkan devices)
/// and falls back to the star for the rest.
const ALGORITHMS: [&str; 7] = [
    "auto",
    "star",
    "hierarchical",
    "ring",
    "tree",
    "pairwise",
    "split",
];

/// An all_reduce, and a reduce_scatter whose results feed an all_gather.
fn record(devices: &[Device], ty: &TensorType, op: ReduceOp) -> Graph {
    let group = DeviceGroup::new(devices.iter().copied()).unwrap();
    let g = LazyGraph::new("e2e");
    let shards = shards(&g, devices, ty);
    for t in group.all_reduce(&shards, op).unwrap() {
        g.output(&t).unwrap();
    }
    let parts = group.reduce_scatter(&shards, op, 0).unwrap();
    for t in group.all_gather(&parts, 0).unwrap() {
        g.output(&t).unwrap();
    }
    g.snapshot()
}

/// Runs `exe` (a lowering of `original`) on deterministic inputs, checks
/// every result equals the interpreter's for `original` exactly (`what`
/// names the case in a failure), and that no buffer is left behind.
/// Returns the results.
fn run_checked(exe: &exec::Executable, original: &Graph, what: &str) -> Vec<HostTensor> {
    let inputs = deterministic_inputs(original);
    let want = interpret(original, &inputs).unwrap();
    let got = exe
        .run_host(&inputs)
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_eq!(got.len(), want.len(), "{what}");
    for (k, (g, w)) in got.iter().zip(&want).enumerate() {
        if let Err(e) = g.check_same(w) {
            panic!("{what}: result {k} differs from the interpreter: {e}");
        }
    }
    assert_no_leaks(exe);
    got
}

fn lower_run_check(devices: &[Device], dtype: DType, op: ReduceOp, algorithm: &str) {
    let n = devices.len();
    let ty = TensorType::new(dtype, &[n * 10, 3]);
    let original = record(devices, &ty, op);
    let pipeline = fuel_collective::pipeline_with(&format!("algorithm={algorithm}"));
    let lowered = lower(&original, &pipeline);
    let exe = exec::compile(&lowered, devices).unwrap_or_else(|e| panic!("{algorithm}: {e}"));
    let got = run_checked(
        &exe,
        &original,
        &format!("{algorithm} {op} {dtype} on {devices:?}"),
    );
    assert_eq!(got.len(), 2 * n);
    for (k, dev) in exe.output_devices().into_iter().enumerate() {
        assert_eq!(
            dev,
            devices[k % n],
            "result {k} must live on rank {}'s device",
            k % n
        );
    }
}

#[test]
fn three_cpu_devices_every_algorithm() {
    let devs = [Device::cpu(0), Device::cpu(1), Device::cpu(2)];
    for alg in ALGORITHMS {
        for (dtype, op) in [
            (DType::F32, ReduceOp::Sum),
            (DType::I32, ReduceOp::Max),
            (DType::F64, ReduceOp::Mean),
        ] {
            lower_run_check(&devs, dtype, op, alg);
        }
    }
}

#[test]
fn cpu_and_vulkan() {
    let devs = [Device::cpu(0), Device::vulkan(0)];
    if !devices_or_skip("cpu_and_vulkan", &devs) {
        return;
    }
    for alg in ALGORITHMS {
        lower_run_check(&devs, DType::F32, ReduceOp::Sum, alg);
    }
    lower_run_check(&devs, DType::I32, ReduceOp::Min, "auto");
}

#[test]
fn two_vulkan_devices_staged_through_the_host() {
    let devs = [Device::vulkan(0), Device::vulkan(1), Device::cpu(0)];
    if !devices_or_skip("two_vulkan_devices_staged_through_the_host", &devs) {
        return;
    }
    for alg in ALGORITHMS {
        lower_run_check(&devs, DType::F32, ReduceOp::Sum, alg);
    }
    lower_run_check(&devs, DType::F32, ReduceOp::Mean, "star");
    // The all_reduce folded in two parts, one on each Vulkan device.
    for (dtype, op) in [
        (DType::F32, ReduceOp::Mean),
        (DType::I32, ReduceOp::Max),
        (DType::F16, ReduceOp::Mean),
    ] {
        lower_run_check(&devs, dtype, op, "split");
    }
}

#[test]
fn vulkan_cpu_cpu_vulkan_every_algorithm() {
    let devs = [
        Device::vulkan(0),
        Device::cpu(0),
        Device::cpu(1),
        Device::vulkan(1),
    ];
    if !devices_or_skip("vulkan_cpu_cpu_vulkan_every_algorithm", &devs) {
        return;
    }
    for alg in ALGORITHMS {
        for (dtype, op) in [(DType::F32, ReduceOp::Sum), (DType::I32, ReduceOp::Max)] {
            lower_run_check(&devs, dtype, op, alg);
        }
    }
}

#[test]
fn cuda_groups_through_device_group() {
    for devs in [
        vec![Device::cpu(0), Device::cuda(0), Device::vulkan(0)],
        vec![Device::cuda(0), Device::vulkan(0), Device::cpu(0)],
    ] {
        if !devices_or_skip("cuda_groups_through_device_group", &devs) {
            return;
        }
        for op in [ReduceOp::Sum, ReduceOp::Max] {
            for alg in ALGORITHMS {
                lower_run_check(&devs, DType::F32, op, alg);
            }
            println!("PROOF cuda_groups_through_device_group: all_reduce + reduce_scatter/all_gather.{op} over {devs:?}, every algorithm, equal to the interpreter");
        }
    }
}

/// An all_gather lowered as `auto` lowers it on the shipped PCIe
/// workstation's figures, `star@cpu:0{parts}` (the CUDA rank joins the
/// shards it lacks: the CPU's from its input, the Vulkan rank's sliced out
/// of the host's joined result), run on this machine's devices.
#[test]
fn cuda_all_gather_joins_the_parts_it_lacks() {
    let devs = [Device::cuda(0), Device::vulkan(0), Device::cpu(0)];
    let topo = fuel_graph_ext::Topology::parse(include_str!(
        "../../examples/topologies/pcie-cuda-vulkan.topo"
    ))
    .unwrap();
    let group = DeviceGroup::new(devs).unwrap();
    let g = LazyGraph::new("parts");
    let shards = shards(&g, &devs, &TensorType::new(DType::F32, &[262144, 4]));
    for t in group.all_gather(&shards, 0).unwrap() {
        g.output(&t).unwrap();
    }
    let original = g.snapshot();
    let lowered = lower_on(&original, "lower-collectives", &topo);
    assert!(
        lowered
            .notes()
            .iter()
            .any(|n| n.contains("chose star@cpu:0{parts}")),
        "{:?}",
        lowered.notes()
    );
    // Lowering needs no device; the run does.
    if !devices_or_skip("cuda_all_gather_joins_the_parts_it_lacks", &devs) {
        return;
    }
    let exe = exec::compile(&lowered, &devs).unwrap();
    run_checked(&exe, &original, "star@cpu:0{parts}");
    println!("PROOF cuda_all_gather_joins_the_parts_it_lacks: star@cpu:0{{parts}} over {devs:?}, 4 MiB shards, equal to the interpreter");
}

/// The host driver: with `driver cpu` in the topology, `lower-collectives`
/// emits `driver_all_reduce` nodes, and the executor runs them through
/// `HostDriver` (one island, every rank at once).
#[test]
fn host_driver_all_reduce_on_cpu_arenas() {
    use fuel_graph_ext::Topology;
    use std::sync::Arc;
    let devs = [
        Device::cpu(0),
        Device::cpu(1),
        Device::cpu(2),
        Device::cpu(3),
    ];
    let topo = Arc::new(Topology::parse("driver cpu\n").unwrap());
    for (dtype, op) in [
        (DType::F32, ReduceOp::Sum),
        (DType::I32, ReduceOp::Max),
        (DType::F64, ReduceOp::Mean),
    ] {
        let ty = TensorType::new(dtype, &[40, 3]);
        let original = record(&devs, &ty, op);
        let pipeline = fuel_collective::pipeline_with("algorithm=driver");
        let lowered = lower_on(&original, &pipeline, &topo);
        let text = fuel_graph_ext::text::print(&lowered);
        assert!(text.contains("= driver_all_reduce."), "{text}");
        // Without the driver in its topology the executor refuses the graph.
        let e = exec::compile(&lowered, &devs)
            .err()
            .expect("needs the driver in the topology");
        assert!(
            e.to_string()
                .contains("add `driver cpu` to the topology file"),
            "{e}"
        );
        let exe = exec::compile_with(&lowered, &devs, &topo).unwrap();
        // One island, run by the host collective driver over all four ranks.
        assert_eq!(exe.driver_islands(), vec![("host", devs.to_vec())]);
        run_checked(&exe, &original, &format!("{op} {dtype}"));
    }
}

/// An all_gather of uneven shards (`rows[i]` rows on rank i, a zero among
/// them allowed), lowered with `algorithm`, run, and compared with the
/// interpreter's meaning of the unlowered graph.
fn uneven_gather_check(devices: &[Device], rows: &[usize], algorithm: &str) {
    let group = DeviceGroup::new(devices.iter().copied()).unwrap();
    let g = LazyGraph::new("uneven");
    let xs: Vec<_> = devices
        .iter()
        .zip(rows)
        .enumerate()
        .map(|(i, (d, r))| g.input(&format!("x{i}"), *d, TensorType::new(DType::F32, &[*r, 3])))
        .collect();
    let total: usize = rows.iter().sum();
    for t in group.all_gather(&xs, 0).unwrap() {
        assert_eq!(t.ty().shape.as_slice(), &[total, 3]);
        g.output(&t).unwrap();
    }
    let original = g.snapshot();
    let pipeline = fuel_collective::pipeline_with(&format!("algorithm={algorithm}"));
    for r in lower_run_exactly(&original, &pipeline, devices, algorithm) {
        assert_eq!(r.ty.num_elements(), total * 3);
    }
}

#[test]
fn uneven_all_gather_on_cpus_every_algorithm() {
    let devs = [Device::cpu(0), Device::cpu(1), Device::cpu(2)];
    for alg in ALGORITHMS {
        uneven_gather_check(&devs, &[2, 0, 5], alg);
        uneven_gather_check(&devs, &[1365, 1365, 1366], alg);
    }
}

#[test]
fn uneven_all_gather_cpu_and_vulkan() {
    let devs = [Device::cpu(0), Device::vulkan(0), Device::cpu(1)];
    if !devices_or_skip("uneven_all_gather_cpu_and_vulkan", &devs) {
        return;
    }
    for alg in ALGORITHMS {
        uneven_gather_check(&devs, &[0, 3, 1], alg);
    }
}

/// A reduce_scatter with `split` (or the default partition where `None`)
/// of `rows` rows, lowered with `algorithm`, run, and compared with the
/// interpreter's meaning of the unlowered graph.
fn uneven_scatter_check(devices: &[Device], rows: usize, split: Option<&[usize]>, algorithm: &str) {
    let group = DeviceGroup::new(devices.iter().copied()).unwrap();
    let g = LazyGraph::new("uneven_rs");
    let ty = TensorType::new(DType::F32, &[rows, 3]);
    let xs = shards(&g, devices, &ty);
    let outs = match split {
        Some(s) => group.reduce_scatter_split(&xs, ReduceOp::Sum, 0, s),
        None => group.reduce_scatter(&xs, ReduceOp::Sum, 0),
    }
    .unwrap();
    for t in &outs {
        g.output(t).unwrap();
    }
    let original = g.snapshot();
    let pipeline = fuel_collective::pipeline_with(&format!("algorithm={algorithm}"));
    let got = lower_run_exactly(&original, &pipeline, devices, algorithm);
    let mut total = 0;
    for (r, t) in got.iter().zip(&outs) {
        assert_eq!(r.ty.num_elements(), t.ty().num_elements());
        total += t.ty().shape[0];
    }
    assert_eq!(total, rows);
}

#[test]
fn uneven_reduce_scatter_on_cpus_every_algorithm() {
    let devs = [Device::cpu(0), Device::cpu(1), Device::cpu(2)];
    for alg in ALGORITHMS {
        uneven_scatter_check(&devs, 7, Some(&[3, 0, 4]), alg);
        uneven_scatter_check(&devs, 4096, None, alg);
    }
}

#[test]
fn uneven_reduce_scatter_cpu_and_vulkan() {
    let devs = [Device::cpu(0), Device::vulkan(0), Device::cpu(1)];
    if !devices_or_skip("uneven_reduce_scatter_cpu_and_vulkan", &devs) {
        return;
    }
    // Besides every algorithm: the CPUs' shares folded on the GPU, and the
    // GPU's share folded on the staging CPU.
    let pairwise_at = ["pairwise, reduce_at=vulkan:0", "pairwise, reduce_at=cpu:0"];
    for alg in ALGORITHMS.into_iter().chain(pairwise_at) {
        uneven_scatter_check(&devs, 5, Some(&[2, 0, 3]), alg);
        uneven_scatter_check(&devs, 5, Some(&[0, 5, 0]), alg);
        uneven_scatter_check(&devs, 8, None, alg);
    }
}

/// An all_to_all of shards with `rows[i]` rows on rank i and `split` (or
/// the default cut), lowered with `exchange=` (`None`: the cost model's
/// choice), run, and compared with the interpreter.
fn all_to_all_check(
    devices: &[Device],
    rows: &[usize],
    split: Option<&[usize]>,
    exchange: Option<&str>,
) {
    let group = DeviceGroup::new(devices.iter().copied()).unwrap();
    let g = LazyGraph::new("a2a");
    let xs: Vec<_> = devices
        .iter()
        .zip(rows)
        .enumerate()
        .map(|(i, (d, r))| g.input(&format!("x{i}"), *d, TensorType::new(DType::F32, &[*r, 2])))
        .collect();
    let outs = group.all_to_all(&xs, 0, split).unwrap();
    for t in &outs {
        g.output(t).unwrap();
    }
    let original = g.snapshot();
    let pipeline = match exchange {
        Some(x) => fuel_collective::pipeline_with(&format!("exchange={x}")),
        None => fuel_collective::pipeline_with("algorithm=auto"),
    };
    let got = lower_run_exactly(&original, &pipeline, devices, &format!("{exchange:?}"));
    let mut total = 0;
    for (r, t) in got.iter().zip(&outs) {
        assert_eq!(r.ty.num_elements(), t.ty().num_elements());
        total += t.ty().shape[0];
    }
    assert_eq!(total, rows.iter().sum::<usize>(), "every row arrives once");
}

#[test]
fn all_to_all_on_cpus() {
    let devs = [Device::cpu(0), Device::cpu(1), Device::cpu(2)];
    for x in [None, Some("direct"), Some("packed"), Some("joined")] {
        // Rank 1 receives nothing; rank 2 sends everything to rank 0.
        all_to_all_check(&devs, &[3, 2, 4], Some(&[1, 0, 2, 1, 0, 1, 4, 0, 0]), x);
        all_to_all_check(&devs, &[7, 7, 7], None, x);
    }
}

#[test]
fn all_to_all_across_cpu_and_vulkan() {
    let devs = [
        Device::vulkan(0),
        Device::cpu(0),
        Device::vulkan(1),
        Device::cpu(1),
    ];
    if !devices_or_skip("all_to_all_across_cpu_and_vulkan", &devs) {
        return;
    }
    let split = [0, 1, 2, 0, 0, 2, 1, 1, 0, 0, 0, 3, 0, 1, 1, 0];
    for x in [None, Some("direct"), Some("packed"), Some("joined")] {
        all_to_all_check(&devs, &[3, 4, 3, 2], Some(&split), x);
        all_to_all_check(&devs, &[5, 5, 5, 5], None, x);
    }
}

/// Lowers `original` with `pipeline`, runs it on `devices` and checks every
/// result against the interpreter's meaning of `original`, bit for bit,
/// with nothing left allocated; returns the results.
fn lower_run_exactly(
    original: &fuel_graph_ext::Graph,
    pipeline: &str,
    devices: &[Device],
    what: &str,
) -> Vec<HostTensor> {
    let lowered = lower(original, pipeline);
    let exe = exec::compile(&lowered, devices).unwrap_or_else(|e| panic!("{what}: {e}"));
    let got = run_checked(&exe, original, &format!("{what} on {devices:?}"));
    assert_eq!(got.len(), devices.len());
    got
}
