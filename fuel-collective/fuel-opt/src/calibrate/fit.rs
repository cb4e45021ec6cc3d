//! Fitting the cost figures to the measured times: Newton steps on the
//! model's own estimate of each calibration graph ([`solve1`],
//! [`solve2`]), one figure or pair of figures at a time, repeated until
//! they settle ([`fit`]).

use super::{Measured, Timed, SIZES};
use fuel_graph_ext::topology::{Curve, LinkClass, Runner};
use fuel_graph_ext::{DeviceKind, Topology};

/// Keeps a fitted figure finite and above zero: a throughput too fast to
/// see (an infinite fit) becomes 10^7, a cost too small to see 0.01.
fn clamp(x: f64) -> f64 {
    if x.is_nan() {
        0.01
    } else {
        x.clamp(0.01, 1e7)
    }
}

/// Solves `f(x) = m` by Newton steps from `x0` with a finite-difference
/// slope. The model is piecewise affine in each figure (affine between the
/// points where another resource becomes the busiest), so a step or two
/// lands on the answer. Gives `x0` back where `f` does not depend on `x`.
fn solve1(f: impl Fn(f64) -> f64, x0: f64, m: f64) -> f64 {
    let mut x = x0;
    for _ in 0..8 {
        let h = 1e-3 * x.abs().max(1e-6);
        let f0 = f(x);
        let d = (f(x + h) - f0) / h;
        if !d.is_finite() || d.abs() < 1e-12 {
            break;
        }
        let next = x - (f0 - m) / d;
        if (next - x).abs() <= 1e-12 * x.abs().max(1e-9) {
            x = next;
            break;
        }
        x = next;
    }
    x
}

/// Solves `f(0, x, y) = m[0]` and `f(1, x, y) = m[1]` by Newton steps from
/// `(x0, y0)`, as [`solve1`] does.
fn solve2(f: impl Fn(usize, f64, f64) -> f64, x0: (f64, f64), m: [f64; 2]) -> (f64, f64) {
    let (mut x, mut y) = x0;
    for _ in 0..8 {
        let (hx, hy) = (1e-3 * x.abs().max(1e-6), 1e-3 * y.abs().max(1e-9));
        let f0 = [f(0, x, y) - m[0], f(1, x, y) - m[1]];
        let j = [
            [
                (f(0, x + hx, y) - m[0] - f0[0]) / hx,
                (f(0, x, y + hy) - m[0] - f0[0]) / hy,
            ],
            [
                (f(1, x + hx, y) - m[1] - f0[1]) / hx,
                (f(1, x, y + hy) - m[1] - f0[1]) / hy,
            ],
        ];
        let det = j[0][0] * j[1][1] - j[0][1] * j[1][0];
        if !det.is_finite() || det.abs() < 1e-18 {
            break;
        }
        let dx = (f0[0] * j[1][1] - j[0][1] * f0[1]) / det;
        let dy = (j[0][0] * f0[1] - f0[0] * j[1][0]) / det;
        x -= dx;
        y -= dy;
        if dx.abs() <= 1e-12 * x.abs().max(1e-9) && dy.abs() <= 1e-12 * y.abs().max(1e-12) {
            break;
        }
    }
    (x, y)
}

/// `1 / (gbps * 1e3)`: microseconds per byte, which the model is affine in.
fn per_byte(gbps: f64) -> f64 {
    1.0 / (gbps * 1e3)
}

/// The inverse of [`per_byte`]; a figure of zero or less is left to
/// [`clamp`].
fn gbps(per_byte: f64) -> f64 {
    if per_byte > 0.0 {
        1.0 / (per_byte * 1e3)
    } else {
        f64::INFINITY
    }
}

/// `c` with a point at each timed size from `first` on (1: above the
/// smallest, whose figure then holds for every smaller step too), starting
/// from `c`'s own figures there.
fn sized(c: Curve, first: usize) -> Curve {
    let pts: Vec<(usize, f64)> = SIZES[first..].iter().map(|&b| (b, c.at(b))).collect();
    Curve::new(&pts).unwrap_or(c)
}

/// `c` with point `k`'s figure set to the throughput whose microseconds
/// per byte are `inv`.
fn with_point(c: Curve, k: usize, inv: f64) -> Curve {
    let at = c.points().get(k).map(|p| p.0);
    c.map(|size, g| if Some(size) == at { gbps(inv) } else { g })
}

/// Sets a fixed part (a latency or a fixed cost) and a curve of `t`.
type SetFigures<'a> = dyn Fn(&mut Topology, Option<f64>, Curve) + 'a;

