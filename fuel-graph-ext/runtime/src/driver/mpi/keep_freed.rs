//! Keeping freed memory in the process, so that MPI's per-call temporaries
//! do not fault in fresh pages on every collective.
//!
//! Open MPI's reduce-scatter (the float all-reduce's first half, see
//! `route`) allocates a whole-buffer temporary and frees it on every call.
//! glibc serves a large allocation with a fresh `mmap` and returns it to
//! the system when freed, so each call pays a page fault per 4 KiB of that
//! buffer, and the kernel zeroes every page: measured on 2 processes at
//! 16 MiB per rank, two thirds of the call (`docs/performance.md`). When
//! the MPI driver starts it therefore tells glibc to serve large
//! allocations from the heap and never to give freed heap memory back
//! (`mallopt(M_MMAP_MAX, 0)`, `mallopt(M_TRIM_THRESHOLD, -1)`), what Open
//! MPI's own registration cache used to do: the process keeps its peak of
//! freed memory for reuse. (glibc still maps a buffer of more than about
//! 64 MiB afresh when a thread other than the main one asks for it: a
//! thread's arena cannot hold it.) `FUEL_MPI_KEEP_FREED=0` leaves the
//! allocator alone. Other C libraries (musl) are left alone.

/// The variable that turns it off.
pub const KEEP_FREED_VAR: &str = "FUEL_MPI_KEEP_FREED";

/// `FUEL_MPI_KEEP_FREED`: unset, empty or `1` keeps freed memory, `0`
/// leaves glibc's defaults; anything else is an error naming the variable.
pub fn keep_freed_setting() -> Result<bool, fuel_graph_ext::env::EnvError> {
    fuel_graph_ext::env::flag(
        KEEP_FREED_VAR,
        true,
        "1 keeps freed memory in the process so MPI's temporaries reuse it, 0 leaves the allocator alone",
    )
}

/// Applies the setting once per process; returns whether glibc now keeps
/// freed memory.
pub(super) fn keep_freed_memory() -> Result<bool, fuel_graph_ext::env::EnvError> {
    static APPLIED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    if let Some(on) = APPLIED.get() {
        return Ok(*on);
    }
    let on = keep_freed_setting()? && apply();
    Ok(*APPLIED.get_or_init(|| on))
}

/// Whether a freed buffer of `bytes` stays in the process now: allocated
/// (and touched) from the heap rather than `mmap`, and still held as free
/// heap memory once dropped. `None` off glibc. What `mpi-check` asserts
/// after the driver started.
pub fn freed_memory_stays(bytes: usize) -> Option<bool> {
    let before = mallinfo()?;
    let v = vec![1u8; bytes];
    let during = mallinfo()?;
    std::hint::black_box(&v);
    drop(v);
    let after = mallinfo()?;
    let from_heap = during.hblkhd == before.hblkhd;
    let kept = usize::try_from(after.fordblks).unwrap_or(0) >= bytes;
    Some(from_heap && kept)
}

/// glibc's `struct mallinfo` (int fields: enough for the sizes checked).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct MallInfo {
    arena: std::ffi::c_int,
    ordblks: std::ffi::c_int,
    smblks: std::ffi::c_int,
    hblks: std::ffi::c_int,
    hblkhd: std::ffi::c_int,
    usmblks: std::ffi::c_int,
    fsmblks: std::ffi::c_int,
    uordblks: std::ffi::c_int,
    fordblks: std::ffi::c_int,
    keepcost: std::ffi::c_int,
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn mallinfo() -> Option<MallInfo> {
    extern "C" {
        #[link_name = "mallinfo"]
        fn glibc_mallinfo() -> MallInfo;
    }
    // SAFETY: reads glibc's allocator statistics; no arguments.
    Some(unsafe { glibc_mallinfo() })
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
struct MallInfo {
    hblkhd: i32,
    fordblks: i32,
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn mallinfo() -> Option<MallInfo> {
    None
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn apply() -> bool {
    use std::ffi::c_int;
    // glibc's <malloc.h>.
    const M_TRIM_THRESHOLD: c_int = -1;
    const M_MMAP_MAX: c_int = -4;
    extern "C" {
        fn mallopt(param: c_int, value: c_int) -> c_int;
    }
    // SAFETY: mallopt only changes glibc's allocation policy; both
    // parameters exist in every glibc and take these values.
    unsafe { mallopt(M_MMAP_MAX, 0) == 1 && mallopt(M_TRIM_THRESHOLD, -1) == 1 }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn apply() -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_setting_is_a_flag_that_names_itself() {
        // Read as the driver reads it; this test's process leaves it unset.
        if std::env::var_os(KEEP_FREED_VAR).is_none() {
            assert_eq!(keep_freed_setting(), Ok(true));
        }
    }

    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[test]
    fn once_applied_a_freed_large_buffer_stays_in_the_heap() {
        assert!(apply());
        // 16 MiB: within what a thread's own glibc arena serves from its heap.
        assert_eq!(freed_memory_stays(16 << 20), Some(true));
    }
}
