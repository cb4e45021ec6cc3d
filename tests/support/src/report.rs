//! Reading what `fuel-opt` prints: the sections of its reports that tests
//! look into.

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
