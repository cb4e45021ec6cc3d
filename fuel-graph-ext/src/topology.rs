//! Topology: which device pairs have a direct copy path, and what links cost.
//!
//! A pure helper with no graph in sight. [`Topology::route`] answers, for an
//! ordered device pair, whether one copy can move the bytes or whether they
//! must be staged through a CPU. [`Topology::link`] gives the bandwidth and
//! latency the cost model uses. The defaults are documented in
//! `docs/lowering.md`; a topology file (see [`Topology::parse`]) overrides them.

use crate::device::{Device, DeviceKind};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

/// How bytes get from one device to another.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// One copy does it.
    Direct,
    /// Two copies: source to this CPU, then CPU to destination.
    Staged(Device),
}

/// The class of a direct link, which decides its default cost.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LinkClass {
    /// Source and destination are the same device.
    SameDevice,
    /// Between two host arenas.
    HostHost,
    /// Between the host and a CUDA GPU.
    HostCuda,
    /// Between the host and a Vulkan device.
    HostVulkan,
    /// Between two CUDA GPUs with peer access.
    CudaPeer,
}

impl LinkClass {
    /// Every class.
    pub const ALL: [LinkClass; 5] = [
        LinkClass::SameDevice,
        LinkClass::HostHost,
        LinkClass::HostCuda,
        LinkClass::HostVulkan,
        LinkClass::CudaPeer,
    ];
    /// The name used in topology files.
    pub fn as_str(self) -> &'static str {
        match self {
            LinkClass::SameDevice => "same-device",
            LinkClass::HostHost => "host-host",
            LinkClass::HostCuda => "host-cuda",
            LinkClass::HostVulkan => "host-vulkan",
            LinkClass::CudaPeer => "cuda-peer",
        }
    }
}

/// Bandwidth and latency of one link.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LinkCost {
    /// Sustained bandwidth in GB/s (10^9 bytes per second).
    pub bandwidth_gbps: f64,
    /// Fixed cost per transfer in microseconds.
    pub latency_us: f64,
}

impl LinkCost {
    /// Estimated microseconds to move `bytes` over this link.
    pub fn time_us(&self, bytes: usize) -> f64 {
        self.latency_us + bytes as f64 / (self.bandwidth_gbps * 1e3)
    }
}

/// Device connectivity and link costs.
#[derive(Clone, Debug, PartialEq)]
pub struct Topology {
    /// Ordered CUDA pairs with peer access (stored both ways).
    peers: BTreeSet<(u32, u32)>,
    /// The CPU that staged copies go through.
    pub staging: Device,
    /// Cost per link class.
    links: BTreeMap<LinkClass, LinkCost>,
    /// Per-device compute throughput for reductions, GB/s of input read.
    pub reduce_gbps: BTreeMap<DeviceKind, f64>,
    /// Device kinds whose collective driver (NCCL, host driver) is available.
    pub drivers: BTreeSet<DeviceKind>,
}

impl Default for Topology {
    fn default() -> Self {
        let links = [
            (
                LinkClass::SameDevice,
                LinkCost {
                    bandwidth_gbps: 200.0,
                    latency_us: 2.0,
                },
            ),
            (
                LinkClass::HostHost,
                LinkCost {
                    bandwidth_gbps: 10.0,
                    latency_us: 5.0,
                },
            ),
            (
                LinkClass::HostCuda,
                LinkCost {
                    bandwidth_gbps: 25.0,
                    latency_us: 10.0,
                },
            ),
            (
                LinkClass::HostVulkan,
                LinkCost {
                    bandwidth_gbps: 5.0,
                    latency_us: 30.0,
                },
            ),
            (
                LinkClass::CudaPeer,
                LinkCost {
                    bandwidth_gbps: 100.0,
                    latency_us: 8.0,
                },
            ),
        ]
        .into_iter()
        .collect();
        let reduce_gbps = [
            (DeviceKind::Cpu, 20.0),
            (DeviceKind::Cuda, 1000.0),
            (DeviceKind::Vulkan, 5.0),
        ]
        .into_iter()
        .collect();
        Topology {
            peers: BTreeSet::new(),
            staging: Device::cpu(0),
            links,
            reduce_gbps,
            drivers: BTreeSet::new(),
        }
    }
}

impl Topology {
    /// Declares peer access between two CUDA devices (both directions).
    pub fn with_peer(mut self, a: u32, b: u32) -> Topology {
        self.peers.insert((a, b));
        self.peers.insert((b, a));
        self
    }

