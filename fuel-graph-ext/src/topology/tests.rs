//! Tests of topology files, routes, curves and the cost figures.

use super::*;

#[test]
fn route_table() {
    let t = Topology::default().with_peer(0, 1);
    let (c0, c1, c2) = (Device::cuda(0), Device::cuda(1), Device::cuda(2));
    let (v0, v1, h0, h1) = (
        Device::vulkan(0),
        Device::vulkan(1),
        Device::cpu(0),
        Device::cpu(1),
    );
    let staged = Route::Staged(Device::cpu(0));
    let table = [
        (h0, h1, Route::Direct),
        (h1, c0, Route::Direct),
        (c0, h1, Route::Direct),
        (v0, h0, Route::Direct),
        (h0, v1, Route::Direct),
        (c0, c0, Route::Direct),
        (v1, v1, Route::Direct),
        (c0, c1, Route::Direct),
        (c1, c0, Route::Direct),
        (c0, c2, staged),
        (c0, v0, staged),
        (v0, c0, staged),
        (v0, v1, staged),
    ];
    for (a, b, want) in table {
        assert_eq!(t.route(a, b), want, "{a} -> {b}");
    }
}

#[test]
fn file_round_trip_and_errors() {
    let t = Topology::parse(
        "peer cuda:0 cuda:1\nstaging cpu:1\nlink host-vulkan bandwidth=3 latency=40 # lavapipe\n",
    )
    .unwrap();
    assert!(t.has_peer(1, 0));
    assert_eq!(
        t.route(Device::vulkan(0), Device::cuda(0)),
        Route::Staged(Device::cpu(1))
    );
    assert_eq!(Topology::parse(&t.to_text()).unwrap(), t);
    assert!(Topology::parse("link warp bandwidth=1")
        .unwrap_err()
        .contains("unknown link class"));
    assert!(Topology::parse("peer cpu:0 cuda:1")
        .unwrap_err()
        .contains("two cuda devices"));
    let staged = t.transfer_us(Device::vulkan(0), Device::cuda(0), 1 << 20);
    let direct = t.transfer_us(Device::vulkan(0), Device::cpu(1), 1 << 20);
    assert!(staged > direct);
}

#[test]
fn the_host_core_count_round_trips_and_defaults_to_none() {
    assert_eq!(Topology::default().host_cores(), None);
    assert!(!Topology::default().to_text().contains("cores"));
    let t = Topology::parse("cores 2\ncores 2\n").unwrap();
    assert_eq!((t.host_cores(), t.handoff_cpu_us()), (Some(2), 0.0));
    assert!(t.to_text().contains("cores 2\n"));
    assert_eq!(Topology::parse(&t.to_text()).unwrap(), t);
    let h = Topology::parse("cores 16 handoff=12.5\n").unwrap();
    assert_eq!((h.host_cores(), h.handoff_cpu_us()), (Some(16), 12.5));
    assert_eq!(Topology::parse(&h.to_text()).unwrap(), h);
}

#[test]
fn host_kernels_imply_host_memory_and_round_trip() {
    let t = Topology::parse("host-kernels vulkan\ncores 2\n").unwrap();
    assert!(t.kernels_on_host_cores(DeviceKind::Vulkan));
    assert!(t.in_host_memory(DeviceKind::Vulkan));
    assert!(!t.kernels_on_host_cores(DeviceKind::Cuda));
    let text = t.to_text();
    assert!(
        text.contains("host-kernels vulkan") && !text.contains("host-memory"),
        "{text}"
    );
    assert_eq!(Topology::parse(&text).unwrap(), t);
    let e = Topology::parse("host-kernels cpu").unwrap_err().to_string();
    assert!(e.contains("`host-kernels` takes cuda or vulkan"), "{e}");
}

#[test]
fn the_vulkan_view_alignment_is_read_written_and_checked() {
    let d = Topology::default();
    assert_eq!(d.view_align(DeviceKind::Vulkan), Some(ASSUMED_VIEW_ALIGN));
    assert_eq!(d.view_align(DeviceKind::Cpu), Some(1));
    assert_eq!(d.view_align(DeviceKind::Cuda), None);
    assert!(!d.to_text().contains("view-align"));
    let t = Topology::parse("view-align vulkan 16\nview-align vulkan 16\n").unwrap();
    assert_eq!(t.view_align(DeviceKind::Vulkan), Some(16));
    assert!(t.to_text().contains("view-align vulkan 16\n"));
    assert_eq!(Topology::parse(&t.to_text()).unwrap(), t);
    for (bad, says) in [
        ("view-align cpu 4", "`view-align` takes vulkan"),
        ("view-align cuda 4", "`view-align` takes vulkan"),
        ("view-align vulkan 24", "a power of two up to 256"),
        ("view-align vulkan 512", "a power of two up to 256"),
        ("view-align vulkan 0", "a power of two up to 256"),
        ("view-align vulkan four", "a whole number of bytes"),
        (
            "view-align vulkan 4\nview-align vulkan 16",
            "line 1 set it to 4",
        ),
    ] {
        let e = Topology::parse(bad).unwrap_err().to_string();
        assert!(e.contains(says), "{bad}: {e}");
    }
}

