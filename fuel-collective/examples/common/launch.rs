//! What the MPI examples share, each taking it in with
//! `#[path = "common/launch.rs"] mod launch;`: reading the rank and the
//! world size that the launcher puts in every process's environment.

/// The whole number in the first of the environment variables `names` that
/// is set: Open MPI's `mpirun` sets `OMPI_COMM_WORLD_RANK` and
/// `OMPI_COMM_WORLD_SIZE`; another launcher's names (`PMI_RANK`, ...) may
/// follow. An error names the first.
pub fn env_usize(names: &[&str]) -> Result<usize, String> {
    let first = names.first().copied().unwrap_or_default();
    names
        .iter()
        .find_map(|name| std::env::var(name).ok())
        .ok_or_else(|| format!("not launched by mpirun (no {first})"))?
        .parse()
        .map_err(|e| format!("bad {first}: {e}"))
}

/// Writes `line` and a newline to standard error in one write, so that the
/// launcher, which merges every rank's output, never cuts one rank's line
/// with another's (`eprintln!` writes each formatted piece on its own to
/// the unbuffered stream, and two ranks failing at once interleaved).
pub fn say_err(line: &str) {
    use std::io::Write;
    let mut all = String::with_capacity(line.len() + 1);
    all.push_str(line);
    all.push('\n');
    let _ = std::io::stderr().lock().write_all(all.as_bytes());
}
