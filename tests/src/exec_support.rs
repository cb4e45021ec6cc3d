//! Helpers for tests that run graphs on real devices.
//!
//! [`devices_or_skip`] is the one place that decides whether a test that
//! needs Vulkan or CUDA runs: it returns `false` after printing
//! `SKIP: <reason>` when a device is missing, unless `FUEL_REQUIRE_VULKAN=1`
//! (or `FUEL_REQUIRE_CUDA=1`) turns the missing device into a failure.
//! [`run_and_compare`] compiles a lowered graph, runs it on deterministic
//! inputs and checks every result against the reference interpreter.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use fuel_graph_ext::exec::{self, Executable};
use fuel_graph_ext::interp::{deterministic_inputs, interpret, HostTensor};
use fuel_graph_ext::{text, Device, DeviceKind};

fn required(kind: DeviceKind) -> bool {
    let var = match kind {
        DeviceKind::Cpu => return true,
        DeviceKind::Vulkan => "FUEL_REQUIRE_VULKAN",
        DeviceKind::Cuda => "FUEL_REQUIRE_CUDA",
    };
    std::env::var(var).is_ok_and(|v| v == "1")
}

/// True if every device in `devices` can be opened here. Otherwise prints
/// `SKIP: <reason>` and returns false, or panics when the backend is required.
pub fn devices_or_skip(test: &str, devices: &[Device]) -> bool {
    let found = exec::discover();
    for d in devices {
        if let Some(why) = found.why_not(*d) {
            if required(d.kind) {
                panic!(
                    "{test}: {why} (required by FUEL_REQUIRE_{})",
                    d.kind.as_str().to_uppercase()
                );
            }
            println!("SKIP: {test}: {why}");
            return false;
        }
    }
    true
}

/// Compiles `src` for `devices`, runs it on deterministic inputs, checks
/// every result equals the interpreter's exactly and that every device's
/// allocator is back to zero. Returns the executable and results.
pub fn run_and_compare(src: &str, devices: &[Device]) -> (Executable, Vec<HostTensor>) {
    let g = text::parse(src).unwrap();
    let exe = exec::compile(&g, devices).unwrap_or_else(|e| panic!("compile failed: {e}"));
    let inputs = deterministic_inputs(&g);
    let want = interpret(&g, &inputs).unwrap();
    let got = exe
        .run_host(&inputs)
        .unwrap_or_else(|e| panic!("run failed: {e}"));
    assert_eq!(got.len(), want.len());
    for (k, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(g.ty, w.ty, "result {k}");
        if let Err(e) = g.check_same(w) {
            panic!("result {k} differs from the interpreter: {e}");
        }
    }
    assert_no_leaks(&exe);
    (exe, got)
}

/// Asserts every opened device holds no buffer.
pub fn assert_no_leaks(exe: &Executable) {
    for d in exe.devices() {
        let m = exe.memory(d).unwrap();
        assert_eq!(m.current, 0, "{d} still holds {} bytes", m.current);
        assert_eq!(m.live_buffers, 0, "{d} still holds buffers");
    }
}
