//! The host driver's all-to-all: each rank posts one message per peer on
//! the all-to-all mailboxes, takes one from each, and before it writes its
//! destination every rank tells every other what it found (a count or type
//! that differs from what it expects, or nothing). All ranks then fail
//! with the same error, naming the first disagreement, or all write their
//! result: a bad split is an error everywhere, never a hang.

use super::super::prologue::{check_counts, check_src_dst, lock, Call, Member};
use super::super::DriverError;
use super::mailbox::{Chan, Msg, MsgData};
use super::{bytes_mut_of, bytes_of, HostDriver, Job};

const OP: &str = "all_to_all";

impl HostDriver {
    /// [`CollectiveDriver::all_to_all`](super::super::CollectiveDriver::all_to_all)
    /// over the mailboxes.
    pub(super) fn all_to_all_mail(
        call: Call<'_, Self>,
        send: &[usize],
        recv: &[usize],
    ) -> Result<(), DriverError> {
        let Call(comm, src, dst, dtype, stream) = call;
        comm.check(stream)?;
        let ts = check_counts("host", OP, send, comm.ranks)?;
        let tr = check_counts("host", OP, recv, comm.ranks)?;
        let es = dtype.size_bytes();
        let need = check_src_dst(OP, es, (ts, src.bytes), (tr, dst.bytes))?;
        let out_bytes = tr * es;
        let (job, ticket) = Job::new(comm, src, dst);
        let (send, recv) = (send.to_vec(), recv.to_vec());
        comm.enqueue(Some(ticket), OP, move || {
            job.wait_src(OP)?;
            let (group, rank, ranks, timeout, src_buf, dst_buf) = job.into_parts();
            // A copy of the operand: the destination may be the source.
            let data = bytes_of(&lock(&src_buf), need)?.to_vec();
            let mut pieces: Vec<&[u8]> = Vec::with_capacity(ranks);
            let mut at = 0;
            for c in &send {
                pieces.push(&data[at..at + c * es]);
                at += c * es;
            }
            for (j, piece) in pieces.iter().enumerate().filter(|(j, _)| *j != rank) {
                let m = Msg {
                    what: format!("{} {dtype} elements", send[j]),
                    elem: dtype,
                    count: send[j],
                    data: MsgData::Bytes(piece.to_vec()),
                };
                group.put(rank, j, Chan::AllToAll, m);
            }
            // What arrives, and the first piece that is not what this rank
            // expects.
            let mut got: Vec<Option<Msg>> = (0..ranks).map(|_| None).collect();
            let mut found = None;
            for (i, slot) in got.iter_mut().enumerate() {
                if i == rank {
                    continue;
                }
                let m = group.take(i, rank, Chan::AllToAll, timeout, OP)?;
                if found.is_none() && (m.elem != dtype || m.count != recv[i]) {
                    found = Some(DriverError::SplitMismatch {
                        from: i,
                        to: rank,
                        sends: m.count,
                        expects: recv[i],
                        elem: m.elem,
                    });
                }
                *slot = Some(m);
            }
            if found.is_none() && send[rank] != recv[rank] {
                found = Some(DriverError::SplitMismatch {
                    from: rank,
                    to: rank,
                    sends: send[rank],
                    expects: recv[rank],
                    elem: dtype,
                });
            }
            // Every rank hears every other's finding, so all fail alike.
            for j in (0..ranks).filter(|j| *j != rank) {
                let m = Msg {
                    what: "an all_to_all verdict".into(),
                    elem: dtype,
                    count: 0,
                    data: MsgData::Verdict(found.clone()),
                };
                group.put(rank, j, Chan::Verdict, m);
            }
            let mut first = None;
            for i in 0..ranks {
                let v = if i == rank {
                    found.clone()
                } else {
                    match group.take(i, rank, Chan::Verdict, timeout, OP)?.data {
                        MsgData::Verdict(v) => v,
                        _ => None,
                    }
                };
                if first.is_none() {
                    first = v;
                }
            }
            if let Some(e) = first {
                return Err(e);
            }
            let mut out = lock(&dst_buf);
            let out = bytes_mut_of(&mut out, out_bytes)?;
            let mut at = 0;
            for (i, m) in got.iter().enumerate() {
                let len = recv[i] * es;
                let piece = match m {
                    Some(m) => m.data.bytes(len)?,
                    None => pieces[rank],
                };
                out[at..at + len].copy_from_slice(piece);
                at += len;
            }
            Ok(())
        })
    }
}
