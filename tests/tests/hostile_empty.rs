//! Empty shapes (issue 38, class 2): every collective, every algorithm,
//! every zero-extent axis. Each lowered graph keeps the result types the
//! collective declared, verifies at placement level and means what the
//! collective means; and a pass that changes a result's type is stopped
//! by the pass manager, which the verifier alone could not do (a graph's
//! result is read by no node whose typing would notice).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use fuel_collective::DeviceGroup;
use fuel_graph_ext::pass::{
    Changed, DebugOptions, Pass, PassContext, PassError, PassInfo, PassManager, PassOptions,
    PassRegistry,
};
use fuel_graph_ext::verify::{verify, Level};
use fuel_graph_ext::{
    text, DType, Device, DeviceKind, Graph, LazyGraph, ReduceOp, TensorType, Topology,
};
use fuel_test_support::{shards, ALGORITHMS};
use std::sync::Arc;

/// Shapes with at least one zero extent, in every position.
const SHAPES: [&[usize]; 6] = [&[0], &[0, 3], &[3, 0], &[0, 0], &[2, 0, 3], &[4, 3, 0]];

/// The groups: CPUs alone (one island, the host driver), a mixed group
/// with a staged Vulkan rank, and CUDA peers beside Vulkan.
fn groups() -> Vec<Vec<Device>> {
    vec![
        vec![Device::cpu(0), Device::cpu(1), Device::cpu(2)],
        vec![Device::cpu(0), Device::vulkan(0), Device::cpu(1)],
        vec![
            Device::cuda(0),
            Device::vulkan(0),
            Device::cpu(0),
            Device::cuda(1),
        ],
    ]
}

/// One collective of every kind (and every axis where it has one) over
/// `devs`, each in a graph of its own: (what it is, the graph).
fn cases(devs: &[Device], shape: &[usize], dtype: DType) -> Vec<(String, Graph)> {
    let group = DeviceGroup::new(devs.iter().copied()).unwrap();
    let n = devs.len();
    let mut out = Vec::new();
    let ty = TensorType::new(dtype, shape);
    for op in [ReduceOp::Sum, ReduceOp::Mean, ReduceOp::Max] {
        record(&mut out, format!("all_reduce.{op:?}"), &|lg| {
            group.all_reduce(&shards(lg, devs, &ty), op).unwrap()
        });
        record(&mut out, format!("reduce.{op:?} root 1"), &|lg| {
            vec![group.reduce(&shards(lg, devs, &ty), op, 1).unwrap()]
        });
    }
    record(&mut out, "broadcast from 2".into(), &|lg| {
        group.broadcast(&shards(lg, devs, &ty)[2], 2).unwrap()
    });
    for (axis, extent) in shape.iter().copied().enumerate() {
        record(&mut out, format!("all_gather axis {axis}"), &|lg| {
            group.all_gather(&shards(lg, devs, &ty), axis).unwrap()
        });
        // Uneven shards: rank i holds i % 2 entries along the axis.
        record(&mut out, format!("uneven all_gather axis {axis}"), &|lg| {
            let xs: Vec<_> = devs
                .iter()
                .enumerate()
                .map(|(i, d)| lg.input(&format!("u{i}"), *d, ty.with_dim(axis, i % 2)))
                .collect();
            group.all_gather(&xs, axis).unwrap()
        });
        let wide = ty.with_dim(axis, extent * n);
        if extent == 0 {
            // `DeviceGroup` refuses to scatter an empty axis; the IR does
            // not, and gives every rank an empty share.
            out.push((
                format!("reduce_scatter of an empty axis {axis}"),
                empty_scatter(devs, &wide, axis),
            ));
            continue;
        }
        record(&mut out, format!("reduce_scatter axis {axis}"), &|lg| {
            group
                .reduce_scatter(&shards(lg, devs, &wide), ReduceOp::Sum, axis)
                .unwrap()
        });
        record(
            &mut out,
            format!("reduce_scatter axis {axis}, split"),
            &|lg| {
                let extent = shape[axis] * n;
                let split: Vec<usize> = (0..n).map(|r| if r == 0 { extent } else { 0 }).collect();
                group
                    .reduce_scatter_split(&shards(lg, devs, &wide), ReduceOp::Sum, axis, &split)
                    .unwrap()
            },
        );
        record(&mut out, format!("all_to_all axis {axis}"), &|lg| {
            group
                .all_to_all(&shards(lg, devs, &wide), axis, None)
                .unwrap()
        });
    }
    out
}

