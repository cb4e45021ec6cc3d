//! Who has arrived at a join. `MPI_Comm_create_group` has no timeout and
//! says nothing about who is missing, so before it runs every joining rank
//! posts a small message (the group's id) to every other rank on
//! `MPI_COMM_WORLD`, under a tag of the group's, and listens for theirs.
//! Once every rank has been heard from, the communicator is made; if the
//! join timeout passes first, the ranks never heard from are exactly the
//! missing ones: a rank that arrived and then gave up was heard, and is
//! not listed.

use super::raw::check;
use crate::driver::DriverError;
use mpi::ffi;
use std::ffi::c_int;
use std::time::{Duration, Instant};

/// Waits at most `timeout` to hear from every other rank of `ranks`
/// joining under `tag`. `Ok(Ok(()))` when all came; `Ok(Err(missing))`
/// with the ranks never heard from when the time ran out.
pub(super) fn arrivals(
    rank: usize,
    ranks: usize,
    tag: c_int,
    id: u64,
    timeout: Duration,
) -> Result<Result<(), Vec<usize>>, DriverError> {
    let deadline = Instant::now() + timeout;
    // The payload outlives any send left pending at a timeout (leaked then).
    let payload: &'static mut u64 = Box::leak(Box::new(id));
    let mut got = vec![0u64; ranks];
    // SAFETY: reading rsmpi's constants.
    let (world, null, u64t) = unsafe {
        (
            ffi::RSMPI_COMM_WORLD,
            ffi::RSMPI_REQUEST_NULL,
            ffi::RSMPI_UINT64_T,
        )
    };
    let mut sends = vec![null; ranks];
    let mut recvs = vec![null; ranks];
    let others: Vec<usize> = (0..ranks).filter(|p| *p != rank).collect();
    for &p in &others {
        let peer = p as c_int;
        // SAFETY: the payload is leaked (lives forever); `got[p]` lives
        // until its receive completes or is cancelled below.
        unsafe {
            check(
                "MPI_Isend",
                ffi::MPI_Isend(
                    (payload as *const u64).cast(),
                    1,
                    u64t,
                    peer,
                    tag,
                    world,
                    &mut sends[p],
                ),
            )?;
            check(
                "MPI_Irecv",
                ffi::MPI_Irecv(
                    (&mut got[p] as *mut u64).cast(),
                    1,
                    u64t,
                    peer,
                    tag,
                    world,
                    &mut recvs[p],
                ),
            )?;
        }
    }
    let mut heard = vec![false; ranks];
    heard[rank] = true;
    loop {
        for &p in &others {
            if heard[p] {
                continue;
            }
            let mut flag: c_int = 0;
            // SAFETY: a live receive request.
            check("MPI_Test", unsafe {
                ffi::MPI_Test(&mut recvs[p], &mut flag, ffi::RSMPI_STATUS_IGNORE)
            })?;
            heard[p] = flag != 0;
        }
        if heard.iter().all(|h| *h) {
            for &p in &others {
                // SAFETY: the peer posted its receive, so the send completes.
                check("MPI_Wait", unsafe {
                    ffi::MPI_Wait(&mut sends[p], ffi::RSMPI_STATUS_IGNORE)
                })?;
            }
            // SAFETY: the payload is no longer read by any request.
            drop(unsafe { Box::from_raw(payload as *mut u64) });
            return Ok(Ok(()));
        }
        if Instant::now() >= deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let missing: Vec<usize> = (0..ranks).filter(|p| !heard[*p]).collect();
    for &p in &others {
        // SAFETY: live requests: pending receives are cancelled and
        // completed (so `got` may be dropped); sends are released to
        // finish on their own (their payload is leaked).
        unsafe {
            if !heard[p] {
                check("MPI_Cancel", ffi::MPI_Cancel(&mut recvs[p]))?;
                check(
                    "MPI_Wait",
                    ffi::MPI_Wait(&mut recvs[p], ffi::RSMPI_STATUS_IGNORE),
                )?;
            }
            check("MPI_Request_free", ffi::MPI_Request_free(&mut sends[p]))?;
        }
    }
    Ok(Err(missing))
}
