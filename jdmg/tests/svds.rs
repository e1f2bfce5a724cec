//! Singular triplets against closed forms (the grid gradient [D; αI]) and
//! dense SVD (faer): values, residuals recomputed from the returned vectors,
//! orthonormality of U and V, both orientations, both ends.

use jdmg::{svds, SvdError, SvdParams, SvdSolution, SvdWhich};
use matrices::rectangular::GradSpec;
use matrices::CsrMatrix;

/// ‖Av − σu‖² + ‖Aᵀu − σv‖², ‖UᵀU − I‖ and ‖VᵀV − I‖ (max entries), recomputed.
fn audit(a: &CsrMatrix, s: &SvdSolution) -> (f64, f64, f64) {
    let (m, n, k) = (a.nrows(), a.ncols(), s.values.len());
    let at = a.transpose();
    let mut worst: f64 = 0.0;
    for j in 0..k {
        let (u, v, sigma) = (s.left(j), s.right(j), s.values[j]);
        let (mut av, mut atu) = (vec![0.0; m], vec![0.0; n]);
        a.mul_vec(v, &mut av);
        at.mul_vec(u, &mut atu);
        let r: f64 = av
            .iter()
            .zip(u)
            .map(|(x, u)| (x - sigma * u).powi(2))
            .sum::<f64>()
            + atu
                .iter()
                .zip(v)
                .map(|(x, v)| (x - sigma * v).powi(2))
                .sum::<f64>();
        worst = worst.max(r.sqrt());
        assert!(
            (r.sqrt() - s.residual_norms[j]).abs() <= 1e-12 + 1e-6 * r.sqrt(),
            "reported residual"
        );
    }
    let ortho = |x: &[f64], len: usize| {
        let mut e: f64 = 0.0;
        for i in 0..k {
            for j in 0..k {
                let d: f64 = (0..len).map(|r| x[i * len + r] * x[j * len + r]).sum();
                e = e.max((d - if i == j { 1.0 } else { 0.0 }).abs());
            }
        }
        e
    };
    (worst, ortho(&s.u, m), ortho(&s.v, n))
}

fn params(nsv: usize, which: SvdWhich, tol: f64) -> SvdParams {
    SvdParams {
        nsv,
        which,
        tol,
        ..SvdParams::default()
    }
}

/// The wanted end of `all` (ascending), in target order.
fn wanted(all: &[f64], k: usize, which: SvdWhich) -> Vec<f64> {
    match which {
        SvdWhich::Largest => all.iter().rev().take(k).copied().collect(),
        SvdWhich::Smallest => all.iter().take(k).copied().collect(),
    }
}

fn check(
    a: &CsrMatrix,
    truth: &[f64],
    nsv: usize,
    which: SvdWhich,
    tol: f64,
    anorm: f64,
) -> SvdSolution {
    let s = svds(a, &params(nsv, which, tol)).unwrap_or_else(|e| panic!("{which:?}: {e}"));
    assert_eq!(s.values.len(), nsv);
    assert!(s.converged.iter().all(|&c| c));
    for (got, want) in s.values.iter().zip(wanted(truth, nsv, which)) {
        assert!(
            (got - want).abs() <= 1e-8 * want.max(1e-3),
            "{which:?}: {got} vs {want}"
        );
    }
    let (res, ou, ov) = audit(a, &s);
    assert!(res <= tol * anorm * 1.0001, "{which:?}: residual {res:e}");
    assert!(
        ou < 1e-8 && ov < 1e-8,
        "{which:?}: orthonormality {ou:e} {ov:e}"
    );
    s
}

#[test]
fn grid_gradient_both_ends_both_orientations() {
    let g = GradSpec::parse("grad2d:14x11:0.05").unwrap();
    let a = g.matrix();
    let truth = g.singular_values();
    let anorm = *truth.last().unwrap();
    let at = a.transpose();
    for which in [SvdWhich::Largest, SvdWhich::Smallest] {
        let tall = check(&a, &truth, 6, which, 1e-10, anorm);
        assert_eq!(tall.stats.normal_side, "AtA");
        assert!(
            tall.stats.explicit_normal,
            "AᵀA of a gradient is sparser than A and Aᵀ"
        );
        let wide = check(&at, &truth, 6, which, 1e-10, anorm);
        assert_eq!(wide.stats.normal_side, "AAt");
        assert_eq!(
            (wide.u.len(), wide.v.len()),
            (at.nrows() * 6, at.ncols() * 6)
        );
    }
}

#[test]
fn smallest_of_an_ill_conditioned_matrix_are_refined_on_the_augmented_matrix() {
    // κ ≈ 4e5: the normal equations alone give σ_min to about ε κ² ≈ 2e-5
    // relative; the augmented stage brings it to the tolerance.
    let g = GradSpec::parse("grad3d:6x5x4:1e-5").unwrap();
    let a = g.matrix();
    let truth = g.singular_values();
    let anorm = *truth.last().unwrap();
    let s = check(&a, &truth, 4, SvdWhich::Smallest, 1e-9, anorm);
    assert!(
        (s.values[0] - 1e-5).abs() <= 1e-8 * 1e-5,
        "σ_min {}",
        s.values[0]
    );
    assert!(s.stats.refined >= 1, "stage 2 ran");
    assert!(s.stats.stage2_products > 0);
}

