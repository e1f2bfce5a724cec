//! Every eigenvalue in an interval (`Solver::interval`): the exact set of
//! the closed-form spectra of lap3d and fem2d, multiplicities included,
//! whatever the slicing; an end at an eigenvalue; empty intervals; several
//! thread ranks; residuals and orthonormality recomputed from the vectors.

mod common;

use jdmg::slicing::{SliceMethod, SliceParams};
use jdmg::{ExecutionSettings, ProblemSettings};
use jdmg::{JdError, JdParams, Solver};
use lblib::ThreadComm;
use matrices::generate::generate;

fn params() -> JdParams {
    JdParams {
        problem: ProblemSettings {
            tol: 1e-10,
            ..Default::default()
        },
        ..JdParams::default()
    }
}

fn slices(per_slice: usize) -> SliceParams {
    SliceParams {
        per_slice,
        ..SliceParams::default()
    }
}

/// The returned eigenvalues equal `want` (ascending, same length) to `rel`.
fn assert_set(got: &[f64], want: &[f64], rel: f64, what: &str) {
    assert_eq!(
        got.len(),
        want.len(),
        "{what}: {} eigenvalues returned, {} in the interval",
        got.len(),
        want.len()
    );
    for (j, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= rel * w.abs().max(1.0),
            "{what}: eigenvalue {j} is {g}, the interval's is {w}"
        );
    }
}

/// lap3d:10 on [0, 1.2]: 17 eigenvalues, among them the sixfold 1.0888;
/// one slice, then slices of at most 2 and 5 (cuts through the multiplets'
/// neighbourhoods): the same exact set, orthonormal, true residuals within
/// the tolerance, every count in the report; by Lanczos and by Davidson.
#[test]
fn lap3d_interval_returns_the_exact_set_whatever_the_slicing() {
    let a = generate(&"lap3d:10".parse().unwrap()).unwrap();
    let all = common::lap3d_spectrum(10);
    let want: Vec<f64> = all.iter().copied().filter(|&l| l <= 1.2).collect();
    assert_eq!(want.len(), 17);
    let bound = 1e-10 * common::norm1(&a);
    for (per, method) in [
        (48, SliceMethod::Lanczos),
        (5, SliceMethod::Lanczos),
        (2, SliceMethod::Lanczos),
        (48, SliceMethod::Davidson),
        (5, SliceMethod::Davidson),
    ] {
        let sol = Solver::new(&a, &params())
            .interval(
                0.0,
                1.2,
                SliceParams {
                    per_slice: per,
                    method,
                    ..SliceParams::default()
                },
            )
            .run()
            .unwrap_or_else(|e| panic!("per_slice {per}, {method:?}: {e}"));
        assert_set(
            &sol.eigenvalues,
            &want,
            1e-9,
            &format!("per_slice {per}, {method:?}"),
        );
        common::assert_sliced_pairs(&a, &sol, bound);
        let iv = sol.stats.interval.expect("the interval report");
        assert_eq!(iv.count, 17);
        assert!(iv.slices >= 17usize.div_ceil(per).min(5), "{iv:?}");
        assert!(sol.converged.iter().all(|&c| c));
    }
}

/// An end at an eigenvalue (the sixfold 1.0888, given to 16 digits) takes
/// all of its copies in, at the lower end and at the upper end.
#[test]
fn an_end_at_a_multiple_eigenvalue_takes_every_copy() {
    let a = generate(&"lap3d:10".parse().unwrap()).unwrap();
    let all = common::lap3d_spectrum(10);
    let six = all[11];
    assert!((all[16] - six).abs() < 1e-12 && (all[17] - six).abs() > 1e-3);
    for (lo, hi) in [(0.9, six), (six, 1.2)] {
        let want: Vec<f64> = all
            .iter()
            .copied()
            .filter(|&l| l >= lo - 1e-12 && l <= hi + 1e-12)
            .collect();
        let sol = Solver::new(&a, &params())
            .interval(lo, hi, slices(3))
            .run()
            .unwrap_or_else(|e| panic!("[{lo}, {hi}]: {e}"));
        assert_set(&sol.eigenvalues, &want, 1e-9, &format!("[{lo}, {hi}]"));
        assert!(want.iter().filter(|&&l| (l - six).abs() < 1e-9).count() == 6);
    }
}

/// No eigenvalue in the interval (between two, below the spectrum, above
/// it, a single point): no pair, no solve, success.
#[test]
fn empty_intervals_return_no_pair() {
    let a = generate(&"lap3d:10".parse().unwrap()).unwrap();
    let all = common::lap3d_spectrum(10);
    let gap = (all[0] + 0.01, all[1] - 0.01);
    for (lo, hi) in [gap, (-5.0, -1.0), (100.0, 200.0), (0.3, 0.3)] {
        let sol = Solver::new(&a, &params())
            .interval(lo, hi, SliceParams::default())
            .run()
            .unwrap_or_else(|e| panic!("[{lo}, {hi}]: {e}"));
        assert!(
            sol.eigenvalues.is_empty(),
            "[{lo}, {hi}]: {:?}",
            sol.eigenvalues
        );
        let iv = sol.stats.interval.unwrap();
        assert_eq!((iv.count, iv.slices), (0, 0));
        assert_eq!(sol.stats.matvecs, 0);
    }
}

