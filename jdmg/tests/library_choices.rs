//! Library choices that used to be silently ignored or to panic: a
//! preconditioner choice the problem cannot honour, and processes that
//! disagree on nev; and the automatic inner solver's choice, which must not
//! depend on the machine's speed.

mod common;

use jdmg::{solve, InnerSolver, JdError, JdParams, PrecondChoice, Problem};
use jdmg::{
    BasisSettings, CorrectionSettings, ExecutionSettings, PrecondSettings, ProblemSettings,
};
use lblib::{SelfComm, ThreadComm};
use matrices::generate::{generate, GenSpec};
use precond::preconditioners::{Ilu0, PivotParams};
use precond::{CsrOperator, IdentityPreconditioner, Preconditioner};

fn precond_error(r: Result<jdmg::Solution, JdError>) -> String {
    match r {
        Err(JdError::InvalidParams { field, reason }) => {
            assert_eq!(field, "precond", "{reason}");
            reason
        }
        other => panic!("expected InvalidParams(precond), got {other:?}"),
    }
}

#[test]
fn preconditioner_choices_the_problem_cannot_honour_are_errors() {
    let spec: GenSpec = "lap2d:12x10".parse().unwrap();
    let a = generate(&spec).unwrap();
    let op = CsrOperator::new(&a, 1).unwrap();
    let comm = SelfComm::new();
    let diag = a.diagonal();
    let k = IdentityPreconditioner { n: a.nrows() };
    let with = |precond| JdParams {
        problem: ProblemSettings {
            nev: 2,
            ..Default::default()
        },
        preconditioner: PrecondSettings {
            kind: precond,
            ..Default::default()
        },
        ..JdParams::default()
    };
    // Before: ILU(0) on a matrix-free problem ran without any preconditioner.
    let pb = Problem::new(&op, &comm).unwrap();
    let r = precond_error(solve(&pb, &with(PrecondChoice::Ilu0), None));
    assert!(r.contains("with_preconditioner"), "{r}");
    // Before: Jacobi without the diagonal ran without any preconditioner.
    let r = precond_error(solve(&pb, &with(PrecondChoice::Jacobi), None));
    assert!(r.contains("with_diagonal"), "{r}");
    // Before: Jacobi silently replaced the user's preconditioner.
    let both = Problem::new(&op, &comm)
        .unwrap()
        .with_diagonal(&diag)
        .unwrap()
        .with_preconditioner(&k)
        .unwrap();
    let r = precond_error(solve(&both, &with(PrecondChoice::Jacobi), None));
    assert!(r.contains("one would be ignored"), "{r}");
    // The honoured combinations solve.
    let d = Problem::new(&op, &comm)
        .unwrap()
        .with_diagonal(&diag)
        .unwrap();
    assert!(solve(&d, &with(PrecondChoice::Jacobi), None).is_ok());
    assert!(solve(&both, &with(PrecondChoice::None), None).is_ok());
    assert!(jdmg::solve_matrix(&a, &with(PrecondChoice::Ilu0), None).is_ok());
}

/// Before: ranks passing different nev panicked inside `all_reduce`.
#[test]
fn processes_disagreeing_on_nev_get_an_error() {
    let spec: GenSpec = "lap2d:12x10".parse().unwrap();
    let a = generate(&spec).unwrap();
    let out = ThreadComm::run(2, |comm| {
        let p = JdParams {
            problem: ProblemSettings {
                nev: 2 + lblib::Comm::rank(&comm),
                ..Default::default()
            },
            ..JdParams::default()
        };
        jdmg::solve_distributed(&a, &comm, &p, None).map(|_| ())
    });
    for r in out {
        match r {
            Err(JdError::InvalidParams { field, reason }) => {
                assert_eq!(field, "nev");
                assert!(reason.contains("between 2 and 3"), "{reason}");
            }
            other => panic!("expected InvalidParams(nev), got {other:?}"),
        }
    }
}

/// `max_matvecs` is checked once per outer iteration, before the correction
/// equations (issue #22: `max_matvecs: 10` spent 32): the solve ends at the
/// first check that finds the budget spent, past it by at most one outer
/// iteration's products, k·(2·maxits + 1) with BiCGSTAB, as `JdParams`
/// documents.
#[test]
fn the_matvec_budget_is_exceeded_by_at_most_one_outer_iteration() {
    let a = generate(&"lap3d:20".parse::<GenSpec>().unwrap()).unwrap();
    for (budget, block, maxits) in [(10, 4, 20), (10, 4, 3), (100, 8, 20), (1000, 2, 50)] {
        let p = JdParams {
            problem: ProblemSettings {
                nev: block,
                ..Default::default()
            },
            basis: BasisSettings {
                block,
                ..Default::default()
            },
            correction: CorrectionSettings {
                maxits: Some(maxits),
                solver: InnerSolver::Bicgstab,
                ..Default::default()
            },
            preconditioner: PrecondSettings {
                kind: PrecondChoice::None,
                ..Default::default()
            },
            execution: ExecutionSettings {
                max_matvecs: Some(budget),
                ..Default::default()
            },
        };
        let used = match jdmg::solve_matrix(&a, &p, None) {
            Ok(partial) if partial.outcome == jdmg::Outcome::BudgetSpent => partial.stats.matvecs,
            other => panic!("budget {budget}: {other:?}"),
        };
        let iteration = (block * (2 * maxits + 1)) as u64;
        assert!(
            used >= budget && used < budget + iteration,
            "budget {budget}, block {block}, maxits {maxits}: {used} matvecs"
        );
    }
    // the figure of the documentation
    let p = JdParams {
        problem: ProblemSettings {
            nev: 4,
            ..Default::default()
        },
        basis: BasisSettings {
            block: 4,
            ..Default::default()
        },
        correction: CorrectionSettings {
            maxits: Some(20),
            solver: InnerSolver::Bicgstab,
            ..Default::default()
        },
        preconditioner: PrecondSettings {
            kind: PrecondChoice::None,
            ..Default::default()
        },
        execution: ExecutionSettings {
            max_matvecs: Some(10),
            ..Default::default()
        },
    };
    match jdmg::solve_matrix(&a, &p, None) {
        Ok(partial) if partial.outcome == jdmg::Outcome::BudgetSpent => {
            assert_eq!(partial.stats.matvecs, 158)
        }
        other => panic!("{other:?}"),
    }
}

