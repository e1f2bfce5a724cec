//! Every eigenvalue in an interval [a, b], certified complete: spectrum
//! slicing (Campos and Roman, "Strategies for spectrum slicing based on
//! restarted Lanczos methods", Numerical Algorithms 60, 2012, §2–§3; SLEPc's
//! Krylov-Schur with `EPSSetInterval`).
//!
//! **Count.** Sylvester's law of inertia: the negative pivots of the LDLᵀ
//! factorization of A − tI (of K − tM, M positive definite) count the
//! eigenvalues below t ([`crate::st::ShiftInvert::eigenvalues_below`]). The
//! interval holds ν(b⁺) − ν(a⁻) of them, multiplicities included, with
//! a⁻ = a − δ and b⁺ = b + δ, δ = [`END_ROUNDINGS`] roundings of the
//! spectrum's scale: an eigenvalue at an end, to working precision, is inside.
//! Where LDLᵀ (which does not pivot) is not backward stable at a point, the
//! point moves outward (upward for a cut) by steps δ, 4δ, 16δ, …; the ends
//! counted are in the report, and every eigenvalue between them is returned.
//!
//! **Slices.** [a⁻, b⁺) is cut into slices of at most
//! [`SliceParams::per_slice`] eigenvalues, where the counts, interpolated
//! linearly between the points counted so far, reach equal shares (one
//! count per cut, down to a thousandth of the interval: a multiple
//! eigenvalue cannot be cut); neighbours that hold at most `per_slice`
//! together are merged. Each slice [tᵢ, tᵢ₊₁) holding cᵢ eigenvalues is
//! solved by shift-and-invert ([`crate::st`]) at its centre σ for the cᵢ
//! eigenvalues nearest σ (the largest in magnitude of B = (A − σI)⁻¹):
//! every eigenvalue of the slice lies within half its width of σ, every
//! other one farther, so they are the slice's. (A shift at the lower end
//! would make B's wanted end its largest eigenvalues, with the slices below
//! as large negative eigenvalues of B that the Krylov space finds first and
//! restarts throw away: lap3d:30 on [0, 0.8] in 4 slices took 2 160 products
//! there against 1 280 at the centres.) For A x = λ x the centre is that of
//! the slice within Gershgorin's bounds, so that an interval reaching far
//! past the spectrum does not put σ far from its eigenvalues.
//! [`SliceMethod::Lanczos`] (the default)
//! runs block thick-restart Lanczos on B ([`crate::lanczos`]), `Davidson`
//! the Davidson loop. Empty slices cost nothing but their count. Each
//! slice's vectors are made orthogonal (M-orthogonal) to the slice before
//! (eigenvectors from separate solves are orthogonal only to about their
//! residuals over the gap).
//!
//! **Index ranges** ([`Range::Indices`]): the interval holding the
//! eigenvalues of indices i..=j is bracketed by counts first (Gershgorin's
//! bounds, then counts interpolated towards i and j + 1), and those counts
//! serve as cuts.
//!
//! **Certificate.** A slice is accepted when its cᵢ converged pairs (whose
//! vectors are orthonormal, or M-orthonormal) lie in the slice, each within
//! its error bound ([`crate::certify`]): cᵢ orthonormal eigenvectors there and
//! cᵢ eigenvalues by inertia leave none out. Otherwise the slice is solved
//! again from its vectors for more pairs and those inside are kept; a second
//! miss ends the solve with `Outcome::Incomplete` and every pair found so far.
//!
//! The slices are solved one after the other, each over every process of the
//! communicator (rank 0 factors, as [`crate::Solver::shift_invert`]).

use crate::params::{ExecutionSettings, ProblemSettings};
use std::time::Instant;

use lblib::{Comm, ReduceOp};
use matrices::CsrMatrix;
use precond::Operator;
use serde::{Deserialize, Serialize};

use crate::certify::{count_below, error_bounds, global_block};
use crate::error::JdError;
use crate::jd::{Hooks, Observer, Spaces};
use crate::params::{JdParams, Target, Verify};
pub use crate::params::{SliceMethod, SliceParams};
use crate::setup::mass_rows;
pub use crate::solution::IntervalReport;
use crate::solution::{Outcome, Solution, Stats};

/// The ends move out by this many roundings (ε times the spectrum's scale)
/// before they are counted: an eigenvalue at an end is inside.
pub const END_ROUNDINGS: f64 = 1e3;

/// Which eigenvalues an interval solve returns.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Range {
    /// Every eigenvalue in [lower, upper].
    Values(f64, f64),
    /// λ_first ≤ … ≤ λ_last of the ascending spectrum (0-based indices,
    /// multiplicities counted; `scipy.linalg.eigh`'s `subset_by_index`).
    Indices(usize, usize),
}

