//! The tidy test: the layout rules of `docs/ARCHITECTURE.md` that a
//! reviewer would otherwise check by eye, over every `.rs` file of the
//! workspace (build outputs and hidden folders aside).
//!
//! - Every file opens with a `//!` paragraph saying what it is for.
//! - Every registered pass is defined (`impl Pass for ...`) in a file named
//!   after it (`insert-cross-device-copies` in
//!   `insert_cross_device_copies.rs`), and no other file defines a pass.
//! - No source file is over 800 lines, and no function over 120, test code
//!   (anything under a `tests/` folder, a `tests.rs`, or a `#[cfg(test)]`
//!   module) aside.
//! - No two library files share a name (`mod.rs`, `lib.rs`, `main.rs`,
//!   `tests.rs` and `build.rs` aside): a name says what a file is for, so
//!   one name means one thing.
//! - The compile-time half never names the runtime: no file of the IR crate
//!   (`fuel-graph-ext/src/`) or of `fuel-collective`'s passes and cost model
//!   (`src/lower/`, `src/combine/`, `src/cost/`, `src/simplify/`,
//!   `src/grad/`) uses a `fuel_runtime` path
//!   outside its comments. Cargo holds the IR crate's side already; this
//!   holds `fuel-collective`'s, whose runtime feature is on by default.
//!
//! Each failure names the file and the fix.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

/// The most lines a source file outside `tests/` may have.
const MAX_LINES: usize = 800;

/// The most lines a function outside test code may have, from its `fn`
/// line to its closing brace.
const MAX_FN_LINES: usize = 120;

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// Every `.rs` file under `root`, sorted, skipping build outputs (`target`)
/// and hidden folders (`.git`, `.gpu-bundle`).
fn rust_files(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = e.path();
            let name = e.file_name().to_string_lossy().into_owned();
            if path.is_dir() {
                if name != "target" && !name.starts_with('.') {
                    stack.push(path);
                }
            } else if name.ends_with(".rs") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// `path` relative to `root`, with `/` separators.
fn rel(root: &Path, path: &Path) -> String {
    let r = path.strip_prefix(root).unwrap_or(path);
    r.components()
        .map(|c| c.as_os_str().to_string_lossy())
        .collect::<Vec<_>>()
        .join("/")
}

/// Whether `rel` (relative to the root) is test code: under a `tests/` folder.
fn is_test_code(rel: &str) -> bool {
    rel.split('/').rev().skip(1).any(|c| c == "tests")
}

/// Files that do not open with a `//!` paragraph.
fn missing_module_docs(root: &Path, files: &[PathBuf]) -> Vec<String> {
    let mut problems = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(f).unwrap();
        let first = text.lines().next().unwrap_or("");
        let said = first
            .strip_prefix("//!")
            .is_some_and(|rest| !rest.trim().is_empty());
        if !said {
            problems.push(format!(
                "{}: does not open with a `//!` paragraph; start the file with `//! <what it is \
                 for>` (one concept per module, see docs/ARCHITECTURE.md)",
                rel(root, f)
            ));
        }
    }
    problems
}

/// Files over [`MAX_LINES`] outside test code.
fn oversized(root: &Path, files: &[PathBuf]) -> Vec<String> {
    let mut problems = Vec::new();
    for f in files {
        let r = rel(root, f);
        if is_test_code(&r) {
            continue;
        }
        let n = std::fs::read_to_string(f).unwrap().lines().count();
        if n > MAX_LINES {
            problems.push(format!(
                "{r}: {n} lines, over {MAX_LINES}; split it into a folder with one file per job \
                 (as `fuel-collective/src/lower/` is) and update the code map in \
                 docs/ARCHITECTURE.md"
            ));
        }
    }
    problems
}

/// Whether `rel` is library code: not test code, and not an example, a
/// benchmark, a fuzz target or a build script.
fn is_library(rel: &str) -> bool {
    let parts: Vec<&str> = rel.split('/').collect();
    let (dirs, name) = parts.split_at(parts.len() - 1);
    !is_test_code(rel)
        && !dirs
            .iter()
            .any(|d| matches!(*d, "examples" | "benches" | "fuzz"))
        && !matches!(name[0], "tests.rs" | "build.rs")
}

