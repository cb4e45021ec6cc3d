//! The topology file format: [`Topology::parse`] reads one directive per
//! line, refusing bad figures and contradicting lines by line number, and
//! [`Topology::to_text`] writes what `parse` reads back.

use super::*;
use std::fmt::Write;

impl Topology {
    /// Parses a topology file. Lines (with `#` comments):
    /// `peer cuda:0 cuda:1`, `staging cpu:1`, `driver cuda`,
    /// `link host-cuda bandwidth=25 latency=10 deferred=25`,
    /// `reduce cpu 20 fixed=0.1`, `runner threaded step=15 run=20`,
    /// `process bandwidth=12 latency=5` (between the processes of a world).
    ///
    /// Every figure is a finite number above zero. A line may repeat what
    /// an earlier line set, but not set it to something else: that is an
    /// error naming both lines, as are unknown directives, device kinds and
    /// link classes, and a `driver` for a kind that has none.
    ///
    /// From a file (`fuel-opt --topology FILE` reads one the same way):
    ///
    /// ```
    /// use fuel_graph_ext::{Device, Topology};
    ///
    /// let path = std::env::temp_dir().join(format!("fuel-doc-{}.topo", std::process::id()));
    /// std::fs::write(&path, "# two CUDA GPUs with a direct link\npeer cuda:0 cuda:1\nstaging cpu:1\n")?;
    /// let topology = Topology::parse(&std::fs::read_to_string(&path)?)?;
    /// std::fs::remove_file(&path)?;
    /// assert_eq!(topology.staging, Device::cpu(1));
    /// assert!(Topology::parse("peer cuda:0").is_err()); // the error names the line
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn parse(text: &str) -> Result<Topology, String> {
        let mut t = Topology::default().with_source(Source::File(None));
        // What each setting was set to, and on which line.
        let mut seen: BTreeMap<String, (usize, String)> = BTreeMap::new();
        for (ln, raw) in text.lines().enumerate() {
            let line = raw.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let err = |m: String| format!("topology line {}: {m}\n  | {raw}", ln + 1);
            let mut set = |what: String, value: String| -> Result<(), String> {
                match seen.get(&what) {
                    Some((first, old)) if *old != value => Err(err(format!(
                        "sets {what} to {value}, but line {first} set it to {old}; keep one of the two lines"
                    ))),
                    Some(_) => Ok(()),
                    None => {
                        seen.insert(what, (ln + 1, value));
                        Ok(())
                    }
                }
            };
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
            let figure = |what: &str, v: &str, unit: &str, example: &str| {
                let x = v
                    .parse::<f64>()
                    .ok()
                    .filter(|x| x.is_finite() && *x > 0.0)
                    .ok_or_else(|| {
                        err(format!(
                            "bad {what} `{v}`: expected a finite number of {unit} above 0, e.g. {example}"
                        ))
                    })?;
                match bounds::out_of_range(x, unit) {
                    Some(why) => Err(err(format!("bad {what} `{v}`: {why}"))),
                    None => Ok(x),
                }
            };
            let curve = |what: &str, v: &str, example: &str| {
                let c = Curve::parse(v).ok_or_else(|| {
                    err(format!(
                        "bad {what} `{v}`: expected a finite number of GB/s above 0, e.g. {example}, or one per size, e.g. 64K:30,4M:12"
                    ))
                })?;
                match bounds::curve_out_of_range(&c) {
                    Some(why) => Err(err(format!("bad {what} `{v}`: {why}"))),
                    None => Ok(c),
                }
            };
            if let Some(why) = bounds::missing_figure(&words) {
                return Err(err(why));
            }
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
                    set("the staging device".into(), d.to_string())?;
                    t.staging = d;
                }
                ["host-memory", k] => {
                    let k = kind(k)?;
                    if k == DeviceKind::Cpu {
                        return Err(err(
                            "a cpu's memory is host memory already: `host-memory` takes cuda or vulkan"
                                .into(),
                        ));
                    }
                    t.host_memory.insert(k);
                }
                ["host-kernels", k] => {
                    let k = kind(k)?;
                    if k == DeviceKind::Cpu {
                        return Err(err(
                            "a cpu's kernels run on the host already: `host-kernels` takes cuda or vulkan"
                                .into(),
                        ));
                    }
                    t.host_kernels.insert(k);
                    t.host_memory.insert(k);
                }
                ["cores", n, rest @ ..] => {
                    let n = n.parse::<u32>().ok().filter(|n| *n > 0).ok_or_else(|| {
                        err(format!(
                            "bad core count `{n}`: expected a whole number above 0, e.g. `cores 8`"
                        ))
                    })?;
                    set("the host's cores".into(), n.to_string())?;
                    t.cores = Some(n);
                    for kv in rest {
                        match kv.split_once('=') {
                            Some(("handoff", v)) => {
                                let us = figure("hand-off CPU time", v, "microseconds", "handoff=20")?;
                                set("the hand-off CPU time".into(), us.to_string())?;
                                t.handoff_cpu_us = us;
                            }
                            _ => {
                                return Err(err(format!(
                                    "expected handoff=US after the core count, found `{kv}`"
                                )))
                            }
                        }
                    }
                }
                ["driver", k] => {
                    let k = kind(k)?;
                    if !DRIVER_KINDS.contains(&k) {
                        return Err(err(format!(
                            "{k} has no collective driver: `driver` takes cpu (the host driver) or cuda (NCCL)"
                        )));
                    }
                    t.drivers.insert(k);
                }
                ["reduce", k, v, rest @ ..] => {
                    let k = kind(k)?;
                    let mut cost = t.compute(k);
                    cost.gbps = curve("reduce throughput", v, &format!("`reduce {k} 20`"))?;
                    set(format!("the {k} reduce throughput"), cost.gbps.to_string())?;
                    for kv in rest {
                        match kv.split_once('=') {
                            Some(("fixed", v)) => {
                                cost.fixed_us =
                                    figure("fixed cost", v, "microseconds", "fixed=0.5")?;
                                set(format!("the {k} fixed cost"), cost.fixed_us.to_string())?;
                            }
                            _ => {
                                return Err(err(format!(
                                    "expected fixed=US after the throughput, found `{kv}`"
                                )))
                            }
                        }
                    }
                    t.set_compute(k, cost);
                }
                ["runner", r, rest @ ..] => {
                    let runner = Runner::ALL
                        .into_iter()
                        .find(|x| x.as_str() == *r)
                        .ok_or_else(|| {
                            err(format!("unknown runner `{r}`: expected inline or threaded"))
                        })?;
                    let mut cost = t.runner(runner);
                    for kv in rest {
                        match kv.split_once('=') {
                            Some(("step", v)) => {
                                cost.step_us = figure("step cost", v, "microseconds", "step=15")?;
                                set(format!("the {r} step cost"), cost.step_us.to_string())?;
                            }
                            Some(("run", v)) => {
                                cost.run_us = figure("run cost", v, "microseconds", "run=20")?;
                                set(format!("the {r} run cost"), cost.run_us.to_string())?;
                            }
                            Some(("dispatch", v)) => {
                                cost.dispatch_us =
                                    figure("dispatch cost", v, "microseconds", "dispatch=2")?;
                                set(format!("the {r} dispatch cost"), cost.dispatch_us.to_string())?;
                            }
                            _ => {
                                return Err(err(format!(
                                    "expected step=US, run=US or dispatch=US, found `{kv}`"
                                )))
                            }
                        }
                    }
                    t.set_runner(runner, cost);
                }
                ["link", class, rest @ ..] => {
                    let class = LinkClass::ALL.into_iter().find(|c| c.as_str() == *class).ok_or_else(|| {
                        let names: Vec<&str> = LinkClass::ALL.iter().map(|c| c.as_str()).collect();
                        err(format!("unknown link class `{class}`: expected one of {}", names.join(", ")))
                    })?;
                    let name = class.as_str();
                    let mut cost = t.link(class);
                    let mut deferred = None;
                    for kv in rest {
                        match kv.split_once('=') {
                            Some(("bandwidth", v)) => {
                                cost.bandwidth = curve("bandwidth", v, "bandwidth=25")?;
                                set(format!("the {name} bandwidth"), cost.bandwidth.to_string())?;
                            }
                            Some(("latency", v)) => {
                                cost.latency_us = figure("latency", v, "microseconds", "latency=10")?;
                                set(format!("the {name} latency"), cost.latency_us.to_string())?;
                            }
                            Some(("deferred", v)) => {
                                let d = figure("deferred bandwidth", v, "GB/s", "deferred=25")?;
                                set(format!("the {name} deferred bandwidth"), d.to_string())?;
                                deferred = Some(d);
                            }
                            _ => return Err(err(format!("expected bandwidth=GBPS, latency=US or deferred=GBPS, found `{kv}`"))),
                        }
                    }
                    // Deferred copies move at the copy bandwidth unless a
                    // line says otherwise.
                    cost.deferred_gbps = deferred
                        .or_else(|| {
                            seen.contains_key(&format!("the {name} deferred bandwidth"))
                                .then_some(cost.deferred_gbps)
                        })
                        .unwrap_or_else(|| cost.bandwidth.points().last().map_or(1.0, |p| p.1));
                    t.set_link(class, cost);
                }
                ["process", rest @ ..] => {
                    let mut cost = t.process;
                    for kv in rest {
                        match kv.split_once('=') {
                            Some(("bandwidth", v)) => {
                                cost.bandwidth = curve("bandwidth", v, "bandwidth=12")?;
                                cost.deferred_gbps =
                                    cost.bandwidth.points().last().map_or(1.0, |p| p.1);
                                set("the process bandwidth".into(), cost.bandwidth.to_string())?;
                            }
                            Some(("latency", v)) => {
                                cost.latency_us = figure("latency", v, "microseconds", "latency=5")?;
                                set("the process latency".into(), cost.latency_us.to_string())?;
                            }
                            _ => {
                                return Err(err(format!(
                                    "`process` takes bandwidth=GBPS and latency=US (the link between the processes of a world), found `{kv}`"
                                )))
                            }
                        }
                    }
                    t.process = cost;
                }
                _ => {
                    return Err(err(
                        "expected `peer A B`, `staging cpu:N`, `driver KIND`, `host-memory KIND`, `host-kernels KIND`, `cores N [handoff=US]`, `reduce KIND GBPS [fixed=US]`, `link CLASS bandwidth=.. latency=.. [deferred=..]` `runner inline|threaded step=.. run=.. dispatch=..` or `process bandwidth=.. latency=..`"
                            .into(),
                    ))
                }
            }
        }
        Ok(t)
    }

    /// Writes the topology in the file format [`Topology::parse`] reads
    /// (the source is not written: the reader says where the file came
    /// from).
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
        for k in &self.host_memory {
            if !self.host_kernels.contains(k) {
                let _ = writeln!(s, "host-memory {k}");
            }
        }
        for k in &self.host_kernels {
            let _ = writeln!(s, "host-kernels {k}");
        }
        if let Some(n) = self.cores {
            if self.handoff_cpu_us > 0.0 {
                let _ = writeln!(s, "cores {n} handoff={}", self.handoff_cpu_us);
            } else {
                let _ = writeln!(s, "cores {n}");
            }
        }
        for (r, c) in &self.runners {
            let _ = writeln!(
                s,
                "runner {} step={} run={} dispatch={}",
                r.as_str(),
                c.step_us,
                c.run_us,
                c.dispatch_us
            );
        }
        for (k, c) in &self.compute {
            let _ = writeln!(s, "reduce {k} {} fixed={}", c.gbps, c.fixed_us);
        }
        let default = Topology::default().process;
        if self.process != default {
            let _ = writeln!(
                s,
                "process bandwidth={} latency={}",
                self.process.bandwidth, self.process.latency_us
            );
        }
        for (c, l) in &self.links {
            let _ = writeln!(
                s,
                "link {} bandwidth={} latency={} deferred={}",
                c.as_str(),
                l.bandwidth,
                l.latency_us,
                l.deferred_gbps
            );
        }
        s
    }
}
