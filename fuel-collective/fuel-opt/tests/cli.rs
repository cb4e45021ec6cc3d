//! fuel-opt as a user runs it: good input, and every kind of bad input,
//! which must exit non-zero with an error that names the problem.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::process::{Command, Output, Stdio};

fn fuel_opt(args: &[&str], stdin: Option<&str>) -> Output {
    fuel_opt_cached(args, stdin, &empty_cache())
}

/// [`fuel_opt`] with `cache` as the calibration cache folder.
fn fuel_opt_cached(args: &[&str], stdin: Option<&str>, cache: &std::path::Path) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_fuel-opt"));
    cmd.args(args)
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."));
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd.env_remove("FUEL_PRINT_AFTER")
        .env_remove("FUEL_DUMP_DIR")
        .env("FUEL_CACHE_DIR", cache);
    let mut child = cmd.spawn().unwrap();
    let input = stdin.unwrap_or("");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

/// A new calibration cache folder with nothing in it, so that no test
/// depends on what the machine running it, or another test, calibrated.
fn empty_cache() -> std::path::PathBuf {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let k = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let d = std::env::temp_dir().join(format!("fuel-cli-cache-{}-{k}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

const PIPELINE: &str = "insert-cross-device-copies,split-cross-vendor-copies,cse,dce";

#[test]
fn example_lowers_and_interprets_to_the_same_values() {
    let before = fuel_opt(&["examples/mixed.fir", "--interpret"], None);
    assert!(before.status.success(), "{}", text(&before.stderr));
    let after = fuel_opt(
        &["examples/mixed.fir", "--passes", PIPELINE, "--interpret"],
        None,
    );
    assert!(after.status.success(), "{}", text(&after.stderr));
    let out = text(&after.stdout);
    assert!(out.contains("copy %0 -> cpu:0"), "{out}");
    let result = |s: &str| {
        s.lines()
            .filter(|l| l.starts_with("result "))
            .map(String::from)
            .collect::<Vec<_>>()
    };
    let (r0, r1) = (result(&text(&before.stdout)), result(&out));
    assert_eq!(r0.len(), 1);
    assert!(
        r0[0].starts_with("result 0 : f32[1024] @vulkan:0 "),
        "{r0:?}"
    );
    assert_eq!(r0, r1, "lowering changed the meaning");
}

#[test]
fn reads_stdin_and_emits_dot() {
    let src = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/mixed.fir"
    ))
    .unwrap();
    let out = fuel_opt(&["-", "--passes", PIPELINE, "--emit", "dot"], Some(&src));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let dot = text(&out.stdout);
    assert!(dot.starts_with("digraph \"mixed\" {"), "{dot}");
    assert!(dot.contains("subgraph cluster_"), "{dot}");
}

/// `--emit plan` prints one line per step of the lowered graph's plan,
/// numbered as the text IR numbers nodes, and refuses a graph that still
/// holds a collective with the passes that lower it.
#[test]
fn emit_plan_lists_every_step_and_refuses_an_unlowered_graph() {
    let src = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/mixed.fir"
    ))
    .unwrap();
    let out = fuel_opt(&["-", "--passes", PIPELINE, "--emit", "plan"], Some(&src));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let plan = text(&out.stdout);
    let lowered = fuel_opt(&["-", "--passes", PIPELINE], Some(&src));
    let nodes = text(&lowered.stdout)
        .lines()
        .filter(|l| l.trim_start().starts_with('%'))
        .count();
    // The plan, then the cost model's timeline of the same steps.
    let (listing, timeline) = plan
        .split_once("estimate of one run: ")
        .unwrap_or_else(|| panic!("no estimate under the plan:\n{plan}"));
    let lines: Vec<&str> = listing.lines().collect();
    assert!(lines[0].starts_with("plan @mixed: "), "{plan}");
    assert!(lines[0].contains("no device opened"), "{plan}");
    let is_step = |l: &str| {
        l.trim_start()
            .strip_prefix('s')
            .is_some_and(|r| r.starts_with(|c: char| c.is_ascii_digit()))
    };
    let steps = lines.iter().filter(|l| is_step(l)).count();
    assert_eq!(steps, nodes, "one step per node:\n{plan}");
    assert!(plan.contains("input \""), "{plan}");
    assert!(
        lines.last().unwrap().trim_start().starts_with("outputs ["),
        "{plan}"
    );
    // One priced row per step, and one per output handed back at most.
    let priced: Vec<&str> = timeline.lines().collect();
    assert!(priced[1].trim_start().starts_with("binds: "), "{plan}");
    assert_eq!(
        priced.iter().filter(|l| is_step(l)).count(),
        nodes,
        "{plan}"
    );
    let outs = priced
        .iter()
        .filter(|l| l.trim_start().starts_with("out s"));
    assert!(outs.count() <= 4, "{plan}");
    // Before lowering there is no plan: the message names the fix.
    let out = fuel_opt(&["-", "--emit", "plan"], Some(&src));
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stdout));
    let err = text(&out.stderr);
    assert!(err.contains("lower"), "{err}");
}

