//! Star classes: which star points of one group cost the same, so that
//! `auto` prices one point per class with a closed form
//! ([`super::estimate`]'s star case) instead of one per device.

use crate::lower::site::CollectiveSite;
use fuel_graph_ext::plan::slice_is_view;
use fuel_graph_ext::{Device, Topology};
use std::hash::{Hash, Hasher};

/// What a star point's estimate depends on besides the group: points of
/// one class cost the same, because swapping them maps the group and the
/// topology onto themselves (the cost model has no figure per device index,
/// only per kind; the staging CPU, a `reduce`'s root, the number of ranks
/// on the point, whether a GPU point holds the first rank's shard (a GPU
/// fold uploads a first operand from afar straight into its result; a
/// host fold reads every operand alike) and a CUDA
/// device's peers are what set points apart). The
/// pass estimates one point per class, so a star over 1000 CPUs costs two
/// closed forms, not 1001.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(in crate::lower) struct StarClass {
    kind: fuel_graph_ext::DeviceKind,
    staging: bool,
    ranks_on: usize,
    root: bool,
    /// The point is a GPU that holds the first rank's shard, the fold's
    /// first operand.
    holds_first: bool,
    /// A CUDA device with a declared peer is a class of its own.
    peered_cuda: Option<u32>,
    /// For a `reduce_scatter`: the shares `at` keeps (their lengths, and
    /// whether each slice is a view), hashed; for an uneven `all_gather`,
    /// the sizes of the shards on `at`, hashed. Shares differ with a split
    /// or the default partition's remainder, and a view costs less than a
    /// slice that copies, so two points of one kind are alike only when
    /// they keep alike shares (the others' shares are the rest).
    kept_shares: u64,
}

/// The class of the star point `at` for `site`.
pub(in crate::lower) fn star_class(
    site: &CollectiveSite,
    at: Device,
    topo: &Topology,
) -> StarClass {
    let peered = at.kind == fuel_graph_ext::DeviceKind::Cuda
        && site
            .devs
            .iter()
            .any(|d| d.kind == at.kind && *d != at && topo.has_peer(at.index, d.index));
    let kept_shares = match site.scatter() {
        // An uneven all_gather: the sizes of the shards `at` holds (the
        // others arrive, and every point joins the same whole).
        Ok(None) if !site.uneven.is_empty() => {
            let mut kept: Vec<usize> = site
                .devs
                .iter()
                .zip(&site.uneven)
                .filter(|(d, _)| **d == at)
                .map(|(_, t)| t.size_bytes())
                .collect();
            kept.sort_unstable();
            let mut h = rustc_hash::FxHasher::default();
            kept.hash(&mut h);
            h.finish()
        }
        Ok(Some((axis, shares))) => {
            let mut kept: Vec<(usize, bool)> = site
                .devs
                .iter()
                .zip(&shares)
                .filter(|(d, _)| **d == at)
                .map(|(_, &(start, len))| {
                    (len, slice_is_view(topo, at, &site.ty, axis, start, len))
                })
                .collect();
            kept.sort_unstable();
            let mut h = rustc_hash::FxHasher::default();
            kept.hash(&mut h);
            h.finish()
        }
        _ => 0,
    };
    StarClass {
        kind: at.kind,
        staging: at == topo.staging,
        ranks_on: site.devs.iter().filter(|d| **d == at).count(),
        root: site.root().and_then(|r| site.devs.get(r)) == Some(&at),
        holds_first: !at.is_cpu() && site.devs.first() == Some(&at),
        peered_cuda: peered.then_some(at.index),
        kept_shares,
    }
}
