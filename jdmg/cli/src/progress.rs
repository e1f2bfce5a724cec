//! What the solver's per-iteration events ([`IterationEvent`]) become: a live
//! indicatif display on a terminal, and the residual history of every
//! eigenpair drawn with plotters (`--plot FILE.svg`), the convergence plot
//! users of PRIMME and SLEPc draw.

use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use jdmg::IterationEvent;
use plotters::prelude::*;

/// Live display on standard error: outer iteration, converged pairs, best
/// residual, and matvecs against the `--max-matvecs` budget (the bar, and the
/// time to exhaust the budget at the current rate: an upper bound of the
/// remaining time).
pub struct Live {
    bar: ProgressBar,
    nev: usize,
}

impl Live {
    /// A display for a solve of `nev` pairs with a budget of `max_matvecs`.
    pub fn new(nev: usize, max_matvecs: u64) -> Self {
        let bar = ProgressBar::with_draw_target(
            Some(max_matvecs.max(1)),
            ProgressDrawTarget::stderr_with_hz(8),
        );
        let style = ProgressStyle::with_template(
            "{spinner} {elapsed_precise} {msg} [{bar:16}] {pos}/{len} matvecs, budget ETA {eta}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ");
        bar.set_style(style);
        bar.enable_steady_tick(Duration::from_millis(250));
        Self { bar, nev }
    }

    /// Shows one event.
    pub fn update(&self, ev: &IterationEvent) {
        let best = ev
            .residual_norms
            .iter()
            .copied()
            .filter(|r| r.is_finite())
            .fold(f64::INFINITY, f64::min);
        self.bar.set_position(ev.matvecs);
        self.bar.set_message(format!(
            "iter {} conv {}/{} best ‖r‖ {:.1e}",
            ev.outer_iteration, ev.nconverged, self.nev, best
        ));
    }

    /// Removes the display (before the results are printed).
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

/// Residual norms of every eigenpair over the solve. An event's Ritz values
/// are in target order, starting after the pairs locked before its iteration
/// (pairs are locked in target order, and the event comes after this
/// iteration's locks): value `i` belongs to pair `locked_before + i`, where
/// `locked_before` is the previous event's locked count. Points are
/// (matvecs, ‖r‖).
#[derive(Debug, Default, Clone)]
pub struct History {
    /// Per pair, its (matvecs, residual) points.
    pub pairs: Vec<Vec<(f64, f64)>>,
    /// Pairs locked when the previous event was emitted.
    locked_before: usize,
}

impl History {
    /// Records one event (only the first `nev` pairs).
    pub fn record(&mut self, ev: &IterationEvent, nev: usize) {
        for (i, &r) in ev.residual_norms.iter().enumerate() {
            let j = self.locked_before + i;
            if j >= nev || !(r.is_finite() && r > 0.0) {
                continue;
            }
            if self.pairs.len() <= j {
                self.pairs.resize(j + 1, Vec::new());
            }
            self.pairs[j].push((ev.matvecs as f64, r));
        }
        self.locked_before = ev.nconverged;
    }

    /// Appends each pair's final true residual (recomputed when it was locked)
    /// where its history ends, or at `matvecs` for a pair never seen.
    pub fn finish(&mut self, matvecs: u64, residuals: &[f64]) {
        for (j, &r) in residuals.iter().enumerate() {
            if !(r.is_finite() && r > 0.0) {
                continue;
            }
            if self.pairs.len() <= j {
                self.pairs.resize(j + 1, Vec::new());
            }
            let x = self.pairs[j].last().map_or(matvecs as f64, |p| p.0);
            self.pairs[j].push((x, r));
        }
    }

