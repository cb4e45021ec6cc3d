//! One collective as the lowering sees it: what it does, its shards and
//! their devices, the shard type, and how many results it has.
//!
//! [`CollectiveSite::read`] takes it off the graph once, before any choice
//! is made; every algorithm and the estimator then work from this value, not
//! from the node (which the pass removes at the end).

use crate::cost::bound::Collective;
use fuel_graph_ext::graph::{NodeId, ValueId};
use fuel_graph_ext::op::scatter_extents;
use fuel_graph_ext::pass::PassError;
use fuel_graph_ext::{DType, Device, Graph, Op, ReduceOp, TensorType};

/// Each rank's `(start, len)` along a `reduce_scatter`'s axis.
pub(super) type Shares = Vec<(usize, usize)>;

/// One collective, read off the graph.
#[derive(Clone, Debug)]
pub(super) struct CollectiveSite {
    /// The collective op (kind and attributes).
    pub op: Op,
    /// Operand 0 (every collective has one).
    pub first: ValueId,
    /// Every operand, in rank order.
    pub vals: Vec<ValueId>,
    /// Each operand's device, in rank order.
    pub devs: Vec<Device>,
    /// The shard type (operand 0's).
    pub ty: TensorType,
    /// Each operand's type, in rank order, where they differ (the shards
    /// of an uneven `all_gather`); empty when every shard is `ty`.
    pub uneven: Vec<TensorType>,
    /// How many results the node has.
    pub num_results: usize,
    /// The dtype a `Mean` is cast back to once divided, when its shards
    /// were cast to a wider accumulator (`widen.rs`); `ty` is then the
    /// accumulator's type.
    pub narrow: Option<DType>,
}