/// Records what `build` returns as the results of a graph of its own.
fn record(
    out: &mut Vec<(String, Graph)>,
    what: String,
    build: &dyn Fn(&LazyGraph) -> Vec<fuel_graph_ext::LazyTensor>,
) {
    let lg = LazyGraph::new("empty");
    for t in build(&lg) {
        lg.output(&t).unwrap();
    }
    out.push((what, lg.snapshot()));
}

/// A `reduce_scatter.sum` of `ty` shards along `axis`, which is empty,
/// over `devs`, read from text.
fn empty_scatter(devs: &[Device], ty: &TensorType, axis: usize) -> Graph {
    let mut src = String::from("graph @g {\n");
    for (i, d) in devs.iter().enumerate() {
        src += &format!("  %{i} = input \"s{i}\" @{d} : {ty}\n");
    }
    let n = devs.len();
    let args: Vec<String> = (0..n).map(|i| format!("%{i}")).collect();
    let rets: Vec<String> = (0..n).map(|i| format!("%{n}#{i}")).collect();
    src += &format!(
        "  %{n}:{n} = reduce_scatter.sum {} {{axis={axis}}} : {ty}\n  return {}\n}}\n",
        args.join(", "),
        rets.join(", ")
    );
    text::parse(&src).unwrap_or_else(|e| panic!("{e}\n{src}"))
}

/// The declared type of every result of `g`.
fn result_types(g: &Graph) -> Vec<TensorType> {
    g.outputs()
        .iter()
        .map(|v| g.value_type(*v).unwrap().clone())
        .collect()
}

#[test]
fn every_collective_algorithm_and_empty_axis_keeps_its_result_types() {
    let mut topo = Topology::default().with_peer(0, 1);
    topo.drivers.insert(DeviceKind::Cpu);
    topo.drivers.insert(DeviceKind::Cuda);
    let topo = Arc::new(topo);
    let mut lowered = 0;
    for devs in groups() {
        for shape in SHAPES {
            for dtype in [DType::F32, DType::F16] {
                for (what, before) in cases(&devs, shape, dtype) {
                    let declared = result_types(&before);
                    let mut pipelines: Vec<String> = ALGORITHMS
                        .iter()
                        .map(|a| format!("lower-collectives{{algorithm={a}}}"))
                        .collect();
                    pipelines.push("lower-collectives{exchange=packed}".into());
                    pipelines.push("lower-collectives{exchange=joined}".into());
                    pipelines.push(fuel_collective::DEFAULT_PIPELINE.into());
                    for p in &pipelines {
                        let ctx = format!("{what} of {dtype}{shape:?} over {devs:?} by {p}");
                        let mut after = before.clone();
                        if let Err(e) = fuel_collective::run_pipeline(
                            &mut after,
                            p,
                            topo.clone(),
                            DebugOptions::verifying(),
                        ) {
                            panic!("{ctx}: {e}\n{}", text::print(&before));
                        }
                        let shown = text::print(&after);
                        assert_eq!(result_types(&after), declared, "{ctx}\n{shown}");
                        if let Err(e) = verify(&after, Level::Placement, &topo) {
                            panic!("{ctx}: does not verify:\n{e}\n{shown}");
                        }
                        if let Err(e) = fuel_test_support::same_meaning(&before, &after) {
                            panic!("{ctx}: {e}\n{shown}");
                        }
                        lowered += 1;
                    }
                }
            }
        }
    }
    // 3 groups x 6 shapes x 2 dtypes x (7 + axes x 5) cases x 9 pipelines.
    assert!(lowered > 5000, "only {lowered} lowerings ran");
}

/// The case, end to end: `f32[0,3]` shards gathered along axis 1
/// are `f32[0,6]` on every rank, with every algorithm.
#[test]
fn all_gather_of_empty_rows_along_the_columns_keeps_its_columns() {
    let src = "graph @g {\n  %0 = input \"a\" @cpu:0 : f32[0,3]\n  %1 = input \"b\" @cpu:1 : f32[0,3]\n  %2:2 = all_gather %0, %1 {axis=1} : f32[0,6]\n  return %2#0, %2#1\n}\n";
    let g = text::parse(src).unwrap();
    for a in ["star", "hierarchical", "ring", "tree"] {
        let out = fuel_test_support::lower(&g, &format!("lower-collectives{{algorithm={a}}}"));
        let f = TensorType::new(DType::F32, &[0, 6]);
        assert_eq!(result_types(&out), vec![f.clone(), f], "{a}");
        assert!(text::print(&out).contains("concat"), "{a}: nothing joined");
    }
}

/// A pass that hands back a value of another type as the graph's result.
struct Retype;

