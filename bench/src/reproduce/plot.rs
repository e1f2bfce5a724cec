//! SVG plots of the reproduction (plotters, SVG backend; text is left to the viewer's
//! fonts).

use std::ops::Range;
use std::path::Path;

use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

fn color(i: usize) -> RGBColor {
    const C: [RGBColor; 6] = [
        RGBColor(31, 119, 180),
        RGBColor(255, 127, 14),
        RGBColor(44, 160, 44),
        RGBColor(214, 39, 40),
        RGBColor(148, 103, 189),
        RGBColor(127, 127, 127),
    ];
    C[i % C.len()]
}

fn perr(e: impl std::fmt::Display) -> String {
    format!("plot: {e}")
}

/// The finite values of all series (NaN marks a missing bar or point).
fn finite_values(series: &[(&str, Vec<f64>)]) -> Vec<f64> {
    series
        .iter()
        .flat_map(|(_, v)| v.iter().copied())
        .filter(|x| x.is_finite())
        .collect()
}

/// An `f64 × f64` chart on an SVG file.
type Chart<'a, 'b> = ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// Draws a 900 × 480 SVG chart into `path`: caption `title`, axes over `x`
/// and `y`; `draw` draws the mesh and the series, then the series' legend
/// goes to the upper right and the file is written.
///
/// # Errors
/// The plotting or I/O error, or `draw`'s.
fn chart(
    path: &Path,
    title: &str,
    x: Range<f64>,
    y: Range<f64>,
    draw: impl FnOnce(&mut Chart<'_, '_>) -> Result<(), String>,
) -> Result<(), String> {
    let root = SVGBackend::new(path, (900, 480)).into_drawing_area();
    root.fill(&WHITE).map_err(perr)?;
    let mut ch = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(x, y)
        .map_err(perr)?;
    draw(&mut ch)?;
    ch.configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperRight)
        .draw()
        .map_err(perr)?;
    root.present().map_err(perr)?;
    Ok(())
}

/// Grouped bars: one group per label, one bar per series (NaN: no bar).
///
/// # Errors
/// The plotting or I/O error.
pub fn grouped_bars(
    path: &Path,
    title: &str,
    y_desc: &str,
    labels: &[String],
    series: &[(&str, Vec<f64>)],
) -> Result<(), String> {
    let finite = finite_values(series);
    let hi = finite.iter().copied().fold(0.0, f64::max);
    let lo = finite.iter().copied().fold(0.0, f64::min);
    let span = (hi - lo).max(1e-12);
    let n = labels.len().max(1);
    let x = -0.5..n as f64 - 0.5;
    let y = (lo - 0.05 * span)..(hi + 0.15 * span);
    chart(path, title, x, y, |ch| {
        let lab = labels.to_vec();
        ch.configure_mesh()
            .disable_x_mesh()
            .disable_y_mesh()
            .x_labels(n)
            .x_label_formatter(&move |x: &f64| {
                let r = x.round();
                if (x - r).abs() > 1e-6 || r < 0.0 {
                    return String::new();
                }
                lab.get(r as usize).cloned().unwrap_or_default()
            })
            .y_desc(y_desc)
            .draw()
            .map_err(perr)?;
        let k = series.len().max(1) as f64;
        let w = 0.8 / k;
        for (s, (name, v)) in series.iter().enumerate() {
            let c = color(s);
            let x0 = -0.4 + s as f64 * w;
            ch.draw_series(
                v.iter()
                    .enumerate()
                    .filter(|(_, y)| y.is_finite())
                    .map(|(i, &y)| {
                        let x = i as f64 + x0;
                        Rectangle::new([(x, 0.0), (x + w * 0.9, y)], c.filled())
                    }),
            )
            .map_err(perr)?
            .label(*name)
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], c.filled()));
        }
        Ok(())
    })
}

