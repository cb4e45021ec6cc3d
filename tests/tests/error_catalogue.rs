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
    CollectiveDriver, CollectiveError, CommunicationId, DeviceGroup, Driver, DriverError, ElemType,
    HostDriver, JoinOptions, NcclDriver,
};
use fuel_graph_ext::exec::{self, FaultPoint};
use fuel_graph_ext::interp::{deterministic_inputs, interpret, HostTensor};
use fuel_graph_ext::pass::PassError;
use fuel_graph_ext::{text, DType, Device, LazyGraph, ReduceOp, TensorType, Topology};
use fuel_test_support::shards;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// A case either produces the message or says why it cannot run here.
type Outcome = Result<String, Skip>;

/// Why a case cannot run on this machine.
struct Skip(String);

/// A case function: produces one documented error.
type Case = fn() -> Outcome;

const CASES: &[(&str, Case)] = &[
    ("E0309", pass_internal_error),
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
    ("E0501", device_not_listed),
    ("E0502", vulkan_no_driver),
    ("E0503", vulkan_index_too_high),
    ("E0504", cuda_not_installed),
    ("E0601", dtype_u8_on_vulkan),
    ("E0602", dtype_bf16_on_vulkan),
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
    ("E0801", cli_no_input),
    ("E0802", cli_unreadable_file),
    ("E0803", cli_parse_error),
    ("E0804", cli_verify_error),
    ("E0805", cli_bad_devices),
    ("E0806", cli_bad_topology),
    ("E0807", cli_unknown_print_after),
    ("E0901", driver_join_timeout),
    ("E0902", driver_bad_rank),
    ("E0903", driver_unsupported_elem),
    ("E0904", driver_partial_element),
    ("E0905", driver_mismatch),
    ("E0906", driver_peer_gone),
    ("E0907", driver_nccl_missing),
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
    let mut produced: Vec<(String, Outcome)> = CASES
        .iter()
        .map(|(id, case)| (id.to_string(), case()))
        .collect();
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
                println!("SKIP: {id}: {why}");
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
        Err(e) => Ok(e.to_string()),
    }
}

fn group_err(r: Result<impl Sized, CollectiveError>) -> Outcome {
    match r {
        Ok(_) => panic!("expected the collective to be refused"),
        Err(e) => Ok(e.to_string()),
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

/// Runs `fuel-opt` in `tests/golden/` (paths in messages stay short) and returns
/// its standard error; the exit status must be 2 (bad input).
fn cli_err(args: &[&str], stdin: Option<&str>, env: &[(&str, &str)]) -> Outcome {
    let mut cmd = Command::new(fuel_opt()?);
    cmd.args(args)
        .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("golden"));
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
        i.write_all(stdin.unwrap_or("").as_bytes()).unwrap();
    }
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "fuel-opt {args:?} should exit 2; stderr:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(String::from_utf8(out.stderr).unwrap())
}

/// A lowered all-reduce over cpu:0 and cpu:1 (one copy each way, one add).
const CPU_AR: &str = "graph @ar {
  %0 = input \"a\" @cpu:0 : f32[16]
  %1 = input \"b\" @cpu:1 : f32[16]
  %2 = copy %1 -> cpu:0 : f32[16]
  %3 = add %0, %2 @cpu:0 : f32[16]
  %4 = copy %3 -> cpu:1 : f32[16]
  return %3, %4
}
";

fn run_err(point: Option<FaultPoint>, edit: impl FnOnce(&mut Inputs)) -> Outcome {
    let g = text::parse(CPU_AR).unwrap();
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
    Ok(e.to_string())
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

// ---- devices (E05) ----------------------------------------------------------

fn device_not_listed() -> Outcome {
    compile_err(CPU_AR, &[Device::cpu(0)])
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
fn dtype_bf16_on_vulkan() -> Outcome {
    need_vulkan(&[Device::vulkan(0)])?;
    compile_err(&VK_ONLY.replace("f32", "bf16"), &[])
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
        i.get_mut("b").unwrap().data.truncate(12);
    })
}
fn interp_input_length() -> Outcome {
    let g = text::parse(CPU_AR).unwrap();
    let mut inputs = deterministic_inputs(&g);
    inputs.get_mut("a").unwrap().data.push(1.0);
    match interpret(&g, &inputs) {
        Ok(_) => panic!("expected the interpreter to refuse"),
        Err(e) => Ok(e.to_string()),
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
        Err(e) => Ok(e.to_string()),
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
        Err(e) => Ok(e.to_string()),
    }
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
    cli_err(
        &["-", "--run", "--devices", "cpu:0,tpu:1"],
        Some(CPU_AR),
        &[],
    )
}
fn cli_unknown_print_after() -> Outcome {
    cli_err(
        &["-", "--passes", "cse,dce"],
        Some(CPU_AR),
        &[("FUEL_PRINT_AFTER", "dce,cse2")],
    )
}
fn cli_bad_topology() -> Outcome {
    let topo = std::env::temp_dir().join("fuel-catalogue.topo");
    std::fs::write(&topo, "staging cuda:0\n").unwrap();
    cli_err(
        &["-", "--topology", topo.to_str().unwrap()],
        Some(CPU_AR),
        &[],
    )
    .map(|m| m.replace(topo.to_str().unwrap(), "bad.topo"))
}

// ---- collective driver (E09) ------------------------------------------------

/// Group names are fixed (not minted per run) so the messages that name
/// them are the same every time; timeouts are the configured ones, never a
/// measured time.
fn driver_group(name: &str) -> HostUniqueId {
    HostDriver::group_id(&CommunicationId::new(name)).unwrap()
}
fn driver_err<T>(r: Result<T, DriverError>) -> Outcome {
    match r {
        Ok(_) => panic!("expected the driver to refuse"),
        Err(e) => Ok(e.to_string()),
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
    let peer = std::thread::spawn(move || {
        let comm = HostDriver::join_with(id, 2, 1, JoinOptions::with_timeout(DRIVER_WAIT))
            .expect("rank 1 joins");
        other(comm);
    });
    let comm = HostDriver::join_with(id, 2, 0, JoinOptions::with_timeout(DRIVER_WAIT))
        .expect("rank 0 joins");
    let dev = HostDriver::open(Device::cpu(0)).unwrap();
    let src = HostDriver::upload(&dev, &vec![1u8; count * 4]).unwrap();
    let dst = HostDriver::alloc(&dev, count * 4).unwrap();
    let s = HostDriver::comm_stream(&comm);
    HostDriver::all_reduce(&comm, &src, &dst, ElemType::F32, count, ReduceOp::Sum, s).unwrap();
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
        HostDriver::all_reduce(&comm, &src, &dst, ElemType::F32, 3, ReduceOp::Sum, s).unwrap();
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
        Err(e @ DriverError::LibraryMissing { .. }) => Ok(e.to_string()),
        Err(e) => Err(Skip(format!("libnccl loads, but: {e}"))),
    }
}