impl Pass for Retype {
    fn name(&self) -> &'static str {
        "retype"
    }
    fn run(&mut self, g: &mut Graph) -> Result<Changed, PassError> {
        let first = g.outputs()[0];
        let dev = g.value_device(first).unwrap();
        let narrow = g.add_node(
            fuel_graph_ext::Op::Slice {
                axis: 1,
                start: 0,
                len: 1,
                device: dev,
            },
            &[first],
            TensorType::new(DType::F32, &[0, 1]),
        );
        g.set_outputs(vec![fuel_graph_ext::graph::ValueId {
            node: narrow,
            result: 0,
        }]);
        Ok(Changed::Yes)
    }
}

/// The verifier checks each node against its operands, so a wrong type
/// that only a graph result holds passed it: the pass manager now checks
/// the graph's result types after every pass, and names the pass.
#[test]
fn a_pass_that_changes_a_result_type_is_caught() {
    let src = "graph @g {\n  %0 = input \"a\" @cpu:0 : f32[0,3]\n  return %0\n}\n";
    let mut g = text::parse(src).unwrap();
    let mut registry = PassRegistry::new();
    registry.register(PassInfo {
        name: "retype",
        summary: "returns a slice of another type in the result's place",
        options: &[],
        ctor: |_: &PassOptions, _: &PassContext| Ok(Box::new(Retype)),
    });
    let mut pm = PassManager::new(
        &registry,
        "retype",
        PassContext::default(),
        DebugOptions::verifying(),
    )
    .unwrap();
    let e = pm.run(&mut g).unwrap_err().to_string();
    assert_eq!(
        e,
        "pass `retype` broke an invariant: the graph's result 0 was f32[0,3] before the pass and is f32[0,1] after it; this is a bug in the pass, please report it with the input graph"
    );
}

/// The `lower` fuzzer's first find once it drew empty axes: two
/// all_reduces of `f32[0, 2^60]` through the default pipeline. The
/// combine pass priced a bucket of four such rows, 2^64 bytes, and its
/// byte count overflowed (a panic in a debug build). Empty all_reduces
/// are now left alone, and rows too large to price too.
#[test]
fn combining_empty_all_reduces_with_huge_rows_does_not_overflow() {
    let ty = "f32[0,1152921504606846976]";
    let src = format!(
        "graph @g {{\n  %0 = input \"a\" @cpu:0 : {ty}\n  %1 = input \"b\" @cpu:1 : {ty}\n  %2:2 = all_reduce.sum %0, %1 : {ty}\n  %3:2 = all_reduce.max %0, %1 : {ty}\n  %4:2 = all_reduce.sum %1, %0 : {ty}\n  return %2#0, %2#1, %3#0, %4#1\n}}\n"
    );
    let g = text::parse(&src).unwrap();
    let out = fuel_test_support::lower(&g, fuel_collective::DEFAULT_PIPELINE);
    assert_eq!(result_types(&out), result_types(&g));
    assert!(
        !text::print(&out).contains("concat"),
        "an empty bucket was merged"
    );
}

/// The `lower` fuzzer's second find: `u8[2^60, 0]` cut or joined along
/// its empty axis 1. The interpreter and the executor's region lists
/// counted 2^60 rows (nothing comes after axis 1, so "no elements after
/// the axis" did not stop them) and looped over them, or reserved a list
/// for them. Now a value with no entries along the axis has no rows to
/// copy, and a join counts rows on a part that has entries.
#[test]
fn cutting_and_joining_along_an_empty_axis_of_many_rows_costs_nothing() {
    let rows = 1usize << 60;
    let src = format!(
        "graph @g {{\n  %0 = input \"a\" @cpu:0 : u8[{rows},0]\n  %1 = input \"b\" @cpu:1 : u8[{rows},0]\n  %2 = slice %0 {{axis=1, len=0, start=0}} @cpu:0 : u8[{rows},0]\n  %3 = concat %0, %2 {{axis=1}} @cpu:0 : u8[{rows},0]\n  %4:2 = all_gather %3, %1 {{axis=1}} : u8[{rows},0]\n  return %3, %4#0, %4#1\n}}\n"
    );
    let g = text::parse(&src).unwrap();
    for a in ["star", "ring", "tree"] {
        let out = fuel_test_support::lower(&g, &format!("lower-collectives{{algorithm={a}}}"));
        let inputs = fuel_graph_ext::interp::try_deterministic_inputs(&out).unwrap();
        let want = fuel_graph_ext::interp::interpret(&g, &inputs).unwrap();
        assert_eq!(
            fuel_graph_ext::interp::interpret(&out, &inputs).unwrap(),
            want,
            "{a}"
        );
        let exe = fuel_runtime::exec::compile(&out, &[]).unwrap();
        assert_eq!(exe.run_host(&inputs).unwrap(), want, "{a}");
    }
}
