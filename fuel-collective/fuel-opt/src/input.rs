//! Reading input files (`.fir`, topology files, standard input) with a size
//! limit.
//!
//! A file is read only up to `--max-input-size` bytes (default
//! [`DEFAULT_MAX_INPUT`]): a regular file larger than that is refused from
//! its size alone, and a pipe or standard input is refused as soon as it
//! passes the limit. A device such as `/dev/zero` (a character device that
//! is not a terminal) is refused without reading from it, and so is any
//! input with a NUL byte (text IR is text; the printer escapes control
//! characters), which stops `cat /dev/zero | fuel-opt -` at its first
//! block. Names in messages are quoted safely.

use crate::Failure;
use fuel_graph_ext::text::excerpt;
use fuel_runtime::backend::limits::Bytes;
use std::io::{IsTerminal, Read};
use std::os::unix::fs::FileTypeExt;
use std::path::Path;

/// The default limit on one input: 256 MiB, several million nodes of text
/// IR.
pub const DEFAULT_MAX_INPUT: usize = 256 << 20;

/// Reads `file` (`-` for standard input) as UTF-8 text of at most `limit`
/// bytes; `what` names it in messages (`topology`).
pub fn read_text(file: &str, what: &str, limit: usize) -> Result<String, Failure> {
    let name = if file == "-" {
        "standard input".to_string()
    } else {
        format!("{what}`{}`", excerpt::token(file))
    };
    let cannot = |e: std::io::Error| Failure::input(format!("cannot read {name}: {e}"));
    let bytes = if file == "-" {
        let stdin = std::io::stdin();
        if !stdin.is_terminal() {
            if let Ok(meta) = std::fs::metadata("/proc/self/fd/0") {
                refuse_devices(&name, &meta)?;
            }
        }
        read_limited(stdin.lock(), &name, limit)?
    } else {
        let meta = std::fs::metadata(Path::new(file)).map_err(cannot)?;
        refuse_devices(&name, &meta)?;
        if meta.is_dir() {
            return Err(Failure::input(format!(
                "cannot read {name}: it is a directory; give a file"
            )));
        }
        if meta.is_file() {
            let len = usize::try_from(meta.len()).unwrap_or(usize::MAX);
            if len > limit {
                return Err(too_big(&name, limit, Some(len)));
            }
        }
        let f = std::fs::File::open(file).map_err(cannot)?;
        read_limited(f, &name, limit)?
    };
    String::from_utf8(bytes).map_err(|e| {
        Failure::input(format!(
            "{name} is not UTF-8 text (at byte {}); .fir and topology files are text",
            e.utf8_error().valid_up_to()
        ))
    })
}

/// Refuses character and block devices (`/dev/zero`, `/dev/urandom`, a
/// disk): they are not input files, and some never end.
fn refuse_devices(name: &str, meta: &std::fs::Metadata) -> Result<(), Failure> {
    let t = meta.file_type();
    if t.is_char_device() || t.is_block_device() {
        return Err(Failure::input(format!(
            "{name} is a device, not a file; fuel-opt reads files, pipes and standard input"
        )));
    }
    Ok(())
}

fn too_big(name: &str, limit: usize, len: Option<usize>) -> Failure {
    let size = match len {
        Some(n) => format!("is {}", Bytes(n)),
        None => "goes on past it".to_string(),
    };
    Failure::input(format!(
        "{name} {size}, more than the input limit of {}; raise it with --max-input-size (for example --max-input-size 1G)",
        Bytes(limit)
    ))
}

/// Reads `r` to its end, refusing more than `limit` bytes and any NUL byte.
fn read_limited(mut r: impl Read, name: &str, limit: usize) -> Result<Vec<u8>, Failure> {
    let mut out: Vec<u8> = Vec::new();
    let mut block = vec![0u8; 64 << 10];
    loop {
        let n = match r.read(&mut block) {
            Ok(0) => return Ok(out),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(Failure::input(format!("cannot read {name}: {e}"))),
        };
        let got = &block[..n];
        if let Some(k) = got.iter().position(|b| *b == 0) {
            return Err(Failure::input(format!(
                "{name} has a NUL byte at byte {}; .fir and topology files are text",
                out.len() + k
            )));
        }
        if out.len() + n > limit {
            return Err(too_big(name, limit, None));
        }
        out.try_reserve(n)
            .map_err(|e| Failure::input(format!("cannot read {name}: {e}")))?;
        out.extend_from_slice(got);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_nul_bytes_and_devices() {
        let r = read_limited(&b"graph @g {"[..], "x", 100).unwrap();
        assert_eq!(r, b"graph @g {");
        let e = read_limited(&[b'a'; 200][..], "`big`", 100).unwrap_err();
        assert!(
            e.message.contains("more than the input limit of 100 bytes"),
            "{}",
            e.message
        );
        let e = read_limited(&b"ab\0cd"[..], "`z`", 100).unwrap_err();
        assert_eq!(
            e.message,
            "`z` has a NUL byte at byte 2; .fir and topology files are text"
        );
        let e = read_text("/dev/zero", "", 100).unwrap_err();
        assert_eq!(
            e.message,
            "`/dev/zero` is a device, not a file; fuel-opt reads files, pipes and standard input"
        );
    }
}
