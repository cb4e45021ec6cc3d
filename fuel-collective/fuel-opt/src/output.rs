//! Standard output and files, written without panicking.
//!
//! `print!` panics when a write fails ("failed printing to stdout"), so
//! `fuel-opt` writes through [`write()`] (the [`out!`](crate::out) and
//! [`outln!`](crate::outln) macros), which turns a failure into a
//! [`Failure`] that names where the output went: a full disk is `cannot
//! write to standard output (/dev/full): No space left on device`.
//!
//! A reader that closes the pipe early (`fuel-opt devices | head -1`) ends
//! the process as it ends `cat` or `ls`: [`default_sigpipe`] restores the
//! default action for `SIGPIPE`, which Rust's runtime sets to ignore, so
//! the next write kills the process quietly and the shell sees status 141.
//! Should a write still see `EPIPE`, it exits quietly with that status too.

use crate::Failure;
use std::io::Write;

/// Restores the default action for `SIGPIPE` (terminate), as C programs
/// start with: writing to a closed pipe then ends the process quietly.
pub fn default_sigpipe() {
    // SAFETY: `signal` with a valid signal number and `SIG_DFL` only resets
    // the disposition; it runs at the start of `main`, before any thread
    // that could be writing exists.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// What standard output is connected to, where `/proc` says (`/dev/full`,
/// a file's path), for error messages.
fn stdout_target() -> String {
    match std::fs::read_link("/proc/self/fd/1") {
        Ok(p) => format!("standard output ({})", p.display()),
        Err(_) => "standard output".into(),
    }
}

/// The failure for a write error on standard output; a closed pipe ends
/// the process at once, quietly, with the status a shell reports for
/// `SIGPIPE` (128 + 13).
pub fn stdout_failure(e: &std::io::Error) -> Failure {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        std::process::exit(141);
    }
    Failure::input(format!("cannot write to {}: {e}", stdout_target()))
}

/// Writes `args` to standard output.
pub fn write(args: std::fmt::Arguments<'_>) -> Result<(), Failure> {
    std::io::stdout()
        .lock()
        .write_fmt(args)
        .map_err(|e| stdout_failure(&e))
}

/// Flushes standard output (what `main` does last: a buffered line that
/// cannot be written is an error too).
pub fn flush() -> Result<(), Failure> {
    std::io::stdout()
        .lock()
        .flush()
        .map_err(|e| stdout_failure(&e))
}

/// Writes to standard error, ignoring failure: there is nowhere left to
/// report it.
pub fn err(args: std::fmt::Arguments<'_>) {
    let _ = std::io::stderr().lock().write_fmt(args);
}

/// `print!` that returns a [`Failure`] instead of panicking.
#[macro_export]
macro_rules! out {
    ($($t:tt)*) => {
        $crate::output::write(format_args!($($t)*))
    };
}

/// `println!` that returns a [`Failure`] instead of panicking.
#[macro_export]
macro_rules! outln {
    () => {
        $crate::output::write(format_args!("\n"))
    };
    ($($t:tt)*) => {
        $crate::output::write(format_args!("{}\n", format_args!($($t)*)))
    };
}
