//! Reading a text file with a size limit: the one reader of topology files
//! (`fuel-opt --topology`) and calibration caches, so both have the same
//! limits and the same errors.
//!
//! A regular file larger than the limit is refused from its size alone,
//! and anything else (a pipe) as soon as it passes it. A device
//! (`/dev/zero`, a disk) and a directory are refused without reading, and
//! so is a NUL byte (these files are text) and text that is not UTF-8.
//! [`cut_off_line`] tells a file that ends in the middle of a line: every
//! line the calibration cache's writer writes ends with a newline, so a
//! cache that does not was cut off and is damaged.

use std::fmt;
use std::io::Read;
use std::os::unix::fs::FileTypeExt;
use std::path::Path;

/// The default limit on one input file: 256 MiB (`fuel-opt
/// --max-input-size` sets its own; the calibration cache reads at this).
pub const DEFAULT_LIMIT: usize = 256 << 20;

/// Why a file could not be read as text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FileError {
    /// The system's reason (missing, no permission, a read error).
    Io(String),
    /// A character or block device.
    Device,
    /// A directory.
    Directory,
    /// Larger than the limit: its size where known.
    TooBig {
        /// The file's size, if it is a regular file.
        len: Option<u64>,
        /// The limit, bytes.
        limit: usize,
    },
    /// A NUL byte at this offset.
    Nul(usize),
    /// Not UTF-8 from this offset.
    NotUtf8(usize),
}

impl fmt::Display for FileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FileError::Io(why) => f.write_str(why),
            FileError::Device => f.write_str("it is a device, not a file"),
            FileError::Directory => f.write_str("it is a directory; give a file"),
            FileError::TooBig {
                len: Some(n),
                limit,
            } => {
                write!(f, "it is {n} bytes, more than the limit of {limit} bytes")
            }
            FileError::TooBig { len: None, limit } => {
                write!(f, "it goes on past the limit of {limit} bytes")
            }
            FileError::Nul(at) => write!(f, "it has a NUL byte at byte {at}; it must be text"),
            FileError::NotUtf8(at) => write!(f, "it is not UTF-8 text (at byte {at})"),
        }
    }
}

impl std::error::Error for FileError {}

/// Refuses devices and directories from their metadata.
pub fn check_kind(meta: &std::fs::Metadata) -> Result<(), FileError> {
    let t = meta.file_type();
    if t.is_char_device() || t.is_block_device() {
        return Err(FileError::Device);
    }
    if t.is_dir() {
        return Err(FileError::Directory);
    }
    Ok(())
}

/// Reads `path` as UTF-8 text of at most `limit` bytes.
pub fn read(path: &Path, limit: usize) -> Result<String, FileError> {
    let io = |e: std::io::Error| FileError::Io(e.to_string());
    let meta = std::fs::metadata(path).map_err(io)?;
    check_kind(&meta)?;
    if meta.is_file() && meta.len() > limit as u64 {
        return Err(FileError::TooBig {
            len: Some(meta.len()),
            limit,
        });
    }
    let f = std::fs::File::open(path).map_err(io)?;
    text(read_limited(f, limit)?)
}

/// `bytes` as UTF-8 text.
pub fn text(bytes: Vec<u8>) -> Result<String, FileError> {
    String::from_utf8(bytes).map_err(|e| FileError::NotUtf8(e.utf8_error().valid_up_to()))
}

/// Reads `r` to its end, refusing more than `limit` bytes and any NUL
/// byte.
pub fn read_limited(mut r: impl Read, limit: usize) -> Result<Vec<u8>, FileError> {
    let mut out: Vec<u8> = Vec::new();
    let mut block = vec![0u8; 64 << 10];
    loop {
        let n = match r.read(&mut block) {
            Ok(0) => return Ok(out),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(FileError::Io(e.to_string())),
        };
        let got = block.get(..n).unwrap_or_default();
        if let Some(k) = got.iter().position(|b| *b == 0) {
            return Err(FileError::Nul(out.len() + k));
        }
        if out.len() + n > limit {
            return Err(FileError::TooBig { len: None, limit });
        }
        out.try_reserve(n)
            .map_err(|e| FileError::Io(e.to_string()))?;
        out.extend_from_slice(got);
    }
}

/// The 1-based number of the last line when `text` ends in the middle of
/// it (no final newline), else `None`.
pub fn cut_off_line(text: &str) -> Option<usize> {
    (!text.is_empty() && !text.ends_with('\n')).then(|| text.lines().count())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_nul_bytes_devices_and_cut_lines() {
        assert_eq!(read_limited(&b"ab"[..], 2), Ok(b"ab".to_vec()));
        assert_eq!(
            read_limited(&[b'a'; 200][..], 100),
            Err(FileError::TooBig {
                len: None,
                limit: 100
            })
        );
        assert_eq!(read_limited(&b"ab\0cd"[..], 100), Err(FileError::Nul(2)));
        assert_eq!(read(Path::new("/dev/zero"), 100), Err(FileError::Device));
        assert_eq!(read(Path::new("/"), 100), Err(FileError::Directory));
        assert_eq!(text(vec![b'a', 0xff]), Err(FileError::NotUtf8(1)));
        assert_eq!(cut_off_line("a\nb\n"), None);
        assert_eq!(cut_off_line(""), None);
        assert_eq!(cut_off_line("a\nlink host-host bandw"), Some(2));
    }
}
