//! `fuel-opt` against hostile input, in child processes: every case ends
//! with exit 0, 1 or 2 (or the quiet SIGPIPE death of a closed pipe) and a
//! message that names the problem, never a panic, an abort, a stack
//! overflow or unbounded memory. One test per class of issue 14: sizes,
//! output and files, error text that quotes input, environment variables,
//! groups of only GPUs, and the small items (device indices, empty size
//! lists, thread limits).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use fuel_test_support::report::bench_once;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

mod hostile_common;

use hostile_common::{cmd, scratch, BIN};

const SMALL: &str = "graph @g {\n  %0 = input \"a\" @cpu:0 : f32[4]\n  %1 = add %0, %0 @cpu:0 : f32[4]\n  return %1\n}\n";

fn file(tag: &str, text: &str) -> PathBuf {
    let p = scratch(tag).join("g.fir");
    std::fs::write(&p, text).unwrap();
    p
}

fn run(args: &[&str]) -> Output {
    cmd(args).output().unwrap()
}

/// `fuel-opt ARGS` under `ulimit -v KB`, with extra environment.
fn run_limited(kb: u64, env: &[(&str, &str)], args: &[&str]) -> Output {
    let mut c = Command::new("sh");
    c.arg("-c")
        .arg(format!("ulimit -v {kb} && exec \"$0\" \"$@\""))
        .arg(BIN)
        .args(args)
        .env_remove("FUEL_VULKAN_DEVICES")
        .stdin(Stdio::null());
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Exit 2 with a message containing every `want`, and no panic.
fn refused(o: &Output, wants: &[&str]) -> String {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    for w in wants {
        assert!(err.contains(w), "want {w:?} in:\n{err}");
    }
    err
}

fn have_vulkan(test: &str) -> bool {
    let d = fuel_runtime::exec::discover();
    match d.why_not(fuel_graph_ext::Device::vulkan(1)) {
        None => true,
        Some(why) => {
            assert!(
                std::env::var("FUEL_REQUIRE_VULKAN").as_deref() != Ok("1"),
                "{test}: {why}"
            );
            fuel_test_support::skip_line(format_args!("SKIP: {test}: {why}"));
            false
        }
    }
}

// ---- sizes -------------------------------------------------------------------

#[test]
fn huge_tensors_end_with_exit_2_and_say_what_fits() {
    // 2^62 f32s: past what a tensor can address (a verify error).
    let f = file(
        "huge",
        "graph @g {\n  %0 = input \"a\" @cpu:0 : f32[4611686018427387904]\n  return %0\n}\n",
    );
    let f = f.to_str().unwrap();
    for mode in ["--interpret", "--run"] {
        refused(
            &run(&[f, mode]),
            &["takes more than 9223372036854775807 bytes (2^63 - 1), the most one tensor can address"],
        );
    }
    // 2^60 f32s: addressable, but not by this host.
    let f = file(
        "large",
        "graph @g {\n  %0 = input \"a\" @cpu:0 : f32[1152921504606846976]\n  return %0\n}\n",
    );
    let f = f.to_str().unwrap();
    refused(
        &run(&[f, "--interpret"]),
        &[
            "the interpreter cannot hold input \"a\"",
            "this process may hold at most",
        ],
    );
    refused(
        &run(&[f, "--run"]),
        &["%0 (`input`, f32[1152921504606846976]) needs 4611686018427387904 bytes (4 EiB) on cpu:0, but cpu:0 holds at most"],
    );
    // demo --elements near 2^64: past its range, and within it but too
    // many bytes for the element type.
    let out = scratch("demo-huge");
    let demo = |elements: &str| {
        run(&[
            "demo",
            "--devices",
            "cpu:0,cpu:1",
            "--elements",
            elements,
            "--out",
            out.to_str().unwrap(),
        ])
    };
    refused(
        &demo("18446744073709551615"),
        &["for '--elements <ELEMENTS>': 18446744073709551615 is not in 1..=9223372036854775807"],
    );
    refused(
        &demo("4611686018427387904"),
        &["--elements 4611686018427387904: that many f32 elements per shard take more than 9223372036854775807 bytes", "give at most 2305843009213693950"],
    );
}

#[test]
fn bench_under_a_4_gb_memory_limit_says_what_fits() {
    let o = run_limited(
        4 << 20,
        &[],
        &["bench", "--sizes", "2G", "--iters", "1", "--warmup", "0"],
    );
    refused(
        &o,
        &[
            "at once on the host (cpu:0, cpu:1, cpu:2, cpu:3)",
            "has 4294967296 bytes (4 GiB) (this process's address-space limit (ulimit -v))",
            "the executor has room for at most 512M per rank here",
        ],
    );
}

#[test]
fn a_thread_limit_says_which_limits_may_have_been_hit() {
    // Every new thread asks for a 4 GB stack under a 2 GB address space.
    let f = file("threads", SMALL);
    let o = run_limited(
        2_000_000,
        &[("RUST_MIN_STACK", "4000000000")],
        &[f.to_str().unwrap(), "--run"],
    );
    let err = refused(
        &o,
        &[
            "cannot start rayon's thread pool for the host kernels: ",
            "the limit on threads (ulimit -u: ",
            "the memory for its stack (RUST_MIN_STACK=4000000000 bytes; ulimit -v: 2048000000)",
        ],
    );
    assert!(!err.contains("internal executor error"), "{err}");
}

// ---- input files -------------------------------------------------------------

#[test]
fn inputs_are_bounded_and_devices_refused() {
    let f = file("limit", &format!("{SMALL}// {}\n", "x".repeat(2000)));
    refused(
        &run(&[f.to_str().unwrap(), "--max-input-size", "1K"]),
        &["is 2096 bytes (2.0 KiB), more than the input limit of 1024 bytes (1 KiB); raise it with --max-input-size"],
    );
    refused(
        &run(&["/dev/zero"]),
        &["`/dev/zero` is a device, not a file; fuel-opt reads files, pipes and standard input"],
    );
    let zero = std::fs::File::open("/dev/zero").unwrap();
    let o = cmd(&["-"]).stdin(zero).output().unwrap();
    refused(&o, &["standard input is a device, not a file"]);
    // A pipe of zeros stops at its first block.
    let mut child = cmd(&["-"])
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let feeder = std::thread::spawn(move || {
        let block = vec![0u8; 1 << 16];
        // Ends with EPIPE once fuel-opt has refused and gone.
        for _ in 0..1 << 14 {
            if stdin.write_all(&block).is_err() {
                break;
            }
        }
    });
    let o = child.wait_with_output().unwrap();
    feeder.join().unwrap();
    refused(&o, &["standard input has a NUL byte at byte 0"]);
    // A topology file is bounded the same way.
    let f = file("topo", SMALL);
    refused(
        &run(&[f.to_str().unwrap(), "--topology", "/dev/zero"]),
        &["topology `/dev/zero` is a device"],
    );
}

// ---- error text --------------------------------------------------------------

#[test]
fn quoted_input_is_escaped_and_cut() {
    // A terminal escape in a bad op name.
    let evil = "graph @g {\n  %0 = input \"a\" @cpu:0 : f32[4]\n  %1 = fr\u{1b}[2Job %0 @cpu:0 : f32[4]\n  return %1\n}\n";
    let f = file("escape", evil);
    let err = refused(&run(&[f.to_str().unwrap()]), &["\\u{1b}[2J"]);
    assert!(!err.contains('\u{1b}'), "{err:?}");
    // A 20 MB line: the message shows a window of it and says how much
    // was cut.
    let line = format!(
        "  %1 = add %0, %0 @cpu:0 : f32[4] {}\n",
        "z".repeat(20 << 20)
    );
    let f = file(
        "long",
        &format!("graph @g {{\n  %0 = input \"a\" @cpu:0 : f32[4]\n{line}  return %1\n}}\n"),
    );
    let err = refused(
        &run(&[f.to_str().unwrap()]),
        &[
            "3:35: expected end of line after the type, found `z`",
            "characters cut)",
        ],
    );
    assert!(err.len() < 2000, "{} bytes of error", err.len());
    // A long device name in --devices.
    let f = file("dev", SMALL);
    let long = format!("cpu:0,{}", "q".repeat(10_000));
    let err = refused(
        &run(&[f.to_str().unwrap(), "--run", "--devices", &long]),
        &["more characters)`: expected `cpu:N`"],
    );
    assert!(err.len() < 500, "{err}");
}

// ---- output ------------------------------------------------------------------

#[test]
fn a_closed_pipe_ends_quietly_like_other_unix_tools() {
    // Far more output than a pipe holds, read one line, then hang up.
    let mut text = String::from("graph @g {\n  %0 = input \"a\" @cpu:0 : f32[4]\n");
    for k in 1..20_000 {
        text.push_str(&format!(
            "  %{k} = add %{}, %{} @cpu:0 : f32[4]\n",
            k - 1,
            k - 1
        ));
    }
    text.push_str("  return %19999\n}\n");
    let f = file("pipe", &text);
    let mut child = cmd(&[f.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert_eq!(first, "graph @g {\n");
    // (The reader is dropped: the pipe is closed.)
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.signal(), Some(13), "{:?} {}", o.status, stderr(&o));
    assert_eq!(stderr(&o), "", "a closed pipe is not an error to report");
    // `devices | head -1`, as a shell runs it.
    let o = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "\"{BIN}\" devices | head -1 >/dev/null; echo ${{PIPESTATUS[0]}}"
        ))
        .output()
        .unwrap();
    let status = String::from_utf8_lossy(&o.stdout).trim().to_string();
    assert!(status == "0" || status == "141", "{status}: {}", stderr(&o));
    assert_eq!(stderr(&o), "");
}

