//! `all_to_all`'s two lowerings, which the cost model chooses between.
//!
//! Rank i's operand is cut along the axis into one piece per rank (its
//! split row, or the default cut); piece j goes to rank j, which joins what
//! it receives in rank order with one `concat`. An empty piece does not
//! travel; a rank that receives nothing gets an empty slice of its own
//! operand.
//!
//! - `direct`: each piece goes straight to its rank, staged through the
//!   CPU the route names where the devices have no direct path; each piece
//!   crosses each link once.
//! - `packed`: where one source has two or more pieces bound for ranks
//!   behind the same staging CPU, it joins them into one buffer that
//!   crosses to that CPU once; the CPU slices them apart and sends each on.
//!   The other pieces go as in `direct`. Fewer, larger transfers pay where
//!   per-transfer latency dominates (small pieces), and cost a pack and an
//!   unpack on the way.
//! - `joined`: a Vulkan rank that receives pieces from two ranks or more
//!   has them joined on the staging CPU, and the device imports the joined
//!   buffer; the other ranks' pieces go as in `direct`. The host's concat
//!   takes a piece that comes from a GPU where it lies (the copy is
//!   deferred into it), so each byte of such a rank's result is written
//!   once in host memory, where `direct` copies its pieces in and joins
//!   them again on the device. A CUDA rank is never joined this way: its
//!   joined result would cross to it in one more real upload, while its
//!   pieces from its peers come straight over their links. `auto` weighs
//!   it only where a rank lies on a GPU whose memory is the host's
//!   (`host-memory` in the topology: lavapipe, an iGPU), the case it was
//!   built for: on the 8-GPU box with an iGPU (`nvlink8-igpu.topo`) it
//!   takes the all_to_all from 1.41x the bound to 1.04x. Elsewhere a
//!   discrete Vulkan device reads the imported buffer over its bus, and
//!   offering it there was left for a change that reviews every GPU
//!   group's golden again. `exchange=joined` asks for it anywhere.
//!
//! `algorithm=` does not apply: an `all_to_all` takes the cheapest estimate
//! of its candidates, or the one `exchange=direct|packed|joined` names; the
//! note lists them.

use super::emit::{Emitter, Held};
use super::site::{Broken, CollectiveSite};
use fuel_graph_ext::graph::ValueId;
use fuel_graph_ext::op::all_to_all_pieces;
use fuel_graph_ext::topology::Route;
use fuel_graph_ext::{Device, DeviceKind, Op, ReduceOp, TensorType, Topology};
use std::collections::BTreeMap;
use std::fmt;

/// One of `all_to_all`'s lowerings.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Exchange {
    /// Pack the pieces bound for one staging CPU into one transfer.
    pub packed: bool,
    /// Join each Vulkan rank's pieces on the staging CPU (never with
    /// `packed`).
    pub joined: bool,
}

impl Exchange {
    /// `direct`.
    pub const DIRECT: Exchange = Exchange {
        packed: false,
        joined: false,
    };
    /// `packed`.
    pub const PACKED: Exchange = Exchange {
        packed: true,
        joined: false,
    };
    /// `joined`.
    pub const JOINED: Exchange = Exchange {
        packed: false,
        joined: true,
    };

