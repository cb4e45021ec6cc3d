//! Tests of the cost model: step prices, overlap, host memory and cores.

use super::*;

fn hop(from: Device, to: Device, bytes: usize, deps: &[usize]) -> Step {
    Step {
        kind: StepKind::Transfer {
            from,
            to,
            bytes,
            mode: CopyMode::Moves,
        },
        deps: deps.to_vec(),
    }
}

fn compute(device: Device, inputs: usize, bytes: usize, deps: &[usize]) -> Step {
    Step {
        kind: StepKind::Compute {
            device,
            inputs,
            bytes,
        },
        deps: deps.to_vec(),
    }
}

#[test]
fn chains_add_and_parallel_workers_overlap() {
    let t = Topology::default();
    let (h, c, c1) = (Device::cpu(0), Device::cuda(0), Device::cuda(1));
    let th = t.runner(Runner::Threaded);
    let one = t.transfer_us(h, c, 1000) + th.step_us;
    // Two dependent hops take twice as long as one.
    let chain = estimate(&t, &[hop(h, c, 1000, &[]), hop(c, h, 1000, &[0])]);
    assert!((chain.critical_path_us - 2.0 * one).abs() < 1e-9);
    assert_eq!(chain.transfers, 2);
    // Independent hops into different devices overlap on their
    // workers; the dispatcher starts them one after the other.
    let par = estimate(&t, &[hop(h, c, 1000, &[]), hop(h, c1, 1000, &[])]);
    assert!((par.critical_path_us - one).abs() < 1e-9);
    assert!((par.dispatcher_us - 2.0 * th.dispatch_us).abs() < 1e-9);
    assert!((par.total_us() - one - 2.0 * th.dispatch_us).abs() < 1e-9);
    // Two into one device queue on its worker: its work is their work
    // without the hand-offs.
    let same = estimate(&t, &[hop(h, c, 1000, &[]), hop(h, c, 1000, &[])]);
    let work = t.transfer_us(h, c, 1000);
    assert!((same.busiest_us - 2.0 * work).abs() < 1e-9, "{same:?}");
}

/// An all-host run is the sum of its steps (one caller's thread), unless
/// the bytes it streams through host memory, at the figure for a run that
/// size, take longer: three 1 MiB steps stream 4 MiB, past the caches the
/// default figures assume for one 1 MiB tensor.
#[test]
fn an_all_host_run_is_the_sum_of_its_steps_or_its_memory_traffic() {
    let t = Topology::default();
    let (a, b, c) = (Device::cpu(0), Device::cpu(1), Device::cpu(2));
    let run = |bytes: usize| {
        let steps = [
            hop(b, a, bytes, &[]),
            hop(c, a, bytes, &[]),
            compute(a, 3, bytes, &[0, 1]),
        ];
        assert_eq!(runner_of(&steps), Runner::Inline);
        let sum: f64 = steps
            .iter()
            .map(|s| step_us(&t, Runner::Inline, &s.kind, bytes))
            .sum();
        // Each copy reads and writes its bytes; the fold reads three and
        // writes one.
        let traffic = (2 * 2 * bytes + 4 * bytes) as f64;
        let hh = t.link(LinkClass::HostHost).bandwidth;
        let memory = traffic / (2.0 * hh.at(traffic as usize / 2) * 1e3);
        (estimate(&t, &steps).total_us(), sum, memory)
    };
    let (small, sum, memory) = run(4 << 10);
    assert!(
        memory < sum && (small - sum).abs() < 1e-9,
        "{small} {sum} {memory}"
    );
    let (large, sum, memory) = run(1 << 20);
    assert!(
        memory > sum && (large - memory).abs() < 1e-9,
        "{large} {sum} {memory}"
    );
}