    /// True if cuda:a and cuda:b may copy directly.
    pub fn has_peer(&self, a: u32, b: u32) -> bool {
        self.peers.contains(&(a, b))
    }

    /// How to get bytes from `src` to `dst`.
    pub fn route(&self, src: Device, dst: Device) -> Route {
        use DeviceKind::*;
        if src == dst || src.kind == Cpu || dst.kind == Cpu {
            return Route::Direct;
        }
        match (src.kind, dst.kind) {
            (Cuda, Cuda) if self.has_peer(src.index, dst.index) => Route::Direct,
            _ => Route::Staged(self.staging),
        }
    }

    /// True if one copy can go from `src` to `dst`.
    pub fn is_direct(&self, src: Device, dst: Device) -> bool {
        self.route(src, dst) == Route::Direct
    }

    /// The class of a direct link, or `None` if the pair needs staging.
    pub fn link_class(&self, src: Device, dst: Device) -> Option<LinkClass> {
        use DeviceKind::*;
        if self.route(src, dst) != Route::Direct {
            return None;
        }
        Some(match (src.kind, dst.kind) {
            _ if src == dst => LinkClass::SameDevice,
            (Cpu, Cpu) => LinkClass::HostHost,
            (Cpu, Cuda) | (Cuda, Cpu) => LinkClass::HostCuda,
            (Cpu, Vulkan) | (Vulkan, Cpu) => LinkClass::HostVulkan,
            (Cuda, Cuda) => LinkClass::CudaPeer,
            // route() never says Direct for these.
            (Cuda, Vulkan) | (Vulkan, Cuda) | (Vulkan, Vulkan) => return None,
        })
    }

    /// Cost of a direct link class.
    pub fn link(&self, class: LinkClass) -> LinkCost {
        self.links.get(&class).copied().unwrap_or(LinkCost {
            bandwidth_gbps: 1.0,
            latency_us: 100.0,
        })
    }

    /// Overrides the cost of one link class.
    pub fn set_link(&mut self, class: LinkClass, cost: LinkCost) {
        self.links.insert(class, cost);
    }

    /// Estimated microseconds to move `bytes` from `src` to `dst`, counting a
    /// staged pair as its two hops.
    pub fn transfer_us(&self, src: Device, dst: Device, bytes: usize) -> f64 {
        match self.route(src, dst) {
            Route::Direct => self
                .link_class(src, dst)
                .map_or(0.0, |c| self.link(c).time_us(bytes)),
            Route::Staged(cpu) => {
                self.transfer_us(src, cpu, bytes) + self.transfer_us(cpu, dst, bytes)
            }
        }
    }

    /// Estimated microseconds for `device` to combine `inputs` tensors of `bytes` each.
    pub fn reduce_us(&self, device: Device, inputs: usize, bytes: usize) -> f64 {
        let gbps = self.reduce_gbps.get(&device.kind).copied().unwrap_or(10.0);
        (inputs as f64 * bytes as f64) / (gbps * 1e3)
    }