    /// The residual histories as an SVG document: log-scale ‖r‖ against
    /// matvecs, one line per eigenpair, and the convergence threshold
    /// `threshold` (tol·‖A‖ for the norm test) dashed when given.
    ///
    /// # Errors
    /// A plotters drawing error (as text), or no point to draw.
    pub fn svg(&self, title: &str, threshold: Option<f64>) -> Result<String, String> {
        let pts = self.pairs.iter().flatten();
        let (mut xmax, mut ymin, mut ymax) = (1.0f64, f64::INFINITY, 0.0f64);
        for &(x, y) in pts {
            xmax = xmax.max(x);
            ymin = ymin.min(y);
            ymax = ymax.max(y);
        }
        if ymax <= 0.0 {
            return Err("no residual was recorded".into());
        }
        if let Some(t) = threshold.filter(|t| t.is_finite() && *t > 0.0) {
            ymin = ymin.min(t);
            ymax = ymax.max(t);
        }
        let (ylo, yhi) = (ymin / 3.0, ymax * 3.0);
        let mut out = String::new();
        {
            let root = SVGBackend::with_string(&mut out, (800, 500)).into_drawing_area();
            let e = |e: &dyn std::fmt::Display| e.to_string();
            root.fill(&WHITE).map_err(|x| e(&x))?;
            let mut chart = ChartBuilder::on(&root)
                .caption(title, ("sans-serif", 18))
                .margin(12)
                .x_label_area_size(40)
                .y_label_area_size(70)
                .build_cartesian_2d(0f64..xmax * 1.02, (ylo..yhi).log_scale())
                .map_err(|x| e(&x))?;
            chart
                .configure_mesh()
                .light_line_style(TRANSPARENT)
                .x_label_formatter(&|x| format!("{x:.0}"))
                .x_desc("matvecs")
                .y_desc("residual norm ‖Ax − θx‖")
                .y_label_formatter(&|v| format!("{v:.0e}"))
                .draw()
                .map_err(|x| e(&x))?;
            for (j, series) in self.pairs.iter().enumerate() {
                if series.is_empty() {
                    continue;
                }
                let color = Palette99::pick(j).to_rgba();
                chart
                    .draw_series(LineSeries::new(
                        series.iter().copied(),
                        color.stroke_width(2),
                    ))
                    .map_err(|x| e(&x))?
                    .label(format!("pair {j}"))
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 16, y)], color.stroke_width(2))
                    });
            }
            if let Some(t) = threshold.filter(|t| t.is_finite() && *t > 0.0) {
                chart
                    .draw_series(DashedLineSeries::new(
                        [(0.0, t), (xmax * 1.02, t)],
                        6,
                        4,
                        BLACK.stroke_width(1),
                    ))
                    .map_err(|x| e(&x))?
                    .label("convergence threshold")
                    .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], BLACK));
            }
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .draw()
                .map_err(|x| e(&x))?;
            root.present().map_err(|x| e(&x))?;
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(nconv: usize, matvecs: u64, res: &[f64]) -> IterationEvent {
        IterationEvent {
            outer_iteration: 1,
            matvecs,
            basis_size: 4,
            nconverged: nconv,
            ritz_values: vec![1.0; res.len()],
            residual_norms: res.to_vec(),
            inner_steps: vec![],
            elapsed_seconds: 0.0,
        }
    }

    #[test]
    fn pairs_follow_locking() {
        let mut h = History::default();
        // iteration 1 locks pair 0 (its residual is reported in this event)
        h.record(&ev(1, 10, &[1e-9, 1e-2]), 3);
        // iteration 2 starts after pair 0: values are pairs 1, 2, 3 (past nev)
        h.record(&ev(1, 20, &[1e-3, 1e-4, 5.0]), 3);
        h.record(&ev(3, 30, &[1e-9, 1e-9]), 3);
        assert_eq!(h.pairs.len(), 3);
        assert_eq!(h.pairs[0], vec![(10.0, 1e-9)]);
        assert_eq!(h.pairs[1], vec![(10.0, 1e-2), (20.0, 1e-3), (30.0, 1e-9)]);
        assert_eq!(h.pairs[2], vec![(20.0, 1e-4), (30.0, 1e-9)]);
        let svg = h.svg("t", Some(1e-6)).unwrap();
        assert!(svg.starts_with("<svg") && svg.contains("pair 2"), "{svg}");
        assert!(History::default().svg("t", None).is_err());
    }
}
