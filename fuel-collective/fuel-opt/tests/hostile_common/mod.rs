//! What the hostile `fuel-opt` tests (`hostile_cli.rs`, `hostile_round3.rs`)
//! share: the binary, a scratch folder per test, and a command with the
//! variables that change what `fuel-opt` prints taken out.

use std::path::PathBuf;
use std::process::{Command, Stdio};

/// The `fuel-opt` binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_fuel-opt");

/// A scratch folder of this test process, empty.
pub fn scratch(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("fuel-hostile-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// `fuel-opt ARGS` with no standard input and none of the variables that
/// change its output.
pub fn cmd(args: &[&str]) -> Command {
    let mut c = Command::new(BIN);
    c.args(args)
        .env_remove("FUEL_PRINT_AFTER")
        .env_remove("FUEL_DUMP_DIR")
        .env_remove("FUEL_VULKAN_DEVICES")
        .env_remove("FUEL_LOG")
        .stdin(Stdio::null());
    c
}
