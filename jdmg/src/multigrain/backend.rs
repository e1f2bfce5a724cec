//! The correction phase of the solve groups (McCombs et al. §3 "JDcg", §6
//! "JDmg", §4 and §7 balancing): the [`crate::correction::Correction`] the solver loop
//! hands its correction equations to.

use std::time::Instant;

use lblib::lbs::GroupLbs;
use lblib::{Comm, Method};

use super::mover::Mover;
use super::params::Balance;
use super::stats::MultigrainStats;
use crate::correction::{
    steps_rule, time_rule, CorrectionSolver, Equation, EquationOutcome, MassCtx,
};
use crate::correction::{Correction, CorrectionCtx, Step};
use crate::optimal_m::{kappa_estimate, optimal_steps_to};
use crate::params::{InnerStop, PrecondChoice};
use crate::repartition::{RateClock, WaitTimer};
use crate::setup::{inner_for, RowOperator, RowsPreconditioner};
use crate::solution::Stats;

pub(super) struct Backend<'g, W, G: Comm> {
    /// The fine-grain communicator.
    pub(super) world: &'g W,
    /// Where each correction phase's busy time and work are credited, for the
    /// rates of [`crate::repartition`].
    pub(super) rates: &'g RateClock<'g, W>,
    /// The solve group's communicator, with the time spent in its collectives.
    pub(super) group: &'g WaitTimer<G>,
    /// Nonzeros of this rank's group rows (the work of one group matvec).
    pub(super) group_nnz: f64,
    /// This process's all-to-all group (hierarchical scheme, §6), traced for the
    /// imbalance metric; `None`: the exchanges run over `world`.
    pub(super) a2a: Option<&'g lblib::Traced<G>>,
    pub(super) lbs: Option<GroupLbs<'g, WaitTimer<G>, G>>,
    pub(super) balance: Balance,
    pub(super) rate_kind: lblib::RateKind,
    pub(super) ngroups: usize,
    pub(super) my_group: usize,
    pub(super) mover: Mover,
    pub(super) op: RowOperator<'g, 'g, WaitTimer<G>>,
    pub(super) pc: Option<RowsPreconditioner<'g>>,
    pub(super) diag: Option<Vec<f64>>,
    pub(super) nf: usize,
    pub(super) ng: usize,
    pub(super) xl: Vec<f64>,
    pub(super) nl: usize,
    pub(super) corr: CorrectionSolver,
    /// The mass matrix M of K x = λ M x on this rank's group rows, and its
    /// diagonal (Jacobi diag(K) − θ·diag(M)); None for a standard problem.
    pub(super) mass: Option<(RowOperator<'g, 'g, WaitTimer<G>>, Vec<f64>)>,
    /// M·X_locked in the group layout, unscaled (`nl` columns), and the same
    /// times M's internal scale (filled at the next correction phase).
    pub(super) bxl_raw: Vec<f64>,
    pub(super) bxl: Vec<f64>,
    pub(super) decided: bool,
    /// Whether the deflation vectors are among `xl` (told once per solve,
    /// kept across re-partitions: the group layout does not move).
    pub(super) deflated: bool,
    pub(super) stats: MultigrainStats,
    pub(super) precond: PrecondChoice,
}

impl<W: Comm, G: Comm> Correction for Backend<'_, W, G> {
    /// The phase of McCombs et al. §4: the pairs sent to the groups (the
    /// fastest first), each group's equations solved for the common time T,
    /// the corrections gathered back.
    fn correct(&mut self, step: Step<'_>, stats: &mut Stats) -> Vec<usize> {
        self.correct_block(&step.ctx, step.x, step.r, step.t, stats)
    }

    fn by_solve_groups(&self) -> bool {
        true
    }

    fn on_lock(&mut self, x: &[f64], stats: &mut Stats) {
        self.lock_vector(x, stats);
    }

    fn on_deflation(&mut self, y: &[f64], q: usize, stats: &mut Stats) {
        if std::mem::replace(&mut self.deflated, true) {
            return;
        }
        let nf = self.nf;
        for j in 0..q {
            self.lock_vector(&y[j * nf..(j + 1) * nf], stats);
        }
    }
}

