//! The device-or-skip policy, the one place that decides whether a test
//! that needs a GPU runs here.
//!
//! A test whose backend is missing prints `SKIP: <test>: <reason>` (on
//! standard error, uncaptured, so plain `cargo test` shows it; see
//! [`skip_line`]) and returns, unless its backend is required: `FUEL_REQUIRE_VULKAN=1` or
//! `FUEL_REQUIRE_CUDA=1` turns the missing device into a failure (CI sets
//! the first on lavapipe, `scripts/gpu-check.sh` both on a GPU machine).
//! [`skip`] is the policy itself and takes plain words, so the library's own
//! unit tests (which see their crate's types, not this crate's) call it
//! with whatever reason their probe gave.

use fuel_graph_ext::{Device, DeviceKind};
use fuel_runtime::exec;

/// A backend a test may need, and may be required to find.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// Vulkan (lavapipe in CI), required by `FUEL_REQUIRE_VULKAN=1`.
    Vulkan,
    /// CUDA, and NCCL with it, required by `FUEL_REQUIRE_CUDA=1`.
    Cuda,
}

impl Backend {
    /// The environment variable that requires this backend.
    pub fn variable(self) -> &'static str {
        match self {
            Backend::Vulkan => "FUEL_REQUIRE_VULKAN",
            Backend::Cuda => "FUEL_REQUIRE_CUDA",
        }
    }

    /// True when its variable is `1`: a missing device must fail the test.
    pub fn required(self) -> bool {
        std::env::var(self.variable()).is_ok_and(|v| v == "1")
    }
}

/// `test` cannot run because `backend` is missing, for `reason`: prints
/// `SKIP: <test>: <reason>`, or panics with the same words when the
/// backend is required.
#[track_caller]
pub fn skip(test: &str, backend: Backend, reason: &str) {
    if backend.required() {
        panic!("{test}: {reason} (required by {})", backend.variable());
    }
    skip_line(format_args!("SKIP: {test}: {reason}"));
}

/// Writes one `SKIP: ...` line straight to the process's standard error,
/// where `cargo test` shows it beside the test's `ok`: the test harness
/// captures `println!` and `eprintln!` of passing tests, which hid that
/// a GPU test passed without running (issue 39). With `--nocapture` the
/// line appears once, as before.
pub fn skip_line(line: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "{line}");
}

/// True if every device in `devices` can be opened here. Otherwise
/// [`skip`]s on the first that cannot and returns false (a missing CPU
/// device is always a failure).
#[track_caller]
pub fn devices_or_skip(test: &str, devices: &[Device]) -> bool {
    let found = exec::discover();
    for d in devices {
        if let Some(why) = found.why_not(*d) {
            match d.kind {
                DeviceKind::Cpu => panic!("{test}: {why}"),
                DeviceKind::Vulkan => skip(test, Backend::Vulkan, &why.to_string()),
                DeviceKind::Cuda => skip(test, Backend::Cuda, &why.to_string()),
            }
            return false;
        }
    }
    true
}

/// True if libnccl loads here; otherwise [`skip`]s as a missing CUDA.
#[cfg(feature = "nccl")]
#[track_caller]
pub fn nccl_or_skip(test: &str) -> bool {
    use fuel_collective::driver::nccl;
    if nccl::library_present() {
        return true;
    }
    let why = format!("libnccl is not loadable; {}", nccl::NCCL_HINT);
    skip(test, Backend::Cuda, &why);
    false
}
