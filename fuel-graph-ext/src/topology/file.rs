//! The topology file format: [`Topology::parse`] reads one directive per
//! line, refusing bad figures and contradicting lines by line number, and
//! [`Topology::to_text`] writes what `parse` reads back.

use super::*;
use std::fmt::Write;

impl Topology {
    /// Parses a topology file. Lines (with `#` comments):
    /// `peer cuda:0 cuda:1`, `staging cpu:1`, `driver cuda`,
    /// `link host-cuda bandwidth=25 latency=10 deferred=25`,
    /// `view-align vulkan 16`,
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
            let words: Vec<&str> = line.split_whitespace().collect();
            let mut at = Line {
                number: ln + 1,
                raw,
                seen: &mut seen,
            };
            if let Some(why) = bounds::missing_figure(&words) {
                return Err(at.err(why));
            }
            t.apply(&words, &mut at)?;
        }
        Ok(t)
    }

    /// Applies one line's directive.
    fn apply(&mut self, words: &[&str], at: &mut Line<'_>) -> Result<(), String> {
        match words {
            ["peer", a, b] => {
                let (a, b) = (at.dev(a)?, at.dev(b)?);
                if a.kind != DeviceKind::Cuda || b.kind != DeviceKind::Cuda {
                    return Err(at.err("`peer` takes two cuda devices".into()));
                }
                self.peers.insert((a.index, b.index));
                self.peers.insert((b.index, a.index));
            }
            ["staging", d] => {
                let d = at.dev(d)?;
                if !d.is_cpu() {
                    return Err(at.err("`staging` takes a cpu device".into()));
                }
                at.set("the staging device".into(), d.to_string())?;
                self.staging = d;
            }
            ["host-memory", k] => {
                let k = at.host_side_kind(k, "host-memory", "a cpu's memory is host memory already")?;
                self.host_memory.insert(k);
            }
            ["host-kernels", k] => {
                let k = at.host_side_kind(k, "host-kernels", "a cpu's kernels run on the host already")?;
                self.host_kernels.insert(k);
                self.host_memory.insert(k);
            }
            ["view-align", k, n] => self.apply_view_align(k, n, at)?,
            ["cores", n, rest @ ..] => self.apply_cores(n, rest, at)?,
            ["driver", k] => {
                let k = at.kind(k)?;
                if !DRIVER_KINDS.contains(&k) {
                    return Err(at.err(format!(
                        "{k} has no collective driver: `driver` takes cpu (the host driver) or cuda (NCCL)"
                    )));
                }
                self.drivers.insert(k);
            }
            ["reduce", k, v, rest @ ..] => self.apply_reduce(k, v, rest, at)?,
            ["runner", r, rest @ ..] => self.apply_runner(r, rest, at)?,
            ["link", class, rest @ ..] => self.apply_link(class, rest, at)?,
            ["process", rest @ ..] => self.apply_process(rest, at)?,
            _ => {
                return Err(at.err(
                    "expected `peer A B`, `staging cpu:N`, `driver KIND`, `host-memory KIND`, `host-kernels KIND`, `view-align vulkan BYTES`, `cores N [handoff=US]`, `reduce KIND GBPS [fixed=US] [wide=W]`, `link CLASS bandwidth=.. latency=.. [deferred=..]` `runner inline|threaded step=.. run=.. dispatch=..` or `process bandwidth=.. latency=..`"
                        .into(),
                ))
            }
        }
        Ok(())
    }

    /// `view-align vulkan BYTES`: the Vulkan devices' storage-buffer offset
    /// alignment, the one kind whose views have one to give.
    fn apply_view_align(&mut self, k: &str, n: &str, at: &mut Line<'_>) -> Result<(), String> {
        if at.kind(k)? != DeviceKind::Vulkan {
            return Err(at.err(format!(
                "`view-align` takes vulkan: a cpu binds a view at any byte and cuda has none, found `{k}`"
            )));
        }
        let align = n
            .parse::<usize>()
            .map_err(|_| at.err(format!("bad view alignment `{n}`: expected a whole number of bytes, e.g. `view-align vulkan 16`")))?;
        at.set("the Vulkan view alignment".into(), align.to_string())?;
        self.set_vulkan_view_align(align).map_err(|why| at.err(why))
    }

    /// `cores N [handoff=US]`.
    fn apply_cores(&mut self, n: &str, rest: &[&str], at: &mut Line<'_>) -> Result<(), String> {
        let n = n.parse::<u32>().ok().filter(|n| *n > 0).ok_or_else(|| {
            at.err(format!(
                "bad core count `{n}`: expected a whole number above 0, e.g. `cores 8`"
            ))
        })?;
        at.set("the host's cores".into(), n.to_string())?;
        self.cores = Some(n);
        for kv in rest {
            match kv.split_once('=') {
                Some(("handoff", v)) => {
                    let us = at.figure("hand-off CPU time", v, "microseconds", "handoff=20")?;
                    at.set("the hand-off CPU time".into(), us.to_string())?;
                    self.handoff_cpu_us = us;
                }
                _ => {
                    return Err(at.err(format!(
                        "expected handoff=US after the core count, found `{kv}`"
                    )))
                }
            }
        }
        Ok(())
    }

    /// `reduce KIND GBPS [fixed=US] [wide=W]`.
    fn apply_reduce(
        &mut self,
        k: &str,
        v: &str,
        rest: &[&str],
        at: &mut Line<'_>,
    ) -> Result<(), String> {
        let k = at.kind(k)?;
        let mut cost = self.compute(k);
        cost.gbps = at.curve("reduce throughput", v, &format!("`reduce {k} 20`"))?;
        at.set(format!("the {k} reduce throughput"), cost.gbps.to_string())?;
        for kv in rest {
            match kv.split_once('=') {
                Some(("fixed", v)) => {
                    cost.fixed_us = at.figure("fixed cost", v, "microseconds", "fixed=0.5")?;
                    at.set(format!("the {k} fixed cost"), cost.fixed_us.to_string())?;
                }
                Some(("wide", v)) => {
                    cost.wide = at.share("wide-fold cost", v, "wide=0.67")?;
                    at.set(format!("the {k} wide-fold cost"), cost.wide.to_string())?;
                }
                _ => {
                    return Err(at.err(format!(
                        "expected fixed=US or wide=0..1 after the throughput, found `{kv}`"
                    )))
                }
            }
        }
        self.set_compute(k, cost);
        Ok(())
    }

    /// `runner inline|threaded step=.. run=.. dispatch=..`.
    fn apply_runner(&mut self, r: &str, rest: &[&str], at: &mut Line<'_>) -> Result<(), String> {
        let runner = Runner::ALL
            .into_iter()
            .find(|x| x.as_str() == r)
            .ok_or_else(|| at.err(format!("unknown runner `{r}`: expected inline or threaded")))?;
        let mut cost = self.runner(runner);
        for kv in rest {
            match kv.split_once('=') {
                Some(("step", v)) => {
                    cost.step_us = at.figure("step cost", v, "microseconds", "step=15")?;
                    at.set(format!("the {r} step cost"), cost.step_us.to_string())?;
                }
                Some(("run", v)) => {
                    cost.run_us = at.figure("run cost", v, "microseconds", "run=20")?;
                    at.set(format!("the {r} run cost"), cost.run_us.to_string())?;
                }
                Some(("dispatch", v)) => {
                    cost.dispatch_us =
                        at.figure("dispatch cost", v, "microseconds", "dispatch=2")?;
                    at.set(
                        format!("the {r} dispatch cost"),
                        cost.dispatch_us.to_string(),
                    )?;
                }
                _ => {
                    return Err(at.err(format!(
                        "expected step=US, run=US or dispatch=US, found `{kv}`"
                    )))
                }
            }
        }
        self.set_runner(runner, cost);
        Ok(())
    }

    /// `link CLASS bandwidth=.. latency=.. [deferred=..]`.
    fn apply_link(&mut self, class: &str, rest: &[&str], at: &mut Line<'_>) -> Result<(), String> {
        let class = LinkClass::ALL
            .into_iter()
            .find(|c| c.as_str() == class)
            .ok_or_else(|| {
                let names: Vec<&str> = LinkClass::ALL.iter().map(|c| c.as_str()).collect();
                at.err(format!(
                    "unknown link class `{class}`: expected one of {}",
                    names.join(", ")
                ))
            })?;
        let name = class.as_str();
        let mut cost = self.link(class);
        let mut deferred = None;
        for kv in rest {
            match kv.split_once('=') {
                Some(("bandwidth", v)) => {
                    cost.bandwidth = at.curve("bandwidth", v, "bandwidth=25")?;
                    at.set(format!("the {name} bandwidth"), cost.bandwidth.to_string())?;
                }
                Some(("latency", v)) => {
                    cost.latency_us = at.figure("latency", v, "microseconds", "latency=10")?;
                    at.set(format!("the {name} latency"), cost.latency_us.to_string())?;
                }
                Some(("deferred", v)) => {
                    let d = at.figure("deferred bandwidth", v, "GB/s", "deferred=25")?;
                    at.set(format!("the {name} deferred bandwidth"), d.to_string())?;
                    deferred = Some(d);
                }
                _ => {
                    return Err(at.err(format!(
                        "expected bandwidth=GBPS, latency=US or deferred=GBPS, found `{kv}`"
                    )))
                }
            }
        }
        // Deferred copies move at the copy bandwidth unless a line says
        // otherwise.
        cost.deferred_gbps = deferred
            .or_else(|| {
                at.seen
                    .contains_key(&format!("the {name} deferred bandwidth"))
                    .then_some(cost.deferred_gbps)
            })
            .unwrap_or_else(|| cost.bandwidth.points().last().map_or(1.0, |p| p.1));
        self.set_link(class, cost);
        Ok(())
    }

    /// `process bandwidth=.. latency=..`.
    fn apply_process(&mut self, rest: &[&str], at: &mut Line<'_>) -> Result<(), String> {
        let mut cost = self.process;
        for kv in rest {
            match kv.split_once('=') {
                Some(("bandwidth", v)) => {
                    cost.bandwidth = at.curve("bandwidth", v, "bandwidth=12")?;
                    cost.deferred_gbps = cost.bandwidth.points().last().map_or(1.0, |p| p.1);
                    at.set("the process bandwidth".into(), cost.bandwidth.to_string())?;
                }
                Some(("latency", v)) => {
                    cost.latency_us = at.figure("latency", v, "microseconds", "latency=5")?;
                    at.set("the process latency".into(), cost.latency_us.to_string())?;
                }
                _ => {
                    return Err(at.err(format!(
                        "`process` takes bandwidth=GBPS and latency=US (the link between the processes of a world), found `{kv}`"
                    )))
                }
            }
        }
        self.process = cost;
        Ok(())
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
        if self.vulkan_view_align != ASSUMED_VIEW_ALIGN {
            let _ = writeln!(s, "view-align vulkan {}", self.vulkan_view_align);
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
            let _ = write!(s, "reduce {k} {} fixed={}", c.gbps, c.fixed_us);
            if c.wide != super::WIDE_DEFAULT {
                let _ = write!(s, " wide={}", c.wide);
            }
            s.push('\n');
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

/// One line of a topology file being read: its number and text for
/// messages, and what earlier lines set.
struct Line<'a> {
    number: usize,
    raw: &'a str,
    seen: &'a mut BTreeMap<String, (usize, String)>,
}

impl Line<'_> {
    /// An error naming this line.
    fn err(&self, m: String) -> String {
        format!("topology line {}: {m}\n  | {}", self.number, self.raw)
    }

    /// Records that this line sets `what` to `value`: an error if an
    /// earlier line set it to something else.
    fn set(&mut self, what: String, value: String) -> Result<(), String> {
        match self.seen.get(&what) {
            Some((first, old)) if *old != value => Err(self.err(format!(
                "sets {what} to {value}, but line {first} set it to {old}; keep one of the two lines"
            ))),
            Some(_) => Ok(()),
            None => {
                self.seen.insert(what, (self.number, value));
                Ok(())
            }
        }
    }

    fn dev(&self, s: &str) -> Result<Device, String> {
        s.parse::<Device>().map_err(|e| self.err(e.to_string()))
    }

    fn kind(&self, s: &str) -> Result<DeviceKind, String> {
        DeviceKind::ALL
            .into_iter()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| {
                self.err(format!(
                    "unknown device kind `{s}`: expected cpu, cuda or vulkan"
                ))
            })
    }

    /// A kind other than the CPU, for `host-memory` and `host-kernels`.
    fn host_side_kind(&self, s: &str, directive: &str, cpu: &str) -> Result<DeviceKind, String> {
        let k = self.kind(s)?;
        if k == DeviceKind::Cpu {
            return Err(self.err(format!("{cpu}: `{directive}` takes cuda or vulkan")));
        }
        Ok(k)
    }

    fn figure(&self, what: &str, v: &str, unit: &str, example: &str) -> Result<f64, String> {
        let x = v
            .parse::<f64>()
            .ok()
            .filter(|x| x.is_finite() && *x > 0.0)
            .ok_or_else(|| {
                self.err(format!(
                    "bad {what} `{v}`: expected a finite number of {unit} above 0, e.g. {example}"
                ))
            })?;
        match bounds::out_of_range(x, unit) {
            Some(why) => Err(self.err(format!("bad {what} `{v}`: {why}"))),
            None => Ok(x),
        }
    }

    /// A share between 0 and 1, both included.
    fn share(&self, what: &str, v: &str, example: &str) -> Result<f64, String> {
        v.parse::<f64>()
            .ok()
            .filter(|x| (0.0..=1.0).contains(x))
            .ok_or_else(|| {
                self.err(format!(
                    "bad {what} `{v}`: expected a number from 0 to 1, e.g. {example}"
                ))
            })
    }

    fn curve(&self, what: &str, v: &str, example: &str) -> Result<Curve, String> {
        let c = Curve::parse(v).ok_or_else(|| {
            self.err(format!(
                "bad {what} `{v}`: expected a finite number of GB/s above 0, e.g. {example}, or one per size, e.g. 64K:30,4M:12"
            ))
        })?;
        match bounds::curve_out_of_range(&c) {
            Some(why) => Err(self.err(format!("bad {what} `{v}`: {why}"))),
            None => Ok(c),
        }
    }
}