#[test]
fn shared_and_deferred_copies_move_no_copy_of_their_own() {
    let t = Topology::default();
    let (h, h1, v) = (Device::cpu(0), Device::cpu(1), Device::vulkan(0));
    let bytes = 1 << 20;
    let with = |mode| StepKind::Transfer {
        from: v,
        to: h,
        bytes,
        mode,
    };
    let moved = step_us(&t, Runner::Threaded, &with(CopyMode::Moves), bytes);
    let deferred = step_us(&t, Runner::Threaded, &with(CopyMode::Deferred), bytes);
    let link = t.link(LinkClass::HostVulkan);
    assert!((deferred - link.deferred_us(bytes)).abs() < 1e-9);
    assert!(moved > deferred + link.latency_us);
    let shared = StepKind::Transfer {
        from: h1,
        to: h,
        bytes,
        mode: CopyMode::Shared,
    };
    assert_eq!(
        step_us(&t, Runner::Inline, &shared, bytes),
        t.runner(Runner::Inline).step_us
    );
    let e = estimate(
        &t,
        &[Step {
            kind: shared,
            deps: vec![],
        }],
    );
    assert_eq!((e.transfers, e.bytes_moved), (1, 0));
}

/// A concat on a GPU is a region copy: priced at the device's copy
/// figures (host-to-host where its memory is the host's) plus one
/// submission, never at its fold throughput; it is not a hop.
#[test]
fn layout_on_a_gpu_is_a_copy_not_a_fold() {
    let mut t = Topology::default();
    let (v, bytes) = (Device::vulkan(0), 1 << 20);
    let layout = StepKind::layout(v, bytes);
    let fold = StepKind::Compute {
        device: v,
        inputs: 1,
        bytes,
    };
    let us = |t: &Topology, k: &StepKind| step_us(t, Runner::Threaded, k, bytes);
    let step = t.runner(Runner::Threaded).step_us;
    let fixed = t.compute(DeviceKind::Vulkan).fixed_us;
    let same = t.link(LinkClass::SameDevice).time_us_at(bytes, bytes);
    assert!((us(&t, &layout) - (same + fixed + step)).abs() < 1e-9);
    assert!(
        us(&t, &layout) * 10.0 < us(&t, &fold),
        "lavapipe-like folds are slow"
    );
    t.host_memory.insert(DeviceKind::Vulkan);
    let hh = t.link(LinkClass::HostHost).time_us_at(bytes, bytes);
    assert!((us(&t, &layout) - (hh + fixed + step)).abs() < 1e-9);
    let e = estimate(
        &t,
        &[Step {
            kind: layout,
            deps: vec![],
        }],
    );
    assert_eq!((e.transfers, e.bytes_moved), (0, 0));
    // On a CPU it stays a host kernel.
    assert!(matches!(
        StepKind::layout(Device::cpu(0), 8),
        StepKind::Compute { .. }
    ));
}

/// `n` independent two-input folds of `bytes` on `cpus` CPUs in turn, and
/// a CUDA input, which puts them on the threaded runner.
fn host_folds_and_a_cuda_input(n: u32, cpus: u32, bytes: usize) -> Vec<Step> {
    (0..n)
        .map(|i| compute(Device::cpu(i % cpus), 2, bytes, &[]))
        .chain(std::iter::once(Step {
            kind: StepKind::Input {
                device: Device::cuda(0),
                bytes: 4,
                in_place: false,
            },
            deps: vec![],
        }))
        .collect()
}

/// With a core count, the threaded runner's host work is spread over the
/// cores: each worker step's own work where its device is the host's, the
/// CPU part of every hand-off, and the dispatcher's starts. Six host folds
/// and a CUDA input on two cores.
#[test]
fn host_work_shares_the_cores() {
    let mut t = Topology::default();
    // Host memory fast enough not to be the bound: this is the cores'.
    let mut hh = t.link(LinkClass::HostHost);
    hh.bandwidth = fuel_graph_ext::topology::Curve::flat(1000.0);
    t.set_link(LinkClass::HostHost, hh);
    let bytes = 128 << 10;
    let steps = host_folds_and_a_cuda_input(6, 6, bytes);
    assert_eq!(runner_of(&steps), Runner::Threaded);
    let free = estimate(&t, &steps);
    t.set_host_cores(Some(2));
    t.set_handoff_cpu_us(10.0);
    let two = estimate(&t, &steps);
    let th = t.runner(Runner::Threaded);
    let fold = step_us(&t, Runner::Threaded, &steps[0].kind, bytes) - th.step_us;
    // The CUDA input's transfer is the GPU's: only its hand-off counts.
    let want = (6.0 * fold + 7.0 * 10.0 + 7.0 * th.dispatch_us) / 2.0;
    assert!(want > free.busiest_us, "{free:?}");
    assert!((two.busiest_us - want).abs() < 1e-6, "{two:?}, want {want}");
    assert!(two.total_us() > free.total_us(), "{free:?} then {two:?}");
    // Enough cores, and the bound is gone.
    t.set_host_cores(Some(64));
    assert_eq!(estimate(&t, &steps), free);
}