/// One slice: [lo, hi) and the eigenvalues below each end.
#[derive(Debug, Clone, Copy)]
struct Slice {
    lo: f64,
    hi: f64,
    below_lo: usize,
    below_hi: usize,
    /// The shift of its solve: the centre of [lo, hi) within the
    /// spectrum's bounds.
    sigma: f64,
}

impl Slice {
    fn count(&self) -> usize {
        self.below_hi.saturating_sub(self.below_lo)
    }
}

/// The narrowest slice halved, as a fraction of the interval: a multiple
/// eigenvalue (or a tight cluster) holding more than `per_slice` cannot be
/// cut, and halving towards it would put slice ends, and the shifts of
/// their solves, ever nearer to it.
const MIN_SLICE: f64 = 1e-3;

/// Points tried by [`count_at`]: t, then t moved by δ, 4δ, 16δ, … (up to
/// 4¹⁴δ ≈ 7·10⁻⁵ of the spectrum's scale).
const MOVES: usize = 16;

/// The eigenvalues below `t` by inertia, moving `t` by growing multiples of
/// `delta` in the direction `dir` (±1) while LDLᵀ gives no inertia there
/// (LDLᵀ does not pivot: a point at an eigenvalue of a leading block, such
/// as 2 for a grid Laplacian, gives a tiny pivot); the point used and the
/// count. Collective.
#[allow(clippy::too_many_arguments)]
pub(crate) fn count_at<C: Comm + ?Sized>(
    k: &CsrMatrix,
    mass: Option<&CsrMatrix>,
    t: f64,
    dir: f64,
    delta: f64,
    threads: usize,
    comm: &C,
    factored: &mut usize,
) -> Result<(f64, usize), JdError> {
    let mut step = 0.0;
    for _ in 0..MOVES {
        let at = t + dir * step;
        *factored += 1;
        if let Some(c) = count_below(k, mass, at, threads, comm) {
            return Ok((at, c));
        }
        step = if step == 0.0 { delta } else { 4.0 * step };
    }
    Err(JdError::Factorization(format!(
        "no LDLᵀ factorization near {t:e} gives the inertia (zero or unstable pivots at \
         {MOVES} points up to {step:e} away): the count of the interval is unknown"
    )))
}

/// Every eigenpair of A (of the pencil (K, M)) in [`lower`, `upper`],
/// ascending, certified complete by inertia (module documentation); the
/// report in `stats.interval`. `params.nev` and `params.target` are not used
/// (the count decides); `tol`, `conv` and the rest apply to every slice's
/// shift-and-invert solve. `spaces.deflation` is kept out of every slice
/// (the count then includes the deflated eigenvalues: pass none unless they
/// lie outside); start vectors are not used. `observer` sees every slice's
/// iterations. Collective over `comm`; the eigenvectors hold this process's
/// rows.
///
/// # Errors
/// `InvalidParams` for an empty or non-finite interval or start vectors;
/// `Factorization` when no point near an end or cut gives the inertia; as
/// [`crate::Solver::shift_invert`] for every slice. A slice's solve that
/// misses eigenvalues twice ends the solve with [`Outcome::Incomplete`], one
/// that runs out of `max_matvecs` (shared by all slices) or is stopped with
/// its outcome, and the pairs found so far.
#[allow(clippy::too_many_arguments)]
pub(crate) fn run<C: Comm + ?Sized>(
    k: &CsrMatrix,
    mass: Option<&CsrMatrix>,
    range: Range,
    comm: &C,
    params: &JdParams,
    slicing: &SliceParams,
    spaces: Spaces<'_>,
    observer: Option<Observer<'_>>,
) -> Result<Solution, JdError> {
    match range {
        Range::Values(lower, upper) => run_values(
            k,
            mass,
            lower,
            upper,
            &Counted::default(),
            comm,
            params,
            slicing,
            spaces,
            observer,
        ),
        Range::Indices(first, last) => {
            let t0 = Instant::now();
            crate::setup::check_matrix(k, params)?;
            if let Some(m) = mass {
                crate::setup::check_pair(k, m, params)?;
            }
            let n = k.nrows();
            range.check(n)?;
            let (known, counts) = bracket(k, mass, first, last, params.execution.threads, comm)?;
            let Some(((lower, _), (upper, _))) = known.ends else {
                unreachable!("a bracket has its ends")
            };
            let res = run_values(
                k, mass, lower, upper, &known, comm, params, slicing, spaces, observer,
            );
            let pick = |mut sol: Solution| {
                let mut iv = sol.stats.interval.unwrap_or_default();
                // pair j of the interval has index iv.below + j
                let from = first.saturating_sub(iv.below).min(sol.eigenvalues.len());
                let to = (last + 1)
                    .saturating_sub(iv.below)
                    .min(sol.eigenvalues.len());
                keep_pairs(&mut sol, from..to);
                iv.count = last + 1 - first;
                iv.first_index = Some(first);
                iv.counts += counts;
                iv.count_seconds += t0.elapsed().as_secs_f64() - sol.stats.wall_seconds;
                sol.stats.interval = Some(iv);
                sol.stats.wall_seconds = t0.elapsed().as_secs_f64();
                sol
            };
            Ok(settle(pick(res?), last + 1 - first))
        }
    }
}

