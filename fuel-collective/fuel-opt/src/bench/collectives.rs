//! `fuel-opt bench --collective`: which collective the bench records, and
//! what nccl-tests reports for it.
//!
//! Each collective is recorded with `DeviceGroup` over one shard of
//! `--sizes` bytes per rank (axis 0). [`Collective::data_bytes`] is the
//! size nccl-tests divides by the time to get `algbw`: the bytes per rank
//! for every collective but `all_gather`, whose size is its gathered
//! result, n shards. [`Collective::bus_factor`] turns `algbw` into `busbw`
//! with nccl-tests' factors: 2(n−1)/n for all_reduce, (n−1)/n for
//! all_gather, reduce_scatter and all_to_all, 1 for broadcast.
//!
//! [`Collective::bound_us`] is the host's own bound for the same data
//! movement in the same run, on plain host buffers
//! ([`crate::bench::host_moves_us`]): all_reduce adds n shards and copies
//! the sum n−1 times; reduce_scatter adds n shards and copies each rank's
//! slice out once (one shard's bytes in all); all_gather writes n results
//! of n shards (n² shard copies); broadcast copies the root's shard n−1
//! times; all_to_all writes n results of one shard each, a piece from every
//! rank (n shard copies): the memcpy bound of the bytes it moves.

use crate::Failure;
use fuel_collective::DeviceGroup;
use fuel_graph_ext::{Device, Graph, LazyGraph, ReduceOp, TensorType};

/// The value of `--collective`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Collective {
    /// Every rank gets the reduction of all shards (the default).
    #[value(name = "all_reduce")]
    AllReduce,
    /// Every rank gets all shards joined along axis 0.
    #[value(name = "all_gather")]
    AllGather,
    /// Rank i gets the i-th slice of the reduction.
    #[value(name = "reduce_scatter")]
    ReduceScatter,
    /// Every rank gets rank 0's shard.
    #[value(name = "broadcast")]
    Broadcast,
    /// Rank i's j-th piece goes to rank j.
    #[value(name = "all_to_all")]
    AllToAll,
}

impl Collective {
    /// Every collective the bench records (the tests go over them).
    #[cfg(test)]
    pub const ALL: [Collective; 5] = [
        Collective::AllReduce,
        Collective::AllGather,
        Collective::ReduceScatter,
        Collective::Broadcast,
        Collective::AllToAll,
    ];

    /// The op's name as the IR spells it.
    pub fn name(self) -> &'static str {
        match self {
            Collective::AllReduce => "all_reduce",
            Collective::AllGather => "all_gather",
            Collective::ReduceScatter => "reduce_scatter",
            Collective::Broadcast => "broadcast",
            Collective::AllToAll => "all_to_all",
        }
    }

    /// nccl-tests' factor from algbw to busbw for `n` ranks.
    pub fn bus_factor(self, n: usize) -> f64 {
        if n <= 1 {
            return 1.0;
        }
        let n = n as f64;
        match self {
            Collective::AllReduce => 2.0 * (n - 1.0) / n,
            Collective::AllGather | Collective::ReduceScatter | Collective::AllToAll => {
                (n - 1.0) / n
            }
            Collective::Broadcast => 1.0,
        }
    }

    /// The bytes nccl-tests divides by the time: `bytes` per rank, or for
    /// all_gather the gathered result of `n` shards.
    pub fn data_bytes(self, n: usize, bytes: usize) -> usize {
        match self {
            Collective::AllGather => bytes.saturating_mul(n),
            _ => bytes,
        }
    }

    /// Elements per rank for about `bytes`: at least one, and for the
    /// collectives that cut a shard into `n` pieces a multiple of `n`, so
    /// that the pieces are even.
    pub fn count(self, n: usize, bytes: usize, elem: usize) -> usize {
        let count = (bytes / elem).max(1);
        match self {
            Collective::ReduceScatter | Collective::AllToAll => count.div_ceil(n.max(1)) * n.max(1),
            _ => count,
        }
    }

    /// Records the collective over one input `shard{i}` of `ty` per device.
    pub fn build(
        self,
        devices: &[Device],
        ty: &TensorType,
        op: ReduceOp,
    ) -> Result<Graph, Failure> {
        let bad = |e: fuel_collective::CollectiveError| Failure::input(e.to_string());
        let group = DeviceGroup::new(devices.iter().copied()).map_err(bad)?;
        let lazy = LazyGraph::new(self.name());
        let shards: Vec<_> = devices
            .iter()
            .enumerate()
            .map(|(i, d)| lazy.input(&format!("shard{i}"), *d, ty.clone()))
            .collect();
        let results = match self {
            Collective::AllReduce => group.all_reduce(&shards, op),
            Collective::AllGather => group.all_gather(&shards, 0),
            Collective::ReduceScatter => group.reduce_scatter(&shards, op, 0),
            Collective::Broadcast => group.broadcast(&shards[0], 0),
            Collective::AllToAll => group.all_to_all(&shards, 0, None),
        }
        .map_err(bad)?;
        for t in &results {
            lazy.output(t).map_err(|e| Failure::input(e.to_string()))?;
        }
        Ok(lazy.snapshot())
    }

    /// Median microseconds of the host bound for this collective's data
    /// movement with `n` shards of `bytes` each (the module's doc says
    /// which).
    pub fn bound_us(
        self,
        n: usize,
        bytes: usize,
        elem: usize,
        iters: usize,
        warmup: usize,
    ) -> Result<f64, Failure> {
        let (add, copies) = match self {
            Collective::AllReduce => (true, n.saturating_sub(1)),
            Collective::ReduceScatter => (true, 1),
            Collective::AllGather => (false, n * n),
            Collective::Broadcast => (false, n.saturating_sub(1)),
            Collective::AllToAll => (false, n),
        };
        crate::bench::host_moves_us(n, add, copies, bytes, elem, iters, warmup)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fuel_graph_ext::DType;

    #[test]
    fn factors_are_nccl_tests_ones() {
        assert_eq!(Collective::AllReduce.bus_factor(4), 1.5);
        assert_eq!(Collective::AllGather.bus_factor(4), 0.75);
        assert_eq!(Collective::ReduceScatter.bus_factor(4), 0.75);
        assert_eq!(Collective::AllToAll.bus_factor(4), 0.75);
        assert_eq!(Collective::Broadcast.bus_factor(4), 1.0);
        assert_eq!(Collective::AllGather.data_bytes(4, 1024), 4096);
        assert_eq!(Collective::AllToAll.data_bytes(4, 1024), 1024);
    }

    #[test]
    fn pieces_are_even() {
        assert_eq!(Collective::AllToAll.count(3, 40, 4), 12);
        assert_eq!(Collective::ReduceScatter.count(4, 4, 4), 4);
        assert_eq!(Collective::Broadcast.count(3, 40, 4), 10);
    }

    #[test]
    fn every_collective_records_one_result_per_rank() {
        let devices = [Device::cpu(0), Device::cpu(1), Device::cpu(2)];
        let ty = TensorType::new(DType::F32, &[6]);
        for c in Collective::ALL {
            let g = c.build(&devices, &ty, ReduceOp::Sum).unwrap();
            assert_eq!(g.outputs().len(), 3, "{}", c.name());
        }
    }
}
