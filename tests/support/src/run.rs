//! Running a graph on real devices and checking its results against the
//! reference interpreter.

use crate::memory::assert_no_leaks;
use fuel_graph_ext::interp::{deterministic_inputs, interpret, HostTensor};
use fuel_graph_ext::{text, Device, Graph};
use fuel_runtime::exec::{self, Executable};

/// Compiles `g` for `devices` (empty: the ones it uses) with the options
/// the environment sets, as `fuel-opt` does (`FUEL_VULKAN_IMPORT`,
/// `FUEL_CUDA_PIN`, ...; `scripts/gpu-check.sh` runs the tests with both
/// switched off too).
pub fn compile_env(g: &Graph, devices: &[Device]) -> Result<Executable, exec::ExecError> {
    let options = exec::Options::from_env()?;
    exec::Compiler::new(g)
        .devices(devices)
        .options(options)
        .runtime(exec::RuntimeOptions::from_env()?)
        .compile()
}

/// Compiles `src` for `devices`, runs it on deterministic inputs, checks
/// every result equals the interpreter's exactly and that every device's
/// allocator is back to zero. Returns the executable and results.
pub fn run_and_compare(src: &str, devices: &[Device]) -> (Executable, Vec<HostTensor>) {
    let g = text::parse(src).unwrap();
    let exe = compile_env(&g, devices).unwrap_or_else(|e| panic!("compile failed: {e}"));
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

/// Asserts `got` equals `want` bit for bit (every NaN equal to every NaN).
pub fn assert_close(got: &[HostTensor], want: &[HostTensor], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: number of results");
    for (k, (g, w)) in got.iter().zip(want).enumerate() {
        if let Err(e) = g.check_same(w) {
            panic!("{what}: result {k}: {e}");
        }
    }
}
