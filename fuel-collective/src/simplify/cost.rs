//! The cost model's word on a rewrite of `simplify-collectives`: the
//! collectives a rewrite adds and the ones it removes, each side lowered
//! alone in a scratch graph (as `lower-collectives` would, `auto`) and
//! estimated with [`crate::lower::estimate_graph`].

use fuel_graph_ext::graph::{NodeId, ValueId};
use fuel_graph_ext::pass::DebugOptions;
use fuel_graph_ext::{Device, Graph, Op, TensorType, Topology};
use std::sync::Arc;

/// One collective as the scratch graph records it: its op and each
/// operand's type and device.
#[derive(Clone, Debug)]
pub(super) struct Spec {
    pub op: Op,
    pub operands: Vec<(TensorType, Device)>,
}

impl Spec {
    /// The collective `id` of `g` as it stands.
    pub fn of(g: &Graph, id: NodeId) -> Option<Spec> {
        let n = g.node(id)?;
        Some(Spec {
            op: n.op.clone(),
            operands: Spec::operands(g, &n.operands)?,
        })
    }

    /// A collective `op` over `vs` of `g`.
    pub fn over(g: &Graph, op: Op, vs: &[ValueId]) -> Option<Spec> {
        Some(Spec {
            op,
            operands: Spec::operands(g, vs)?,
        })
    }

    fn operands(g: &Graph, vs: &[ValueId]) -> Option<Vec<(TensorType, Device)>> {
        vs.iter()
            .map(|v| Some((g.value_type(*v)?.clone(), g.value_device(*v)?)))
            .collect()
    }
}

const LOWER: &str =
    "lower-collectives,insert-cross-device-copies,split-cross-vendor-copies,cse,dce";

/// The estimated time of the collectives `specs`, recorded side by side
/// and lowered; a sentence when they cannot be lowered or typed.
pub(super) fn estimate_us(specs: &[Spec], topo: &Arc<Topology>) -> Result<f64, String> {
    if specs.is_empty() {
        return Ok(0.0);
    }
    let mut g = Graph::new("simplify-estimate");
    for (i, s) in specs.iter().enumerate() {
        let xs: Vec<ValueId> = s
            .operands
            .iter()
            .enumerate()
            .map(|(k, (ty, d))| {
                let input = Op::Input {
                    name: format!("c{i}x{k}"),
                    device: *d,
                };
                g.add_value(input, &[], ty.clone())
            })
            .collect();
        let id = super::edit::add_collective(&mut g, s.op.clone(), &xs)?;
        let results = g.node(id).map_or(0, |n| n.num_results());
        for r in 0..results as u32 {
            g.push_output(ValueId {
                node: id,
                result: r,
            });
        }
    }
    crate::run_pipeline(&mut g, LOWER, topo.clone(), DebugOptions::default())
        .map_err(|e| e.to_string())?;
    let e = crate::lower::estimate_graph(&g, topo).map_err(|e| e.to_string())?;
    Ok(e.total_us())
}
