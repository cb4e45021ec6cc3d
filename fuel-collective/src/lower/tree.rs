//! `tree`: ranks form an `arity`-ary tree laid out breadth first, the root
//! first and then the other ranks sorted by vendor. Each node combines its
//! own shard with its children's partials in one op and sends the result to
//! its parent; the total comes back down the same tree.
//!
//! The root is a `reduce`'s root, else the rank on `reduce_at`, else rank
//! 0. A value with nothing to combine spreads down a tree from its source.

use super::algorithm::{Algorithm, Ask, Lowering};
use super::emit::{Emitter, Held};
use super::layout;
use super::site::Broken;
use fuel_graph_ext::graph::ValueId;
use fuel_graph_ext::{Device, ElementwiseOp, ReduceOp};
use std::fmt;

/// A k-ary tree.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Tree {
    /// The rank at the root.
    pub root: usize,
    /// Children per node, 2 or more.
    pub arity: usize,
}

/// The tree, rooted as the module doc says, with the asked arity.
pub(super) fn candidates(ask: &Ask<'_>) -> Result<Vec<Lowering>, String> {
    let Ask { site, opts, .. } = *ask;
    let root = site.root().unwrap_or_else(|| {
        opts.reduce_at
            .and_then(|d| site.devs.iter().position(|x| *x == d))
            .unwrap_or(0)
    });
    Ok(vec![Lowering::Tree(Tree {
        root,
        arity: opts.arity,
    })])
}

impl Tree {
    /// Combines `vals` up the tree; returns the total on the root's device.
    fn reduce(
        &self,
        em: &mut Emitter<'_>,
        kind: ElementwiseOp,
        vals: &[ValueId],
    ) -> Result<ValueId, Broken> {
        let devs = vals
            .iter()
            .map(|v| em.dev(*v))
            .collect::<Result<Vec<_>, _>>()?;
        let order = tree_order(&devs, self.root);
        let n = order.len();
        let mut children: Vec<Vec<ValueId>> = vec![Vec::new(); n];
        let mut total = None;
        for pos in (0..n).rev() {
            let rank = order[pos];
            let (Some(&own), Some(&d)) = (vals.get(rank), devs.get(rank)) else {
                return Err(em.site.broken(format!("the tree has no rank {rank}")));
            };
            let mut inputs = vec![own];
            inputs.append(&mut children[pos]);
            let partial = em.combine(kind, &inputs, d)?;
            match layout::tree_parent(pos, self.arity).and_then(|p| children.get_mut(p)) {
                Some(siblings) => siblings.insert(0, partial),
                None => total = Some(partial),
            }
        }
        total.ok_or_else(|| em.site.broken("the tree has no root"))
    }
}

/// Ranks in tree order: `root` first, then the rest sorted by vendor.
fn tree_order(devs: &[Device], root: usize) -> Vec<usize> {
    let mut order = vec![root];
    order.extend(layout::vendor_order(devs).into_iter().filter(|r| *r != root));
    order
}

impl Algorithm for Tree {
    fn spread(&self, em: &mut Emitter<'_>, v: ValueId, targets: &[Device]) -> Result<Held, Broken> {
        let (_, mut held, mut rest) = em.spread_start(v, targets)?;
        rest.sort();
        let mut nodes = vec![v];
        for (i, d) in rest.into_iter().enumerate() {
            let parent = layout::tree_parent(i + 1, self.arity)
                .and_then(|p| nodes.get(p).copied())
                .ok_or_else(|| em.site.broken("a tree node has no parent"))?;
            let c = em.reach(&mut held, parent, d)?;
            nodes.push(c);
        }
        Ok(held)
    }

    fn combine(&self, em: &mut Emitter<'_>, op: ReduceOp) -> Result<Vec<ValueId>, Broken> {
        let site = em.site;
        let total = self.reduce(em, op.combiner(), &site.vals)?;
        em.deliver(op, total, self)
    }
}

impl fmt::Display for Tree {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "tree{{arity={}}}", self.arity)
    }
}
