//! The correction equations of a block solved one after the other (McCombs et
//! al. §3, step (8)), each by the shared [`CorrectionSolver`]: the paper's
//! right-preconditioned BiCGSTAB, or JDQMR's symmetric QMR.

use std::cell::Cell;

use lblib::Comm;

use super::{steps_rule, time_rule, Correction, CorrectionSolver, Equation, MassCtx, Step};
use crate::params::{InnerSolver, InnerStop};
use crate::solution::Stats;

/// One equation at a time with `kind`'s inner solver; its buffers are built
/// at the first phase.
pub(crate) struct OneByOne<'c, C: ?Sized> {
    comm: &'c C,
    kind: InnerSolver,
    n: usize,
    max_locked: usize,
    solver: Option<CorrectionSolver>,
}

impl<'c, C: ?Sized> OneByOne<'c, C> {
    /// For `n` local rows over `comm` and at most `max_locked` vectors
    /// projected out.
    pub(crate) fn new(comm: &'c C, kind: InnerSolver, n: usize, max_locked: usize) -> Self {
        Self {
            comm,
            kind,
            n,
            max_locked,
            solver: None,
        }
    }
}

impl<C: Comm + ?Sized> Correction for OneByOne<'_, C> {
    fn correct(&mut self, step: Step<'_>, stats: &mut Stats) -> Vec<usize> {
        let (n, kind, max_locked) = (self.n, self.kind, self.max_locked);
        let solver = self
            .solver
            .get_or_insert_with(|| CorrectionSolver::new(n, kind, max_locked));
        let Step {
            ctx,
            x,
            r,
            t,
            space,
        } = step;
        let mut steps = Vec::with_capacity(ctx.shifts.len());
        for (i, &shift) in ctx.shifts.iter().enumerate() {
            let cols = i * n..(i + 1) * n;
            let qmr = ctx
                .qmr
                .get(i)
                .copied()
                .filter(|_| kind == InnerSolver::Qmrs);
            let eq = Equation {
                x: &x[cols.clone()],
                r: &r[cols.clone()],
                shift,
                qmr,
            };
            let sums = Cell::new(0);
            let mut rule: Box<dyn FnMut(usize, f64, f64) -> bool + '_> = match ctx.inner {
                InnerStop::Time { seconds } => {
                    Box::new(time_rule(self.comm, seconds, ctx.maxits, &sums))
                }
                stop => Box::new(steps_rule(stop, ctx.maxits, ctx.rel, ctx.floors[i])),
            };
            let mass = space.mass.map(|m| MassCtx {
                bx: &m.bx[cols.clone()],
                ..m
            });
            let out = solver.solve_general(
                space.op,
                mass,
                self.comm,
                space.locked,
                space.nl,
                space.inners[i],
                &eq,
                &mut *rule,
                &mut t[cols],
            );
            drop(rule);
            stats.add_equation(&out);
            stats.global_sums += sums.get();
            steps.push(out.steps);
        }
        steps
    }
}
