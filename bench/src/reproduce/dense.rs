//! Distributed dense LU/QR of `hetdense` on thread ranks with virtual clocks
//! (thread CPU time × the rank's slowdown): the measured counterparts of `000` and
//! `001`'s layouts, free of the other work on this machine but not of its cache and
//! frequency effects (CPU time is measured).

use hetdense::{run_dense, DenseParams, DenseReport, Source};
use lblib::{ClockMode, ThreadComm, ThreadConfig};

use super::err;

/// One run of `params` on `slowdowns.len()` thread ranks.
pub fn run(params: &DenseParams, slowdowns: &[f64]) -> Result<DenseReport, String> {
    let cfg = ThreadConfig::with_slowdowns(slowdowns, ClockMode::Virtual);
    let out = ThreadComm::run_with(cfg, |comm| {
        run_dense(&comm, &Source::Random { seed: 1 }, params)
    });
    out.into_iter().next().ok_or("no rank")?.map_err(err)
}

/// Median virtual seconds of `reps` runs, and the last report.
pub fn median_time(
    params: &DenseParams,
    slowdowns: &[f64],
    reps: usize,
) -> Result<(f64, DenseReport), String> {
    let mut t = Vec::new();
    let mut last = None;
    for _ in 0..reps.max(1) {
        let r = run(params, slowdowns)?;
        if let Some(e) = r.backward_error {
            if e.is_nan() || e >= 1e-10 {
                return Err(format!("backward error {e:e}"));
            }
        }
        t.push(r.wall_seconds);
        last = Some(r);
    }
    Ok((crate::median(&t), last.ok_or("no run")?))
}
