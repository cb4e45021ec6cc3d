//! Tests of [`super::bound`]: the worked example of the notes, each term
//! binding where it should, every collective's cut, a device no link
//! reaches, and the large-group path: its min cuts against every split
//! and the few splits it tried before them, on random groups, two
//! clusters and 32 devices.

use super::*;

fn d(s: &str) -> Device {
    s.parse().unwrap()
}

const M4: usize = 4 << 20;

#[test]
fn worked_example_binds_on_the_cut_around_vulkan() {
    // [cuda:0, vulkan:0, cpu:0], 4 MiB all-reduce, default figures but a
    // host memory too fast to bind: the Vulkan device's shard must leave
    // it over the host-vulkan link, at its deferred rate (15 GB/s) at
    // best. (Its reduced shard comes back as an import of the host's
    // buffer, which moves nothing.)
    let group = [d("cuda:0"), d("vulkan:0"), d("cpu:0")];
    let fast_host = Topology::parse("link host-host bandwidth=1000").unwrap();
    let b = bound(&Collective::AllReduce { bytes: M4 }, &group, &fast_host).unwrap();
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
fn bytes_staged_through_the_host_bind_a_mixed_group() {
    // The same group at the default figures: cuda:0's shard goes into
    // host memory and its result comes out of it (no other link reaches
    // it), and vulkan:0's shard goes into it (its result is an import):
    // 3 shards at twice the host-to-host figure (11 GB/s at 4 MiB), above
    // the cut's 280 us.
    let group = [d("cuda:0"), d("vulkan:0"), d("cpu:0")];
    let all_reduce = Collective::AllReduce { bytes: M4 };
    let b = bound(&all_reduce, &group, &Topology::default()).unwrap();
    assert!((b.us - 3.0 * M4 as f64 / 22e3).abs() < 1e-6, "{b}");
    assert!(
        b.to_string().contains("host memory: 12.6 MB over 22 GB/s"),
        "{b}"
    );
    // A Vulkan device whose memory is the host's writes and reads each
    // byte it sends there, and cuda:0 reads both other shards out of host
    // memory (a host fold of them first would write its result and read
    // cpu:0's shard too): 5 shards, what the star at cuda:0 moves.
    let igpu = Topology::parse("host-memory vulkan").unwrap();
    let b = bound(&all_reduce, &group, &igpu).unwrap();
    assert!((b.us - 5.0 * M4 as f64 / 22e3).abs() < 1e-6, "{b}");
    // A second CPU's shard is one more read for cuda:0, unless the host
    // driver folds the CPUs' shards (which the model counts no host
    // traffic for) and cuda:0 reads their sum: 6 shards, or 5.
    let four = [d("cuda:0"), d("vulkan:0"), d("cpu:0"), d("cpu:1")];
    let b = bound(&all_reduce, &four, &igpu).unwrap();
    assert!((b.us - 6.0 * M4 as f64 / 22e3).abs() < 1e-6, "{b}");
    let driven = Topology::parse("host-memory vulkan\ndriver cpu").unwrap();
    let b = bound(&all_reduce, &four, &driven).unwrap();
    assert!((b.us - 5.0 * M4 as f64 / 22e3).abs() < 1e-6, "{b}");
    // CUDA devices that are peers stage nothing between themselves: two
    // peers and a CPU stage the island's 2 shards, not 4.
    let peers = Topology::default().with_peer(0, 1);
    let group = [d("cuda:0"), d("cuda:1"), d("cpu:0")];
    let b = bound(&all_reduce, &group, &peers).unwrap();
    assert!((b.us - 2.0 * M4 as f64 / 22e3).abs() < 1e-6, "{b}");
    // The CUDA driver reaches every CUDA device: one island again.
    let driven = Topology::parse("driver cuda").unwrap();
    let b = bound(&all_reduce, &group, &driven).unwrap();
    assert!((b.us - 2.0 * M4 as f64 / 22e3).abs() < 1e-6, "{b}");
}

/// A host fold reads a `host-memory` GPU's mapped shard where it lies, so
/// such a shard costs its read (not a copy's write and read), and the fold
/// that reads them writes its result once.
#[test]
fn a_host_fold_reads_host_memory_shards_where_they_lie() {
    let all_reduce = Collective::AllReduce { bytes: M4 };
    // Folds too fast to bind.
    let igpu = Topology::parse("host-memory vulkan\nreduce cpu 1000\nreduce vulkan 1000").unwrap();
    // Every device in host memory: one fold reads 3 shards and writes 1,
    // and the Vulkan devices import its result (it was 6: two copies out).
    let lavapipe = [d("vulkan:0"), d("vulkan:1"), d("cpu:0")];
    let b = bound(&all_reduce, &lavapipe, &igpu).unwrap();
    assert!((b.us - 4.0 * M4 as f64 / 22e3).abs() < 1e-6, "{b}");
    // With a CUDA device: the host folds the 3 shards in host memory (4),
    // cuda:0 reads that sum (1) and writes the total back (1).
    let mixed = [d("cuda:0"), d("vulkan:0"), d("vulkan:1"), d("cpu:0")];
    let b = bound(&all_reduce, &mixed, &igpu).unwrap();
    assert!((b.us - 6.0 * M4 as f64 / 22e3).abs() < 1e-6, "{b}");
}

#[test]
fn an_all_to_alls_results_in_host_memory_are_each_written_once() {
    // [vulkan:0, vulkan:1, cpu:0], the Vulkan devices' memory the host's
    // (lavapipe): every rank takes a 1 MiB piece from each of the three,
    // so each of the three 3 MiB results is written once in host memory,
    // by whatever step, and as much is read: 6 results' bytes at twice
    // the host-to-host figure: 18 MiB. (Counting only the CPU's result
    // gave 6 MiB, under the staged count's 8: a bound 2.25x too low.)
    let group = [d("vulkan:0"), d("vulkan:1"), d("cpu:0")];
    let lavapipe = Topology::parse("host-memory vulkan").unwrap();
    let c = Collective::AllToAll {
        sends: vec![1 << 20; 9],
    };
    let b = bound(&c, &group, &lavapipe).unwrap();
    assert!(matches!(b.binding, Binding::Memory { .. }), "{b}");
    assert!((b.us - 6.0 * (3 << 20) as f64 / 22e3).abs() < 1e-6, "{b}");
    // A rank that takes one piece alone may view or import it: a result
    // written by nobody. Here vulkan:1 takes only its own piece.
    let c = Collective::AllToAll {
        sends: vec![
            1 << 20,
            0,
            1 << 20,
            1 << 20,
            1 << 20,
            1 << 20,
            1 << 20,
            0,
            1 << 20,
        ],
    };
    let b = bound(&c, &group, &lavapipe).unwrap();
    assert!((b.us - 2.0 * (6 << 20) as f64 / 22e3).abs() < 1e-6, "{b}");
}

#[test]
fn an_all_to_alls_own_pieces_in_host_memory_are_copied_into_its_result() {
    // [cuda:0, vulkan:0, cpu:0] at the default figures (a discrete Vulkan
    // device), 1 MiB pieces: the staged count has each GPU's 2 pieces out
    // and cuda:0's 2 pieces in (6 MiB). cpu:0's result is a buffer of its
    // own, into which some step copies cpu:0's own piece out of host
    // memory: 2 MiB more, which no crossing counts.
    let group = [d("cuda:0"), d("vulkan:0"), d("cpu:0")];
    let c = Collective::AllToAll {
        sends: vec![1 << 20; 9],
    };
    let memory = |c: &Collective| match bound(c, &group, &Topology::default()).unwrap() {
        Bound {
            binding: Binding::Memory { bytes, .. },
            ..
        } => bytes,
        b => panic!("expected host memory to bind: {b}"),
    };
    assert_eq!(memory(&c), (8 << 20) as f64);
    // A CPU rank that takes its own piece alone may view it: the 4 MiB of
    // the staged count alone.
    let mut sends = vec![1 << 20; 9];
    sends[2] = 0;
    sends[5] = 0;
    assert_eq!(memory(&Collective::AllToAll { sends }), (4 << 20) as f64);
}

#[test]
fn an_all_gathers_result_on_a_cpu_is_written_in_host_memory() {
    // [cuda:0, vulkan:0, cpu:0] at the default figures: cpu:0's result
    // (3 shards) is written there, and cuda:0 reads vulkan:0's and cpu:0's
    // shards out of it: 5 shards, where the staged count alone has 4.
    let group = [d("cuda:0"), d("vulkan:0"), d("cpu:0")];
    let gather = Collective::AllGather {
        shards: vec![M4; 3],
    };
    let b = bound(&gather, &group, &Topology::default()).unwrap();
    assert!((b.us - 5.0 * M4 as f64 / 22e3).abs() < 1e-6, "{b}");
    // [cpu:0, cuda:0]: cpu:0's shard can reach its result through cuda:0,
    // read once by the copy up, and the joined result written back: 2
    // shards written, 1 read (found by `bound_props`: 4 was above the
    // star at cuda:0).
    let pair = [d("cpu:0"), d("cuda:0")];
    let gather = Collective::AllGather {
        shards: vec![M4; 2],
    };
    let b = bound(&gather, &pair, &Topology::default()).unwrap();
    assert!((b.us - 3.0 * M4 as f64 / 22e3).abs() < 1e-6, "{b}");
    // No CPU in the group, so no result in host memory: the staged count,
    // each shard out (3) and cuda:0 reading the Vulkan devices' two.
    let gpus = [d("cuda:0"), d("vulkan:0"), d("vulkan:1")];
    let gather = Collective::AllGather {
        shards: vec![M4; 3],
    };
    let b = bound(&gather, &gpus, &Topology::default()).unwrap();
    assert!((b.us - 5.0 * M4 as f64 / 22e3).abs() < 1e-6, "{b}");
}

#[test]
fn cpus_are_bound_by_host_memory_unless_a_driver_moves_the_bytes() {
    // Host arenas share buffers, results included: no cut costs anything.
    // With folds fast enough not to bind, the fold reads 4 shards and
    // writes 1: 5 shards' bytes at twice the host-to-host figure (11 GB/s
    // at 4 MiB). The copies of the result to the other CPUs share its
    // buffer and count nothing.
    let group = [d("cpu:0"), d("cpu:1"), d("cpu:2"), d("cpu:3")];
    let all_reduce = Collective::AllReduce { bytes: M4 };
    let fast = Topology::parse("reduce cpu 1000").unwrap();
    let b = bound(&all_reduce, &group, &fast).unwrap();
    assert!(matches!(b.binding, Binding::Memory { .. }), "{b}");
    assert!((b.us - 5.0 * M4 as f64 / 22e3).abs() < 1e-6, "{b}");
    // With the host driver, its traffic is its own: the term is the
    // least of the memory's and the driver's ring (2(k-1) shards over the
    // host link, (k-1) folded), which costs more here.
    let driven = Topology::parse("driver cpu\nreduce cpu 1000").unwrap();
    let b = bound(&all_reduce, &group, &driven).unwrap();
    assert!((b.us - 5.0 * M4 as f64 / 22e3).abs() < 1e-6, "{b}");
    // At the default figures the one thread's folds bind: every shard is
    // an operand of a fold (4 shards at 14 GB/s, which a four-input fold
    // reads 4 / 3.33 = 1.2 times as fast as a two-input one), not only 3
    // of them.
    let b = bound(&all_reduce, &group, &Topology::default()).unwrap();
    assert!((b.us - 4.0 * M4 as f64 / (14e3 * 1.2)).abs() < 1e-6, "{b}");
    assert!(matches!(b.binding, Binding::Compute { .. }), "{b}");
    // A broadcast between CPUs shares the root's buffer: no host-memory
    // term (it read 3 copies' worth before host outputs shared).
    let broadcast = Collective::Broadcast { bytes: M4, root: 0 };
    let b = bound(&broadcast, &group, &Topology::default()).unwrap();
    assert!(!matches!(b.binding, Binding::Memory { .. }), "{b}");
    // An all-gather's result is written once and shared: 2 x 4 shards.
    let gather = Collective::AllGather {
        shards: vec![M4; 4],
    };
    let b = bound(&gather, &group, &Topology::default()).unwrap();
    assert!((b.us - 8.0 * M4 as f64 / 22e3).abs() < 1e-6, "{b}");
}

#[test]
fn a_driver_serves_only_all_reduce_so_other_bounds_ignore_it() {
    // The host driver runs all-reduces alone: every other collective over
    // CPUs moves its bytes by copies and folds in host memory whether or
    // not the topology declares the driver, so its bound is the same.
    // (It was once left without its host-memory term: a reduce-scatter
    // over 4 CPUs bound at its folds alone, 2.5x below the host memory's
    // count, and an all-gather's bound was 0.)
    let group = [d("cpu:0"), d("cpu:1"), d("cpu:2"), d("cpu:3")];
    let plain = Topology::parse("reduce cpu 1000").unwrap();
    let driven = Topology::parse("driver cpu\nreduce cpu 1000").unwrap();
    let cases = [
        Collective::ReduceScatter {
            bytes: M4,
            shares: vec![M4 / 4; 4],
        },
        Collective::AllGather {
            shards: vec![M4; 4],
        },
        Collective::AllToAll {
            sends: vec![M4 / 4; 16],
        },
    ];
    for c in &cases {
        let (a, b) = (
            bound(c, &group, &plain).unwrap(),
            bound(c, &group, &driven).unwrap(),
        );
        assert!(a.us > 0.0, "{c:?}: {a}");
        assert_eq!(a.us, b.us, "{c:?}: {a} against {b}");
        assert!(matches!(b.binding, Binding::Memory { .. }), "{c:?}: {b}");
    }
}

#[test]
fn host_memory_is_priced_at_the_size_of_its_traffic() {
    // The model prices host memory at half the run's traffic or more, so
    // a curve that falls with size is read there: 5 shards of 4 MiB
    // stream 10 MiB, past the 8 MiB point's 2 GB/s.
    let group = [d("cpu:0"), d("cpu:1"), d("cpu:2"), d("cpu:3")];
    let t = Topology::parse("link host-host bandwidth=4M:10,8M:2\nreduce cpu 1000").unwrap();
    let b = bound(&Collective::AllReduce { bytes: M4 }, &group, &t).unwrap();
    assert!((b.us - 5.0 * M4 as f64 / 4e3).abs() < 1e-6, "{b}");
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
    // Host memory too fast to bind (each device stages its bytes).
    let t = Topology::parse("link host-host bandwidth=100000").unwrap();
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

/// `group`'s network on the default topology with every link into a
/// Vulkan device cut.
fn without_links_into_vulkan(group: &[Device]) -> Network {
    let mut net = Network::new(group, &Topology::default(), (M4, M4), Vec::new());
    let vulkan = DeviceKind::ALL
        .iter()
        .position(|k| *k == DeviceKind::Vulkan)
        .unwrap();
    for from in &mut net.rates {
        from[vulkan] = [None, None];
    }
    net
}

#[test]
fn a_device_no_link_reaches_is_an_error_naming_it() {
    let group = [d("cuda:0"), d("vulkan:0")];
    let net = without_links_into_vulkan(&group);
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
fn a_device_no_link_reaches_in_a_large_group_is_an_error_naming_it() {
    // 19 CUDA devices and a Vulkan device, every link into it cut: the
    // max-flow path names it too, with no panic and no infinite figure.
    let mut group: Vec<Device> = (0..19).map(Device::cuda).collect();
    group.push(d("vulkan:0"));
    let net = without_links_into_vulkan(&group);
    let demand = terms::Demand::new(&Collective::AllReduce { bytes: M4 }, &group, &net).unwrap();
    assert_eq!(terms::large_splits(&net, &demand), Splits::MinCuts);
    let e = bound_on(&net, &Collective::AllReduce { bytes: M4 }, &group).unwrap_err();
    assert_eq!(
        e,
        BoundError::Unreachable {
            device: d("vulkan:0")
        }
    );
}

#[test]
fn a_large_group_tries_min_cuts_and_says_so() {
    let group: Vec<Device> = (0..20).map(Device::cuda).collect();
    let b = bound(
        &Collective::AllReduce { bytes: M4 },
        &group,
        &Topology::default(),
    )
    .unwrap();
    assert_eq!(b.splits, Splits::MinCuts);
    let text = b.to_string();
    assert!(
        text.contains(
            "[over 16 devices: splits from max-flow min cuts between every pair, plus single-device, all-but-one and per-kind cuts]"
        ),
        "{text}"
    );
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
        let net = Network::new(
            &group,
            &topo,
            (c.floor(), c.ceiling()),
            drivers_for(&c, &topo),
        );
        let demand = terms::Demand::new(&c, &group, &net).unwrap();
        let every = terms::cut_term(&net, &demand, Splits::Every).unwrap();
        let few = terms::cut_few(&net, &demand).unwrap();
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

/// The cut terms of `c` over `group` on `topo`: every split's, the
/// large-group path's (forced, whatever the group's size) and the few
/// splits' alone.
type Cuts = [Result<Option<terms::Cut>, BoundError>; 3];

fn three_cuts(c: &Collective, group: &[Device], topo: &Topology) -> Cuts {
    let net = Network::new(group, topo, (c.floor(), c.ceiling()), drivers_for(c, topo));
    let demand = terms::Demand::new(c, group, &net).unwrap();
    let every = if net.nodes() <= ENUMERATE_MAX {
        terms::cut_term(&net, &demand, Splits::Every)
    } else {
        Ok(None)
    };
    [
        every,
        terms::cut_term(&net, &demand, Splits::MinCuts),
        terms::cut_few(&net, &demand),
    ]
}

fn cut_us(x: &Result<Option<terms::Cut>, BoundError>) -> f64 {
    x.as_ref().unwrap().as_ref().map_or(0.0, |x| x.0)
}

/// `n` CUDA devices in two clusters, `cuda:0..half` and the rest, every
/// pair inside a cluster peers, and one peer link between them (from the
/// first cluster's last device to the second's first).
fn two_clusters(n: u32) -> (Vec<Device>, Topology) {
    let half = n / 2;
    let mut topo = Topology::default().with_peer(half - 1, half);
    for (lo, hi) in [(0, half), (half, n)] {
        for a in lo..hi {
            for b in a + 1..hi {
                topo = topo.with_peer(a, b);
            }
        }
    }
    ((0..n).map(Device::cuda).collect(), topo)
}

#[test]
fn min_cuts_find_a_cluster_the_few_splits_miss() {
    // Two clusters of 9 CUDA devices, an all-to-all of 64 KiB a pair. A
    // device alone needs 17 pieces and takes them in over a peer link
    // (100 GB/s); a cluster needs 81 and takes them in over the one peer
    // link between the clusters and the host: 8 x 25 + 100 GB/s with the
    // staging CPU outside it, or 100 + 25 (the CPU's one worker) with it
    // inside, the lesser.
    let (group, topo) = two_clusters(18);
    let piece = 64 << 10;
    let n = group.len();
    let c = Collective::AllToAll {
        sends: (0..n * n)
            .map(|i| if i / n == i % n { 0 } else { piece })
            .collect(),
    };
    let [_, flow, few] = three_cuts(&c, &group, &topo);
    let (flow, few) = (cut_us(&flow), cut_us(&few));
    assert!((few - 17.0 * piece as f64 / 100e3).abs() < 1e-6, "{few}");
    assert!((flow - 81.0 * piece as f64 / 125e3).abs() < 1e-6, "{flow}");
    assert!(flow > few, "{flow} <= {few}");
    let b = bound(&c, &group, &topo).unwrap();
    assert_eq!(b.splits, Splits::MinCuts);
    assert!((b.us - flow).abs() < 1e-9, "{b}");
    let Binding::Cut { side, .. } = &b.binding else {
        panic!("expected a cut, got {b}");
    };
    assert!(side == &group[..9] || side == &group[9..], "{b}");
    let text = b.to_string();
    assert!(
        text.contains("(9 devices)}: 5.3 MB over 125 GB/s)")
            && text.contains("splits from max-flow min cuts"),
        "{text}"
    );
}

#[test]
fn thirty_two_devices_are_cut_fast_and_no_looser_than_before() {
    // 32 devices of every kind, peers here and there, an all-gather of
    // shards all of different sizes: no two devices are twins, so every
    // ordered pair of devices gets its max-flow (992 of them).
    let mut topo = Topology::default();
    for (a, b) in [(0, 1), (1, 2), (2, 3), (4, 5), (5, 6), (0, 7), (8, 9)] {
        topo = topo.with_peer(a, b);
    }
    let group: Vec<Device> = (0..32u32)
        .map(|i| match i % 4 {
            0 | 1 => Device::cuda(i / 2),
            2 => Device::vulkan(i / 4),
            _ => Device::cpu(i / 4 + 1),
        })
        .collect();
    let c = Collective::AllGather {
        shards: (0..32).map(|i| 4096 * (i + 1)).collect(),
    };
    let start = std::time::Instant::now();
    let b = bound(&c, &group, &topo).unwrap();
    let took = start.elapsed();
    eprintln!("bound over 32 devices: {took:?}: {b}");
    assert_eq!(b.splits, Splits::MinCuts);
    let [_, flow, few] = three_cuts(&c, &group, &topo);
    assert!(cut_us(&flow) >= cut_us(&few), "{flow:?} < {few:?}");
    assert!(b.us >= cut_us(&flow), "{b}");
    // Loose, for an unoptimised build on a shared machine.
    assert!(took.as_secs_f64() < 2.0, "{took:?}");
    // Two clusters of 16 too.
    let (group, topo) = two_clusters(32);
    let n = group.len();
    let c = Collective::AllToAll {
        sends: vec![4096; n * n],
    };
    let [_, flow, few] = three_cuts(&c, &group, &topo);
    assert!(cut_us(&flow) > cut_us(&few), "{flow:?} <= {few:?}");
}

#[test]
fn larger_groups_cut_from_one_device_then_not_at_all() {
    // 48 devices no two of them twins: too many pairs for a max-flow each
    // (48 x 47 of them), so max-flows to and from one device only.
    let group: Vec<Device> = (0..48u32)
        .map(|i| match i % 3 {
            0 => Device::cuda(i / 3),
            1 => Device::vulkan(i / 3),
            _ => Device::cpu(i / 3 + 1),
        })
        .collect();
    let c = Collective::AllGather {
        shards: (0..48).map(|i| 4096 * (i + 1)).collect(),
    };
    let b = bound(&c, &group, &Topology::default()).unwrap();
    assert_eq!(b.splits, Splits::MinCutsFromOne);
    assert!(
        b.to_string().contains(
            "[over 16 devices: splits from max-flow min cuts to and from one device, plus"
        ),
        "{b}"
    );
    let net = Network::new(
        &group,
        &Topology::default(),
        (c.floor(), c.ceiling()),
        Vec::new(),
    );
    let demand = terms::Demand::new(&c, &group, &net).unwrap();
    let from_one = terms::cut_term(&net, &demand, Splits::MinCutsFromOne).unwrap();
    let few = terms::cut_few(&net, &demand).unwrap();
    assert!(cut_us(&Ok(from_one)) >= cut_us(&Ok(few)));
    // 1000 devices: no max-flow at all.
    let group: Vec<Device> = (0..1000u32)
        .map(|i| match i % 2 {
            0 => Device::cuda(i / 2),
            _ => Device::cpu(i / 2),
        })
        .collect();
    let b = bound(
        &Collective::AllReduce { bytes: M4 },
        &group,
        &Topology::default(),
    )
    .unwrap();
    assert_eq!(b.splits, Splits::Few);
    assert!(
        b.to_string().contains(
            "[over 16 devices, too many for max-flows: single-device, all-but-one and per-kind cuts only]"
        ),
        "{b}"
    );
}

mod random {
    //! The large-group path on random groups small enough to try every
    //! split: never above every split's term, never below the few splits'.
    use super::*;
    use proptest::prelude::*;

    /// 16 devices to draw from.
    fn pool() -> Vec<Device> {
        let mut out: Vec<Device> = (0..8).map(Device::cuda).collect();
        out.extend((0..4).map(Device::vulkan));
        out.extend((0..4).map(Device::cpu));
        out
    }

    fn topology(
        gbps: &[f64],
        deferred: &[f64],
        peers: &[(u32, u32)],
        staging: u32,
        driver: bool,
    ) -> Topology {
        let classes = ["host-host", "host-cuda", "host-vulkan", "cuda-peer"];
        let mut s = String::new();
        for ((class, g), d) in classes.iter().zip(gbps).zip(deferred) {
            s += &format!("link {class} bandwidth={g} latency=1 deferred={d}\n");
        }
        for (a, b) in peers.iter().filter(|(a, b)| a != b) {
            s += &format!("peer cuda:{a} cuda:{b}\n");
        }
        s += &format!("staging cpu:{staging}\n");
        if driver {
            s += "driver cuda\n";
        }
        Topology::parse(&s).unwrap()
    }

    fn collective(which: usize, n: usize, sizes: &[usize], root: usize) -> Collective {
        let size = |i: usize| sizes[i % sizes.len()];
        let root = root % n;
        match which {
            0 => Collective::AllReduce { bytes: size(0) },
            1 => Collective::Reduce {
                bytes: size(0),
                root,
            },
            2 => Collective::Broadcast {
                bytes: size(0),
                root,
            },
            3 => Collective::AllGather {
                shards: (0..n).map(size).collect(),
            },
            4 => Collective::ReduceScatter {
                bytes: size(0),
                shares: (0..n).map(size).collect(),
            },
            _ => Collective::AllToAll {
                sends: (0..n * n).map(|i| size(i * 7 + i / n)).collect(),
            },
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn min_cuts_lie_between_the_few_splits_and_every_split(
            picks in prop::sample::subsequence((0..16usize).collect::<Vec<_>>(), 6..=14),
            gbps in prop::collection::vec(1.0..500.0f64, 4),
            deferred in prop::collection::vec(1.0..500.0f64, 4),
            peers in prop::collection::vec((0..8u32, 0..8u32), 0..12),
            (staging, driver) in (0..6u32, any::<bool>()),
            (which, sizes, root) in (0..6usize, prop::collection::vec(0..(1usize << 22), 1..5), 0..14usize),
        ) {
            let pool = pool();
            let group: Vec<Device> = picks.iter().map(|i| pool[*i]).collect();
            let topo = topology(&gbps, &deferred, &peers, staging, driver);
            let c = collective(which, group.len(), &sizes, root);
            let [every, flow, few] = three_cuts(&c, &group, &topo);
            match (&every, &flow) {
                // A side that takes nothing in by the large path's count
                // takes nothing in by every split's.
                (Ok(_), Err(e)) => prop_assert!(false, "{c:?}: {e}"),
                (Err(_), _) => {}
                (Ok(_), Ok(_)) => {
                    let (every, flow, few) = (cut_us(&every), cut_us(&flow), cut_us(&few));
                    prop_assert!(flow <= every * (1.0 + 1e-12), "{c:?}: {flow} > {every}");
                    prop_assert!(flow >= few, "{c:?}: {flow} < {few}");
                }
            }
        }
    }
}