/// A kernel of a `host-kernels` kind (lavapipe) had every core when it
/// was measured alone, so two of them side by side on two devices take
/// turns: in the cores bound each streams once per core, while its fixed
/// part (a submission and the wake-ups to its fence, mostly waiting)
/// counts once.
#[test]
fn kernels_run_by_the_host_cores_count_once_per_core() {
    let mut t = Topology::default();
    t.host_memory.insert(DeviceKind::Vulkan);
    t.set_host_cores(Some(2));
    let bytes = 1 << 20;
    let steps = [
        compute(Device::vulkan(0), 2, bytes, &[]),
        compute(Device::vulkan(1), 2, bytes, &[]),
    ];
    let fold =
        step_us(&t, Runner::Threaded, &steps[0].kind, bytes) - t.runner(Runner::Threaded).step_us;
    let apart = estimate(&t, &steps);
    // Host memory only: each fold's own time over the two cores.
    assert!(apart.busiest_us < 1.5 * fold, "{apart:?}, fold {fold}");
    t.host_kernels.insert(DeviceKind::Vulkan);
    let shared = estimate(&t, &steps);
    let th = t.runner(Runner::Threaded);
    let fixed = t.compute(DeviceKind::Vulkan).fixed_us;
    assert!(fixed > 0.0 && fixed < fold);
    let each = fixed + 2.0 * (fold - fixed);
    let want = (2.0 * each + 2.0 * (t.handoff_cpu_us() + th.dispatch_us)) / 2.0;
    assert!(
        (shared.busiest_us - want).abs() < 1e-6,
        "{shared:?}, want {want}"
    );
    assert!(shared.total_us() >= 2.0 * fold - fixed, "{shared:?}");
    // A copy on such a device is one thread's memcpy: counted once.
    let copy = [Step {
        kind: StepKind::layout(Device::vulkan(0), bytes),
        deps: vec![],
    }];
    let mut plain = t.clone();
    plain.host_kernels.clear();
    assert_eq!(estimate(&t, &copy), estimate(&plain, &copy));
}

#[test]
fn host_memory_is_shared_by_every_worker() {
    // Two host folds on two workers do not overlap past host memory.
    let mut t = Topology::default();
    t.set_compute(
        DeviceKind::Cpu,
        fuel_graph_ext::topology::ComputeCost {
            gbps: fuel_graph_ext::topology::Curve::flat(1000.0),
            fixed_us: 0.1,
            wide: fuel_graph_ext::topology::WIDE_DEFAULT,
        },
    );
    let bytes = 8 << 20;
    let steps = [
        compute(Device::cpu(0), 2, bytes, &[]),
        compute(Device::cpu(1), 2, bytes, &[]),
        Step {
            kind: StepKind::Input {
                device: Device::vulkan(0),
                bytes: 4,
                in_place: false,
            },
            deps: vec![],
        },
    ];
    let e = estimate(&t, &steps);
    let hh = t.link(LinkClass::HostHost).bandwidth;
    // At the size the run streams: half its traffic (each byte written
    // once and read once), here more than its largest tensor.
    let traffic = (2 * 3 * bytes + 4) as f64;
    let memory = traffic / (2.0 * hh.at(traffic as usize / 2) * 1e3);
    assert!((e.busiest_us - memory).abs() < 1e-6, "{e:?}");
    assert!(e.busiest_us > e.critical_path_us);
}

