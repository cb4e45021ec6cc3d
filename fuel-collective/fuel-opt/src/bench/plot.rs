//! `fuel-opt bench --plot FILE.svg`: the bench drawn as nccl-tests users
//! read it.
//!
//! Bus bandwidth against bytes per rank, both axes logarithmic, one line
//! per algorithm, and the host bound (the same run's host n-ary add and
//! memcpys, converted to bus bandwidth with the same `2(n-1)/n` factor)
//! dashed. Drawn with `plotters`' SVG backend, which writes text as SVG
//! `<text>` and needs no system fonts. Pure drawing: the rows come from
//! `bench::measure`.

use crate::bench::Row;
use crate::Failure;
use plotters::prelude::*;
use std::path::Path;

/// The picture's size in pixels.
const SIZE: (u32, u32) = (900, 560);

/// Draws `rows` (every algorithm's, in any order) for a group of `n`
/// devices into the SVG file `path`; `title` heads it. Returns false,
/// drawing nothing, when no row has a bandwidth above zero (a log axis
/// has no place for 0).
pub fn draw(path: &Path, rows: &[Row], n: usize, title: &str) -> Result<bool, Failure> {
    let bus = |algbw: f64| algbw * 2.0 * (n.saturating_sub(1)) as f64 / n.max(1) as f64;
    let positive: Vec<&Row> = rows
        .iter()
        .filter(|r| r.busbw > 0.0 && r.size > 0)
        .collect();
    if positive.is_empty() {
        return Err(Failure::input(
            "--plot: no row has a bandwidth above zero to draw",
        ));
    }
    let xs = positive.iter().map(|r| r.size as f64);
    let (x_lo, x_hi) = xs.fold((f64::MAX, 0.0f64), |(lo, hi), x| (lo.min(x), hi.max(x)));
    let ys = positive
        .iter()
        .flat_map(|r| [r.busbw, bus(r.bound)])
        .filter(|y| *y > 0.0);
    let (y_lo, y_hi) = ys.fold((f64::MAX, 0.0f64), |(lo, hi), y| (lo.min(y), hi.max(y)));
    let err = |e: &dyn std::fmt::Display| {
        Failure::input(format!(
            "--plot: cannot write {}: {e}; give a path in a directory that exists and can be written",
            path.display()
        ))
    };
    // Drawn into memory and written here: plotters' own file writer drops
    // its write errors (a full disk gave a plot reported as written).
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(|e| err(&e))?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(44)
            .y_label_area_size(64)
            .build_cartesian_2d(
                (x_lo * 0.8..x_hi * 1.25).log_scale(),
                (y_lo * 0.5..y_hi * 2.0).log_scale(),
            )
            .map_err(|e| err(&e))?;
        chart
            .configure_mesh()
            .x_desc("bytes per rank")
            .y_desc("bus bandwidth (GB/s)")
            .x_label_formatter(&|x| crate::sizes::format_size(*x as usize))
            .y_label_formatter(&|y| format!("{y:.3}"))
            .draw()
            .map_err(|e| err(&e))?;
        let mut algorithms: Vec<&str> = positive.iter().map(|r| r.algorithm.as_str()).collect();
        algorithms.sort_unstable();
        algorithms.dedup();
        for (i, alg) in algorithms.iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            let mut points: Vec<(f64, f64)> = positive
                .iter()
                .filter(|r| r.algorithm == *alg)
                .map(|r| (r.size as f64, r.busbw))
                .collect();
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
            chart
                .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))
                .map_err(|e| err(&e))?
                .label(*alg)
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
                });
            chart
                .draw_series(
                    points
                        .into_iter()
                        .map(|p| Circle::new(p, 3, color.filled())),
                )
                .map_err(|e| err(&e))?;
        }
        // The bound: the best of the rows at each size (they measure the same
        // host work), dashed.
        let mut bound: Vec<(f64, f64)> = Vec::new();
        for r in &positive {
            let p = (r.size as f64, bus(r.bound));
            match bound.iter_mut().find(|q| q.0 == p.0) {
                Some(q) => q.1 = q.1.max(p.1),
                None => bound.push(p),
            }
        }
        bound.retain(|p| p.1 > 0.0);
        bound.sort_by(|a, b| a.0.total_cmp(&b.0));
        let grey = RGBColor(90, 90, 90);
        chart
            .draw_series(DashedLineSeries::new(bound, 6, 4, grey.stroke_width(2)))
            .map_err(|e| err(&e))?
            .label("host bound")
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], grey.stroke_width(2))
            });
        chart
            .configure_series_labels()
            .border_style(BLACK)
            .background_style(WHITE.mix(0.9))
            .position(SeriesLabelPosition::LowerRight)
            .draw()
            .map_err(|e| err(&e))?;
        root.present().map_err(|e| err(&e))?;
    }
    std::fs::write(path, svg).map_err(|e| err(&e))?;
    Ok(true)
}
