//! `fuel-opt bench --validate`: the cost model checked against measurement.
//!
//! For every size of the sweep it lowers one all_reduce over the group with
//! each fixed algorithm (star, hierarchical, ring, tree, and driver where the
//! topology declares one for the group), compiles and times each lowering as
//! `bench` does, and prints the model's estimate of that run
//! ([`fuel_collective::lower::estimate_run`]) beside the measured median. It
//! marks the algorithm `auto` picks (lowering with `auto` once, not timed: it
//! is the same graph as the fixed algorithm of that name) and the measured
//! best. The lowerings of one size are timed in turns, and algorithms that
//! lower to the same program (star and hierarchical on a group with one
//! island) are timed once and share the figure, so the machine's noise
//! between two runs of one program is not reported as a gap between
//! algorithms. The summary gives the median and the worst `estimate/measured`
//! (worst: farthest from 1 either way) and `auto`'s regret: how often, and by
//! how much, the algorithm it picked ran slower than the measured best.
//! `--csv` prints `size,algorithm,estimate_us,measured_us,auto_pick,best`
//! rows on stdout and the summary on stderr.

use crate::outln;
use crate::setup::{self, Shape};
use crate::sizes::format_size;
use crate::Failure;
use fuel_collective::lower::{estimate_run, Reason};
use fuel_graph_ext::{DType, Device, ReduceOp, TensorType, Topology};
use fuel_runtime::exec;
use std::io::{IsTerminal, Write};
use std::sync::Arc;

/// The fixed algorithms a sweep compares, in the order rows are printed.
pub const ALGORITHMS: &[&str] = &["star", "hierarchical", "ring", "tree", "driver"];

/// What to sweep.
pub struct Sweep<'a> {
    /// The group.
    pub devices: &'a [Device],
    /// Element type.
    pub dtype: DType,
    /// Reduce op.
    pub op: ReduceOp,
    /// Bytes per rank.
    pub sizes: &'a [usize],
    /// Timed runs per point.
    pub iters: usize,
    /// Untimed runs before them.
    pub warmup: usize,
    /// The topology the lowering and the estimates use.
    pub topo: &'a Arc<Topology>,
}

/// One measured point: one algorithm at one size.
#[derive(Clone, Debug, PartialEq)]
pub struct Point {
    /// Bytes per rank.
    pub size: usize,
    /// The fixed algorithm.
    pub algorithm: &'static str,
    /// The model's estimate of one run, microseconds.
    pub estimate_us: f64,
    /// The measured median, microseconds.
    pub measured_us: f64,
    /// `auto` picks this algorithm at this size.
    pub auto_pick: bool,
    /// The fastest measured algorithm at this size.
    pub best: bool,
    /// An algorithm listed earlier that lowers to the same program: this
    /// point shares its measurement.
    pub same_as: Option<&'static str>,
}

impl Point {
    /// `estimate / measured`.
    pub fn ratio(&self) -> f64 {
        if self.measured_us > 0.0 {
            self.estimate_us / self.measured_us
        } else {
            f64::INFINITY
        }
    }
}

/// Runs the sweep and prints it.
pub fn validate(s: &Sweep<'_>, csv: bool) -> Result<(), Failure> {
    let names: Vec<String> = s.devices.iter().map(|d| d.to_string()).collect();
    if csv {
        outln!("size,algorithm,estimate_us,measured_us,auto_pick,best")?;
    } else {
        outln!(
            "# fuel-opt bench --validate: all_reduce.{} of {} over [{}], {} iters after {} warmup, median times",
            s.op,
            s.dtype,
            names.join(", "),
            s.iters,
            s.warmup
        )?;
        outln!("# costs: {}", s.topo.source())?;
        outln!(
            "#{:>9} {:<13} {:>13} {:>13} {:>9} {:>5} {:>5}",
            "size",
            "algorithm",
            "estimate(us)",
            "measured(us)",
            "est/meas",
            "auto",
            "best"
        )?;
    }
    let progress = std::io::stderr().is_terminal();
    let mut all = Vec::new();
    for (i, &size) in s.sizes.iter().enumerate() {
        if progress {
            crate::output::err(format_args!(
                "\r{}/{} sizes, now {:<6}",
                i,
                s.sizes.len(),
                format_size(size)
            ));
            let _ = std::io::stderr().flush();
        }
        let points = measure_size(s, size)?;
        for p in &points {
            if csv {
                outln!(
                    "{},{},{:.2},{:.2},{},{}",
                    p.size,
                    p.algorithm,
                    p.estimate_us,
                    p.measured_us,
                    u8::from(p.auto_pick),
                    u8::from(p.best)
                )?;
            } else {
                outln!(
                    " {:>9} {:<13} {:>13.1} {:>13.1} {:>9.2} {:>5} {:>5}{}",
                    format_size(p.size),
                    p.algorithm,
                    p.estimate_us,
                    p.measured_us,
                    p.ratio(),
                    if p.auto_pick { "*" } else { "" },
                    if p.best { "*" } else { "" },
                    match p.same_as {
                        Some(a) => format!("  (the program {a} runs: timed once)"),
                        None => String::new(),
                    }
                )?;
            }
        }
        all.extend(points);
    }
    if progress {
        crate::output::err(format_args!("\r{:<40}\r", ""));
    }
    let summary = Summary::of(&all);
    for line in summary.lines() {
        if csv {
            crate::output::err(format_args!("# {line}\n"));
        } else {
            outln!("# {line}")?;
        }
    }
    Ok(())
}

