//! Environment variables: each one read in one place, parsed with bounds.
//!
//! A value that is not what a variable accepts (not a number, out of range,
//! not UTF-8) is an [`EnvError`] that names the variable, shows the value
//! (quoted safely, see [`crate::text::excerpt`]) and says what it accepts;
//! it never falls back to the default in silence, and a huge number never
//! reaches an allocation or a timer. An unset or empty variable takes the
//! default. The variables, and who reads them: `compile` reads none; it
//! takes `plan::Options` (host import, read by `plan::Options::from_env`)
//! and the runtime's `exec::RuntimeOptions` (the rest of the runtime's
//! switches, read by `RuntimeOptions::from_env`), which `fuel-opt` and the
//! tests build from these variables. Outside `compile`, the drivers'
//! `join` reads the timeouts, the MPI driver `FUEL_MPI_KEEP_FREED` when it
//! starts MPI, NCCL's unique-id helpers `FUEL_NCCL_UNIQUE_ID`, and the
//! convenience openers (`Instance::open_device`, `CudaDev::open`) and
//! device discovery the device variables:
//!
//! | variable | accepts | default |
//! |---|---|---|
//! | `FUEL_VULKAN_DEVICES` | logical devices per Vulkan adapter, 1 to 16 | 2 |
//! | `FUEL_VULKAN_MAPPED` | `0` (staging buffer) or `1` (mapped memory) | 1 |
//! | `FUEL_VULKAN_IMPORT` | `0` (copy host buffers) or `1` (import them) | 1 |
//! | `FUEL_CUDA_PIN` | `0` (stage host transfers) or `1` (page-lock arena blocks) | 1 |
//! | `FUEL_DISPATCH` | the order the threaded runner hands each lane its steps in: `fifo`, `in-order`, `priority` or `after-compute` | `fifo` (`fuel-opt`: `priority` for a graph `schedule-collectives` ordered) |
//! | `FUEL_SPIN_US` | µs a waiting thread of the threaded runner polls before it sleeps, 0 to 10 000 | 50 |
//! | `FUEL_MPI_KEEP_FREED` | `0` (glibc's defaults) or `1` (keep freed memory for MPI's temporaries) | 1 |
//! | `FUEL_JOIN_TIMEOUT_MS` | 1 to 86 400 000 ms | 60 000 |
//! | `FUEL_COLLECTIVE_TIMEOUT_MS` | 1 to 86 400 000 ms | 300 000 |
//! | `FUEL_NCCL_UNIQUE_ID` | rank 0's NCCL id in hex | none |
//!
//! `fuel-opt` adds `FUEL_PRINT_AFTER`, `FUEL_DUMP_DIR` (see
//! [`crate::pass::DebugOptions::from_env`]) and `FUEL_LOG`.

use crate::text::excerpt;
use std::ffi::OsString;
use std::ops::RangeInclusive;

/// A variable whose value is not one it accepts.
#[derive(Clone, PartialEq, Eq, thiserror::Error)]
#[error("{name}={} is not valid: it takes {accepts}; fix it or unset it", shown(.value))]
pub struct EnvError {
    /// The variable.
    pub name: String,
    /// Its value (with `\xFF` for the bytes of one that is not UTF-8).
    pub value: String,
    /// What it accepts, and its default.
    pub accepts: String,
}

fn shown(value: &str) -> String {
    format!("`{}`", excerpt::token(value))
}

/// The variable's value: `None` when unset or empty; an error when it is
/// not UTF-8.
pub fn text(name: &str, accepts: &str) -> Result<Option<String>, EnvError> {
    match std::env::var_os(name) {
        None => Ok(None),
        Some(v) if v.is_empty() => Ok(None),
        Some(v) => v.into_string().map(Some).map_err(|v: OsString| {
            // Debug quotes the value and writes its bad bytes as `\xFF`.
            let shown = format!("{v:?}");
            EnvError {
                name: name.to_string(),
                value: shown
                    .strip_prefix('"')
                    .and_then(|x| x.strip_suffix('"'))
                    .unwrap_or(&shown)
                    .to_string(),
                accepts: format!("{accepts} (in UTF-8)"),
            }
        }),
    }
}

/// A whole number in `range` (surrounding spaces allowed), or `default`
/// when the variable is unset or empty. `what` says what it counts.
pub fn integer(
    name: &str,
    range: RangeInclusive<u64>,
    default: u64,
    what: &str,
) -> Result<u64, EnvError> {
    let accepts = format!(
        "{what}: a whole number from {} to {} (default {default})",
        range.start(),
        range.end()
    );
    let Some(v) = text(name, &accepts)? else {
        return Ok(default);
    };
    match v.trim().parse::<u64>() {
        Ok(n) if range.contains(&n) => Ok(n),
        _ => Err(EnvError {
            name: name.to_string(),
            value: v,
            accepts,
        }),
    }
}

/// `0` or `1` (surrounding spaces allowed), or `default` when unset or
/// empty. `what` says what `1` means.
pub fn flag(name: &str, default: bool, what: &str) -> Result<bool, EnvError> {
    let accepts = format!("0 or 1 ({what}; default {})", u8::from(default));
    let Some(v) = text(name, &accepts)? else {
        return Ok(default);
    };
    match v.trim() {
        "0" => Ok(false),
        "1" => Ok(true),
        _ => Err(EnvError {
            name: name.to_string(),
            value: v,
            accepts,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Each test uses variables of its own: tests run on parallel threads
    // and share the environment.
    #[test]
    fn integers_are_bounded_and_named() {
        let n = "FUEL_TEST_ENV_INTEGER";
        std::env::remove_var(n);
        assert_eq!(integer(n, 1..=16, 2, "devices"), Ok(2));
        for (v, want) in [("", Ok(2)), (" 7 ", Ok(7)), ("16", Ok(16))] {
            std::env::set_var(n, v);
            assert_eq!(integer(n, 1..=16, 2, "devices"), want, "{v:?}");
        }
        for v in [
            "abc",
            "0",
            "17",
            "4294967295",
            "-1",
            "1e3",
            "99999999999999999999999",
        ] {
            std::env::set_var(n, v);
            let e = integer(n, 1..=16, 2, "devices").unwrap_err();
            assert_eq!(
                e.to_string(),
                format!("{n}=`{v}` is not valid: it takes devices: a whole number from 1 to 16 (default 2); fix it or unset it")
            );
        }
        std::env::set_var(n, "\u{1b}[2J".repeat(100));
        let e = integer(n, 1..=16, 2, "devices").unwrap_err().to_string();
        assert!(e.starts_with(&format!("{n}=`\\u{{1b}}[2J")), "{e}");
        assert!(e.contains("more characters)`"), "{e}");
        std::env::remove_var(n);
    }

    #[test]
    fn flags_take_0_or_1() {
        let n = "FUEL_TEST_ENV_FLAG";
        std::env::remove_var(n);
        assert_eq!(flag(n, true, "mapped"), Ok(true));
        std::env::set_var(n, "0");
        assert_eq!(flag(n, true, "mapped"), Ok(false));
        std::env::set_var(n, "yes");
        assert_eq!(
            flag(n, true, "mapped").unwrap_err().to_string(),
            format!(
                "{n}=`yes` is not valid: it takes 0 or 1 (mapped; default 1); fix it or unset it"
            )
        );
        std::env::remove_var(n);
    }
}
