//! Asking `fuel-opt` and reading what it prints: the shortest `bench`
//! command line, and the sections of its reports that tests look into.

/// `fuel-opt bench` over `devices` (such as `cpu:0,cpu:1`) at the
/// least it measures: one 4K size, one timed iteration, no warm-up;
/// `tail` follows (`--csv`, `--plot <file>`, ...).
pub fn bench_once<'a>(devices: &'a str, tail: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["bench", "--devices", devices];
    args.extend(["--sizes", "4K", "--iters", "1", "--warmup", "0"]);
    args.extend_from_slice(tail);
    args
}

/// The paths a demo report lists under `== files in`, as printed (trimmed),
/// in order; empty when the report has no such section.
pub fn listed_files(stdout: &str) -> Vec<&str> {
    stdout
        .split("== files in")
        .nth(1)
        .map(|rest| {
            rest.lines()
                .skip(1)
                .take_while(|l| l.starts_with("  "))
                .map(str::trim)
                .collect()
        })
        .unwrap_or_default()
}