/// Every fixed algorithm at one size, with `auto`'s pick and the best marked.
///
/// The lowerings are timed in turns ([`crate::bench::time_each`]), and
/// algorithms that lower to the same graph (star and hierarchical where the
/// group has one island) are compiled and timed once and share the figure:
/// the same program measured twice differs only by the machine's noise,
/// which would otherwise show up as a gap between them and as regret.
fn measure_size(s: &Sweep<'_>, size: usize) -> Result<Vec<Point>, Failure> {
    let count = (size / s.dtype.size_bytes()).max(1);
    let ty = TensorType::new(s.dtype, &[count]);
    let g = setup::build(s.devices, &ty, s.op, Shape::AllReduce)?;
    let (_, auto, _) = setup::lower(&g, &setup::pipeline("auto"), s.topo, None)?;
    let auto_name = setup::chosen(&auto);
    // (algorithm, estimate, index into `programs`)
    let mut rows: Vec<(&'static str, f64, usize)> = Vec::new();
    let mut programs: Vec<(String, exec::Executable)> = Vec::new();
    for &alg in ALGORITHMS {
        let (lowered, decisions, _) = setup::lower(&g, &setup::pipeline(alg), s.topo, None)?;
        // An algorithm that fell back lowers as another one: that row is
        // already there.
        if decisions
            .iter()
            .any(|d| matches!(d.reason, Reason::FellBack { .. }))
        {
            continue;
        }
        // The program: the text form without the pass's notes, which name
        // the algorithm.
        let text: String = fuel_graph_ext::text::print(&lowered)
            .lines()
            .filter(|l| !l.trim_start().starts_with("//"))
            .collect();
        let at = match programs.iter().position(|(t, _)| *t == text) {
            Some(at) => at,
            None => {
                let exe = crate::run::compiler(&lowered, s.devices, s.topo, Default::default())?
                    .compile()
                    .map_err(|e| Failure::input(format!("compile failed: {e}")))?;
                programs.push((text, exe));
                programs.len() - 1
            }
        };
        let est = estimate_run(&lowered, s.topo)
            .map_err(|e| Failure::input(format!("pricing {alg}: {e}")))?;
        rows.push((alg, est.total_us(), at));
    }
    let exes: Vec<&exec::Executable> = programs.iter().map(|(_, e)| e).collect();
    let timed = crate::bench::time_each(&g, &exes, s.iters, s.warmup)?;
    let mut points = Vec::new();
    let mut first_of: Vec<Option<&'static str>> = vec![None; programs.len()];
    for (alg, estimate_us, at) in rows {
        let (measured_us, wrong) = timed[at];
        let first = *first_of[at].get_or_insert(alg);
        let same_as = (first != alg).then_some(first);
        if wrong > 0 {
            return Err(Failure::mismatch(format!(
                "{alg} at {}: {wrong} element(s) differ from the reference interpreter",
                format_size(size)
            )));
        }
        points.push(Point {
            size,
            algorithm: alg,
            estimate_us,
            measured_us,
            auto_pick: alg == auto_name,
            best: false,
            same_as,
        });
    }
    // The first of equals is the best, so that `auto`'s pick, where it runs
    // the same program as the best, counts as the best.
    let pick = points.iter().position(|p| p.auto_pick);
    let fastest = points
        .iter()
        .map(|p| p.measured_us)
        .min_by(f64::total_cmp)
        .unwrap_or(0.0);
    let best = pick
        .filter(|&i| points[i].measured_us == fastest)
        .or_else(|| points.iter().position(|p| p.measured_us == fastest));
    if let Some(i) = best {
        points[i].best = true;
    }
    Ok(points)
}

/// What the sweep says about the model and about `auto`.
#[derive(Clone, Debug, PartialEq)]
pub struct Summary {
    /// Points measured.
    pub points: usize,
    /// Median `estimate/measured`.
    pub median_ratio: f64,
    /// Median `|estimate/measured - 1|`.
    pub median_error: f64,
    /// The point whose ratio is farthest from 1 (either way), and its ratio.
    pub worst: Option<(usize, &'static str, f64)>,
    /// Sizes swept.
    pub sizes: usize,
    /// Sizes where `auto`'s pick was the measured best.
    pub auto_best: usize,
    /// Sizes where `auto`'s pick was within 10% of the measured best.
    pub auto_within_10: usize,
    /// Per size, how much slower `auto`'s pick ran than the best
    /// (`measured(pick) / measured(best) - 1`), with the size.
    pub regrets: Vec<(usize, f64)>,
}

impl Summary {
    /// Summarises points (several per size).
    pub fn of(points: &[Point]) -> Summary {
        let mut ratios: Vec<f64> = points.iter().map(Point::ratio).collect();
        let mut errors: Vec<f64> = ratios.iter().map(|r| (r - 1.0).abs()).collect();
        let worst = points
            .iter()
            .map(|p| (p.size, p.algorithm, p.ratio()))
            .max_by(|a, b| far(a.2).total_cmp(&far(b.2)));
        let mut sizes: Vec<usize> = points.iter().map(|p| p.size).collect();
        sizes.dedup();
        let mut regrets = Vec::new();
        let (mut auto_best, mut auto_within_10) = (0, 0);
        for &size in &sizes {
            let at: Vec<&Point> = points.iter().filter(|p| p.size == size).collect();
            let best = at.iter().find(|p| p.best);
            let pick = at.iter().find(|p| p.auto_pick);
            if let (Some(best), Some(pick)) = (best, pick) {
                let regret = pick.measured_us / best.measured_us - 1.0;
                auto_best += usize::from(pick.best);
                auto_within_10 += usize::from(regret <= 0.10);
                regrets.push((size, regret));
            }
        }
        Summary {
            points: points.len(),
            median_ratio: setup::median_us(&mut ratios),
            median_error: setup::median_us(&mut errors),
            worst,
            sizes: sizes.len(),
            auto_best,
            auto_within_10,
            regrets,
        }
    }

    /// The summary as the table's closing lines.
    pub fn lines(&self) -> Vec<String> {
        let mut out = vec![format!(
            "estimate/measured over {} points: median {:.2}, median |estimate/measured - 1| {:.2}{}",
            self.points,
            self.median_ratio,
            self.median_error,
            match self.worst {
                Some((size, alg, r)) => format!(", worst {r:.2} ({alg} at {})", format_size(size)),
                None => String::new(),
            }
        )];
        let slower: Vec<&(usize, f64)> = self.regrets.iter().filter(|(_, r)| *r > 0.0).collect();
        let mut worst_regret = String::new();
        if let Some((size, r)) = slower.iter().max_by(|a, b| a.1.total_cmp(&b.1)) {
            let mut rs: Vec<f64> = slower.iter().map(|(_, r)| *r).collect();
            worst_regret = format!(
                "; when slower, by {:.0}% (median), {:.0}% at worst ({})",
                100.0 * setup::median_us(&mut rs),
                100.0 * r,
                format_size(*size)
            );
        }
        out.push(format!(
            "auto: the measured best at {}/{} sizes, within 10% of it at {}/{}{worst_regret}",
            self.auto_best, self.sizes, self.auto_within_10, self.sizes
        ));
        out
    }
}

/// How far a ratio is from 1, either way.
fn far(r: f64) -> f64 {
    if r > 0.0 {
        r.max(1.0 / r)
    } else {
        f64::INFINITY
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pt(size: usize, algorithm: &'static str, e: f64, m: f64, pick: bool, best: bool) -> Point {
        Point {
            size,
            algorithm,
            estimate_us: e,
            measured_us: m,
            auto_pick: pick,
            best,
            same_as: None,
        }
    }

    #[test]
    fn summary_counts_regret_and_the_worst_ratio_either_way() {
        let points = [
            pt(4096, "star", 10.0, 10.0, true, true),
            pt(4096, "ring", 40.0, 20.0, false, false),
            pt(8192, "star", 12.0, 30.0, true, false),
            pt(8192, "ring", 24.0, 24.0, false, true),
        ];
        let s = Summary::of(&points);
        assert_eq!(s.points, 4);
        assert_eq!(s.sizes, 2);
        assert_eq!(s.auto_best, 1);
        assert_eq!(s.auto_within_10, 1);
        // 12/30 = 0.4 is farther from 1 than 40/20 = 2 (2.5x against 2x).
        assert_eq!(s.worst, Some((8192, "star", 0.4)));
        assert!((s.regrets[1].1 - 0.25).abs() < 1e-12);
        let text = s.lines().join("\n");
        assert!(text.contains("the measured best at 1/2 sizes, within 10% of it at 1/2"));
        assert!(text.contains("25% at worst (8K)"), "{text}");
    }
}
