//! Tests of [`super::bound`]: the worked example of the notes, each term
//! binding where it should, every collective's cut, a device no link
//! reaches, and the large-group path.

use super::*;

fn d(s: &str) -> Device {
    s.parse().unwrap()
}

const M4: usize = 4 << 20;

#[test]
fn worked_example_binds_on_the_cut_around_vulkan() {
    // [cuda:0, vulkan:0, cpu:0], 4 MiB all-reduce, default figures: the
    // Vulkan device's shard must leave it over the host-vulkan link, at its
    // deferred rate (15 GB/s) at best. (Its reduced shard comes back as an
    // import of the host's buffer, which moves nothing.)
    let group = [d("cuda:0"), d("vulkan:0"), d("cpu:0")];
    let b = bound(
        &Collective::AllReduce { bytes: M4 },
        &group,
        &Topology::default(),
    )
    .unwrap();
    let want = M4 as f64 / 15e3;
    assert!((b.us - want).abs() < 1e-6, "{b}");
    match &b.binding {
        Binding::Cut { side, .. } => assert_eq!(side, &[d("cuda:0"), d("cpu:0")]),
        other => panic!("expected a cut, got {other:?}"),
    }
    let text = b.to_string();
    assert!(
        text.contains("the cut {cuda:0, cpu:0}: 4.2 MB over 15 GB/s"),
        "{text}"
    );
    assert_eq!(b.splits, Splits::Every);
}

#[test]
fn cpus_are_bound_by_host_memory_unless_a_driver_moves_the_bytes() {
    // Host arenas share buffers: no cut costs anything. The fold reads 4
    // shards and writes 1, and 3 copies read and write the result: 11
    // shards' bytes at twice the host-to-host figure (11 GB/s at 4 MiB).
    let group = [d("cpu:0"), d("cpu:1"), d("cpu:2"), d("cpu:3")];
    let all_reduce = Collective::AllReduce { bytes: M4 };
    let b = bound(&all_reduce, &group, &Topology::default()).unwrap();
    assert!(matches!(b.binding, Binding::Memory { .. }), "{b}");
    assert!((b.us - 11.0 * M4 as f64 / 22e3).abs() < 1e-6, "{b}");
    // With the host driver, its traffic is its own: the term is the
    // least of the memory's and the driver's ring (2(k-1) shards over the
    // host link, (k-1) folded), which costs more here...
    let driven = Topology::parse("driver cpu").unwrap();
    let b = bound(&all_reduce, &group, &driven).unwrap();
    assert!((b.us - 11.0 * M4 as f64 / 22e3).abs() < 1e-6, "{b}");
    // ...and less over two CPUs that fold fast: 2 shards over the link
    // and one folded, against 5 shards in host memory.
    let fast = Topology::parse("driver cpu\nreduce cpu 1000").unwrap();
    let b = bound(&all_reduce, &group[..2], &fast).unwrap();
    let ring = 2.0 * M4 as f64 / 11e3 + M4 as f64 / 1000e3;
    assert!((b.us - ring).abs() < 1e-6, "{b}");
    assert_eq!(b.binding, Binding::HostDriver);
}

#[test]
fn small_messages_bind_on_latency() {
    let group = [d("cuda:0"), d("cuda:1")];
    let b = bound(
        &Collective::AllReduce { bytes: 64 },
        &group,
        &Topology::default(),
    )
    .unwrap();
    // cuda:0 -> cpu:0 -> cuda:1: the download may be deferred into a host
    // fold (no fixed cost), the upload is a real copy (10 us).
    assert!(matches!(b.binding, Binding::Latency { .. }), "{b}");
    assert!((b.us - 10.0).abs() < 1e-9, "{b}");
}

#[test]
fn every_collective_has_its_own_cut() {
    let t = Topology::default();
    let group = [d("cuda:0"), d("cuda:1")];
    let bw = 25e3; // host-cuda, bytes per microsecond
    let cases = [
        (Collective::AllReduce { bytes: M4 }, M4 as f64),
        (Collective::Reduce { bytes: M4, root: 1 }, M4 as f64),
        (Collective::Broadcast { bytes: M4, root: 0 }, M4 as f64),
        (
            Collective::AllGather {
                shards: vec![M4, 2 * M4],
            },
            2.0 * M4 as f64,
        ),
        (
            Collective::ReduceScatter {
                bytes: M4,
                shares: vec![M4 / 4, 3 * M4 / 4],
            },
            0.75 * M4 as f64,
        ),
        (
            Collective::AllToAll {
                sends: vec![0, M4, 3 * M4, 0],
            },
            3.0 * M4 as f64,
        ),
    ];
    for (c, bytes) in cases {
        let b = bound(&c, &group, &t).unwrap();
        // Each side of two CUDA devices without peers takes bytes in from
        // the host at 25 GB/s (the relay, on either side).
        assert!((b.us - bytes / bw).abs() < 1e-6, "{c:?}: {b}");
    }
}

