//! Helpers shared by the reliability tests (`faults_*`, `soak`,
//! `concurrency`): record a collective through `DeviceGroup`, lower it with
//! `lower-collectives`, and count what a run of the result will do.

#![allow(dead_code)]

use fuel_collective::DeviceGroup;
use fuel_graph_ext::interp::HostTensor;
use fuel_graph_ext::pass::{DebugOptions, PassContext, PassManager};
use fuel_graph_ext::{DType, Device, Graph, LazyGraph, Op, ReduceOp, TensorType, Topology};
use std::sync::Arc;

/// An `all_reduce` of one `dtype[n]` shard per device, recorded through a
/// `DeviceGroup`; returns the graph before lowering.
pub fn all_reduce_graph(devices: &[Device], dtype: DType, n: usize, op: ReduceOp) -> Graph {
    let lg = LazyGraph::new("all_reduce");
    let group = DeviceGroup::new(devices.iter().copied()).unwrap();
    let ty = TensorType::new(dtype, &[n]);
    let shards: Vec<_> = devices
        .iter()
        .enumerate()
        .map(|(i, d)| lg.input(&format!("s{i}"), *d, ty.clone()))
        .collect();
    for t in group.all_reduce(&shards, op).unwrap() {
        lg.output(&t).unwrap();
    }
    lg.snapshot()
}

/// `g` after `pipeline` (with verification after every pass).
pub fn lower(g: &Graph, pipeline: &str) -> Graph {
    let cx = PassContext {
        topology: Arc::new(Topology::default()),
    };
    let mut pm = PassManager::new(
        &fuel_collective::registry(),
        pipeline,
        cx,
        DebugOptions::verifying(),
    )
    .unwrap();
    let mut out = g.clone();
    pm.run(&mut out)
        .unwrap_or_else(|e| panic!("{pipeline}: {e}"));
    out
}

/// How many copies (and moves), kernels and buffer allocations one run of
/// the lowered graph `g` makes: every node allocates its result once.
pub struct Counts {
    pub copies: usize,
    pub kernels: usize,
    pub allocs: usize,
}

/// `mapped(d)`: the host reads GPU `d`'s buffers where they lie (a mapped
/// Vulkan device), so a fold needs no scratch buffer for its operands.
pub fn counts(g: &Graph, mapped: impl Fn(Device) -> bool) -> Counts {
    let mut c = Counts {
        copies: 0,
        kernels: 0,
        allocs: 0,
    };
    let outputs: Vec<_> = g.outputs().iter().map(|v| v.node).collect();
    let readers = |id| -> Vec<_> {
        g.node_ids()
            .filter(|&r| g.node(r).unwrap().operands.iter().any(|v| v.node == id))
            .collect()
    };
    // Folds that need one scratch buffer for their deferred operands.
    let mut staging_folds = std::collections::BTreeSet::new();
    for id in g.node_ids() {
        let n = g.node(id).unwrap();
        match &n.op {
            Op::Input { .. } => {}
            Op::Copy { .. } | Op::Move { .. } => {
                c.copies += 1;
                let src = g.value_device(n.operands[0]).unwrap();
                let dst = n.op.device().unwrap();
                if outputs.contains(&id) {
                    c.allocs += 1;
                    continue;
                }
                // A copy between two host arenas that is not an output shares
                // its source's buffer (`exec::Options::share_host_copies`):
                // it can still fail as a copy, but allocates nothing.
                if src.is_cpu() && dst.is_cpu() {
                    continue;
                }
                // A copy across the host/GPU line, to the host or to Vulkan,
                // read once by an element-wise fold on its destination, is
                // moved by that fold (`exec::Options::
                // defer_gpu_copies_into_folds`): the host reads a mapped
                // buffer in place, else downloads into one scratch buffer per
                // fold; a Vulkan fold uploads its first operand straight into
                // its result and later ones into one scratch buffer.
                let deferrable = src.is_cpu() != dst.is_cpu()
                    && (dst.is_cpu() || dst.kind == fuel_graph_ext::DeviceKind::Vulkan);
                let rs = readers(id);
                let uses: Vec<usize> = rs
                    .iter()
                    .flat_map(|&r| {
                        g.node(r)
                            .unwrap()
                            .operands
                            .iter()
                            .enumerate()
                            .filter(|(_, v)| v.node == id)
                            .map(|(k, _)| k)
                            .collect::<Vec<_>>()
                    })
                    .collect();
                match (rs.as_slice(), uses.as_slice()) {
                    ([r], [slot])
                        if deferrable
                            && matches!(g.node(*r).unwrap().op, Op::Elementwise { .. })
                            && g.node(*r).unwrap().op.device() == Some(dst) =>
                    {
                        let scratch = if dst.is_cpu() {
                            !mapped(src)
                        } else {
                            *slot > 0
                        };
                        if scratch {
                            staging_folds.insert(*r);
                        }
                        continue;
                    }
                    _ => {}
                }
            }
            _ => c.kernels += 1,
        }
        c.allocs += 1;
    }
    c.allocs += staging_folds.len();
    c
}

/// Bytes of every value `g` places on `device`: no schedule can hold more
/// at once, so it bounds the allocator's peak.
pub fn all_values_bytes(g: &Graph, device: Device) -> usize {
    g.node_ids()
        .map(|id| g.node(id).unwrap())
        .filter(|n| n.op.device() == Some(device))
        .map(|n| n.ty.size_bytes() * n.num_results())
        .sum()
}

/// Asserts `got` equals `want` bit for bit (every NaN equal to every NaN).
pub fn assert_close(got: &[HostTensor], want: &[HostTensor], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: number of results");
    for (k, (g, w)) in got.iter().zip(want).enumerate() {
        if let Err(e) = g.check_same(w) {
            panic!("{what}: result {k}: {e}");
        }
    }
}

