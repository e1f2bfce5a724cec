//! GD+k steps (PRIMME's GD+k; Stathopoulos, "Nearly optimal preconditioned
//! methods for Hermitian eigenproblems under limited memory", §2): the
//! correction of each pair is t = −K⁻¹r, with K the preconditioner shifted to
//! the pair's shift, and no inner iteration. The loop's orthogonalization
//! removes the locked vectors and the basis (the Ritz vectors included).

use std::time::Instant;

use super::{shifted_jacobi, shifted_jacobi_mass, Correction, Inner, Step};
use crate::solution::Stats;

/// GD+k: one blocked preconditioner application for the whole block.
pub(crate) struct Gdk;

impl Correction for Gdk {
    fn correct(&mut self, mut step: Step<'_>, stats: &mut Stats) -> Vec<usize> {
        davidson_block(&mut step, stats);
        stats.gdk_iterations += 1;
        vec![0; step.ctx.shifts.len()]
    }
}

/// t_j = −K_j⁻¹ r_j for every selected pair j into the first columns of
/// `step.t`, K_j the preconditioner of the block's first pair at pair j's
/// shift.
fn davidson_block(step: &mut Step<'_>, stats: &mut Stats) {
    let Step {
        ctx, r, t, space, ..
    } = step;
    let n = space.op.nrows();
    let s = ctx.shifts.len();
    let ev_scale = space.ev_scale;
    let (r, t) = (&r[..n * s], &mut t[..n * s]);
    let inner = space.inners.first().copied().unwrap_or(Inner::Identity);
    match inner {
        Inner::Identity => {
            t.iter_mut().zip(r).for_each(|(t, v)| *t = -v);
            return;
        }
        Inner::Shifted { pc: m, .. } => {
            let t0 = Instant::now();
            // Each column's shift, in the preconditioner's units.
            let sh: Vec<f64> = ctx.shifts.iter().map(|x| x / ev_scale).collect();
            if space.threads > 1 && s > 1 {
                // Half of the block's columns each on two threads (the
                // substitutions are sequential within a column).
                let h = s / 2;
                let ((r1, r2), (t1, t2)) = (r.split_at(h * n), t.split_at_mut(h * n));
                let (s1, s2) = sh.split_at(h);
                rayon::join(
                    || m.apply_block_shifted(r1, t1, h, s1),
                    || m.apply_block_shifted(r2, t2, s - h, s2),
                );
            } else {
                m.apply_block_shifted(r, t, s, &sh);
            }
            stats.precond_seconds += t0.elapsed().as_secs_f64();
        }
        Inner::Diagonal { diag, .. } => {
            for (j, shift) in ctx.shifts.iter().enumerate() {
                let cols = j * n..(j + 1) * n;
                shifted_jacobi(diag, shift / ev_scale, &r[cols.clone()], &mut t[cols]);
            }
        }
        Inner::MassDiagonal { diag, mdiag, .. } => {
            for (j, shift) in ctx.shifts.iter().enumerate() {
                let cols = j * n..(j + 1) * n;
                shifted_jacobi_mass(
                    diag,
                    mdiag,
                    shift / ev_scale,
                    &r[cols.clone()],
                    &mut t[cols],
                );
            }
        }
    }
    t.iter_mut().for_each(|v| *v = -*v);
    stats.precond_applications += s as u64;
}