impl<W: Comm, G: Comm> Backend<'_, W, G> {
    /// Keeps a copy of the locked vector `x` (fine layout) in this group's
    /// layout (with M·x for K x = λ M x).
    pub(super) fn lock_vector(&mut self, x: &[f64], stats: &mut Stats) {
        // every group needs the locked vector in its own layout
        let dest: Vec<usize> = (0..self.ngroups).collect();
        let xs: Vec<f64> = (0..self.ngroups).flat_map(|_| x.iter().copied()).collect();
        let mut y = vec![0.0; self.ng];
        let t0 = Instant::now();
        let (nf, ng, me_g) = (self.nf, self.ng, self.my_group);
        match self.a2a {
            Some(c) => self.mover.scatter(c, &xs, nf, &dest, me_g, &mut y, ng, 1),
            None => {
                self.mover
                    .scatter(self.world, &xs, nf, &dest, me_g, &mut y, ng, 1);
                // a collective over all processes only in the global scheme
                stats.global_sums += 1;
            }
        }
        self.stats.alltoall_seconds += t0.elapsed().as_secs_f64();
        if let Some((m, _)) = &self.mass {
            // M·x in the group layout (one product inside the group)
            let mut my = vec![0.0; ng];
            precond::Operator::apply(m, &y, &mut my);
            stats.mass_matvecs += 1;
            self.bxl_raw.extend_from_slice(&my);
        }
        self.xl.extend_from_slice(&y);
        self.nl += 1;
    }

    /// One phase for the selected pairs (Ritz vectors `x`, residuals `r`):
    /// their corrections into the first columns of `t`; returns the inner
    /// steps per pair.
    fn correct_block(
        &mut self,
        ctx: &CorrectionCtx<'_>,
        x: &[f64],
        r: &[f64],
        t: &mut [f64],
        stats: &mut Stats,
    ) -> Vec<usize> {
        let s = ctx.shifts.len();
        let (nf, ng) = (self.nf, self.ng);
        self.stats.phases += 1;
        // M·X_locked times M's internal scale (decided before the first phase)
        let ms = ctx.mass_scale.unwrap_or(1.0);
        while self.bxl.len() < self.bxl_raw.len() {
            let v = self.bxl_raw[self.bxl.len()];
            self.bxl.push(ms * v);
        }
        // §4: each equation's optimal m; the phase's is that of the extreme-most
        // pair, which the fastest group solves.
        let steps: Vec<usize> = (0..s).map(|i| phase_steps(ctx, i)).collect();
        let m_phase = steps.first().copied().unwrap_or(1).max(1);
        self.stats.optimal_steps.push(m_phase);
        let balanced = self.balance != Balance::None && self.lbs.is_some();
        let order = self.control_phase(balanced, m_phase, s);
        // Pair i (extreme-most first) goes to the i-th fastest group, round robin.
        let dest: Vec<usize> = (0..s).map(|i| order[i % self.ngroups]).collect();
        let mine: Vec<usize> = (0..s).filter(|&i| dest[i] == self.my_group).collect();
        let gxr = self.scatter_pairs(x, r, &dest, mine.len());
        let flex = self.flexible_phase(ctx, &mine, &steps, &gxr, balanced);
        // Back to the fine layout.
        let t0 = Instant::now();
        match self.a2a {
            Some(c) => self
                .mover
                .gather(c, &flex.eps, ng, &dest, &mut t[..nf * s], nf),
            None => self
                .mover
                .gather(self.world, &flex.eps, ng, &dest, &mut t[..nf * s], nf),
        }
        self.stats.alltoall_seconds += t0.elapsed().as_secs_f64();
        self.reduce_counts(s, &mine, &flex, stats)
    }
}