    /// Parses a topology file. Lines (with `#` comments):
    /// `peer cuda:0 cuda:1`, `staging cpu:1`, `driver cuda`,
    /// `link host-cuda bandwidth=25 latency=10`, `reduce cpu 20`.
    pub fn parse(text: &str) -> Result<Topology, String> {
        let mut t = Topology::default();
        for (ln, raw) in text.lines().enumerate() {
            let line = raw.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let err = |m: String| format!("topology line {}: {m}\n  | {raw}", ln + 1);
            let words: Vec<&str> = line.split_whitespace().collect();
            let dev = |s: &str| s.parse::<Device>().map_err(|e| err(e.to_string()));
            let kind = |s: &str| {
                DeviceKind::ALL
                    .into_iter()
                    .find(|k| k.as_str() == s)
                    .ok_or_else(|| {
                        err(format!(
                            "unknown device kind `{s}`: expected cpu, cuda or vulkan"
                        ))
                    })
            };
            let num = |s: &str| s.parse::<f64>().ok().filter(|v| *v > 0.0);
            match words.as_slice() {
                ["peer", a, b] => {
                    let (a, b) = (dev(a)?, dev(b)?);
                    if a.kind != DeviceKind::Cuda || b.kind != DeviceKind::Cuda {
                        return Err(err("`peer` takes two cuda devices".into()));
                    }
                    t = t.with_peer(a.index, b.index);
                }
                ["staging", d] => {
                    let d = dev(d)?;
                    if !d.is_cpu() {
                        return Err(err("`staging` takes a cpu device".into()));
                    }
                    t.staging = d;
                }
                ["driver", k] => {
                    t.drivers.insert(kind(k)?);
                }
                ["reduce", k, v] => {
                    let v = num(v).ok_or_else(|| err(format!("expected a positive GB/s figure, found `{v}`")))?;
                    t.reduce_gbps.insert(kind(k)?, v);
                }
                ["link", class, rest @ ..] => {
                    let class = LinkClass::ALL.into_iter().find(|c| c.as_str() == *class).ok_or_else(|| {
                        let names: Vec<&str> = LinkClass::ALL.iter().map(|c| c.as_str()).collect();
                        err(format!("unknown link class `{class}`: expected one of {}", names.join(", ")))
                    })?;
                    let mut cost = t.link(class);
                    for kv in rest {
                        match kv.split_once('=') {
                            Some(("bandwidth", v)) => {
                                cost.bandwidth_gbps = num(v).ok_or_else(|| err(format!("bad bandwidth `{v}`: expected a positive number of GB/s, e.g. bandwidth=25")))?
                            }
                            Some(("latency", v)) => {
                                cost.latency_us = v
                                    .parse::<f64>()
                                    .ok()
                                    .filter(|x| *x >= 0.0)
                                    .ok_or_else(|| err(format!("bad latency `{v}`: expected microseconds, 0 or more, e.g. latency=10")))?
                            }
                            _ => return Err(err(format!("expected bandwidth=GBPS or latency=US, found `{kv}`"))),
                        }
                    }
                    t.set_link(class, cost);
                }
                _ => {
                    return Err(err(
                        "expected `peer A B`, `staging cpu:N`, `driver KIND`, `reduce KIND GBPS` or `link CLASS bandwidth=.. latency=..`"
                            .into(),
                    ))
                }
            }
        }
        Ok(t)
    }

    /// Writes the topology in the file format [`Topology::parse`] reads.
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "staging {}", self.staging);
        for (a, b) in &self.peers {
            if a < b {
                let _ = writeln!(s, "peer cuda:{a} cuda:{b}");
            }
        }
        for k in &self.drivers {
            let _ = writeln!(s, "driver {k}");
        }
        for (k, v) in &self.reduce_gbps {
            let _ = writeln!(s, "reduce {k} {v}");
        }
        for (c, l) in &self.links {
            let _ = writeln!(
                s,
                "link {} bandwidth={} latency={}",
                c.as_str(),
                l.bandwidth_gbps,
                l.latency_us
            );
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn route_table() {
        let t = Topology::default().with_peer(0, 1);
        let (c0, c1, c2) = (Device::cuda(0), Device::cuda(1), Device::cuda(2));
        let (v0, v1, h0, h1) = (
            Device::vulkan(0),
            Device::vulkan(1),
            Device::cpu(0),
            Device::cpu(1),
        );
        let staged = Route::Staged(Device::cpu(0));
        let table = [
            (h0, h1, Route::Direct),
            (h1, c0, Route::Direct),
            (c0, h1, Route::Direct),
            (v0, h0, Route::Direct),
            (h0, v1, Route::Direct),
            (c0, c0, Route::Direct),
            (v1, v1, Route::Direct),
            (c0, c1, Route::Direct),
            (c1, c0, Route::Direct),
            (c0, c2, staged),
            (c0, v0, staged),
            (v0, c0, staged),
            (v0, v1, staged),
        ];
        for (a, b, want) in table {
            assert_eq!(t.route(a, b), want, "{a} -> {b}");
        }
    }

    #[test]
    fn file_round_trip_and_errors() {
        let t = Topology::parse("peer cuda:0 cuda:1\nstaging cpu:1\nlink host-vulkan bandwidth=3 latency=40 # lavapipe\n")
            .unwrap();
        assert!(t.has_peer(1, 0));
        assert_eq!(
            t.route(Device::vulkan(0), Device::cuda(0)),
            Route::Staged(Device::cpu(1))
        );
        assert_eq!(Topology::parse(&t.to_text()).unwrap(), t);
        assert!(Topology::parse("link warp bandwidth=1")
            .unwrap_err()
            .contains("unknown link class"));
        assert!(Topology::parse("peer cpu:0 cuda:1")
            .unwrap_err()
            .contains("two cuda devices"));
        let staged = t.transfer_us(Device::vulkan(0), Device::cuda(0), 1 << 20);
        let direct = t.transfer_us(Device::vulkan(0), Device::cpu(1), 1 << 20);
        assert!(staged > direct);
    }
}
