//! `fuel-opt bench --step ddp`: a data-parallel training step's backward
//! pass, timed under three schedules in one run.
//!
//! The step has `--layers` layers. Per layer, every device of `--devices`
//! computes its weight gradient with the `extern "matmul"` kernel
//! (`X^T · dY`, `f32[width, batch] · f32[batch, width]`), the gradients are
//! all_reduced (Mean), and each device updates its weights (`w + s · g`,
//! element-wise). One matmul is timed alone first on each kind of device;
//! its median is the cost hint of that device's matmuls, so the cost model
//! prices the compute as measured.
//!
//! The schedules, each an executable of the same lowered step:
//! - `after-compute`: every communication waits until every gradient is
//!   computed (`Dispatch::AfterCompute`), as a step that all_reduces after
//!   the backward pass;
//! - `fifo`: the runner as it is by default, each lane running steps in
//!   the order they come ready;
//! - `scheduled`: the graph ordered by `schedule-collectives`, run as
//!   `fuel-opt` runs it: each lane strictly in that order
//!   (`Dispatch::InOrder`) where the order lets a lane wait for a step,
//!   else that order as each lane's priority (`Dispatch::Priority`);
//! - `in-order` or `by-priority`: the same graph run the other way.
//!
//! `compute-only` is the same step with each device's own gradient in
//! place of the all_reduce: no communication at all. A schedule's exposed
//! communication is its step time minus that; `hidden` is the share of
//! `after-compute`'s exposed time a schedule does not expose. Runs are
//! taken in turns (one of each per round), medians over `--iters` after
//! `--warmup`, each a `run_into` of the same input tensors over outputs it
//! overwrites, as a training loop runs; every executable's results are
//! checked against the interpreter before anything is timed. `est` is the overlap simulator's
//! makespan of the same plan under the same dispatch.

use crate::outln;
use crate::setup::median_us;
use crate::Failure;
use fuel_collective::overlap::simulate::{simulate, Policy};
use fuel_collective::overlap::tasks::tasks_of;
use fuel_collective::{DeviceGroup, DEFAULT_PIPELINE};
use fuel_graph_ext::interp::{deterministic_inputs, interpret, HostTensor};
use fuel_graph_ext::op::{CostHint, ExternOp};
use fuel_graph_ext::{DType, Device, Graph, LazyGraph, ReduceOp, TensorType, Topology};
use fuel_runtime::exec::{Compiler, Dispatch, Executable, RuntimeOptions, Tensor};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

/// The step's shape.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    /// Layers, each one gradient per device.
    pub layers: usize,
    /// Each gradient is `f32[width, width]`.
    pub width: usize,
    /// Rows of each device's batch (the matmul's inner dimension).
    pub batch: usize,
}

/// Records the step over `devices`; with `reduce`, the gradients are
/// all_reduced, else each device keeps its own. `hints[r]` is the cost
/// hint of rank `r`'s matmuls.
fn record(
    devices: &[Device],
    s: Shape,
    hints: &[CostHint],
    reduce: bool,
) -> Result<Graph, Failure> {
    let fail = |e: &dyn std::fmt::Display| Failure::input(e.to_string());
    let group = DeviceGroup::new(devices.iter().copied()).map_err(|e| fail(&e))?;
    let graph = LazyGraph::new("ddp_step");
    let f32s = |shape: &[usize]| TensorType::new(DType::F32, shape);
    for l in (0..s.layers).rev() {
        let mut grads = Vec::with_capacity(devices.len());
        for (r, d) in devices.iter().enumerate() {
            let xt = graph.input(&format!("xt{l}.{r}"), *d, f32s(&[s.width, s.batch]));
            let dy = graph.input(&format!("dy{l}.{r}"), *d, f32s(&[s.batch, s.width]));
            let mut op = ExternOp::new("matmul", *d, f32s(&[s.width, s.width]));
            op.cost = hints.get(r).copied();
            grads.push(xt.call_extern(op, &[&dy]).map_err(|e| fail(&e))?);
        }
        let grads = if reduce {
            group
                .all_reduce(&grads, ReduceOp::Mean)
                .map_err(|e| fail(&e))?
        } else {
            grads
        };
        for (r, (d, g)) in devices.iter().zip(&grads).enumerate() {
            let w = graph.input(&format!("w{l}"), *d, f32s(&[s.width, s.width]));
            let scale = graph.input("scale", *d, f32s(&[s.width, s.width]));
            let step = scale
                .mul(g)
                .and_then(|sg| w.add(&sg))
                .map_err(|e| fail(&e))?;
            graph
                .output_named(&format!("w{l}.{r}"), &step)
                .map_err(|e| fail(&e))?;
        }
    }
    Ok(graph.snapshot())
}

