//! The fit recovers the figures that made the times it is given, from the
//! median of several passes.

use super::*;
use fuel_graph_ext::topology::{ComputeCost, RunnerCost};

fn curve(g: [f64; 4]) -> Curve {
    let pts: Vec<(usize, f64)> = SIZES[1..].iter().copied().zip(g).collect();
    Curve::new(&pts).unwrap()
}

/// Figures for the fit to recover.
fn truth() -> Topology {
    let mut truth = Topology::default();
    truth.set_runner(
        Runner::Inline,
        RunnerCost {
            step_us: 0.7,
            run_us: 2.5,
            dispatch_us: 0.3,
        },
    );
    truth.set_runner(
        Runner::Threaded,
        RunnerCost {
            step_us: 11.0,
            run_us: 40.0,
            dispatch_us: 6.0,
        },
    );
    let mut hv = truth.link(LinkClass::HostVulkan);
    hv.bandwidth = curve([9.0, 7.0, 6.5, 5.0]);
    hv.latency_us = 44.0;
    hv.deferred_gbps = 20.0;
    truth.set_link(LinkClass::HostVulkan, hv);
    let mut hh = truth.link(LinkClass::HostHost);
    hh.bandwidth = curve([40.0, 30.0, 20.0, 15.0]);
    hh.latency_us = 0.4;
    truth.set_link(LinkClass::HostHost, hh);
    // Lavapipe-like: a wider fold costs little more than a two-input one.
    let vk = ComputeCost {
        gbps: curve([0.4, 0.5, 0.45, 0.42]),
        fixed_us: 70.0,
        wide: 0.1,
    };
    truth.set_compute(DeviceKind::Vulkan, vk);
    // A CPU's curve has a point at the smallest size too (its fixed cost
    // comes from the div chain): slower there than at 64 KiB.
    let mut cpu = truth.compute(DeviceKind::Cpu);
    let pts: Vec<(usize, f64)> = SIZES
        .iter()
        .copied()
        .zip([35.0, 60.0, 25.0, 14.0, 10.0])
        .collect();
    cpu.gbps = Curve::new(&pts).unwrap();
    cpu.fixed_us = 0.2;
    cpu.wide = 0.8;
    truth.set_compute(DeviceKind::Cpu, cpu);
    truth
}

/// One pass of every calibration graph, timed as `truth` estimates it,
/// `scale` fold, with `extra_us` more on the smallest Vulkan copy.
fn pass(truth: &Topology, scale: f64, extra_us: f64) -> Measured {
    let g_with = |src: &str, runner, options: exec::Options| {
        let graph = text::parse(src).unwrap();
        let us = estimate_run_on_with(&graph, truth, runner, &options)
            .unwrap()
            .total_us()
            * scale;
        Timed {
            graph,
            runner,
            us,
            cpu_us: 0.0,
            options,
        }
    };
    let g = |src: &str, runner| g_with(src, runner, exec::Options::default());
    // Host-to-host copies are timed with sharing off, as `measure_once` does.
    let memcpy = exec::Options {
        share_host_copies: false,
        ..Default::default()
    };
    let (h0, h1, v) = (Device::cpu(0), Device::cpu(1), Device::vulkan(0));
    let sweep = |f: &dyn Fn(usize) -> String, runner| -> Vec<Timed> {
        SIZES.iter().map(|&b| g(&f(b), runner)).collect()
    };
    let mut vk_copies = sweep(&|b| copy_graph(v, h0, b), Runner::Threaded);
    vk_copies[0].us += extra_us;
    Measured {
        copies: [
            g(&copy_chain(1), Runner::Inline),
            g(&copy_chain(CHAIN), Runner::Inline),
        ],
        divs: [
            g(&div_chain(1), Runner::Inline),
            g(&div_chain(CHAIN), Runner::Inline),
        ],
        threaded_divs: Some([
            g(&div_chain(1), Runner::Threaded),
            g(&div_chain(CHAIN), Runner::Threaded),
        ]),
        fanout: Some(g(&fanout(CHAIN), Runner::Threaded)),
        links: vec![
            (
                LinkClass::HostHost,
                h0,
                h1,
                SIZES
                    .iter()
                    .map(|&b| g_with(&copy_graph(h0, h1, b), Runner::Inline, memcpy))
                    .collect(),
            ),
            (LinkClass::HostVulkan, v, h0, vk_copies),
        ],
        adds: vec![
            (
                DeviceKind::Cpu,
                sweep(&|b| add_graph(h0, b), Runner::Inline),
            ),
            (
                DeviceKind::Vulkan,
                sweep(&|b| add_graph(v, b), Runner::Threaded),
            ),
        ],
        wide_adds: vec![
            (
                DeviceKind::Cpu,
                g(&wide_add_graph(h0, WIDE), Runner::Inline),
            ),
            (
                DeviceKind::Vulkan,
                g(&wide_add_graph(v, WIDE), Runner::Threaded),
            ),
        ],
        deferred: vec![(
            LinkClass::HostVulkan,
            g(&deferred_graph(v, BIG), Runner::Threaded),
        )],
    }
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-3 * b.abs().max(1.0)
}

