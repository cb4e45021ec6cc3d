//! A property test that drives `fuel-opt` like a hostile user: random
//! subcommands and flags whose values come from a list of troublemakers
//! (empty strings, negative and huge numbers, terminal escapes, very long
//! text, devices such as `/dev/zero`), with random bad environment
//! variables, each run in a child process under a 4 GB address-space limit
//! and a 60 s timeout. Every run must end with exit 0, 1 or 2: never a
//! panic, an abort, a signal, a hang, or an error message that echoes a
//! raw escape or runs past 64 KiB.
//!
//! Sizes are either tiny or far past any machine, never a real workload,
//! so no case does heavy work; what the test looks for is how bad values
//! are refused, not how big ones run.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use proptest::prelude::*;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};

const BIN: &str = env!("CARGO_BIN_EXE_fuel-opt");

/// Numbers and sizes: tiny, or past any machine.
const NUMBERS: &[&str] = &[
    "",
    "0",
    "1",
    "3",
    "64",
    "-1",
    "1e3",
    "0x10",
    "4294967296",
    "4611686018427387904",
    "9223372036854775807",
    "18446744073709551615",
    "99999999999999999999999",
    "1099511627776",
    "1K",
    "0K",
    "2T",
    "16777216G",
    "9007199254740992G",
    "4K..2K",
    "1K..1K",
    ",",
    "..",
];

/// Text values: names, devices, pipelines, escapes.
const WORDS: &[&str] = &[
    "",
    "cpu:0",
    "cpu:0,cpu:1",
    "cpu:0,,cpu:1",
    "cuda:-1",
    "cuda:0",
    "vulkan:99",
    "vulkan:0,vulkan:1",
    "cpu:4294967296",
    "gpu:0",
    "f32",
    "f8",
    "u8",
    "sum",
    "avg",
    "auto",
    "snake",
    "ring",
    "cse,dce",
    "lower-collectives{algorithm=tree, arity=1}",
    "lower-collectives{",
    "dce,",
    "\u{1b}[2J\u{1b}[31m",
    "\u{202e}evil",
    "/dev/zero",
    "/dev/full",
    "/nonexistent/x",
];

/// One value of each kind, as the strategy draws them.
#[derive(Clone, Debug)]
enum Value {
    Number(usize),
    Word(usize),
    Long(usize),
}

impl Value {
    fn text(&self) -> String {
        match self {
            Value::Number(i) => NUMBERS[i % NUMBERS.len()].to_string(),
            Value::Word(i) => WORDS[i % WORDS.len()].to_string(),
            Value::Long(n) => "z".repeat(1000 + n % 20_000),
        }
    }
}

fn value() -> impl Strategy<Value = Value> {
    prop_oneof![
        3 => (0..NUMBERS.len()).prop_map(Value::Number),
        3 => (0..WORDS.len()).prop_map(Value::Word),
        1 => any::<usize>().prop_map(Value::Long),
    ]
}

/// The input files a plain `fuel-opt FILE` run may get.
const FILES: &[&str] = &[
    "graph @g {\n  %0 = input \"a\" @cpu:0 : f32[4]\n  %1 = input \"b\" @cpu:1 : f32[4]\n  %2:2 = all_reduce.sum %0, %1 : f32[4]\n  return %2#0, %2#1\n}\n",
    "graph @g {\n  %0 = input \"a\" @cpu:0 : f32[4611686018427387904]\n  return %0\n}\n",
    "graph @g {\n  %0 = input \"a\" @cpu:0 : u8[1099511627776]\n  %1 = input \"b\" @cpu:1 : u8[1099511627776]\n  %2:2 = all_gather %0, %1 {axis=0} : u8[2199023255552]\n  return %2#0\n}\n",
    "graph @g {\n  %0 = input \"a\" @vulkan:0 : f32[4]\n  %1 = input \"b\" @vulkan:1 : f32[4]\n  %2:2 = all_reduce.max %0, %1 : f32[4]\n  return %2#0, %2#1\n}\n",
    "graph @g {\n  %0 = input \"x\" @cpu:0 : f32[4]\n  %1 = input \"x\" @cpu:0 : i64[4]\n  return %0, %1\n}\n",
    "graph @g {\n  %0 = input \"a\u{1b}[2J\" @cpu:0 : f32[4]\n  %1 = frob\u{7} %0\n  return %1\n}\n",
];