impl Range {
    /// `InvalidParams` (field `interval`) unless the interval is finite with
    /// lower ≤ upper, or the indices satisfy first ≤ last < n.
    pub(crate) fn check(&self, n: usize) -> Result<(), JdError> {
        let why = match *self {
            Range::Values(lower, upper)
                if !(lower.is_finite() && upper.is_finite() && lower <= upper) =>
            {
                format!("the interval [{lower}, {upper}] must be finite with lower ≤ upper")
            }
            Range::Indices(first, last) if first > last || last >= n => {
                format!("the index range {first}..={last} must have first ≤ last < n = {n}")
            }
            _ => return Ok(()),
        };
        Err(JdError::invalid("interval", why))
    }
}

/// How many more eigenvalues than asked an index range's bracket may hold
/// at each end before its search stops: 2, or 2 % of the range.
fn bracket_slack(wanted: usize) -> usize {
    (wanted / 50).max(2)
}

/// Bounds [lower, upper] holding the eigenvalues of indices `first..=last`
/// (ascending, 0-based), found by inertia: from the spectrum's Gershgorin
/// bounds (for a pencil, ±‖K‖₁/‖M‖₁ doubled until the counts bracket), a
/// search by interpolation of the counts (safeguarded towards bisection)
/// until at most [`bracket_slack`] eigenvalues more than asked lie inside
/// at each end, or the bracket is a thousandth of the spectrum's width. The
/// ends with their counts, every point counted (cuts for the slices), and
/// the LDLᵀ factorizations spent. Collective.
pub(crate) fn bracket<C: Comm + ?Sized>(
    k: &CsrMatrix,
    mass: Option<&CsrMatrix>,
    first: usize,
    last: usize,
    threads: usize,
    comm: &C,
) -> Result<(Counted, usize), JdError> {
    let mut factored = 0;
    let knorm = crate::st::norm1(k);
    let (mut lo, mut hi) = match mass {
        None => gershgorin(k),
        Some(m) => {
            let s = knorm / crate::st::norm1(m).max(f64::MIN_POSITIVE);
            (-s, s)
        }
    };
    let width0 = (hi - lo).max(f64::MIN_POSITIVE);
    let delta =
        END_ROUNDINGS * f64::EPSILON * knorm.max(lo.abs()).max(hi.abs()).max(f64::MIN_POSITIVE);
    lo -= delta;
    hi += delta;
    let seen = std::cell::RefCell::new(Vec::new());
    let count = |t: f64, dir: f64, f: &mut usize| {
        let p = count_at(k, mass, t, dir, delta, threads, comm, f)?;
        seen.borrow_mut().push(p);
        Ok::<_, JdError>(p)
    };
    let (mut lo, mut c_lo) = count(lo, -1.0, &mut factored)?;
    let (mut hi, mut c_hi) = count(hi, 1.0, &mut factored)?;
    // a pencil's ends: doubled out until nothing is below lo and all below hi
    for _ in 0..64 {
        if c_lo <= first && c_hi > last {
            break;
        }
        let w = hi - lo;
        if c_lo > first {
            (lo, c_lo) = count(lo - w, -1.0, &mut factored)?;
        }
        if c_hi <= last {
            (hi, c_hi) = count(hi + w, 1.0, &mut factored)?;
        }
    }
    if c_lo > first || c_hi <= last {
        return Err(JdError::Factorization(format!(
            "no bracket of the eigenvalues {first}..={last} found by inertia in [{lo:e}, {hi:e}]"
        )));
    }
    let slack = bracket_slack(last + 1 - first);
    let min_width = MIN_SLICE * width0;
    // Upper end: the least t with count(t) > last, to within the slack.
    let (mut a, mut ca, mut b, mut cb) = (lo, c_lo, hi, c_hi);
    while cb > last + 1 + slack && b - a > min_width {
        let t = interpolate(a, ca, b, cb, last as f64 + 1.0 + 0.5 * slack as f64);
        let (t, c) = count(t, 1.0, &mut factored)?;
        if t <= a || t >= b {
            break;
        }
        if c > last {
            (b, cb) = (t, c);
        } else {
            (a, ca) = (t, c);
        }
    }
    let upper = b;
    // Lower end: the greatest t with count(t) ≤ first, to within the slack.
    let (mut a, mut ca, mut b2, mut cb2) = (lo, c_lo, b, cb);
    while ca + slack < first && b2 - a > min_width {
        let t = interpolate(a, ca, b2, cb2, first as f64 - 0.5 * slack as f64);
        let (t, c) = count(t, -1.0, &mut factored)?;
        if t <= a || t >= b2 {
            break;
        }
        if c <= first {
            (a, ca) = (t, c);
        } else {
            (b2, cb2) = (t, c);
        }
    }
    let inside = seen.into_inner();
    Ok((
        Counted {
            ends: Some(((a, ca), (upper, cb))),
            inside,
        },
        factored,
    ))
}

