//! The pass viewer: one self-contained HTML file that steps through a
//! pipeline run. No network, no server, no graphviz: the pictures are laid
//! out ([`layout`]) and drawn as SVG ([`svg`]) here, the page's script and
//! style are compiled in (`viewer.js`, `viewer.css`), and everything the
//! page shows is one JSON value embedded in it ([`Recording::data`]),
//! written by [`json`] so that no name or note can end the `<script>`
//! element that holds it. `docs/viewer.md` says what the page shows.
//!
//! A [`Recording`] is filled from [`crate::pass::PassManager::run_observed`]
//! (one [`Step`] per pass, with a copy of the graph after it), and by
//! whoever knows more: `fuel_collective::viewer` adds the lowering's
//! decisions and where each lowered node came from ([`Link`]), and, after
//! a run, the measured [`Timeline`]. The same recording gives the same
//! bytes, except for the passes' times, which [`Recording::without_times`]
//! zeroes for tests.

pub mod diff;
pub mod identity;
pub mod json;
pub mod layout;
mod page;
pub mod svg;

use crate::graph::{Graph, NodeId};
use crate::pass::Observed;
use std::path::Path;
use std::time::Duration;

/// From this many nodes on, a step's picture starts with its device bands
/// collapsed (one box each, opened on click), and its neighbourhood view
/// is how a node is looked at.
pub const LARGE_NODES: usize = 1500;

/// One step: the pipeline's input, or the graph after one pass.
#[derive(Clone, Debug)]
pub struct Step {
    /// `input`, or the pass's name.
    pub name: String,
    /// Whether the pass changed the graph.
    pub changed: bool,
    /// How long the pass took.
    pub elapsed: Duration,
    /// The graph after the step.
    pub graph: Graph,
}

/// A node a pass made, and the node of the step before it was made from
/// (a lowered collective).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Link {
    /// The step whose pass made `node` (`node` is in its graph, `from` in
    /// the graph of the step before).
    pub step: usize,
    /// The node made.
    pub node: NodeId,
    /// What it was made from.
    pub from: NodeId,
}

/// One candidate of a [`Decision`].
#[derive(Clone, Debug, PartialEq)]
pub struct Candidate {
    /// Its name (`ring`, `star@cpu:0`, ...).
    pub name: String,
    /// Its estimate, or why it could not be used, as text.
    pub estimate: String,
    /// Whether it was picked.
    pub picked: bool,
}

/// How one node (a collective) was lowered.
#[derive(Clone, Debug, PartialEq)]
pub struct Decision {
    /// The step whose pass decided; `collective` is a node of the step
    /// before.
    pub step: usize,
    /// The collective.
    pub collective: NodeId,
    /// What it is (op, type, devices).
    pub what: String,
    /// What was compared.
    pub candidates: Vec<Candidate>,
    /// The lowering used.
    pub pick: String,
    /// Why: `auto: the cheapest estimate`, `asked for`, ...
    pub how: String,
    /// Where the estimates' figures came from.
    pub costs: String,
}

/// One measured piece of work on one lane (a device, or a queue of one).
#[derive(Clone, Debug, PartialEq)]
pub struct Event {
    /// What ran (`%12 copy`).
    pub label: String,
    /// The node of the last step it ran, if known.
    pub node: Option<NodeId>,
    /// Start, from the run's start, in microseconds.
    pub start_us: f64,
    /// Its duration.
    pub dur_us: f64,
}

/// A measured run: per lane, what ran when, beside the model's estimate.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Timeline {
    /// Where the times come from (which run, which machine).
    pub source: String,
    /// (lane name, its events in start order).
    pub lanes: Vec<(String, Vec<Event>)>,
    /// The cost model's estimate of the whole run.
    pub estimate_us: Option<f64>,
    /// Its estimate of each step it prices: (node of the last step,
    /// microseconds).
    pub node_estimates: Vec<(NodeId, f64)>,
    /// The measured time of the whole run, in microseconds.
    pub measured_us: f64,
}

/// Everything a viewer page shows.
#[derive(Clone, Debug, Default)]
pub struct Recording {
    /// The page's title (usually the graph's name).
    pub title: String,
    /// The pipeline string.
    pub pipeline: String,
    /// The steps in order, the input first.
    pub steps: Vec<Step>,
    /// Where made nodes came from.
    pub links: Vec<Link>,
    /// How each collective was lowered.
    pub decisions: Vec<Decision>,
    /// A measured run of the last step's graph.
    pub timeline: Option<Timeline>,
}

impl Recording {
    /// An empty recording of a run of `pipeline`.
    pub fn new(title: impl Into<String>, pipeline: impl Into<String>) -> Recording {
        Recording {
            title: title.into(),
            pipeline: pipeline.into(),
            ..Recording::default()
        }
    }

    /// Records one step: what [`crate::pass::PassManager::run_observed`]
    /// calls back with.
    pub fn observe(&mut self, o: &Observed<'_>) {
        self.steps.push(Step {
            name: o.pass.map_or("input", |p| p.name()).to_string(),
            changed: o.changed,
            elapsed: o.elapsed,
            graph: o.graph.clone(),
        });
    }

    /// Sets every pass's time to zero, so that the page depends on the
    /// graph and the pipeline alone (golden tests).
    pub fn without_times(&mut self) {
        for s in &mut self.steps {
            s.elapsed = Duration::ZERO;
        }
        if let Some(t) = &mut self.timeline {
            t.measured_us = 0.0;
            for (_, events) in &mut t.lanes {
                for e in events {
                    e.start_us = 0.0;
                    e.dur_us = 0.0;
                }
            }
        }
    }

    /// The JSON the page embeds; with `pictures` false, the SVG pictures
    /// are left out (what a golden test pins: the structure, not pixels).
    pub fn data(&self, pictures: bool) -> String {
        page::data(self, pictures)
    }

    /// The whole page.
    pub fn to_html(&self) -> String {
        page::html(self)
    }

    /// Writes the page to `path` (its folder must exist).
    pub fn write(&self, path: &Path) -> std::io::Result<()> {
        std::fs::write(path, self.to_html())
    }
}

/// Why a pass that changed nothing did not: what it looks for, by name.
pub fn why_unchanged(pass: &str) -> &'static str {
    match pass {
        "lower-collectives" => "no collective to lower",
        "combine-collectives" => "no collectives worth combining",
        "insert-cross-device-copies" => "every operand already lives on its user's device",
        "split-cross-vendor-copies" => "every copy already has a direct path",
        "cse" => "no two nodes compute the same value",
        "dce" => "no node is unused",
        _ => "nothing matched",
    }
}