/// Each subcommand's flags (0: a file, 1: `devices`, 2: `passes`, 3:
/// `demo`, 4: `bench`): the name, values that are fine for it, and
/// whether it takes a number. Half the draws take a fine value, so that
/// runs get past the first refusal to the flags after it.
type Flag = (&'static str, &'static [&'static str], bool);
const FLAGS: [&[Flag]; 5] = [
    &[
        (
            "--passes",
            &[
                "cse,dce",
                "insert-cross-device-copies,split-cross-vendor-copies",
            ],
            false,
        ),
        ("--devices", &["cpu:0,cpu:1"], false),
        ("--emit", &["text", "dot"], false),
        ("--topology", &["/dev/null"], false),
        ("--max-input-size", &["1M", "4K"], true),
        ("--dump-dir", &["dumps"], false),
    ],
    &[],
    &[],
    &[
        ("--devices", &["cpu:0,cpu:1", "cpu:0,cpu:1,cpu:2"], false),
        ("--elements", &["16", "3"], true),
        ("--dtype", &["f32", "i32", "u8"], false),
        ("--op", &["sum", "max", "mean"], false),
        ("--algorithm", &["auto", "ring", "tree"], false),
        ("--runs", &["1", "0"], true),
    ],
    &[
        ("--devices", &["cpu:0,cpu:1"], false),
        ("--dtype", &["f32", "i64"], false),
        ("--algorithm", &["auto", "star"], false),
        ("--sizes", &["1K", "64..128"], true),
        ("--iters", &["1"], true),
        ("--warmup", &["0", "1"], true),
        ("--topology", &["/dev/null"], false),
    ],
];

/// Switches, added only where the subcommand has them.
const SWITCHES: &[(&str, usize)] = &[
    ("--interpret", 0),
    ("--run", 0),
    ("--print-after-all", 0),
    ("--csv", 4),
];

const ENV: &[&str] = &[
    "FUEL_VULKAN_DEVICES",
    "FUEL_VULKAN_MAPPED",
    "FUEL_DISPATCH",
    "FUEL_JOIN_TIMEOUT_MS",
    "FUEL_COLLECTIVE_TIMEOUT_MS",
    "FUEL_LOG",
    "FUEL_PRINT_AFTER",
    "FUEL_DUMP_DIR",
];

#[derive(Clone, Debug)]
struct Case {
    /// 0: a file, 1: `devices`, 2: `passes`, 3: `demo`, 4: `bench`.
    command: usize,
    file: usize,
    /// (flag, a fine value or a troublemaker, its value if it takes a
    /// word, if it takes a number).
    flags: Vec<(usize, Option<usize>, Value, usize)>,
    switches: Vec<usize>,
    env: Vec<(usize, Value)>,
}

fn case() -> impl Strategy<Value = Case> {
    (
        0..5usize,
        0..FILES.len() + 2,
        proptest::collection::vec(
            (
                0..8usize,
                proptest::option::of(0..4usize),
                value(),
                0..NUMBERS.len(),
            ),
            0..4,
        ),
        proptest::collection::vec(0..SWITCHES.len(), 0..3),
        proptest::collection::vec((0..ENV.len(), value()), 0..2),
    )
        .prop_map(|(command, file, flags, switches, env)| Case {
            command,
            file,
            flags,
            switches,
            env,
        })
}

static RUN: AtomicUsize = AtomicUsize::new(0);

fn scratch() -> PathBuf {
    let n = RUN.fetch_add(1, Ordering::Relaxed);
    let d = std::env::temp_dir().join(format!("fuel-cli-props-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn run(c: &Case) -> Result<(), TestCaseError> {
    let dir = scratch();
    // Each flag once (clap refuses a repeat), the first draw winning; the
    // subcommands' own defaults keep runs short where no flag was drawn.
    let mut flags: Vec<(&str, String)> = Vec::new();
    let own = FLAGS[c.command.min(4)];
    for (f, fine, word, number) in &c.flags {
        let Some(&(flag, good, numeric)) = own.get(f % own.len().max(1)) else {
            continue;
        };
        let v = match fine {
            Some(k) => good[k % good.len()].to_string(),
            None if numeric => NUMBERS[*number].to_string(),
            None => word.text(),
        };
        if !flags.iter().any(|(k, _)| *k == flag) {
            flags.push((flag, v));
        }
    }
    let mut default = |flag: &'static str, value: String| {
        if !flags.iter().any(|(k, _)| *k == flag) {
            flags.push((flag, value));
        }
    };
    let mut args: Vec<String> = Vec::new();
    match c.command {
        0 => {
            let f = match FILES.get(c.file) {
                Some(text) => {
                    let p = dir.join("g.fir");
                    std::fs::write(&p, text).unwrap();
                    p.to_string_lossy().into_owned()
                }
                None if c.file == FILES.len() => "/dev/zero".into(),
                None => dir.to_string_lossy().into_owned(),
            };
            args.push(f);
        }
        1 => args.push("devices".into()),
        2 => args.push("passes".into()),
        3 => {
            args.push("demo".into());
            default("--runs", "1".into());
            default("--elements", "16".into());
            default("--devices", "cpu:0,cpu:1".into());
            args.extend([
                "--out".into(),
                dir.join("out").to_string_lossy().into_owned(),
            ]);
        }
        _ => {
            args.push("bench".into());
            default("--iters", "1".into());
            default("--warmup", "0".into());
            default("--sizes", "1K".into());
        }
    }
    for (flag, v) in &flags {
        args.push(format!("{flag}={v}"));
    }
    for s in &c.switches {
        let (switch, command) = SWITCHES[*s];
        if command == c.command {
            args.push(switch.into());
        }
    }
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg("ulimit -v 4194304 && exec timeout 60 \"$0\" \"$@\"")
        .arg(BIN)
        .args(&args)
        .current_dir(&dir)
        .stdin(Stdio::null())
        .env_remove("FUEL_PRINT_AFTER")
        .env_remove("FUEL_DUMP_DIR")
        .env_remove("FUEL_VULKAN_DEVICES");
    for (e, v) in &c.env {
        cmd.env(ENV[*e], v.text());
    }
    let out = cmd.output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let _ = std::fs::remove_dir_all(&dir);
    let code = out.status.code();
    prop_assert!(
        matches!(code, Some(0..=2)),
        "fuel-opt {args:?} ended with {:?}\n{}",
        out.status,
        &err[..err.len().min(4000)]
    );
    prop_assert!(!err.contains("panicked"), "{args:?}\n{err}");
    prop_assert!(
        err.len() < 64 << 10,
        "{args:?}: {} bytes on stderr",
        err.len()
    );
    prop_assert!(
        !err.contains('\u{1b}'),
        "{args:?}: a raw escape on stderr\n{err:?}"
    );
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn hostile_command_lines_end_with_a_clear_status(c in case()) {
        run(&c)?;
    }
}
