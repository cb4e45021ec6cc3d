//! The cost model's figures for `combine-collectives`, per group: what one
//! all-reduce costs by size, and what one merged item's copies cost.
//!
//! The all-reduce's line goes through two estimates of the lowering
//! `lower-collectives` would pick (auto), one of a single row and one of
//! 16 MiB per rank, each lowered on a scratch graph and priced with
//! [`crate::lower::estimate_graph`], so the figures follow the topology
//! (calibrated or not) exactly as the lowering's own choice does. An item's
//! copies are its share of the `concat` and its `slice` on every rank,
//! priced as the executor runs them (a host kernel on a host arena, a
//! same-device region copy on a GPU; the slice a view of the merged result
//! where the device binds one) under the runner the group's devices
//! get (summed
//! over ranks on the inline runner, which runs one step at a time; the
//! busiest rank, plus the dispatcher's work, on the threaded one). An
//! item whose results are graph outputs also pays their read-back on the
//! host ranks (`read_back_us`).

use super::plan::{Line, Model, Points};
use super::{Key, NAME};
use crate::cost::{self, StepKind};
use crate::lower::{estimate_graph, LowerCollectives, LowerOptions};
use fuel_graph_ext::graph::ValueId;
use fuel_graph_ext::pass::{Pass, PassError};
use fuel_graph_ext::plan::{slice_is_view, CopyMode, HOST_PAGE};
use fuel_graph_ext::topology::Runner;
use fuel_graph_ext::{DeviceKind, Graph, Op, Topology};
use std::sync::Arc;

/// The large size the all-reduce line is drawn to, bytes per rank.
const LARGE: usize = 16 << 20;

/// The estimate of one all-reduce of `rows` rows of `key`, lowered as
/// `lower-collectives` would.
fn all_reduce_us(key: &Key, rows: usize, topo: &Arc<Topology>) -> Result<f64, PassError> {
    let ty = key.ty(rows);
    let mut g = Graph::new("combine_scratch");
    let shards: Vec<ValueId> = key
        .devices
        .iter()
        .enumerate()
        .map(|(i, d)| {
            g.add_value(
                Op::Input {
                    name: format!("s{i}"),
                    device: *d,
                },
                &[],
                ty.clone(),
            )
        })
        .collect();
    let id = g.add_node(Op::AllReduce { op: key.op }, &shards, ty);
    for r in 0..shards.len() {
        g.push_output(ValueId {
            node: id,
            result: r as u32,
        });
    }
    LowerCollectives::new(LowerOptions::default(), topo.clone())
        .run(&mut g)
        .map_err(|e| PassError::internal(NAME, format!("pricing a scratch all_reduce: {e}")))?;
    let e = estimate_graph(&g, topo)
        .map_err(|e| PassError::internal(NAME, format!("pricing a scratch all_reduce: {e}")))?;
    Ok(e.total_us())
}

/// What one merged item of `bytes` per rank costs in copies.
fn item_us(key: &Key, row: usize, bytes: usize, topo: &Topology) -> f64 {
    let runner = cost::runner_for(key.devices.iter().copied());
    let per_rank = key.devices.iter().map(|d| {
        let kind = |b: usize| StepKind::layout(*d, b);
        let step = |b: usize| cost::step_us(topo, runner, &kind(b), bytes);
        // Its slice is a view of the merged result where the plan's rule
        // says the device binds one (taken as the second of two such
        // items); it costs the runner's bookkeeping, as a shared copy.
        let rows = bytes / row;
        let merged = key.ty(2 * rows);
        let slice = if slice_is_view(topo, *d, &merged, 0, rows, rows) {
            let view = StepKind::Transfer {
                from: *d,
                to: *d,
                bytes: 0,
                mode: CopyMode::Shared,
            };
            cost::step_us(topo, runner, &view, bytes)
        } else {
            step(bytes)
        };
        // Its slice, and its bytes in the concat (whose fixed cost the
        // bucket pays once).
        slice + step(bytes) - step(0)
    });
    match runner {
        Runner::Inline => per_rank.sum(),
        Runner::Threaded => {
            per_rank.fold(0.0, f64::max)
                + key.devices.len() as f64 * topo.runner(runner).dispatch_us
        }
    }
}

/// What one merged item of `bytes` per rank whose results are graph
/// outputs adds: on each host rank, where its slice is a view of the
/// merged result, the runner's copy of that view into the caller's tensor
/// (a host copy of its bytes). The runner reads outputs back one after
/// another on the caller's thread, so the ranks' copies add up. A GPU rank
/// reads its output back either way.
fn read_back_us(key: &Key, bytes: usize, topo: &Topology) -> f64 {
    key.devices
        .iter()
        .filter(|d| d.kind == DeviceKind::Cpu)
        .map(|d| cost::step_us(topo, Runner::Inline, &StepKind::layout(*d, bytes), bytes))
        .sum()
}

/// What a bucket pays once: its `concat`'s fixed cost (the step of a
/// concat of no bytes) on the slowest rank under the group's runner, or
/// summed over the ranks on the inline runner.
fn bucket_us(key: &Key, topo: &Topology) -> f64 {
    let runner = cost::runner_for(key.devices.iter().copied());
    let fixed = key
        .devices
        .iter()
        .map(|d| cost::step_us(topo, runner, &StepKind::layout(*d, 0), 0));
    match runner {
        Runner::Inline => fixed.sum(),
        Runner::Threaded => fixed.fold(0.0, f64::max),
    }
}

/// The model for `key`'s group.
pub(super) fn model(key: &Key, topo: &Arc<Topology>) -> Result<Model, PassError> {
    let row = key.dtype.size_bytes() * key.rest.iter().product::<usize>();
    let row = row.max(1);
    // One row, a host page (where inputs start to be read in place), 1 MiB
    // and 16 MiB, in rows.
    // Sizes that round to the same rows get the next row up, so the points
    // stay apart; each is then estimated once.
    let mut rows = [1, HOST_PAGE.div_ceil(row), (1 << 20) / row, LARGE / row];
    for i in 1..rows.len() {
        rows[i] = rows[i].max(rows[i - 1] + 1);
    }
    let mut points = [(0, 0.0); 4];
    for (p, r) in points.iter_mut().zip(rows) {
        *p = (r.saturating_mul(row), all_reduce_us(key, r, topo)?);
    }
    let (small, large) = (points[0].0, points[3].0);
    Ok(Model {
        collective: Points(points),
        per_item: Line::through(
            (small, item_us(key, row, small, topo)),
            (large, item_us(key, row, large, topo)),
        ),
        read_back: Line::through(
            (small, read_back_us(key, small, topo)),
            (large, read_back_us(key, large, topo)),
        ),
        bucket_us: bucket_us(key, topo),
    })
}