/// Lines with markers over a common x axis (NaN: no point).
///
/// # Errors
/// The plotting or I/O error.
pub fn lines(
    path: &Path,
    title: &str,
    x_desc: &str,
    y_desc: &str,
    xs: &[f64],
    series: &[(&str, Vec<f64>)],
) -> Result<(), String> {
    let finite = finite_values(series);
    let hi = finite.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let lo = finite.iter().copied().fold(f64::INFINITY, f64::min);
    let span = (hi - lo).max(1e-3 * hi.abs().max(1.0));
    let x0 = xs.iter().copied().fold(f64::INFINITY, f64::min);
    let x1 = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let xspan = (x1 - x0).max(1.0);
    let x = (x0 - 0.03 * xspan)..(x1 + 0.03 * xspan);
    let y = (lo - 0.1 * span)..(hi + 0.35 * span);
    chart(path, title, x, y, |ch| {
        ch.configure_mesh()
            .x_label_formatter(&|x: &f64| format!("{x:.0}"))
            .x_desc(x_desc)
            .y_desc(y_desc)
            .draw()
            .map_err(perr)?;
        for (s, (name, v)) in series.iter().enumerate() {
            let c = color(s);
            let pts: Vec<(f64, f64)> = xs
                .iter()
                .copied()
                .zip(v.iter().copied())
                .filter(|(_, y)| y.is_finite())
                .collect();
            ch.draw_series(LineSeries::new(pts.clone(), c.stroke_width(2)))
                .map_err(perr)?
                .label(*name)
                .legend(move |(x, y)| PathElement::new([(x, y), (x + 14, y)], c.stroke_width(2)));
            ch.draw_series(pts.into_iter().map(|p| Circle::new(p, 3, c.filled())))
                .map_err(perr)?;
        }
        Ok(())
    })
}

/// Side-by-side panels of the LU task graph: in panel `i`, the cell of row `k`
/// (step) and column `j` (column block) is coloured by `panels[i].1[k][j]`, the
/// machine of `F(k)` (`j == k`) or `U(k, j)`; `None` leaves the cell blank.
/// Factor tasks are outlined.
///
/// # Errors
/// The plotting or I/O error.
pub fn task_grids(
    path: &Path,
    title: &str,
    machines: &[String],
    panels: &[(&str, Vec<Vec<Option<usize>>>)],
) -> Result<(), String> {
    let cell = 16i32;
    let n = panels.first().map_or(0, |(_, g)| g.len()) as i32;
    let (margin, top, gap, legend) = (20i32, 50i32, 30i32, 30i32);
    let w = 2 * margin + panels.len() as i32 * (n * cell + gap);
    let h = top + n * cell + legend + 2 * margin;
    let root = SVGBackend::new(path, (w.max(300) as u32, h as u32)).into_drawing_area();
    root.fill(&WHITE).map_err(perr)?;
    let font = ("sans-serif", 14).into_font();
    root.draw(&Text::new(
        title,
        (margin, 10),
        ("sans-serif", 18).into_font(),
    ))
    .map_err(perr)?;
    for (p, (name, grid)) in panels.iter().enumerate() {
        let x0 = margin + p as i32 * (n * cell + gap);
        root.draw(&Text::new(*name, (x0, top - 20), font.clone()))
            .map_err(perr)?;
        for (k, row) in grid.iter().enumerate() {
            for (j, m) in row.iter().enumerate() {
                let Some(m) = m else { continue };
                let (x, y) = (x0 + j as i32 * cell, top + k as i32 * cell);
                let r = [(x, y), (x + cell - 1, y + cell - 1)];
                root.draw(&Rectangle::new(r, color(*m).filled()))
                    .map_err(perr)?;
                if j == k {
                    root.draw(&Rectangle::new(r, BLACK.stroke_width(2)))
                        .map_err(perr)?;
                }
            }
        }
    }
    let ly = top + n * cell + margin;
    for (i, m) in machines.iter().enumerate() {
        let x = margin + i as i32 * 160;
        root.draw(&Rectangle::new(
            [(x, ly), (x + 12, ly + 12)],
            color(i).filled(),
        ))
        .map_err(perr)?;
        root.draw(&Text::new(m.as_str(), (x + 18, ly), font.clone()))
            .map_err(perr)?;
    }
    root.present().map_err(perr)?;
    Ok(())
}
