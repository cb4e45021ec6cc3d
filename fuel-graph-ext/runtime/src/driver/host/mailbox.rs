//! The host driver's groups: the process-wide table of groups, and each
//! group's mailboxes, one FIFO per (sender, receiver, channel), through
//! which ranks exchange shards and messages; a rank that leaves is
//! reported to the peers that wait for it.

use super::super::prologue::{backend_error, lock, Held, IdTable};
use super::super::{CommunicationId, Driver, DriverError};
use super::{bytes_of, HostBuffer, HostDriver, HostUniqueId};
use crate::backend::cpu::CpuBuf;
use fuel_graph_ext::dtype::DType;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Chan {
    P2p,
    Coll,
    /// The reduced runs of an all-reduce's second half.
    Part,
    /// An all-to-all's pieces.
    AllToAll,
    /// What each rank of an all-to-all found in the pieces it received.
    Verdict,
}

pub(super) struct Msg {
    pub(super) what: String,
    pub(super) elem: DType,
    pub(super) count: usize,
    pub(super) data: MsgData,
}

/// What a message carries.
pub(super) enum MsgData {
    /// An all-reduce shard, read where it lies (every rank's fold needs
    /// it aligned); its sender waits until every peer has dropped it.
    Shard(Arc<Held<CpuBuf>>),
    /// A send's bytes, copied: a send never waits for its receive.
    Bytes(Vec<u8>),
    /// The run `range` of the sender's all-reduce result, read where it
    /// lies; the sender waits until every peer has dropped `token`.
    Part {
        buf: HostBuffer,
        range: std::ops::Range<usize>,
        token: Arc<()>,
    },
    /// An all-to-all rank's finding: the first piece it got that differs
    /// from what it expected, or none.
    Verdict(Option<DriverError>),
}

impl MsgData {
    pub(super) fn bytes(&self, need: usize) -> Result<&[u8], DriverError> {
        match self {
            MsgData::Shard(h) => bytes_of(h, need),
            MsgData::Part { .. } | MsgData::Verdict(_) => Err(backend_error(
                HostDriver::NAME,
                "recv",
                "a collective's message arrived on the point-to-point channel",
            )),
            MsgData::Bytes(b) => b.get(..need).ok_or_else(|| {
                backend_error(
                    HostDriver::NAME,
                    "recv",
                    "the message is shorter than its count",
                )
            }),
        }
    }

    pub(super) fn shard(self) -> Result<Arc<Held<CpuBuf>>, DriverError> {
        match self {
            MsgData::Shard(h) => Ok(h),
            MsgData::Bytes(_) | MsgData::Part { .. } | MsgData::Verdict(_) => Err(backend_error(
                HostDriver::NAME,
                "all_reduce",
                "a send arrived on the collective channel",
            )),
        }
    }
}

pub(super) struct GroupState {
    pub(super) joined: Vec<bool>,
    /// Why each rank left, once it has.
    pub(super) gone: Vec<Option<String>>,
    /// Queued messages per (from, to, channel).
    pub(super) mail: HashMap<(usize, usize, Chan), VecDeque<Msg>>,
}

pub(super) struct Group {
    pub(super) name: String,
    pub(super) ranks: usize,
    pub(super) state: Mutex<GroupState>,
    pub(super) cv: Condvar,
}

pub(super) static IDS: IdTable<CommunicationId, HostUniqueId> = IdTable::new();

pub(super) fn groups() -> &'static Mutex<HashMap<u64, Arc<Group>>> {
    static GROUPS: OnceLock<Mutex<HashMap<u64, Arc<Group>>>> = OnceLock::new();
    GROUPS.get_or_init(Default::default)
}

pub(super) static NEXT_ID: AtomicU64 = AtomicU64::new(1);
pub(super) static NEXT_STREAM: AtomicU64 = AtomicU64::new(1);

pub(super) fn group_name(id: HostUniqueId) -> String {
    IDS.key_of(id)
        .map(|k| k.0)
        .unwrap_or_else(|| format!("#{}", id.0))
}

