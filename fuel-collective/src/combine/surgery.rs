//! The graph surgery of `combine-collectives`: one bucket of all-reduces
//! becomes a `concat` per rank, one `all_reduce`, and a `slice` per used
//! result.

use super::Candidate;
use fuel_graph_ext::graph::ValueId;
use fuel_graph_ext::{Graph, Op};

/// Merges `members` (same key, no path between them) in `g`; the error is a
/// sentence for an internal error.
pub(super) fn merge(g: &mut Graph, members: &[&Candidate]) -> Result<(), String> {
    let first = members.first().ok_or("an empty bucket")?;
    let key = &first.key;
    let rows: usize = members.iter().map(|c| c.rows).sum();
    let joined_ty = key.ty(rows);
    let mut joined = Vec::with_capacity(key.devices.len());
    for (r, d) in key.devices.iter().enumerate() {
        let parts = members
            .iter()
            .map(|c| {
                g.node(c.id)
                    .and_then(|n| n.operands.get(r).copied())
                    .ok_or_else(|| format!("a merged all_reduce lost its operand {r}"))
            })
            .collect::<Result<Vec<ValueId>, String>>()?;
        joined.push(g.add_value(
            Op::Concat {
                axis: 0,
                device: *d,
            },
            &parts,
            joined_ty.clone(),
        ));
    }
    let merged = g.add_node(Op::AllReduce { op: key.op }, &joined, joined_ty);
    let mut start = 0;
    for c in members {
        let ty = g
            .node(c.id)
            .map(|n| n.ty.clone())
            .ok_or("a merged all_reduce vanished")?;
        for (r, d) in key.devices.iter().enumerate() {
            let old = ValueId {
                node: c.id,
                result: r as u32,
            };
            if g.use_count(old) == 0 {
                continue;
            }
            let part = g.add_value(
                Op::Slice {
                    axis: 0,
                    start,
                    len: c.rows,
                    device: *d,
                },
                &[ValueId {
                    node: merged,
                    result: r as u32,
                }],
                ty.clone(),
            );
            g.replace_all_uses(old, part);
        }
        start += c.rows;
        g.remove_node(c.id);
    }
    Ok(())
}