/// This group's part of a flexible phase.
struct Flexible {
    /// The corrections of its equations, in the group layout.
    eps: Vec<f64>,
    /// What the solve of each of its equations did.
    outcomes: Vec<EquationOutcome>,
    /// Products with M in those solves.
    mass_products: u64,
    /// The phase's seconds on this group's clock (before any wait).
    seconds: f64,
}

impl<W: Comm, G: Comm> Backend<'_, W, G> {
    /// Control phase (§4, §7): T for a phase of `s` equations of `m_phase`
    /// steps, and the groups in the order that receives the pairs (fastest
    /// first; by group id when not `balanced` or not yet decided, or when the
    /// balancer fails, which is recorded in the stats).
    fn control_phase(&mut self, balanced: bool, m_phase: usize, s: usize) -> Vec<usize> {
        // T and the groups' ranking (fastest last in `index`).
        let mut order: Vec<usize> = (0..self.ngroups).collect();
        if balanced && self.decided {
            let lbs = self.lbs.as_mut().expect("balanced");
            let method = if self.balance == Balance::Fastest {
                Method::Fastest
            } else {
                Method::Slowest
            };
            // the fastest group holds ⌈s / groups⌉ equations of m steps each
            let ops = (m_phase * s.div_ceil(self.ngroups)) as f64;
            match lbs.decide_with(ops, method, self.rate_kind) {
                Ok(tl) => self.stats.time_limits.push(tl),
                Err(e) => self.stats.balancer_errors.push(format!("decide: {e}")),
            }
            let ranking = lbs.index().and_then(|i| Ok((i, lbs.rates()?)));
            if let Err(e) = &ranking {
                self.stats.balancer_errors.push(format!("ranking: {e}"));
            }
            if let Ok((idx, rates)) = ranking {
                // leaders are ordered by group id: idx[j] is a group; fastest first
                order = idx.iter().rev().copied().collect();
                let mut gr = vec![0.0; self.ngroups];
                for (&g, &r) in idx.iter().zip(rates) {
                    if g < gr.len() {
                        gr[g] = r;
                    }
                }
                self.stats.group_rate_history.push(gr.clone());
                self.stats.group_rates = gr;
            }
        }
        order
    }

    /// Sends the pairs' x and r to the groups of `dest` (pair i to group
    /// `dest[i]`); returns this group's `nmine` items [x, r] in its layout.
    fn scatter_pairs(&mut self, x: &[f64], r: &[f64], dest: &[usize], nmine: usize) -> Vec<f64> {
        let s = dest.len();
        let (nf, ng) = (self.nf, self.ng);
        // x and r travel together: item i = [x_i, r_i].
        let mut xr = vec![0.0; 2 * nf * s];
        for i in 0..s {
            xr[2 * i * nf..(2 * i + 1) * nf].copy_from_slice(&x[i * nf..(i + 1) * nf]);
            xr[(2 * i + 1) * nf..(2 * i + 2) * nf].copy_from_slice(&r[i * nf..(i + 1) * nf]);
        }
        let mut gxr = vec![0.0; 2 * ng * nmine];
        let t0 = Instant::now();
        match self.a2a {
            Some(c) => self
                .mover
                .scatter(c, &xr, nf, dest, self.my_group, &mut gxr, ng, 2),
            None => self
                .mover
                .scatter(self.world, &xr, nf, dest, self.my_group, &mut gxr, ng, 2),
        }
        self.stats.alltoall_seconds += t0.elapsed().as_secs_f64();
        gxr
    }

    /// Flexible phase: this group's equations `mine` (items of `gxr`, `steps`
    /// per equation), in a balancer section when `balanced`.
    fn flexible_phase(
        &mut self,
        ctx: &CorrectionCtx<'_>,
        mine: &[usize],
        steps: &[usize],
        gxr: &[f64],
        balanced: bool,
    ) -> Flexible {
        let ng = self.ng;
        let mut eps = vec![0.0; ng * mine.len()];
        let mut done_mine = vec![EquationOutcome::default(); mine.len()];
        let mut mass_products = 0u64;
        let t_flex = self.group.wtime();
        if !mine.is_empty() {
            let section = balanced;
            if section {
                self.open_section();
            }
            let mut ops = 0usize;
            let nmine = mine.len();
            for (slot, &i) in mine.iter().enumerate() {
                let x = &gxr[2 * slot * ng..(2 * slot + 1) * ng];
                let r = &gxr[(2 * slot + 1) * ng..(2 * slot + 2) * ng];
                let budget_ops = if nmine > 1 {
                    Some((slot + 1) as f64 / nmine as f64)
                } else {
                    None
                };
                let o = self.solve_one(
                    ctx,
                    i,
                    steps[i],
                    x,
                    r,
                    &mut eps[slot * ng..(slot + 1) * ng],
                    section,
                    &mut ops,
                    budget_ops,
                );
                mass_products += o.mass_matvecs;
                done_mine[slot] = o;
            }
            if section {
                self.close_section(ops);
            }
            if self.stats.group_inner_steps.len() < self.ngroups {
                self.stats.group_inner_steps.resize(self.ngroups, 0);
            }
            self.stats.group_inner_steps[self.my_group] += ops as u64;
        }
        // this group's flexible-phase seconds (its leader's clock, before any wait)
        let seconds = self.group.wtime() - t_flex;
        Flexible {
            eps,
            outcomes: done_mine,
            mass_products,
            seconds,
        }
    }

    /// Opens the balancer's section of a flexible phase. A section already
    /// open (a failed earlier phase) is not fatal: the rates of this phase are
    /// then those of the open section (the error goes to the stats).
    fn open_section(&mut self) {
        if let Err(e) = self.lbs.as_mut().expect("balanced").section_start() {
            self.stats
                .balancer_errors
                .push(format!("section_start: {e}"));
        }
    }

    /// Closes the balancer's section after `ops` inner steps (the rates are
    /// then decided; an error goes to the stats), and takes the memory
    /// balancer's figures.
    fn close_section(&mut self, ops: usize) {
        match self
            .lbs
            .as_mut()
            .expect("balanced")
            .section_end(ops.max(1) as f64)
        {
            Ok(_rate) => self.decided = true,
            Err(e) => self.stats.balancer_errors.push(format!("section_end: {e}")),
        }
        if let Some(mb) = self
            .lbs
            .as_mut()
            .and_then(|l| l.leader_lbs())
            .and_then(|l| l.memory_balancer())
        {
            self.stats.memory = mb.stats();
        }
    }

    /// Steps per pair and the groups' matvecs and preconditioner applications,
    /// known everywhere (one reduction over the world; each group counted
    /// once), added to `stats`; returns the steps of each of the `s` pairs.
    fn reduce_counts(
        &mut self,
        s: usize,
        mine: &[usize],
        flex: &Flexible,
        stats: &mut Stats,
    ) -> Vec<usize> {
        let mut all = vec![0.0; s + 3 + self.ngroups];
        if self.group.rank() == 0 {
            for (slot, &i) in mine.iter().enumerate() {
                let o = &flex.outcomes[slot];
                all[i] = o.steps as f64;
                all[s] += o.matvecs as f64;
                all[s + 1] += o.precond_applies as f64;
            }
            all[s + 2] = flex.mass_products as f64;
            all[s + 3 + self.my_group] = flex.seconds;
        }
        self.world.all_reduce(&mut all, lblib::ReduceOp::Sum);
        stats.global_sums += 1;
        stats.mass_matvecs += all[s + 2] as u64;
        self.stats.phase_seconds.push(all[s + 3..].to_vec());
        let total: f64 = all[..s].iter().sum();
        stats.inner_steps += total as u64;
        stats.matvecs += all[s] as u64;
        stats.precond_applications += all[s + 1] as u64;
        all[..s].iter().map(|&v| v as usize).collect()
    }

    /// One correction equation on this group's communicator, by the shared
    /// [`CorrectionSolver`]: in a balanced section the group iterates until T (its
    /// `share` of T when it holds several equations); in the first section, which
    /// measures the rates, it runs the `m` steps of the optimal count; otherwise
    /// the serial rules apply with `m` as the step cap (2^−iter or m steps, or the
    /// time budget).
    #[allow(clippy::too_many_arguments)]
    fn solve_one(
        &mut self,
        ctx: &CorrectionCtx<'_>,
        i: usize,
        m: usize,
        x: &[f64],
        r: &[f64],
        out: &mut [f64],
        section: bool,
        ops: &mut usize,
        share: Option<f64>,
    ) -> EquationOutcome {
        let shift = ctx.shifts[i];
        // the preconditioner's units: those of the unscaled matrices (with M:
        // eigenvalues scale by s_K/s_M, and Jacobi is diag(K) − θ·diag(M))
        let ms = ctx.mass_scale.unwrap_or(1.0);
        let pc = self.pc.as_deref().map(|p| p as _);
        let mdiag = self.mass.as_ref().map(|(_, d)| &d[..]);
        let inner = inner_for(
            self.precond,
            self.diag.as_deref(),
            mdiag,
            pc,
            shift * ms / ctx.scale,
        );
        // M (times its scale) and M·x in the group layout
        let mop = self.mass.as_ref().map(|(m, _)| Scaled { op: m, scale: ms });
        let bx = match &mop {
            Some(m) => {
                let mut bx = vec![0.0; x.len()];
                precond::Operator::apply(m, x, &mut bx);
                bx
            }
            None => Vec::new(),
        };
        let bxl = &self.bxl;
        let mass = mop.as_ref().map(|m| MassCtx {
            op: m as &dyn precond::Operator,
            locked: bxl,
            bx: &bx,
        });
        // JDQMR (`InnerSolver::Qmrs`) runs its dynamic rules up to this phase's m
        let qmr = ctx
            .qmr
            .get(i)
            .map(|q| crate::correction::jdqmr::QmrSetup { maxits: m, ..*q });
        let eq = Equation { x, r, shift, qmr };
        let group = self.group;
        let sums = std::cell::Cell::new(0);
        // the group's products, timed for the rates of re-partitioning
        let op = &Metered {
            op: &self.op,
            group,
            rates: self.rates,
            nnz: self.group_nnz,
            scale: ctx.scale,
        };
        let o = if section && !self.decided {
            // first phase (§4 step 1): a fixed count, timed to measure the rates
            let mut rule = steps_rule(InnerStop::Fixed, m, ctx.rel, ctx.floors[i]);
            self.corr.solve_general(
                op, mass, group, &self.xl, self.nl, inner, &eq, &mut rule, out,
            )
        } else if section {
            let kind = self.rate_kind;
            let lbs = self.lbs.as_mut().expect("balanced");
            let tl = lbs.time_limit();
            let t_section = group.wtime();
            let ops0 = *ops;
            // adaptive: below the floor a longer solve cannot help the outer test
            // (`fixed` keeps the paper's rule: iterate until T)
            let floor = match ctx.inner {
                InnerStop::Adaptive => ctx.floors[i],
                _ => 0.0,
            };
            let mut rule = |steps: usize, rn: f64, _r0: f64| {
                if rn == 0.0 || (steps > 0 && rn <= floor) {
                    return false;
                }
                let mut c = lbs
                    .should_continue_with((ops0 + steps) as f64, 1.0, kind)
                    .unwrap_or(false);
                if let (Some(frac), Some(tl), true) = (share, tl, c) {
                    // several equations in one section: split T evenly
                    let mut el = [group.wtime() - t_section];
                    group.broadcast(&mut el, 0);
                    c = el[0] < frac * tl;
                }
                c
            };
            self.corr.solve_general(
                op, mass, group, &self.xl, self.nl, inner, &eq, &mut rule, out,
            )
        } else if let InnerStop::Time { seconds } = ctx.inner {
            let mut rule = time_rule(group, seconds, ctx.maxits, &sums);
            self.corr.solve_general(
                op, mass, group, &self.xl, self.nl, inner, &eq, &mut rule, out,
            )
        } else {
            let mut rule = steps_rule(ctx.inner, m, ctx.rel, ctx.floors[i]);
            self.corr.solve_general(
                op, mass, group, &self.xl, self.nl, inner, &eq, &mut rule, out,
            )
        };
        let mut o = o;
        o.mass_matvecs += u64::from(mop.is_some());
        *ops += o.steps;
        // Reductions inside the group are the group's own; `Stats::global_sums`
        // counts the fine-grain (all-process) ones only.
        o
    }
}