/// `g` lowered by `pipeline`.
fn lowered(g: &Graph, pipeline: &str, topo: &Arc<Topology>) -> Result<Graph, Failure> {
    Ok(crate::setup::lower(g, pipeline, topo, None)?.0)
}

fn compiled(g: &Graph, dispatch: Dispatch) -> Result<Executable, Failure> {
    let runtime = RuntimeOptions {
        dispatch,
        ..RuntimeOptions::from_env().map_err(|e| Failure::input(e.to_string()))?
    };
    Compiler::new(g)
        .runtime(runtime)
        .compile()
        .map_err(|e| Failure::input(e.to_string()))
}

/// One schedule: its name, graph, executable and the simulator's estimate.
struct Way {
    name: &'static str,
    graph: Graph,
    exe: Executable,
    est_us: f64,
    times: Vec<f64>,
    /// The outputs `run_into` overwrites, run after run.
    out: Vec<Tensor>,
}

impl Way {
    fn new(
        name: &'static str,
        graph: Graph,
        dispatch: Dispatch,
        topo: &Topology,
    ) -> Result<Way, Failure> {
        let policy = match dispatch {
            Dispatch::Fifo => Policy::Fifo,
            Dispatch::InOrder => Policy::InOrder,
            Dispatch::Priority => Policy::Priority,
            Dispatch::AfterCompute => Policy::AfterCompute,
        };
        let plan = fuel_collective::cost::price::plan_for(&graph, topo)
            .map_err(|e| Failure::input(e.to_string()))?;
        let est_us = tasks_of(&plan, topo).map_or(f64::NAN, |t| simulate(&t, policy).makespan_us);
        let exe = compiled(&graph, dispatch)?;
        Ok(Way {
            name,
            graph,
            exe,
            est_us,
            times: Vec::new(),
            out: Vec::new(),
        })
    }

    /// Runs once and checks the results against the interpreter.
    fn check(&self, inputs: &BTreeMap<String, HostTensor>) -> Result<(), Failure> {
        let got = self
            .exe
            .run_host(inputs)
            .map_err(|e| Failure::input(e.to_string()))?;
        let want = interpret(&self.graph, inputs).map_err(|e| Failure::input(e.to_string()))?;
        for (k, (a, b)) in got.iter().zip(&want).enumerate() {
            a.check_same(b).map_err(|e| {
                Failure::input(format!(
                    "{}: output {k} differs from the interpreter: {e}",
                    self.name
                ))
            })?;
        }
        Ok(())
    }
}

fn tensors(host: &BTreeMap<String, HostTensor>) -> BTreeMap<String, Tensor> {
    host.iter()
        .map(|(k, v)| (k.clone(), Tensor::from_host(v)))
        .collect()
}

/// The median time of one matmul of the step's shape on `device`, in
/// seconds: the cost hint.
fn time_matmul(device: Device, s: Shape, iters: usize) -> Result<f64, Failure> {
    let graph = LazyGraph::new("matmul");
    let f32s = |shape: &[usize]| TensorType::new(DType::F32, shape);
    let xt = graph.input("xt", device, f32s(&[s.width, s.batch]));
    let dy = graph.input("dy", device, f32s(&[s.batch, s.width]));
    let op = ExternOp::new("matmul", device, f32s(&[s.width, s.width]));
    let out = xt
        .call_extern(op, &[&dy])
        .map_err(|e| Failure::input(e.to_string()))?;
    graph
        .output(&out)
        .map_err(|e| Failure::input(e.to_string()))?;
    let g = graph.snapshot();
    let exe = compiled(&g, Dispatch::Fifo)?;
    let inputs = tensors(&deterministic_inputs(&g));
    let mut t = Vec::with_capacity(iters);
    let mut out = Vec::new();
    for _ in 0..iters.max(3) {
        let start = Instant::now();
        exe.run_into(&inputs, &mut out)
            .map_err(|e| Failure::input(e.to_string()))?;
        t.push(start.elapsed().as_secs_f64());
    }
    Ok(median_us(&mut t))
}

/// The most input bytes a step may hold: the bench keeps them, the
/// interpreter's f64 copies (twice as many) and the results in memory.
const MAX_STEP_INPUT_BYTES: u128 = 1 << 31;

/// Refuses a step whose inputs would not fit, naming the flags.
fn check_size(ranks: usize, s: Shape) -> Result<(), Failure> {
    let (w, b) = (s.width as u128, s.batch as u128);
    let per_layer = 4 * (2 * w * b + 2 * w * w);
    let bytes = per_layer * s.layers as u128 * ranks as u128;
    if bytes > MAX_STEP_INPUT_BYTES {
        return Err(Failure::input(format!(
            "--layers {} --width {} --batch {} over {ranks} devices make {} MiB of inputs; the bench holds them, the interpreter's copies and the results at once, so it takes at most {} MiB: give a smaller --width, --batch or --layers",
            s.layers,
            s.width,
            s.batch,
            bytes >> 20,
            MAX_STEP_INPUT_BYTES >> 20
        )));
    }
    Ok(())
}

