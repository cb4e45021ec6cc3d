//! `MpiDriver`'s send and receive: `MPI_Send` and `MPI_Recv` of raw bytes
//! under tag 0, their return codes checked. A receive probes first, so a
//! message of another size is drained and reported as a mismatch instead
//! of truncated.

use super::raw::{check, count};
use super::MpiCommunicator;
use crate::driver::DriverError;
use mpi::ffi;
use std::ffi::c_int;
use std::mem::MaybeUninit;

/// Sends `bytes` to `peer`.
pub(super) fn send(c: &MpiCommunicator, bytes: &[u8], peer: usize) -> Result<(), DriverError> {
    let n = count("MPI_Send", bytes.len())?;
    // SAFETY: `bytes` holds n bytes; the peer is a rank of the group (checked).
    check("MPI_Send", unsafe {
        ffi::MPI_Send(
            bytes.as_ptr().cast(),
            n,
            ffi::RSMPI_UINT8_T,
            peer as c_int,
            0,
            c.raw(),
        )
    })
}

/// Receives exactly `out.len()` bytes from `peer`; `what` describes this
/// receive for the mismatch error.
pub(super) fn recv(
    c: &MpiCommunicator,
    out: &mut [u8],
    peer: usize,
    what: impl FnOnce() -> String,
) -> Result<(), DriverError> {
    let mut status = MaybeUninit::<ffi::MPI_Status>::uninit();
    // SAFETY: MPI fills the status.
    check("MPI_Probe", unsafe {
        ffi::MPI_Probe(peer as c_int, 0, c.raw(), status.as_mut_ptr())
    })?;
    let mut got: c_int = 0;
    // SAFETY: the status was filled by the probe.
    check("MPI_Get_count", unsafe {
        ffi::MPI_Get_count(status.as_ptr(), ffi::RSMPI_UINT8_T, &mut got)
    })?;
    let got = usize::try_from(got).unwrap_or(0);
    if got != out.len() {
        let mut sink = vec![0u8; got];
        // SAFETY: `sink` holds the probed message.
        check("MPI_Recv", unsafe {
            ffi::MPI_Recv(
                sink.as_mut_ptr().cast(),
                got as c_int,
                ffi::RSMPI_UINT8_T,
                peer as c_int,
                0,
                c.raw(),
                ffi::RSMPI_STATUS_IGNORE,
            )
        })?;
        return Err(DriverError::Mismatch {
            op: "send/recv",
            rank: c.rank,
            mine: what(),
            peer,
            theirs: format!("send of {got} bytes"),
        });
    }
    let n = count("MPI_Recv", out.len())?;
    // SAFETY: `out` holds n bytes, the size of the probed message.
    check("MPI_Recv", unsafe {
        ffi::MPI_Recv(
            out.as_mut_ptr().cast(),
            n,
            ffi::RSMPI_UINT8_T,
            peer as c_int,
            0,
            c.raw(),
            ffi::RSMPI_STATUS_IGNORE,
        )
    })
}