impl Group {
    /// Waits for a message from `from`, or its departure, or the deadline.
    pub(super) fn take(
        &self,
        from: usize,
        to: usize,
        chan: Chan,
        timeout: Duration,
        op: &'static str,
    ) -> Result<Msg, DriverError> {
        let deadline = Instant::now() + timeout;
        let mut st = lock(&self.state);
        loop {
            if let Some(m) = st
                .mail
                .get_mut(&(from, to, chan))
                .and_then(|q| q.pop_front())
            {
                return Ok(m);
            }
            if let Some(Some(reason)) = st.gone.get(from) {
                return Err(DriverError::PeerGone {
                    group: self.name.clone(),
                    rank: to,
                    peer: from,
                    reason: reason.clone(),
                    op,
                });
            }
            if let Some(Some(reason)) = st.gone.get(to) {
                return Err(DriverError::Poisoned {
                    rank: to,
                    reason: reason.clone(),
                });
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(DriverError::Timeout {
                    rank: to,
                    op,
                    waiting_for: format!("data from rank {from}"),
                    waited_ms: timeout.as_millis() as u64,
                });
            }
            st = self
                .cv
                .wait_timeout(st, deadline - now)
                .map(|(g, _)| g)
                .unwrap_or_else(|e| e.into_inner().0);
        }
    }

    /// Posts `mine` to every peer of `(rank, ranks)` on the collective
    /// channel, described by `what` and its element type, and takes every
    /// peer's shard: the shards in rank order, this rank's own in its
    /// place. A peer whose description or element type differs fails the
    /// call `op` with a mismatch naming both.
    pub(super) fn swap_shards(
        &self,
        (rank, ranks): (usize, usize),
        mine: &Arc<Held<CpuBuf>>,
        (what, elem, count): (&str, DType, usize),
        timeout: Duration,
        op: &'static str,
    ) -> Result<Vec<Arc<Held<CpuBuf>>>, DriverError> {
        for peer in (0..ranks).filter(|p| *p != rank) {
            let data = MsgData::Shard(mine.clone());
            let what = what.to_string();
            self.put(
                rank,
                peer,
                Chan::Coll,
                Msg {
                    what,
                    elem,
                    count,
                    data,
                },
            );
        }
        let mut shards = Vec::with_capacity(ranks);
        for peer in 0..ranks {
            if peer == rank {
                shards.push(mine.clone());
                continue;
            }
            let m = self.take(peer, rank, Chan::Coll, timeout, op)?;
            if m.what != what || m.elem != elem {
                return Err(DriverError::Mismatch {
                    op,
                    rank,
                    mine: what.to_string(),
                    peer,
                    theirs: m.what,
                });
            }
            shards.push(m.data.shard()?);
        }
        Ok(shards)
    }

    pub(super) fn put(&self, from: usize, to: usize, chan: Chan, m: Msg) {
        lock(&self.state)
            .mail
            .entry((from, to, chan))
            .or_default()
            .push_back(m);
        self.cv.notify_all();
    }

    pub(super) fn leave(&self, rank: usize, reason: String) {
        let mut st = lock(&self.state);
        if let Some(g) = st.gone.get_mut(rank) {
            if g.is_none() {
                *g = Some(reason);
            }
        }
        // Nobody will read what was sent to it: let its senders go.
        st.mail.retain(|(_, to, _), _| *to != rank);
        self.cv.notify_all();
    }

    /// Drops shards a rank has folded, under the group's lock, and wakes
    /// their senders (see [`Group::wait_read`]).
    pub(super) fn release<T>(&self, shards: Vec<T>) {
        let _st = lock(&self.state);
        drop(shards);
        self.cv.notify_all();
    }

    /// Waits until every peer has dropped `mine` (read it, or left), so a
    /// buffer a shard borrows is free when the collective completes and
    /// the allocator counters are back where they were.
    pub(super) fn wait_read<T>(
        &self,
        mine: &Arc<T>,
        rank: usize,
        timeout: Duration,
    ) -> Result<(), DriverError> {
        let deadline = Instant::now() + timeout;
        let mut st = lock(&self.state);
        while Arc::strong_count(mine) > 1 {
            let now = Instant::now();
            if now >= deadline {
                return Err(DriverError::Timeout {
                    rank,
                    op: "all_reduce",
                    waiting_for: "its peers to read its shard and its result".into(),
                    waited_ms: timeout.as_millis() as u64,
                });
            }
            // A peer that fails drops its shards without the lock: poll.
            let slice = (deadline - now).min(Duration::from_millis(10));
            st = self
                .cv
                .wait_timeout(st, slice)
                .map(|(g, _)| g)
                .unwrap_or_else(|e| e.into_inner().0);
        }
        Ok(())
    }
}