/// Fits what `set` sets to `g`, one graph timed at growing sizes: the
/// fixed part from the smallest (when `fixed` gives its value now), then
/// the curve's point at each larger size (in microseconds per byte, which
/// the model is affine in). With `small_point` (and no fixed part to fit),
/// the smallest size is a point of the curve too: what a small step costs
/// beyond the fixed part set elsewhere (per operand, for a computation) is
/// its figure there.
fn fit_sweep(
    t: &mut Topology,
    g: &[Timed],
    (fixed, small_point): (Option<f64>, bool),
    curve: Curve,
    set: &SetFigures,
) {
    let first = usize::from(fixed.is_some() || !small_point);
    let mut c = sized(curve, first);
    set(t, None, c);
    if let Some(now) = fixed {
        let x = solve1(
            |x| {
                let mut u = t.clone();
                set(&mut u, Some(x), c);
                g[0].model(&u)
            },
            now,
            g[0].us,
        );
        set(t, Some(clamp(x)), c);
    }
    for (k, timed) in g.iter().enumerate().skip(first) {
        let inv = solve1(
            |y| {
                let mut u = t.clone();
                set(&mut u, None, with_point(c, k - first, y));
                timed.model(&u)
            },
            per_byte(c.points()[k - first].1),
            timed.us,
        );
        c = with_point(c, k - first, per_byte(clamp(gbps(inv))));
        set(t, None, c);
    }
}

/// The inline runner's step, fixed CPU and run costs.
fn fit_inline(m: &Measured, t: &mut Topology) {
    // Inline runner: the step cost from the shared copy chain's slope
    // (its runs differ only in shared copies), the CPU's fixed cost per
    // computation from the div chain's slope, and the run cost from one
    // div (which copies nothing: a copy's latency would look like it).
    let inline = |u: &mut Topology, step: Option<f64>, run: Option<f64>| {
        let mut c = u.runner(Runner::Inline);
        c.step_us = step.unwrap_or(c.step_us);
        c.run_us = run.unwrap_or(c.run_us);
        u.set_runner(Runner::Inline, c);
    };
    let step = solve1(
        |x| {
            let mut u = t.clone();
            inline(&mut u, Some(x), None);
            m.copies[1].model(&u) - m.copies[0].model(&u)
        },
        t.runner(Runner::Inline).step_us,
        m.copies[1].us - m.copies[0].us,
    );
    inline(t, Some(clamp(step)), None);
    let fixed = solve1(
        |x| {
            let mut u = t.clone();
            let mut c = u.compute(DeviceKind::Cpu);
            c.fixed_us = x;
            u.set_compute(DeviceKind::Cpu, c);
            m.divs[1].model(&u) - m.divs[0].model(&u)
        },
        t.compute(DeviceKind::Cpu).fixed_us,
        m.divs[1].us - m.divs[0].us,
    );
    let mut c = t.compute(DeviceKind::Cpu);
    c.fixed_us = clamp(fixed);
    t.set_compute(DeviceKind::Cpu, c);
    let run = solve1(
        |y| {
            let mut u = t.clone();
            inline(&mut u, None, Some(y));
            m.divs[0].model(&u)
        },
        t.runner(Runner::Inline).run_us,
        m.divs[0].us,
    );
    inline(t, None, Some(clamp(run)));
}

/// The threaded runner's step, run and dispatch costs.
fn fit_threaded(m: &Measured, t: &mut Topology) {
    // Threaded runner: step and run cost from its div chain, then the
    // dispatcher's cost per step from divs side by side.
    if let Some(d) = &m.threaded_divs {
        let now = t.runner(Runner::Threaded);
        let (step, run) = solve2(
            |i, x, y| {
                let mut u = t.clone();
                let mut th = u.runner(Runner::Threaded);
                th.step_us = x;
                th.run_us = y;
                u.set_runner(Runner::Threaded, th);
                d[i].model(&u)
            },
            (now.step_us, now.run_us),
            [d[0].us, d[1].us],
        );
        let mut th = t.runner(Runner::Threaded);
        th.step_us = clamp(step);
        th.run_us = clamp(run);
        t.set_runner(Runner::Threaded, th);
        // The longer chain's extra steps are hand-offs around tiny
        // divs: the share of their wall time the process spent on a
        // core is the share of a hand-off that is host work.
        let (wall, cpu) = (d[1].us - d[0].us, d[1].cpu_us - d[0].cpu_us);
        if wall > 0.0 && cpu > 0.0 {
            t.set_handoff_cpu_us(th.step_us * (cpu / wall).min(1.0));
        }
    }
    if let Some(f) = &m.fanout {
        let dispatch = solve1(
            |x| {
                let mut u = t.clone();
                let mut th = u.runner(Runner::Threaded);
                th.dispatch_us = x;
                u.set_runner(Runner::Threaded, th);
                f.model(&u)
            },
            t.runner(Runner::Threaded).dispatch_us,
            f.us,
        );
        let mut th = t.runner(Runner::Threaded);
        th.dispatch_us = clamp(dispatch);
        t.set_runner(Runner::Threaded, th);
    }
}