    /// The name the note prints.
    pub fn name(&self) -> &'static str {
        match (self.packed, self.joined) {
            (true, _) => "packed",
            (false, true) => "joined",
            (false, false) => "direct",
        }
    }

    /// The results of the `all_to_all` that `em` lowers, in rank order.
    pub(super) fn exchange(&self, em: &mut Emitter<'_>) -> Result<Vec<ValueId>, Broken> {
        let site = em.site;
        let Op::AllToAll { axis, split } = &site.op else {
            return Err(site.broken("an exchange of a collective that is not all_to_all"));
        };
        let axis = *axis;
        let n = site.ranks();
        let tys: Vec<TensorType> = site
            .vals
            .iter()
            .map(|v| em.ty(*v).cloned())
            .collect::<Result<_, _>>()?;
        let refs: Vec<&TensorType> = tys.iter().collect();
        let pieces =
            all_to_all_pieces(split.as_deref(), axis, &refs).map_err(|e| site.broken(e))?;
        // Where rank j's pieces meet: the staging CPU for a Vulkan rank
        // that takes pieces from two ranks or more (`joined`), else its
        // device.
        let mut meet = Vec::with_capacity(n);
        for j in 0..n {
            let dst = site.device(j)?;
            let from = pieces.iter().filter(|row| row.get(j) > Some(&0)).count();
            let joins = self.joined && dst.kind == DeviceKind::Vulkan && from >= 2;
            meet.push(if joins { em.topo.staging } else { dst });
        }
        // arrived[j][i]: piece (i, j) where rank j's pieces meet.
        let mut arrived: Vec<Vec<Option<ValueId>>> = vec![vec![None; n]; n];
        for (i, row) in pieces.iter().enumerate() {
            let src = site.device(i)?;
            let mut start = 0;
            // Pieces of rank i bound for ranks behind one staging CPU.
            // (destination, its piece, where the piece starts, its length).
            let mut staged: BTreeMap<Device, Vec<(usize, ValueId, usize, usize)>> = BTreeMap::new();
            for (j, len) in row.iter().copied().enumerate() {
                let at = start;
                start += len;
                if len == 0 {
                    continue;
                }
                let dst = site.device(j)?;
                match em.topo.route(src, dst) {
                    Route::Staged(cpu) if self.packed && src != dst => {
                        staged
                            .entry(cpu)
                            .or_default()
                            .push((j, site.vals[i], at, len));
                    }
                    _ => {
                        let piece = self.cut(em, site.vals[i], axis, at, len)?;
                        arrived[j][i] = Some(em.to(piece, meet[j])?);
                    }
                }
            }
            for (cpu, group) in staged {
                if let [(j, v, at, len)] = group.as_slice() {
                    let piece = self.cut(em, *v, axis, *at, *len)?;
                    arrived[*j][i] = Some(em.to(piece, site.device(*j)?)?);
                    continue;
                }
                // Pack on the source (one slice where the pieces are
                // adjacent, else a concat of them), one crossing to the
                // CPU, unpack there.
                let adjacent = group.windows(2).all(|w| w[0].2 + w[0].3 == w[1].2);
                let packed = match (adjacent, group.first(), group.last()) {
                    (true, Some(first), Some(last)) => {
                        self.cut(em, site.vals[i], axis, first.2, last.2 + last.3 - first.2)?
                    }
                    _ => {
                        let mut parts = Vec::with_capacity(group.len());
                        for (_, v, at, len) in &group {
                            parts.push(self.cut(em, *v, axis, *at, *len)?);
                        }
                        em.concat(&parts, axis, src)?
                    }
                };
                let mut held = Held::new();
                held.insert(src, packed);
                let there = em.reach(&mut held, packed, cpu)?;
                let mut off = 0;
                for (j, _, _, len) in &group {
                    let out = em.slice(there, axis, off, *len)?;
                    off += len;
                    arrived[*j][i] = Some(em.to(out, site.device(*j)?)?);
                }
            }
        }
        let mut results = Vec::with_capacity(n);
        for (j, row) in arrived.iter().enumerate() {
            let dst = site.device(j)?;
            let mut parts: Vec<ValueId> = row.iter().flatten().copied().collect();
            if parts.is_empty() {
                // Nothing arrives: an empty slice of its own operand.
                parts.push(em.slice(site.vals[j], axis, 0, 0)?);
            }
            let joined = em.concat(&parts, axis, meet[j])?;
            results.push(if meet[j] == dst {
                joined
            } else {
                em.to(joined, dst)?
            });
        }
        Ok(results)
    }
}

/// The lowerings estimated for `site` on `topo`, `direct` first (it wins
/// ties): `direct` and `packed`, and `joined` where a rank lies on a GPU
/// whose memory is the host's or where `exchange=joined` (`asked`) names
/// it.
pub(super) fn candidates(
    site: &CollectiveSite,
    topo: &Topology,
    asked: Option<Exchange>,
) -> Result<Vec<Exchange>, Broken> {
    let mut out = vec![Exchange::DIRECT, Exchange::PACKED];
    if asked == Some(Exchange::JOINED) {
        out.push(Exchange::JOINED);
        return Ok(out);
    }
    for r in 0..site.ranks() {
        let d = site.device(r)?;
        if !d.is_cpu() && topo.in_host_memory(d.kind) {
            out.push(Exchange::JOINED);
            break;
        }
    }
    Ok(out)
}

impl Exchange {
    /// `len` entries of `v` from `at` along `axis`: `v` itself where that
    /// is all of it.
    fn cut(
        &self,
        em: &mut Emitter<'_>,
        v: ValueId,
        axis: usize,
        at: usize,
        len: usize,
    ) -> Result<ValueId, Broken> {
        let extent = em.ty(v)?.shape.get(axis).copied().unwrap_or(0);
        if at == 0 && len == extent {
            Ok(v)
        } else {
            em.slice(v, axis, at, len)
        }
    }
}

impl super::algorithm::Algorithm for Exchange {
    /// A piece travels as in `direct`: straight to each target, staged
    /// where the route says so.
    fn spread(&self, em: &mut Emitter<'_>, v: ValueId, targets: &[Device]) -> Result<Held, Broken> {
        let (_, mut held, rest) = em.spread_start(v, targets)?;
        for d in rest {
            em.reach(&mut held, v, d)?;
        }
        Ok(held)
    }

    fn combine(&self, em: &mut Emitter<'_>, _op: ReduceOp) -> Result<Vec<ValueId>, Broken> {
        Err(em.site.broken("an all_to_all lowering combines nothing"))
    }
}

impl fmt::Display for Exchange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
