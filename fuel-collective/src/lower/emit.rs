//! The graph surgery every algorithm is built from.
//!
//! An [`Emitter`] adds nodes for one collective: a value moved to a device
//! (staged and deduplicated through the pass's [`Transfers`]), shards
//! combined by one n-ary op, Mean's division, `slice` and `concat`, and the
//! bookkeeping that lets a value spread without crossing a link twice
//! ([`Emitter::reach`], [`Emitter::held`]). [`Emitter::lower`] dispatches a
//! collective to its algorithm by kind, and [`Emitter::deliver`] is the
//! second half of every algorithm that reduces to one point.
//!
//! A broken invariant (a value with no device or type, nothing to combine)
//! is an internal [`PassError`] naming the collective, never a made-up
//! value.

use super::algorithm::{Algorithm, Lowering};
use super::arrange;
use super::site::{Broken, CollectiveSite};
use fuel_graph_ext::graph::ValueId;
use fuel_graph_ext::passes::Transfers;
use fuel_graph_ext::topology::Route;
use fuel_graph_ext::{Device, ElementwiseOp, Graph, Op, ReduceOp, TensorType, Topology};
use std::collections::BTreeMap;

/// The copies of one value, by device.
pub(super) type Held = BTreeMap<Device, ValueId>;

/// Graph surgery for one collective.
pub(super) struct Emitter<'a> {
    pub g: &'a mut Graph,
    pub tx: &'a mut Transfers,
    pub topo: &'a Topology,
    /// The collective being lowered (for the devices of its ranks, and to
    /// name it in internal errors).
    pub site: &'a CollectiveSite,
}