/// Each link's latency and bandwidth curve.
fn fit_links(m: &Measured, t: &mut Topology) {
    // Links: the latency from the smallest copy, then the bandwidth at
    // each larger size (microseconds per byte, which the model is
    // affine in).
    //
    // A link whose two ends both live in host memory (the host and
    // lavapipe) is a memcpy: its latency is the host-to-host copy's,
    // measured inline. Its own smallest copy runs on the threaded
    // runner (a 4 KiB copy to a GPU is an upload on its worker), whose
    // step cost swings by more than such a latency between passes, so
    // fitted from it the latency came out anywhere from 0 to 7 us and
    // dragged the 64 KiB point to infinity with it.
    let host_latency = t.link(LinkClass::HostHost).latency_us;
    for (class, a, b, g) in &m.links {
        let now = t.link(*class);
        let memcpy =
            *class != LinkClass::HostHost && t.in_host_memory(a.kind) && t.in_host_memory(b.kind);
        if memcpy {
            let mut l = now;
            l.latency_us = host_latency;
            t.set_link(*class, l);
        }
        fit_sweep(
            t,
            g,
            ((!memcpy).then_some(now.latency_us), false),
            now.bandwidth,
            &|u, lat, c| {
                let mut l = u.link(*class);
                l.latency_us = lat.unwrap_or(l.latency_us);
                l.bandwidth = c;
                u.set_link(*class, l);
            },
        );
    }
}

/// Each device kind's fixed cost and throughput curve.
fn fit_compute(m: &Measured, t: &mut Topology) {
    // Computation: the fixed cost from the smallest add, then the
    // throughput at each larger size. A CPU's fixed cost comes from the
    // div chain (above), and its smallest add is a point of the curve:
    // at 4 KiB an operand costs more than the 64 KiB throughput says
    // (an n-ary fold's runs grew by about 0.2 us per 4 KiB operand).
    for (kind, g) in &m.adds {
        let now = t.compute(*kind);
        let cpu = *kind == DeviceKind::Cpu;
        let fixed = (!cpu).then_some(now.fixed_us);
        fit_sweep(t, g, (fixed, cpu), now.gbps, &|u, fixed, c| {
            let mut cost = u.compute(*kind);
            cost.fixed_us = fixed.unwrap_or(cost.fixed_us);
            cost.gbps = c;
            u.set_compute(*kind, cost);
        });
    }
}

/// The figure that `set` writes into a copy of `t` at which the model's
/// estimate of `g` is its measured time, solved from `now` ([`solve1`]).
fn fit_one(t: &Topology, g: &Timed, now: f64, set: impl Fn(&mut Topology, f64)) -> f64 {
    solve1(
        |x| {
            let mut u = t.clone();
            set(&mut u, x);
            g.model(&u)
        },
        now,
        g.us,
    )
}

/// Each device kind's cost per fold input past the second
/// ([`fuel_graph_ext::topology::ComputeCost::wide`]), from its four-input
/// add with the fixed cost and throughput fitted above; kept from 0 (the
/// extra inputs are free) to 1 (each costs what one of two does).
fn fit_wide(m: &Measured, t: &mut Topology) {
    for (kind, g) in &m.wide_adds {
        let set = |u: &mut Topology, w: f64| {
            let mut c = u.compute(*kind);
            c.wide = w;
            u.set_compute(*kind, c);
        };
        let now = t.compute(*kind).wide;
        let w = fit_one(t, g, now, set);
        set(t, if w.is_nan() { now } else { w.clamp(0.0, 1.0) });
    }
}

/// The deferred copies' bandwidth per link.
fn fit_deferred(m: &Measured, t: &mut Topology) {
    for (class, g) in &m.deferred {
        let set = |u: &mut Topology, rate: f64| {
            let mut l = u.link(*class);
            l.deferred_gbps = rate;
            u.set_link(*class, l);
        };
        // Solved in microseconds per byte, which the model is affine in.
        let now = per_byte(t.link(*class).deferred_gbps);
        let inv = fit_one(t, g, now, |u, y| set(u, gbps(y)));
        set(t, clamp(gbps(inv)));
    }
}

/// Fits every figure to the measurements, eight times over.
pub(super) fn fit(m: &Measured, base: &Topology) -> Topology {
    let mut t = base.clone();
    for _ in 0..8 {
        fit_inline(m, &mut t);
        fit_threaded(m, &mut t);
        fit_links(m, &mut t);
        fit_compute(m, &mut t);
        fit_wide(m, &mut t);
        fit_deferred(m, &mut t);
    }
    t
}
