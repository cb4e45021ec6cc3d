//! The per-machine calibration cache: the cost figures `fuel-opt calibrate`
//! measured here, kept for the next run.
//!
//! One file per set of devices that cost the same: the key is the process
//! layout and, for each distinct device of the group, what it is (the CPU
//! model and thread count; a Vulkan adapter's name, driver and version, and
//! whether its storage buffers are mapped or staged; a CUDA GPU). Device
//! indices and counts are not in the key: `[cpu:0, cpu:1, vulkan:0, vulkan:1]`
//! and `[vulkan:0, vulkan:1, cpu:0]` on lavapipe read one file. The file
//! name is the device kinds and a hash of the key; the key itself is in the
//! file, with the format, the day it was measured and the topology lines
//! (`Topology::to_text`).
//!
//! The files live in `$FUEL_CACHE_DIR`, else `$XDG_CACHE_HOME/fuel`, else
//! `$HOME/.cache/fuel`, under `calibration/`. [`topology_for`]
//! reads the one for a group of devices, or gives the documented defaults
//! when there is none; a file that cannot be read, does not parse, or was
//! written by another format or for other devices is an error naming the
//! file and the command that rewrites it, never a silent fallback. Nothing
//! here measures anything: timing devices is a side effect the caller
//! chooses (`fuel-opt calibrate`, or `fuel-opt demo` on its first run).
//!
//! This is the one place the library reads the environment for the cost
//! model, and only when a caller asks for [`topology_for`]: the
//! `lower-collectives` pass itself uses the topology it is given.

use fuel_graph_ext::device::{Device, DeviceKind};
use fuel_graph_ext::topology::{Source, Topology};
use std::collections::BTreeSet;
use std::fmt;
use std::path::{Path, PathBuf};

/// The cache format this build reads and writes. Format 1 was the
/// `bench --calibrate` topology file, which had no runner, fixed compute
/// or deferred figures.
pub const FORMAT: u32 = 2;

/// How the devices are driven: every rank in this one process.
pub const LAYOUT: &str = "single-process";

/// What a calibration is valid for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Key {
    /// The process layout ([`LAYOUT`]).
    pub layout: String,
    /// What each distinct device is, sorted.
    pub devices: Vec<String>,
}

impl Key {
    /// The key of `devices` on this machine, or `None` if one of them is
    /// not here (it cannot have been calibrated).
    pub fn for_devices(devices: &[Device]) -> Option<Key> {
        let mut ids = BTreeSet::new();
        for d in devices {
            ids.insert(identity(*d)?);
        }
        Some(Key {
            layout: LAYOUT.into(),
            devices: ids.into_iter().collect(),
        })
    }

    /// The file name: the kinds, then a hash of the whole key.
    pub fn file_name(&self) -> String {
        let mut kinds: Vec<&str> = self
            .devices
            .iter()
            .filter_map(|d| d.split(':').next())
            .collect();
        kinds.dedup();
        format!("{}-{:016x}.topo", kinds.join("-"), fnv1a(&self.lines()))
    }

    /// The key as the file's `key` lines.
    pub fn lines(&self) -> String {
        let mut s = format!("key layout {}\n", self.layout);
        for d in &self.devices {
            s.push_str(&format!("key device {d}\n"));
        }
        s
    }

    /// What was measured, for the note: `cpu: ...; vulkan: ...`.
    pub fn summary(&self) -> String {
        self.devices.join("; ")
    }
}

fn fnv1a(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// What `device` is, as the key records it; `None` if it is not here.
fn identity(device: Device) -> Option<String> {
    match device.kind {
        DeviceKind::Cpu => Some(format!("cpu: {}", cpu_model())),
        DeviceKind::Vulkan => vulkan_identity(device),
        DeviceKind::Cuda => cuda_identity(device),
    }
}

/// The CPU model and the threads this process may use.
fn cpu_model() -> String {
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| std::env::consts::ARCH.to_string());
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    format!("{model} ({threads} threads)")
}

