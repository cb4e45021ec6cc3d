//! `fuel-opt` against issue 38's hostile input, round three, in child
//! processes: classes 3 (unbounded commands: every count has a range
//! named in `--help` and in its error, and every command ends in bounded
//! time), 4 (topology files and calibration caches read by one reader with
//! the same limits, lines without figures and absurd figures refused), 5
//! (invisible characters in errors escaped) and 7 (a flag a mode does not
//! read is refused, never ignored). Class 6 (worlds that never hang) needs
//! `mpirun`: `scripts/mpi-check.sh` runs it, and the fingerprint and
//! flight recorder are unit-tested in `src/world_guard.rs`. Each attack
//! is one entry of a table, counted in `docs/testing.md`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod hostile_common;

use fuel_test_support::report::bench_once;
use hostile_common::{cmd, scratch};
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const CPU_PAIR: &str = "graph @g {\n  %0 = input \"a\" @cpu:0 : f32[4]\n  %1 = input \"b\" @cpu:1 : f32[4]\n  %2:2 = all_reduce.sum %0, %1 : f32[4]\n  return %2#0, %2#1\n}\n";

/// Runs `fuel-opt ARGS` and checks it ends with exit 2 within `limit`,
/// saying every one of `wants`, and never raw invisible characters.
fn refused_within(limit: Duration, c: &mut Command, wants: &[&str]) -> String {
    let t = Instant::now();
    let o: Output = c.output().unwrap();
    let took = t.elapsed();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(2), "{:?}: {err}", c.get_args());
    assert!(took < limit, "{:?} took {took:?}", c.get_args());
    assert!(!err.contains("panicked"), "{err}");
    for w in wants {
        assert!(err.contains(w), "{:?}: want {w:?} in:\n{err}", c.get_args());
    }
    err
}

fn refused(args: &[&str], wants: &[&str]) -> String {
    refused_within(Duration::from_secs(20), &mut cmd(args), wants)
}

#[test]
fn every_count_has_a_range_and_every_command_ends_in_bounded_time() {
    let svg = scratch("r3-plot");
    let attacks: &[(&[&str], &str)] = &[
        (
            &["plan", "2x[cpu:0..4294967295]"],
            "a process holds at most 1024 local devices in a plan",
        ),
        (&["plan", "2x[cpu:0..100000]"], "at most 1024 local devices"),
        (
            &["plan", "2097152x[cpu:0]"],
            "not a process count from 1 to 1048576",
        ),
        (
            &["plan", "[cpu:0]", "--processes", "0"],
            "--processes: `0` is not a process count: give a whole number from 1 to 1048576",
        ),
        (
            &["plan", "[cpu:0]", "--processes", "1..4294967296"],
            "--processes: `4294967296` is not a process count",
        ),
        (
            &["plan", "[cpu:0]", "--processes", "1M"],
            "--processes: `1M` is not a process count",
        ),
        (
            &["calibrate", "--iters", "1000000000"],
            "'--iters <ITERS>': 1000000000 is not in 1..=1000",
        ),
        (
            &["calibrate", "--passes", "18446744073709551615"],
            "'--passes <PASSES>': 18446744073709551615 is not in 1..=20",
        ),
        (
            &["calibrate", "--warmup", "18446744073709551615"],
            "'--warmup <WARMUP>': 18446744073709551615 is not in 0..=100",
        ),
        (&["calibrate", "--passes", "0"], "0 is not in 1..=20"),
        (
            &["demo", "--runs", "18446744073709551615"],
            "'--runs <RUNS>': 18446744073709551615 is not in 0..=10000",
        ),
        (
            &["demo", "--elements", "0"],
            "'--elements <ELEMENTS>': 0 is not in 1..=9223372036854775807",
        ),
        (
            &["bench", "--count", "0"],
            "'--count <COUNT>': 0 is not in 1..=10000",
        ),
        (&["bench", "--warmup=-1"], "for '--warmup <WARMUP>'"),
        (
            &["bench", "--world", "--world-timeout", "0"],
            "'--world-timeout <SECONDS>': 0 is not in 1..=86400",
        ),
    ];
    for (args, want) in attacks {
        refused(args, &[want]);
    }
    // The ranges are in --help.
    for (sub, want) in [
        ("calibrate", "Timed runs per calibration graph [1..=1000]"),
        ("bench", "Timed iterations per size [1..=10000]"),
        ("demo", "[0..=10000]"),
    ] {
        let o = cmd(&[sub, "--help"]).output().unwrap();
        let help = String::from_utf8_lossy(&o.stdout);
        assert!(help.contains(want), "{sub} --help: {help}");
    }
    // A plan at the largest world it takes ends quickly.
    let t = Instant::now();
    let o = cmd(&["plan", "1048576x[cpu:0..1023]"]).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(t.elapsed() < Duration::from_secs(20), "{:?}", t.elapsed());
    // A plot that cannot be written is an error, not "# plot: /dev/full".
    let full = refused(
        &bench_once("cpu:0,cpu:1", &["--plot", "/dev/full"]),
        &["--plot: cannot write /dev/full: No space left on device"],
    );
    assert!(!full.contains("# plot"), "{full}");
    let _ = std::fs::remove_dir_all(svg);
}

