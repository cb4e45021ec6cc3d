//! Devices: where a value lives.
//!
//! A [`Device`] is a backend kind plus an ordinal, written `cpu:0`, `cuda:1`
//! or `vulkan:0` in the text IR. Two CPU devices are distinct devices with
//! separate memory, so every multi-device path can be exercised on a machine
//! without a GPU. The vendor of a device decides which copies are direct
//! (see [`crate::topology`]).

use std::fmt;
use std::str::FromStr;

/// The backend family of a device.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DeviceKind {
    /// A host memory arena driven by CPU threads.
    Cpu,
    /// An NVIDIA GPU driven through the CUDA driver API.
    Cuda,
    /// A Vulkan logical device (a GPU, or Mesa's lavapipe on the CPU).
    Vulkan,
}

impl DeviceKind {
    /// All kinds, in a fixed order.
    pub const ALL: [DeviceKind; 3] = [DeviceKind::Cpu, DeviceKind::Cuda, DeviceKind::Vulkan];

    /// The spelling used in the text IR.
    pub fn as_str(self) -> &'static str {
        match self {
            DeviceKind::Cpu => "cpu",
            DeviceKind::Cuda => "cuda",
            DeviceKind::Vulkan => "vulkan",
        }
    }
}

impl fmt::Display for DeviceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One device: a kind and an ordinal.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Device {
    /// The backend family.
    pub kind: DeviceKind,
    /// The ordinal within the family.
    pub index: u32,
}

impl Device {
    /// `cpu:index`.
    pub const fn cpu(index: u32) -> Device {
        Device {
            kind: DeviceKind::Cpu,
            index,
        }
    }
    /// `cuda:index`.
    pub const fn cuda(index: u32) -> Device {
        Device {
            kind: DeviceKind::Cuda,
            index,
        }
    }
    /// `vulkan:index`.
    pub const fn vulkan(index: u32) -> Device {
        Device {
            kind: DeviceKind::Vulkan,
            index,
        }
    }
    /// `cpu:N`, `cuda:N` or `vulkan:N` exactly as printed (no spaces), or
    /// `None`: a fast path for the parser, which falls back to `from_str`
    /// (and its error) for anything else. Accepts only what `from_str`
    /// accepts, with the same result.
    pub fn parse_plain(s: &str) -> Option<Device> {
        let (kind, index) = if let Some(i) = s.strip_prefix("cpu:") {
            (DeviceKind::Cpu, i)
        } else if let Some(i) = s.strip_prefix("cuda:") {
            (DeviceKind::Cuda, i)
        } else if let Some(i) = s.strip_prefix("vulkan:") {
            (DeviceKind::Vulkan, i)
        } else {
            return None;
        };
        if index.is_empty() {
            return None;
        }
        let index = index.bytes().try_fold(0u32, |n, b| {
            if b.is_ascii_digit() {
                n.checked_mul(10)?.checked_add(u32::from(b - b'0'))
            } else {
                None
            }
        })?;
        Some(Device { kind, index })
    }

    /// True for host devices.
    pub fn is_cpu(self) -> bool {
        self.kind == DeviceKind::Cpu
    }
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.kind, self.index)
    }
}

/// Why a device name did not parse.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid device `{}`: {}", crate::text::excerpt::token(.text), .problem)]
pub struct ParseDeviceError {
    /// The text that was rejected.
    pub text: String,
    /// What is wrong with it.
    pub problem: DeviceSyntax,
}

/// What is wrong with a device name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DeviceSyntax {
    /// Not `kind:index` with a known kind.
    #[error("expected `cpu:N`, `cuda:N` or `vulkan:N`")]
    Form,
    /// A known kind whose index is not a non-negative integer (`cuda:-1`,
    /// `cpu:x`, `cpu:`).
    #[error("the index must be a non-negative integer, as in `{kind}:0`")]
    Index {
        /// The kind that was named.
        kind: DeviceKind,
    },
    /// An index past `u32::MAX`.
    #[error("the index must be at most {}", u32::MAX)]
    IndexTooLarge,
}

impl FromStr for Device {
    type Err = ParseDeviceError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = |problem| ParseDeviceError {
            text: s.to_string(),
            problem,
        };
        let (kind, index) = s
            .trim()
            .split_once(':')
            .ok_or_else(|| err(DeviceSyntax::Form))?;
        let kind = match kind {
            "cpu" => DeviceKind::Cpu,
            "cuda" => DeviceKind::Cuda,
            "vulkan" => DeviceKind::Vulkan,
            _ => return Err(err(DeviceSyntax::Form)),
        };
        if index.is_empty() || !index.bytes().all(|b| b.is_ascii_digit()) {
            return Err(err(DeviceSyntax::Index { kind }));
        }
        let index = index
            .parse()
            .map_err(|_| err(DeviceSyntax::IndexTooLarge))?;
        Ok(Device { kind, index })
    }
}

/// Parses a comma-separated device list such as `cpu:0,cuda:0,vulkan:1`.
pub fn parse_device_list(s: &str) -> Result<Vec<Device>, ParseDeviceError> {
    s.split(',')
        .filter(|p| !p.trim().is_empty())
        .map(str::parse)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_rejects() {
        for s in ["cpu:0", "cuda:12", "vulkan:1"] {
            assert_eq!(
                s.parse::<Device>().map(|d| d.to_string()),
                Ok(s.to_string())
            );
        }
        for s in ["gpu:0", "cpu", ":0", "cpu0"] {
            let e = s.parse::<Device>().unwrap_err();
            assert!(e.to_string().contains("expected `cpu:N`"), "{e}");
        }
        for s in ["cpu:", "cpu:-1", "cpu:x", "cpu:1.5"] {
            let e = s.parse::<Device>().unwrap_err();
            assert_eq!(
                e.to_string(),
                format!(
                    "invalid device `{s}`: the index must be a non-negative integer, as in `cpu:0`"
                )
            );
        }
        assert_eq!(
            "cuda:-1".parse::<Device>().unwrap_err().to_string(),
            "invalid device `cuda:-1`: the index must be a non-negative integer, as in `cuda:0`"
        );
        assert!("cpu:4294967296"
            .parse::<Device>()
            .unwrap_err()
            .to_string()
            .ends_with("the index must be at most 4294967295"));
        // The parser's fast path accepts a subset of `from_str`, alike.
        for s in [
            "cpu:0",
            "cuda:12",
            "vulkan:1",
            "cpu:007",
            "cpu:4294967295",
            "cpu:4294967296",
            "cpu:",
            "cpu",
            "gpu:0",
            "cpu:0:1",
            "cpu:x",
            "cuda:1a",
            " cpu:0",
            "Cpu:0",
            "",
        ] {
            if let Some(d) = Device::parse_plain(s) {
                assert_eq!(s.parse::<Device>(), Ok(d), "{s}");
            }
        }
        assert_eq!(Device::parse_plain("vulkan:3"), Some(Device::vulkan(3)));
        assert_eq!(Device::parse_plain("cpu:4294967296"), None);
        assert_eq!(
            parse_device_list("cpu:0, cuda:1").unwrap(),
            vec![Device::cpu(0), Device::cuda(1)]
        );
    }
}
