//! SVG plots of the reproduction (plotters, SVG backend; text is left to the viewer's
//! fonts).

use std::path::Path;

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
    let root = SVGBackend::new(path, (900, 480)).into_drawing_area();
    root.fill(&WHITE).map_err(perr)?;
    let vals = series.iter().flat_map(|(_, v)| v.iter().copied());
    let finite: Vec<f64> = vals.filter(|x| x.is_finite()).collect();
    let hi = finite.iter().copied().fold(0.0, f64::max);
    let lo = finite.iter().copied().fold(0.0, f64::min);
    let span = (hi - lo).max(1e-12);
    let n = labels.len().max(1);
    let mut ch = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(-0.5..n as f64 - 0.5, (lo - 0.05 * span)..(hi + 0.15 * span))
        .map_err(perr)?;
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
    ch.configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperRight)
        .draw()
        .map_err(perr)?;
    root.present().map_err(perr)?;
    Ok(())
}