/// The point where the counts, linear between (a, ca) and (b, cb), reach
/// `target`, kept at least a sixteenth of the width from either end.
pub(crate) fn interpolate(a: f64, ca: usize, b: f64, cb: usize, target: f64) -> f64 {
    let f = if cb > ca {
        (target - ca as f64) / (cb - ca) as f64
    } else {
        0.5
    };
    a + (b - a) * f.clamp(1.0 / 16.0, 15.0 / 16.0)
}

/// Gershgorin's bounds of the spectrum of a symmetric matrix.
fn gershgorin(a: &CsrMatrix) -> (f64, f64) {
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for i in 0..a.nrows() {
        let (cols, vals) = a.row(i);
        let (mut d, mut r) = (0.0, 0.0);
        for (&j, &v) in cols.iter().zip(vals) {
            if j as usize == i {
                d += v;
            } else {
                r += v.abs();
            }
        }
        lo = lo.min(d - r);
        hi = hi.max(d + r);
    }
    (lo, hi)
}

/// Counts already made by the caller: the ends (point and eigenvalues
/// below it), used instead of counting at [lower − δ, upper + δ], and points
/// inside that may serve as cuts.
#[derive(Debug, Clone, Default)]
pub(crate) struct Counted {
    pub ends: Option<((f64, usize), (f64, usize))>,
    pub inside: Vec<(f64, usize)>,
}

/// The slice ends from `a` to `b` (points and eigenvalues below them): the
/// `known` counts inside, then a cut wherever a slice holds more than
/// `per` eigenvalues, where the counts, interpolated linearly between its
/// ends, reach an equal share of its eigenvalues (a cut that lands off the
/// share is cut again; slices narrower than [`MIN_SLICE`] of the interval
/// are not); last, neighbours that hold at most `per` together are merged.
/// Collective.
#[allow(clippy::too_many_arguments)]
fn cuts<C: Comm + ?Sized>(
    k: &CsrMatrix,
    mass: Option<&CsrMatrix>,
    a: (f64, usize),
    b: (f64, usize),
    known: &[(f64, usize)],
    per: usize,
    delta: f64,
    threads: usize,
    comm: &C,
    factored: &mut usize,
) -> Result<Vec<(f64, usize)>, JdError> {
    let mut ends = vec![a];
    ends.extend(known.iter().copied().filter(|&(t, _)| t > a.0 && t < b.0));
    ends.push(b);
    ends.sort_by(|x, y| x.0.total_cmp(&y.0));
    ends.dedup_by(|x, y| x.0 == y.0);
    let min_width = (MIN_SLICE * (b.0 - a.0)).max(4.0 * delta);
    let mut i = 0;
    while i + 1 < ends.len() {
        let ((lo, clo), (hi, chi)) = (ends[i], ends[i + 1]);
        let c = chi.saturating_sub(clo);
        if c > per && hi - lo > min_width {
            let share = c as f64 / c.div_ceil(per) as f64;
            let t = interpolate(lo, clo, hi, chi, clo as f64 + share);
            let (t, ct) = count_at(k, mass, t, 1.0, delta, threads, comm, factored)?;
            if t > lo && t < hi {
                ends.insert(i + 1, (t, ct));
                continue;
            }
        }
        i += 1;
    }
    let last = ends.len() - 1;
    let mut merged = vec![ends[0]];
    for w in 1..last {
        if ends[w + 1].1.saturating_sub(merged[merged.len() - 1].1) > per {
            merged.push(ends[w]);
        }
    }
    merged.push(ends[last]);
    Ok(merged)
}

/// δ of the module documentation: [`END_ROUNDINGS`] roundings of the
/// spectrum's scale (‖K‖₁/‖M‖₁ bounds it for a pencil within κ(M)).
pub(crate) fn end_delta(k: &CsrMatrix, mass: Option<&CsrMatrix>, lower: f64, upper: f64) -> f64 {
    let knorm = crate::st::norm1(k);
    let scale = match mass {
        Some(m) => knorm / crate::st::norm1(m).max(f64::MIN_POSITIVE),
        None => knorm,
    }
    .max(lower.abs())
    .max(upper.abs());
    END_ROUNDINGS * f64::EPSILON * scale.max(f64::MIN_POSITIVE)
}

