//! Distributed dense LU/QR of `hetdense` on thread ranks with virtual clocks
//! (thread CPU time × the rank's slowdown): the measured counterparts of `000` and
//! `001`'s layouts, free of the other work on this machine but not of its cache and
//! frequency effects (CPU time is measured).

use faer::Par;
use hetdense::check;
use hetdense::factor::{
    factor_distributed_with, gather_factors, Factorization, LocalColumns, Replan,
};
use hetdense::{run_dense, ColumnLayout, DenseParams, DenseReport, Source};
use lblib::{ClockMode, Comm, ThreadComm, ThreadConfig};

use super::err;

/// One run of `params` on `slowdowns.len()` thread ranks, with `latency`
/// virtual seconds added to every collective
/// ([`ThreadConfig::latency`]; 0: none): a slow link that every collective
/// crosses.
pub fn run_linked(
    params: &DenseParams,
    slowdowns: &[f64],
    latency: f64,
) -> Result<DenseReport, String> {
    let cfg = ThreadConfig {
        latency,
        ..ThreadConfig::with_slowdowns(slowdowns, ClockMode::Virtual)
    };
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
    median_time_linked(params, slowdowns, 0.0, reps)
}

/// [`median_time`] of [`run_linked`].
pub fn median_time_linked(
    params: &DenseParams,
    slowdowns: &[f64],
    latency: f64,
    reps: usize,
) -> Result<(f64, DenseReport), String> {
    let mut t = Vec::new();
    let mut last = None;
    for _ in 0..reps.max(1) {
        let r = run_linked(params, slowdowns, latency)?;
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

/// The 1-D LU of `hetdense::factor` on a given column `layout` (not re-planned),
/// on `slowdowns.len()` thread ranks with `latency` virtual seconds added to
/// every collective: `(virtual seconds, ‖PA − LU‖/‖A‖)`.
pub fn lu_on_layout(
    layout: &ColumnLayout,
    slowdowns: &[f64],
    latency: f64,
    lookahead: bool,
) -> Result<(f64, f64), String> {
    let cfg = ThreadConfig {
        latency,
        ..ThreadConfig::with_slowdowns(slowdowns, ClockMode::Virtual)
    };
    let src = Source::Random { seed: 1 };
    let out = ThreadComm::run_with(cfg, |comm| {
        comm.barrier();
        let t0 = comm.wtime();
        let local = LocalColumns::new(layout, comm.rank(), &src)?;
        let f = factor_distributed_with(
            &comm,
            Factorization::Lu,
            local,
            layout,
            &Replan::default(),
            None,
            Par::Seq,
            lookahead,
            &mut |_| {},
        )?;
        comm.barrier();
        let t = comm.wtime() - t0;
        let full = gather_factors(&comm, &f);
        let be = if comm.rank() == 0 {
            let a = src.to_col_major(layout.n);
            check::lu_backward_error(&a, &full, &f.ipiv, layout.n, Par::Seq)
        } else {
            0.0
        };
        Ok::<_, hetdense::DenseError>((t, be))
    });
    let (t, be) = out.into_iter().next().ok_or("no rank")?.map_err(err)?;
    if be.is_nan() || be >= 1e-10 {
        return Err(format!("backward error {be:e}"));
    }
    Ok((t, be))
}
