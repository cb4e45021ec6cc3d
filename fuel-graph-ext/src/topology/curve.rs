//! [`Curve`]: a throughput that depends on the bytes a step handles, and
//! how a topology file writes one (`25`, `64K:30,1M:15,4M:11`).

/// A throughput that depends on how many bytes a step handles: GB/s at a
/// few sizes, linear in `log2(bytes)` between them and flat beyond the ends.
/// Small transfers run from caches that large ones overflow, so one figure
/// cannot be right at 64 KiB and at 4 MiB; calibration measures several.
/// Written `25` (the same at every size) or `64K:30,1M:15,4M:11`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Curve {
    points: [(usize, f64); Curve::MAX],
    len: usize,
}

impl Curve {
    /// The most sizes one curve holds.
    pub const MAX: usize = 6;

    /// `gbps` at every size.
    pub const fn flat(gbps: f64) -> Curve {
        Curve {
            points: [(0, gbps); Curve::MAX],
            len: 1,
        }
    }

    /// GB/s at each size; `None` unless there are 1 to [`Curve::MAX`]
    /// points with increasing sizes.
    pub fn new(points: &[(usize, f64)]) -> Option<Curve> {
        if points.is_empty()
            || points.len() > Curve::MAX
            || points.windows(2).any(|w| w[0].0 >= w[1].0)
        {
            return None;
        }
        let mut c = Curve::flat(points[0].1);
        c.points[..points.len()].copy_from_slice(points);
        c.len = points.len();
        Some(c)
    }

    /// The points, by increasing size.
    pub fn points(&self) -> &[(usize, f64)] {
        &self.points[..self.len]
    }

    /// True when the figure is the same at every size.
    pub fn is_flat(&self) -> bool {
        self.len == 1
    }

    /// GB/s for a step of `bytes`.
    pub fn at(&self, bytes: usize) -> f64 {
        let pts = self.points();
        let (first, last) = (pts[0], pts[self.len - 1]);
        if self.len == 1 || bytes <= first.0 {
            return first.1;
        }
        if bytes >= last.0 {
            return last.1;
        }
        let x = (bytes as f64).log2();
        for w in pts.windows(2) {
            let ((a, ga), (b, gb)) = (w[0], w[1]);
            if bytes <= b {
                let (xa, xb) = ((a.max(1) as f64).log2(), (b as f64).log2());
                let f = if xb > xa { (x - xa) / (xb - xa) } else { 1.0 };
                return ga + f * (gb - ga);
            }
        }
        last.1
    }

    /// Microseconds to move (or read) `bytes` at this throughput.
    pub fn us(&self, bytes: usize) -> f64 {
        self.us_at(bytes, bytes)
    }

    /// Microseconds to move `bytes` as part of work whose data is `working`
    /// bytes: the throughput at `working` (a chunk of a large tensor
    /// streams from memory as the tensor does, not from cache).
    pub fn us_at(&self, bytes: usize, working: usize) -> f64 {
        bytes as f64 / (self.at(working.max(bytes)) * 1e3)
    }

    /// Every point's figure replaced by `f(size, gbps)`.
    pub fn map(&self, f: impl Fn(usize, f64) -> f64) -> Curve {
        let mut c = *self;
        for p in &mut c.points[..c.len] {
            p.1 = f(p.0, p.1);
        }
        c
    }

    /// Parses `25` or `64K:30,1M:15` (sizes as in `fuel-opt bench --sizes`:
    /// bytes, or K, M, G for powers of 1024). Every figure must be finite
    /// and above zero.
    pub fn parse(s: &str) -> Option<Curve> {
        let figure = |v: &str| v.parse::<f64>().ok().filter(|x| x.is_finite() && *x > 0.0);
        if !s.contains(':') {
            return figure(s).map(Curve::flat);
        }
        let mut pts = Vec::new();
        for part in s.split(',') {
            let (size, g) = part.split_once(':')?;
            pts.push((parse_bytes(size)?, figure(g)?));
        }
        Curve::new(&pts)
    }
}

/// `4K`, `1M`, `2G` (powers of 1024) or a plain number of bytes.
fn parse_bytes(s: &str) -> Option<usize> {
    let (num, mult) = match s.chars().last()? {
        'K' | 'k' => (&s[..s.len() - 1], 1usize << 10),
        'M' | 'm' => (&s[..s.len() - 1], 1 << 20),
        'G' | 'g' => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    num.parse::<usize>().ok()?.checked_mul(mult)
}

/// A size as `parse_bytes` reads it back: `64K`, `1M`, `1536`.
fn format_bytes(b: usize) -> String {
    for (unit, shift) in [("G", 30), ("M", 20), ("K", 10)] {
        if b >= 1 << shift && b.is_multiple_of(1 << shift) {
            return format!("{}{unit}", b >> shift);
        }
    }
    b.to_string()
}

impl std::fmt::Display for Curve {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.is_flat() {
            return write!(f, "{}", self.points[0].1);
        }
        for (i, (size, g)) in self.points().iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{}:{g}", format_bytes(*size))?;
        }
        Ok(())
    }
}