#[test]
fn dump_dir_has_a_file_pair_per_step() {
    let dir = std::env::temp_dir().join(format!("fuel-opt-dump-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let out = fuel_opt(
        &[
            "examples/mixed.fir",
            "--passes",
            PIPELINE,
            "--dump-dir",
            dir.to_str().unwrap(),
        ],
        None,
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let want = [
        "00-input",
        "01-insert-cross-device-copies",
        "02-split-cross-vendor-copies",
        "03-cse",
        "04-dce",
    ];
    let want: Vec<String> = want
        .iter()
        .flat_map(|s| [format!("{s}.dot"), format!("{s}.fir")])
        .collect();
    assert_eq!(names, want);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn print_after_env_prints_to_stderr() {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_fuel-opt"));
    cmd.current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."));
    let out = cmd
        .args(["examples/mixed.fir", "--passes", PIPELINE])
        .env("FUEL_PRINT_AFTER", "cse")
        .output()
        .unwrap();
    assert!(out.status.success());
    let err = text(&out.stderr);
    assert!(err.contains("// *** IR after cse ***"), "{err}");
    assert!(!err.contains("after dce"), "{err}");
}

/// `FUEL_LOG=fuel_runtime::exec=trace` prints a line per executed step
/// with its time; without it, none.
#[test]
fn the_step_trace_names_each_step_and_its_time() {
    let run = |log: Option<&str>| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_fuel-opt"));
        cmd.current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
            .args(["bench", "--devices", "cpu:0,cpu:1", "--sizes", "4K"])
            .args(["--iters", "1", "--warmup", "0", "--algorithm", "star"])
            .env("FUEL_CACHE_DIR", empty_cache())
            .env_remove("FUEL_LOG");
        if let Some(l) = log {
            cmd.env("FUEL_LOG", l);
        }
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{}", text(&out.stderr));
        text(&out.stderr)
    };
    let err = run(Some("fuel_runtime::exec=trace"));
    let adds: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("op=add device=cpu:0 bytes=4096 work=\"device\" us="))
        .collect();
    // One timed run: the star's one fold.
    assert_eq!(adds.len(), 1, "{err}");
    let us: f64 = adds[0]
        .rsplit("us=")
        .next()
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(us > 0.0, "{err}");
    assert!(!run(None).contains("op=add"));
}

/// Each bad input: exit code 2, no panic, and a message naming the problem.
#[test]
fn bad_input_is_an_error_not_a_panic() {
    let good = "graph @g {\n  %0 = input \"a\" @cpu:0 : f32[4]\n  return %0\n}\n";
    let cases: &[(&[&str], Option<&str>, &str)] = &[
        (&["-"], Some("graph @g {\n  %0 = input \"a\" @cpu:0 : f32[4\n}\n"), "2:32: expected `,` or `]`"),
        (&["-"], Some("hello"), "1:1: expected `graph @name {`"),
        (&["-", "--passes", "frobnicate"], Some(good), "unknown pass `frobnicate`; known passes: combine-collectives, cse, dce"),
        (&["-", "--passes", "cse{depth=3}"], Some(good), "unknown option `depth` for pass `cse`; known options: none"),
        (&["-", "--passes", "cse,"], Some(good), "expected a pass name after the last `,`"),
        (
            &["-"],
            Some("graph @g {\n  %0 = input \"a\" @cpu:0 : f32[4]\n  %1 = div %0 {by=0} @cpu:0 : f32[4]\n  return %1\n}\n"),
            "// ^ error: `div {by=0}` divides by zero",
        ),
        (&["no/such/file.fir"], None, "cannot read `no/such/file.fir`"),
        (&[], None, "no input: give a .fir file"),
        (&["-", "--topology", "no/such.topo"], Some(good), "cannot read topology `no/such.topo`"),
    ];
    for (args, stdin, want) in cases {
        let out = fuel_opt(args, *stdin);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: want {want:?} in:\n{err}");
        assert!(!err.contains("panicked"), "{args:?} panicked:\n{err}");
    }
}

#[test]
fn demo_runs_on_cpu_devices_and_writes_what_it_names() {
    let dir = std::env::temp_dir().join(format!("fuel-demo-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let out = fuel_opt(
        &[
            "demo",
            "--devices",
            "cpu:0,cpu:1,cpu:2",
            "--elements",
            "100",
            "--out",
            dir.to_str().unwrap(),
            "--runs",
            "1",
        ],
        None,
    );
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    assert!(
        stdout.contains("using [cpu:0, cpu:1, cpu:2], 102 x f32 per shard"),
        "{stdout}"
    );
    assert!(
        stdout.contains("all 6 results match the reference interpreter"),
        "{stdout}"
    );
    assert!(stdout.contains("== bytes per link"), "{stdout}");
    // On host arenas the copies into the root share the shards' buffers.
    assert!(
        stdout.contains("408 B in 1 copy, all shared without copying"),
        "{stdout}"
    );
    assert!(stdout.contains("estimated (model)"), "{stdout}");
    let files = fuel_test_support::report::listed_files(&stdout);
    assert!(
        files
            .iter()
            .any(|f| f.ends_with("03-lower-collectives.fir")),
        "{files:?}"
    );
    // The default pipeline starts with simplify-collectives, which turns
    // the demo's all_gather of a reduce_scatter into the all_reduce it
    // records already (one collective is left); combine-collectives then
    // finds nothing to merge: it is reported as unchanged, and no file
    // repeats the input. Between host arenas every copy, the results
    // going out included, shares its source's buffer: no byte moves.
    assert!(
        files
            .iter()
            .any(|f| f.ends_with("01-simplify-collectives.fir")),
        "{files:?}"
    );
    assert!(
        stdout.contains(&format!("  {:<22} {:>10} moved", "total", "0 B")),
        "{stdout}"
    );
    assert!(
        stdout.contains("02-combine-collectives: no change"),
        "{stdout}"
    );
    assert!(
        !files.iter().any(|f| f.contains("combine-collectives")),
        "{files:?}"
    );
    for f in &files {
        assert!(std::path::Path::new(f).exists(), "{f} is named but missing");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn demo_and_bench_reject_bad_options() {
    let cases: &[(&[&str], &str)] = &[
        (&["demo", "--devices", "gpu:0"], "invalid device `gpu:0`"),
        (&["demo", "--dtype", "f8"], "unknown dtype `f8`"),
        (
            &["demo", "--op", "avg", "--devices", "cpu:0"],
            "unknown reduce op `avg`",
        ),
        (
            &["demo", "--devices", "cpu:0", "--algorithm", "snake"],
            "algorithm",
        ),
        (&["bench", "--sizes", "4Q"], "`4Q` is not a size"),
        (&["bench", "--sizes", "8K..4K"], "larger than its end"),
        (
            &["bench", "--iters", "0", "--sizes", "4K"],
            "invalid value '0' for '--iters <ITERS>': 0 is not in 1..=10000",
        ),
    ];
    for (args, want) in cases {
        let out = fuel_opt(args, None);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: want {want:?} in:\n{err}");
    }
}

/// `fuel-opt bench` over `devices` at 4K and 8K, two timed runs each,
/// with `extra` flags.
fn bench_two_sizes(devices: &str, extra: &[&str]) -> std::process::Output {
    let args = [
        "bench",
        "--devices",
        devices,
        "--sizes",
        "4K,8K",
        "--iters",
        "2",
        "--warmup",
        "0",
    ];
    fuel_opt(&[&args[..], extra].concat(), None)
}

#[test]
fn bench_csv_has_the_documented_columns_and_no_wrong_elements() {
    let out = bench_two_sizes("cpu:0,cpu:1", &["--csv"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines[0],
        "size,count,type,redop,algorithm,time_us,algbw_gbps,busbw_gbps,wrong,bound_gbps,ratio,model_bound_us"
    );
    assert_eq!(lines.len(), 3, "{stdout}");
    for (line, size) in lines[1..].iter().zip(["4096", "8192"]) {
        let cols: Vec<&str> = line.split(',').collect();
        assert_eq!(cols.len(), 12, "{line}");
        assert_eq!(cols[0], size);
        assert_eq!(cols[2], "f32");
        assert_eq!(cols[8], "0", "wrong elements in {line}");
        let algbw: f64 = cols[6].parse().unwrap();
        let busbw: f64 = cols[7].parse().unwrap();
        assert!(
            (busbw - algbw).abs() <= 1e-3 + 1e-6 * algbw,
            "busbw for n=2 equals algbw: {line}"
        );
        // The model's bound: positive, and no more than the model's own
        // estimate would allow (a few microseconds at these sizes).
        let model_bound: f64 = cols[11].parse().unwrap();
        assert!(model_bound > 0.0 && model_bound < 1e4, "{line}");
    }
}

#[test]
fn bench_table_says_what_ratio_is_and_closes_with_the_average_bus_bandwidth() {
    let out = bench_two_sizes("cpu:0,cpu:1", &[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("\n# ratio: algbw / bound(GB/s)"),
        "{stdout}"
    );
    let lines: Vec<&str> = stdout.lines().collect();
    let n = lines.len();
    assert_eq!(lines[n - 2], "# Out of bounds values : 0 OK", "{stdout}");
    // The average of the rows' bus bandwidths, as nccl-tests prints it.
    let busbw: Vec<f64> = lines
        .iter()
        .filter(|l| !l.starts_with('#'))
        .map(|l| l.split_whitespace().nth(7).unwrap().parse().unwrap())
        .collect();
    assert_eq!(busbw.len(), 2, "{stdout}");
    let avg: f64 = lines[n - 1]
        .strip_prefix("# Avg bus bandwidth    : ")
        .unwrap_or_else(|| panic!("{stdout}"))
        .trim()
        .parse()
        .unwrap();
    assert!(
        (avg - (busbw[0] + busbw[1]) / 2.0).abs() <= 1e-3,
        "{stdout}"
    );
}

#[test]
fn bench_eager_times_the_eager_call_beside_the_plain_loop() {
    let eager = ["--eager", "--op", "mean"];
    let out = bench_two_sizes("cpu:0,cpu:1,cpu:2", &eager);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let rows: Vec<Vec<&str>> = stdout
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows.len(), 2, "{stdout}");
    for (row, size) in rows.iter().zip(["4096", "8192"]) {
        assert_eq!(row.len(), 7, "{stdout}");
        assert_eq!(row[0], size);
        let t: Vec<f64> = row[2..].iter().map(|x| x.parse().unwrap()).collect();
        assert!(t.iter().all(|x| *x > 0.0), "{stdout}");
    }
    assert!(stdout.contains("# worst eager/loop: "), "{stdout}");
    // A flag the eager bench does not read is refused, by name.
    let out = bench_two_sizes(
        "cpu:0,cpu:1,cpu:2",
        &[&eager[..], &["--algorithm", "ring"]].concat(),
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("--algorithm"),
        "{}",
        text(&out.stderr)
    );
    let out = fuel_opt(&["bench", "--eager", "--op", "max", "--sizes", "4K"], None);
    assert!(
        text(&out.stderr).contains("give --op sum or --op mean"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn bench_step_ddp_times_five_ways_of_one_training_step() {
    let args = [
        "bench",
        "--step",
        "ddp",
        "--devices",
        "cpu:0,cpu:1",
        "--layers",
        "2",
        "--width",
        "16",
        "--batch",
        "8",
        "--iters",
        "2",
        "--warmup",
        "0",
    ];
    let out = fuel_opt(&args, None);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let mut names: Vec<&str> = stdout
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    // The scheduled graph run the other way, whichever it is.
    let other = names.pop();
    assert!(
        matches!(other, Some("in-order" | "by-priority")),
        "{stdout}"
    );
    assert_eq!(
        names,
        ["compute-only", "after-compute", "fifo", "scheduled"],
        "{stdout}"
    );
    assert!(stdout.contains("# scheduled is "), "{stdout}");
    // A step too large to hold is refused by name, before anything runs.
    let big = [
        "bench",
        "--step",
        "ddp",
        "--devices",
        "cpu:0,cpu:1",
        "--width",
        "8192",
        "--batch",
        "65536",
    ];
    let out = fuel_opt(&big, None);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("give a smaller --width, --batch or --layers"),
        "{}",
        text(&out.stderr)
    );
    // The step's shape flags belong to --step alone.
    let out = fuel_opt(&["bench", "--layers", "2", "--sizes", "4K"], None);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("--layers"),
        "{}",
        text(&out.stderr)
    );
}

const CPU_PAIR: &str = "graph @ar {
  %0 = input \"a\" @cpu:0 : f32[64]
  %1 = input \"b\" @cpu:1 : f32[64]
  %2:2 = all_reduce.sum %0, %1 : f32[64]
  return %2#0, %2#1
}
";

/// The lowering's note line.
fn note(stdout: &str) -> String {
    stdout
        .lines()
        .find(|l| l.contains("// lower-collectives:"))
        .unwrap_or_default()
        .to_string()
}

/// `fuel-opt calibrate --devices DEVICES`, one timed run per graph and no
/// warm-up, plus `extra`, with `cache` as the calibration cache; panics
/// unless it succeeds, and returns its standard output.
fn quick_calibration(devices: &str, extra: &[&str], cache: &std::path::Path) -> String {
    let mut args = vec![
        "calibrate",
        "--devices",
        devices,
        "--iters",
        "1",
        "--warmup",
        "0",
    ];
    args.extend_from_slice(extra);
    let out = fuel_opt_cached(&args, None, cache);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    stdout
}

/// Calibrating a Vulkan device writes the offset multiple it binds views
/// at, so the cost model counts the views the run makes.
#[test]
fn calibrate_writes_the_vulkan_view_alignment() {
    let test = "calibrate_writes_the_vulkan_view_alignment";
    let devices = [
        fuel_graph_ext::Device::cpu(0),
        fuel_graph_ext::Device::vulkan(0),
    ];
    if !fuel_test_support::devices::devices_or_skip(test, &devices) {
        return;
    }
    let cache = empty_cache();
    let out_file = cache.join("written.topo");
    let stdout = quick_calibration(
        "cpu:0,vulkan:0",
        &["--passes", "1", "--out", out_file.to_str().unwrap()],
        &cache,
    );
    let written = std::fs::read_to_string(&out_file).unwrap();
    let align: usize = written
        .lines()
        .find_map(|l| l.strip_prefix("view-align vulkan "))
        .unwrap_or_else(|| panic!("no view-align line:\n{written}"))
        .parse()
        .unwrap();
    assert!(align.is_power_of_two() && align <= 256, "{align}");
    assert!(
        stdout.contains(&format!("view-align vulkan {align}: ")),
        "{stdout}"
    );
    let topo = fuel_graph_ext::Topology::parse(&written).unwrap();
    assert_eq!(
        topo.view_align(fuel_graph_ext::DeviceKind::Vulkan),
        Some(align)
    );
}

#[test]
fn calibrate_writes_the_cache_that_lowering_then_reads() {
    let cache = empty_cache();
    let stdout = quick_calibration("cpu:0,cpu:1", &[], &cache);
    assert!(stdout.contains("link host-host"), "{stdout}");
    assert!(stdout.contains("runner inline"), "{stdout}");
    let written = stdout
        .lines()
        .find_map(|l| l.strip_prefix("# wrote "))
        .and_then(|l| l.split(':').next())
        .unwrap_or_else(|| panic!("no `# wrote` line:\n{stdout}"));
    assert!(written.starts_with(cache.to_str().unwrap()), "{written}");
    assert!(std::path::Path::new(written).exists(), "{written}");

    // Without --topology the pass uses the cache, and says so.
    let lower = ["-", "--passes", "lower-collectives"];
    let cached = text(&fuel_opt_cached(&lower, Some(CPU_PAIR), &cache).stdout);
    assert!(note(&cached).contains("; costs: calibrated 2"), "{cached}");
    let plain = text(&fuel_opt(&lower, Some(CPU_PAIR)).stdout);
    assert!(
        note(&plain).ends_with("; costs: defaults: not calibrated here; run `fuel-opt calibrate`"),
        "{plain}"
    );

    // With --topology the cache plays no part: byte-identical either way.
    let topo = cache.join("fixed.topo");
    std::fs::write(&topo, "link host-host bandwidth=12 latency=0.5\n").unwrap();
    let with = [
        "-",
        "--passes",
        "lower-collectives",
        "--topology",
        topo.to_str().unwrap(),
    ];
    let a = fuel_opt_cached(&with, Some(CPU_PAIR), &cache);
    let b = fuel_opt(&with, Some(CPU_PAIR));
    assert!(a.status.success(), "{}", text(&a.stderr));
    assert_eq!(text(&a.stdout), text(&b.stdout));
    assert!(note(&text(&a.stdout)).ends_with("; costs: topology file fixed.topo"));

    // A stale cache is an error naming the file and the command.
    let old = std::fs::read_to_string(written)
        .unwrap()
        .replace("format 2", "format 1");
    std::fs::write(written, old).unwrap();
    let out = fuel_opt_cached(&lower, Some(CPU_PAIR), &cache);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains(written) && err.contains("is stale"), "{err}");
    assert!(
        err.contains("run `fuel-opt calibrate --devices cpu:0,cpu:1` to rewrite it"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&cache);
}

#[test]
fn demo_calibrates_on_its_first_run_and_reuses_it() {
    let cache = empty_cache();
    let dir = cache.join("demo");
    let args = [
        "demo",
        "--devices",
        "cpu:0,cpu:1",
        "--elements",
        "64",
        "--runs",
        "1",
        "--out",
        dir.to_str().unwrap(),
    ];
    let first = text(&fuel_opt_cached(&args, None, &cache).stdout);
    assert!(
        first.contains("== costs: calibrating these devices once"),
        "{first}"
    );
    assert!(first.contains("done in"), "{first}");
    let second = text(&fuel_opt_cached(&args, None, &cache).stdout);
    assert!(second.contains("== costs: calibrated "), "{second}");
    assert!(!second.contains("calibrating"), "{second}");
    let _ = std::fs::remove_dir_all(&cache);
}

#[test]
fn bench_validate_prints_estimates_measurements_and_a_summary() {
    let args = [
        "bench",
        "--validate",
        "--devices",
        "cpu:0,cpu:1",
        "--sizes",
        "4K,8K",
        "--iters",
        "1",
        "--warmup",
        "0",
        "--csv",
    ];
    let out = fuel_opt(&args, None);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let mut lines = stdout.lines();
    assert_eq!(
        lines.next(),
        Some("size,algorithm,estimate_us,measured_us,auto_pick,best")
    );
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    // star, hierarchical, ring and tree at each size (no driver declared).
    assert_eq!(rows.len(), 8, "{stdout}");
    for size in ["4096", "8192"] {
        let at: Vec<&Vec<&str>> = rows.iter().filter(|r| r[0] == size).collect();
        let algs: Vec<&str> = at.iter().map(|r| r[1]).collect();
        assert_eq!(algs, ["star", "hierarchical", "ring", "tree"], "{stdout}");
        for r in &at {
            assert!(r[2].parse::<f64>().unwrap() > 0.0, "{stdout}");
            assert!(r[3].parse::<f64>().unwrap() > 0.0, "{stdout}");
        }
        assert_eq!(at.iter().filter(|r| r[4] == "1").count(), 1, "{stdout}");
        assert_eq!(at.iter().filter(|r| r[5] == "1").count(), 1, "{stdout}");
        // On two CPUs hierarchical has one island and lowers to star's
        // program: timed once, the two rows carry the same measurement.
        assert_eq!(at[0][3], at[1][3], "{stdout}");
        assert_ne!(at[0][3], at[2][3], "{stdout}");
    }
    assert!(
        stderr.contains("# estimate/measured over 8 points: median"),
        "{stderr}"
    );
    assert!(stderr.contains("# auto: the measured best at "), "{stderr}");
    let table = text(&fuel_opt(&args[..args.len() - 1], None).stdout);
    assert!(table.contains("est/meas"), "{table}");
    assert!(
        table.contains("(the program star runs: timed once)"),
        "{table}"
    );
    assert!(table.contains("# costs: defaults"), "{table}");
    assert!(table.contains("# auto: the measured best at "), "{table}");
}

#[test]
fn bench_plot_draws_one_line_per_algorithm_and_the_bound() {
    let dir = std::env::temp_dir().join(format!("fuel-plot-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let svg = dir.join("bench.svg");
    let out = fuel_opt(
        &[
            "bench",
            "--devices",
            "cpu:0,cpu:1",
            "--sizes",
            "4K,16K",
            "--iters",
            "1",
            "--warmup",
            "0",
            "--csv",
            "--plot",
            svg.to_str().unwrap(),
        ],
        None,
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    // Every fixed algorithm at every size: 8 rows after the header.
    assert_eq!(
        text(&out.stdout).lines().count(),
        9,
        "{}",
        text(&out.stdout)
    );
    let picture = std::fs::read_to_string(&svg).unwrap();
    assert!(picture.starts_with("<svg"), "{picture}");
    for label in [
        "star",
        "hierarchical",
        "ring",
        "tree",
        "host bound",
        "bus bandwidth (GB/s)",
        "bytes per rank",
    ] {
        assert!(
            picture.contains(&format!("\n{label}\n")),
            "no `{label}` in the plot"
        );
    }
    // One circle per measured point (2 sizes x 4 algorithms).
    assert_eq!(picture.matches("<circle").count(), 8, "{picture}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bench_every_collective_is_right_with_nccl_tests_factors() {
    // Three ranks, so the reduce_scatter and all_to_all pieces are rounded
    // up to even ones; busbw / algbw is nccl-tests' factor for each.
    for (collective, factor) in [
        ("all_reduce", 4.0 / 3.0),
        ("all_gather", 2.0 / 3.0),
        ("reduce_scatter", 2.0 / 3.0),
        ("broadcast", 1.0),
        ("all_to_all", 2.0 / 3.0),
    ] {
        let out = fuel_opt(
            &[
                "bench",
                "--collective",
                collective,
                "--devices",
                "cpu:0,cpu:1,cpu:2",
                "--sizes",
                "4K",
                "--iters",
                "2",
                "--warmup",
                "0",
                "--csv",
            ],
            None,
        );
        assert!(out.status.success(), "{collective}: {}", text(&out.stderr));
        let stdout = text(&out.stdout);
        let rows: Vec<Vec<&str>> = stdout
            .lines()
            .skip(1)
            .map(|l| l.split(',').collect())
            .collect();
        assert_eq!(rows.len(), 1, "{stdout}");
        let row = &rows[0];
        assert_eq!(row[8], "0", "{collective}: wrong elements in {stdout}");
        let algbw: f64 = row[6].parse().unwrap();
        let busbw: f64 = row[7].parse().unwrap();
        assert!(algbw > 0.0, "{stdout}");
        assert!(
            // The CSV rounds each figure to 4 decimals (half a unit of the
            // last place each), which on a loaded machine is a large share
            // of a small algbw.
            (busbw - algbw * factor).abs() <= 0.05 * busbw + 1e-4 * (1.0 + factor),
            "{collective}: busbw/algbw {} against {factor}",
            busbw / algbw
        );
        let bound: f64 = row[9].parse().unwrap();
        assert!(bound > 0.0, "{collective}: no host bound in {stdout}");
    }
}
