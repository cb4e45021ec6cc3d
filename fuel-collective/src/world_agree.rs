//! The join-time agreement of a world ([`crate::WorldGroup::with_topology`]):
//! before anything is recorded, the processes compare what would make them
//! build different graphs or schedule them differently, in one small
//! `all_gather`, and all fail together on a difference instead of waiting
//! on each other later.
//!
//! Each process brings its local device count and its topology's
//! [`topology_fingerprint`] (a 64-bit FNV-1a hash of the topology's
//! canonical text, [`Topology::to_text`]: every figure the cost model, the
//! lowering and `schedule-collectives` read, and nothing of where the
//! figures came from). Tensors carry their elements as `f64`, exact only
//! to 2^53, so each 64-bit word travels as two 32-bit halves. [`compare`]
//! then checks the rows in a fixed order, device counts first (E0440),
//! then fingerprints (E0442); since every process sees the same rows, a
//! world that differs anywhere fails on every process, each naming the
//! first process whose row differs from its own.
//! [`crate::WorldGroup::gather_words`] exchanges other words the same way
//! (`examples/mpi_schedule.rs` compares the ranks' schedule hashes with it).

use crate::overlap::{fnv1a, FNV_OFFSET};
use crate::{CollectiveError, Communicator, DriverCommunicator};
use fuel_graph_ext::interp::HostTensor;
use fuel_graph_ext::{DType, Device, LazyGraph, TensorType, Topology};
use fuel_runtime::driver::CollectiveDriver;

/// The input name the agreement binds (and [`gather_words`] after it).
pub const AGREE_INPUT: &str = "fuel-world-devices";

/// A fixed hash of every figure of `topology`: equal in two processes
/// exactly when (barring a collision) their topologies write the same
/// file.
pub fn topology_fingerprint(topology: &Topology) -> u64 {
    fnv1a(FNV_OFFSET, topology.to_text().as_bytes())
}

/// Every process's `words` (the same count on each), gathered through
/// `comm` on `hub`: row p is process p's. Eager: every process must call
/// it at the same point with as many words (none exchanges nothing).
pub fn gather_words<D: CollectiveDriver>(
    comm: &DriverCommunicator<D>,
    hub: Device,
    words: &[u64],
) -> Result<Vec<Vec<u64>>, CollectiveError> {
    let n = words.len() * 2;
    if n == 0 {
        return Ok(vec![Vec::new(); comm.world_size()]);
    }
    let g = LazyGraph::new("world-agree");
    let ty = TensorType::new(DType::I64, &[n]);
    let x = g.input(AGREE_INPUT, hub, ty.clone());
    let halves: Vec<f64> = words
        .iter()
        .flat_map(|w| [(w >> 32) as f64, (w & 0xffff_ffff) as f64])
        .collect();
    comm.bind(AGREE_INPUT, HostTensor::new(ty, halves));
    let all = comm.all_gather(&x, 0)?;
    let got = comm.evaluate(&all)?.to_f64();
    Ok(got
        .chunks(n)
        .map(|row| {
            row.chunks(2)
                .map(|h| ((h[0] as u64) << 32) | (h.get(1).copied().unwrap_or(0.0) as u64))
                .collect()
        })
        .collect())
}

/// What process `me` brought, against every process's row (device count,
/// topology fingerprint): the first difference, device counts first, as
/// the error every process reports.
pub fn compare(me: usize, rows: &[[u64; 2]]) -> Result<(), CollectiveError> {
    let Some(mine) = rows.get(me).copied() else {
        return Err(CollectiveError::Driver(format!(
            "the world's agreement gave {} row(s), none for process {me}",
            rows.len()
        )));
    };
    if let Some((peer, theirs)) = rows.iter().enumerate().find(|(_, r)| r[0] != mine[0]) {
        return Err(CollectiveError::WorldDeviceCount {
            process: me,
            mine: mine[0] as usize,
            peer,
            theirs: theirs[0] as usize,
        });
    }
    if let Some((peer, theirs)) = rows.iter().enumerate().find(|(_, r)| r[1] != mine[1]) {
        return Err(CollectiveError::WorldTopology {
            process: me,
            mine: mine[1],
            peer,
            theirs: theirs[1],
        });
    }
    Ok(())
}

/// The agreement itself: this process's device count and topology against
/// every process's, through `comm`, on `hub`.
pub(crate) fn agree<D: CollectiveDriver>(
    comm: &DriverCommunicator<D>,
    hub: Device,
    devices: usize,
    topology: &Topology,
) -> Result<(), CollectiveError> {
    let rows = gather_words(comm, hub, &[devices as u64, topology_fingerprint(topology)])?;
    let rows: Vec<[u64; 2]> = rows
        .iter()
        .map(|r| {
            [
                r.first().copied().unwrap_or(0),
                r.get(1).copied().unwrap_or(0),
            ]
        })
        .collect();
    compare(comm.rank(), &rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_counts_are_compared_first_then_fingerprints() {
        let a = topology_fingerprint(&Topology::default());
        let b = topology_fingerprint(
            &Topology::parse("staging cpu:0\nlink host-host bandwidth=3 latency=1\n").unwrap(),
        );
        assert_ne!(a, b);
        assert!(compare(1, &[[2, a], [2, a], [2, a]]).is_ok());
        // Process 2 brings another topology: process 0 names it, and
        // process 2 names process 0.
        let rows = [[2, a], [2, a], [2, b]];
        for (me, peer) in [(0, 2), (2, 0)] {
            match compare(me, &rows) {
                Err(CollectiveError::WorldTopology { peer: p, .. }) => assert_eq!(p, peer),
                other => panic!("process {me}: {other:?}"),
            }
        }
        // A device count that differs too is reported first.
        let rows = [[2, a], [1, b]];
        assert!(matches!(
            compare(0, &rows),
            Err(CollectiveError::WorldDeviceCount { peer: 1, .. })
        ));
    }

    #[test]
    fn the_fingerprint_is_the_topology_text_hash() {
        let t = Topology::default();
        assert_eq!(
            topology_fingerprint(&t),
            fnv1a(FNV_OFFSET, t.to_text().as_bytes())
        );
        // Read back from its own text, a topology keeps its fingerprint.
        let back = Topology::parse(&t.to_text()).unwrap();
        assert_eq!(topology_fingerprint(&back), topology_fingerprint(&t));
    }
}