#[test]
fn every_figure_round_trips() {
    let text = "staging cpu:2\npeer cuda:0 cuda:1\ndriver cpu\nhost-memory vulkan\nrunner inline step=0.25 run=1.5\nrunner threaded step=12 run=30 dispatch=1.5\nreduce vulkan 0.5 fixed=70\nlink host-vulkan bandwidth=6.5 latency=44 deferred=20\n";
    let t = Topology::parse(text).unwrap();
    assert_eq!(t.runner(Runner::Inline).step_us, 0.25);
    assert_eq!(t.runner(Runner::Threaded).run_us, 30.0);
    assert_eq!(t.runner(Runner::Threaded).dispatch_us, 1.5);
    assert!(t.in_host_memory(DeviceKind::Vulkan) && !t.in_host_memory(DeviceKind::Cuda));
    assert_eq!(t.compute(DeviceKind::Vulkan).fixed_us, 70.0);
    assert_eq!(t.link(LinkClass::HostVulkan).deferred_gbps, 20.0);
    // A link line without `deferred=` moves deferred copies at its bandwidth.
    let plain = Topology::parse("link host-cuda bandwidth=7").unwrap();
    assert_eq!(plain.link(LinkClass::HostCuda).deferred_gbps, 7.0);
    assert_eq!(Topology::parse(&t.to_text()).unwrap(), t);
    assert_eq!(
        Topology::parse(&Topology::default().to_text()).unwrap(),
        Topology::default().with_source(Source::File(None))
    );
}

#[test]
fn curves_interpolate_by_size_and_round_trip() {
    let t = Topology::parse("link host-host bandwidth=64K:30,1M:15,4M:11 latency=0.5\nreduce cpu 64K:40,4M:13 fixed=0.2\n").unwrap();
    let c = t.link(LinkClass::HostHost).bandwidth;
    assert_eq!(c.at(4096), 30.0);
    assert_eq!(c.at(64 << 10), 30.0);
    assert!((c.at(256 << 10) - 22.5).abs() < 1e-12);
    assert_eq!(c.at(4 << 20), 11.0);
    assert_eq!(c.at(16 << 20), 11.0);
    assert_eq!(c.to_string(), "64K:30,1M:15,4M:11");
    // Deferred copies default to the largest size's bandwidth.
    assert_eq!(t.link(LinkClass::HostHost).deferred_gbps, 11.0);
    assert_eq!(Topology::parse(&t.to_text()).unwrap(), t);
    for bad in ["4M:11,64K:30", "64K:0", "64K:30,", "64Q:3", "1M:inf"] {
        let e = Topology::parse(&format!("link host-host bandwidth={bad}")).unwrap_err();
        assert!(e.contains(&format!("bad bandwidth `{bad}`")), "{e}");
    }
}

#[test]
fn bad_figures_are_refused_naming_the_line() {
    let bad = [
        ("link host-host bandwidth=inf", "bad bandwidth `inf`"),
        ("link host-host bandwidth=NaN", "bad bandwidth `NaN`"),
        ("link host-host bandwidth=1e400", "bad bandwidth `1e400`"),
        ("link host-host latency=0", "bad latency `0`"),
        ("link host-host latency=-1", "bad latency `-1`"),
        ("link host-host deferred=0", "bad deferred bandwidth `0`"),
        ("reduce cpu 0", "bad reduce throughput `0`"),
        ("reduce cpu -3", "bad reduce throughput `-3`"),
        ("reduce cpu 3 fixed=inf", "bad fixed cost `inf`"),
        ("runner threaded step=0", "bad step cost `0`"),
        ("runner warp step=1", "unknown runner `warp`"),
        ("reduce tpu 5", "unknown device kind `tpu`"),
        ("driver tpu", "unknown device kind `tpu`"),
        ("driver vulkan", "vulkan has no collective driver"),
        ("cores 0", "bad core count `0`"),
        ("cores 2.5", "bad core count `2.5`"),
        ("cores -1", "bad core count `-1`"),
        ("cores 2 handoff=0", "bad hand-off CPU time `0`"),
        ("cores 2 spin=3", "expected handoff=US"),
    ];
    for (line, want) in bad {
        let e = Topology::parse(&format!("# first\n{line}\n")).unwrap_err();
        assert!(e.starts_with("topology line 2: "), "{line}: {e}");
        assert!(e.contains(want), "{line}: {e}");
        assert!(e.ends_with(&format!("  | {line}")), "{line}: {e}");
    }
}

