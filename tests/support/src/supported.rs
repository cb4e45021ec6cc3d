//! Compiling a graph where the test expects it not to go through: the
//! message a refused graph gets, and compiling only where the devices
//! support every dtype the graph uses (an unsupported one prints
//! `SKIP: ...`, as a missing device does).

use crate::devices::skip_line;
use crate::run::compile_env;
use fuel_graph_ext::{text, Device, Graph};
use fuel_runtime::exec::{ExecError, Executable};

/// The message compiling `src` (for the devices it uses, with the
/// environment's options) is refused with; panics if it compiles.
#[track_caller]
pub fn compile_error(src: &str) -> String {
    let g = text::parse(src).unwrap();
    match compile_env(&g, &[]) {
        Ok(_) => panic!("compiled, but should have been refused:\n{src}"),
        Err(e) => e.to_string(),
    }
}

/// `g` compiled for `devices`, or `None` after printing
/// `SKIP: <what>: <reason>` when a device does not support a dtype of
/// `g`; any other refusal panics.
#[track_caller]
pub fn compile_where_supported(what: &str, g: &Graph, devices: &[Device]) -> Option<Executable> {
    match compile_env(g, devices) {
        Ok(exe) => Some(exe),
        Err(ExecError::Unsupported { reason, .. }) => {
            skip_line(format_args!("SKIP: {what}: {reason}"));
            None
        }
        Err(e) => panic!("{what}: {e}"),
    }
}
