//! The golden harness.
//!
//! A golden case is `tests/golden/<case>.fir` whose first line says what to
//! do with the graph below it: `// RUN: --passes <pipeline>` runs a
//! pipeline, `// RUN: --verify structural|placement` only verifies the
//! graph at that level, and either may add `--topology <file>` (relative to
//! the case's folder), and a `--passes` case may add `--before`, which pins
//! the input's DOT too, as `<case>.in.dot` (the input's text is the case
//! itself). Its expected outputs sit beside it: `<case>.out.fir`
//! and `<case>.out.dot` when it succeeds, or `<case>.out.err` when it must
//! fail (a graph that does not parse, a topology file that does not, a bad
//! pipeline, a failing pass or verifier). A case that must fail to parse
//! may leave the RUN line out, so the line numbers in its message are the
//! file's own: the error catalogue's parse cases are written that way.
//! Besides comparing text, every successful pipeline case verifies the
//! output and checks with the reference interpreter that the output
//! computes what the input did, so a golden pins the graph and its meaning.
//! `UPDATE_GOLDEN=1 cargo test` rewrites the expected files; CI never sets
//! it.

use fuel_graph_ext::interp::{deterministic_inputs, interpret};
use fuel_graph_ext::pass::DebugOptions;
use fuel_graph_ext::verify::{verify, Level};
use fuel_graph_ext::{dot, text, Graph, Topology};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The root of the golden cases.
pub fn golden_dir() -> PathBuf {
    // This crate is `tests/support`; the cases are in `tests/golden`.
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap_or(Path::new(".."))
        .join("golden")
}

/// What a case's `// RUN:` line asks for.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunLine {
    /// The pipeline string (`--passes`); empty for a `--verify` case.
    pub passes: String,
    /// `--verify`: verify the input at this level instead of running passes.
    pub verify: Option<Level>,
    /// A topology file, relative to the case's folder.
    pub topology: Option<String>,
    /// `--before`: also pin the input's DOT (`<case>.in.dot`).
    pub before: bool,
}

/// Parses `// RUN: --passes <pipeline> [--topology <file>]` or
/// `// RUN: --verify structural|placement [--topology <file>]`.
pub fn parse_run_line(first_line: &str) -> Result<RunLine, String> {
    let rest = first_line.trim().strip_prefix("// RUN:").ok_or_else(|| {
        format!("the first line must be `// RUN: --passes <pipeline>`, found `{first_line}`")
    })?;
    let mut run = RunLine::default();
    let mut parts = rest.split(" --").map(str::trim).filter(|s| !s.is_empty());
    let mut saw_passes = false;
    for p in parts.by_ref() {
        let p = p.strip_prefix("--").unwrap_or(p);
        if p == "before" {
            run.before = true;
            continue;
        }
        match p.split_once(' ') {
            Some(("passes", v)) => {
                run.passes = v.trim().to_string();
                saw_passes = true;
            }
            Some(("verify", v)) => {
                run.verify = Some(match v.trim() {
                    "structural" => Level::Structural,
                    "placement" => Level::Placement,
                    other => {
                        return Err(format!(
                            "unknown level `--verify {other}`: expected structural or placement"
                        ))
                    }
                })
            }
            Some(("topology", v)) => run.topology = Some(v.trim().to_string()),
            _ => {
                return Err(format!(
                "unknown RUN argument `--{p}`: expected --passes, --verify, --topology or --before"
            ))
            }
        }
    }
    match (saw_passes, run.verify) {
        (false, None) => {
            Err("the RUN line needs `--passes <pipeline>` or `--verify <level>`".into())
        }
        (true, Some(_)) => Err("the RUN line takes `--passes` or `--verify`, not both".into()),
        (false, Some(_)) if run.before => {
            Err("`--before` goes with `--passes`: a `--verify` case pins its input already".into())
        }
        _ => Ok(run),
    }
}