#[test]
fn peers_raise_the_cut() {
    let group = [d("cuda:0"), d("cuda:1")];
    let t = Topology::default().with_peer(0, 1);
    let b = bound(&Collective::AllReduce { bytes: M4 }, &group, &t).unwrap();
    assert!((b.us - M4 as f64 / 100e3).abs() < 1e-6, "{b}");
}

#[test]
fn a_device_no_link_reaches_is_an_error_naming_it() {
    let group = [d("cuda:0"), d("vulkan:0")];
    let mut net = Network::new(&group, &Topology::default(), (M4, M4));
    // Cut every link into vulkan:0.
    let vulkan = DeviceKind::ALL
        .iter()
        .position(|k| *k == DeviceKind::Vulkan)
        .unwrap();
    for from in &mut net.rates {
        from[vulkan] = [None, None];
    }
    let e = bound_on(&net, &Collective::AllReduce { bytes: M4 }, &group).unwrap_err();
    assert_eq!(
        e,
        BoundError::Unreachable {
            device: d("vulkan:0")
        }
    );
    let text = e.to_string();
    assert!(
        text.contains("vulkan:0") && text.contains("infinite"),
        "{text}"
    );
}

#[test]
fn a_large_group_tries_few_splits_and_says_so() {
    let group: Vec<Device> = (0..20).map(Device::cuda).collect();
    let b = bound(
        &Collective::AllReduce { bytes: M4 },
        &group,
        &Topology::default(),
    )
    .unwrap();
    assert_eq!(b.splits, Splits::Few);
    let text = b.to_string();
    assert!(text.contains("over 16 devices"), "{text}");
    // A large side is shortened.
    assert!(
        text.contains("cuda:1, cuda:2, cuda:3, ..., cuda:19 (19 devices)}"),
        "{text}"
    );
    assert!((b.us - M4 as f64 / 25e3).abs() < 1e-6, "{b}");
}

#[test]
fn shapes_that_do_not_fit_the_group_are_errors() {
    let group = [d("cpu:0"), d("cpu:1")];
    let e = bound(
        &Collective::AllGather { shards: vec![1] },
        &group,
        &Topology::default(),
    )
    .unwrap_err();
    assert!(matches!(e, BoundError::Shape(_)), "{e}");
}

#[test]
fn one_rank_needs_nothing() {
    let b = bound(
        &Collective::AllReduce { bytes: M4 },
        &[d("cuda:0")],
        &Topology::default(),
    )
    .unwrap();
    assert_eq!(b.binding, Binding::Nothing);
    assert_eq!(b.us, 0.0);
}

#[test]
fn the_few_splits_of_a_large_group_never_bound_above_every_split() {
    // The large-group path tries a subset of the splits and counts a
    // node's intake per kind: on groups small enough to try every split,
    // it must give no larger a cut term.
    let topo = Topology::default().with_peer(0, 1).with_peer(1, 2);
    let group: Vec<Device> = [
        "cuda:0", "cuda:1", "cuda:2", "vulkan:0", "vulkan:1", "cpu:1", "cpu:2", "cuda:3",
    ]
    .iter()
    .map(|s| d(s))
    .collect();
    let n = group.len();
    let cases = [
        Collective::AllReduce { bytes: M4 },
        Collective::Reduce { bytes: M4, root: 3 },
        Collective::Broadcast { bytes: M4, root: 5 },
        Collective::AllGather {
            shards: (1..=n).map(|i| i * 4096).collect(),
        },
        Collective::ReduceScatter {
            bytes: M4,
            shares: vec![M4 / n; n],
        },
        Collective::AllToAll {
            sends: (0..n * n).map(|i| (i % 5) * 1024).collect(),
        },
    ];
    for c in cases {
        let net = Network::new(&group, &topo, (c.floor(), c.ceiling()));
        let demand = terms::Demand::new(&c, &group, &net).unwrap();
        let every = terms::cut_term(&net, &demand, Splits::Every).unwrap();
        let few = terms::cut_term(&net, &demand, Splits::Few).unwrap();
        let us = |x: &Option<terms::Cut>| x.as_ref().map_or(0.0, |x| x.0);
        assert!(
            us(&few) <= us(&every) * (1.0 + 1e-12),
            "{c:?}: {} > {}",
            us(&few),
            us(&every)
        );
        assert!(us(&every) > 0.0, "{c:?}");
    }
}
