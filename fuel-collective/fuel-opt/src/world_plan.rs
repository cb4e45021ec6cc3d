//! `fuel-opt plan WORLD`: what the world lowering picks for a world all_reduce
//! and what it is estimated to cost, beside a flat ring over all ranks, by
//! the cost model alone: no device is opened and no MPI is needed.
//!
//! A world is written `Px[DEVICES]` (P processes, each with the same local
//! devices) or `[DEVICES]` with `--processes`; a device list may hold
//! ranges such as `cuda:0..3`. The topology is `--topology FILE`, else the
//! documented defaults (not this machine's calibration cache: a plan is
//! for machines other than this one). The inter-process driver is NCCL's
//! kind (cuda) when the topology has `driver cuda` and a process has a CUDA
//! device, else the host's (cpu, MPI). The figures come from
//! `fuel_collective::world_cost`.
//!
//! With `--collective C` it plans one process instead (`group_plan.rs`):
//! `[DEVICES]` and `--sizes`, every candidate and the lower bound per size.

use crate::outln;
use crate::sizes::{format_size, parse_counts, parse_size};
use crate::Failure;
use fuel_collective::world_cost::{flat_ring_us, world_all_reduce_us};
use fuel_graph_ext::{Device, Topology};

/// `fuel-opt plan` options.
#[derive(clap::Args, Debug)]
pub struct PlanArgs {
    /// The world: `64x[cuda:0..3,vulkan:0,cpu:0]`, or `[cpu:0]` with
    /// --processes; P from 1 to 1048576, at most 1024 local devices.
    world: String,
    /// Process counts: a list (`2,8`) or a doubling range (`2..1024`), each
    /// 1 to 1048576; default: the P of the world.
    #[arg(long)]
    processes: Option<String>,
    /// Bytes per rank.
    #[arg(long, default_value = "1M")]
    size: String,
    /// Plan one process instead of a world: this collective over the
    /// devices (`[DEVICES]`, no P), every candidate and the lower bound
    /// per size of --sizes.
    #[arg(long)]
    collective: Option<crate::bench::collectives::Collective>,
    /// With --collective: bytes per rank, a list (`64K,1M`) or a doubling
    /// range (`64K..256M`); default 1M.
    #[arg(long)]
    sizes: Option<String>,
    /// A topology file (default: the documented defaults).
    #[arg(long)]
    topology: Option<std::path::PathBuf>,
}

/// The most processes a plan prices: 2^20.
pub const MAX_PROCESSES: usize = 1 << 20;

/// The most local devices of one process a plan prices (the hub's choice
/// weighs each against the others, so the time grows with their square).
pub const MAX_LOCAL: usize = 1024;

fn bad(world: &str, why: &str) -> Failure {
    Failure::input(format!(
        "bad world `{world}`: {why}; write it as Px[DEVICES], e.g. 64x[cuda:0..3,vulkan:0,cpu:0]"
    ))
}

fn too_many(world: &str) -> Failure {
    bad(
        world,
        &format!("a process holds at most {MAX_LOCAL} local devices in a plan"),
    )
}

/// Parses `Px[DEVICES]` or `[DEVICES]`: P (if given) and the local devices.
pub fn parse_world(s: &str) -> Result<(Option<usize>, Vec<Device>), Failure> {
    let (p, rest) = match s.split_once('x') {
        Some((p, rest)) if rest.starts_with('[') => {
            let p: usize = p
                .trim()
                .parse()
                .ok()
                .filter(|p| (1..=MAX_PROCESSES).contains(p))
                .ok_or_else(|| {
                    bad(
                        s,
                        &format!(
                            "`{}` is not a process count from 1 to {MAX_PROCESSES}",
                            fuel_graph_ext::text::excerpt::token(p)
                        ),
                    )
                })?;
            (Some(p), rest)
        }
        _ => (None, s),
    };
    let inner = rest
        .trim()
        .strip_prefix('[')
        .and_then(|r| r.strip_suffix(']'))
        .ok_or_else(|| bad(s, "the devices must be in brackets"))?;
    let mut devices = Vec::new();
    for item in inner.split(',').map(str::trim) {
        match item.split_once("..") {
            Some((first, last)) => {
                let d: Device =
                    first
                        .parse()
                        .map_err(|e: fuel_graph_ext::device::ParseDeviceError| {
                            bad(s, &e.to_string())
                        })?;
                let end: u32 =
                    last.parse().ok().filter(|e| *e >= d.index).ok_or_else(|| {
                        bad(s, &format!("`{item}` is not a range like cuda:0..3"))
                    })?;
                // Counted before a device is made: `cpu:0..4294967295`
                // would be 2^32 of them.
                if (end - d.index) as usize >= MAX_LOCAL - devices.len().min(MAX_LOCAL) {
                    return Err(too_many(s));
                }
                devices.extend((d.index..=end).map(|index| Device {
                    kind: d.kind,
                    index,
                }));
            }
            None => {
                if devices.len() >= MAX_LOCAL {
                    return Err(too_many(s));
                }
                devices.push(item.parse().map_err(
                    |e: fuel_graph_ext::device::ParseDeviceError| bad(s, &e.to_string()),
                )?)
            }
        }
    }
    let mut seen = devices.clone();
    seen.sort();
    seen.dedup();
    if seen.len() != devices.len() {
        return Err(bad(s, "a device is listed twice"));
    }
    Ok((p, devices))
}