/// A reversed or non-finite interval is refused.
#[test]
fn a_bad_interval_is_refused() {
    let a = generate(&"lap3d:6".parse().unwrap()).unwrap();
    for (lo, hi) in [(1.0, 0.0), (f64::NAN, 1.0), (0.0, f64::INFINITY)] {
        let r = Solver::new(&a, &params())
            .interval(lo, hi, SliceParams::default())
            .run();
        assert!(
            matches!(r, Err(JdError::InvalidParams { .. })),
            "[{lo}, {hi}]: {r:?}"
        );
    }
}

/// K x = λ M x (fem2d:20, closed-form spectrum with double eigenvalues):
/// every eigenvalue in an interior interval, M-orthonormal, small backward
/// errors, in slices of at most 4.
#[test]
fn pencil_interval_against_the_closed_form() {
    let (k, m, mut ex) = common::fem_pair_exact("fem2d:20");
    ex.sort_by(f64::total_cmp);
    // ends in the middle of gaps near the 20th and 40th eigenvalues
    let gap_after = |from: usize| {
        let i = (from..ex.len() - 1)
            .find(|&i| ex[i + 1] - ex[i] > 1e-6 * ex[i])
            .unwrap();
        0.5 * (ex[i] + ex[i + 1])
    };
    let (lo, hi) = (gap_after(20), gap_after(40));
    let want: Vec<f64> = ex.iter().copied().filter(|&l| l >= lo && l <= hi).collect();
    assert!(want.len() >= 19, "{}", want.len());
    let sol = Solver::new(&k, &params())
        .mass(&m)
        .interval(lo, hi, slices(4))
        .run()
        .unwrap_or_else(|e| panic!("{e}"));
    assert_set(&sol.eigenvalues, &want, 1e-9, "fem2d:20");
    let (back, orth) = common::ghep_errors(&k, &m, &sol);
    assert!(orth < 1e-9, "‖XᵀMX − I‖ = {orth:e}");
    assert!(back.iter().all(|&b| b < 1e-9), "{back:?}");
}

/// Two and three thread ranks: the same set as one process, each rank
/// holding its rows.
#[test]
fn thread_ranks_return_the_serial_set() {
    let a = generate(&"lap3d:8".parse().unwrap()).unwrap();
    let all = common::lap3d_spectrum(8);
    let want: Vec<f64> = all.iter().copied().filter(|&l| l <= 1.5).collect();
    for ranks in [2, 3] {
        let out = ThreadComm::run(ranks, |comm| {
            let s = Solver::new(&a, &params())
                .comm(&comm)
                .interval(0.0, 1.5, slices(6))
                .run();
            jdmg::gather_eigenvectors(&comm, a.nrows(), s).unwrap_or_else(|e| panic!("{e}"))
        });
        for (r, sol) in out.iter().enumerate() {
            assert_set(
                &sol.eigenvalues,
                &want,
                1e-9,
                &format!("{ranks} ranks, rank {r}"),
            );
            common::assert_sliced_pairs(&a, sol, 1e-10 * common::norm1(&a));
        }
    }
}

/// Index ranges (`Solver::indices`): the smallest 17 of lap3d:10, a range
/// whose ends cut through the sixfold 1.0888 and a fourfold eigenvalue, and
/// one single index; of a pencil too (fem2d:20, indices 10..=30). The
/// exact eigenvalues of those indices, orthonormal, with the first index in
/// the report; a range past n is refused.
#[test]
fn index_ranges_return_the_eigenvalues_of_those_indices() {
    let a = generate(&"lap3d:10".parse().unwrap()).unwrap();
    let all = common::lap3d_spectrum(10);
    let six = all.iter().position(|&l| (l - 1.0888).abs() < 1e-3).unwrap();
    let bound = 1e-10 * common::norm1(&a);
    for (first, last) in [(0, 16), (six + 2, six + 12), (40, 40)] {
        let sol = Solver::new(&a, &params())
            .indices(first, last, slices(5))
            .run()
            .unwrap_or_else(|e| panic!("{first}..={last}: {e}"));
        assert_set(
            &sol.eigenvalues,
            &all[first..=last],
            1e-9,
            &format!("{first}..={last}"),
        );
        common::assert_sliced_pairs(&a, &sol, bound);
        let iv = sol.stats.interval.unwrap();
        assert_eq!((iv.first_index, iv.count), (Some(first), last + 1 - first));
    }
    let r = Solver::new(&a, &params())
        .indices(990, 1000, SliceParams::default())
        .run();
    assert!(matches!(r, Err(JdError::InvalidParams { .. })), "{r:?}");

    let (k, m, mut ex) = common::fem_pair_exact("fem2d:20");
    ex.sort_by(f64::total_cmp);
    let sol = Solver::new(&k, &params())
        .mass(&m)
        .indices(10, 30, SliceParams::default())
        .run()
        .unwrap_or_else(|e| panic!("{e}"));
    assert_set(&sol.eigenvalues, &ex[10..=30], 1e-9, "fem2d:20 10..=30");
    let (back, orth) = common::ghep_errors(&k, &m, &sol);
    assert!(orth < 1e-9, "‖XᵀMX − I‖ = {orth:e}");
    assert!(back.iter().all(|&b| b < 1e-9), "{back:?}");
}

