//! `InnerSolver::Auto` with a preconditioner: the choice between GD+k steps and
//! block JDQMR by progress per unit of counted work (PRIMME's DYNAMIC method,
//! which models both costs from measured times; here both are run in turn and
//! their work counted, so that the choice, and with it the result, is the same
//! on a quiet and on a loaded machine).
//!
//! Progress is the drop of the potential Φ = Σ ln(max(‖r_i‖, tol_i)/tol_i) over
//! the wanted pairs not yet locked (0 when all converged). Work is what
//! [`WorkClock`] counts: words of memory moved by the products with A, M and
//! the preconditioner, the passes over the basis and the inner steps' vector
//! operations. A window runs one method for at least [`MIN_WINDOW`] outer
//! iterations of its own; its rate is (Φ at its start − Φ at its end) / its
//! work, the work agreed over the processes (one global max per window). The
//! first window runs GD+k (cheap iterations finish easy problems at once), the
//! second JDQMR; then the faster one runs, and the other is tried again once
//! the winner has done [`RETRY_WORK`] times the work of the other's last
//! window, so that a phase change (a locked pair, a harder eigenvalue next) is
//! seen at a bounded cost. A window whose potential rose counts as no
//! progress, and after a window without progress the other method runs: the
//! potential is not monotone, so a rate of zero is no verdict.

/// The correction of one outer iteration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Method {
    /// t = −K⁻¹r for the whole block (no inner iteration).
    Gdk,
    /// Block JDQMR (see [`crate::correction::block_jdqmr`]).
    Jdqmr,
}

impl Method {
    fn slot(self) -> usize {
        match self {
            Method::Gdk => 0,
            Method::Jdqmr => 1,
        }
    }

    fn other(self) -> Method {
        match self {
            Method::Gdk => Method::Jdqmr,
            Method::Jdqmr => Method::Gdk,
        }
    }
}

/// Outer iterations of a window, per method: GD+k iterations are cheap and each
/// moves the potential little, JDQMR's are long.
pub(crate) const MIN_WINDOW: [usize; 2] = [8, 2];
/// The faster method runs this many times the other's last window before the
/// other is measured again.
pub(crate) const RETRY_WORK: f64 = 8.0;
/// The other method must be this much faster to take over.
const MARGIN: f64 = 1.1;

/// The state of the choice.
#[derive(Debug, Clone)]
pub(crate) struct Dynamic {
    method: Method,
    /// Potential and agreed work at the start of the window; None: the window
    /// starts at the next observation.
    start: Option<(f64, f64)>,
    iters: usize,
    /// Last measured rate of each method (potential drop per unit of work).
    rate: [Option<f64>; 2],
    /// Work of each method's last window, and the work the current
    /// method has run since the other was last measured.
    window_work: [f64; 2],
    since: f64,
    /// The solve's counted work.
    pub clock: WorkClock,
}

impl Dynamic {
    /// The choice at the start of a solve whose work `clock` counts.
    pub fn new(clock: WorkClock) -> Self {
        Self {
            method: Method::Gdk,
            start: None,
            iters: 0,
            rate: [None, None],
            window_work: [0.0; 2],
            since: 0.0,
            clock,
        }
    }

    /// The method of the current outer iteration's correction.
    pub fn method(&self) -> Method {
        self.method
    }

    /// Forgets the current window (the wanted set changed: a verification pass
    /// or a new block; the potential jumps).
    pub fn reset_window(&mut self) {
        self.start = None;
        self.iters = 0;
    }

    /// Whether the next observation ends a window (the caller then agrees on
    /// the work over the processes).
    pub fn window_due(&self) -> bool {
        self.start.is_none() || self.iters + 1 >= MIN_WINDOW[self.method.slot()]
    }

    /// One outer iteration done with the current method: `phi` is the potential
    /// after it, `work` the solve's work so far ([`WorkClock`]; agreed over the
    /// processes whenever [`Dynamic::window_due`] said so). Ends the window
    /// when due and picks the method of the next one.
    pub fn observe(&mut self, phi: f64, work: f64) {
        let Some((phi0, t0)) = self.start else {
            self.start = Some((phi, work));
            self.iters = 0;
            return;
        };
        self.iters += 1;
        if self.iters < MIN_WINDOW[self.method.slot()] {
            return;
        }
        let dt = work - t0;
        self.window_work[self.method.slot()] = dt;
        self.since += dt;
        if dt > 0.0 && phi.is_finite() && phi0.is_finite() {
            // A window that lost ground (residuals rising after a switch or a
            // restart) counts as no progress.
            self.rate[self.method.slot()] = Some((phi0 - phi).max(0.0) / dt);
        }
        let next = self.choose();

        self.method = next;
        self.start = Some((phi, work));
        self.iters = 0;
    }

