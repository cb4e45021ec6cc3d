//! Follows the README the way a newcomer would: its two commands are the ones
//! CI runs, and the main command works from the workspace root, exits 0 and
//! writes every file it names (with SVGs when graphviz is installed).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The fenced command that follows the line `<label>` in the README.
fn readme_command(label: &str) -> String {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let after = readme
        .split(&format!("\n{label}\n"))
        .nth(1)
        .unwrap_or_else(|| panic!("README has no `{label}` line"));
    let block = after
        .split("```")
        .nth(1)
        .unwrap_or_else(|| panic!("no fenced block after `{label}`"));
    // The first line of a fenced block is its language tag.
    let lines: Vec<&str> = block
        .lines()
        .skip(1)
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    assert_eq!(
        lines.len(),
        1,
        "`{label}` must be exactly one command: {lines:?}"
    );
    lines[0].to_string()
}

#[test]
fn readme_commands_are_the_ones_ci_runs() {
    assert_eq!(
        readme_command("Main job:"),
        "cargo run --release --bin fuel-opt -- demo"
    );
    let test_cmd = readme_command("Tests:");
    let ci = std::fs::read_to_string(root().join(".ci/run")).unwrap();
    assert!(
        ci.lines().any(|l| l.trim() == test_cmd),
        ".ci/run does not run the README's test command `{test_cmd}`"
    );
}

#[test]
fn readme_main_command_works_from_a_clone() {
    let cmd = readme_command("Main job:");
    let args: Vec<&str> = cmd.split_whitespace().collect();
    assert_eq!(args[0], "cargo");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    // The demo calibrates on its first run: into a cache of this test's
    // own, not the user's.
    let cache = std::env::temp_dir().join(format!("fuel-readme-cache-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&cache);
    let out = Command::new(cargo)
        .args(&args[1..])
        .current_dir(root())
        .env("FUEL_CACHE_DIR", &cache)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "`{cmd}` failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("results match the reference interpreter"),
        "{stdout}"
    );
    let files: Vec<PathBuf> = fuel_test_support::report::listed_files(&stdout)
        .into_iter()
        .map(|l| root().join(l))
        .collect();
    // The input and the lowering always change the graph, so they are
    // written as text, DOT and SVG; every other pass of the default
    // pipeline is either written too or reported as "no change".
    for stem in ["00-input", "-lower-collectives"] {
        for ext in ["fir", "dot"] {
            assert!(
                files.iter().any(|f| {
                    let name = f.file_name().unwrap().to_string_lossy();
                    name.contains(stem) && name.ends_with(ext)
                }),
                "expected a {stem} .{ext} dump: {files:?}"
            );
        }
    }
    for pass in fuel_collective::DEFAULT_PIPELINE.split(',') {
        let pass = pass.split('{').next().unwrap().trim();
        let written = files
            .iter()
            .any(|f| f.to_string_lossy().ends_with(&format!("-{pass}.fir")));
        let unchanged = stdout.contains(&format!("-{pass}: no change"));
        assert!(
            written || unchanged,
            "pass {pass} is neither dumped nor reported as no change:\n{stdout}"
        );
    }
    for f in &files {
        assert!(f.exists(), "{} is named but missing", f.display());
    }
    if Command::new("dot").arg("-V").output().is_err() {
        fuel_test_support::skip_line(format_args!(
            "SKIP: SVG check: graphviz `dot` is not installed (apt-get install graphviz)"
        ));
        return;
    }
    for dot in files
        .iter()
        .filter(|f| f.extension().is_some_and(|x| x == "dot"))
    {
        let svg = dot.with_extension("svg");
        assert!(
            files.contains(&svg),
            "{} has no SVG in the report",
            dot.display()
        );
        let text = std::fs::read_to_string(&svg).unwrap();
        assert!(text.contains("<svg"), "{} is not an SVG", svg.display());
    }
}
