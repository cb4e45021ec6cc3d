//! Narrow transport (`lower-collectives{transport=...}`): f32 data crosses
//! device boundaries as bf16 or f16, half the bytes on every link.
//!
//! After every collective is lowered, each copy the pass made of an f32
//! value to another device is rewritten: the value is cast to the narrow
//! type where it lies, the copy moves the narrow value, and a cast back to
//! f32 on arrival takes the copy's place. A value that is itself such a
//! cast back (a relay: the staging CPU passing a value on) is sent on in
//! its narrow form, so a staged hop rounds once, not twice; the cast back
//! on the staging CPU is then dead and `dce` removes it. Reductions read
//! the casts back, so they accumulate in f32 where the shards meet.
//!
//! `bf16`/`f16` narrow every such copy; `bf16-staged`/`f16-staged` only the
//! copies between a GPU and the topology's staging CPU (the hops a staged
//! route takes). Other dtypes, user copies and copies already in the graph
//! are left alone.
//!
//! **Only where it pays.** Narrowing saves bytes on links and costs two
//! casts per copy; between devices that share host memory the copies move
//! nothing and the casts are all cost. So the pass prices the lowered graph
//! both ways ([`decide`]). `transport=auto` narrows to bf16 only where the
//! cost model's estimate is lower with it (on a host-only machine, never);
//! a forced transport that the model thinks loses is still applied, with a
//! warning that gives both estimates (in the note and as a `tracing` warning).
//!
//! **Error bound.** The pass lowers with star when a transport is set
//! (`auto` picks the cheapest star point; another algorithm is refused):
//! each shard is rounded at most once on its way to the point, summed in
//! f32 there, and the result rounded at most once on its way back, so each
//! element of the result differs from the f32 result by at most
//! `(2u + u²)·Σ|xᵢ|` plus f32's own rounding, with `u = 2⁻⁸` (bf16) or
//! `2⁻¹¹` (f16): about `2·2⁻⁸·Σ|xᵢ|` and `2·2⁻¹¹·Σ|xᵢ|`. In f16 a shard or
//! a result above 65504 in magnitude arrives as ±inf (f16 has no larger
//! finite value; the cast rounds to nearest and overflows to infinity), and
//! a value below 2⁻²⁴ as zero; bf16 has f32's range.

use fuel_graph_ext::graph::{NodeId, ValueId};
use fuel_graph_ext::{DType, Graph, Op, Topology};
use std::collections::BTreeSet;
use std::str::FromStr;

/// The value of `transport=`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transport {
    /// The narrow dtype on the wire.
    pub dtype: DType,
    /// Only the hops between a GPU and the staging CPU.
    pub staged_only: bool,
    /// `auto`: bf16, but only where the cost model's estimate of the
    /// lowered graph is lower with it than without.
    pub auto: bool,
}

impl FromStr for Transport {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s == "auto" {
            return Ok(Transport {
                dtype: DType::BF16,
                staged_only: false,
                auto: true,
            });
        }
        let (name, staged_only) = match s.strip_suffix("-staged") {
            Some(n) => (n, true),
            None => (s, false),
        };
        let dtype = match name {
            "bf16" => DType::BF16,
            "f16" => DType::F16,
            _ => return Err("expected auto, bf16, f16, bf16-staged or f16-staged".into()),
        };
        Ok(Transport {
            dtype,
            staged_only,
            auto: false,
        })
    }
}

impl std::fmt::Display for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.auto {
            return f.write_str("auto");
        }
        write!(
            f,
            "{}{}",
            self.dtype,
            if self.staged_only { "-staged" } else { "" }
        )
    }
}