    /// The method of the next window.
    fn choose(&mut self) -> Method {
        let (cur, other) = (self.method, self.method.other());
        let Some(rc) = self.rate[cur.slot()] else {
            return cur;
        };
        let switch = match self.rate[other.slot()] {
            // Never measured: measure it.
            None => true,
            Some(ro) => {
                // A window without progress says nothing about which method
                // is faster (the potential is not monotone): try the other.
                rc <= 0.0
                    || (ro > MARGIN * rc && ro > 0.0)
                    // Measure the other again (phases change), at most a
                    // 1/(RETRY_WORK + 1) share of the work.
                    || self.since >= RETRY_WORK * self.window_work[other.slot()]
            }
        };
        if switch {
            self.since = 0.0;
            other
        } else {
            cur
        }
    }
}

/// The counted work of a solve, in 8-byte words of memory read and written
/// (the clock of [`Dynamic`]): each product with A, M or the preconditioner
/// weighs its operator's [`precond::Operator::work_per_vector`], a pass over
/// the basis n·m, and an inner step n·(10 + 2·(projected vectors)) (the fused
/// recurrences, and Q_jᵀw and its subtraction, Q_j the locked and deflation
/// vectors and the equation's own).
#[derive(Debug, Clone)]
pub(crate) struct WorkClock {
    /// Words per vector of A, the preconditioner and M.
    weights: [f64; 3],
    /// Counters at the last reading: products with A, preconditioner
    /// applications, products with M, basis passes, inner steps.
    last: [u64; 5],
    total: f64,
}

/// What [`WorkClock::read`] needs of the solve.
pub(crate) struct Counts {
    pub matvecs: u64,
    pub precond_applications: u64,
    pub mass_matvecs: u64,
    pub basis_passes: u64,
    pub inner_steps: u64,
    /// Rows of this process.
    pub n: usize,
    /// Basis columns now.
    pub basis: usize,
    /// Locked and deflation vectors now.
    pub locked: usize,
}

impl WorkClock {
    /// A clock at 0 for an operator, preconditioner and mass matrix of these
    /// words per vector (0 for none).
    pub fn new(a: f64, precond: f64, mass: f64) -> Self {
        Self {
            weights: [a, precond, mass],
            last: [0; 5],
            total: 0.0,
        }
    }

    /// The work counted up to `c`: the work since the last reading weighs
    /// its basis passes and inner steps by the basis and locked vectors now.
    pub fn read(&mut self, c: &Counts) -> f64 {
        let now = [
            c.matvecs,
            c.precond_applications,
            c.mass_matvecs,
            c.basis_passes,
            c.inner_steps,
        ];
        let d: [f64; 5] = std::array::from_fn(|i| now[i].saturating_sub(self.last[i]) as f64);
        let n = c.n as f64;
        self.total += d[0] * self.weights[0]
            + d[1] * self.weights[1]
            + d[2] * self.weights[2]
            + d[3] * n * c.basis as f64
            + d[4] * n * (10.0 + 2.0 * (c.locked + 1) as f64);
        self.last = now;
        self.total
    }
}

/// The potential Φ of the wanted pairs (position < `remaining`) whose residuals
/// were computed, `seen` = (θ, ‖r‖) in target order, tolerances by `tol`; wanted
/// pairs beyond those seen count as the largest term seen.
pub(crate) fn potential(seen: &[(f64, f64)], remaining: usize, tol: impl Fn(f64) -> f64) -> f64 {
    let terms: Vec<f64> = seen
        .iter()
        .take(remaining)
        .map(|&(th, rn)| {
            let t = tol(th).max(f64::MIN_POSITIVE);
            (rn.max(t) / t).ln()
        })
        .collect();
    let top = terms.iter().copied().fold(0.0f64, f64::max);
    terms.iter().sum::<f64>() + remaining.saturating_sub(terms.len()) as f64 * top
}

/// `InnerSolver::Auto` as the loop's correction method: GD+k or block JDQMR,
/// whichever [`Dynamic`] picks for the outer iteration.
pub(crate) struct Auto<'c, C: ?Sized> {
    comm: &'c C,
    choice: Dynamic,
    block: super::block_jdqmr::Blocked<'c, C>,
}

impl<'c, C: ?Sized> Auto<'c, C> {
    /// The choice at the start of a solve over `comm` whose work `clock`
    /// counts, for `n` local rows and blocks of at most `kmax` equations.
    pub(crate) fn new(comm: &'c C, clock: WorkClock, n: usize, kmax: usize) -> Self {
        Self {
            comm,
            choice: Dynamic::new(clock),
            block: super::block_jdqmr::Blocked::new(comm, n, kmax),
        }
    }
}