#[test]
fn a_full_disk_is_an_error_naming_the_file() {
    for args in [&["passes"][..], &["devices"][..]] {
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap();
        let o = cmd(args).stdout(full).output().unwrap();
        assert_eq!(
            stderr(&o),
            "fuel-opt: cannot write to standard output (/dev/full): No space left on device (os error 28)\n"
        );
        assert_eq!(o.status.code(), Some(2));
    }
}

fn demo(out: &Path, devices: &str) -> Output {
    run(&[
        "demo",
        "--devices",
        devices,
        "--elements",
        "64",
        "--runs",
        "1",
        "--out",
        out.to_str().unwrap(),
    ])
}

/// The files a demo report lists under `== files in`.
fn listed(o: &Output) -> Vec<PathBuf> {
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    fuel_test_support::report::listed_files(&stdout)
        .into_iter()
        .map(PathBuf::from)
        .collect()
}

#[test]
fn demo_out_holds_only_its_own_files() {
    let dir = scratch("demo-out");
    let out = dir.join("out");
    let first = demo(&out, "cpu:0,cpu:1");
    assert!(first.status.success(), "{}", stderr(&first));
    // It lists exactly what is in DIR (besides its manifest), and a second
    // run replaces its own files.
    let mut on_disk: Vec<PathBuf> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| !p.ends_with(".fuel-demo-files"))
        .collect();
    on_disk.sort();
    assert_eq!(listed(&first), on_disk);
    let again = demo(&out, "cpu:0,cpu:1");
    assert!(again.status.success(), "{}", stderr(&again));
    // A file it did not write: refused, and left alone.
    std::fs::write(out.join("notes.txt"), "mine").unwrap();
    refused(
        &demo(&out, "cpu:0,cpu:1"),
        &["holds `notes.txt`, which the demo did not write; give --out a new or empty directory"],
    );
    assert_eq!(
        std::fs::read_to_string(out.join("notes.txt")).unwrap(),
        "mine"
    );
    std::fs::remove_file(out.join("notes.txt")).unwrap();
    // A symlink named like one of its SVGs, pointing outside: refused, and
    // the target is untouched.
    let target = dir.join("outside.svg");
    std::fs::write(&target, "precious").unwrap();
    let svg = out.join("00-input.svg");
    let _ = std::fs::remove_file(&svg);
    std::os::unix::fs::symlink(&target, &svg).unwrap();
    refused(&demo(&out, "cpu:0,cpu:1"), &["holds `00-input.svg`"]);
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "precious");
    let _ = std::fs::remove_dir_all(&dir);
}

