//! The error catalogue's test: `docs/errors.md` is the data.
//!
//! Every entry of the catalogue is a `### EXXXX — title` heading followed,
//! somewhere before the next heading, by one fenced block that holds the
//! exact message a user sees (without its final newline). This file reads
//! the catalogue, produces each error with its case and asserts the message
//! is byte-for-byte the documented one, so the docs and the code cannot
//! drift apart. An error of the IR (parse, verify, pipeline and topology
//! file) has its case in the golden tree, `tests/golden/errors/<id>-<title>.fir`
//! with the message pinned beside it in `.out.err`; every other error has a
//! case function of the same id in this file. An entry without a case, a
//! case without an entry, or an id with two cases fails too.
//!
//! `PRINT_ERRORS=1` prints every produced message (to draft a new entry).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use fuel_collective::driver::{HostCommunicator, HostUniqueId};
use fuel_collective::{
    Call, CollectiveDriver, CollectiveError, CommunicationId, DeviceGroup, Driver, DriverError,
    ElemType, HostDriver, JoinOptions, NcclDriver,
};
use fuel_graph_ext::interp::{deterministic_inputs, interpret, HostTensor};
use fuel_graph_ext::pass::PassError;
use fuel_graph_ext::{text, DType, Device, LazyGraph, ReduceOp, TensorType, Topology};
use fuel_runtime::exec::{self, FaultPoint};
use fuel_test_support::graphs::pair_all_reduce;
use fuel_test_support::report::bench_once;
use fuel_test_support::shards;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::LazyLock;
use std::time::Duration;

/// A case either produces the message or says why it cannot run here.
type Outcome = Result<String, Skip>;

/// Why a case cannot run on this machine.
struct Skip(String);

/// A case function: produces one documented error.
type Case = fn() -> Outcome;

const CASES: &[(&str, Case)] = &[
    ("E0309", pass_internal_error),
    ("E0310", topology_contradiction),
    ("E0311", topology_driver_without_one),
    ("E0312", topology_unknown_kind),
    ("E0313", topology_unknown_link_class),
    ("E0314", cache_unreadable),
    ("E0315", cache_damaged),
    ("E0316", cache_stale),
    ("E0317", cache_unwritable),
    ("E0340", topology_bad_process_line),
    ("E0401", group_empty),
    ("E0402", group_no_shards),
    ("E0403", group_shard_count),
    ("E0404", group_mixed_graphs),
    ("E0405", group_dtype_mismatch),
    ("E0406", group_shape_mismatch),
    ("E0407", group_wrong_device),
    ("E0408", group_root_out_of_range),
    ("E0409", group_axis_out_of_range),
    ("E0410", group_not_divisible),
    ("E0411", group_gather_shape_mismatch),
    ("E0412", group_split_count),
    ("E0413", group_split_sum),
    ("E0414", group_all_to_all_split_count),
    ("E0415", group_all_to_all_split_sum),
    ("E0440", world_device_count),
    ("E0441", world_process_out_of_range),
    ("E0442", world_topology),
    ("E0450", output_name_taken),
    ("E0501", device_not_listed),
    ("E0502", vulkan_no_driver),
    ("E0503", vulkan_index_too_high),
    ("E0504", cuda_not_installed),
    ("E0505", vulkan_import_bad_setting),
    ("E0506", cuda_pin_bad_setting),
    ("E0507", spin_bad_setting),
    ("E0601", dtype_u8_on_vulkan),
    ("E0602", dtype_i16_on_vulkan),
    ("E0603", vulkan_divisor_past_32_bits),
    ("E0604", cuda_float_divisor_too_large),
    ("E0701", exec_leftover_collective),
    ("E0702", exec_copy_across_vendors),
    ("E0703", exec_injected_copy),
    ("E0704", exec_injected_kernel),
    ("E0705", exec_injected_alloc),
    ("E0706", exec_missing_input),
    ("E0707", exec_input_type),
    ("E0708", exec_input_size),
    ("E0709", interp_input_length),
    ("E0710", exec_comm_without_communicator),
    ("E0711", exec_driver_mean),
    ("E0712", interp_world_mismatch),
    ("E0713", exec_vulkan_wait_failed),
    ("E0714", exec_vulkan_lost_earlier),
    ("E0715", typed_data_of_the_wrong_type),
    ("E0716", typed_data_of_the_wrong_length),
    ("E0717", spmd_mean_on_nccl),
    ("E0718", exec_value_too_large),
    ("E0719", exec_not_enough_memory),
    ("E0720", exec_kernel_buffer_too_large),
    ("E0721", exec_thread_limit),
    ("E0722", interp_out_of_memory),
    ("E0723", exec_region_list),
    ("E0730", extern_no_kernel),
    ("E0731", extern_kernel_fails),
    ("E0732", extern_kernel_short),
    ("E0733", extern_kernel_panics),
    ("E0750", exec_unknown_input),
    ("E0751", results_count),
    ("E0752", results_of_another_graph),
    ("E0753", results_not_an_output),
    ("E0754", results_unknown_name),
    ("E0801", cli_no_input),
    ("E0802", cli_unreadable_file),
    ("E0803", cli_parse_error),
    ("E0804", cli_verify_error),
    ("E0805", cli_bad_devices),
    ("E0806", cli_bad_topology),
    ("E0807", cli_unknown_print_after),
    ("E0808", cli_bad_env),
    ("E0809", cli_bad_log_filter),
    ("E0810", cli_input_too_large),
    ("E0811", cli_input_is_a_device),
    ("E0812", cli_input_has_nul),
    ("E0813", cli_input_not_utf8),
    ("E0814", cli_output_fails),
    ("E0815", cli_demo_foreign_files),
    ("E0816", cli_demo_elements_too_large),
    ("E0817", cli_bench_no_sizes),
    ("E0818", cli_count_too_large),
    ("E0819", cli_device_index),
    ("E0820", cli_bench_too_large),
    ("E0821", cli_env_not_utf8),
    ("E0822", cli_stale_cache),
    ("E0823", cli_bench_collective_with_count),
    ("E0824", cli_flag_the_mode_does_not_use),
    ("E0840", cli_world_bench_without_mpi),
    ("E0841", cli_world_bench_outside_mpirun),
    ("E0842", cli_plan_bad_world),
    ("E0843", cli_plan_no_process_count),
    ("E0850", cli_bench_plot_unwritable),
    ("E0901", driver_join_timeout),
    ("E0902", driver_bad_rank),
    ("E0903", driver_unsupported_elem),
    ("E0904", driver_partial_element),
    ("E0905", driver_mismatch),
    ("E0906", driver_peer_gone),
    ("E0907", driver_nccl_missing),
    ("E0908", driver_bad_timeout),
    ("E0960", driver_split_mismatch),
    ("E0961", driver_split_disagree),
];

/// One documented entry.
struct Entry {
    id: String,
    line: usize,
    message: Option<String>,
}

fn catalogue_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/errors.md")
}

/// Reads `### EXXXX — title` headings and the first fenced block under each.
fn entries(md: &str) -> Vec<Entry> {
    let mut out: Vec<Entry> = Vec::new();
    let mut block: Option<Vec<&str>> = None;
    for (ln, line) in md.lines().enumerate() {
        if let Some(lines) = block.as_mut() {
            if line.starts_with("```") {
                let text = lines.join("\n");
                block = None;
                if let Some(e) = out.last_mut() {
                    e.message.get_or_insert(text);
                }
            } else {
                lines.push(line);
            }
            continue;
        }
        if line.starts_with("```") {
            block = Some(Vec::new());
        } else if let Some(h) = line.strip_prefix("### ") {
            let id = h.split_whitespace().next().unwrap_or("");
            if id.len() == 5 && id.starts_with('E') && id[1..].chars().all(|c| c.is_ascii_digit()) {
                out.push(Entry {
                    id: id.to_string(),
                    line: ln + 1,
                    message: None,
                });
            }
        } else if line.starts_with("## ") || line.starts_with("### ") {
            // A section heading ends the previous entry's search for a block.
            out.push(Entry {
                id: String::new(),
                line: ln + 1,
                message: None,
            });
        }
    }
    out.retain(|e| !e.id.is_empty());
    out
}

