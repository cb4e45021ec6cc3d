//! What a topology file's figures may be, and the directives that need
//! one: shared by hand-written topology files and the calibration cache,
//! which is one.
//!
//! A figure must be a finite number above zero (the parser's first
//! check), and within the range of its unit: a bandwidth of 1e-320 GB/s
//! is a typing mistake that turns every estimate into "inf us", and one
//! past 10^7 GB/s is what a failed measurement gives (the calibration fit
//! clamps there). A `runner`, `link` or `process` line with no figure sets
//! nothing, so it is refused rather than read as a no-op.

use super::Curve;

/// The smallest and largest bandwidth, GB/s: 1 kB/s to 10 PB/s.
pub const GBPS: (f64, f64) = (1e-6, 1e7);

/// The smallest and largest time, microseconds: a picosecond to about
/// 17 minutes.
pub const US: (f64, f64) = (1e-6, 1e9);

/// Why `x` (in `unit`, "GB/s" or "microseconds") is out of its range, if
/// it is.
pub fn out_of_range(x: f64, unit: &str) -> Option<String> {
    let (lo, hi) = if unit == "GB/s" { GBPS } else { US };
    (!(lo..=hi).contains(&x)).then(|| {
        format!(
            "out of range: a figure in {unit} lies between {lo:e} and {hi:e} (a mistyped exponent, or a failed measurement: rerun `fuel-opt calibrate`)"
        )
    })
}

/// Why a bandwidth curve has a point out of range, if it has.
pub fn curve_out_of_range(c: &Curve) -> Option<String> {
    c.points()
        .iter()
        .find_map(|&(_, g)| out_of_range(g, "GB/s"))
}

/// Why a line sets no figure, if it is a directive that needs one
/// (`runner inline`, `link host-host`, `process`).
pub fn missing_figure(words: &[&str]) -> Option<String> {
    let example = match words {
        ["runner", r] => format!("`runner {r} step=15 run=20 dispatch=2`"),
        ["link", c] => format!("`link {c} bandwidth=25 latency=10`"),
        ["process"] => "`process bandwidth=12 latency=5`".to_string(),
        _ => return None,
    };
    Some(format!(
        "`{}` sets no figure: give at least one, e.g. {example}, or delete the line",
        words.join(" ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_and_missing_figures() {
        assert_eq!(out_of_range(25.0, "GB/s"), None);
        assert_eq!(out_of_range(1e7, "GB/s"), None);
        let e = out_of_range(1e-320, "GB/s").unwrap_or_default();
        assert!(
            e.starts_with("out of range: a figure in GB/s lies between 1e-6 and 1e7"),
            "{e}"
        );
        assert!(out_of_range(2e9, "microseconds").is_some());
        assert!(missing_figure(&["runner", "inline"]).is_some());
        assert!(missing_figure(&["link", "host-host"]).is_some());
        assert!(missing_figure(&["process"]).is_some());
        assert_eq!(missing_figure(&["process", "latency=5"]), None);
        assert_eq!(missing_figure(&["staging", "cpu:1"]), None);
    }

    #[test]
    fn topology_files_refuse_lines_without_figures_and_absurd_figures() {
        for (line, says) in [
            ("runner inline", "`runner inline` sets no figure"),
            ("runner threaded", "`runner threaded` sets no figure"),
            ("link host-host", "`link host-host` sets no figure"),
            ("process", "`process` sets no figure"),
            ("process # a comment", "`process` sets no figure"),
            (
                "link host-host bandwidth=1e-320",
                "bad bandwidth `1e-320`: out of range: a figure in GB/s lies between 1e-6 and 1e7",
            ),
            (
                "link host-cuda bandwidth=64K:30,4M:1e-9",
                "4M:1e-9`: out of range",
            ),
            ("link host-host latency=1e300", "bad latency `1e300`"),
            ("process bandwidth=1e12", "bad bandwidth `1e12`"),
            ("reduce cpu 1e-300", "bad reduce throughput `1e-300`"),
            ("runner inline step=1e-30", "bad step cost `1e-30`"),
        ] {
            let e = super::super::Topology::parse(line)
                .err()
                .unwrap_or_default();
            assert!(e.starts_with("topology line 1: "), "{line}: {e}");
            assert!(e.contains(says), "{line}: {e}");
        }
        assert!(super::super::Topology::parse(
            "link host-host bandwidth=1e7 latency=1e-6\nprocess latency=5"
        )
        .is_ok());
    }
}
