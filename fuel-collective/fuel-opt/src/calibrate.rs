//! `fuel-opt bench --calibrate`: measures what the cost model assumes, with
//! the executor itself, and writes a topology file the pass reads back
//! (`--topology FILE`).
//!
//! For each link class among the chosen devices it times a compiled
//! one-copy graph (input on A, copy to B) at 4 KiB and 4 MiB: bandwidth is
//! the slope between the two, latency the small transfer's time less its
//! bytes at that bandwidth. For each device kind it times a two-input `add`
//! at 4 MiB: reduce throughput is the bytes read over the time. Figures are
//! as the executor sees them (a copy to a Vulkan device includes reading
//! the result back).

use crate::scenario;
use crate::Failure;
use fuel_graph_ext::exec::{self, Tensor};
use fuel_graph_ext::interp::deterministic_inputs;
use fuel_graph_ext::topology::{LinkClass, LinkCost, Route};
use fuel_graph_ext::{text, Device, Topology};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Instant;

const SMALL: usize = 4 << 10;
const BIG: usize = 4 << 20;

/// Median microseconds of one run of `src` (text IR) on `devices`.
fn time_graph(src: &str, devices: &[Device], iters: usize, warmup: usize) -> Result<f64, Failure> {
    let g = text::parse(src).map_err(|e| Failure::input(format!("calibration graph: {e}")))?;
    let exe = exec::compile(&g, devices)
        .map_err(|e| Failure::input(format!("calibration compile failed: {e}")))?;
    let inputs: BTreeMap<String, Tensor> = deterministic_inputs(&g)
        .iter()
        .map(|(k, v)| (k.clone(), Tensor::from_host(v)))
        .collect();
    let mut outs = Vec::new();
    let mut times = Vec::with_capacity(iters);
    for it in 0..warmup + iters.max(1) {
        let t = Instant::now();
        exe.run_into(&inputs, &mut outs)
            .map_err(|e| Failure::input(format!("calibration run failed: {e}")))?;
        if it >= warmup {
            times.push(t.elapsed().as_secs_f64() * 1e6);
        }
    }
    Ok(scenario::median_us(&mut times))
}

fn copy_graph(a: Device, b: Device, bytes: usize) -> String {
    let n = bytes / 4;
    format!(
        "graph @cal {{\n  %0 = input \"a\" @{a} : f32[{n}]\n  %1 = copy %0 -> {b} : f32[{n}]\n  return %1\n}}\n"
    )
}

fn add_graph(d: Device, bytes: usize) -> String {
    let n = bytes / 4;
    format!(
        "graph @cal {{\n  %0 = input \"a\" @{d} : f32[{n}]\n  %1 = input \"b\" @{d} : f32[{n}]\n  %2 = add %0, %1 @{d} : f32[{n}]\n  return %2\n}}\n"
    )
}

/// Measures, prints, and writes the topology to `out`.
pub fn calibrate(
    devices: &[Device],
    base: &Topology,
    out: &Path,
    iters: usize,
    warmup: usize,
) -> Result<(), Failure> {
    let mut topo = base.clone();
    let mut done: BTreeSet<LinkClass> = BTreeSet::new();
    println!(
        "# fuel-opt bench --calibrate over {} devices, medians of {iters}",
        devices.len()
    );
    for &a in devices {
        for &b in devices {
            if a == b || topo.route(a, b) != Route::Direct {
                continue;
            }
            let Some(class) = topo.link_class(a, b) else {
                continue;
            };
            if class == LinkClass::SameDevice || !done.insert(class) {
                continue;
            }
            let small = time_graph(&copy_graph(a, b, SMALL), &[a, b], iters, warmup)?;
            let big = time_graph(&copy_graph(a, b, BIG), &[a, b], iters, warmup)?;
            let slope = (big - small).max(1e-3);
            let bandwidth_gbps = (BIG - SMALL) as f64 / (slope * 1e3);
            let latency_us = (small - SMALL as f64 / (bandwidth_gbps * 1e3)).max(0.0);
            println!(
                "link {:<12} {a} -> {b}: 4 KiB {small:.1} us, 4 MiB {big:.1} us => bandwidth {bandwidth_gbps:.2} GB/s, latency {latency_us:.1} us",
                class.as_str()
            );
            topo.set_link(class, LinkCost::new(bandwidth_gbps, latency_us.max(0.01)));
        }
    }
    let mut kinds = BTreeSet::new();
    for &d in devices {
        if !kinds.insert(d.kind) {
            continue;
        }
        let t = time_graph(&add_graph(d, BIG), &[d], iters, warmup)?;
        let gbps = (2 * BIG) as f64 / (t * 1e3);
        println!(
            "reduce {:<6} on {d}: add of 2 x 4 MiB {t:.1} us => {gbps:.2} GB/s of input read",
            d.kind
        );
        let mut c = topo.compute(d.kind);
        c.gbps = gbps;
        topo.set_compute(d.kind, c);
    }
    if let Some(dir) = out.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .map_err(|e| Failure::input(format!("cannot create `{}`: {e}", dir.display())))?;
    }
    let text = format!(
        "# written by `fuel-opt bench --calibrate` over [{}]\n{}",
        devices
            .iter()
            .map(|d| d.to_string())
            .collect::<Vec<_>>()
            .join(", "),
        topo.to_text()
    );
    std::fs::write(out, text)
        .map_err(|e| Failure::input(format!("cannot write `{}`: {e}", out.display())))?;
    println!("# wrote {} (read it back with --topology)", out.display());
    Ok(())
}