/// Rewrites the f32 copies among `made` (nodes the pass added) to travel as
/// `t.dtype`; returns how many copies it narrowed.
pub(super) fn narrow(
    g: &mut Graph,
    topo: &Topology,
    made: &BTreeSet<NodeId>,
    t: Transport,
) -> usize {
    let mut count = 0;
    // One narrow cast per value, however many copies leave from it.
    let mut casts: std::collections::BTreeMap<ValueId, ValueId> = Default::default();
    // Topological order: a relay's incoming copy is rewritten before the
    // copy that passes it on.
    for id in g.topo_order() {
        if !made.contains(&id) {
            continue;
        }
        let Some(n) = g.node(id) else { continue };
        let Op::Copy { to } = n.op else { continue };
        let (Some(&x), true) = (n.operands.first(), n.ty.dtype == DType::F32) else {
            continue;
        };
        let Some(from) = g.value_device(x) else {
            continue;
        };
        if from == to {
            continue;
        }
        if t.staged_only {
            let staging = topo.staging;
            let gpu_and_staging =
                (from == staging && !to.is_cpu()) || (to == staging && !from.is_cpu());
            if !gpu_and_staging {
                continue;
            }
        }
        let wide_ty = n.ty.clone();
        let mut narrow_ty = wide_ty.clone();
        narrow_ty.dtype = t.dtype;
        // The narrow value at the source: a relay's own narrow copy, or a
        // new cast.
        let relayed = g.node(x.node).and_then(|xn| match xn.op {
            Op::Cast { to: DType::F32, .. } => xn
                .operands
                .first()
                .copied()
                .filter(|y| g.value_type(*y).is_some_and(|ty| ty.dtype == t.dtype)),
            _ => None,
        });
        let src = match relayed.or_else(|| casts.get(&x).copied()) {
            Some(y) => y,
            None => {
                let y = g.add_value(
                    Op::Cast {
                        to: t.dtype,
                        device: from,
                    },
                    &[x],
                    narrow_ty.clone(),
                );
                casts.insert(x, y);
                y
            }
        };
        let old = ValueId {
            node: id,
            result: 0,
        };
        let users = g.users(old);
        let outputs: Vec<usize> = g
            .outputs()
            .iter()
            .enumerate()
            .filter(|(_, o)| **o == old)
            .map(|(i, _)| i)
            .collect();
        g.set_op(id, Op::Copy { to }, narrow_ty);
        g.set_operands(id, &[src]);
        let back = g.add_value(
            Op::Cast {
                to: DType::F32,
                device: to,
            },
            &[old],
            wide_ty,
        );
        for (user, slot) in users {
            g.set_operand(user, slot as usize, back);
        }
        if !outputs.is_empty() {
            let mut outs = g.outputs().to_vec();
            for i in outputs {
                outs[i] = back;
            }
            g.set_outputs(outs);
        }
        count += 1;
    }
    count
}

/// Narrows `g` by `t` when `t` is forced, or when it is `auto` and the
/// estimate (`estimate_us` of the graph) is lower narrowed; returns the
/// note that says what was done and, where they were priced, both
/// estimates. A forced transport the model thinks loses gets a warning.
pub(super) fn decide(
    g: &mut Graph,
    topo: &Topology,
    made: &BTreeSet<NodeId>,
    t: Transport,
    estimate_us: impl Fn(&Graph) -> Option<f64>,
) -> String {
    let mut narrowed = g.clone();
    let copies = narrow(&mut narrowed, topo, made, t);
    let wide_us = estimate_us(g);
    let narrow_us = estimate_us(&narrowed);
    let both = match (wide_us, narrow_us) {
        (Some(w), Some(n)) => format!(" (estimated {n:.1} us narrow, {w:.1} us in f32)"),
        _ => String::new(),
    };
    let wins = matches!((wide_us, narrow_us), (Some(w), Some(n)) if n < w);
    if t.auto && !(wins && copies > 0) {
        return format!(
            "{}: transport=auto kept f32: narrowing {copies} copies to bf16 would not pay{both}",
            super::NAME
        );
    }
    *g = narrowed;
    let mut said = note(t, copies) + &both;
    let loses = matches!((wide_us, narrow_us), (Some(w), Some(n)) if n > w);
    if !t.auto && loses {
        let warning = format!("transport={t} makes this graph slower by the cost model's estimate; leave it off, or use transport=auto");
        tracing::warn!(target: "lower-collectives", "{warning}{both}");
        said = format!("{said}; WARNING: {warning}");
    }
    said
}

/// The note the pass adds when a transport is set.
pub(super) fn note(t: Transport, copies: usize) -> String {
    let u = if t.dtype == DType::BF16 { 8 } else { 11 };
    format!(
        "{}: transport={t} is on: {copies} copies of f32 data cross {} as {} (cast before, back to f32 on arrival), sums accumulate in f32; each result is within 2*2^-{u}*sum|x_i| of the f32 result{}",
        super::NAME,
        if t.staged_only { "between a GPU and the staging CPU" } else { "devices" },
        t.dtype,
        if t.dtype == DType::F16 { "; f16 overflows to +-inf above 65504" } else { "" }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transport_values_parse_and_print() {
        for s in ["auto", "bf16", "f16", "bf16-staged", "f16-staged"] {
            let t: Transport = s.parse().unwrap();
            assert_eq!(t.to_string(), s);
        }
        assert!("f32".parse::<Transport>().is_err());
        assert!("bf16-stage".parse::<Transport>().is_err());
    }
}
