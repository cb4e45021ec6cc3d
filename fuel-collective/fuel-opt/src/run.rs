//! `--run` and `devices`: executing graphs on real devices.
//!
//! `--run` compiles the lowered graph with the executor, feeds it the
//! interpreter's deterministic inputs, and checks every result twice:
//! against the interpreter's run of the *lowered* graph bit for bit (any
//! NaN matches any NaN), since every backend computes each node as the
//! interpreter does, in the same fold order; and that run against the
//! original graph's meaning, exactly except where a float `sum`, `prod`
//! or `mean` over three or more ranks folds in another order, where the
//! fold-order bound of `interp::fold_bounds` holds (docs/lowering.md,
//! "Fold order"). `devices` prints what discovery found. [`compiler`] is
//! how every command compiles: with the plan and runtime options the
//! environment sets (the libraries read no variable).

use crate::outln;
use crate::Failure;
use fuel_graph_ext::device::parse_device_list;
use fuel_graph_ext::device::Device;
use fuel_graph_ext::interp::{
    compare, fold_bounds, interpret, try_deterministic_inputs, Agreement,
};
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
/// timeouts, `FUEL_DISPATCH`), see [`exec::RuntimeOptions::from_env`]. A
/// graph `schedule-collectives` ordered runs by that order, strictly
/// (`Dispatch::InOrder`) where it lets a lane wait and as a priority
/// (`Dispatch::Priority`) where it does not, unless `FUEL_DISPATCH` says
/// otherwise.
pub fn compiler<'g>(
    g: &'g Graph,
    devices: &[Device],
    topology: &'g Topology,
    options: exec::Options,
) -> Result<exec::Compiler<'g>, Failure> {
    let fail = |e: &dyn std::fmt::Display| Failure::input(e.to_string());
    let mut runtime = exec::RuntimeOptions::from_env().map_err(|e| fail(&e))?;
    let chosen = exec::Dispatch::from_env().map_err(|e| fail(&e))?;
    use fuel_collective::overlap::{was_scheduled, Scheduled};
    match (chosen, was_scheduled(g)) {
        (None, Some(Scheduled::Waits)) => runtime.dispatch = exec::Dispatch::InOrder,
        (None, Some(Scheduled::NeverWaits)) => runtime.dispatch = exec::Dispatch::Priority,
        _ => {}
    }
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

/// Runs `lowered` on devices and checks it twice: the device's results
/// against the interpreter's run of `lowered` (the same folds in the same
/// order, so bit for bit), and the interpreter's run of `lowered` against
/// the meaning of `original` under the fold-order rule
/// (`interp::check_lowering`, docs/lowering.md "Fold order").
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
    let (want, bounds) =
        fold_bounds(original, &inputs).map_err(|e| Failure::input(e.to_string()))?;
    let folded = interpret(lowered, &inputs).map_err(|e| Failure::input(e.to_string()))?;
    let got = exe
        .run_host(&inputs)
        .map_err(|e| Failure::input(format!("run failed: {e}")))?;
    if got.len() != want.len() || folded.len() != want.len() {
        return Err(Failure::mismatch(format!(
            "the lowered graph returns {} result(s) but the original returns {}",
            got.len(),
            want.len()
        )));
    }
    let devs = exe.output_devices();
    let (mut device_bad, mut meaning_bad) = (0, 0);
    let results = got.iter().zip(&folded).zip(want.iter().zip(&bounds));
    for (k, ((g, f), (w, b))) in results.enumerate() {
        let device_ok = g.check_same(f).is_ok();
        let a = compare(f, w, b);
        let dev = devs.get(k).map_or("?".into(), |d| d.to_string());
        let head = format!("result {k} : {} @{dev}", g.ty);
        if !device_ok {
            device_bad += 1;
            outln!("{head} MISMATCH {}", g.digest())?;
            outln!(
                "  expected {} (the interpreter's run of the lowered graph: the device computed other bits)",
                f.digest()
            )?;
        } else if a.wrong > 0 {
            meaning_bad += 1;
            outln!("{head} MISMATCH {}", g.digest())?;
            if let Some((i, x, y, bound)) = a.first_wrong {
                outln!(
                    "  expected {} (the original graph: element {i} is {x:e}, the original's {y:e}, {} of {} element(s) past {})",
                    w.digest(),
                    a.wrong,
                    w.len(),
                    if bound > 0.0 { format!("the fold-order bound {bound:e}") } else { "exact equality".into() }
                )?;
            }
        } else {
            outln!("{head} ok {}{}", g.digest(), order_note(&a))?;
        }
    }
    let mut why = Vec::new();
    if device_bad > 0 {
        why.push(format!("{device_bad} result(s) differ from the interpreter's run of the lowered graph (every element must be the same bit for bit; any NaN matches any NaN)"));
    }
    if meaning_bad > 0 {
        why.push(format!("{meaning_bad} result(s) differ from the original graph's meaning (every element exact, or within its fold-order bound: docs/lowering.md, \"Fold order\")"));
    }
    if !why.is_empty() {
        return Err(Failure::mismatch(why.join("; ")));
    }
    Ok(())
}

/// What a correct result owes to the fold order, if anything: elements
/// folded in another order than the interpreter's rank order (within
/// their bound), and elements no bound reaches.
fn order_note(a: &Agreement) -> String {
    let mut parts = Vec::new();
    if a.within > 0 {
        parts.push(format!(
            "{} element(s) folded in another order than rank order, each within its bound",
            a.within
        ));
    }
    if a.unchecked > 0 {
        parts.push(format!(
            "{} element(s) not compared with the original: another fold order may overflow there",
            a.unchecked
        ));
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!(" ({}; docs/lowering.md, \"Fold order\")", parts.join("; "))
    }
}
