//! `--run` and `devices`: executing graphs on real devices.
//!
//! `--run` compiles the lowered graph with the executor, feeds it the
//! interpreter's deterministic inputs, and compares every result with the
//! interpreter's result for the original graph with `HostTensor::check_same`:
//! every element bit for bit (any NaN matches any NaN), since every backend
//! computes what the interpreter does. `devices` prints what discovery
//! found. [`compiler`] is how every command compiles: with the plan and
//! runtime options the environment sets (the libraries read no variable).

use crate::outln;
use crate::Failure;
use fuel_graph_ext::device::parse_device_list;
use fuel_graph_ext::device::Device;
use fuel_graph_ext::interp::{interpret, try_deterministic_inputs};
use fuel_graph_ext::{Graph, Topology};
use fuel_runtime::exec;

/// The plan options the environment sets (`FUEL_VULKAN_IMPORT`), over `base`.
pub fn env_options(base: exec::Options) -> Result<exec::Options, Failure> {
    let env = exec::Options::from_env().map_err(|e| Failure::input(e.to_string()))?;
    Ok(exec::Options {
        import_host_buffers: base.import_host_buffers && env.import_host_buffers,
        ..base
    })
}

/// A compiler of `g` for `devices` (empty: the ones it uses) on `topology`
/// with plan options `options` and the environment's switches: host import
/// (`FUEL_VULKAN_IMPORT`) and the runtime's (`FUEL_SPIN_US`,
/// `FUEL_VULKAN_DEVICES`, `FUEL_VULKAN_MAPPED`, `FUEL_CUDA_PIN`, the join
/// timeouts), see [`exec::RuntimeOptions::from_env`].
pub fn compiler<'g>(
    g: &'g Graph,
    devices: &[Device],
    topology: &'g Topology,
    options: exec::Options,
) -> Result<exec::Compiler<'g>, Failure> {
    let runtime = exec::RuntimeOptions::from_env().map_err(|e| Failure::input(e.to_string()))?;
    Ok(exec::Compiler::new(g)
        .devices(devices)
        .topology(topology)
        .options(env_options(options)?)
        .runtime(runtime))
}

/// Lists devices and why any backend is unavailable.
pub fn devices() -> Result<(), Failure> {
    let d = exec::discover();
    for (dev, what) in &d.available {
        outln!("{:<10} available   {what}", dev.to_string())?;
    }
    for u in &d.unavailable {
        outln!(
            "{:<10} unavailable {}; hint: {}",
            u.backend,
            u.reason,
            u.hint
        )?;
    }
    Ok(())
}

/// Runs `lowered` on devices and compares with the interpreter's result for `original`.
pub fn run_and_check(
    original: &Graph,
    lowered: &Graph,
    devices: Option<&str>,
    topology: &fuel_graph_ext::Topology,
) -> Result<(), Failure> {
    let list = match devices {
        Some(s) => parse_device_list(s).map_err(|e| Failure::input(format!("--devices: {e}")))?,
        None => Vec::new(),
    };
    let exe = compiler(lowered, &list, topology, exec::Options::default())?
        .compile()
        .map_err(|e| Failure::input(e.to_string()))?;
    let inputs = try_deterministic_inputs(original).map_err(|e| Failure::input(e.to_string()))?;
    let want = interpret(original, &inputs).map_err(|e| Failure::input(e.to_string()))?;
    let got = exe
        .run_host(&inputs)
        .map_err(|e| Failure::input(format!("run failed: {e}")))?;
    if got.len() != want.len() {
        return Err(Failure::mismatch(format!(
            "the lowered graph returns {} result(s) but the original returns {}",
            got.len(),
            want.len()
        )));
    }
    let mut bad = 0;
    for (k, ((g, w), dev)) in got.iter().zip(&want).zip(exe.output_devices()).enumerate() {
        let ok = g.check_same(w).is_ok();
        if !ok {
            bad += 1;
        }
        outln!(
            "result {k} : {} @{dev} {} {}",
            g.ty,
            if ok { "ok" } else { "MISMATCH" },
            g.digest()
        )?;
        if !ok {
            outln!("  expected {}", w.digest())?;
        }
    }
    if bad > 0 {
        return Err(Failure::mismatch(format!(
            "{bad} result(s) differ from the interpreter (every element must be the same bit for bit; any NaN matches any NaN)"
        )));
    }
    Ok(())
}
