//! `fuel-opt bench --count K --combine on|off`: K independent all_reduces
//! per iteration, as one training step's gradients, lowered with or without
//! `combine-collectives`; and `--transport`, the lowering's narrow
//! transport; and `--chunks`, its pipelined staged hops.
//!
//! [`build`] records them with `DeviceGroup` (the shards of all_reduce k
//! are inputs `g{k}_{r}` on device r); [`pipeline`] is the bench's pipeline
//! with the combining pass left in (`on`, the default pipeline's own) or
//! taken out (`off`).

use crate::Failure;
use fuel_collective::DeviceGroup;
use fuel_graph_ext::{Device, Graph, LazyGraph, ReduceOp, TensorType};

/// The value of `--combine`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Combine {
    /// Run `combine-collectives` (the default pipeline).
    On,
    /// Leave it out.
    Off,
}

/// `pipeline` (a default pipeline, possibly with options) with
/// `combine-collectives` taken out for [`Combine::Off`], or given
/// `threshold` for [`Combine::On`].
pub fn pipeline(pipeline: String, combine: Combine, threshold: Option<&str>) -> String {
    match combine {
        Combine::On => match threshold {
            Some(t) => pipeline.replacen(
                fuel_collective::combine::NAME,
                &format!("{}{{threshold={t}}}", fuel_collective::combine::NAME),
                1,
            ),
            None => pipeline,
        },
        Combine::Off => pipeline
            .split(',')
            .filter(|p| !p.trim_start().starts_with(fuel_collective::combine::NAME))
            .collect::<Vec<_>>()
            .join(","),
    }
}

/// `pipeline` with `transport=` added to its `lower-collectives`.
pub fn with_transport(pipeline: String, transport: Option<&str>) -> String {
    with_lower_option(pipeline, "transport", transport)
}

/// `pipeline` with `key=value` added to its `lower-collectives` (unchanged
/// for `None`).
pub fn with_lower_option(pipeline: String, key: &str, value: Option<&str>) -> String {
    let Some(t) = value else { return pipeline };
    let name = fuel_collective::lower::NAME;
    match pipeline.find(&format!("{name}{{")) {
        Some(at) => {
            let open = at + name.len() + 1;
            format!("{}{key}={t}, {}", &pipeline[..open], &pipeline[open..])
        }
        None => pipeline.replacen(name, &format!("{name}{{{key}={t}}}"), 1),
    }
}

/// `count` independent all_reduces of `ty` over `devices`.
pub fn build(
    devices: &[Device],
    ty: &TensorType,
    op: ReduceOp,
    count: usize,
) -> Result<Graph, Failure> {
    let bad = |e: fuel_collective::CollectiveError| Failure::input(e.to_string());
    let group = DeviceGroup::new(devices.iter().copied()).map_err(bad)?;
    let lazy = LazyGraph::new("all_reduces");
    for k in 0..count {
        let shards: Vec<_> = devices
            .iter()
            .enumerate()
            .map(|(r, d)| lazy.input(&format!("g{k}_{r}"), *d, ty.clone()))
            .collect();
        for t in group.all_reduce(&shards, op).map_err(bad)? {
            lazy.output(&t).map_err(|e| Failure::input(e.to_string()))?;
        }
    }
    Ok(lazy.snapshot())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn off_takes_the_pass_out_and_on_keeps_it() {
        let p = fuel_collective::pipeline_with("algorithm=ring");
        assert!(
            p.starts_with("simplify-collectives,combine-collectives,"),
            "{p}"
        );
        let off = pipeline(p.clone(), Combine::Off, Some("4M"));
        assert!(!off.contains("combine"), "{off}");
        assert!(
            off.starts_with("simplify-collectives,lower-collectives{algorithm=ring}"),
            "{off}"
        );
        assert_eq!(pipeline(p.clone(), Combine::On, None), p);
        let on = pipeline(p.clone(), Combine::On, Some("4M"));
        assert!(
            on.starts_with("simplify-collectives,combine-collectives{threshold=4M},lower"),
            "{on}"
        );
    }
}