/// Many small host folds that together stream more than the caches hold
/// run at the larger size's figure: the memory bound looks the host-to-host
/// bandwidth up at half the run's traffic, not at its largest tensor.
#[test]
fn host_memory_runs_at_the_size_the_whole_run_streams() {
    let t = Topology::default();
    let bytes = 256 << 10;
    let steps = host_folds_and_a_cuda_input(16, 4, bytes);
    let e = estimate(&t, &steps);
    let hh = t.link(LinkClass::HostHost).bandwidth;
    let traffic = (16 * 3 * bytes + 4) as f64;
    let want = traffic / (2.0 * hh.at(traffic as usize / 2) * 1e3);
    let per_tensor = traffic / (2.0 * hh.at(bytes) * 1e3);
    assert!(want > 1.5 * per_tensor, "{want} {per_tensor}");
    assert!((e.busiest_us - want).abs() < 1e-6, "{e:?}, want {want}");
}

#[test]
fn huge_steps_on_host_memory_do_not_overflow() {
    // A verified type may take up to 2^63 - 1 bytes; a fold of several
    // such operands on a device in host memory sums past usize (found
    // by fuel-opt's property test). The estimate saturates instead.
    let mut t = Topology::default();
    t.host_memory.insert(DeviceKind::Vulkan);
    let (h, v) = (Device::cpu(0), Device::vulkan(0));
    let huge = 1usize << 62;
    let steps = [
        compute(v, 4, huge, &[]),
        hop(h, v, huge, &[]),
        Step {
            kind: StepKind::Input {
                device: v,
                bytes: huge,
                in_place: false,
            },
            deps: vec![],
        },
    ];
    let e = estimate(&t, &steps);
    assert!(e.total_us().is_finite() && e.total_us() > 0.0, "{e:?}");
}

#[test]
fn size_and_compute_matter() {
    let t = Topology::default();
    let (h, v) = (Device::cpu(0), Device::vulkan(0));
    let small = estimate(&t, &[hop(v, h, 64, &[])]).total_us();
    let big = estimate(&t, &[hop(v, h, 1 << 20, &[])]).total_us();
    assert!(big > small);
    let on_vulkan = estimate(&t, &[compute(v, 4, 1 << 20, &[])]).total_us();
    let on_cpu = estimate(&t, &[compute(h, 4, 1 << 20, &[])]).total_us();
    assert!(
        on_vulkan > on_cpu,
        "default vulkan reduce is slower than cpu"
    );
}

/// The runner follows the executor's rule: a Vulkan input read in place,
/// a deferred hop to the host and a shared (imported) hop back leave no
/// GPU worker any work, so the steps run inline; an uploaded input, a
/// kernel on the GPU or a hop that moves bytes to it make them threaded.
#[test]
fn gpu_steps_that_are_the_runners_own_run_inline() {
    let (h, v) = (Device::cpu(0), Device::vulkan(0));
    let input = |in_place| Step {
        kind: StepKind::Input {
            device: v,
            bytes: 1 << 20,
            in_place,
        },
        deps: vec![],
    };
    let shared_back = Step {
        kind: StepKind::Transfer {
            from: h,
            to: v,
            bytes: 0,
            mode: CopyMode::Shared,
        },
        deps: vec![],
    };
    let star = vec![
        input(true),
        hop(v, h, 1 << 20, &[0]),
        compute(h, 2, 1 << 20, &[1]),
        shared_back.clone(),
    ];
    assert_eq!(runner_of(&star), Runner::Inline);
    let mut uploaded = star.clone();
    uploaded[0] = input(false);
    assert_eq!(runner_of(&uploaded), Runner::Threaded);
    let mut folded_there = star.clone();
    folded_there.push(compute(v, 2, 1 << 20, &[]));
    assert_eq!(runner_of(&folded_there), Runner::Threaded);
    let mut moved_back = star;
    moved_back[3] = hop(h, v, 1 << 20, &[]);
    assert_eq!(runner_of(&moved_back), Runner::Threaded);
}