impl CollectiveSite {
    /// Reads collective `id`; the error is a sentence for
    /// [`PassError::Failed`].
    pub fn read(g: &Graph, id: NodeId) -> Result<CollectiveSite, String> {
        let n = g.node(id).ok_or("a collective vanished")?;
        let vals: Vec<ValueId> = n.operands.to_vec();
        let devs = vals
            .iter()
            .enumerate()
            .map(|(i, v)| {
                g.value_device(*v)
                    .ok_or_else(|| format!("operand {i} of `{}` has no device", n.op.mnemonic()))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let first = *vals
            .first()
            .ok_or_else(|| format!("`{}` has no operands", n.op.mnemonic()))?;
        let ty = g
            .value_type(first)
            .cloned()
            .ok_or_else(|| format!("operand 0 of `{}` is undefined", n.op.mnemonic()))?;
        let tys: Vec<TensorType> = vals
            .iter()
            .map(|v| g.value_type(*v).cloned().unwrap_or_else(|| ty.clone()))
            .collect();
        let uneven = if tys.iter().all(|t| *t == ty) {
            Vec::new()
        } else {
            tys
        };
        Ok(CollectiveSite {
            op: n.op.clone(),
            first,
            vals,
            devs,
            ty,
            uneven,
            num_results: n.num_results(),
            narrow: None,
        })
    }

    /// The devices results go to, in result order.
    pub fn targets(&self) -> Vec<Device> {
        match &self.op {
            Op::Broadcast { to } => to.to_vec(),
            _ => self.devs.clone(),
        }
    }

    /// How many ranks take part (one per operand).
    pub fn ranks(&self) -> usize {
        self.vals.len()
    }

    /// The reduce op of a collective that combines shards.
    pub fn reduce_op(&self) -> Option<ReduceOp> {
        match self.op {
            Op::AllReduce { op } | Op::Reduce { op, .. } | Op::ReduceScatter { op, .. } => Some(op),
            _ => None,
        }
    }

    /// A `reduce_scatter`'s axis and each rank's `(start, len)` along it
    /// (its split, or the default partition); `None` for other ops.
    pub fn scatter(&self) -> Result<Option<(usize, Shares)>, Broken> {
        let Op::ReduceScatter { axis, split, .. } = &self.op else {
            return Ok(None);
        };
        let extent = self
            .ty
            .shape
            .get(*axis)
            .copied()
            .ok_or_else(|| self.broken(format!("axis {axis} is out of range")))?;
        let extents = scatter_extents(split.as_deref(), *axis, extent, self.ranks())
            .map_err(|e| self.broken(e))?;
        let mut start = 0;
        let chunks = extents
            .into_iter()
            .map(|len| {
                let c = (start, len);
                start += len;
                c
            })
            .collect();
        Ok(Some((*axis, chunks)))
    }

    /// A `reduce`'s root rank.
    pub fn root(&self) -> Option<usize> {
        match self.op {
            Op::Reduce { root, .. } => Some(root),
            _ => None,
        }
    }

    /// The device of rank `rank`, or an internal error: every rank has one.
    pub fn device(&self, rank: usize) -> Result<Device, Broken> {
        self.devs
            .get(rank)
            .copied()
            .ok_or_else(|| self.broken(format!("rank {rank} has no device")))
    }

    /// An internal error of the pass while it lowers this collective: an
    /// invariant the pass keeps has been broken (a bug, not bad input).
    pub fn broken(&self, what: impl std::fmt::Display) -> Broken {
        let devs: Vec<String> = self.devs.iter().map(|d| d.to_string()).collect();
        Broken(Box::new(PassError::internal(
            super::NAME,
            format!(
                "lowering `{}` over [{}]: {what}",
                self.op.mnemonic(),
                devs.join(", ")
            ),
        )))
    }
}

/// An internal error of the lowering ([`PassError::Internal`]), boxed so
/// that the emitter's many small results stay two words wide: returning a
/// whole `PassError` from every helper cost the ring about 2% of its
/// instructions.
#[derive(Debug)]
pub(super) struct Broken(Box<PassError>);

impl From<Broken> for PassError {
    fn from(b: Broken) -> PassError {
        *b.0
    }
}

impl CollectiveSite {
    /// What the collective moves, in bytes by rank, and its group (for a
    /// `broadcast`, the source then each destination), for
    /// [`crate::cost::bound`].
    ///
    /// A `Mean` folded in a wider accumulator (`narrow`) is counted in its
    /// narrow type, which a lowering may move; the third value is how many
    /// times wider the accumulator is.
    pub fn pattern(&self) -> Result<(Collective, Vec<Device>, usize), Broken> {
        let widen = self
            .narrow
            .map_or(1, |d| self.ty.dtype.size_bytes() / d.size_bytes().max(1))
            .max(1);
        let (c, group) = self.wide_pattern()?;
        let narrow = |b: usize| b / widen;
        let c = match c {
            Collective::AllReduce { bytes } => Collective::AllReduce {
                bytes: narrow(bytes),
            },
            Collective::Reduce { bytes, root } => Collective::Reduce {
                bytes: narrow(bytes),
                root,
            },
            Collective::ReduceScatter { bytes, shares } => Collective::ReduceScatter {
                bytes: narrow(bytes),
                shares: shares.into_iter().map(narrow).collect(),
            },
            other => other,
        };
        Ok((c, group, widen))
    }

    /// [`CollectiveSite::pattern`] in the shard type as it is.
    fn wide_pattern(&self) -> Result<(Collective, Vec<Device>), Broken> {
        let bytes = self.ty.size_bytes();
        let n = self.ranks();
        // Bytes per unit of extent along `axis` of a shard of type `ty`.
        let per_unit = |ty: &TensorType, axis: usize| {
            let extent = ty.shape.get(axis).copied().unwrap_or(1).max(1);
            ty.size_bytes() / extent
        };
        let c = match &self.op {
            Op::AllReduce { .. } => Collective::AllReduce { bytes },
            Op::Reduce { root, .. } => Collective::Reduce { bytes, root: *root },
            Op::Broadcast { to } => {
                let mut group = vec![self.device(0)?];
                group.extend(to.iter().copied());
                return Ok((Collective::Broadcast { bytes, root: 0 }, group));
            }
            Op::AllGather { .. } if self.uneven.is_empty() => Collective::AllGather {
                shards: vec![bytes; n],
            },
            Op::AllGather { .. } => Collective::AllGather {
                shards: self.uneven.iter().map(TensorType::size_bytes).collect(),
            },
            Op::ReduceScatter { .. } => {
                let (axis, shares) = self
                    .scatter()?
                    .ok_or_else(|| self.broken("a reduce_scatter without shares"))?;
                let unit = per_unit(&self.ty, axis);
                Collective::ReduceScatter {
                    bytes,
                    shares: shares.iter().map(|(_, len)| len * unit).collect(),
                }
            }
            Op::AllToAll { axis, split } => {
                let mut sends = Vec::with_capacity(n * n);
                for i in 0..n {
                    let ty = self.uneven.get(i).unwrap_or(&self.ty);
                    let extent = ty.shape.get(*axis).copied().unwrap_or(0);
                    let row = match split {
                        Some(s) => s.get(i * n..(i + 1) * n).map(<[usize]>::to_vec),
                        None => scatter_extents(None, *axis, extent, n).ok(),
                    }
                    .ok_or_else(|| self.broken(format!("rank {i} has no split")))?;
                    let unit = per_unit(ty, *axis);
                    sends.extend(row.iter().map(|e| e * unit));
                }
                Collective::AllToAll { sends }
            }
            other => return Err(self.broken(format!("`{}` is no collective", other.mnemonic()))),
        };
        Ok((c, self.devs.clone()))
    }
}
