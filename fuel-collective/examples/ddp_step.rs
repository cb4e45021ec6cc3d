//! One data-parallel training step through the library: per layer each device's
//! gradient is the framework's `extern "matmul"`, the gradients are all_reduced
//! (Mean), each device updates its weights; `schedule-collectives` orders the step
//! around the matmuls and each runner lane follows that order. Checked, then timed.
//!
//! Run: `cargo run --release -p fuel-collective --example ddp_step [-- cpu:0,vulkan:0]`.
use fuel_collective::{run_pipeline, DeviceGroup, DEFAULT_PIPELINE};
use fuel_graph_ext::interp::{deterministic_inputs, interpret};
use fuel_graph_ext::op::ExternOp;
use fuel_graph_ext::{DType, Device, LazyGraph, ReduceOp, TensorType};
use fuel_runtime::exec::{Compiler, Dispatch, RuntimeOptions};
use std::sync::Arc;

const LAYERS: usize = 4;
const BATCH: usize = 64;
const WIDTH: usize = 256;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let arg = std::env::args().nth(1).unwrap_or("cpu:0,cpu:1".into());
    let devices: Vec<Device> = arg.split(',').map(str::parse).collect::<Result<_, _>>()?;
    let group = DeviceGroup::new(devices.clone())?;
    let graph = LazyGraph::new("ddp_step");
    let f32s = |shape: &[usize]| TensorType::new(DType::F32, shape);
    for l in (0..LAYERS).rev() {
        // Backward: each rank's gradient of layer l, X^T · dY of its batch.
        let grads = devices.iter().enumerate().map(|(r, d)| {
            let xt = graph.input(&format!("xt{l}.{r}"), *d, f32s(&[WIDTH, BATCH]));
            let dy = graph.input(&format!("dy{l}.{r}"), *d, f32s(&[BATCH, WIDTH]));
            xt.call_extern(ExternOp::new("matmul", *d, f32s(&[WIDTH, WIDTH])), &[&dy])
        });
        let grads = grads.collect::<Result<Vec<_>, _>>()?;
        let mean = group.all_reduce(&grads, ReduceOp::Mean)?;
        for (r, (d, g)) in devices.iter().zip(&mean).enumerate() {
            let w = graph.input(&format!("w{l}"), *d, f32s(&[WIDTH, WIDTH]));
            let scale = graph.input("scale", *d, f32s(&[WIDTH, WIDTH]));
            graph.output_named(&format!("w{l}.{r}"), &w.add(&scale.mul(g)?)?)?;
        }
    }
    let mut g = graph.snapshot();
    let pipeline = format!("{DEFAULT_PIPELINE},schedule-collectives");
    run_pipeline(&mut g, &pipeline, Arc::default(), Default::default())?;
    let runtime = RuntimeOptions {
        dispatch: Dispatch::Priority, // each lane by the order the pass chose
        ..Default::default()
    };
    let exe = Compiler::new(&g).runtime(runtime).compile()?;
    let inputs = deterministic_inputs(&g);
    let got = exe.run_host(&inputs)?;
    for (k, (a, b)) in got.iter().zip(interpret(&g, &inputs)?).enumerate() {
        a.check_same(&b).map_err(|e| format!("output {k}: {e}"))?;
    }
    let t = std::time::Instant::now();
    for _ in 0..20 {
        exe.run_host(&inputs)?;
    }
    let ms = t.elapsed().as_secs_f64() * 1e3 / 20.0;
    println!("{LAYERS} layers of f32[{WIDTH},{WIDTH}] gradients over {arg}: {ms:.2} ms per step, equal to the interpreter");
    Ok(())
}