/// A solve group's operator (times the solver's scale) that credits every product to the rates of
/// re-partitioning ([`RateClock::credit_span`]): its busy seconds (wall time minus the
/// waits of its halo exchange, at the core's share) for the nonzeros of this rank's group rows times
/// the vectors. The time per nonzero of a rank's own products does not change when
/// its fine rows move, nor with the work of the rest of the inner step.
pub(super) struct Metered<'a, 'g, O, G, W> {
    op: &'a O,
    group: &'a WaitTimer<G>,
    rates: &'a RateClock<'g, W>,
    nnz: f64,
    /// The solver's internal scale s: the products are of s·A.
    scale: f64,
}

impl<O: precond::Operator, G: Comm, W: Comm> precond::Operator for Metered<'_, '_, O, G, W> {
    fn nrows(&self) -> usize {
        self.op.nrows()
    }

    fn apply_block(&self, x: &[f64], y: &mut [f64], k: usize) {
        let (t0, w0) = (self.group.wtime(), self.group.waited());
        let span = self.rates.span_start();
        self.op.apply_block(x, y, k);
        let busy = (self.group.wtime() - t0) - (self.group.waited() - w0);
        self.rates.credit_span(busy, span, self.nnz * k as f64);
        if self.scale != 1.0 {
            y.iter_mut().for_each(|v| *v *= self.scale);
        }
    }
}