/// A host output the runner copies out after the run (its buffer lent to
/// imports) is a memcpy on the dispatcher's thread: it costs its bytes at
/// the host-to-host figures, not a worker's hand-off, and one written in
/// place costs nothing. (Like every read-back under the threaded runner it
/// counts on the critical path and in the dispatcher's work.)
#[test]
fn a_host_output_copied_out_is_a_memcpy_not_a_worker_step() {
    let mut t = Topology::default();
    let mut th = t.runner(Runner::Threaded);
    th.step_us = 50.0;
    t.set_runner(Runner::Threaded, th);
    let (h, v) = (Device::cpu(0), Device::vulkan(0));
    let bytes = 1 << 16;
    let out = |copied_out| Step {
        kind: StepKind::Output {
            device: h,
            bytes,
            copied_out,
        },
        deps: vec![0],
    };
    let memcpy = t.link(LinkClass::HostHost).time_us_at(bytes, bytes);
    let base = estimate_with(&t, Runner::Threaded, &[compute(v, 2, bytes, &[])]);
    for (copied, extra) in [(true, 2.0 * memcpy), (false, 0.0)] {
        let e = estimate_with(
            &t,
            Runner::Threaded,
            &[compute(v, 2, bytes, &[]), out(copied)],
        );
        let grew = e.total_us() - base.total_us();
        assert!(
            (grew - extra).abs() < 1e-9,
            "copied {copied}: {grew} vs {extra}"
        );
        assert!(grew < t.runner(Runner::Threaded).step_us, "no hand-off");
    }
}

/// A copy into the host read only by a concat is deferred into it
/// (`plan::SoleReader::Join`): priced as the copy that lands it in its
/// place, while the concat copies only its own operand, and the run's
/// working size is still the concat's whole result.
#[test]
fn a_concat_prices_its_deferred_operands_once() {
    let t = Topology::default();
    let (h, v) = (Device::cpu(0), Device::vulkan(0));
    let src = "graph @g {\n  %0 = input \"a\" @vulkan:0 : f32[1024]\n  %1 = input \"b\" @cpu:0 : f32[1024]\n  %2 = copy %0 -> cpu:0 : f32[1024]\n  %3 = concat %2, %1 {axis=0} @cpu:0 : f32[2048]\n  return %3\n}\n";
    let g = fuel_graph_ext::text::parse(src).unwrap();
    let plan = price::plan_for(&g, &t).unwrap();
    let steps = price::plan_steps(&plan, &t, &std::collections::BTreeSet::new(), false);
    let kinds: Vec<StepKind> = steps.iter().map(|s| s.kind).collect();
    assert_eq!(
        kinds,
        [
            StepKind::Transfer {
                from: v,
                to: h,
                bytes: 4096,
                mode: CopyMode::Moves
            },
            StepKind::Join {
                device: h,
                bytes: 8192,
                copied: 4096
            }
        ]
    );
    assert_eq!(working_bytes(&steps), 8192);
    // Without deferral: a copy, then a concat that copies both operands.
    let plain = fuel_graph_ext::plan::Options {
        defer_gpu_copies: false,
        ..Default::default()
    };
    let plan = price::plan_for_with(&g, &t, &plain).unwrap();
    let steps = price::plan_steps(&plan, &t, &std::collections::BTreeSet::new(), false);
    assert_eq!(steps[1].kind, StepKind::layout(h, 8192));
}

