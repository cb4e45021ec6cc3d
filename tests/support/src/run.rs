//! Running a graph on real devices and checking its results against the
//! reference interpreter.

use crate::memory::assert_no_leaks;
use fuel_graph_ext::interp::{deterministic_inputs, interpret, HostTensor};
use fuel_graph_ext::{text, Device, Graph};
use fuel_runtime::exec::{self, Executable, Tensor};
use std::collections::BTreeMap;

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

/// Runs `exe` three times; every result must equal the interpreter's bit
/// for bit and every allocator must be back at zero. Returns the buffers
/// `dev` made per run (the same every run).
pub fn runs_exactly(g: &Graph, exe: &Executable, dev: Device, what: &str) -> usize {
    let inputs = deterministic_inputs(g);
    let want: Vec<HostTensor> = interpret(g, &inputs).unwrap_or_else(|e| panic!("{what}: {e}"));
    let mut made = Vec::new();
    for round in 0..3 {
        let allocations = |exe: &Executable| exe.memory(dev).map_or(0, |m| m.allocations);
        let before = allocations(exe);
        let got = exe
            .run_host(&inputs)
            .unwrap_or_else(|e| panic!("{what}, run {round}: {e}"));
        assert_eq!(got.len(), want.len());
        for (k, (g, w)) in got.iter().zip(&want).enumerate() {
            if let Err(e) = g.check_same(w) {
                panic!("{what}, run {round}: result {k} differs from the interpreter: {e}");
            }
        }
        assert_no_leaks(exe);
        made.push(allocations(exe) - before);
    }
    assert!(made.windows(2).all(|w| w[0] == w[1]), "{what}: {made:?}");
    made[0]
}

/// `g`'s deterministic inputs as runtime tensors, by name, and what the
/// reference interpreter computes from them: the two halves of every
/// "run it and compare" test.
pub fn inputs_and_want(g: &Graph) -> (BTreeMap<String, Tensor>, Vec<HostTensor>) {
    let host = deterministic_inputs(g);
    let inputs = host
        .iter()
        .map(|(k, v)| (k.clone(), Tensor::from_host(v)))
        .collect();
    let want = interpret(g, &host).expect("the reference interpreter runs the graph");
    (inputs, want)
}