/// [`run`] for [`Range::Values`].
#[allow(clippy::too_many_arguments)]
pub(crate) fn run_values<C: Comm + ?Sized>(
    k: &CsrMatrix,
    mass: Option<&CsrMatrix>,
    lower: f64,
    upper: f64,
    known: &Counted,
    comm: &C,
    params: &JdParams,
    slicing: &SliceParams,
    spaces: Spaces<'_>,
    mut observer: Option<Observer<'_>>,
) -> Result<Solution, JdError> {
    let t0 = Instant::now();
    Range::Values(lower, upper).check(k.nrows())?;
    if !spaces.initial.is_empty() {
        return Err(JdError::invalid(
            "initial",
            "start vectors are not used by an interval solve (each slice starts from its own)",
        ));
    }
    crate::setup::check_matrix(k, params)?;
    if let Some(m) = mass {
        crate::setup::check_pair(k, m, params)?;
    }
    let per = slicing.per_slice.max(1);
    let threads = params.execution.threads;
    let Sliced {
        a,
        below_a,
        b,
        below_b,
        slices,
        factored,
    } = slice_interval(k, mass, (lower, upper), known, comm, threads, per)?;
    let total = below_b.saturating_sub(below_a);
    let count_seconds = t0.elapsed().as_secs_f64();
    let mut report = IntervalReport {
        lower,
        upper,
        counted_lower: a,
        counted_upper: b,
        count: total,
        slices: 0,
        counts: factored,
        retried: 0,
        count_seconds,
        below: below_a,
        first_index: None,
        groups: 0,
        imbalance_percent: 0.0,
    };
    let mut out: Option<Solution> = None;
    let mut used = 0u64;
    // M's rows on this process, for the M-orthogonality across slices
    let mrows = mass_rows(k, mass, comm, params, per)?;
    let mop = mrows.as_ref().map(|r| &r.op as &dyn Operator);
    // columns of the previous slice's pairs in the accumulated result
    let mut prev = 0..0;
    for s in slices.iter().filter(|s| s.count() > 0) {
        report.slices += 1;
        let budget = params
            .execution
            .matvec_budget(k.nrows(), total)
            .saturating_sub(used);
        let res = solve_slice(
            k,
            mass,
            s,
            comm,
            params,
            slicing,
            budget,
            spaces,
            reborrow(&mut observer),
            &mut report,
        );
        let sol = res?;
        used += sol.stats.matvecs;
        let outcome = sol.outcome;
        let mut acc = accumulate(out.take(), sol, &mut prev, mop, comm, threads);
        if outcome != Outcome::Converged {
            // every pair found so far, the failed slice's flagged
            acc.outcome = outcome;
            return Ok(finish(acc, total, report, t0));
        }
        out = Some(acc);
    }
    let sol = match out {
        Some(s) => s,
        None => empty(comm, k)?,
    };
    Ok(finish(sol, total, report, t0))
}

/// The counted ends of an interval and its slices.
struct Sliced {
    /// The lower end counted and the eigenvalues below it.
    a: f64,
    below_a: usize,
    /// The upper end counted and the eigenvalues below it.
    b: f64,
    below_b: usize,
    slices: Vec<Slice>,
    /// Factorizations done for the counts.
    factored: usize,
}

/// Counts the eigenvalues below the ends of `interval` ([lower, upper], a
/// little outside it, or as `known` counted them: an index range's bracket)
/// and cuts it into slices of at most `per` eigenvalues (see [`cuts`]).
/// Collective.
///
/// # Errors
/// As [`count_at`].
fn slice_interval<C: Comm + ?Sized>(
    k: &CsrMatrix,
    mass: Option<&CsrMatrix>,
    (lower, upper): (f64, f64),
    known: &Counted,
    comm: &C,
    threads: usize,
    per: usize,
) -> Result<Sliced, JdError> {
    let delta = end_delta(k, mass, lower, upper);
    let mut factored = 0;
    let (a, below_a) = match known.ends {
        Some((lo, _)) => lo,
        None => count_at(
            k,
            mass,
            lower - delta,
            -1.0,
            delta,
            threads,
            comm,
            &mut factored,
        )?,
    };
    let (b, below_b) = match known.ends {
        Some((_, hi)) => hi,
        None => count_at(
            k,
            mass,
            upper + delta,
            1.0,
            delta,
            threads,
            comm,
            &mut factored,
        )?,
    };
    let ends = cuts(
        k,
        mass,
        (a, below_a),
        (b, below_b),
        &known.inside,
        per,
        delta,
        threads,
        comm,
        &mut factored,
    )?;
    let (low, high) = match mass {
        None => gershgorin(k),
        Some(_) => (f64::NEG_INFINITY, f64::INFINITY),
    };
    let slices: Vec<Slice> = ends
        .windows(2)
        .map(|w| {
            let (lo, hi) = (w[0].0, w[1].0);
            let centre = 0.5 * (lo.max(low) + hi.min(high));
            Slice {
                lo,
                hi,
                below_lo: w[0].1,
                below_hi: w[1].1,
                sigma: if centre > lo && centre < hi {
                    centre
                } else {
                    0.5 * (lo + hi)
                },
            }
        })
        .collect();
    Ok(Sliced {
        a,
        below_a,
        b,
        below_b,
        slices,
        factored,
    })
}

