//! `Communicator`: the one-rank-per-process (SPMD) shape of a collective.
//!
//! There are two ways to hold the shards of a collective, and this crate has
//! an API for each. In the SPMD shape every process is one rank: it holds only
//! its own shard, calls `all_reduce(&my_shard, op)`, and the implementation
//! meets the other ranks through a transport. That is the shape for several
//! processes or machines, and it is what [`Communicator`] describes. In the
//! single-process shape one program drives N devices and holds every shard at
//! once; there is nobody to meet, so a per-rank call cannot express it. That
//! is [`crate::DeviceGroup`], which takes the whole slice of shards and
//! records one collective node that the `lower-collectives` pass turns into
//! copies.
//!
//! [`IdentityComm`] here is a world of one rank;
//! [`crate::DriverCommunicator`] is the world of many, over a
//! collective driver. It
//! returns its input because with a single rank there is genuinely nothing to
//! combine: the reduction of one shard is that shard (the mean of one is
//! itself), gathering one shard gives it back, and broadcasting from rank 0
//! to rank 0 moves nothing. It is a correct world of size 1, not a stand-in
//! for a multi-process transport.

use crate::CollectiveError;
use fuel_graph_ext::op::{comm_split_type, comm_type, CommOp};
use fuel_graph_ext::{LazyTensor, ReduceOp};

/// A rank in an SPMD world: each rank calls with its own tensor.
pub trait Communicator {
    /// This process's rank, from 0.
    fn rank(&self) -> usize;
    /// The number of ranks.
    fn world_size(&self) -> usize;
    /// Every rank gets the reduction of every rank's `tensor`.
    fn all_reduce(&self, tensor: &LazyTensor, op: ReduceOp) -> Result<LazyTensor, CollectiveError>;
    /// Every rank gets rank `root`'s `tensor`.
    fn broadcast(&self, tensor: &LazyTensor, root: usize) -> Result<LazyTensor, CollectiveError>;
    /// Every rank gets all ranks' tensors joined along `axis`.
    fn all_gather(&self, tensor: &LazyTensor, axis: usize) -> Result<LazyTensor, CollectiveError>;
    /// Every rank gets its slice (the `rank`-th of `world_size` equal
    /// slices along `axis`) of the reduction of every rank's `tensor`.
    fn reduce_scatter(
        &self,
        tensor: &LazyTensor,
        op: ReduceOp,
        axis: usize,
    ) -> Result<LazyTensor, CollectiveError>;
    /// Every rank gets all ranks' tensors joined along `axis`, where they
    /// may differ in extent: `extents[r]` is rank r's extent along `axis`
    /// (this rank's is its tensor's; zero is legal), the same list on every
    /// rank, since every rank's result type depends on all of them. Equal
    /// extents record the plain `all_gather`.
    fn all_gather_uneven(
        &self,
        tensor: &LazyTensor,
        axis: usize,
        extents: &[usize],
    ) -> Result<LazyTensor, CollectiveError>;
    /// Every rank gets its slice along `axis` of the reduction of every
    /// rank's `tensor`, the slices of different extents: `split[r]` entries
    /// for rank r (adding up to the axis extent, the same on every rank),
    /// or with `None` the default partition, `extent / N` each and the
    /// remainder on the last rank. Equal slices record the plain
    /// `reduce_scatter`.
    fn reduce_scatter_split(
        &self,
        tensor: &LazyTensor,
        op: ReduceOp,
        axis: usize,
        split: Option<&[usize]>,
    ) -> Result<LazyTensor, CollectiveError>;
    /// Every rank cuts its `tensor` along `axis` into `world_size` pieces
    /// and sends piece j to rank j; each gets what it receives joined in
    /// rank order. With `split` `None` the pieces are equal (the result has
    /// the type of `tensor`); else `split` holds N×N extents, the same on
    /// every rank, entry `i*N + j` being what rank i sends rank j (like
    /// `DeviceGroup::all_to_all`): this rank's row must add up to its
    /// extent along `axis`, and its result has its column's sum there. A
    /// split of equal entries is recorded as none.
    fn all_to_all(
        &self,
        tensor: &LazyTensor,
        axis: usize,
        split: Option<&[usize]>,
    ) -> Result<LazyTensor, CollectiveError>;
    /// Returns once every rank has called it.
    fn barrier(&self) -> Result<(), CollectiveError>;
}

/// The world of one rank: every collective returns its input.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IdentityComm;

impl Communicator for IdentityComm {
    fn rank(&self) -> usize {
        0
    }

    fn world_size(&self) -> usize {
        1
    }

    fn all_reduce(&self, tensor: &LazyTensor, op: ReduceOp) -> Result<LazyTensor, CollectiveError> {
        // Sum, product, max and min of one shard are the shard; the mean
        // divides by one.
        alone(tensor, CommOp::AllReduce(op))
    }

    fn broadcast(&self, tensor: &LazyTensor, root: usize) -> Result<LazyTensor, CollectiveError> {
        alone(tensor, CommOp::Broadcast { root })
    }

    fn all_gather(&self, tensor: &LazyTensor, axis: usize) -> Result<LazyTensor, CollectiveError> {
        alone(tensor, CommOp::AllGather { axis })
    }

    fn reduce_scatter(
        &self,
        tensor: &LazyTensor,
        op: ReduceOp,
        axis: usize,
    ) -> Result<LazyTensor, CollectiveError> {
        // One rank keeps the whole (reduced) tensor: its slice is all of it.
        alone(tensor, CommOp::ReduceScatter { op, axis })
    }

    fn all_gather_uneven(
        &self,
        tensor: &LazyTensor,
        axis: usize,
        extents: &[usize],
    ) -> Result<LazyTensor, CollectiveError> {
        // One rank's list must be its own extent.
        alone_split(tensor, CommOp::AllGather { axis }, Some(0), Some(extents))
    }

    fn reduce_scatter_split(
        &self,
        tensor: &LazyTensor,
        op: ReduceOp,
        axis: usize,
        split: Option<&[usize]>,
    ) -> Result<LazyTensor, CollectiveError> {
        // One rank's one slice is the whole axis.
        let whole = [tensor.ty().shape.get(axis).copied().unwrap_or(0)];
        let split = split.unwrap_or(&whole);
        alone_split(
            tensor,
            CommOp::ReduceScatter { op, axis },
            Some(0),
            Some(split),
        )
    }

    fn all_to_all(
        &self,
        tensor: &LazyTensor,
        axis: usize,
        split: Option<&[usize]>,
    ) -> Result<LazyTensor, CollectiveError> {
        // One rank sends its one piece, the whole tensor, to itself; a
        // split must say so (one entry, the extent).
        alone_split(tensor, CommOp::AllToAll { axis }, split.map(|_| 0), split)
    }

    fn barrier(&self) -> Result<(), CollectiveError> {
        // Nobody else to wait for.
        Ok(())
    }
}

/// `kind` in a world of one rank: the typing rule's checks (a root past
/// rank 0, an axis past the tensor's rank), then the tensor itself.
fn alone(tensor: &LazyTensor, kind: CommOp) -> Result<LazyTensor, CollectiveError> {
    comm_type(&kind, 1, &tensor.ty())?;
    Ok(tensor.clone())
}

/// [`alone`] for a collective with a split: `kind` typed with `rank` and
/// `split` for a world of one.
fn alone_split(
    tensor: &LazyTensor,
    kind: CommOp,
    rank: Option<usize>,
    split: Option<&[usize]>,
) -> Result<LazyTensor, CollectiveError> {
    comm_split_type(&kind, 1, rank, split, &tensor.ty())?;
    Ok(tensor.clone())
}
