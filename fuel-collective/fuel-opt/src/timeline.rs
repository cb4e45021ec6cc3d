//! The measured timeline for the pass viewer: the executor's step trace
//! (one `tracing` event per step, with its node, device, op and time; see
//! `exec/step.rs`) caught while one run is [`capture`]d, and laid out per
//! device beside the cost model's estimate of each step
//! ([`fuel_collective::viewer::step_estimates`]).
//!
//! The catching layer is installed with the logger ([`layer`]) and is off
//! except inside [`capture`]; it asks only for the executor's callsites,
//! so everything else logs as before.

use fuel_graph_ext::html::{Event, Timeline};
use fuel_graph_ext::{Graph, NodeId, Topology};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Instant;
use tracing::field::{Field, Visit};
use tracing::subscriber::Interest;
use tracing_subscriber::filter::DynFilterFn;
use tracing_subscriber::layer::{Context, Filter, Layer};

static ON: AtomicBool = AtomicBool::new(false);
static CAUGHT: Mutex<Vec<Caught>> = Mutex::new(Vec::new());

/// One step as the trace reported it, with when the report came.
#[derive(Clone, Debug, Default)]
struct Caught {
    node: Option<u64>,
    device: String,
    op: String,
    us: f64,
    at: Option<Instant>,
    /// Set by [`caught`]: when the step started, from the first step's start.
    start_us: f64,
}

impl Visit for Caught {
    fn record_u64(&mut self, field: &Field, value: u64) {
        if field.name() == "node" {
            self.node = Some(value);
        }
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        if field.name() == "us" {
            self.us = value;
        }
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        match field.name() {
            "device" => self.device = format!("{value:?}"),
            "op" => self.op = format!("{value:?}"),
            _ => {}
        }
    }
}

/// The layer that catches step events.
struct Catch;

impl<S: tracing::Subscriber> Layer<S> for Catch {
    fn on_event(&self, event: &tracing::Event<'_>, _cx: Context<'_, S>) {
        let mut c = Caught {
            at: Some(Instant::now()),
            ..Caught::default()
        };
        event.record(&mut c);
        if let (Some(_), Ok(mut all)) = (c.node, CAUGHT.lock()) {
            all.push(c);
        }
    }
}

/// The catching layer, with its filter: the executor's trace events,
/// while [`capture`] runs.
pub fn layer<S>() -> impl Layer<S>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    let filter = DynFilterFn::new(|m, _| ON.load(Ordering::Relaxed) && m.is_event())
        .with_callsite_filter(|m| {
            // The executor's module, where it is now and where it moves
            // (the `fuel-runtime` crate).
            let t = m.target();
            if t.starts_with("fuel_runtime::exec") {
                Interest::sometimes()
            } else {
                Interest::never()
            }
        });
    Catch.with_filter(Box::new(filter) as Box<dyn Filter<S> + Send + Sync>)
}

/// Runs `f` with the step trace caught; returns its result and the steps,
/// each with its start in microseconds from the first step's start (what
/// `f` did before, such as compiling, is not part of the run).
fn caught<T>(f: impl FnOnce() -> T) -> (T, Vec<Caught>) {
    if let Ok(mut all) = CAUGHT.lock() {
        all.clear();
    }
    let start = Instant::now();
    ON.store(true, Ordering::Relaxed);
    let out = f();
    ON.store(false, Ordering::Relaxed);
    let mut steps = CAUGHT
        .lock()
        .map(|mut a| std::mem::take(&mut *a))
        .unwrap_or_default();
    for c in &mut steps {
        let end =
            c.at.map_or(0.0, |t| t.duration_since(start).as_secs_f64() * 1e6);
        c.start_us = (end - c.us).max(0.0);
    }
    let first = steps
        .iter()
        .map(|c| c.start_us)
        .fold(f64::INFINITY, f64::min);
    for c in &mut steps {
        c.start_us -= first;
    }
    (out, steps)
}

/// Runs `f` (one run of `g`'s executable, perhaps compiled first) and
/// returns its result and the timeline: per device, each step (named
/// `%N op` in `g`'s numbering) with its measured start (from the first
/// step's) and time, and the model's estimate of each step and of the run,
/// for `topo`. The measured total is from the first step's start to the
/// last step's end.
pub fn capture<T>(
    g: &Graph,
    topo: &Topology,
    source: &str,
    f: impl FnOnce() -> T,
) -> (T, Timeline) {
    let (out, steps) = caught(f);
    let measured_us = steps.iter().map(|c| c.start_us + c.us).fold(0.0, f64::max);
    let ids: BTreeMap<u64, NodeId> = g.node_ids().map(|id| (id.0.index() as u64, id)).collect();
    let num = fuel_graph_ext::text::Numbering::new(g);
    let mut lanes: BTreeMap<String, Vec<Event>> = BTreeMap::new();
    for c in steps {
        let id = c.node.and_then(|n| ids.get(&n).copied());
        let label = id
            .and_then(|id| num.number(id))
            .map_or(c.op.clone(), |k| format!("%{k} {}", c.op));
        lanes.entry(c.device).or_default().push(Event {
            label,
            node: id,
            start_us: c.start_us,
            dur_us: c.us,
        });
    }
    let lanes = lanes
        .into_iter()
        .map(|(d, mut e)| {
            e.sort_by(|a, b| a.start_us.total_cmp(&b.start_us));
            (d, e)
        })
        .collect();
    let timeline = Timeline {
        source: source.to_string(),
        lanes,
        estimate_us: fuel_collective::lower::estimate_run(g, topo)
            .ok()
            .map(|e| e.total_us()),
        node_estimates: fuel_collective::viewer::step_estimates(g, topo),
        measured_us,
    };
    (out, timeline)
}