/// `sol`, the next slice's pairs, appended to `acc`, the pairs so far (or
/// alone), after being made orthogonal (M-orthogonal with `mop`) to the
/// previous slice's columns `prev` of `acc`; `prev` becomes its columns.
/// Collective.
fn accumulate<C: Comm + ?Sized>(
    acc: Option<Solution>,
    mut sol: Solution,
    prev: &mut std::ops::Range<usize>,
    mop: Option<&dyn Operator>,
    comm: &C,
    threads: usize,
) -> Solution {
    match acc {
        None => {
            *prev = 0..sol.eigenvalues.len();
            sol
        }
        Some(acc) => {
            orthogonalize_across(&acc, prev.clone(), &mut sol, mop, comm, threads);
            let at = acc.eigenvalues.len();
            *prev = at..at + sol.eigenvalues.len();
            append(acc, sol)
        }
    }
}

/// Shift-and-invert at the slice's centre for its count of eigenvalues
/// nearest it, and a second solve from those vectors for more pairs when
/// some returned pairs lie outside.
/// Collective.
#[allow(clippy::too_many_arguments)]
fn solve_slice<C: Comm + ?Sized>(
    k: &CsrMatrix,
    mass: Option<&CsrMatrix>,
    s: &Slice,
    comm: &C,
    params: &JdParams,
    slicing: &SliceParams,
    budget: u64,
    spaces: Spaces<'_>,
    mut observer: Option<Observer<'_>>,
    report: &mut IntervalReport,
) -> Result<Solution, JdError> {
    let c = s.count();
    // the c eigenvalues nearest the centre are the slice's
    let sigma = s.sigma;
    let n = k.nrows();
    // The count certifies the slice: no verification passes on B (which for
    // its largest eigenvalues in magnitude would go on to the whole rest of
    // A's spectrum, crowded near 0).
    let sub = |nev: usize| JdParams {
        problem: ProblemSettings {
            nev,
            target: Target::Closest(sigma),
            verify: Verify::Never,
            ..params.problem
        },
        execution: ExecutionSettings {
            max_matvecs: Some(budget),
            ..params.execution
        },
        ..params.clone()
    };
    let defl = Spaces {
        initial: &[],
        deflation: spaces.deflation,
    };
    let first = crate::st::run_with(
        k,
        mass,
        sigma,
        comm,
        &sub(c),
        defl,
        Hooks {
            observer: reborrow(&mut observer),
            ..Hooks::default()
        },
        slicing.method,
    )?;
    if !first.is_converged() {
        return Ok(first);
    }
    let (mut sol, inside) = keep_inside(first, s, mass.is_some(), comm);
    if inside == c {
        return Ok(sol);
    }
    // Missed eigenvalues: again from the vectors found, for more pairs.
    report.retried += 1;
    let more = (c + 2 * (c - inside.min(c)) + 2).min(n.saturating_sub(spaces_cols(spaces, n)));
    let x0 = global_block(
        comm,
        &sol.eigenvectors,
        sol.n_local,
        sol.row_offset,
        n,
        sol.eigenvalues.len(),
    );
    let again = crate::st::run_with(
        k,
        mass,
        sigma,
        comm,
        &JdParams {
            execution: ExecutionSettings {
                max_matvecs: Some(budget.saturating_sub(sol.stats.matvecs)),
                ..sub(more).execution
            },
            ..sub(more)
        },
        Spaces {
            initial: &x0,
            deflation: spaces.deflation,
        },
        Hooks {
            observer,
            ..Hooks::default()
        },
        slicing.method,
    );
    let spent = sol.stats.clone();
    let (mut again, inside) = keep_inside(again?, s, mass.is_some(), comm);
    absorb(&mut again.stats, &spent);
    sol = again;
    sol.wanted = c;
    if sol.outcome == Outcome::Stopped {
        return Ok(sol);
    }
    if inside == c {
        sol.outcome = Outcome::Converged;
    } else {
        sol.converged.iter_mut().for_each(|f| *f = false);
        if sol.is_converged() {
            sol.outcome = Outcome::Incomplete;
        }
    }
    Ok(sol)
}