/// Runs `bench --step ddp`.
pub fn bench(
    devices: &[Device],
    s: Shape,
    topo: &Arc<Topology>,
    iters: usize,
    warmup: usize,
) -> Result<(), Failure> {
    check_size(devices.len(), s)?;
    let names: Vec<String> = devices.iter().map(Device::to_string).collect();
    // One matmul timed per kind of device (devices of a kind are alike).
    let mut by_kind: BTreeMap<String, f64> = BTreeMap::new();
    let mut hints = Vec::with_capacity(devices.len());
    for d in devices {
        let kind = format!("{:?}", d.kind);
        let secs = match by_kind.get(&kind) {
            Some(t) => *t,
            None => {
                let t = time_matmul(*d, s, iters)?;
                by_kind.insert(kind, t);
                t
            }
        };
        hints.push(CostHint::new(secs).map_err(Failure::input)?);
    }
    let timed: Vec<String> = devices
        .iter()
        .zip(&hints)
        .map(|(d, h)| format!("{d} {:.3} ms", h.secs() * 1e3))
        .collect();
    outln!(
        "# fuel-opt bench --step ddp: {} layers of f32[{w},{w}] gradients (batch {}) over [{}], {iters} iters after {warmup} warmup, medians, taken in turns",
        s.layers,
        s.batch,
        names.join(", "),
        w = s.width,
    )?;
    outln!(
        "# one matmul, timed alone (each matmul's cost hint): {}; each all_reduce moves {} KiB per rank",
        timed.join(", "),
        s.width * s.width * 4 / 1024
    )?;
    let step = record(devices, s, &hints, true)?;
    let plain = lowered(&step, DEFAULT_PIPELINE, topo)?;
    let ordered = lowered(
        &step,
        &format!("{DEFAULT_PIPELINE},schedule-collectives"),
        topo,
    )?;
    // As fuel-opt runs a scheduled graph, and the other way for comparison.
    let (intended, other, other_name) = match fuel_collective::overlap::was_scheduled(&ordered) {
        Some(fuel_collective::overlap::Scheduled::Waits) => {
            (Dispatch::InOrder, Dispatch::Priority, "by-priority")
        }
        _ => (Dispatch::Priority, Dispatch::InOrder, "in-order"),
    };
    let alone = lowered(&record(devices, s, &hints, false)?, DEFAULT_PIPELINE, topo)?;
    let mut ways = vec![
        Way::new("compute-only", alone, Dispatch::Fifo, topo)?,
        Way::new("after-compute", plain.clone(), Dispatch::AfterCompute, topo)?,
        Way::new("fifo", plain, Dispatch::Fifo, topo)?,
        Way::new("scheduled", ordered.clone(), intended, topo)?,
        Way::new(other_name, ordered, other, topo)?,
    ];
    let host_inputs = deterministic_inputs(&ways[1].graph);
    for w in &ways {
        w.check(&host_inputs)?;
    }
    // Timed as a training loop runs: tensors in, outputs overwritten.
    let inputs = tensors(&host_inputs);
    for round in 0..warmup + iters {
        for w in &mut ways {
            let start = Instant::now();
            w.exe
                .run_into(&inputs, &mut w.out)
                .map_err(|e| Failure::input(e.to_string()))?;
            if round >= warmup {
                w.times.push(start.elapsed().as_secs_f64() * 1e6);
            }
        }
    }
    let medians: Vec<f64> = ways.iter_mut().map(|w| median_us(&mut w.times)).collect();
    let compute = medians[0];
    let exposed_after = (medians[1] - compute).max(0.0);
    outln!(
        "#{:>14} {:>10} {:>10} {:>9} {:>11} {:>7}",
        "schedule",
        "step_ms",
        "est_ms",
        "est/meas",
        "exposed_ms",
        "hidden"
    )?;
    for (w, &m) in ways.iter().zip(&medians) {
        let exposed = (m - compute).max(0.0);
        let hidden = if exposed_after > 0.0 && w.name != "compute-only" {
            format!("{:.0}%", 100.0 * (1.0 - exposed / exposed_after))
        } else {
            "-".into()
        };
        outln!(
            "{:>15} {:>10.3} {:>10.3} {:>9.2} {:>11.3} {:>7}",
            w.name,
            m / 1e3,
            w.est_us / 1e3,
            w.est_us / m,
            exposed / 1e3,
            hidden
        )?;
    }
    outln!(
        "# scheduled is {:.2}x after-compute and {:.2}x fifo per step",
        medians[1] / medians[3],
        medians[2] / medians[3]
    )?;
    Ok(())
}