impl Emitter<'_> {
    /// Where `v` lives.
    pub fn dev(&self, v: ValueId) -> Result<Device, Broken> {
        self.g
            .value_device(v)
            .ok_or_else(|| self.site.broken("a value it made has no device"))
    }

    /// `v`'s type.
    pub fn ty(&self, v: ValueId) -> Result<&TensorType, Broken> {
        self.g
            .value_type(v)
            .ok_or_else(|| self.site.broken("a value it made has no type"))
    }

    /// `v` on `d`, staged where needed, deduplicated.
    pub fn to(&mut self, v: ValueId, d: Device) -> Result<ValueId, Broken> {
        self.tx
            .to_device(self.g, self.topo, v, d)
            .map_err(|e| self.site.broken(e))
    }

    /// One hop of `v` to `d`, which the caller knows is direct.
    pub fn hop(&mut self, v: ValueId, d: Device) -> Result<ValueId, Broken> {
        self.tx.hop(self.g, v, d).map_err(|e| self.site.broken(e))
    }

    /// Each of `vals` on `at`.
    fn all_to(&mut self, vals: &[ValueId], at: Device) -> Result<Vec<ValueId>, Broken> {
        // Sized up front: collecting through `Result` grows the vector a
        // few times per collective (7% of lowering's instructions).
        let mut out = Vec::with_capacity(vals.len());
        for v in vals {
            out.push(self.to(*v, at)?);
        }
        Ok(out)
    }

    /// All of `vals` moved to `at` and combined by one n-ary op.
    pub fn combine(
        &mut self,
        kind: ElementwiseOp,
        vals: &[ValueId],
        at: Device,
    ) -> Result<ValueId, Broken> {
        let local = self.all_to(vals, at)?;
        match local.as_slice() {
            [] => Err(self.site.broken(format!("nothing to combine on {at}"))),
            [one] => Ok(*one),
            [first, ..] => {
                let ty = self.ty(*first)?.clone();
                Ok(self
                    .g
                    .add_value(Op::Elementwise { kind, device: at }, &local, ty))
            }
        }
    }

    /// Applies Mean's division (by the rank count) where the sum ended up,
    /// and for a Mean summed in a wider accumulator the cast back to its
    /// dtype there.
    pub fn finish(&mut self, op: ReduceOp, v: ValueId, ranks: usize) -> Result<ValueId, Broken> {
        if op != ReduceOp::Mean || ranks <= 1 {
            return Ok(v);
        }
        let device = self.dev(v)?;
        let ty = self.ty(v)?.clone();
        let shape = ty.shape.clone();
        let mean = self.g.add_value(
            Op::Div {
                by: ranks as u64,
                device,
            },
            &[v],
            ty,
        );
        Ok(match self.site.narrow {
            Some(dtype) => self.g.add_value(
                Op::Cast { to: dtype, device },
                &[mean],
                TensorType { dtype, shape },
            ),
            None => mean,
        })
    }

    /// `len` entries of `v` along `axis` from `start`, where `v` lives.
    pub fn slice(
        &mut self,
        v: ValueId,
        axis: usize,
        start: usize,
        len: usize,
    ) -> Result<ValueId, Broken> {
        let device = self.dev(v)?;
        let ty = self.ty(v)?.with_dim(axis, len);
        Ok(self.g.add_value(
            Op::Slice {
                axis,
                start,
                len,
                device,
            },
            &[v],
            ty,
        ))
    }

    /// `parts` moved to `at` and joined along `axis`.
    pub fn concat(
        &mut self,
        parts: &[ValueId],
        axis: usize,
        at: Device,
    ) -> Result<ValueId, Broken> {
        let local = self.all_to(parts, at)?;
        let first = match local.as_slice() {
            [] => return Err(self.site.broken(format!("nothing to concatenate on {at}"))),
            [one] => return Ok(*one),
            [first, ..] => *first,
        };
        let mut total = 0;
        for v in &local {
            total += self.ty(*v)?.shape.get(axis).copied().ok_or_else(|| {
                self.site
                    .broken(format!("a part to join has no axis {axis}"))
            })?;
        }
        let ty = self.ty(first)?.with_dim(axis, total);
        Ok(self
            .g
            .add_value(Op::Concat { axis, device: at }, &local, ty))
    }

    /// One more copy of a value that `held` already has on some devices:
    /// `d` is reached from `from`, through the staging CPU where the route
    /// says so, reusing any copy already held on `d` or on the staging CPU.
    /// So a value never crosses back over a link to a device that has it.
    pub fn reach(&mut self, held: &mut Held, from: ValueId, d: Device) -> Result<ValueId, Broken> {
        if let Some(v) = held.get(&d) {
            return Ok(*v);
        }
        let src = self.dev(from)?;
        let c = match self.topo.route(src, d) {
            Route::Direct => self.hop(from, d)?,
            Route::Staged(cpu) => {
                let mid = match held.get(&cpu) {
                    Some(m) => *m,
                    None => {
                        let m = self.hop(from, cpu)?;
                        held.insert(cpu, m);
                        m
                    }
                };
                self.hop(mid, d)?
            }
        };
        held.insert(d, c);
        Ok(c)
    }

    /// Where `v`'s data already is: `v` itself and, up its chain of copies,
    /// each value it was copied from (a copy holds its source's data). A
    /// value that comes back to a device it was copied from reuses the
    /// original there instead of crossing the link again.
    pub fn held(&self, v: ValueId) -> Result<Held, Broken> {
        let mut held = Held::new();
        let mut cur = v;
        for _ in 0..self.g.node_count() {
            held.entry(self.dev(cur)?).or_insert(cur);
            match self.g.node(cur.node) {
                Some(n) if matches!(n.op, Op::Copy { .. }) => match n.operands.first() {
                    Some(src) => cur = *src,
                    None => break,
                },
                _ => break,
            }
        }
        Ok(held)
    }

    /// Where a spread of `v` to `targets` starts: `v`'s device, the copies
    /// of `v` that already exist ([`Emitter::held`]), and the other target
    /// devices (each once, in first-seen order).
    pub fn spread_start(
        &self,
        v: ValueId,
        targets: &[Device],
    ) -> Result<(Device, Held, Vec<Device>), Broken> {
        let src = self.dev(v)?;
        let held = self.held(v)?;
        let rest = arrange::unique(targets)
            .into_iter()
            .filter(|d| *d != src)
            .collect();
        Ok((src, held, rest))
    }

    /// Lowers the collective with `lowering`; returns its results in result
    /// order. Collectives with nothing to combine only spread; the others
    /// are the algorithm's [`Algorithm::combine`].
    pub fn lower(&mut self, lowering: &Lowering) -> Result<Vec<ValueId>, Broken> {
        let site = self.site;
        let Some(alg) = lowering.algorithm() else {
            // One rank: each result is the shard itself.
            return Ok(vec![site.first; site.num_results]);
        };
        if let (Op::AllToAll { .. }, Lowering::AllToAll(x)) = (&site.op, lowering) {
            return x.exchange(self);
        }
        let targets = site.targets();
        match &site.op {
            Op::Broadcast { .. } => {
                let held = alg.spread(self, site.first, &targets)?;
                Ok(pick(&held, &targets))
            }
            Op::AllGather { axis } => {
                // A shard with no entries along the axis adds nothing to
                // the join: it stays home (unless every shard has none;
                // then shard 0 goes). A shard empty along another axis
                // (`f32[0,3]` gathered along axis 1) still adds its
                // entries to the result's type, so it travels.
                let mut live = Vec::with_capacity(site.vals.len());
                for v in &site.vals {
                    if self.ty(*v)?.shape.get(*axis).is_some_and(|e| *e > 0) {
                        live.push(*v);
                    }
                }
                if live.is_empty() {
                    live.push(site.first);
                }
                if let Some(at) = alg.join_at() {
                    // Every shard to `at`, one join there, and the joined
                    // result spread to every target.
                    let held = live
                        .iter()
                        .map(|v| alg.spread(self, *v, &[at]))
                        .collect::<Result<Vec<_>, _>>()?;
                    let joined = self.join(&held, *axis, &[at])?;
                    let total = *joined
                        .first()
                        .ok_or_else(|| site.broken("an all_gather joined nowhere"))?;
                    let (parts, whole): (Vec<Device>, Vec<Device>) =
                        targets.iter().partition(|d| alg.joins_parts_on(**d));
                    let mut held = if whole.is_empty() {
                        Held::new()
                    } else {
                        alg.spread(self, total, &whole)?
                    };
                    let mut slices = BTreeMap::new();
                    for t in arrange::unique(&parts) {
                        let own = self.gather_lacking(&live, *axis, total, t, &mut slices)?;
                        held.insert(t, own);
                    }
                    return Ok(pick(&held, &targets));
                }
                let held = live
                    .iter()
                    .map(|v| alg.spread(self, *v, &targets))
                    .collect::<Result<Vec<_>, _>>()?;
                self.join(&held, *axis, &targets)
            }
            Op::AllReduce { op } | Op::Reduce { op, .. } | Op::ReduceScatter { op, .. } => {
                alg.combine(self, *op)
            }
            op => Err(site.broken(format!("`{}` is not a collective", op.mnemonic()))),
        }
    }

    /// `t`'s result of an all_gather of `live` along `axis` whose shards
    /// were joined in `total` (on a CPU), built from the shards `t` lacks:
    /// its own where it has it, each one straight from its rank where the
    /// route is direct, the rest sliced out of `total` (views on the host;
    /// neighbours in one slice, each slice made once for every target
    /// through `slices`), all joined on `t`.
    pub fn gather_lacking(
        &mut self,
        live: &[ValueId],
        axis: usize,
        total: ValueId,
        t: Device,
        slices: &mut BTreeMap<(usize, usize), ValueId>,
    ) -> Result<ValueId, Broken> {
        let mut parts = Vec::with_capacity(live.len());
        // The run of neighbouring shards still to slice out of `total`.
        let mut run: Option<(usize, usize)> = None;
        let mut start = 0;
        for v in live {
            let len = self.ty(*v)?.shape.get(axis).copied().ok_or_else(|| {
                self.site
                    .broken(format!("a shard to gather has no axis {axis}"))
            })?;
            if self.topo.route(self.dev(*v)?, t) == Route::Direct {
                if let Some(r) = run.take() {
                    parts.push(self.slice_once(total, axis, r, slices)?);
                }
                parts.push(*v);
            } else {
                run = Some(run.map_or((start, len), |(s, l)| (s, l + len)));
            }
            start += len;
        }
        if let Some(r) = run {
            parts.push(self.slice_once(total, axis, r, slices)?);
        }
        self.concat(&parts, axis, t)
    }

    /// `slice {axis, start, len}` of `v`, made once per `(start, len)`.
    fn slice_once(
        &mut self,
        v: ValueId,
        axis: usize,
        (start, len): (usize, usize),
        made: &mut BTreeMap<(usize, usize), ValueId>,
    ) -> Result<ValueId, Broken> {
        if let Some(s) = made.get(&(start, len)) {
            return Ok(*s);
        }
        let s = self.slice(v, axis, start, len)?;
        made.insert((start, len), s);
        Ok(s)
    }

    /// On each device of `targets`, the pieces `held` has there joined
    /// along `axis` (in `held`'s order); returns the joined values in
    /// target order.
    pub fn join(
        &mut self,
        held: &[Held],
        axis: usize,
        targets: &[Device],
    ) -> Result<Vec<ValueId>, Broken> {
        let mut joined = Held::new();
        for d in arrange::unique(targets) {
            let parts: Vec<ValueId> = held.iter().filter_map(|m| m.get(&d).copied()).collect();
            let j = self.concat(&parts, axis, d)?;
            joined.insert(d, j);
        }
        Ok(pick(&joined, targets))
    }

    /// The rest of a combining collective once its shards met in `total`:
    /// Mean's division, then the root's copy (`reduce`), each rank's slice
    /// (`reduce_scatter`) or `alg`'s spread to every rank (`all_reduce`).
    pub fn deliver(
        &mut self,
        op: ReduceOp,
        total: ValueId,
        alg: &dyn Algorithm,
    ) -> Result<Vec<ValueId>, Broken> {
        let site = self.site;
        let n = site.ranks();
        let total = self.finish(op, total, n)?;
        match site.op {
            Op::Reduce { root, .. } => Ok(vec![self.to(total, site.device(root)?)?]),
            Op::ReduceScatter { .. } => {
                let (axis, chunks) = site
                    .scatter()?
                    .ok_or_else(|| site.broken("a reduce_scatter without a split"))?;
                chunks
                    .iter()
                    .enumerate()
                    .map(|(i, (start, len))| {
                        let s = self.slice(total, axis, *start, *len)?;
                        self.to(s, site.device(i)?)
                    })
                    .collect()
            }
            _ => {
                let targets = site.targets();
                let held = alg.spread(self, total, &targets)?;
                Ok(pick(&held, &targets))
            }
        }
    }
}

/// The value on each target device, in target order.
pub(super) fn pick(held: &Held, targets: &[Device]) -> Vec<ValueId> {
    let mut out = Vec::with_capacity(targets.len());
    out.extend(targets.iter().filter_map(|d| held.get(d).copied()));
    out
}