/// Makes the eigenvectors of `next` (one slice's) orthogonal (M-orthogonal)
/// to those of the slice before it (columns `prev` of `acc`), then
/// orthonormal again among themselves (Löwdin: X G^(−1/2), which moves each
/// vector least). Eigenvectors of distinct eigenvalues from separate solves
/// are orthogonal only to about (rᵢ + rⱼ)/|λᵢ − λⱼ|, which near a cut can
/// exceed rounding; a vector moved by ε towards another moves its residual
/// by ε·|λᵢ − λⱼ| at most. Slices further apart are a whole slice apart.
/// Nothing is done when the overlap is already at rounding. Collective.
fn orthogonalize_across<C: Comm + ?Sized>(
    acc: &Solution,
    prev: std::ops::Range<usize>,
    next: &mut Solution,
    mass: Option<&dyn Operator>,
    comm: &C,
    threads: usize,
) {
    let nl = next.n_local;
    let q = next.eigenvalues.len();
    orthogonalize_block(
        &acc.eigenvectors[prev.start * nl..prev.end * nl],
        &mut next.eigenvectors[..q * nl],
        nl,
        mass,
        comm,
        threads,
    );
}

/// [`orthogonalize_across`] on blocks: `x` (nl rows, column-major) against
/// `pv`, then orthonormalized.
pub(crate) fn orthogonalize_block<C: Comm + ?Sized>(
    pv: &[f64],
    x: &mut [f64],
    nl: usize,
    mass: Option<&dyn Operator>,
    comm: &C,
    threads: usize,
) {
    use crate::dense::{gemm_nn_in_place, gemm_sub, gemm_tn, sym_eig, IN_PLACE_ROWS};
    let (p, q) = (
        pv.len().checked_div(nl).unwrap_or(0),
        x.len().checked_div(nl).unwrap_or(0),
    );
    if p == 0 || q == 0 {
        return;
    }
    let image = |x: &[f64]| -> Vec<f64> {
        match mass {
            Some(m) => {
                let mut y = vec![0.0; x.len()];
                m.apply_block(x, &mut y, x.len() / nl.max(1));
                y
            }
            None => x.to_vec(),
        }
    };
    let mx = image(x);
    let mut c = vec![0.0; p * q];
    gemm_tn(&mut c, pv, nl, p, &mx, q, threads);
    comm.all_reduce(&mut c, ReduceOp::Sum);
    if c.iter().all(|v| v.abs() <= 64.0 * f64::EPSILON) {
        return;
    }
    gemm_sub(x, pv, nl, p, &c, q, threads);
    let mx = image(x);
    let mut g = vec![0.0; q * q];
    gemm_tn(&mut g, x, nl, q, &mx, q, threads);
    comm.all_reduce(&mut g, ReduceOp::Sum);
    let Some((w, u)) = sym_eig(&g, q) else {
        return;
    };
    if w.iter().any(|&v| v.is_nan() || v <= 0.5) {
        // far from orthonormal: not a correction of rounding, left alone
        return;
    }
    // G^(−1/2) = U diag(w^(−1/2)) Uᵀ
    let mut h = vec![0.0; q * q];
    for j in 0..q {
        for i in 0..q {
            h[j * q + i] = (0..q)
                .map(|l| u[l * q + i] * u[l * q + j] / w[l].sqrt())
                .sum();
        }
    }
    let mut buf = vec![0.0; IN_PLACE_ROWS * q];
    gemm_nn_in_place(x, nl, q, &h, q, &mut buf, threads);
}

/// The pairs of an interval solve (or its partial result) in descending
/// order, as `Target::Largest` returns them.
pub(crate) fn descending(res: Result<Solution, JdError>) -> Result<Solution, JdError> {
    let flip = |mut s: Solution| {
        let nl = s.n_local;
        s.eigenvalues.reverse();
        s.residual_norms.reverse();
        s.converged.reverse();
        let p = s.eigenvectors.len().checked_div(nl).unwrap_or(0);
        let mut v = Vec::with_capacity(s.eigenvectors.len());
        for j in (0..p).rev() {
            v.extend_from_slice(&s.eigenvectors[j * nl..(j + 1) * nl]);
        }
        s.eigenvectors = v;
        s
    };
    res.map(flip)
}

/// Keeps the pairs `keep` of `sol` (positions in its order), dropping the
/// others.
pub(crate) fn keep_pairs(sol: &mut Solution, keep: std::ops::Range<usize>) {
    let nl = sol.n_local;
    sol.eigenvalues = sol.eigenvalues[keep.clone()].to_vec();
    sol.residual_norms = sol.residual_norms[keep.clone()].to_vec();
    sol.converged = sol.converged[keep.clone()].to_vec();
    sol.eigenvectors = sol.eigenvectors[keep.start * nl..keep.end * nl].to_vec();
}

