//! The demo's output directory: it holds only files the demo wrote.
//!
//! `demo --out DIR` writes text IR, DOT and SVG files into DIR. Before it
//! writes anything it checks DIR: a directory that does not exist yet is
//! created; one that exists may hold only files that an earlier demo run
//! listed in DIR's [`MANIFEST`], which are removed. Anything else (a file
//! the demo did not write, a subdirectory, a symlink, even one named like
//! a dump) makes the demo refuse DIR, so it never overwrites or deletes a
//! file it did not write. Then it lists, before writing, every name this
//! run may write (so a run that fails half way can be repeated), writes
//! each file fresh (never through an existing path, so never through a
//! symlink), and reports only the files it wrote.

use crate::Failure;
use fuel_graph_ext::text::excerpt;
use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The list of names the demo may have written, kept in DIR.
pub const MANIFEST: &str = ".fuel-demo-files";

/// A checked output directory.
#[derive(Debug)]
pub struct OutDir {
    dir: PathBuf,
}

fn shown(p: &Path) -> String {
    format!("`{}`", excerpt::token(&p.to_string_lossy()))
}

fn io_failure(what: &str, p: &Path, e: &std::io::Error) -> Failure {
    Failure::input(format!("cannot {what} {}: {e}", shown(p)))
}

/// A plain file name of the manifest (no separators, not `.` or `..`).
fn plain(name: &str) -> bool {
    !name.is_empty() && name != "." && name != ".." && !name.contains(['/', '\0'])
}

impl OutDir {
    /// Checks `dir` as the module docs say and clears the files an earlier
    /// run listed.
    pub fn prepare(dir: &Path) -> Result<OutDir, Failure> {
        if std::fs::symlink_metadata(dir).is_err() {
            std::fs::create_dir_all(dir).map_err(|e| io_failure("create", dir, &e))?;
        }
        let meta = std::fs::metadata(dir).map_err(|e| io_failure("read", dir, &e))?;
        if !meta.is_dir() {
            return Err(Failure::input(format!(
                "--out {} is not a directory; give a new or empty directory",
                shown(dir)
            )));
        }
        let manifest = dir.join(MANIFEST);
        let ours: BTreeSet<String> = match std::fs::symlink_metadata(&manifest) {
            Ok(m) if m.is_file() => std::fs::read_to_string(&manifest)
                .map_err(|e| io_failure("read", &manifest, &e))?
                .lines()
                .filter(|l| plain(l))
                .map(String::from)
                .collect(),
            Ok(_) => return Err(foreign(dir, MANIFEST)),
            Err(_) => BTreeSet::new(),
        };
        let mut remove = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(|e| io_failure("list", dir, &e))? {
            let entry = entry.map_err(|e| io_failure("list", dir, &e))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if name == MANIFEST {
                continue;
            }
            // `file_type` does not follow symlinks: a symlink is never ours.
            let is_file = entry.file_type().is_ok_and(|t| t.is_file());
            if !(is_file && ours.contains(&name)) {
                return Err(foreign(dir, &name));
            }
            remove.push(entry.path());
        }
        for p in remove {
            std::fs::remove_file(&p).map_err(|e| io_failure("remove", &p, &e))?;
        }
        Ok(OutDir {
            dir: dir.to_path_buf(),
        })
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Records `names` as files this run may write (before writing them).
    pub fn will_write<'a>(&self, names: impl IntoIterator<Item = &'a str>) -> Result<(), Failure> {
        let mut text = String::new();
        for n in names.into_iter().filter(|n| plain(n)) {
            text.push_str(n);
            text.push('\n');
        }
        let manifest = self.dir.join(MANIFEST);
        write_fresh(&manifest, text.as_bytes())
    }

    /// Writes `bytes` as the new file `name` in the directory.
    pub fn write(&self, name: &str, bytes: &[u8]) -> Result<PathBuf, Failure> {
        let p = self.dir.join(name);
        write_fresh(&p, bytes)?;
        Ok(p)
    }
}

/// Writes a new file at `p`: an existing file or symlink there is removed
/// first, never written through.
fn write_fresh(p: &Path, bytes: &[u8]) -> Result<(), Failure> {
    if std::fs::symlink_metadata(p).is_ok() {
        std::fs::remove_file(p).map_err(|e| io_failure("remove", p, &e))?;
    }
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(p)
        .map_err(|e| io_failure("create", p, &e))?;
    f.write_all(bytes)
        .and_then(|()| f.flush())
        .map_err(|e| io_failure("write", p, &e))
}

fn foreign(dir: &Path, name: &str) -> Failure {
    Failure::input(format!(
        "--out {} holds `{}`, which the demo did not write; give --out a new or empty directory (the demo replaces only files its earlier runs listed in {MANIFEST})",
        shown(dir),
        excerpt::token(name)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("fuel-outdir-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn only_its_own_files_are_replaced() {
        let d = scratch("own");
        let out = OutDir::prepare(&d).unwrap();
        out.will_write(["a.fir", "a.svg", "../escape", "b/c"])
            .unwrap();
        out.write("a.fir", b"x").unwrap();
        // A second run replaces what the first listed.
        let out = OutDir::prepare(&d).unwrap();
        assert!(!d.join("a.fir").exists());
        out.will_write(["a.fir"]).unwrap();
        std::fs::write(d.join("mine.txt"), "keep").unwrap();
        let e = OutDir::prepare(&d).unwrap_err();
        assert!(
            e.message
                .contains("holds `mine.txt`, which the demo did not write"),
            "{}",
            e.message
        );
        assert_eq!(std::fs::read_to_string(d.join("mine.txt")).unwrap(), "keep");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_symlink_is_never_followed() {
        let d = scratch("link");
        let outside = scratch("outside-target");
        std::fs::write(&outside, "precious").unwrap();
        let out = OutDir::prepare(&d).unwrap();
        out.will_write(["x.svg"]).unwrap();
        std::os::unix::fs::symlink(&outside, d.join("x.svg")).unwrap();
        // Named in the manifest, but a symlink: foreign.
        let e = OutDir::prepare(&d).unwrap_err();
        assert!(e.message.contains("holds `x.svg`"), "{}", e.message);
        // Writing replaces the link itself, not its target.
        out.write("x.svg", b"<svg/>").unwrap();
        assert_eq!(std::fs::read_to_string(&outside).unwrap(), "precious");
        std::fs::remove_dir_all(&d).unwrap();
        std::fs::remove_file(&outside).unwrap();
    }
}