/// A calibration cache for the CPUs of this machine, written by
/// `fuel-opt calibrate` into `dir`; returns the file.
fn calibrated(dir: &std::path::Path) -> PathBuf {
    let o = cmd(&[
        "calibrate",
        "--devices",
        "cpu:0",
        "--iters",
        "1",
        "--warmup",
        "0",
        "--passes",
        "1",
    ])
    .env("FUEL_CACHE_DIR", dir)
    .output()
    .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let files: Vec<PathBuf> = std::fs::read_dir(dir.join("calibration"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    files[0].clone()
}

#[test]
fn topology_files_and_caches_have_one_reader_and_its_limits() {
    let dir = scratch("r3-files");
    let fir = dir.join("g.fir");
    std::fs::write(&fir, CPU_PAIR).unwrap();
    let lower = |topo: &std::path::Path| {
        cmd(&[
            fir.to_str().unwrap(),
            "--passes",
            "lower-collectives",
            "--topology",
            topo.to_str().unwrap(),
        ])
    };
    let topo = dir.join("t.topo");
    for (text, want) in [
        (
            "runner inline\n",
            "topology line 1: `runner inline` sets no figure",
        ),
        ("runner threaded\n", "`runner threaded` sets no figure"),
        ("link host-host\n", "`link host-host` sets no figure"),
        (
            "staging cpu:0\nprocess\n",
            "topology line 2: `process` sets no figure",
        ),
        (
            "link host-host bandwidth=1e-320\n",
            "bad bandwidth `1e-320`: out of range: a figure in GB/s lies between 1e-6 and 1e7",
        ),
        ("link host-host bandwidth=10000000000\n", "out of range"),
        (
            "link host-host latency=1e-9\n",
            "bad latency `1e-9`: out of range: a figure in microseconds",
        ),
        ("reduce cpu 4K:20,1M:1e-30\n", "bad reduce throughput"),
    ] {
        std::fs::write(&topo, text).unwrap();
        refused_within(Duration::from_secs(20), &mut lower(&topo), &[want]);
    }
    // 1.5 GB (sparse): refused from its size.
    std::fs::File::create(&topo)
        .and_then(|f| f.set_len(3 << 29))
        .unwrap();
    refused_within(
        Duration::from_secs(20),
        &mut lower(&topo),
        &[
            "topology `",
            "is 1610612736 bytes (1.5 GiB), more than the input limit of 268435456 bytes (256 MiB)",
        ],
    );

    // The cache: the same reader, the same limit; cut off mid-line it is
    // damaged, not read as far as it goes.
    let cache = dir.join("cache");
    let file = calibrated(&cache);
    let good = std::fs::read_to_string(&file).unwrap();
    let plain = |dir: &std::path::Path| {
        let mut c = cmd(&["-", "--passes", "lower-collectives"]);
        c.env("FUEL_CACHE_DIR", dir).stdin(Stdio::piped());
        c
    };
    let run = |c: &mut Command| {
        let mut child = c
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(CPU_PAIR.as_bytes())
            .unwrap();
        child.wait_with_output().unwrap()
    };
    let o = run(&mut plain(&cache));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let shown = file.display().to_string();
    for (text, want) in [
        (
            good[..good.len() - 3].to_string(),
            "is cut off: the file ends in the middle of it",
        ),
        (
            good.replacen("staging", "sta\0ging", 1),
            "is damaged: it has a NUL byte at byte",
        ),
    ] {
        std::fs::write(&file, text).unwrap();
        let o = run(&mut plain(&cache));
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert!(err.contains(&shown) && err.contains(want), "{err}");
        assert!(err.contains("run `fuel-opt calibrate --devices"), "{err}");
    }
    std::fs::File::create(&file)
        .and_then(|f| f.set_len(3 << 29))
        .unwrap();
    let o = run(&mut plain(&cache));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("is damaged: it is 1610612736 bytes, more than the limit of 268435456 bytes"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn invisible_characters_in_quoted_names_are_escaped() {
    let dir = scratch("r3-invisible");
    for (c, shown) in [
        ('\u{feff}', "\\u{feff}"),
        ('\u{200b}', "\\u{200b}"),
        ('\u{2028}', "\\u{2028}"),
        ('\u{00a0}', "\\u{a0}"),
        ('\u{e0041}', "\\u{e0041}"),
        ('\u{e000}', "\\u{e000}"),
    ] {
        // The same input name declared with two types: the error quotes it.
        let g = format!("graph @g {{\n  %0 = input \"a{c}b\" @cpu:0 : f32[4]\n  %1 = input \"a{c}b\" @cpu:1 : i32[4]\n  return %0, %1\n}}\n");
        let f = dir.join("n.fir");
        std::fs::write(&f, &g).unwrap();
        let err = refused(&[f.to_str().unwrap()], &[&format!("\"a{shown}b\"")]);
        assert!(!err.contains(c), "{:x}: {err:?}", c as u32);
        // And a bad op name that holds it (a space-like one ends the name).
        if c.is_whitespace() {
            continue;
        }
        let g = format!("graph @g {{\n  %0 = input \"a\" @cpu:0 : f32[4]\n  %1 = fr{c}ob %0 @cpu:0 : f32[4]\n  return %1\n}}\n");
        std::fs::write(&f, &g).unwrap();
        let err = refused(&[f.to_str().unwrap()], &[shown]);
        assert!(!err.contains(c), "{:x}: {err:?}", c as u32);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_flag_is_honoured_or_refused_never_ignored() {
    let dir = scratch("r3-flags");
    let fir = dir.join("g.fir");
    std::fs::write(&fir, CPU_PAIR).unwrap();
    let f = fir.to_str().unwrap();
    let attacks: &[(&[&str], &str)] = &[
        (
            &["demo", "--world", "--op", "prod"],
            "--op takes sum, max or min there, not prod",
        ),
        (&["demo", "--world", "--op", "mean"], "not mean"),
        (
            &["demo", "--world", "--algorithm", "ring"],
            "demo --world does not use --algorithm",
        ),
        (
            &["demo", "--world-timeout", "5"],
            "demo does not use --world-timeout",
        ),
        (
            &["bench", "--world", "--op", "max"],
            "bench --world does not use --op",
        ),
        (
            &["bench", "--world", "--algorithm", "ring"],
            "bench --world does not use --algorithm",
        ),
        (
            &["bench", "--world", "--plot", "p.svg"],
            "bench --world does not use --plot",
        ),
        (
            &["bench", "--calibrate", "--sizes", "1M"],
            "bench --calibrate does not use --sizes",
        ),
        (
            &["bench", "--calibrate", "--op", "max"],
            "bench --calibrate does not use --op",
        ),
        (
            &["bench", "--validate", "--algorithm", "ring"],
            "bench --validate does not use --algorithm",
        ),
        (
            &["bench", "--validate", "--plot", "x.svg"],
            "bench --validate does not use --plot",
        ),
        (
            &["bench", "--plot", "x.svg", "--algorithm", "ring"],
            "bench --plot does not use --algorithm",
        ),
        (&["bench", "--out", "t.topo"], "bench does not use --out"),
        (
            &["bench", "--combine", "off", "--combine-threshold", "8M"],
            "--combine off does not use --combine-threshold",
        ),
        (
            &["bench", "--world-timeout", "5"],
            "bench does not use --world-timeout",
        ),
        (
            &[f, "--dump-dir", "d"],
            "fuel-opt FILE without --passes does not use --dump-dir",
        ),
        (&[f, "--print-after-all"], "does not use --print-after-all"),
        (
            &[f, "--devices", "cpu:0"],
            "--devices chooses the devices --run opens; add --run or leave it out",
        ),
    ];
    for (args, want) in attacks {
        let mut c = cmd(args);
        c.current_dir(&dir);
        refused_within(Duration::from_secs(20), &mut c, &[want]);
    }
    // Nothing was written for a refused command.
    assert!(!dir.join("x.svg").exists() && !dir.join("d").exists() && !dir.join("t.topo").exists());
    // What a mode reads still works.
    let o = cmd(&[
        f,
        "--passes",
        "cse",
        "--dump-dir",
        dir.join("d").to_str().unwrap(),
    ])
    .output()
    .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let _ = std::fs::remove_dir_all(&dir);
}