// ---- environment -------------------------------------------------------------

#[test]
fn bad_environment_values_name_the_variable_and_the_range() {
    let cases = [
        ("FUEL_VULKAN_DEVICES", "abc", "FUEL_VULKAN_DEVICES=`abc` is not valid: it takes logical devices per Vulkan adapter: a whole number from 1 to 16 (default 2); fix it or unset it"),
        ("FUEL_VULKAN_DEVICES", "4294967295", "FUEL_VULKAN_DEVICES=`4294967295` is not valid: it takes logical devices per Vulkan adapter: a whole number from 1 to 16"),
        ("FUEL_VULKAN_DEVICES", "0", "a whole number from 1 to 16"),
        ("FUEL_VULKAN_MAPPED", "yes", "FUEL_VULKAN_MAPPED=`yes` is not valid: it takes 0 or 1"),
        ("FUEL_DISPATCH", "lifo", "FUEL_DISPATCH=`lifo` is not valid: it takes fifo, in-order, priority or after-compute; fix it or unset it"),
        ("FUEL_JOIN_TIMEOUT_MS", "18446744073709551615", "FUEL_JOIN_TIMEOUT_MS=`18446744073709551615` is not valid: it takes milliseconds a rank waits for the others to join: a whole number from 1 to 86400000 (default 60000)"),
        ("FUEL_COLLECTIVE_TIMEOUT_MS", "-5", "FUEL_COLLECTIVE_TIMEOUT_MS=`-5` is not valid"),
        ("FUEL_LOG", "=[", "FUEL_LOG=`=[` is not valid: it takes tracing directives"),
    ];
    for (name, value, want) in cases {
        for args in [&["devices"][..], &["passes"][..]] {
            let o = cmd(args).env(name, value).output().unwrap();
            let err = refused(&o, &[want]);
            assert!(err.starts_with("fuel-opt: "), "{err}");
        }
    }
}