/// From `slice_from` wanted pairs on, the smallest or largest of a matrix
/// come from slicing over their indices: the exact set, ascending for
/// `Smallest`, descending for `Largest`, with the interval report; below
/// it, the Davidson loop (no report).
#[test]
fn many_pairs_at_one_end_are_solved_by_slicing_over_their_indices() {
    use jdmg::params::Target;
    let a = generate(&"lap3d:10".parse().unwrap()).unwrap();
    let all = common::lap3d_spectrum(10);
    let bound = 1e-10 * common::norm1(&a);
    for target in [Target::Smallest, Target::Largest] {
        let p = JdParams {
            problem: ProblemSettings {
                nev: 20,
                target,
                ..params().problem
            },
            execution: ExecutionSettings {
                slice_from: 10,
                ..params().execution
            },
            ..params()
        };
        let sol = Solver::new(&a, &p)
            .run()
            .unwrap_or_else(|e| panic!("{target:?}: {e}"));
        let want: Vec<f64> = match target {
            Target::Smallest => all[..20].to_vec(),
            _ => all.iter().rev().take(20).copied().collect(),
        };
        assert_set(&sol.eigenvalues, &want, 1e-9, &format!("{target:?}"));
        common::assert_sliced_pairs(&a, &sol, bound);
        let iv = sol.stats.interval.expect("slicing's report");
        assert_eq!(iv.count, 20);
    }
    let sol = Solver::new(
        &a,
        &JdParams {
            problem: ProblemSettings {
                nev: 20,
                ..params().problem
            },
            ..params()
        },
    )
    .run()
    .unwrap();
    assert!(sol.stats.interval.is_none());
    assert_set(&sol.eigenvalues, &all[..20], 1e-9, "Davidson");
}

/// Solve groups (2 ranks in 2 groups, 4 ranks in 2 groups of 2 with the
/// hierarchical fine-grain world): each group solves its own slices, shared
/// by measured rates (a probe round, then the rest) or equally; every
/// process gets its rows of all the pairs: the exact set, orthonormal,
/// within the tolerance, as one process finds it.
#[test]
fn solve_groups_share_the_slices_and_return_the_serial_set() {
    use jdmg::slice_groups::GroupSplit;
    use jdmg::MultigrainParams;
    let a = generate(&"lap3d:10".parse().unwrap()).unwrap();
    let all = common::lap3d_spectrum(10);
    let want: Vec<f64> = all.iter().copied().filter(|&l| l <= 1.9).collect();
    assert!(want.len() >= 32, "{}", want.len());
    for (ranks, ngroups) in [(2, 2), (4, 2)] {
        for split in [GroupSplit::Rates, GroupSplit::Equal] {
            let g = jdmg::parse_groups(&ngroups.to_string(), ranks, 1).unwrap();
            let out = ThreadComm::run(ranks, |comm| {
                let mg = MultigrainParams {
                    groups: g.clone(),
                    hierarchical: true,
                    ..MultigrainParams::default()
                };
                let world = jdmg::fine_world(&comm, Some(&g), true, 0.0);
                let s = Solver::new(&a, &params())
                    .comm(&world)
                    .groups(&comm, &mg)
                    .interval(
                        0.0,
                        1.9,
                        SliceParams {
                            per_slice: 8,
                            split,
                            ..SliceParams::default()
                        },
                    )
                    .run();
                jdmg::gather_eigenvectors(&world, a.nrows(), s).unwrap_or_else(|e| panic!("{e}"))
            });
            for (r, sol) in out.iter().enumerate() {
                let what = format!("{ranks} ranks, {ngroups} groups, {split:?}, rank {r}");
                assert_set(&sol.eigenvalues, &want, 1e-9, &what);
                common::assert_sliced_pairs(&a, sol, 1e-10 * common::norm1(&a));
                let iv = sol.stats.interval.unwrap();
                assert_eq!((iv.groups, iv.count), (ngroups, want.len()), "{what}");
            }
        }
    }
}