#[test]
fn a_setting_may_repeat_but_not_change() {
    // The same value twice is harmless; so are lines setting different things.
    let t = Topology::parse("reduce cpu 20\nreduce cpu 20.0\nlink host-vulkan bandwidth=3\nlink host-vulkan latency=40\ndriver cpu\ndriver cpu\n").unwrap();
    assert_eq!(t.link(LinkClass::HostVulkan).latency_us, 40.0);
    let cases = [
        (
            "reduce cpu 20\nreduce cpu 25\n",
            "topology line 2: sets the cpu reduce throughput to 25, but line 1 set it to 20",
        ),
        (
            "staging cpu:1\n\nstaging cpu:2\n",
            "topology line 3: sets the staging device to cpu:2, but line 1 set it to cpu:1",
        ),
        (
            "link host-vulkan bandwidth=3\nlink host-vulkan latency=4 bandwidth=5\n",
            "topology line 2: sets the host-vulkan bandwidth to 5, but line 1 set it to 3",
        ),
        (
            "link host-host latency=1 latency=2\n",
            "topology line 1: sets the host-host latency to 2, but line 1 set it to 1",
        ),
        (
            "runner inline run=2\nrunner inline run=3\n",
            "topology line 2: sets the inline run cost to 3",
        ),
        (
            "cores 2\ncores 4\n",
            "topology line 2: sets the host's cores to 4, but line 1 set it to 2",
        ),
    ];
    for (text, want) in cases {
        let e = Topology::parse(text).unwrap_err();
        assert!(e.starts_with(want), "{text:?}: {e}");
        assert!(e.contains("keep one of the two lines"), "{e}");
    }
}

#[test]
fn process_link_defaults_parse_and_round_trip() {
    let d = Topology::default();
    assert_eq!(d.process_link(), LinkCost::new(12.0, 5.0));
    // The default writes no line, so existing files and caches keep their text.
    assert!(!d.to_text().contains("process"));
    let t = Topology::parse("process bandwidth=3 latency=0.5\nprocess latency=0.5\n").unwrap();
    assert_eq!(t.process_link(), LinkCost::new(3.0, 0.5));
    assert!(t.to_text().contains("process bandwidth=3 latency=0.5"));
    assert_eq!(
        Topology::parse(&t.to_text()).unwrap().process_link(),
        t.process_link()
    );
    let e = Topology::parse("process speed=3\n").unwrap_err();
    assert!(
        e.contains("`process` takes bandwidth=GBPS and latency=US"),
        "{e}"
    );
    let e = Topology::parse("process latency=0\n").unwrap_err();
    assert!(e.contains("bad latency `0`"), "{e}");
    let e = Topology::parse("process latency=1\nprocess latency=2\n").unwrap_err();
    assert!(
        e.contains("sets the process latency to 2, but line 1 set it to 1"),
        "{e}"
    );
}

/// A fold of more than two inputs is priced by default by the tensors it
/// moves (its inputs and its result) at the two-input fold's rate: four
/// inputs as 3.33 two-input inputs, not 4; one and two inputs per input.
/// A kind whose `wide=` says otherwise pays that per extra input, and a
/// topology file states it, reads it back and refuses what is not a share.
#[test]
fn a_wider_fold_is_priced_by_the_tensors_it_moves() {
    let mut c = ComputeCost {
        gbps: Curve::flat(10.0),
        fixed_us: 1.0,
        wide: WIDE_DEFAULT,
    };
    let per_input = 1e6 / 10e3;
    let priced = |c: &ComputeCost, inputs: usize, moved: f64| {
        let us = c.time_us(inputs, 1_000_000);
        assert!(
            (us - (1.0 + moved * per_input)).abs() < 1e-9,
            "wide {}, {inputs}: {us}",
            c.wide
        );
    };
    for (inputs, moved) in [
        (1, 1.0),
        (2, 2.0),
        (3, 8.0 / 3.0),
        (4, 10.0 / 3.0),
        (8, 6.0),
    ] {
        priced(&c, inputs, moved);
    }
    c.wide = 0.1;
    for (inputs, moved) in [(2, 2.0), (3, 2.1), (8, 2.6)] {
        priced(&c, inputs, moved);
    }
    let t = Topology::parse(
        "reduce vulkan 1 fixed=90 wide=0.05
",
    )
    .unwrap();
    assert_eq!(t.compute(DeviceKind::Vulkan).wide, 0.05);
    assert_eq!(Topology::parse(&t.to_text()).unwrap(), t);
    assert!(t.to_text().contains("reduce vulkan 1 fixed=90 wide=0.05\n"));
    // The default is not written.
    assert!(!Topology::default().to_text().contains("wide="));
    for bad in ["wide=1.5", "wide=-0.1", "wide=x"] {
        let e = Topology::parse(&format!("reduce vulkan 1 {bad}\n")).unwrap_err();
        assert!(
            e.contains("bad wide-fold cost") && e.contains("from 0 to 1"),
            "{e}"
        );
    }
}
