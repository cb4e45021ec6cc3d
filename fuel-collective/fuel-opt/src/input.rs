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
use fuel_graph_ext::limits::Bytes;
use fuel_graph_ext::text::excerpt;
use fuel_graph_ext::textfile::{self, FileError};
use std::io::IsTerminal;
use std::path::Path;

/// The default limit on one input: 256 MiB, several million nodes of text
/// IR (the calibration cache is read at the same limit).
pub const DEFAULT_MAX_INPUT: usize = textfile::DEFAULT_LIMIT;

/// Reads `file` (`-` for standard input) as UTF-8 text of at most `limit`
/// bytes; `what` names it in messages (`topology`). The reading is
/// `fuel_graph_ext::textfile`'s, which reads calibration caches too; the
/// messages here add what to do.
pub fn read_text(file: &str, what: &str, limit: usize) -> Result<String, Failure> {
    let name = if file == "-" {
        "standard input".to_string()
    } else {
        format!("{what}`{}`", excerpt::token(file))
    };
    let read = if file == "-" {
        let stdin = std::io::stdin();
        let kind = match std::fs::metadata("/proc/self/fd/0") {
            Ok(meta) if !stdin.is_terminal() => textfile::check_kind(&meta),
            _ => Ok(()),
        };
        kind.and_then(|()| textfile::read_limited(stdin.lock(), limit))
            .and_then(textfile::text)
    } else {
        textfile::read(Path::new(file), limit)
    };
    read.map_err(|e| failure(&name, e))
}

/// `e` as a message naming `name` and the fix.
fn failure(name: &str, e: FileError) -> Failure {
    Failure::input(match e {
        FileError::Io(why) => format!("cannot read {name}: {why}"),
        FileError::Directory => format!("cannot read {name}: it is a directory; give a file"),
        FileError::Device => format!(
            "{name} is a device, not a file; fuel-opt reads files, pipes and standard input"
        ),
        FileError::TooBig { len, limit } => {
            let size = match len {
                Some(n) => format!("is {}", Bytes(usize::try_from(n).unwrap_or(usize::MAX))),
                None => "goes on past it".to_string(),
            };
            format!(
                "{name} {size}, more than the input limit of {}; raise it with --max-input-size (for example --max-input-size 1G)",
                Bytes(limit)
            )
        }
        FileError::Nul(at) => {
            format!("{name} has a NUL byte at byte {at}; .fir and topology files are text")
        }
        FileError::NotUtf8(at) => {
            format!("{name} is not UTF-8 text (at byte {at}); .fir and topology files are text")
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_nul_bytes_and_devices() {
        let big = FileError::TooBig {
            len: None,
            limit: 100,
        };
        let e = failure("`big`", big);
        assert!(
            e.message.contains("more than the input limit of 100 bytes"),
            "{}",
            e.message
        );
        let e = failure("`z`", FileError::Nul(2));
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