/// A solve group's mass matrix times M's internal scale.
struct Scaled<'a, O> {
    op: &'a O,
    scale: f64,
}

impl<O: precond::Operator> precond::Operator for Scaled<'_, O> {
    fn nrows(&self) -> usize {
        self.op.nrows()
    }

    fn apply_block(&self, x: &[f64], y: &mut [f64], k: usize) {
        self.op.apply_block(x, y, k);
        if self.scale != 1.0 {
            y.iter_mut().for_each(|v| *v *= self.scale);
        }
    }
}

/// The inner step count of equation `i` of a phase (McCombs et al. §4): with the
/// adaptive rule the optimal m of [`crate::optimal_m`] for the reduction 2^−iter
/// or, when less is needed, down to the equation's floor (capped by `maxits`);
/// otherwise `maxits`.
fn phase_steps(ctx: &CorrectionCtx<'_>, i: usize) -> usize {
    match ctx.inner {
        InnerStop::Adaptive => {
            let kappa = kappa_estimate(ctx.thetas[i], ctx.ritz, ctx.anorm, ctx.rnorms[i]);
            // 2^−iter, but never below the floor (0.1·tol) where the solve stops
            let floor = ctx.floors[i] / ctx.rnorms[i];
            optimal_steps_to(ctx.rel.max(floor), kappa, ctx.maxits)
        }
        _ => ctx.maxits,
    }
}
