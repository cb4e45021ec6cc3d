//! `--run` and `devices`: executing graphs on real devices.

use crate::Failure;
use fuel_graph_ext::Graph;

/// Lists devices. Filled in by the executor work (issue 4).
pub fn devices() -> Result<(), Failure> {
    Err(Failure::input(
        "`fuel-opt devices` needs the executor, which is not built yet",
    ))
}

/// Runs `lowered` on devices and compares with the interpreter's result for `original`.
pub fn run_and_check(
    original: &Graph,
    lowered: &Graph,
    devices: Option<&str>,
) -> Result<(), Failure> {
    let _ = (original, lowered, devices);
    Err(Failure::input(
        "`--run` needs the executor, which is not built yet",
    ))
}