#[cfg(feature = "vulkan")]
fn vulkan_identity(device: Device) -> Option<String> {
    use crate::backend::vulkan::{devices_per_adapter, HostAccess, Instance};
    let inst = Instance::open().ok()?;
    let adapters = inst.adapters();
    // A bad variable is reported where the devices are opened; here it
    // only makes the identity unknown.
    let info = adapters.get((device.index / devices_per_adapter().ok()?) as usize)?;
    let path = if info.mappable && HostAccess::from_env().ok()? == HostAccess::Mapped {
        "mapped"
    } else {
        "staging"
    };
    Some(format!("vulkan: {}, {}, {path}", info.name, info.driver))
}

#[cfg(not(feature = "vulkan"))]
fn vulkan_identity(_: Device) -> Option<String> {
    None
}

#[cfg(feature = "cuda")]
fn cuda_identity(device: Device) -> Option<String> {
    let n = crate::backend::cuda::device_count().ok()?;
    ((device.index as usize) < n).then(|| "cuda: CUDA GPU".to_string())
}

#[cfg(not(feature = "cuda"))]
fn cuda_identity(_: Device) -> Option<String> {
    None
}

/// Where the cache lives: `$FUEL_CACHE_DIR`, else `$XDG_CACHE_HOME/fuel`,
/// else `$HOME/.cache/fuel` (empty variables count as unset); `None` when
/// none is set.
pub fn cache_dir() -> Option<PathBuf> {
    let var = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    var("FUEL_CACHE_DIR")
        .or_else(|| var("XDG_CACHE_HOME").map(|p| p.join("fuel")))
        .or_else(|| var("HOME").map(|p| p.join(".cache").join("fuel")))
}

/// The cache file for `devices` and its key, or `None` when there is no
/// cache directory or a device is not on this machine.
pub fn cache_file(devices: &[Device]) -> Option<(PathBuf, Key)> {
    let key = Key::for_devices(devices)?;
    let path = cache_dir()?.join("calibration").join(key.file_name());
    Some((path, key))
}

/// The command that (re)writes the cache for `devices`.
pub fn command(devices: &[Device]) -> String {
    let list: Vec<String> = devices.iter().map(|d| d.to_string()).collect();
    format!("fuel-opt calibrate --devices {}", list.join(","))
}

/// Why the cache could not be used.
#[derive(Clone, PartialEq, Eq)]
pub enum CacheError {
    /// The file exists but cannot be read.
    Unreadable {
        /// The file.
        path: PathBuf,
        /// The system's reason.
        why: String,
        /// The command that rewrites it.
        command: String,
    },
    /// A line is not what the file format allows.
    Bad {
        /// The file.
        path: PathBuf,
        /// What is wrong, naming the line (a topology file error).
        why: String,
        /// The command that rewrites it.
        command: String,
    },
    /// Written by another format, or for other devices.
    Stale {
        /// The file.
        path: PathBuf,
        /// Why it no longer applies.
        why: String,
        /// The command that rewrites it.
        command: String,
    },
    /// The cache could not be written.
    Write {
        /// The file or folder.
        path: PathBuf,
        /// The system's reason.
        why: String,
    },
}

impl fmt::Display for CacheError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CacheError::Unreadable { path, why, command } => write!(
                f,
                "calibration cache `{}` cannot be read ({why}): run `{command}` to rewrite it",
                path.display()
            ),
            CacheError::Bad { path, why, command } => write!(
                f,
                "calibration cache `{}` is damaged: {why}\nrun `{command}` to rewrite it",
                path.display()
            ),
            CacheError::Stale { path, why, command } => write!(
                f,
                "calibration cache `{}` is stale: {why}; run `{command}` to rewrite it",
                path.display()
            ),
            CacheError::Write { path, why } => write!(
                f,
                "cannot write the calibration cache `{}` ({why}): set FUEL_CACHE_DIR to a folder you can write",
                path.display()
            ),
        }
    }
}

impl std::error::Error for CacheError {}

