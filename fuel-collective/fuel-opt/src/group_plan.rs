//! `fuel-opt plan '[DEVICES]' --collective C --sizes A..B`: one process's
//! collective planned by the cost model alone, no device opened: for each
//! size, every candidate's estimate, `auto`'s pick, and the lower bound on
//! any schedule of it (`fuel_collective::cost::bound`), with what binds
//! it and `auto`'s estimate over it.
//!
//! Each size records the collective as `fuel-opt bench --collective` does
//! (f32 shards of about that many bytes per rank, axis 0) and lowers it
//! with `lower-collectives` on the topology (`--topology FILE`, else the
//! documented defaults). A topology on which the bound is infinite (a
//! device no link reaches) is an error naming the device, never a row.

use crate::bench::collectives::Collective;
use crate::outln;
use crate::sizes::format_size;
use crate::Failure;
use fuel_collective::lower::{decisions, Candidate, Decision};
use fuel_graph_ext::pass::DebugOptions;
use fuel_graph_ext::{DType, Device, ReduceOp, TensorType, Topology};
use std::sync::Arc;

/// One row of the plan: a size and what the lowering decided for it.
pub struct Row {
    /// Bytes per rank.
    pub bytes: usize,
    /// The decision for the collective.
    pub decision: Decision,
}

impl Row {
    /// The bound in microseconds (an error where it is infinite).
    pub fn bound_us(&self) -> Result<f64, Failure> {
        match self.decision.candidates.bound() {
            Some(Ok(b)) => Ok(b.us),
            Some(Err(e)) => Err(Failure::input(format!(
                "{} of {} per rank: {e}",
                self.decision.op.mnemonic(),
                format_size(self.bytes)
            ))),
            None => Ok(0.0),
        }
    }
}

/// The decision `lower-collectives` takes for `collective` over `devices`
/// at `bytes` per rank on `topo`.
pub fn decide(
    collective: Collective,
    devices: &[Device],
    bytes: usize,
    topo: &Arc<Topology>,
) -> Result<Row, Failure> {
    let n = devices.len();
    let ty = TensorType::new(DType::F32, &[collective.count(n, bytes, 4)]);
    let mut g = collective.build(devices, &ty, ReduceOp::Sum)?;
    let pm = fuel_collective::run_pipeline(
        &mut g,
        "lower-collectives",
        topo.clone(),
        DebugOptions::default(),
    )
    .map_err(|e| Failure::input(e.to_string()))?;
    let decision = decisions(&pm).into_iter().next().cloned().ok_or_else(|| {
        Failure::input(format!(
            "lower-collectives made no decision for {} over {n} devices",
            collective.name()
        ))
    })?;
    Ok(Row { bytes, decision })
}

/// Runs the one-process form of `fuel-opt plan`.
pub fn plan(
    collective: Collective,
    devices: &[Device],
    sizes: &[usize],
    topo: Topology,
) -> Result<(), Failure> {
    let names: Vec<String> = devices.iter().map(Device::to_string).collect();
    outln!(
        "# fuel-opt plan: {} over [{}], {} (estimates and the lower bound on any schedule; no device opened)",
        collective.name(),
        names.join(","),
        topo.source()
    )?;
    outln!(
        "#{:>8} {:>22} {:>12} {:>12} {:>9}  binds; candidates (us)",
        "size",
        "auto",
        "auto(us)",
        "bound(us)",
        "est/bound"
    )?;
    let topo = Arc::new(topo);
    let mut ratios: Vec<(usize, f64)> = Vec::with_capacity(sizes.len());
    for &bytes in sizes {
        let row = decide(collective, devices, bytes, &topo)?;
        let bound = row.bound_us()?;
        let d = &row.decision;
        let est = d.estimate().map_or(0.0, |e| e.total_us());
        ratios.extend(d.over_bound().map(|r| (bytes, r)));
        let ratio = d
            .over_bound()
            .map_or_else(|| "-".to_string(), |r| format!("{r:.2}"));
        let binds = match d.candidates.bound() {
            Some(Ok(b)) => binding_words(&b.to_string()),
            _ => String::new(),
        };
        let cands: Vec<String> = d
            .candidates
            .iter()
            .map(|c| match c {
                Candidate::Estimated { lowering, estimate } => {
                    format!("{lowering} {:.1}", estimate.total_us())
                }
                Candidate::Unfit { algorithm, .. } => format!("{algorithm} n/a"),
            })
            .collect();
        outln!(
            "{:>9} {:>22} {:>12.1} {:>12.1} {:>9}  {binds}; {}",
            format_size(bytes),
            d.lowering.to_string(),
            est,
            bound,
            ratio,
            cands.join(", ")
        )?;
    }
    outln!("{}", summary(&ratios))?;
    Ok(())
}

/// The last line: `auto`'s estimate over the bound, its median over the
/// sizes and its largest from 4 MiB up.
fn summary(ratios: &[(usize, f64)]) -> String {
    let mut all: Vec<f64> = ratios.iter().map(|r| r.1).collect();
    all.sort_by(f64::total_cmp);
    let median = match all.len() {
        0 => return "# est/bound: none (no positive bound)".to_string(),
        n if n % 2 == 1 => all[n / 2],
        n => (all[n / 2 - 1] + all[n / 2]) / 2.0,
    };
    let large = ratios
        .iter()
        .filter(|r| r.0 >= 4 << 20)
        .map(|r| r.1)
        .fold(None, |m: Option<f64>, r| Some(m.map_or(r, |m| m.max(r))));
    match large {
        Some(max) => format!("# est/bound: median {median:.2}, largest from 4M up {max:.2}"),
        None => format!("# est/bound: median {median:.2}"),
    }
}

/// What binds, out of a bound's text (`381.33us (the cut {..}: ..)`):
/// the words in its parentheses.
fn binding_words(text: &str) -> String {
    text.split_once(" (")
        .map(|(_, rest)| rest.trim_end_matches(')').to_string())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_size_gets_candidates_a_pick_and_a_bound_at_or_under_them() {
        let devices = [Device::cuda(0), Device::vulkan(0), Device::cpu(0)];
        let topo = Arc::new(Topology::default());
        for c in Collective::ALL {
            let row = decide(c, &devices, 4 << 20, &topo).unwrap();
            let bound = row.bound_us().unwrap();
            assert!(bound > 0.0, "{}", c.name());
            for cand in row.decision.candidates.iter() {
                if let Candidate::Estimated { estimate, .. } = cand {
                    assert!(
                        estimate.total_us() >= bound,
                        "{}: {}",
                        c.name(),
                        row.decision
                    );
                }
            }
            assert!(row.decision.over_bound().unwrap() >= 1.0);
        }
    }

    #[test]
    fn the_summary_gives_the_median_and_the_largest_from_4m() {
        let m = 1 << 20;
        let s = summary(&[(m, 3.0), (4 * m, 1.5), (8 * m, 1.2), (16 * m, 1.1)]);
        assert_eq!(s, "# est/bound: median 1.35, largest from 4M up 1.50");
        assert_eq!(summary(&[]), "# est/bound: none (no positive bound)");
        assert_eq!(summary(&[(m, 2.0)]), "# est/bound: median 2.00");
    }
}
