//! fuel-opt as a user runs it: good input, and every kind of bad input,
//! which must exit non-zero with an error that names the problem.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::process::{Command, Output, Stdio};

fn fuel_opt(args: &[&str], stdin: Option<&str>) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_fuel-opt"));
    cmd.args(args)
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."));
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd.env_remove("FUEL_PRINT_AFTER")
        .env_remove("FUEL_DUMP_DIR");
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
        "/../examples/mixed.fir"
    ))
    .unwrap();
    let out = fuel_opt(&["-", "--passes", PIPELINE, "--emit", "dot"], Some(&src));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let dot = text(&out.stdout);
    assert!(dot.starts_with("digraph \"mixed\" {"), "{dot}");
    assert!(dot.contains("subgraph cluster_"), "{dot}");
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
    cmd.current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."));
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

/// Each bad input: exit code 2, no panic, and a message naming the problem.
#[test]
fn bad_input_is_an_error_not_a_panic() {
    let good = "graph @g {\n  %0 = input \"a\" @cpu:0 : f32[4]\n  return %0\n}\n";
    let cases: &[(&[&str], Option<&str>, &str)] = &[
        (&["-"], Some("graph @g {\n  %0 = input \"a\" @cpu:0 : f32[4\n}\n"), "2:32: expected `,` or `]`"),
        (&["-"], Some("hello"), "1:1: expected `graph @name {`"),
        (&["-", "--passes", "frobnicate"], Some(good), "unknown pass `frobnicate`; known passes: cse, dce"),
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