/// A Vulkan fold uploads a deferred first operand straight into its
/// result (`plan::SoleReader::Fold { first: true }`): priced as the plain
/// copy the runtime makes, with no launch. A deferred operand in a later
/// place goes into scratch and costs a launch of its own, so a fold whose
/// received partial comes first (a ring step) costs one launch less than
/// one whose own piece comes first.
#[test]
fn a_vulkan_fold_uploads_its_first_operand_without_a_launch() {
    let t = Topology::default();
    let (h, v) = (Device::cpu(0), Device::vulkan(0));
    let priced = |operands: &str| {
        let src = format!("graph @g {{\n  %0 = input \"a\" @cpu:0 : f32[1024]\n  %1 = input \"b\" @vulkan:0 : f32[1024]\n  %2 = copy %0 -> vulkan:0 : f32[1024]\n  %3 = add {operands} @vulkan:0 : f32[1024]\n  return %3\n}}\n");
        let g = fuel_graph_ext::text::parse(&src).unwrap();
        let plan = price::plan_for(&g, &t).unwrap();
        let steps = price::plan_steps(&plan, &t, &std::collections::BTreeSet::new(), false);
        let kinds: Vec<StepKind> = steps.iter().map(|s| s.kind).collect();
        let us: f64 = kinds
            .iter()
            .map(|k| step_us(&t, Runner::Threaded, k, 4096))
            .sum();
        (kinds, us)
    };
    let upload = |mode| StepKind::Transfer {
        from: h,
        to: v,
        bytes: 4096,
        mode,
    };
    let (first, first_us) = priced("%2, %1");
    assert_eq!(first[0], upload(CopyMode::Moves));
    let (later, later_us) = priced("%1, %2");
    assert_eq!(later[0], upload(CopyMode::Deferred));
    let launch = t.compute(DeviceKind::Vulkan).fixed_us;
    assert!(
        later_us - first_us > 0.5 * launch,
        "first {first_us} us, later {later_us} us, a launch {launch} us"
    );
}

/// A deferred copy adds no hand-off to its price ([`step_us`]), so its
/// worker is busy for all of it. Its worker's load once left out a step's
/// hand-off it never had, and two deferred pieces into one CPU then cost
/// less than their bytes over the link (`bound_props` found it).
#[test]
fn a_deferred_copy_keeps_its_worker_busy_for_all_of_its_time() {
    let mut t = Topology::default();
    let threaded = t.runner(Runner::Threaded);
    t.set_runner(
        Runner::Threaded,
        fuel_graph_ext::topology::RunnerCost {
            step_us: 50.0,
            ..threaded
        },
    );
    let (h, c) = (Device::cpu(0), Device::cuda(0));
    let bytes = 1 << 20;
    let deferred = StepKind::Transfer {
        from: c,
        to: h,
        bytes,
        mode: CopyMode::Deferred,
    };
    let us = step_us(&t, Runner::Threaded, &deferred, bytes);
    let mut tally = Tally::new(&t, Runner::Threaded, bytes);
    tally.add(&deferred, 0.0);
    tally.add(&deferred, 0.0);
    let worker = tally
        .loads()
        .into_iter()
        .find(|(l, _)| *l == Load::Worker(h))
        .map(|(_, us)| us);
    assert_eq!(worker, Some(2.0 * us));
}

/// A host fold reads a mapped `host-memory` operand where it lies (the
/// runtime's `fold_where_they_lie`), so a copy deferred into it from such
/// a device writes nothing in host memory; from a CUDA device it is a
/// download into scratch, written there before the fold reads it.
#[test]
fn a_deferred_copy_from_host_memory_into_a_host_fold_writes_nothing() {
    let t = Topology::parse("host-memory vulkan\n").unwrap();
    let deferred = |from| StepKind::Transfer {
        from,
        to: Device::cpu(0),
        bytes: 4096,
        mode: CopyMode::Deferred,
    };
    let mapped = placement(&t, Runner::Threaded, &deferred(Device::vulkan(0)));
    assert_eq!(mapped, (Resource::Worker(Device::cpu(0)), 0));
    let downloaded = placement(&t, Runner::Threaded, &deferred(Device::cuda(0)));
    assert_eq!(downloaded, (Resource::Worker(Device::cpu(0)), 4096));
    // Where Vulkan keeps its own memory, its deferred bytes land too.
    let discrete = placement(
        &Topology::default(),
        Runner::Threaded,
        &deferred(Device::vulkan(0)),
    );
    assert_eq!(discrete.1, 4096);
}
