//! [`LocalGroup`]: every rank of a group that one process drives, such as an
//! executor's island of `driver_all_reduce` nodes. It joins all ranks at
//! once when it is made (threads for the host driver, `ncclCommInitAll` for
//! NCCL) and issues a collective for every rank together: inside one group
//! call, each rank's part on its own comm stream, then waits for them all.

use super::prologue::lock;
use super::host::HostDriver;
use super::{CollectiveDriver, CommunicationId, Driver, DriverError, JoinOptions};
use crate::backend::Buf;
use fuel_graph_ext::dtype::DType;
use fuel_graph_ext::op::ReduceOp;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// What the executor calls to run one island's all-reduce.
pub trait LocalAllReduce: Send + Sync {
    /// The driver's name.
    fn driver(&self) -> &'static str;
    /// How many ranks.
    fn ranks(&self) -> usize;
    /// Reduces `srcs[r]` (rank r's shard) into `dsts[r]` for every rank
    /// and gives the destinations back once every rank is done.
    fn all_reduce(
        &self,
        srcs: &[Arc<Buf>],
        dsts: Vec<Buf>,
        dtype: DType,
        op: ReduceOp,
    ) -> Result<Vec<Buf>, DriverError>;
}

/// One communicator per rank of a group this process drives alone.
pub struct LocalGroup<D: CollectiveDriver> {
    comms: Vec<Mutex<D::Communicator>>,
}

impl<D: CollectiveDriver> LocalGroup<D> {
    /// A group over communicators already joined, rank r at index r.
    pub fn from_comms(comms: Vec<D::Communicator>) -> Self {
        LocalGroup {
            comms: comms.into_iter().map(Mutex::new).collect(),
        }
    }
}

static NEXT_LOCAL: AtomicU64 = AtomicU64::new(1);

impl LocalGroup<HostDriver> {
    /// A fresh host group of `ranks`, every rank joined (on a thread each,
    /// since a join waits for all the others). A thread that cannot start
    /// is an error naming the limits it may have hit (the ranks already
    /// started give up after the join timeout), not a panic.
    pub fn join_host(ranks: usize, opts: JoinOptions) -> Result<Self, DriverError> {
        let name = CommunicationId::new(format!(
            "local-{}",
            NEXT_LOCAL.fetch_add(1, Ordering::Relaxed)
        ));
        let id = HostDriver::group_id(&name)?;
        let joined: Vec<Result<_, DriverError>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..ranks)
                .map(|r| {
                    std::thread::Builder::new()
                        .name(format!("fuel-join-rank{r}"))
                        .spawn_scoped(s, move || HostDriver::join_with(id, ranks, r, opts))
                })
                .collect();
            handles
                .into_iter()
                .enumerate()
                .map(|(r, h)| match h {
                    Ok(h) => h.join().unwrap_or_else(|_| {
                        Err(DriverError::Backend {
                            driver: HostDriver::NAME,
                            call: "join",
                            reason: "the joining thread panicked".into(),
                        })
                    }),
                    Err(e) => Err(DriverError::Backend {
                        driver: HostDriver::NAME,
                        call: "join",
                        reason: crate::backend::worker::spawn_error(
                            format!("the thread that joins rank {r}"),
                            &e,
                        )
                        .to_string(),
                    }),
                })
                .collect()
        });
        // A thread that never started is the cause; the ranks that did
        // start then only timed out waiting for it.
        if let Some(e) = joined.iter().find_map(|r| match r {
            Err(e @ DriverError::Backend { .. }) => Some(e.clone()),
            _ => None,
        }) {
            return Err(e);
        }
        Ok(Self::from_comms(
            joined.into_iter().collect::<Result<_, _>>()?,
        ))
    }
}

impl<D: CollectiveDriver> LocalAllReduce for LocalGroup<D> {
    fn driver(&self) -> &'static str {
        D::NAME
    }

    fn ranks(&self) -> usize {
        self.comms.len()
    }

    fn all_reduce(
        &self,
        srcs: &[Arc<Buf>],
        dsts: Vec<Buf>,
        dtype: DType,
        op: ReduceOp,
    ) -> Result<Vec<Buf>, DriverError> {
        let comms: Vec<_> = self.comms.iter().map(|c| lock(c)).collect();
        let mut pairs = Vec::with_capacity(comms.len());
        for (src, dst) in srcs.iter().zip(dsts) {
            pairs.push((D::lend(src)?, D::adopt(dst)?));
        }
        let bytes = pairs.first().map_or(0, |(s, _)| s.bytes);
        let (dt, count) = D::data_type(dtype, bytes as u64)?;
        D::group_start()?;
        let posted = comms.iter().zip(&pairs).try_for_each(|(c, (src, dst))| {
            D::all_reduce(c, src, dst, dt, count, op, D::comm_stream(c))
        });
        D::group_end()?;
        posted?;
        // Compute work that reads a result waits for it on the device.
        for (_, dst) in &pairs {
            D::order_compute(dst)?;
        }
        for c in &comms {
            D::synchronize(c, D::comm_stream(c))?;
        }
        pairs.into_iter().map(|(_, dst)| D::reclaim(dst)).collect()
    }
}