// ---- groups and devices -------------------------------------------------------

#[test]
fn small_items_have_clear_messages() {
    let f = file("small", SMALL);
    refused(
        &run(&[f.to_str().unwrap(), "--run", "--devices", "cuda:-1"]),
        &["--devices: invalid device `cuda:-1`: the index must be a non-negative integer, as in `cuda:0`"],
    );
    refused(
        &run(&["bench", "--sizes", ""]),
        &["--sizes: no sizes given: expected e.g. 64K,1M or a range 4K..64M"],
    );
    refused(
        &run(&["bench", "--sizes", "1K", "--iters", "18446744073709551615"]),
        &["for '--iters <ITERS>': 18446744073709551615 is not in 1..=10000"],
    );
    let dup = "graph @g {\n  %0 = input \"x\" @cpu:0 : f32[4]\n  %1 = input \"x\" @cpu:1 : i32[4]\n  return %0, %1\n}\n";
    let f = file("dup", dup);
    refused(
        &run(&[f.to_str().unwrap()]),
        &["input \"x\" is declared i32[4] here but f32[4] by %0"],
    );
}

#[test]
fn a_group_of_only_vulkan_devices_works_in_demo_and_bench() {
    if !have_vulkan("vulkan_only_group") {
        return;
    }
    let dir = scratch("vk-only");
    let o = demo(&dir.join("out"), "vulkan:0,vulkan:1");
    assert!(o.status.success(), "{}", stderr(&o));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        stdout.contains("results match the reference interpreter"),
        "{stdout}"
    );
    let o = run(&bench_once("vulkan:0,vulkan:1", &["--csv"]));
    assert!(o.status.success(), "{}", stderr(&o));
    let csv = String::from_utf8_lossy(&o.stdout);
    let row = csv.lines().nth(1).unwrap();
    // size,count,type,redop,algorithm,time_us,algbw,busbw,wrong,...
    assert_eq!(row.split(',').nth(8), Some("0"), "{csv}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Logs asked for with `FUEL_LOG` go to a pipe here, not a terminal: they
/// are plain text, with no raw escape sequences (colours are for
/// terminals only). Found by `cli_props` with `FUEL_LOG=3`.
#[test]
fn logs_to_a_pipe_carry_no_escape_sequences() {
    let f = file("log", SMALL);
    let o = cmd(&[f.to_str().unwrap(), "--passes", "cse,dce"])
        .env("FUEL_LOG", "trace")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("cse"), "no log lines at FUEL_LOG=trace: {err}");
    assert!(!err.contains('\u{1b}'), "raw escape on stderr: {err:?}");
}