/// A pseudo-random sparse m × n matrix.
fn random_sparse(m: usize, n: usize, per_row: usize, seed: u64) -> CsrMatrix {
    let mut state = seed;
    let mut next = || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 33) as f64 / (1u64 << 31) as f64
    };
    let mut t = Vec::new();
    for r in 0..m {
        t.push((r, r % n, 1.0 + next()));
        for _ in 0..per_row {
            let c = (next() * n as f64) as usize % n;
            t.push((r, c, next() - 0.5));
        }
    }
    CsrMatrix::from_triplets(m, n, &t).unwrap()
}

/// Singular values of `a` by faer's dense SVD, ascending.
fn dense_singular_values(a: &CsrMatrix) -> Vec<f64> {
    let d = faer::Mat::<f64>::from_fn(a.nrows(), a.ncols(), |i, j| a.get(i, j));
    let mut s: Vec<f64> = d.singular_values().expect("dense SVD");
    s.sort_by(f64::total_cmp);
    s
}

#[test]
fn random_rectangular_against_dense_svd() {
    for (m, n) in [(90, 50), (40, 75)] {
        let a = random_sparse(m, n, 3, 7 + m as u64);
        let truth = dense_singular_values(&a);
        let anorm = *truth.last().unwrap();
        for which in [SvdWhich::Largest, SvdWhich::Smallest] {
            check(&a, &truth, 5, which, 1e-10, anorm);
        }
    }
}

#[test]
fn bad_requests_are_errors_with_their_reason() {
    let a = GradSpec::parse("grad2d:4x3:1").unwrap().matrix();
    for (p, field) in [
        (params(0, SvdWhich::Largest, 1e-8), "nsv"),
        (params(a.ncols() + 1, SvdWhich::Largest, 1e-8), "nsv"),
        (params(2, SvdWhich::Largest, 0.0), "tol"),
        (
            SvdParams {
                anorm: Some(-1.0),
                ..params(2, SvdWhich::Largest, 1e-8)
            },
            "anorm",
        ),
    ] {
        match svds(&a, &p) {
            Err(SvdError::Solve(jdmg::JdError::InvalidParams { field: f, .. })) => {
                assert_eq!(f, field)
            }
            other => panic!("{field}: {other:?}"),
        }
    }
}

#[test]
fn a_spent_budget_returns_every_triplet_reached() {
    let g = GradSpec::parse("grad2d:30x30:0.01").unwrap();
    let a = g.matrix();
    let p = SvdParams {
        max_products: 40,
        ..params(4, SvdWhich::Smallest, 1e-12)
    };
    match svds(&a, &p) {
        Ok(partial) if partial.outcome == jdmg::Outcome::BudgetSpent => {
            assert_eq!(partial.wanted, 4);
            assert_eq!(partial.values.len(), 4);
            assert!(partial.nconverged() < 4);
            assert!(partial.residual_norms.iter().all(|r| r.is_finite()));
            let e = partial.into_converged().unwrap_err();
            assert!(matches!(e, SvdError::NotConverged(_)), "{e}");
            assert!(
                e.to_string().starts_with("not converged (budget spent): "),
                "{e}"
            );
        }
        other => panic!("{other:?}"),
    }
}

/// The grid gradient applied without storing it (no column norms: stage 1
/// runs unpreconditioned).
struct FreeGradient {
    a: CsrMatrix,
    at: CsrMatrix,
}

impl jdmg::RectOperator for FreeGradient {
    fn nrows(&self) -> usize {
        self.a.nrows()
    }
    fn ncols(&self) -> usize {
        self.a.ncols()
    }
    fn apply(&self, x: &[f64], y: &mut [f64], k: usize) {
        let (n, m) = (self.a.ncols(), self.a.nrows());
        for c in 0..k {
            self.a
                .mul_vec(&x[c * n..(c + 1) * n], &mut y[c * m..(c + 1) * m]);
        }
    }
    fn apply_transpose(&self, x: &[f64], y: &mut [f64], k: usize) {
        let (n, m) = (self.a.ncols(), self.a.nrows());
        for c in 0..k {
            self.at
                .mul_vec(&x[c * m..(c + 1) * m], &mut y[c * n..(c + 1) * n]);
        }
    }
}

#[test]
fn matrix_free_operator_gives_the_same_triplets() {
    let g = GradSpec::parse("grad2d:9x13:0.2").unwrap();
    let a = g.matrix();
    let truth = g.singular_values();
    for op in [
        FreeGradient {
            a: a.clone(),
            at: a.transpose(),
        },
        FreeGradient {
            a: a.transpose(),
            at: a.clone(),
        },
    ] {
        for which in [SvdWhich::Largest, SvdWhich::Smallest] {
            let s = jdmg::svds_operator(&op, &params(4, which, 1e-10)).unwrap();
            assert!(!s.stats.explicit_normal);
            for (got, want) in s.values.iter().zip(wanted(&truth, 4, which)) {
                assert!(
                    (got - want).abs() <= 1e-8 * want,
                    "{which:?}: {got} vs {want}"
                );
            }
            let (res, ou, ov) = audit(&op.a, &s);
            assert!(res <= 1e-10 * truth.last().unwrap() * 1.0001);
            assert!(ou < 1e-8 && ov < 1e-8);
        }
    }
}