/// The observer for one more solve.
fn reborrow<'a>(o: &'a mut Option<Observer<'_>>) -> Option<Observer<'a>> {
    o.as_mut().map(|f| &mut **f as Observer<'a>)
}

/// Columns of the deflation block (n rows each, global).
fn spaces_cols(spaces: Spaces<'_>, n: usize) -> usize {
    spaces.deflation.len().checked_div(n).unwrap_or(0)
}

/// The converged pairs of `sol` inside the slice (each within its error
/// bound), ascending, and their number. Collective (one global sum).
fn keep_inside<C: Comm + ?Sized>(
    mut sol: Solution,
    s: &Slice,
    pencil: bool,
    comm: &C,
) -> (Solution, usize) {
    let bound = error_bounds(&sol, pencil, comm);
    let mut keep: Vec<usize> = (0..sol.eigenvalues.len())
        .filter(|&j| {
            let (l, e) = (sol.eigenvalues[j], bound[j]);
            sol.converged[j] && l + e >= s.lo && l - e < s.hi
        })
        .collect();
    keep.sort_by(|&x, &y| sol.eigenvalues[x].total_cmp(&sol.eigenvalues[y]));
    let nl = sol.n_local;
    let mut vecs = Vec::with_capacity(nl * keep.len());
    for &j in &keep {
        vecs.extend_from_slice(&sol.eigenvectors[j * nl..(j + 1) * nl]);
    }
    let pick = |v: &[f64]| keep.iter().map(|&j| v[j]).collect::<Vec<_>>();
    sol.eigenvalues = pick(&sol.eigenvalues);
    sol.residual_norms = pick(&sol.residual_norms);
    sol.converged = keep.iter().map(|&j| sol.converged[j]).collect();
    sol.eigenvectors = vecs;
    let inside = keep.len();
    (sol, inside)
}

/// `acc` followed by the pairs of `next` (same rows), counters summed.
fn append(mut acc: Solution, next: Solution) -> Solution {
    acc.eigenvalues.extend_from_slice(&next.eigenvalues);
    acc.residual_norms.extend_from_slice(&next.residual_norms);
    acc.converged.extend_from_slice(&next.converged);
    acc.eigenvectors.extend_from_slice(&next.eigenvectors);
    absorb(&mut acc.stats, &next.stats);
    acc
}

/// Adds the counters and seconds of `s` to `total`.
fn absorb(total: &mut Stats, s: &Stats) {
    total.outer_iterations += s.outer_iterations;
    total.matvecs += s.matvecs;
    total.mass_matvecs += s.mass_matvecs;
    total.precond_applications += s.precond_applications;
    total.inner_steps += s.inner_steps;
    total.gdk_iterations += s.gdk_iterations;
    total.jdqmr_iterations += s.jdqmr_iterations;
    total.global_sums += s.global_sums;
    total.restarts += s.restarts;
    total.locked += s.locked;
    total.replaced_vectors += s.replaced_vectors;
    total.projection_seconds += s.projection_seconds;
    total.correction_seconds += s.correction_seconds;
    total.setup_seconds += s.setup_seconds;
    total.spmv_seconds += s.spmv_seconds;
    total.precond_seconds += s.precond_seconds;
    total.dense_seconds += s.dense_seconds;
    total.basis_passes += s.basis_passes;
    total.verification_passes += s.verification_passes;
    total.missed_copies += s.missed_copies;
    total.anorm_estimate = total.anorm_estimate.max(s.anorm_estimate);
    total.verified = match (total.verified, s.verified) {
        (Some(false), _) | (_, Some(false)) => Some(false),
        (Some(true), _) | (_, Some(true)) => Some(true),
        _ => None,
    };
}

/// The pairs of an interval holding no eigenvalue: none, on this process's
/// rows (those of every slice's solve).
pub(crate) fn empty<C: Comm + ?Sized>(comm: &C, k: &CsrMatrix) -> Result<Solution, JdError> {
    let (n_local, row_offset) = if comm.size() > 1 {
        let part = matrices::partition::RowPartition::balanced_by_nnz(k, comm.size())
            .map_err(|e| JdError::invalid("partition", e))?;
        let r = part.range(comm.rank());
        (r.len(), r.start)
    } else {
        (k.nrows(), 0)
    };
    Ok(Solution {
        n_local,
        row_offset,
        ..Solution::default()
    })
}

/// The result with the report and the seconds in its statistics, settled
/// for `total` pairs ([`settle`]).
pub(crate) fn finish(
    mut sol: Solution,
    total: usize,
    report: IntervalReport,
    t0: Instant,
) -> Solution {
    sol.stats.interval = Some(report);
    sol.stats.wall_seconds = t0.elapsed().as_secs_f64();
    sol.stats.eigenvalues_below_shift = None;
    settle(sol, total)
}

/// `sol` as the answer for `wanted` pairs: a solve that ended early keeps its
/// outcome; a converged one with fewer than `wanted` converged pairs is
/// [`Outcome::Incomplete`].
pub(crate) fn settle(mut sol: Solution, wanted: usize) -> Solution {
    sol.wanted = wanted;
    if sol.is_converged() && (sol.eigenvalues.len() != wanted || sol.nconverged() != wanted) {
        sol.outcome = Outcome::Incomplete;
    }
    sol
}
