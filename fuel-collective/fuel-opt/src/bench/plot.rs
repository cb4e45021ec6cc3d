//! `fuel-opt bench --plot FILE.svg`: the bench drawn as nccl-tests users
//! read it.
//!
//! Bus bandwidth against bytes per rank, both axes logarithmic, one line
//! per algorithm, and the host bound (the same run's host n-ary add and
//! memcpys, converted to bus bandwidth with the same `2(n-1)/n` factor)
//! dashed. Drawn with `plotters`' SVG backend, which writes text as SVG
//! `<text>` and needs no system fonts. Pure drawing: the rows come from
//! `bench::measure`.
//!
//! The x axis is marked at the sizes measured, in the bench's own units
//! (`64K`, `1M`); the y axis at 1, 2 and 5 times each power of ten, each
//! mark written once. Lines take colours from a fixed list that reads on
//! white (the Okabe-Ito palette's darker half), not the plotting
//! library's palette, whose third colour is yellow.

use crate::bench::Row;
use crate::Failure;
use plotters::prelude::*;
use std::path::Path;

/// The picture's size in pixels.
const SIZE: (u32, u32) = (900, 560);

/// Line colours, in order: blue, vermillion, bluish green, reddish
/// purple, sky blue, orange, black; each readable on white.
const COLOURS: [RGBColor; 7] = [
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(86, 180, 233),
    RGBColor(230, 159, 0),
    RGBColor(0, 0, 0),
];

/// The x axis's marks: the sizes measured, every other one where there
/// are more than 10 of them.
fn size_marks(rows: &[&Row]) -> Vec<f64> {
    let mut sizes: Vec<usize> = rows.iter().map(|r| r.size).collect();
    sizes.sort_unstable();
    sizes.dedup();
    let step = if sizes.len() > 10 { 2 } else { 1 };
    sizes.into_iter().step_by(step).map(|s| s as f64).collect()
}

/// The y axis's marks: 1, 2 and 5 times each power of ten in `lo..=hi`.
fn decade_marks(lo: f64, hi: f64) -> Vec<f64> {
    let mut marks = Vec::new();
    let mut decade = 10f64.powi(lo.log10().floor() as i32);
    while decade <= hi {
        for m in [1.0, 2.0, 5.0] {
            let y = m * decade;
            if (lo..=hi).contains(&y) {
                marks.push(y);
            }
        }
        decade *= 10.0;
    }
    marks
}

/// A bandwidth mark with the digits it needs and no more (`0.05`, `2`,
/// `500`).
fn gbps_label(y: f64) -> String {
    let s = format!("{y:.4}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

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
                (x_lo * 0.8..x_hi * 1.25)
                    .log_scale()
                    .with_key_points(size_marks(&positive)),
                (y_lo * 0.5..y_hi * 2.0)
                    .log_scale()
                    .with_key_points(decade_marks(y_lo * 0.5, y_hi * 2.0)),
            )
            .map_err(|e| err(&e))?;
        chart
            .configure_mesh()
            .x_desc("bytes per rank")
            .y_desc("bus bandwidth (GB/s)")
            .x_label_formatter(&|x| crate::sizes::format_size(*x as usize))
            .y_label_formatter(&|y| gbps_label(*y))
            .draw()
            .map_err(|e| err(&e))?;
        let mut algorithms: Vec<&str> = positive.iter().map(|r| r.algorithm.as_str()).collect();
        algorithms.sort_unstable();
        algorithms.dedup();
        for (i, alg) in algorithms.iter().enumerate() {
            let color = COLOURS[i % COLOURS.len()].to_rgba();
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_are_the_sizes_and_one_two_five_each_written_once() {
        let row = |size| Row {
            size,
            count: size / 4,
            algorithm: "star".into(),
            time_us: 1.0,
            algbw: 1.0,
            busbw: 1.0,
            wrong: 0,
            bound: 1.0,
            model_bound_us: 1.0,
        };
        let rows: Vec<Row> = (12..=24).map(|k| row(1usize << k)).collect();
        let refs: Vec<&Row> = rows.iter().collect();
        let labels: Vec<String> = size_marks(&refs)
            .iter()
            .map(|x| crate::sizes::format_size(*x as usize))
            .collect();
        assert_eq!(labels, ["4K", "16K", "64K", "256K", "1M", "4M", "16M"]);
        let ys: Vec<String> = decade_marks(0.03, 12.0)
            .into_iter()
            .map(gbps_label)
            .collect();
        assert_eq!(ys, ["0.05", "0.1", "0.2", "0.5", "1", "2", "5", "10"]);
    }
}