fn same(a: Curve, b: Curve) -> bool {
    a.points().len() == b.points().len()
        && a.points()
            .iter()
            .zip(b.points())
            .all(|(x, y)| x.0 == y.0 && close(x.1, y.1))
}

/// Fitting the model to its own estimates gives back its figures, when
/// one of three passes ran 3x slow and one 2x fast.
#[test]
fn fits_recover_the_figures_that_made_the_times() {
    let truth = truth();
    let [a, b, slow] = [1.0, 0.5, 3.0].map(|x| pass(&truth, x, 0.0));
    let m = merge(slow, vec![a, b]);
    let got = fit::fit(&m, &Topology::default());
    let (i, th) = (got.runner(Runner::Inline), got.runner(Runner::Threaded));
    assert!(close(i.step_us, 0.7) && close(i.run_us, 2.5), "{i:?}");
    assert!(close(th.step_us, 11.0) && close(th.run_us, 40.0), "{th:?}");
    assert!(close(th.dispatch_us, 6.0), "{th:?}");
    let (hv, hh) = (
        truth.link(LinkClass::HostVulkan),
        truth.link(LinkClass::HostHost),
    );
    let l = got.link(LinkClass::HostVulkan);
    assert!(
        same(l.bandwidth, hv.bandwidth) && close(l.latency_us, 44.0),
        "{l:?}"
    );
    assert!(close(l.deferred_gbps, 20.0), "{l:?}");
    let l = got.link(LinkClass::HostHost);
    assert!(
        same(l.bandwidth, hh.bandwidth) && close(l.latency_us, 0.4),
        "{l:?}"
    );
    let (vk, cpu) = (
        truth.compute(DeviceKind::Vulkan),
        truth.compute(DeviceKind::Cpu),
    );
    let c = got.compute(DeviceKind::Vulkan);
    assert!(same(c.gbps, vk.gbps) && close(c.fixed_us, 70.0), "{c:?}");
    assert!(close(c.wide, 0.1), "{c:?}");
    let c = got.compute(DeviceKind::Cpu);
    assert!(same(c.gbps, cpu.gbps) && close(c.fixed_us, 0.2), "{c:?}");
    assert!(close(c.wide, 0.8), "{c:?}");
}

/// Where Vulkan's memory is the host's, a host-Vulkan copy is a memcpy:
/// its latency is the host-to-host one, however slow its smallest copy
/// (run on the threaded runner, whose step swings) came out, and the
/// bandwidth curve is still recovered.
#[test]
fn a_memcpy_links_latency_is_the_hosts_whatever_its_smallest_copy_took() {
    let mut truth = truth();
    truth.host_memory.insert(DeviceKind::Vulkan);
    let mut hv = truth.link(LinkClass::HostVulkan);
    hv.latency_us = truth.link(LinkClass::HostHost).latency_us;
    truth.set_link(LinkClass::HostVulkan, hv);
    let m = merge(pass(&truth, 1.0, 30.0), Vec::new());
    let mut base = Topology::default();
    base.host_memory.insert(DeviceKind::Vulkan);
    let got = fit::fit(&m, &base);
    let l = got.link(LinkClass::HostVulkan);
    assert!(
        close(l.latency_us, 0.4) && same(l.bandwidth, hv.bandwidth),
        "{l:?}"
    );
}
