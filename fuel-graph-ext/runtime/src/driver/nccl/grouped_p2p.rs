//! NCCL's all-to-all: NCCL has no collective for it, so each rank posts
//! one `ncclSend` and one `ncclRecv` per peer (itself included), launched
//! together inside `ncclGroupStart`/`ncclGroupEnd`. NCCL cannot compare
//! the counts the ranks pass: callers must agree on the split first.

use super::super::prologue::{check_counts, Call};
use super::super::DriverError;
use super::{collective, elem_bytes, NcclDriver};
use cudarc::nccl::result;
use std::ffi::c_void;

impl NcclDriver {
    /// [`CollectiveDriver::all_to_all`](super::super::CollectiveDriver::all_to_all)
    /// as grouped sends and receives.
    pub(super) fn all_to_all_grouped(
        call: Call<'_, Self>,
        send: &[usize],
        recv: &[usize],
    ) -> Result<(), DriverError> {
        let Call(comm, _, _, dtype, _) = call;
        let ts = check_counts("nccl", "all_to_all", send, comm.ranks)?;
        let tr = check_counts("nccl", "all_to_all", recv, comm.ranks)?;
        let es = elem_bytes(dtype);
        // NCCL has no all-to-all of its own: one ncclSend and one ncclRecv
        // per peer (itself included), launched together as one group.
        collective(
            call,
            ("all_to_all", "ncclSend/ncclRecv"),
            (ts, tr),
            |sp, dp, cs| {
                result::group_start()?;
                let (mut so, mut ro) = (0u64, 0u64);
                for peer in 0..comm.ranks {
                    // SAFETY: `src` holds the sum of `send` and `dst` the sum
                    // of `recv` elements (checked); each run lies inside them.
                    unsafe {
                        result::send(
                            (sp + so) as *const c_void,
                            send[peer],
                            dtype,
                            peer as i32,
                            comm.raw,
                            cs,
                        )?;
                        result::recv(
                            (dp + ro) as *mut c_void,
                            recv[peer],
                            dtype,
                            peer as i32,
                            comm.raw,
                            cs,
                        )?;
                    }
                    so += (send[peer] * es) as u64;
                    ro += (recv[peer] * es) as u64;
                }
                result::group_end()
            },
        )
    }
}