impl<C: lblib::Comm + ?Sized> super::Correction for Auto<'_, C> {
    fn correct(&mut self, step: super::Step<'_>, stats: &mut crate::solution::Stats) -> Vec<usize> {
        match self.choice.method() {
            Method::Gdk => super::gdk::Gdk.correct(step, stats),
            Method::Jdqmr => self.block.correct(step, stats),
        }
    }

    /// The work is agreed over the processes (the most loaded one's clock)
    /// when a window ends: one global max.
    fn observe(&mut self, progress: &super::Progress, stats: &mut crate::solution::Stats) {
        let dy = &mut self.choice;
        let mut work = [dy.clock.read(&progress.counts)];
        if dy.window_due() && self.comm.size() > 1 {
            self.comm.all_reduce(&mut work, lblib::ReduceOp::Max);
            stats.global_sums += 1;
        }
        let before = dy.method();
        dy.observe(progress.phi, work[0]);
        if dy.method() != before {
            stats.method_switches += 1;
        }
    }

    fn new_pass(&mut self) {
        self.choice.reset_window();
    }

    fn idle_scratch(&mut self) -> Option<&mut [f64]> {
        super::Correction::idle_scratch(&mut self.block)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Drives the choice with a method whose potential falls `fast` per second
    /// and one whose falls `slow`, one second per iteration.
    fn run(gd_rate: f64, qmr_rate: f64, iters: usize) -> (Vec<Method>, Dynamic) {
        let mut d = Dynamic::new(WorkClock::new(1.0, 1.0, 0.0));
        let (mut phi, mut t) = (100.0, 0.0);
        let mut used = Vec::new();
        d.observe(phi, t);
        for _ in 0..iters {
            let m = d.method();
            used.push(m);
            phi -= if m == Method::Gdk { gd_rate } else { qmr_rate };
            t += 1.0;
            d.observe(phi, t);
        }
        (used, d)
    }

    #[test]
    fn keeps_the_faster_method_most_of_the_time() {
        for (gd, qmr, winner) in [(1.0, 3.0, Method::Jdqmr), (3.0, 1.0, Method::Gdk)] {
            let (used, _) = run(gd, qmr, 400);
            let share = used.iter().filter(|&&m| m == winner).count() as f64 / used.len() as f64;
            assert!(share > 0.8, "{winner:?} used {share:.2} of the time");
            // Both were measured.
            assert!(used.contains(&Method::Gdk) && used.contains(&Method::Jdqmr));
        }
    }

    /// 494_bus: JDQMR's first window (right after GD+k) made no progress, and
    /// so did GD+k's next one; GD+k then ran on for eight windows at a rate
    /// of zero while JDQMR, tried again, converged in three. Zero against zero
    /// is no evidence: the other method is tried.
    #[test]
    fn a_window_without_progress_tries_the_other_method() {
        let mut d = Dynamic::new(WorkClock::new(1.0, 1.0, 0.0));
        let mut t = 0.0;
        let mut step = |d: &mut Dynamic, phi: f64| {
            t += 1.0;
            d.observe(phi, t);
        };
        step(&mut d, 76.0);
        for _ in 0..MIN_WINDOW[0] {
            step(&mut d, 41.0); // GD+k: progress
        }
        assert_eq!(d.method(), Method::Jdqmr);
        for _ in 0..MIN_WINDOW[1] {
            step(&mut d, 41.5); // JDQMR: none
        }
        assert_eq!(d.method(), Method::Gdk);
        for _ in 0..MIN_WINDOW[0] {
            step(&mut d, 42.0); // GD+k: none either
        }
        assert_eq!(d.method(), Method::Jdqmr);
        for _ in 0..MIN_WINDOW[1] {
            step(&mut d, 20.0); // JDQMR: progress, and it stays
        }
        assert_eq!(d.method(), Method::Jdqmr);
    }

    #[test]
    fn the_clock_weighs_each_count_by_its_words() {
        let mut c = WorkClock::new(100.0, 50.0, 7.0);
        let at = |matvecs, passes, steps| Counts {
            matvecs,
            precond_applications: matvecs,
            mass_matvecs: 1,
            basis_passes: passes,
            inner_steps: steps,
            n: 10,
            basis: 4,
            locked: 2,
        };
        assert_eq!(c.read(&at(2, 0, 0)), 2.0 * 150.0 + 7.0);
        // Only what was done since: a pass over 10×4, an inner step of
        // 10·(10 + 2·3) words.
        assert_eq!(c.read(&at(2, 1, 1)), 307.0 + 40.0 + 160.0);
    }

    #[test]
    fn starts_with_gdk_for_a_full_window() {
        let (used, _) = run(1.0, 1.0, MIN_WINDOW[0]);
        assert!(used.iter().all(|&m| m == Method::Gdk));
    }

    #[test]
    fn potential_counts_unseen_wanted_pairs_and_ignores_converged_ones() {
        let tol = |_: f64| 1e-8;
        // Converged pairs count 0.
        assert_eq!(potential(&[(1.0, 1e-9), (2.0, 1e-10)], 2, tol), 0.0);
        let one = potential(&[(1.0, 1e-4)], 1, tol);
        assert!((one - 1e4f64.ln()).abs() < 1e-12);
        // A wanted pair not seen counts as the largest seen term.
        let two = potential(&[(1.0, 1e-4)], 2, tol);
        assert!((two - 2.0 * one).abs() < 1e-12);
    }
}
