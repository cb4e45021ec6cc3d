//! What fits on a device: how many bytes it can hold, as it reports them.
//!
//! `exec::compile` checks every buffer a graph will make against its
//! device's [`Capacity`] before it schedules or runs anything, so a tensor
//! that cannot fit is an error that says what fits, not an allocation that
//! aborts the process (or a Vulkan buffer bound past the device's storage
//! range). The host's figures come from `/proc` (physical memory and swap,
//! and this process's `ulimit -v` / `ulimit -d`); a GPU's from its driver.
//! On a system without `/proc` the host has no figure and is not checked
//! here; its allocations are still fallible.

use std::fmt;

/// One limit: bytes, and what sets it (for messages: `physical memory and
/// swap`, `this process's address-space limit (ulimit -v)`,
/// `maxStorageBufferRange`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limit {
    /// The most bytes.
    pub bytes: usize,
    /// What sets it.
    pub what: String,
}

/// How many bytes one device can hold.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Capacity {
    /// The largest single buffer.
    pub buffer: Limit,
    /// The largest buffer a kernel can bind (a Vulkan storage buffer's
    /// range); the same as `buffer` elsewhere.
    pub kernel_buffer: Limit,
    /// Every buffer at once.
    pub total: Limit,
}

impl Capacity {
    /// One figure for everything.
    pub fn uniform(bytes: usize, what: impl Into<String>) -> Capacity {
        let limit = Limit {
            bytes,
            what: what.into(),
        };
        Capacity {
            buffer: limit.clone(),
            kernel_buffer: limit.clone(),
            total: limit,
        }
    }
}

/// Bytes as a message shows them: `17179869184 bytes (16 GiB)`.
pub struct Bytes(pub usize);

impl fmt::Display for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const UNITS: [&str; 7] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
        let mut v = self.0 as f64;
        let mut u = 0;
        while v >= 1024.0 && u + 1 < UNITS.len() {
            v /= 1024.0;
            u += 1;
        }
        if u == 0 {
            write!(f, "{} bytes", self.0)
        } else if v.fract() == 0.0 {
            write!(f, "{} bytes ({v:.0} {})", self.0, UNITS[u])
        } else {
            write!(f, "{} bytes ({v:.1} {})", self.0, UNITS[u])
        }
    }
}

/// What this process may hold in host memory: the smallest of physical
/// memory plus swap, the address-space limit and the data-segment limit.
/// `None` where `/proc` does not say.
pub fn host() -> Option<Capacity> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok();
    let limits = std::fs::read_to_string("/proc/self/limits").ok();
    host_from(meminfo.as_deref(), limits.as_deref())
}

/// [`host`] from the text of `/proc/meminfo` and `/proc/self/limits`.
fn host_from(meminfo: Option<&str>, limits: Option<&str>) -> Option<Capacity> {
    let mut best: Option<(usize, &str)> = None;
    let mut consider = |bytes: Option<usize>, source: &'static str| {
        if let Some(b) = bytes {
            if best.is_none_or(|(have, _)| b < have) {
                best = Some((b, source));
            }
        }
    };
    if let Some(m) = meminfo {
        let kb = |key: &str| -> Option<usize> {
            let line = m.lines().find(|l| l.starts_with(key))?;
            let n: usize = line.split_whitespace().nth(1)?.parse().ok()?;
            n.checked_mul(1024)
        };
        let total = kb("MemTotal:").map(|t| t.saturating_add(kb("SwapTotal:").unwrap_or(0)));
        consider(total, "physical memory and swap");
    }
    if let Some(l) = limits {
        // `Max address space   <soft>   <hard>   bytes`: the soft limit is
        // the one enforced.
        let soft = |prefix: &str| -> Option<usize> {
            let line = l.lines().find(|x| x.starts_with(prefix))?;
            let rest = line.get(prefix.len()..)?;
            rest.split_whitespace().next()?.parse().ok()
        };
        consider(
            soft("Max address space"),
            "this process's address-space limit (ulimit -v)",
        );
        consider(
            soft("Max data size"),
            "this process's data-segment limit (ulimit -d)",
        );
    }
    best.map(|(b, source)| Capacity::uniform(b, source))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MEMINFO: &str =
        "MemTotal:       24731708 kB\nMemFree:         1000 kB\nSwapTotal:       1024 kB\n";
    const LIMITS: &str = "Limit                     Soft Limit           Hard Limit           Units     \nMax data size             unlimited            unlimited            bytes     \nMax address space         4294967296           unlimited            bytes     \n";

    #[test]
    fn the_smallest_figure_wins_and_is_named() {
        let c = host_from(Some(MEMINFO), Some(LIMITS)).unwrap();
        assert_eq!(c.total.bytes, 4 << 30);
        assert_eq!(c.buffer, c.total);
        assert!(c.total.what.contains("ulimit -v"), "{}", c.total.what);
        let unlimited = LIMITS.replace("4294967296", "unlimited");
        let c = host_from(Some(MEMINFO), Some(&unlimited)).unwrap();
        assert_eq!(c.total.bytes, (24731708 + 1024) * 1024);
        assert_eq!(c.total.what, "physical memory and swap");
        assert_eq!(host_from(None, None), None);
        assert!(host().is_none_or(|c| c.total.bytes > 0));
    }

    #[test]
    fn bytes_read_well() {
        assert_eq!(Bytes(512).to_string(), "512 bytes");
        assert_eq!(Bytes(16 << 30).to_string(), "17179869184 bytes (16 GiB)");
        assert_eq!(Bytes(3 << 19).to_string(), "1572864 bytes (1.5 MiB)");
        assert_eq!(
            Bytes(usize::MAX).to_string(),
            "18446744073709551615 bytes (16 EiB)"
        );
    }
}