/// The name of the function a line opens (`pub(crate) fn name(`), if any.
fn fn_name(line: &str) -> Option<&str> {
    let mut rest = line.trim_start();
    for prefix in [
        "pub(crate) ",
        "pub(super) ",
        "pub ",
        "const ",
        "async ",
        "unsafe ",
    ] {
        rest = rest.strip_prefix(prefix).unwrap_or(rest);
    }
    let rest = rest.strip_prefix("fn ")?;
    let end = rest.find(|c: char| !(c.is_alphanumeric() || c == '_'))?;
    Some(&rest[..end])
}

/// Functions of `text` over [`MAX_FN_LINES`], as (first line, lines, name),
/// `#[cfg(test)]` modules aside. A function ends at the first line that is
/// its `fn` line's indentation followed by `}` (rustfmt's layout); a
/// declaration without a body is not a function.
fn long_functions_in(text: &str) -> Vec<(usize, usize, String)> {
    let lines: Vec<&str> = text.lines().collect();
    let indent = |l: &str| l.len() - l.trim_start().len();
    let close = |from: usize, at: usize| {
        (from..lines.len()).find(|&j| lines[j].len() == at + 1 && lines[j].ends_with('}'))
    };
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        if line.trim_start().starts_with("mod tests") && i > 0 && lines[i - 1].contains("cfg(test)")
        {
            i = close(i + 1, indent(line)).map_or(lines.len(), |j| j + 1);
            continue;
        }
        if let Some(name) = fn_name(line) {
            let body = (i..lines.len()).find(|&j| {
                let t = lines[j].trim_end();
                t.ends_with('{') || t.ends_with(';')
            });
            if let Some(b) = body.filter(|&b| lines[b].trim_end().ends_with('{')) {
                if let Some(end) = close(b + 1, indent(line)) {
                    let n = end - i + 1;
                    if n > MAX_FN_LINES {
                        out.push((i + 1, n, name.to_string()));
                    }
                }
            }
        }
        i += 1;
    }
    out
}

/// Library functions over [`MAX_FN_LINES`].
fn long_functions(root: &Path, files: &[PathBuf]) -> Vec<String> {
    let mut problems = Vec::new();
    for f in files {
        let r = rel(root, f);
        if !is_library(&r) {
            continue;
        }
        let text = std::fs::read_to_string(f).unwrap();
        for (line, n, name) in long_functions_in(&text) {
            problems.push(format!(
                "{r}:{line}: fn `{name}` has {n} lines, over {MAX_FN_LINES}; split it along its \
                 natural seams (a helper per step, as `fuel-opt/src/demo.rs` does)"
            ));
        }
    }
    problems
}

/// Library files that share a name with another library file.
fn shared_names(root: &Path, files: &[PathBuf]) -> Vec<String> {
    let mut by_name: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for f in files {
        let r = rel(root, f);
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        if is_library(&r) && !matches!(name.as_str(), "mod.rs" | "lib.rs" | "main.rs") {
            by_name.entry(name).or_default().push(r);
        }
    }
    by_name
        .into_iter()
        .filter(|(_, rs)| rs.len() > 1)
        .map(|(name, rs)| {
            format!(
                "{} library files are named `{name}`: {}; name each for what it does, so one \
                 name means one thing",
                rs.len(),
                rs.join(", ")
            )
        })
        .collect()
}

/// The folders of the compile-time half, which must not name the runtime.
const COMPILE_TIME: [&str; 6] = [
    "fuel-graph-ext/src/",
    "fuel-collective/src/lower/",
    "fuel-collective/src/combine/",
    "fuel-collective/src/cost/",
    "fuel-collective/src/simplify/",
    "fuel-collective/src/grad/",
];