/// Reads the calibration at `path`, which must hold `key`; `devices` only
/// name the command in errors.
pub fn read_file(path: &Path, key: &Key, devices: &[Device]) -> Result<Topology, CacheError> {
    let command = command(devices);
    // Read as a topology file is (`textfile`: the same limit and refusals);
    // the writer ends every line, so one left open was cut off.
    let bad = |why: String| CacheError::Bad {
        path: path.to_path_buf(),
        why,
        command: command.clone(),
    };
    let text = match fuel_graph_ext::textfile::read(path, fuel_graph_ext::textfile::DEFAULT_LIMIT) {
        Ok(text) => text,
        Err(
            e @ (fuel_graph_ext::textfile::FileError::Io(_)
            | fuel_graph_ext::textfile::FileError::Directory
            | fuel_graph_ext::textfile::FileError::Device),
        ) => {
            return Err(CacheError::Unreadable {
                path: path.to_path_buf(),
                why: e.to_string(),
                command: command.clone(),
            })
        }
        Err(e) => return Err(bad(e.to_string())),
    };
    if let Some(line) = fuel_graph_ext::textfile::cut_off_line(&text) {
        return Err(bad(format!(
            "line {line} is cut off: the file ends in the middle of it"
        )));
    }
    let stale = |why: String| CacheError::Stale {
        path: path.to_path_buf(),
        why,
        command: command.clone(),
    };
    // The header lines become blank, so that topology errors keep the
    // file's line numbers.
    let mut format = None;
    let mut date = None;
    let mut keys = String::new();
    let mut body = String::new();
    for line in text.lines() {
        let bare = line.split('#').next().unwrap_or("").trim();
        if let Some(v) = bare.strip_prefix("format ") {
            format = Some(v.trim().to_string());
        } else if let Some(v) = bare.strip_prefix("date ") {
            date = Some(v.trim().to_string());
        } else if bare.starts_with("key ") {
            keys.push_str(bare);
            keys.push('\n');
        } else {
            body.push_str(line);
        }
        body.push('\n');
    }
    match format.as_deref() {
        Some(f) if f == FORMAT.to_string() => {}
        Some(f) => {
            return Err(stale(format!(
                "it is in format {f} and this build reads format {FORMAT}"
            )))
        }
        None => {
            return Err(stale(format!(
                "it has no `format` line (this build reads format {FORMAT})"
            )))
        }
    }
    if keys != key.lines() {
        return Err(stale(format!(
            "it was measured on `{}`, and these devices are `{}`",
            keys.lines()
                .filter_map(|l| l.strip_prefix("key device "))
                .collect::<Vec<_>>()
                .join("; "),
            key.summary()
        )));
    }
    let topo = Topology::parse(&body).map_err(bad)?;
    Ok(topo.with_source(Source::Calibrated {
        date: date.unwrap_or_else(|| "on an unknown day".into()),
        on: key.summary(),
    }))
}

/// Writes `topo` as the calibration of `devices`, measured on `date`;
/// returns the file.
pub fn write(devices: &[Device], topo: &Topology, date: &str) -> Result<PathBuf, CacheError> {
    let Some((path, key)) = cache_file(devices) else {
        return Err(CacheError::Write {
            path: cache_dir().unwrap_or_default(),
            why: match cache_dir() {
                None => "none of FUEL_CACHE_DIR, XDG_CACHE_HOME and HOME is set".into(),
                Some(_) => "a device of the group is not on this machine".into(),
            },
        });
    };
    let text = format!(
        "# fuel calibration cache: cost figures measured on this machine.\n# Rewrite it with `{}`; delete it to go back to the defaults.\nformat {FORMAT}\ndate {date}\n{}{}",
        command(devices),
        key.lines(),
        topo.to_text()
    );
    let fail = |p: &Path, e: std::io::Error| CacheError::Write {
        path: p.to_path_buf(),
        why: e.to_string(),
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| fail(dir, e))?;
    }
    // Write a sibling and rename it, so a reader never sees half a file.
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, text).map_err(|e| fail(&tmp, e))?;
    std::fs::rename(&tmp, &path).map_err(|e| fail(&path, e))?;
    Ok(path)
}