/// Every golden case under `dir`, recursively, sorted.
pub fn cases(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "fir")
                && !p.to_string_lossy().ends_with(".out.fir")
            {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// The outcome of one case: the actual files, and any semantic failure.
pub struct CaseRun {
    /// (extension, actual text) for each expected file.
    pub files: Vec<(&'static str, String)>,
    /// Verifier or interpreter disagreements.
    pub problems: Vec<String>,
}

/// Runs one case and returns what it produced.
pub fn run_case(path: &Path) -> Result<CaseRun, String> {
    let src = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let first = src.lines().next().unwrap_or("");
    let run = if first.trim_start().starts_with("// RUN:") {
        Some(parse_run_line(first)?)
    } else {
        None
    };
    let failed = |e: &dyn std::fmt::Display| {
        Ok(CaseRun {
            files: vec![("err", format!("{e}\n"))],
            problems: vec![],
        })
    };
    let input = match text::parse(&src) {
        Ok(g) => g,
        Err(e) => return failed(&e),
    };
    let run = run.ok_or_else(|| {
        format!(
            "the first line must be `// RUN: --passes <pipeline>` or `// RUN: --verify <level>`, \
             found `{first}`; only a case that fails to parse may leave it out"
        )
    })?;
    let topo = match &run.topology {
        None => Topology::default(),
        Some(f) => {
            let p = path.parent().unwrap_or(Path::new(".")).join(f);
            let t = std::fs::read_to_string(&p)
                .map_err(|e| format!("cannot read {}: {e}", p.display()))?;
            match Topology::parse(&t) {
                Ok(t) => t,
                Err(e) => return failed(&e),
            }
        }
    };
    if let Some(level) = run.verify {
        return match verify(&input, level, &topo) {
            Err(e) => failed(&e),
            Ok(()) => Ok(CaseRun {
                files: vec![("fir", text::print(&input)), ("dot", dot::to_dot(&input))],
                problems: vec![],
            }),
        };
    }
    let topo = Arc::new(topo);
    let mut g = input.clone();
    if let Err(e) =
        fuel_collective::run_pipeline(&mut g, &run.passes, topo.clone(), DebugOptions::verifying())
    {
        return failed(&e);
    }
    let mut problems = Vec::new();
    if let Err(e) = verify(&g, Level::Placement, &topo) {
        problems.push(format!("output does not verify:\n{e}"));
    }
    problems.extend(same_meaning(&input, &g).err());
    let mut files = vec![("fir", text::print(&g)), ("dot", dot::to_dot(&g))];
    if run.before {
        files.push(("in.dot", dot::to_dot(&input)));
    }
    Ok(CaseRun { files, problems })
}

/// Checks with the reference interpreter that `after` computes what `before`
/// did, on the deterministic inputs of `before`.
pub fn same_meaning(before: &Graph, after: &Graph) -> Result<(), String> {
    let inputs = deterministic_inputs(before);
    let want = interpret(before, &inputs).map_err(|e| format!("interpreting the input: {e}"))?;
    let got = interpret(after, &inputs).map_err(|e| format!("interpreting the output: {e}"))?;
    if want.len() != got.len() {
        return Err(format!(
            "the output returns {} values, the input {}",
            got.len(),
            want.len()
        ));
    }
    for (k, (g, w)) in got.iter().zip(&want).enumerate() {
        g.check_same(w).map_err(|e| format!("result {k}: {e}"))?;
    }
    Ok(())
}

/// Runs every case under `dir`; returns a report of all failures, or `Ok`.
/// With `UPDATE_GOLDEN=1` expected files are (re)written instead.
pub fn check_dir(dir: &Path) -> Result<usize, String> {
    let bless = std::env::var("UPDATE_GOLDEN").is_ok_and(|v| v == "1");
    let mut failures = String::new();
    let all = cases(dir);
    for case in &all {
        let name = case.strip_prefix(dir).unwrap_or(case).display().to_string();
        let res = match run_case(case) {
            Ok(r) => r,
            Err(e) => {
                failures.push_str(&format!("\n=== {name}: {e}\n"));
                continue;
            }
        };
        for p in &res.problems {
            failures.push_str(&format!("\n=== {name}: {p}\n"));
        }
        let stem = case.with_extension("");
        // Stale expectations of the other kind (err vs fir/dot) must go.
        for ext in ["fir", "dot", "err", "in.dot"] {
            let expected_path = match ext {
                "in.dot" => PathBuf::from(format!("{}.in.dot", stem.display())),
                _ => PathBuf::from(format!("{}.out.{ext}", stem.display())),
            };
            let actual = res.files.iter().find(|(e, _)| *e == ext).map(|(_, t)| t);
            let expected = std::fs::read_to_string(&expected_path).ok();
            match (actual, expected) {
                (None, None) => {}
                (Some(a), Some(e)) if *a == e => {}
                (Some(a), e) if bless => {
                    if e.as_deref() != Some(a.as_str()) {
                        std::fs::write(&expected_path, a).map_err(|err| err.to_string())?;
                    }
                }
                (None, Some(_)) if bless => {
                    let _ = std::fs::remove_file(&expected_path);
                }
                (Some(a), Some(e)) => {
                    let diff = similar::TextDiff::from_lines(e.as_str(), a.as_str());
                    failures.push_str(&format!(
                        "\n=== {name}: .out.{ext} differs\n{}",
                        diff.unified_diff()
                            .context_radius(3)
                            .header("expected", "actual")
                    ));
                }
                (Some(_), None) => failures.push_str(&format!(
                    "\n=== {name}: missing {}\n",
                    expected_path.display()
                )),
                (None, Some(_)) => failures.push_str(&format!(
                    "\n=== {name}: {} exists but the case produced no .{ext}\n",
                    expected_path.display()
                )),
            }
        }
    }
    if failures.is_empty() {
        Ok(all.len())
    } else {
        Err(format!("{failures}\nRe-bless after reviewing with: UPDATE_GOLDEN=1 cargo test -p fuel-tests --test golden"))
    }
}

/// Renders every DOT file of `dots` that exists with graphviz and panics
/// naming the first that does not render to SVG; returns how many
/// rendered, or `None` (after printing `SKIP:`) when graphviz's `dot` is
/// not installed.
pub fn render_dots(dots: impl IntoIterator<Item = PathBuf>) -> Option<usize> {
    if std::process::Command::new("dot")
        .arg("-V")
        .output()
        .is_err()
    {
        crate::devices::skip_line(format_args!(
            "SKIP: graphviz `dot` is not installed (apt-get install graphviz)"
        ));
        return None;
    }
    let mut checked = 0;
    for dot in dots.into_iter().filter(|d| d.exists()) {
        let out = std::process::Command::new("dot")
            .arg("-Tsvg")
            .arg(&dot)
            .output()
            .unwrap();
        assert!(
            out.status.success() && out.stdout.starts_with(b"<?xml"),
            "{} does not render to SVG: {}",
            dot.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        checked += 1;
    }
    Some(checked)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_lines() {
        let b = parse_run_line("// RUN: --passes a --before").unwrap();
        assert!(b.before && b.passes == "a");
        assert!(parse_run_line("// RUN: --verify structural --before").is_err());
        let r = parse_run_line("// RUN: --passes a{x=1, y=2},b --topology t.topo").unwrap();
        assert_eq!(r.passes, "a{x=1, y=2},b");
        assert_eq!(r.verify, None);
        assert_eq!(r.topology.as_deref(), Some("t.topo"));
        let v = parse_run_line("// RUN: --verify placement").unwrap();
        assert_eq!(v.verify, Some(Level::Placement));
        assert!(parse_run_line("graph @x {").is_err());
        assert!(parse_run_line("// RUN: --frob 1").is_err());
        assert!(parse_run_line("// RUN: --verify loose").is_err());
        assert!(parse_run_line("// RUN: --passes dce --verify structural").is_err());
    }
}