/// Files of the compile-time half ([`COMPILE_TIME`]) with a line of code
/// (not a comment) that names `fuel_runtime`.
fn runtime_named_below(root: &Path, files: &[PathBuf]) -> Vec<String> {
    let mut problems = Vec::new();
    for f in files {
        let r = rel(root, f);
        if !COMPILE_TIME.iter().any(|d| r.contains(d)) {
            continue;
        }
        let text = std::fs::read_to_string(f).unwrap();
        let hit = text.lines().enumerate().find(|(_, l)| {
            let code = l.trim_start();
            !code.starts_with("//") && code.contains("fuel_runtime")
        });
        if let Some((i, _)) = hit {
            problems.push(format!(
                "{r}:{}: names `fuel_runtime` in the compile-time half; ask the plan \
                 (`fuel_graph_ext::plan`) instead, or move the code into the runtime \
                 (see \"One plan\" in docs/ARCHITECTURE.md)",
                i + 1
            ));
        }
    }
    problems
}

/// The type a line implements the `Pass` trait for, if it does
/// (`impl Pass for Cse {`, `impl fuel_graph_ext::pass::Pass for X {`).
fn pass_impl(line: &str) -> Option<&str> {
    let rest = line.trim_start().strip_prefix("impl ")?;
    let (tr, ty) = rest.split_once(" for ")?;
    (tr == "Pass" || tr.ends_with("::Pass")).then(|| ty.trim_end_matches(" {").trim())
}

/// Passes whose file is not named after them: each name in `registered`
/// must be defined in exactly one non-test file `<name with _>.rs`, and a
/// file that defines a pass must be named after a registered one.
fn misnamed_passes(root: &Path, files: &[PathBuf], registered: &[&str]) -> Vec<String> {
    let mut problems = Vec::new();
    let mut defined: Vec<(String, String, String)> = Vec::new(); // (rel, stem, type)
    for f in files {
        let r = rel(root, f);
        if is_test_code(&r) {
            continue;
        }
        let text = std::fs::read_to_string(f).unwrap();
        for line in text.lines() {
            if let Some(ty) = pass_impl(line) {
                let stem = f.file_stem().unwrap().to_string_lossy().into_owned();
                defined.push((r.clone(), stem, ty.to_string()));
            }
        }
    }
    for name in registered {
        let file = format!("{}.rs", name.replace('-', "_"));
        let here: Vec<&(String, String, String)> = defined
            .iter()
            .filter(|(_, stem, _)| format!("{stem}.rs") == file)
            .collect();
        match here.as_slice() {
            [_] => {}
            [] => problems.push(format!(
                "pass `{name}` is registered, but no file `{file}` defines it (`impl Pass for ...`); \
                 move the pass into a file of that name (a folder's `mod.rs` only declares its \
                 files)"
            )),
            more => problems.push(format!(
                "pass `{name}` is defined in {} files named `{file}`: {}; keep one",
                more.len(),
                more.iter().map(|(r, _, _)| r.as_str()).collect::<Vec<_>>().join(", ")
            )),
        }
    }
    for (r, stem, ty) in &defined {
        let kebab = stem.replace('_', "-");
        if !registered.contains(&kebab.as_str()) {
            problems.push(format!(
                "{r} defines the pass `{ty}`, but no registered pass is named `{kebab}`; name \
                 the file after the pass it defines (`<pass name with _>.rs`), or register it"
            ));
        }
    }
    problems
}

#[test]
fn the_workspace_is_tidy() {
    let root = workspace_root();
    let files = rust_files(&root);
    assert!(
        files.len() > 50,
        "only {} .rs files under {}",
        files.len(),
        root.display()
    );
    let registry = fuel_collective::registry();
    let registered: Vec<&str> = registry.passes().map(|p| p.name).collect();
    assert!(registered.contains(&"lower-collectives"), "{registered:?}");
    let mut problems = missing_module_docs(&root, &files);
    problems.extend(misnamed_passes(&root, &files, &registered));
    problems.extend(oversized(&root, &files));
    problems.extend(long_functions(&root, &files));
    problems.extend(shared_names(&root, &files));
    problems.extend(runtime_named_below(&root, &files));
    assert!(
        problems.is_empty(),
        "{} problem(s):\n{}",
        problems.len(),
        problems.join("\n")
    );
}