/// Runs `fuel-opt plan`.
pub fn plan(a: &PlanArgs) -> Result<(), Failure> {
    let (p, devices) = parse_world(&a.world)?;
    if let Some(collective) = a.collective {
        return plan_group(a, collective, p, &devices);
    }
    if a.sizes.is_some() {
        return Err(Failure::input(
            "--sizes goes with --collective (one process); a world plan takes --size",
        ));
    }
    let counts =
        match (&a.processes, p) {
            (Some(list), _) => parse_counts(list, "process count", MAX_PROCESSES)
                .map_err(|e| Failure::input(format!("--processes: {e}")))?,
            (None, Some(p)) => vec![p],
            (None, None) => return Err(Failure::input(
                "plan needs a process count: write the world as Px[DEVICES] or pass --processes",
            )),
        };
    let bytes = parse_size(&a.size).map_err(|e| Failure::input(format!("--size: {e}")))?;
    let topo = match &a.topology {
        Some(_) => crate::load_topology(
            a.topology.as_ref(),
            &devices,
            crate::input::DEFAULT_MAX_INPUT,
        )?,
        None => Topology::default(),
    };
    let kind = fuel_collective::world_cost::driver_kind(&topo, &devices);
    let names: Vec<String> = devices.iter().map(Device::to_string).collect();
    let link = topo.process_link();
    outln!(
        "# fuel-opt plan: world all_reduce of {} per rank over P x [{}], driver {kind}, {} (estimates only, no device opened)",
        format_size(bytes),
        names.join(","),
        topo.source()
    )?;
    outln!(
        "# process link {} GB/s, {} us; world = local part on the hub + ring over P processes; flat = one ring over all P*k ranks",
        link.bandwidth,
        link.latency_us
    )?;
    outln!(
        "#{:>6} {:>7} {:>10} {:>14} {:>14} {:>8}",
        "P",
        "ranks",
        "hub",
        "world(us)",
        "flat ring(us)",
        "flat/world"
    )?;
    for p in counts {
        let (hub, world) = world_all_reduce_us(&topo, &devices, kind, p, bytes);
        let flat = flat_ring_us(&topo, &devices, p, bytes);
        outln!(
            "{:>7} {:>7} {:>10} {:>14.1} {:>14.1} {:>8.2}",
            p,
            p * devices.len(),
            hub.to_string(),
            world,
            flat,
            flat / world
        )?;
    }
    Ok(())
}

/// `fuel-opt plan '[DEVICES]' --collective C`: one process, no world.
fn plan_group(
    a: &PlanArgs,
    collective: crate::bench::collectives::Collective,
    p: Option<usize>,
    devices: &[Device],
) -> Result<(), Failure> {
    if p.is_some() || a.processes.is_some() {
        return Err(Failure::input(
            "--collective plans one process: write the devices as [DEVICES], without Px or --processes",
        ));
    }
    let sizes = crate::sizes::parse_sizes(a.sizes.as_deref().unwrap_or("1M"))
        .map_err(|e| Failure::input(format!("--sizes: {e}")))?;
    let topo = crate::file_topology(a.topology.as_ref(), devices)?;
    crate::group_plan::plan(collective, devices, &sizes, topo)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worlds_parse_with_ranges_and_refuse_mistakes() {
        let (p, d) = parse_world("64x[cuda:0..3,vulkan:0,cpu:0]").unwrap();
        assert_eq!(p, Some(64));
        let names: Vec<String> = d.iter().map(Device::to_string).collect();
        assert_eq!(
            names,
            ["cuda:0", "cuda:1", "cuda:2", "cuda:3", "vulkan:0", "cpu:0"]
        );
        assert_eq!(
            parse_world("[cpu:0]").unwrap(),
            (None, vec![Device::cpu(0)])
        );
        for (bad, says) in [
            ("0x[cpu:0]", "`0` is not a process count from 1"),
            ("2xcpu:0", "in brackets"),
            ("2x[cpu:0,cpu:0]", "listed twice"),
            ("2x[cuda:0..1,cuda:1]", "listed twice"),
            ("2x[tpu:0]", "bad world `2x[tpu:0]`"),
            ("2x[cuda:2..1]", "not a range"),
            ("2x[cpu:0..4294967295]", "at most 1024 local devices"),
            ("2x[cpu:0..1023,cuda:0]", "at most 1024 local devices"),
            ("2097152x[cpu:0]", "a process count from 1 to 1048576"),
        ] {
            let e = parse_world(bad).unwrap_err().message;
            assert!(e.contains(says), "{bad}: {e}");
        }
    }
}