#[test]
fn every_documented_error_is_produced_exactly() {
    let path = catalogue_path();
    let md = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let docs = entries(&md);
    let print = std::env::var("PRINT_ERRORS").is_ok_and(|v| v == "1");
    let mut failures = Vec::new();
    let mut produced: Vec<(String, Outcome)> = Vec::new();
    for (id, case) in CASES {
        produced.push((id.to_string(), case()));
        check_codes(id, &mut failures);
    }
    for (id, path) in golden_cases(&mut failures) {
        produced.push((id, golden_err(&path)));
    }
    for e in &docs {
        if docs.iter().filter(|o| o.id == e.id).count() > 1 {
            failures.push(format!("{} is documented twice (line {})", e.id, e.line));
        }
        match produced.iter().filter(|(id, _)| *id == e.id).count() {
            0 => failures.push(format!(
                "{id} (errors.md line {}) has no case: add tests/golden/errors/{id}-<title>.fir \
                 for an error of the IR, else a case function in this file",
                e.line,
                id = e.id
            )),
            1 => {}
            _ => failures.push(format!(
                "{} has two cases (a golden and a case function?): keep one",
                e.id
            )),
        }
    }
    for (id, outcome) in produced {
        let got = match outcome {
            Ok(m) => m.trim_end_matches('\n').to_string(),
            Err(Skip(why)) => {
                fuel_test_support::skip_line(format_args!("SKIP: {id}: {why}"));
                continue;
            }
        };
        if print {
            println!("=== {id}\n{got}\n");
        }
        let Some(doc) = docs.iter().find(|e| e.id == id) else {
            failures.push(format!("{id} has a case but no entry in docs/errors.md"));
            continue;
        };
        match &doc.message {
            None => failures.push(format!(
                "{id} (errors.md line {}) has no fenced message block",
                doc.line
            )),
            Some(want) if *want != got => {
                let diff = similar::TextDiff::from_lines(want.as_str(), got.as_str());
                failures.push(format!(
                    "{id} (errors.md line {}): the documented message differs from the produced one\n{}",
                    doc.line,
                    diff.unified_diff().header("documented", "produced")
                ));
            }
            Some(_) => {}
        }
    }
    assert!(
        failures.is_empty(),
        "{} problem(s):\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

#[test]
fn the_catalogue_reader_finds_ids_and_blocks() {
    let md = "# t\n## Parse\n### E0001 — a\ntext\n```\nline one\nline two\n```\n### E0002 — b\n## Driver errors\n```\nnot E0002's\n```\n";
    let e = entries(md);
    assert_eq!(e.len(), 2);
    assert_eq!(e[0].id, "E0001");
    assert_eq!(e[0].message.as_deref(), Some("line one\nline two"));
    assert_eq!(e[1].id, "E0002");
    assert_eq!(
        e[1].message, None,
        "a block after a new section is not the entry's"
    );
}

// ---- helpers ----------------------------------------------------------------

thread_local! {
    /// The `Debug` and `Display` forms of the typed errors the case now
    /// running produced ([`coded`]).
    static SEEN: std::cell::RefCell<Vec<(String, String)>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The ids whose errors carry no code of their own in `Debug`: a variant
/// that several entries share (a device's or driver's own words), told
/// apart only by its message, or (E0702) the verifier's report.
const UNCODED: &[&str] = &[
    "E0502", "E0503", "E0603", "E0702", "E0710", "E0711", "E0713", "E0714", "E0717",
];

/// `e`'s message, with its `Debug` form kept for [`check_codes`].
fn coded<E: std::fmt::Display + std::fmt::Debug>(e: &E) -> String {
    let shown = e.to_string();
    SEEN.with(|s| s.borrow_mut().push((format!("{e:?}"), shown.clone())));
    shown
}

/// Every typed error case `id` produced prints, with `Debug` (what `?`
/// out of `main` shows), its message and then ` [id]`.
fn check_codes(id: &str, failures: &mut Vec<String>) {
    for (debug, shown) in SEEN.with(|s| std::mem::take(&mut *s.borrow_mut())) {
        let want = if UNCODED.contains(&id) {
            shown.clone()
        } else {
            format!("{shown} [{id}]")
        };
        if debug != want {
            failures.push(format!(
                "{id}: Debug prints\n{debug}\nwhere it should print\n{want}"
            ));
        }
    }
}

/// The golden cases of the IR's errors, `tests/golden/errors/<id>-<title>.fir`,
/// with their ids; a file not named that way is a failure.
fn golden_cases(failures: &mut Vec<String>) -> Vec<(String, PathBuf)> {
    let dir = fuel_test_support::golden_dir().join("errors");
    let mut out = Vec::new();
    for path in fuel_test_support::cases(&dir) {
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
        let id = name
            .as_deref()
            .and_then(|n| n.split_once('-'))
            .map(|(id, _)| id);
        match id {
            Some(id) if id.len() == 5 && id.starts_with('E') => out.push((id.to_string(), path)),
            _ => failures.push(format!(
                "{}: name an error's golden case `<id>-<title>.fir`, such as `E0101-unknown-op.fir`",
                path.display()
            )),
        }
    }
    out
}

/// The message golden case `path` produces (the golden test pins it in the
/// case's `.out.err`).
fn golden_err(path: &Path) -> Outcome {
    let run = fuel_test_support::golden::run_case(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    match run.files.into_iter().find(|(ext, _)| *ext == "err") {
        Some((_, message)) => Ok(message),
        None => panic!(
            "{} must fail, but its RUN line succeeds: fix the case so it produces its error",
            path.display()
        ),
    }
}

fn compile_err(src: &str, devices: &[Device]) -> Outcome {
    let g = text::parse(src).unwrap_or_else(|e| panic!("{e}"));
    match exec::compile(&g, devices) {
        Ok(_) => panic!("expected compile to fail for:\n{src}"),
        Err(e) => Ok(coded(&e)),
    }
}

fn group_err(r: Result<impl Sized, CollectiveError>) -> Outcome {
    match r {
        Ok(_) => panic!("expected the collective to be refused"),
        Err(e) => Ok(coded(&e)),
    }
}

/// Vulkan devices, or a skip (a failure under `FUEL_REQUIRE_VULKAN=1`).
fn need_vulkan(devices: &[Device]) -> Result<(), Skip> {
    if fuel_test_support::devices_or_skip("error_catalogue", devices) {
        Ok(())
    } else {
        Err(Skip("Vulkan is unavailable".into()))
    }
}

fn f32s(shape: &[usize]) -> TensorType {
    TensorType::new(DType::F32, shape)
}

const CPU01: [Device; 2] = [Device::cpu(0), Device::cpu(1)];

/// The `fuel-opt` binary that `cargo test --workspace` builds beside this
/// test's binary (`target/<profile>/fuel-opt`).
fn fuel_opt() -> Result<PathBuf, Skip> {
    let exe = std::env::current_exe().map_err(|e| Skip(e.to_string()))?;
    let bin = exe
        .parent()
        .and_then(Path::parent)
        .map(|p| p.join("fuel-opt"))
        .ok_or_else(|| Skip("cannot locate the target folder".into()))?;
    if bin.exists() {
        Ok(bin)
    } else {
        Err(Skip(format!(
            "{} is not built; run `cargo test --workspace` (or `cargo build -p fuel-opt`) first",
            bin.display()
        )))
    }
}

/// What every catalogue run of `fuel-opt` shares: it runs in
/// `tests/golden/` (paths in messages stay short) and with a calibration
/// cache of its own, never this machine's.
fn in_golden(cmd: &mut Command) -> &mut Command {
    cmd.current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("golden"))
        .env(
            "FUEL_CACHE_DIR",
            std::env::temp_dir().join(format!("fuel-catalogue-cache-{}", std::process::id())),
        )
}

/// The standard error of `out`, a run of `fuel-opt args` that must have
/// exited 2 (bad input).
fn bad_input_stderr(args: &[&str], out: std::process::Output) -> Outcome {
    assert_eq!(
        out.status.code(),
        Some(2),
        "fuel-opt {args:?} should exit 2; stderr:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(String::from_utf8(out.stderr).unwrap())
}

/// [`cli_err`] with [`CPU_AR`] on standard input (`-` among `args`).
fn cli_err_on_ar(args: &[&str], env: &[(&str, &str)]) -> Outcome {
    cli_err(args, Some(&CPU_AR), env)
}

/// Runs `fuel-opt` in `tests/golden/` (paths in messages stay short) and returns
/// its standard error; the exit status must be 2 (bad input).
fn cli_err(args: &[&str], stdin: Option<&str>, env: &[(&str, &str)]) -> Outcome {
    let mut cmd = Command::new(fuel_opt()?);
    in_golden(cmd.args(args));
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd
        .spawn()
        .map_err(|e| Skip(format!("cannot run fuel-opt: {e}")))?;
    if let Some(mut i) = child.stdin.take() {
        use std::io::Write;
        // A case that fails before reading its input may exit first: a
        // broken pipe here is that, and its exit status and message below
        // are what the case checks.
        if let Err(e) = i.write_all(stdin.unwrap_or("").as_bytes()) {
            assert_eq!(e.kind(), std::io::ErrorKind::BrokenPipe, "{e}");
        }
    }
    let out = child.wait_with_output().unwrap();
    bad_input_stderr(args, out)
}

/// `bench --world` from a fuel-opt built without MPI (skipped for one built
/// with it, which answers E0841 instead).
fn cli_world_bench_without_mpi() -> Outcome {
    let e = cli_err(&["bench", "--world"], None, &[])?;
    if e.contains("runs under MPI") {
        return Err(Skip("this fuel-opt was built with MPI".into()));
    }
    Ok(e)
}

/// `bench --world` from a fuel-opt built with MPI, started without
/// `mpirun` (skipped for one built without MPI, which answers E0840).
fn cli_world_bench_outside_mpirun() -> Outcome {
    let e = cli_err(&["bench", "--world"], None, &[])?;
    if e.contains("built without it") {
        return Err(Skip(
            "this fuel-opt was built without MPI (`cargo build -p fuel-opt --features mpi` runs this case)".into(),
        ));
    }
    Ok(e)
}

fn cli_plan_bad_world() -> Outcome {
    cli_err(&["plan", "4x[cuda:3..1]"], None, &[])
}

fn cli_plan_no_process_count() -> Outcome {
    cli_err(&["plan", "[cpu:0]"], None, &[])
}

/// [`cli_err`] under `ulimit -v KB` (so the host's figure is the limit, the
/// same on every machine with more memory than that) with extra
/// environment; standard input is empty.
fn cli_err_limited(kb: u64, args: &[&str], env: &[(&str, &str)]) -> Outcome {
    let bin = fuel_opt()?;
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(format!("ulimit -v {kb} && exec \"$0\" \"$@\""))
        .arg(bin)
        .args(args)
        .stdin(std::process::Stdio::null());
    in_golden(&mut cmd);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd
        .output()
        .map_err(|e| Skip(format!("cannot run sh: {e}")))?;
    bad_input_stderr(args, out)
}

/// A scratch file holding `text`, named after the case (messages that name
/// it are edited to `FILE`).
fn scratch_file(case: &str, text: &[u8]) -> PathBuf {
    let p = std::env::temp_dir().join(format!("fuel-catalogue-{case}-{}", std::process::id()));
    std::fs::write(&p, text).unwrap();
    p
}

/// A lowered all-reduce over cpu:0 and cpu:1 (one copy each way, one add).
static CPU_AR: LazyLock<String> =
    LazyLock::new(|| pair_all_reduce("add", "f32[16]", Device::cpu(0), Device::cpu(1)));

fn run_err(point: Option<FaultPoint>, edit: impl FnOnce(&mut Inputs)) -> Outcome {
    let g = text::parse(&CPU_AR).unwrap();
    let exe = exec::compile(&g, &CPU01).unwrap();
    let mut inputs = deterministic_inputs(&g);
    edit(&mut inputs);
    if let Some(p) = point {
        exe.inject_fault(p);
    }
    let e = match exe.run_host(&inputs) {
        Ok(_) => panic!("the run should fail"),
        Err(e) => e,
    };
    fuel_test_support::assert_no_leaks(&exe);
    Ok(coded(&e))
}

type Inputs = std::collections::BTreeMap<String, HostTensor>;

// ---- parse, verify, pipeline (E01 to E03): tests/golden/errors/ -------------

const SMALL: &str = "graph @g {\n  %0 = input \"a\" @cpu:0 : f32[4]\n  %1 = input \"b\" @cpu:1 : f32[4]\n  %2:2 = all_reduce.sum %0, %1 : f32[4]\n  return %2#0, %2#1\n}\n";

/// No input is known to break a pass's invariants (the fuzzers look for
/// one), so the error is built as `lower-collectives` builds it.
fn pass_internal_error() -> Outcome {
    Ok(PassError::internal(
        "lower-collectives",
        "lowering `all_reduce.sum` over [cpu:0, cuda:0]: a value it made has no device",
    )
    .to_string())
}

fn topology_err(text: &str) -> Outcome {
    match Topology::parse(text) {
        Ok(_) => panic!("expected a topology error"),
        Err(e) => Ok(e),
    }
}
fn topology_contradiction() -> Outcome {
    topology_err(
        "link host-vulkan bandwidth=3\nlink host-vulkan latency=40\nlink host-vulkan bandwidth=5\n",
    )
}
fn topology_driver_without_one() -> Outcome {
    topology_err("driver vulkan\n")
}
fn topology_unknown_kind() -> Outcome {
    topology_err("reduce tpu 5\n")
}
fn topology_unknown_link_class() -> Outcome {
    topology_err("link warp bandwidth=1\n")
}

fn topology_bad_process_line() -> Outcome {
    topology_err("process speed=3\n")
}

/// A calibration cache folder of this test's own, holding `text` as the
/// cache file of `cpu:0,cpu:1`; returns the error reading it gives, with
/// the machine's path spelled `$CACHE/cpu-....topo`.
fn cache_err(text: Option<&str>) -> Outcome {
    use fuel_runtime::calibration::{read_file, Key};
    let devs = CPU01;
    let key = Key::for_devices(&devs).unwrap();
    let dir = std::env::temp_dir().join(format!("fuel-catalogue-cal-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(key.file_name());
    let _ = std::fs::remove_dir_all(&path);
    let _ = std::fs::remove_file(&path);
    match text {
        Some(t) => std::fs::write(&path, t.replace("KEY\n", &key.lines())).unwrap(),
        // A folder where the file should be: it exists but cannot be read.
        None => std::fs::create_dir_all(&path).unwrap(),
    }
    let msg = match read_file(&path, &key, &devs) {
        Ok(_) => panic!("expected a cache error"),
        Err(e) => e.to_string(),
    };
    let _ = std::fs::remove_dir_all(&path);
    let _ = std::fs::remove_file(&path);
    Ok(msg.replace(&path.display().to_string(), "$CACHE/calibration/cpu-….topo"))
}
fn cache_unreadable() -> Outcome {
    cache_err(None)
}
fn cache_damaged() -> Outcome {
    cache_err(Some("format 2\ndate 2026-12-01\nKEY\nreduce cpu inf\n"))
}
fn cache_stale() -> Outcome {
    cache_err(Some("format 1\ndate 2026-11-29\nKEY\nreduce cpu 20\n"))
}
fn cache_unwritable() -> Outcome {
    use fuel_runtime::calibration::CacheError;
    // The folder is a file: nothing can be created under it.
    Ok(CacheError::Write {
        path: PathBuf::from("/home/u/.cache/fuel/calibration"),
        why: "Not a directory (os error 20)".into(),
    }
    .to_string())
}

// ---- collectives (E04) ------------------------------------------------------

fn group_empty() -> Outcome {
    group_err(DeviceGroup::new(Vec::new()))
}
fn group_no_shards() -> Outcome {
    let group = DeviceGroup::new(CPU01).unwrap();
    group_err(group.all_reduce(&[], ReduceOp::Sum))
}
fn group_shard_count() -> Outcome {
    let lg = LazyGraph::new("g");
    let group = DeviceGroup::new([Device::cpu(0), Device::cpu(1), Device::cpu(2)]).unwrap();
    group_err(group.all_reduce(&shards(&lg, &CPU01, &f32s(&[4])), ReduceOp::Sum))
}
fn group_mixed_graphs() -> Outcome {
    let (a, b) = (LazyGraph::new("a"), LazyGraph::new("b"));
    let group = DeviceGroup::new(CPU01).unwrap();
    let xs = [
        a.input("x", Device::cpu(0), f32s(&[4])),
        b.input("y", Device::cpu(1), f32s(&[4])),
    ];
    group_err(group.all_reduce(&xs, ReduceOp::Sum))
}
fn group_dtype_mismatch() -> Outcome {
    let lg = LazyGraph::new("g");
    let group = DeviceGroup::new(CPU01).unwrap();
    let xs = [
        lg.input("x", Device::cpu(0), f32s(&[4])),
        lg.input("y", Device::cpu(1), TensorType::new(DType::I32, &[4])),
    ];
    group_err(group.all_reduce(&xs, ReduceOp::Sum))
}
fn group_shape_mismatch() -> Outcome {
    let lg = LazyGraph::new("g");
    let group = DeviceGroup::new(CPU01).unwrap();
    let xs = [
        lg.input("x", Device::cpu(0), f32s(&[4])),
        lg.input("y", Device::cpu(1), f32s(&[2, 2])),
    ];
    group_err(group.all_reduce(&xs, ReduceOp::Sum))
}
fn group_wrong_device() -> Outcome {
    let lg = LazyGraph::new("g");
    let group = DeviceGroup::new([Device::cpu(0), Device::vulkan(0)]).unwrap();
    group_err(group.all_reduce(&shards(&lg, &CPU01, &f32s(&[4])), ReduceOp::Sum))
}
fn group_root_out_of_range() -> Outcome {
    let lg = LazyGraph::new("g");
    let group = DeviceGroup::new(CPU01).unwrap();
    group_err(group.reduce(&shards(&lg, &CPU01, &f32s(&[4])), ReduceOp::Sum, 2))
}
fn group_axis_out_of_range() -> Outcome {
    let lg = LazyGraph::new("g");
    let group = DeviceGroup::new(CPU01).unwrap();
    group_err(group.all_gather(&shards(&lg, &CPU01, &f32s(&[4, 2])), 2))
}
fn group_gather_shape_mismatch() -> Outcome {
    let lg = LazyGraph::new("g");
    let group = DeviceGroup::new(CPU01).unwrap();
    let xs = [
        lg.input("x", Device::cpu(0), f32s(&[2, 3])),
        lg.input("y", Device::cpu(1), f32s(&[1, 4])),
    ];
    group_err(group.all_gather(&xs, 0))
}
fn group_split_count() -> Outcome {
    let lg = LazyGraph::new("g");
    let group = DeviceGroup::new(CPU01).unwrap();
    let xs = shards(&lg, &CPU01, &f32s(&[4]));
    group_err(group.reduce_scatter_split(&xs, ReduceOp::Sum, 0, &[1, 1, 2]))
}
fn group_split_sum() -> Outcome {
    let lg = LazyGraph::new("g");
    let group = DeviceGroup::new(CPU01).unwrap();
    let xs = shards(&lg, &CPU01, &f32s(&[4]));
    group_err(group.reduce_scatter_split(&xs, ReduceOp::Sum, 0, &[1, 2]))
}
fn group_all_to_all_split_count() -> Outcome {
    let lg = LazyGraph::new("g");
    let group = DeviceGroup::new(CPU01).unwrap();
    let xs = shards(&lg, &CPU01, &f32s(&[4]));
    group_err(group.all_to_all(&xs, 0, Some(&[2, 2])))
}
fn group_all_to_all_split_sum() -> Outcome {
    let lg = LazyGraph::new("g");
    let group = DeviceGroup::new(CPU01).unwrap();
    let xs = shards(&lg, &CPU01, &f32s(&[4]));
    group_err(group.all_to_all(&xs, 0, Some(&[1, 3, 3, 2])))
}
fn group_not_divisible() -> Outcome {
    let lg = LazyGraph::new("g");
    let group = DeviceGroup::new(CPU01).unwrap();
    group_err(group.reduce_scatter(&shards(&lg, &CPU01, &f32s(&[0])), ReduceOp::Sum, 0))
}

/// Three processes (threads on `HostDriver`) join a world group in group
/// `name`, each through `join(rank, communicator)`; what each gave back.
fn world_joins(
    name: &str,
    join: fn(
        usize,
        &fuel_collective::DriverCommunicator<HostDriver>,
    ) -> Option<fuel_collective::CollectiveError>,
) -> Vec<Option<fuel_collective::CollectiveError>> {
    let id = driver_group(name);
    let ranks: Vec<_> = (0..3)
        .map(|rank| {
            std::thread::spawn(move || {
                let comm =
                    HostDriver::join_with(id, 3, rank, JoinOptions::with_timeout(DRIVER_WAIT))
                        .unwrap();
                let dev = HostDriver::open(Device::cpu(0)).unwrap();
                let c =
                    fuel_collective::DriverCommunicator::<HostDriver>::new(comm, dev, DRIVER_WAIT);
                join(rank, &c)
            })
        })
        .collect();
    ranks.into_iter().map(|h| h.join().unwrap()).collect()
}

/// Process 2 with one device and the others with two; process 0's error.
fn world_device_count() -> Outcome {
    let mut errs = world_joins("catalogue-world", |rank, c| {
        let devs: Vec<Device> = (0..if rank == 2 { 1 } else { 2 })
            .map(Device::cpu)
            .collect();
        fuel_collective::WorldGroup::new(c, devs).err()
    });
    Ok(errs
        .swap_remove(0)
        .expect("process 0 must fail")
        .to_string())
}

fn world_topology() -> Outcome {
    let mut errs = world_joins("catalogue-world-topology", |rank, c| {
        // Process 2 was given another topology file.
        let file = if rank == 2 {
            "link host-host bandwidth=20 latency=1\n"
        } else {
            "link host-host bandwidth=10 latency=1\n"
        };
        let topo = Topology::parse(file).unwrap();
        fuel_collective::WorldGroup::with_topology(c, [Device::cpu(0)], &topo).err()
    });
    assert!(errs.iter().all(Option::is_some), "every process must fail");
    Ok(coded(&errs.swap_remove(0).expect("process 0 must fail")))
}

fn world_process_out_of_range() -> Outcome {
    let e = fuel_collective::WorldProcess::new(
        2,
        2,
        1,
        [Device::cpu(0)],
        fuel_graph_ext::DeviceKind::Cpu,
        &Topology::default(),
    )
    .err()
    .expect("process 2 of 2 must be refused");
    Ok(coded(&e))
}

// ---- devices (E05) ----------------------------------------------------------

fn device_not_listed() -> Outcome {
    compile_err(&CPU_AR, &[Device::cpu(0)])
}
fn vulkan_no_driver() -> Outcome {
    // Without a loader at all the child would give another reason.
    need_vulkan(&[Device::vulkan(0)])?;
    // The loader reads VK_ICD_FILENAMES when it starts, so this runs in a child.
    cli_err(
        &["-", "--run"],
        Some(VK_ONLY),
        &[
            ("VK_ICD_FILENAMES", "/nonexistent.json"),
            ("VK_DRIVER_FILES", "/nonexistent.json"),
        ],
    )
}
const VK_ONLY: &str = "graph @v {\n  %0 = input \"a\" @vulkan:0 : f32[4]\n  %1 = add %0, %0 @vulkan:0 : f32[4]\n  return %1\n}\n";
fn vulkan_index_too_high() -> Outcome {
    need_vulkan(&[Device::vulkan(0)])?;
    compile_err(&VK_ONLY.replace("vulkan:0", "vulkan:9"), &[])
}
fn vulkan_import_bad_setting() -> Outcome {
    need_vulkan(&[Device::vulkan(0)])?;
    // The setting is read when a device opens, so this runs in a child.
    cli_err(
        &["-", "--run"],
        Some(VK_ONLY),
        &[("FUEL_VULKAN_IMPORT", "yes")],
    )
}
fn cuda_pin_bad_setting() -> Outcome {
    // Checked before any work, so a host graph shows it on any machine.
    cli_err(&["-", "--run"], Some(SMALL), &[("FUEL_CUDA_PIN", "yes")])
}
fn spin_bad_setting() -> Outcome {
    // Checked before any work, so a host graph shows it on any machine.
    cli_err(&["-", "--run"], Some(SMALL), &[("FUEL_SPIN_US", "lots")])
}
fn cuda_not_installed() -> Outcome {
    if exec::discover().has(Device::cuda(0)) {
        return Err(Skip("this machine has a CUDA GPU".into()));
    }
    compile_err(&VK_ONLY.replace("vulkan:0", "cuda:0"), &[])
}

// ---- dtypes (E06) -----------------------------------------------------------

fn dtype_u8_on_vulkan() -> Outcome {
    need_vulkan(&[Device::vulkan(0)])?;
    compile_err(&VK_ONLY.replace("f32", "u8"), &[])
}
fn dtype_i16_on_vulkan() -> Outcome {
    need_vulkan(&[Device::vulkan(0)])?;
    compile_err(&VK_ONLY.replace("f32", "i16"), &[])
}

fn vulkan_divisor_past_32_bits() -> Outcome {
    need_vulkan(&[Device::vulkan(0)])?;
    compile_err("graph @g {\n  %0 = input \"a\" @vulkan:0 : i32[4]\n  %1 = div %0 {by=4294967296} @vulkan:0 : i32[4]\n  return %1\n}\n", &[])
}

fn cuda_float_divisor_too_large() -> Outcome {
    if !fuel_test_support::devices_or_skip("error_catalogue", &[Device::cuda(0)]) {
        return Err(Skip("CUDA is unavailable".into()));
    }
    compile_err("graph @g {\n  %0 = input \"a\" @cuda:0 : f32[4]\n  %1 = div %0 {by=16777216} @cuda:0 : f32[4]\n  return %1\n}\n", &[])
}

// ---- execution (E07) --------------------------------------------------------

fn exec_leftover_collective() -> Outcome {
    compile_err(SMALL, &[])
}
fn exec_copy_across_vendors() -> Outcome {
    compile_err("graph @x {\n  %0 = input \"a\" @vulkan:0 : f32[4]\n  %1 = copy %0 -> vulkan:1 : f32[4]\n  return %1\n}\n", &[])
}
fn exec_injected_copy() -> Outcome {
    run_err(Some(FaultPoint::Copy { nth: 1 }), |_| {})
}
fn exec_injected_kernel() -> Outcome {
    run_err(Some(FaultPoint::Kernel { nth: 0 }), |_| {})
}
fn exec_injected_alloc() -> Outcome {
    // Allocation 0 and 1 are the two inputs, 2 the copy's destination.
    run_err(Some(FaultPoint::Alloc { nth: 2 }), |_| {})
}
fn exec_missing_input() -> Outcome {
    run_err(None, |i| {
        i.remove("b");
    })
}
fn exec_input_type() -> Outcome {
    run_err(None, |i| {
        let t = i.get_mut("b").unwrap();
        t.ty = TensorType::new(DType::I32, &[16]);
    })
}
fn exec_input_size() -> Outcome {
    run_err(None, |i| {
        let t = i.get_mut("b").unwrap();
        *t = HostTensor::new(t.ty.clone(), t.to_f64()[..12].to_vec());
    })
}
fn interp_input_length() -> Outcome {
    let g = text::parse(&CPU_AR).unwrap();
    let mut inputs = deterministic_inputs(&g);
    let t = inputs.get_mut("a").unwrap();
    let mut longer = t.to_f64();
    longer.push(1.0);
    *t = HostTensor::new(t.ty.clone(), longer);
    match interpret(&g, &inputs) {
        Ok(_) => panic!("expected the interpreter to refuse"),
        Err(e) => Ok(coded(&e)),
    }
}

fn typed_data_of_the_wrong_type() -> Outcome {
    let t = exec::Tensor::from_slice(&[2], &[1.5f32, 2.5]).unwrap();
    match t.to_vec::<half::f16>() {
        Ok(_) => panic!("expected a wrong element type"),
        Err(e) => Ok(coded(&e)),
    }
}
fn typed_data_of_the_wrong_length() -> Outcome {
    match HostTensor::from_slice(&[2, 3], &[1i64, 2, 3, 4]) {
        Ok(_) => panic!("expected a wrong length"),
        Err(e) => Ok(coded(&e)),
    }
}

/// A graph `s = a + b` on cpu:0 with `s` named "s", and the results of
/// one run of it (the cases of issue 18's typed outputs).
fn named_sum() -> (LazyGraph, fuel_graph_ext::LazyTensor, Vec<exec::Tensor>) {
    let graph = LazyGraph::new("sum");
    let ty = TensorType::new(DType::F32, &[2]);
    let a = graph.input("a", Device::cpu(0), ty.clone());
    let b = graph.input("b", Device::cpu(0), ty);
    let s = a.add(&b).unwrap();
    graph.output_named("s", &s).unwrap();
    let exe = exec::compile(&graph.snapshot(), &[]).unwrap();
    let t = exec::Tensor::from_slice(&[2], &[1.0f32, 2.0]).unwrap();
    let inputs = [("a".to_string(), t.clone()), ("b".to_string(), t)].into();
    let results = exe.run(&inputs).unwrap();
    (graph, s, results)
}
fn output_name_taken() -> Outcome {
    let (graph, s, _) = named_sum();
    Ok(coded(&graph.output_named("s", &s).unwrap_err()))
}
fn exec_unknown_input() -> Outcome {
    let graph = LazyGraph::new("sum");
    let ty = TensorType::new(DType::F32, &[2]);
    let a = graph.input("grad0", Device::cpu(0), ty.clone());
    let b = graph.input("grad1", Device::cpu(0), ty);
    graph.output(&a.add(&b).unwrap()).unwrap();
    let exe = exec::compile(&graph.snapshot(), &[]).unwrap();
    let t = exec::Tensor::from_slice(&[2], &[1.0f32, 2.0]).unwrap();
    let inputs = [
        ("grad0".to_string(), t.clone()),
        ("grad1".to_string(), t.clone()),
        ("grad_1".to_string(), t),
    ]
    .into();
    Ok(coded(&exe.run(&inputs).unwrap_err()))
}
fn results_count() -> Outcome {
    let (graph, s, results) = named_sum();
    graph.output(&s.add(&s).unwrap()).unwrap();
    Ok(coded(&graph.results(results).unwrap_err()))
}
fn results_of_another_graph() -> Outcome {
    let (graph, _, results) = named_sum();
    let other = LazyGraph::new("other");
    let x = other.input("a", Device::cpu(0), TensorType::new(DType::F32, &[2]));
    let out = graph.results(results).unwrap();
    Ok(coded(&out.get(&x).unwrap_err()))
}
fn results_not_an_output() -> Outcome {
    let (graph, s, results) = named_sum();
    let out = graph.results(results).unwrap();
    Ok(coded(&out.get(&s.add(&s).unwrap()).unwrap_err()))
}
fn results_unknown_name() -> Outcome {
    let (graph, _, results) = named_sum();
    let out = graph.results(results).unwrap();
    Ok(coded(&out.named("sum").unwrap_err()))
}

fn spmd_mean_on_nccl() -> Outcome {
    use fuel_collective::{Communicator, DriverCommunicator};
    let gpu = Device::cuda(0);
    if !fuel_test_support::devices_or_skip("error_catalogue", &[gpu]) {
        return Err(Skip("CUDA is unavailable".into()));
    }
    let dev = NcclDriver::open(gpu).map_err(|e| Skip(format!("NCCL: {e}")))?;
    let id = NcclDriver::group_id(&CommunicationId::new("catalogue-mean"))
        .map_err(|e| Skip(format!("NCCL: {e}")))?;
    let comm = NcclDriver::join_on(
        &dev,
        id,
        1,
        0,
        JoinOptions::with_timeout(Duration::from_secs(30)),
    )
    .map_err(|e| Skip(format!("NCCL: {e}")))?;
    let c = DriverCommunicator::<NcclDriver>::new(comm, dev, Duration::from_secs(30));
    let g = LazyGraph::new("rank");
    let x = g.input("x", gpu, f32s(&[4]));
    let m = c.all_reduce(&x, ReduceOp::Mean).unwrap();
    match c.compile(&[&m]) {
        Ok(_) => panic!("expected compile to refuse an NCCL mean"),
        Err(e) => Ok(coded(&e)),
    }
}

fn exec_comm_without_communicator() -> Outcome {
    let src = "graph @rank {\n  %0 = input \"a\" @cpu:0 : f32[4]\n  %1 = comm.all_reduce.sum %0 {comm=4000000000, ranks=2} @cpu:0 : f32[4]\n  return %1\n}\n";
    compile_err(src, &[])
}
fn exec_driver_mean() -> Outcome {
    // Refused before any device is opened, so no GPU is needed.
    let src = "graph @g {\n  %0 = input \"a\" @cuda:0 : f32[4]\n  %1 = input \"b\" @cuda:1 : f32[4]\n  %2 = driver_all_reduce.mean %0, %1 {rank=0} @cuda:0 : f32[4]\n  return %2\n}\n";
    let g = text::parse(src).unwrap();
    let topo = Topology::parse("driver cuda\n").unwrap();
    match exec::compile_with(&g, &[], &topo) {
        Ok(_) => panic!("expected compile to refuse"),
        Err(e) => Ok(coded(&e)),
    }
}
/// The two messages of a Vulkan device whose wait failed: the run where it
/// failed, then the next run.
fn vulkan_lost_runs() -> Result<(String, String), Skip> {
    need_vulkan(&[Device::vulkan(0)])?;
    let src = "graph @v {\n  %0 = input \"a\" @cpu:0 : f32[4]\n  %1 = copy %0 -> vulkan:0 : f32[4]\n  %2 = mul %1, %1 @vulkan:0 : f32[4]\n  return %2\n}\n";
    let g = text::parse(src).unwrap();
    let exe = exec::compile(&g, &[]).unwrap();
    let inputs = deterministic_inputs(&g);
    exe.inject_fault(FaultPoint::Wait { nth: 0 });
    let run = || match exe.run_host(&inputs) {
        Ok(_) => panic!("the run should fail"),
        Err(e) => {
            fuel_test_support::assert_no_leaks(&exe);
            e.to_string()
        }
    };
    Ok((run(), run()))
}
fn exec_vulkan_wait_failed() -> Outcome {
    vulkan_lost_runs().map(|(first, _)| first)
}
fn exec_vulkan_lost_earlier() -> Outcome {
    vulkan_lost_runs().map(|(_, later)| later)
}
fn interp_world_mismatch() -> Outcome {
    let rank = |op: &str| {
        text::parse(&format!("graph @r {{\n  %0 = input \"a\" @cpu:0 : f32[4]\n  %1 = comm.{op} %0 {{comm=1, ranks=2}} @cpu:0 : f32[4]\n  return %1\n}}\n")).unwrap()
    };
    let graphs = [rank("all_reduce.sum"), rank("all_reduce.max")];
    let inputs = [
        deterministic_inputs(&graphs[0]),
        deterministic_inputs(&graphs[1]),
    ];
    match fuel_graph_ext::interp::interpret_world(&graphs, &inputs) {
        Ok(_) => panic!("expected the world to disagree"),
        Err(e) => Ok(coded(&e)),
    }
}

/// Under `ulimit -v 1 GiB` the host's figure is 1 GiB on any machine with
/// more memory than that, so the messages read the same everywhere.
const ONE_GIB_KB: u64 = 1 << 20;

fn exec_value_too_large() -> Outcome {
    let f = scratch_file("e0713", b"graph @g {\n  %0 = input \"a\" @cpu:0 : f32[1073741824]\n  %1 = add %0, %0 @cpu:0 : f32[1073741824]\n  return %1\n}\n");
    let m = cli_err_limited(ONE_GIB_KB, &[f.to_str().unwrap(), "--run"], &[]);
    let _ = std::fs::remove_file(&f);
    m
}
fn exec_not_enough_memory() -> Outcome {
    let f = scratch_file("e0714", b"graph @g {\n  %0 = input \"a\" @cpu:0 : u8[536870912]\n  %1 = input \"b\" @cpu:1 : u8[536870912]\n  %2 = input \"c\" @cpu:1 : u8[536870912]\n  %3 = copy %0 -> cpu:1 : u8[536870912]\n  %4 = max %1, %2, %3 @cpu:1 : u8[536870912]\n  return %4\n}\n");
    let m = cli_err_limited(ONE_GIB_KB, &[f.to_str().unwrap(), "--run"], &[]);
    let _ = std::fs::remove_file(&f);
    m
}
fn exec_kernel_buffer_too_large() -> Outcome {
    need_vulkan(&[Device::vulkan(0)])?;
    let inst = fuel_runtime::backend::vulkan::Instance::open().unwrap();
    let cap = inst.open_device(Device::vulkan(0)).unwrap().capacity();
    if cap.kernel_buffer.bytes != 134_217_728 {
        return Err(Skip(format!(
            "the documented figures are lavapipe's (maxStorageBufferRange 134217728); this device binds {}",
            cap.kernel_buffer.bytes
        )));
    }
    compile_err("graph @g {\n  %0 = input \"a\" @vulkan:0 : f32[33554433]\n  %1 = add %0, %0 @vulkan:0 : f32[33554433]\n  return %1\n}\n", &[])
}
fn exec_thread_limit() -> Outcome {
    let f = scratch_file("e0716", CPU_AR.as_bytes());
    let m = cli_err_limited(
        2_000_000,
        &[f.to_str().unwrap(), "--run"],
        &[("RUST_MIN_STACK", "4000000000")],
    );
    let _ = std::fs::remove_file(&f);
    // The thread limits are this machine's: shown as N and M.
    m.map(|m| {
        let mut out = String::new();
        let mut rest = m.as_str();
        for (key, shown) in [("ulimit -u: ", "N"), ("threads-max: ", "M")] {
            if let Some(at) = rest.find(key) {
                let (head, tail) = rest.split_at(at + key.len());
                out.push_str(head);
                out.push_str(shown);
                rest = tail.trim_start_matches(|c: char| c.is_ascii_digit());
            }
        }
        out.push_str(rest);
        out
    })
}
fn interp_out_of_memory() -> Outcome {
    let f = scratch_file(
        "e0717",
        b"graph @g {\n  %0 = input \"a\" @cpu:0 : f32[268435456]\n  return %0\n}\n",
    );
    let m = cli_err_limited(ONE_GIB_KB, &[f.to_str().unwrap(), "--interpret"], &[]);
    let _ = std::fs::remove_file(&f);
    m
}
fn exec_region_list() -> Outcome {
    if std::fs::read_to_string("/proc/sys/vm/overcommit_memory").is_ok_and(|m| m.trim() == "1") {
        return Err(Skip("vm.overcommit_memory=1 grants any reservation".into()));
    }
    // Refused while the schedule is built, before any device is opened.
    compile_err("graph @g {\n  %0 = input \"a\" @vulkan:0 : f32[274877906944,2]\n  %1 = slice %0 {axis=1, len=1, start=0} @vulkan:0 : f32[274877906944,1]\n  return %1\n}\n", &[])
}

/// Runs a 4×4 `extern "name"` on cpu:0 whose CPU kernel is `kernel`.
fn extern_run_err(
    name: &str,
    kernel: impl Fn(&mut [u8]) -> Result<usize, String> + Send + Sync + 'static,
) -> Outcome {
    fuel_runtime::kernels::register_cpu(name, move |_, _, out| kernel(out));
    let src = format!("graph @g {{\n  %0 = input \"a\" @cpu:0 : f32[4,4]\n  %1 = extern \"{name}\" %0 @cpu:0 : f32[4,4]\n  return %1\n}}\n");
    let g = text::parse(&src).unwrap();
    let exe = exec::compile(&g, &[]).unwrap();
    Ok(exe
        .run_host(&deterministic_inputs(&g))
        .unwrap_err()
        .to_string())
}
fn extern_no_kernel() -> Outcome {
    compile_err("graph @g {\n  %0 = input \"a\" @cpu:0 : f32[4,4]\n  %1 = extern \"layernorm\" %0 @cpu:0 : f32[4,4]\n  return %1\n}\n", &[])
}
fn extern_kernel_fails() -> Outcome {
    extern_run_err("attention", |_| {
        Err("the sequence is longer than 4096".into())
    })
}
fn extern_kernel_short() -> Outcome {
    extern_run_err("rmsnorm", |out| Ok(out.len() / 2))
}
fn extern_kernel_panics() -> Outcome {
    extern_run_err("softmax", |_| {
        panic!("index out of bounds: the len is 16 but the index is 16")
    })
}

// ---- fuel-opt (E08) ---------------------------------------------------------

fn cli_no_input() -> Outcome {
    cli_err(&["--passes", "dce"], None, &[])
}
fn cli_unreadable_file() -> Outcome {
    cli_err(&["missing.fir"], None, &[])
}
fn cli_parse_error() -> Outcome {
    cli_err(
        &["-"],
        Some("graph @g {\n  %0 = input \"a\" @cpu:0 : f32[4\n  return %0\n}\n"),
        &[],
    )
}
fn cli_verify_error() -> Outcome {
    cli_err(&["-"], Some("graph @g {\n  %0 = input \"a\" @cpu:0 : f32[4]\n  %1 = div %0 {by=0} @cpu:0 : f32[4]\n  return %1\n}\n"), &[])
}
fn cli_bad_devices() -> Outcome {
    cli_err_on_ar(&["-", "--run", "--devices", "cpu:0,tpu:1"], &[])
}
fn cli_unknown_print_after() -> Outcome {
    cli_err_on_ar(
        &["-", "--passes", "cse,dce"],
        &[("FUEL_PRINT_AFTER", "dce,cse2")],
    )
}
fn cli_bad_topology() -> Outcome {
    let topo = std::env::temp_dir().join("fuel-catalogue.topo");
    std::fs::write(&topo, "staging cuda:0\n").unwrap();
    cli_err_on_ar(&["-", "--topology", topo.to_str().unwrap()], &[])
        .map(|m| m.replace(topo.to_str().unwrap(), "bad.topo"))
}
fn cli_bad_env() -> Outcome {
    cli_err(&["devices"], None, &[("FUEL_VULKAN_DEVICES", "abc")])
}
fn cli_bad_log_filter() -> Outcome {
    cli_err(&["devices"], None, &[("FUEL_LOG", "=[")])
}
fn cli_input_too_large() -> Outcome {
    cli_err(
        &["passes/cse-fanout.fir", "--max-input-size", "64"],
        None,
        &[],
    )
}
fn cli_input_is_a_device() -> Outcome {
    cli_err(&["/dev/zero"], None, &[])
}
fn cli_input_has_nul() -> Outcome {
    cli_err(&["-"], Some("graph @g {\0"), &[])
}
fn cli_input_not_utf8() -> Outcome {
    let f = scratch_file(
        "e0813",
        b"graph @g {\n  %0 = input \"\xff\" @cpu:0 : f32[4]\n",
    );
    let m = cli_err(&[f.to_str().unwrap()], None, &[]);
    let _ = std::fs::remove_file(&f);
    m.map(|m| m.replace(f.to_str().unwrap(), "FILE"))
}
fn cli_output_fails() -> Outcome {
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .map_err(|e| Skip(format!("no /dev/full: {e}")))?;
    let out = Command::new(fuel_opt()?)
        .arg("passes")
        .stdout(full)
        .output()
        .unwrap();
    bad_input_stderr(&["passes"], out)
}
fn cli_demo_foreign_files() -> Outcome {
    let dir = std::env::temp_dir().join(format!("fuel-catalogue-demo-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("notes.txt"), "mine").unwrap();
    let m = cli_err(
        &[
            "demo",
            "--devices",
            "cpu:0,cpu:1",
            "--out",
            dir.to_str().unwrap(),
        ],
        None,
        &[],
    );
    let _ = std::fs::remove_dir_all(&dir);
    m.map(|m| m.replace(dir.to_str().unwrap(), "out/demo"))
}
fn cli_demo_elements_too_large() -> Outcome {
    cli_err(
        &[
            "demo",
            "--devices",
            "cpu:0,cpu:1",
            "--elements",
            "4611686018427387904",
        ],
        None,
        &[],
    )
}
fn cli_bench_no_sizes() -> Outcome {
    cli_err(&["bench", "--sizes", ""], None, &[])
}
fn cli_bench_plot_unwritable() -> Outcome {
    cli_err(
        &bench_once("cpu:0,cpu:1", &["--plot", "no-such-dir/p.svg"]),
        None,
        &[],
    )
}
fn cli_bench_collective_with_count() -> Outcome {
    cli_err(
        &["bench", "--collective", "all_gather", "--count", "4"],
        None,
        &[],
    )
}
fn cli_flag_the_mode_does_not_use() -> Outcome {
    cli_err(&["demo", "--world", "--algorithm", "ring"], None, &[])
}
fn cli_count_too_large() -> Outcome {
    cli_err(&["bench", "--iters", "18446744073709551615"], None, &[])
}
fn cli_device_index() -> Outcome {
    cli_err_on_ar(&["-", "--run", "--devices", "cuda:-1"], &[])
}
fn cli_bench_too_large() -> Outcome {
    cli_err_limited(
        4 << 20,
        &[
            "bench", "--sizes", "2G", "--iters", "1", "--warmup", "0", "--csv",
        ],
        &[],
    )
}
fn cli_env_not_utf8() -> Outcome {
    use std::os::unix::ffi::OsStrExt;
    let mut cmd = Command::new(fuel_opt()?);
    let args = ["-", "--passes", "dce"];
    in_golden(cmd.args(args))
        .env("FUEL_PRINT_AFTER", std::ffi::OsStr::from_bytes(b"dce\xff"))
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    {
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(CPU_AR.as_bytes())
            .unwrap();
    }
    bad_input_stderr(&args, child.wait_with_output().unwrap())
}

fn cli_stale_cache() -> Outcome {
    use fuel_runtime::calibration::Key;
    let cache = std::env::temp_dir().join(format!("fuel-catalogue-stale-{}", std::process::id()));
    let key = Key::for_devices(&CPU01).unwrap();
    let path = cache.join("calibration").join(key.file_name());
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, format!("format 1\n{}reduce cpu 20\n", key.lines())).unwrap();
    let r = cli_err_on_ar(
        &["-", "--passes", "lower-collectives"],
        &[("FUEL_CACHE_DIR", cache.to_str().unwrap())],
    );
    let _ = std::fs::remove_dir_all(&cache);
    r.map(|m| m.replace(&path.display().to_string(), "$CACHE/calibration/cpu-….topo"))
}

// ---- collective driver (E09) ------------------------------------------------

/// Group names are fixed (not minted per run) so the messages that name
/// them are the same every time; timeouts are the configured ones, never a
/// measured time.
fn driver_group(name: &str) -> HostUniqueId {
    HostDriver::group_id(&CommunicationId::new(name)).unwrap()
}
/// Rank `rank` of a 2-rank host group `id`, joined within `DRIVER_WAIT`.
fn host_rank(id: HostUniqueId, rank: usize) -> HostCommunicator {
    HostDriver::join_with(id, 2, rank, JoinOptions::with_timeout(DRIVER_WAIT))
        .unwrap_or_else(|e| panic!("rank {rank} joins: {e}"))
}
/// Runs rank 1's `peer` on a helper thread and rank 0's `here` on this one;
/// both must fail with the same message. Returns rank 0's result.
fn both_ranks_fail_alike<T, U: Send + 'static>(
    peer: impl FnOnce() -> Result<U, DriverError> + Send + 'static,
    here: impl FnOnce() -> Result<T, DriverError>,
) -> Result<T, DriverError> {
    let peer = std::thread::spawn(peer);
    let got = here();
    let theirs = peer.join().expect("rank 1 panicked");
    assert_eq!(
        theirs.as_ref().err().map(ToString::to_string),
        got.as_ref().err().map(ToString::to_string),
        "both ranks report the same disagreement"
    );
    got
}
fn driver_err<T>(r: Result<T, DriverError>) -> Outcome {
    match r {
        Ok(_) => panic!("expected the driver to refuse"),
        Err(e) => Ok(coded(&e)),
    }
}
/// Runs rank 0 of a 2-rank host group on this thread and rank 1's `other`
/// on a helper thread; returns rank 0's error from an `all_reduce` of
/// `count` f32 elements. Every wait is bounded by `DRIVER_WAIT`.
fn driver_pair(
    name: &'static str,
    count: usize,
    other: impl FnOnce(HostCommunicator) + Send + 'static,
) -> Outcome {
    let id = driver_group(name);
    let peer = std::thread::spawn(move || other(host_rank(id, 1)));
    let comm = host_rank(id, 0);
    let dev = HostDriver::open(Device::cpu(0)).unwrap();
    let src = HostDriver::upload(&dev, &vec![1u8; count * 4]).unwrap();
    let dst = HostDriver::alloc(&dev, count * 4).unwrap();
    let s = HostDriver::comm_stream(&comm);
    HostDriver::all_reduce(
        Call(&comm, &src, &dst, ElemType::F32, s),
        count,
        ReduceOp::Sum,
    )
    .unwrap();
    let got = HostDriver::download(&dst, DRIVER_WAIT);
    drop(comm);
    peer.join().expect("rank 1 panicked");
    driver_err(got)
}
const DRIVER_WAIT: Duration = Duration::from_secs(10);

fn driver_join_timeout() -> Outcome {
    // Rank 0 of 2 joins alone; rank 1 never comes.
    let id = driver_group("catalogue-join");
    driver_err(HostDriver::join_with(
        id,
        2,
        0,
        JoinOptions::with_timeout(Duration::from_millis(100)),
    ))
}
fn driver_bad_rank() -> Outcome {
    let id = driver_group("catalogue-rank");
    driver_err(HostDriver::join_with(
        id,
        2,
        2,
        JoinOptions::with_timeout(Duration::from_millis(100)),
    ))
}
fn driver_unsupported_elem() -> Outcome {
    // Pure: the type mapping runs before any GPU or library is touched.
    driver_err(NcclDriver::data_type(ElemType::Bool, 8))
}
fn driver_partial_element() -> Outcome {
    driver_err(HostDriver::data_type(ElemType::F32, 10))
}
fn driver_mismatch() -> Outcome {
    // Rank 0 reduces 2 elements, rank 1 reduces 3. Each posts its data
    // before reading the other's, so rank 0 always sees rank 1's arguments.
    driver_pair("catalogue-mismatch", 2, |comm| {
        let dev = HostDriver::open(Device::cpu(0)).unwrap();
        let src = HostDriver::upload(&dev, &[1u8; 12]).unwrap();
        let dst = HostDriver::alloc(&dev, 12).unwrap();
        let s = HostDriver::comm_stream(&comm);
        HostDriver::all_reduce(Call(&comm, &src, &dst, ElemType::F32, s), 3, ReduceOp::Sum)
            .unwrap();
        let _ = HostDriver::download(&dst, DRIVER_WAIT);
    })
}
fn driver_peer_gone() -> Outcome {
    // Rank 1 joins, then drops its communicator without taking part.
    driver_pair("catalogue-dropout", 1, drop)
}
fn driver_nccl_missing() -> Outcome {
    match NcclDriver::group_id(&CommunicationId::new("catalogue-nccl")) {
        Ok(_) => Err(Skip("libnccl is present on this machine".into())),
        Err(e @ DriverError::LibraryMissing { .. }) => Ok(coded(&e)),
        Err(e) => Err(Skip(format!("libnccl loads, but: {e}"))),
    }
}
fn driver_bad_timeout() -> Outcome {
    // The variable is set only around this call; no other case reads it.
    std::env::set_var("FUEL_JOIN_TIMEOUT_MS", "0");
    let r = JoinOptions::from_env();
    std::env::remove_var("FUEL_JOIN_TIMEOUT_MS");
    driver_err(r)
}
fn driver_split_disagree() -> Outcome {
    // The agreement round an uneven SPMD all_to_all runs first on NCCL,
    // here over two host ranks: rank 1 holds another split. Both fail
    // with the same message; rank 0's is returned.
    let id = driver_group("catalogue-a2a-agree");
    let rank = move |r: usize, split: [usize; 4]| {
        let dev = HostDriver::open(Device::cpu(0)).unwrap();
        let c = fuel_collective::driver::RankComm::<HostDriver>::new(
            host_rank(id, r),
            dev,
            DRIVER_WAIT,
        );
        c.agree_on_split(&split, &TensorType::new(DType::F32, &[3, 2]), 0)
    };
    driver_err(both_ranks_fail_alike(
        move || rank(1, [1, 3, 2, 1]),
        || rank(0, [1, 2, 2, 1]),
    ))
}
fn driver_split_mismatch() -> Outcome {
    // Both ranks send one f32 element to the other; rank 1 expects two
    // from rank 0. Both fail with the same message; rank 0's is returned.
    let id = driver_group("catalogue-a2a-split");
    let rank = move |r: usize, recv: [usize; 2]| {
        let comm = host_rank(id, r);
        let dev = HostDriver::open(Device::cpu(0)).unwrap();
        let src = HostDriver::upload(&dev, &[0u8; 8]).unwrap();
        let dst = HostDriver::alloc(&dev, 12).unwrap();
        let s = HostDriver::comm_stream(&comm);
        HostDriver::all_to_all(Call(&comm, &src, &dst, ElemType::F32, s), &[1, 1], &recv).unwrap();
        HostDriver::download(&dst, DRIVER_WAIT)
    };
    driver_err(both_ranks_fail_alike(
        move || rank(1, [2, 1]),
        || rank(0, [1, 1]),
    ))
}