/// Each rule finds what it should, and names the file and the fix: a
/// scratch tree with one file breaking each rule.
#[test]
fn each_rule_names_the_file_and_the_fix() {
    let root = std::env::temp_dir().join(format!("fuel-tidy-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let src = root.join("crate/src");
    let tests = root.join("crate/tests");
    std::fs::create_dir_all(src.join("lower")).unwrap();
    std::fs::create_dir_all(&tests).unwrap();
    let doc = "//! A module.\n";
    std::fs::write(src.join("no_doc.rs"), "// A plain comment.\n").unwrap();
    std::fs::write(src.join("empty_doc.rs"), "//!\n").unwrap();
    std::fs::write(
        src.join("cse.rs"),
        format!("{doc}impl Pass for Cse {{\n}}\n"),
    )
    .unwrap();
    std::fs::write(
        src.join("lower/mod.rs"),
        format!("{doc}impl fuel_graph_ext::pass::Pass for LowerCollectives {{\n}}\n"),
    )
    .unwrap();
    let long = format!("{doc}{}", "fn f() {}\n".repeat(MAX_LINES));
    std::fs::write(src.join("long.rs"), &long).unwrap();
    std::fs::write(tests.join("long_test.rs"), &long).unwrap();
    let cost = root.join("fuel-collective/src/cost");
    std::fs::create_dir_all(&cost).unwrap();
    std::fs::write(
        cost.join("calls_up.rs"),
        format!("{doc}// fuel_runtime in a comment is fine\nuse fuel_runtime::exec;\n"),
    )
    .unwrap();
    let body = "    let x = 1;\n".repeat(MAX_FN_LINES);
    std::fs::write(
        src.join("lower/long_fn.rs"),
        format!(
            "{doc}pub(crate) fn long(\n    a: u8,\n) {{\n{body}}}\n\nfn short() {{\n}}\n\n\
             trait T {{\n    fn declared(&self);\n}}\n\n#[cfg(test)]\nmod tests {{\n    \
             fn in_a_test() {{\n{body}    }}\n}}\n"
        ),
    )
    .unwrap();
    std::fs::write(src.join("lower/plan.rs"), doc).unwrap();
    std::fs::create_dir_all(root.join("other/src")).unwrap();
    std::fs::write(root.join("other/src/plan.rs"), doc).unwrap();
    std::fs::write(root.join("other/src/mod.rs"), doc).unwrap();
    let files = rust_files(&root);
    assert_eq!(files.len(), 11);

    let long = long_functions(&root, &files);
    assert_eq!(long.len(), 1, "{long:?}");
    assert!(long[0].starts_with(&format!(
        "crate/src/lower/long_fn.rs:2: fn `long` has {} lines, over {MAX_FN_LINES}; split it",
        MAX_FN_LINES + 4
    )));

    let names = shared_names(&root, &files);
    assert_eq!(names.len(), 1, "{names:?}");
    assert!(names[0].starts_with(
        "2 library files are named `plan.rs`: crate/src/lower/plan.rs, other/src/plan.rs;"
    ));

    let up = runtime_named_below(&root, &files);
    assert_eq!(up.len(), 1, "{up:?}");
    assert!(up[0].starts_with(
        "fuel-collective/src/cost/calls_up.rs:3: names `fuel_runtime` in the compile-time half"
    ));

    let docs = missing_module_docs(&root, &files);
    assert_eq!(docs.len(), 2, "{docs:?}");
    assert!(docs[0].starts_with("crate/src/empty_doc.rs: does not open with a `//!`"));
    assert!(docs[1].starts_with("crate/src/no_doc.rs: "));
    assert!(docs[1].contains("start the file with `//! <what it is for>`"));

    let passes = misnamed_passes(&root, &files, &["cse", "lower-collectives"]);
    assert_eq!(passes.len(), 2, "{passes:?}");
    assert!(passes[0].starts_with(
        "pass `lower-collectives` is registered, but no file `lower_collectives.rs` defines it"
    ));
    assert!(passes[1].starts_with(
        "crate/src/lower/mod.rs defines the pass `LowerCollectives`, but no registered pass is named `mod`"
    ));

    let big = oversized(&root, &files);
    assert_eq!(big.len(), 1, "{big:?}");
    assert!(big[0].starts_with(&format!(
        "crate/src/long.rs: {} lines, over {MAX_LINES}; split it",
        MAX_LINES + 1
    )));
    std::fs::remove_dir_all(&root).unwrap();
}