/// Today's date, `YYYY-MM-DD`, in UTC.
pub fn today() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    civil_date((secs / 86_400) as i64)
}

/// The calendar date `days` after 1970-01-01 (proleptic Gregorian).
fn civil_date(days: i64) -> String {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

/// The topology to lower collectives over `devices` with, on this
/// machine: the calibration `fuel-opt calibrate` cached for them, or the
/// documented defaults when there is none (or no cache folder, or a device
/// that is not here). Its [`Topology::source`] says which, and the
/// `lower-collectives` note repeats it.
///
/// It never measures anything. A cache file that cannot be read, is
/// damaged, or is stale (another format, other devices) is an error naming
/// the file and the command that rewrites it.
pub fn topology_for(devices: &[Device]) -> Result<Topology, CacheError> {
    match cache_file(devices) {
        Some((path, key)) if path.exists() => read_file(&path, &key, devices),
        _ => Ok(Topology::default()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates() {
        assert_eq!(civil_date(0), "1970-01-01");
        assert_eq!(civil_date(11_016), "2000-02-29");
        assert_eq!(civil_date(20_788), "2026-12-01");
        assert_eq!(today().len(), 10);
    }

    #[test]
    fn keys_ignore_indices_and_counts() {
        let a = Key::for_devices(&[Device::cpu(0), Device::cpu(3)]).unwrap();
        let b = Key::for_devices(&[Device::cpu(1)]).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.devices.len(), 1);
        assert!(a.file_name().starts_with("cpu-"), "{}", a.file_name());
        assert!(a.file_name().ends_with(".topo"));
    }

    #[test]
    fn a_cache_file_is_checked_before_it_is_used() {
        let dir = std::env::temp_dir().join(format!("fuel-cal-unit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let devs = [Device::cpu(0), Device::cpu(1)];
        let key = Key::for_devices(&devs).unwrap();
        let path = dir.join(key.file_name());
        let mut t = Topology::default();
        t.staging = Device::cpu(1);
        let good = format!(
            "format {FORMAT}\ndate 2026-12-01\n{}{}",
            key.lines(),
            t.to_text()
        );
        std::fs::write(&path, &good).unwrap();
        let back = read_file(&path, &key, &devs).unwrap();
        assert_eq!(back.staging, Device::cpu(1));
        assert_eq!(
            back.source().to_string(),
            format!("calibrated 2026-12-01 on {}", key.summary())
        );
        let cases = [
            (
                good.replace("format 2", "format 1"),
                "is stale: it is in format 1",
            ),
            (
                good.replace("format 2\n", ""),
                "is stale: it has no `format` line",
            ),
            (
                good.replace("key device cpu", "key device other"),
                "is stale: it was measured on `other",
            ),
            (
                good.replace("staging cpu:1", "staging cpu:x"),
                "is damaged: topology line 5",
            ),
            (
                good[..good.len() - 4].to_string(),
                "is cut off: the file ends in the middle of it",
            ),
            (
                good.replace("staging", "sta\0ging"),
                "is damaged: it has a NUL byte",
            ),
        ];
        for (text, want) in cases {
            std::fs::write(&path, text).unwrap();
            let e = read_file(&path, &key, &devs).unwrap_err().to_string();
            assert!(e.contains(want), "{e}");
            assert!(
                e.contains("`fuel-opt calibrate --devices cpu:0,cpu:1`"),
                "{e}"
            );
            assert!(e.contains(&path.display().to_string()), "{e}");
        }
        // 1.5 GB (sparse): refused from its size, as a topology file is.
        std::fs::File::create(&path)
            .and_then(|f| f.set_len(3 << 29))
            .unwrap();
        let e = read_file(&path, &key, &devs).unwrap_err().to_string();
        assert!(
            e.contains(
                "is damaged: it is 1610612736 bytes, more than the limit of 268435456 bytes"
            ),
            "{e}"
        );
        std::fs::remove_file(&path).unwrap();
        let e = read_file(&path, &key, &devs).unwrap_err();
        assert!(matches!(e, CacheError::Unreadable { .. }), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