/// ILU(0) slowed by a busy loop per vector: the same preconditioner on a
/// processor shared with another job.
struct Slowed<'a> {
    ilu: &'a Ilu0,
    spin: u64,
}

impl Preconditioner for Slowed<'_> {
    fn nrows(&self) -> usize {
        self.ilu.nrows()
    }
    fn apply_block(&self, r: &[f64], z: &mut [f64], k: usize) {
        let mut x = 0u64;
        for i in 0..self.spin * k as u64 {
            x = std::hint::black_box(x.wrapping_add(i));
        }
        self.ilu.apply_block(r, z, k);
    }
    fn work_per_vector(&self) -> f64 {
        self.ilu.work_per_vector()
    }
}

/// `InnerSolver::Auto` chooses between GD+k and block JDQMR by counted work:
/// a preconditioner many times slower changes the time, not the steps nor a
/// bit of the result.
#[test]
fn the_automatic_inner_solver_takes_the_same_steps_at_any_speed() {
    let a = generate(&"lap3d:14".parse::<GenSpec>().unwrap()).unwrap();
    let op = CsrOperator::new(&a, 1).unwrap();
    let comm = SelfComm::new();
    let ilu = Ilu0::new(&a, 0.0, &PivotParams::default()).unwrap();
    let p = JdParams {
        problem: ProblemSettings {
            nev: 6,
            tol: 1e-10,
            ..Default::default()
        },
        ..JdParams::default()
    };
    let run = |spin| {
        let k = Slowed { ilu: &ilu, spin };
        let pb = Problem::new(&op, &comm)
            .unwrap()
            .with_preconditioner(&k)
            .unwrap();
        solve(&pb, &p, None).unwrap()
    };
    let quick = run(0);
    let slow = run(20_000);
    let s = &quick.stats;
    assert!(quick.is_converged());
    // What was returned: the six smallest of the closed form, true residuals
    // within tol·‖A‖₁, orthonormal vectors.
    let exact = common::lap3d_spectrum(14);
    let mut got = quick.eigenvalues.clone();
    got.sort_by(f64::total_cmp);
    for (g, e) in got.iter().zip(&exact) {
        assert!((g - e).abs() < 1e-8, "{got:?} against {:?}", &exact[..6]);
    }
    common::assert_pairs(&a, &quick, 1e-10 * common::norm1(&a));
    assert!(
        s.gdk_iterations > 0 && s.jdqmr_iterations > 0 && s.method_switches > 0,
        "both methods must run: {s:?}"
    );
    let steps = |s: &jdmg::Stats| {
        (
            s.matvecs,
            s.gdk_iterations,
            s.jdqmr_iterations,
            s.method_switches,
            s.inner_steps,
        )
    };
    assert_eq!(steps(&quick.stats), steps(&slow.stats));
    assert_eq!(quick.eigenvalues, slow.eigenvalues);
    assert_eq!(quick.eigenvectors, slow.eigenvectors);
}

/// The default budgets scale with the problem (ARPACK's `maxiter` is 10·n):
/// max(10⁵, 10·n·nev) products and max(10⁵, 10·n) outer iterations, and a
/// solve that cannot converge stops there.
#[test]
fn default_budgets_scale_with_the_problem() {
    let e = ExecutionSettings::default();
    assert_eq!(e.matvec_budget(100, 4), 100_000);
    assert_eq!(e.matvec_budget(262_144, 4), 10_485_760);
    assert_eq!(e.outer_budget(100), 100_000);
    assert_eq!(e.outer_budget(262_144), 2_621_440);
    let set = ExecutionSettings {
        max_matvecs: Some(7),
        max_outer: Some(3),
        ..e
    };
    assert_eq!(
        (set.matvec_budget(1 << 20, 9), set.outer_budget(1 << 20)),
        (7, 3)
    );
    // A tolerance below rounding: only the budget ends the solve.
    let a = generate(&"lap2d:8".parse::<GenSpec>().unwrap()).unwrap();
    let p = JdParams {
        problem: ProblemSettings {
            nev: 2,
            tol: 1e-30,
            ..Default::default()
        },
        ..JdParams::default()
    };
    let sol = jdmg::solve_matrix(&a, &p, None).unwrap();
    assert_eq!(sol.outcome, jdmg::Outcome::BudgetSpent);
    let s = &sol.stats;
    assert!(
        (100_000..101_000).contains(&s.matvecs),
        "{} outer iterations, {} products",
        s.outer_iterations,
        s.matvecs
    );
}