/// Resident set size of this process in bytes (Linux `/proc/self/statm`).
pub fn rss_bytes() -> usize {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: usize = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    // The page size is 4 KiB on every Linux target we run on.
    pages * 4096
}

/// The message an injected fault must give, if `msg` is one for `point`
/// on one of `devices`: the exact text with the device, op and byte count
/// filled in from the candidates.
pub fn expected_fault_message(
    point: fuel_graph_ext::exec::FaultPoint,
    msg: &str,
    devices: &[Device],
) -> Option<String> {
    use fuel_graph_ext::exec::FaultPoint;
    let tail = "(armed by `Executable::inject_fault`; the next run is unaffected)";
    devices.iter().find_map(|d| {
        let want = match point {
            FaultPoint::Copy { .. } => format!("injected fault in `copy` on {d} {tail}"),
            FaultPoint::Kernel { .. } => ["add", "mul", "max", "min", "div", "cast", "slice", "concat"]
                .iter()
                .map(|op| format!("injected fault in `{op}` on {d} {tail}"))
                .find(|w| w == msg)?,
            FaultPoint::Alloc { .. } => {
                let bytes: usize = msg
                    .strip_prefix(&format!("out of memory on {d}: cannot allocate "))?
                    .split(' ')
                    .next()?
                    .parse()
                    .ok()?;
                format!(
                    "out of memory on {d}: cannot allocate {bytes} bytes (injected allocation failure)"
                )
            }
        };
        (want == msg).then_some(want)
    })
}

/// Whether the executor maps `d`'s buffers for the host (lavapipe does,
/// unless `FUEL_VULKAN_MAPPED=0`); false for every other device.
pub fn host_mapped(d: Device) -> bool {
    d.kind == fuel_graph_ext::DeviceKind::Vulkan
        && fuel_graph_ext::backend::vulkan::Instance::open()
            .ok()
            .and_then(|i| i.open_device(d).ok())
            .is_some_and(|v| v.host_mapped())
}

/// Injects every copy, kernel and allocation fault one run of `lowered`
/// can hit, one per run. Each run must fail with the exact injected-fault
/// message, leave every allocator at zero, and the next run must succeed
/// with the interpreter's results. Returns how many faults were checked.
pub fn fail_at_every_point(lowered: &Graph, devices: &[Device]) -> usize {
    use fuel_graph_ext::exec::{self, FaultPoint};
    use fuel_graph_ext::interp::{deterministic_inputs, interpret};
    let exe = exec::compile(lowered, devices).unwrap();
    let inputs = deterministic_inputs(lowered);
    let want = interpret(lowered, &inputs).unwrap();
    let c = counts(lowered, host_mapped);
    let points = (0..c.copies)
        .map(|nth| FaultPoint::Copy { nth })
        .chain((0..c.kernels).map(|nth| FaultPoint::Kernel { nth }))
        .chain((0..c.allocs).map(|nth| FaultPoint::Alloc { nth }));
    let mut checked = 0;
    for point in points {
        exe.inject_fault(point);
        let e = match exe.run_host(&inputs) {
            Ok(_) => panic!("{point:?}: the run succeeded"),
            Err(e) => e.to_string(),
        };
        assert!(
            expected_fault_message(point, &e, devices).is_some(),
            "{point:?}: unexpected message: {e}"
        );
        fuel_tests::assert_no_leaks(&exe);
        let got = exe
            .run_host(&inputs)
            .unwrap_or_else(|e| panic!("the run after {point:?} failed: {e}"));
        assert_close(&got, &want, &format!("the run after {point:?}"));
        fuel_tests::assert_no_leaks(&exe);
        checked += 1;
    }
    // One more fault past the last event: nothing fires, the run succeeds.
    exe.inject_fault(FaultPoint::Copy { nth: c.copies });
    assert_close(&exe.run_host(&inputs).unwrap(), &want, "past the last copy");
    checked
}

/// Compiles `src` (an input, a copy to `device`, then one `op` there), injects
/// a copy, a kernel and an allocation fault in turn, and checks each run's
/// exact message, that nothing leaked, and that the next run is correct.
pub fn assert_exact_fault_messages(src: &str, device: Device, op: &str) {
    let g = fuel_graph_ext::text::parse(src).unwrap();
    let exe = fuel_graph_ext::exec::compile(&g, &[]).unwrap();
    let inputs = fuel_graph_ext::interp::deterministic_inputs(&g);
    let want = fuel_graph_ext::interp::interpret(&g, &inputs).unwrap();
    let tail = "(armed by `Executable::inject_fault`; the next run is unaffected)";
    for (point, msg) in [
        (
            fuel_graph_ext::exec::FaultPoint::Copy { nth: 0 },
            format!("injected fault in `copy` on {device} {tail}"),
        ),
        (
            fuel_graph_ext::exec::FaultPoint::Kernel { nth: 0 },
            format!("injected fault in `{op}` on {device} {tail}"),
        ),
        (
            fuel_graph_ext::exec::FaultPoint::Alloc { nth: 1 },
            format!(
                "out of memory on {device}: cannot allocate 64 bytes (injected allocation failure)"
            ),
        ),
    ] {
        exe.inject_fault(point);
        let e = exe.run_host(&inputs).err().map(|e| e.to_string());
        assert_eq!(e.as_deref(), Some(msg.as_str()), "{point:?}");
        fuel_tests::assert_no_leaks(&exe);
        assert_close(&exe.run_host(&inputs).unwrap(), &want, "after the fault");
        fuel_tests::assert_no_leaks(&exe);
    }
}
