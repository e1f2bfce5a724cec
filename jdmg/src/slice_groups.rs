//! Spectrum slicing over solve groups, balanced by measured rates: the
//! flexible phase of Kalinov and Lastovetsky's heterogeneous load balancing
//! (and of McCombs et al.'s multigrain Jacobi-Davidson, §4) applied to
//! slices of an interval.
//!
//! The interval (or index range) is counted once over every process
//! ([`crate::slicing`]). A **flexible phase** (lblib) follows: every process
//! runs products with K for the same short time, and the work done gives
//! its rate. The interval is then cut where the counts (interpolated, then
//! counted) give each group a share of its eigenvalues proportional to the
//! rate of its first process (which factors and solves for the group); each
//! group slices its part as [`crate::slicing`] does, on its own
//! sub-communicator. (A probe round of equal shares, with the rest shared by
//! the slices' measured rates, was slower: the fast groups idle through the
//! probe.)
//!
//! With [`GroupSplit::Equal`] the interval is cut into equal counts per
//! group (the reference that balancing is measured against). The pairs are
//! assembled in ascending order on every process (this process's rows of
//! every vector), each part's vectors made orthogonal to the part before,
//! and the report gives the spread of the groups' times
//! ([`IntervalReport::imbalance_percent`]).

use std::time::Instant;

use lblib::{Comm, ReduceOp};
use matrices::CsrMatrix;
use precond::Operator;

use crate::certify::global_block;
use crate::error::JdError;
use crate::jd::Spaces;
pub use crate::params::GroupSplit;
use crate::params::JdParams;
use crate::setup::mass_rows;
use crate::slicing::{
    count_at, end_delta, finish, interpolate, keep_pairs, orthogonalize_block, run_values, Counted,
    IntervalReport, Range, SliceParams,
};
use crate::solution::{Outcome, Solution, Stats};

/// A part of the interval: its ends, each a point and the eigenvalues
/// below it.
type Part = ((f64, usize), (f64, usize));

/// Seconds of the flexible phase (products with K, timed by lblib).
const FLEXIBLE_SECONDS: f64 = 0.05;

/// Each group's rate, measured by a flexible phase of lblib on every
/// process (Kalinov and Lastovetsky; Lbs section, then the collective
/// decide): products with K for [`FLEXIBLE_SECONDS`]; a group's rate is
/// that of its first process, which factors and solves for its slices.
/// Collective over `base`.
fn flexible_rates<B: Comm>(
    k: &CsrMatrix,
    base: &B,
    groups: &[Vec<usize>],
) -> Result<Vec<f64>, JdError> {
    let lb = |e: lblib::LbError| JdError::invalid("groups", format!("rates: {e}"));
    let mut lbs = lblib::Lbs::new(base);
    let n = k.nrows();
    let (mut x, mut y) = (vec![1.0; n], vec![0.0; n]);
    lbs.section_start().map_err(lb)?;
    let t0 = base.wtime();
    let mut products = 0u64;
    while products == 0 || base.wtime() - t0 < FLEXIBLE_SECONDS {
        k.mul_vec(&x, &mut y);
        std::mem::swap(&mut x, &mut y);
        let s = x.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        if s > 0.0 && s.is_finite() {
            x.iter_mut().for_each(|v| *v /= s);
        }
        products += 1;
    }
    lbs.section_end(products as f64).map_err(lb)?;
    lbs.decide(1.0, lblib::Method::Fastest).map_err(lb)?;
    let (rates, index) = (lbs.rates().map_err(lb)?, lbs.index().map_err(lb)?);
    let mut by_rank = vec![0.0; base.size()];
    for (&r, &i) in rates.iter().zip(index) {
        by_rank[i] = r;
    }
    Ok(groups.iter().map(|gr| by_rank[gr[0]].max(0.0)).collect())
}

/// Every eigenpair of the interval or index range, with the slices spread
/// over the solve groups `groups` (ranks of `base`, every rank in one),
/// balanced by measured rates (module documentation). Collective over
/// `base`; the eigenvectors hold this process's rows of the partition over
/// `out` (the fine-grain world of the same processes, or `base`; balanced by
/// nonzeros), as every solve over `out` returns them.
///
/// # Errors
/// As [`crate::slicing`]'s interval solve; `InvalidParams` when this rank is
/// in no group; a group's error fails every
/// process (`Factorization` or the error itself on the group's processes).
#[allow(clippy::too_many_arguments)]
pub(crate) fn run<B: Comm>(
    k: &CsrMatrix,
    mass: Option<&CsrMatrix>,
    range: Range,
    base: &B,
    out: &dyn Comm,
    groups: &[Vec<usize>],
    params: &JdParams,
    slicing: &SliceParams,
    spaces: Spaces<'_>,
) -> Result<Solution, JdError> {
    let t0 = Instant::now();
    crate::setup::check_matrix(k, params)?;
    if let Some(m) = mass {
        crate::setup::check_pair(k, m, params)?;
    }
    if !spaces.initial.is_empty() {
        return Err(JdError::invalid(
            "initial",
            "start vectors are not used by an interval solve (each slice starts from its own)",
        ));
    }
    let me = base.rank();
    let Some(g) = groups.iter().position(|gr| gr.contains(&me)) else {
        return Err(JdError::invalid(
            "groups",
            format!("rank {me} is in no solve group"),
        ));
    };
    let pos = groups[g].iter().position(|&r| r == me).unwrap_or(0);
    let ng = groups.len();
    let gc = base.split(g, pos);
    let n = k.nrows();
    let threads = params.execution.threads;
    let mut factored = 0;
    // The ends, over every process.
    let (a, b, inside, indices, asked) = match range {
        Range::Values(lower, upper) => {
            range.check(n)?;
            let delta = end_delta(k, mass, lower, upper);
            let a = count_at(
                k,
                mass,
                lower - delta,
                -1.0,
                delta,
                threads,
                base,
                &mut factored,
            )?;
            let b = count_at(
                k,
                mass,
                upper + delta,
                1.0,
                delta,
                threads,
                base,
                &mut factored,
            )?;
            (a, b, Vec::new(), None, (lower, upper))
        }
        Range::Indices(first, last) => {
            range.check(n)?;
            let (known, counts) = crate::slicing::bracket(k, mass, first, last, threads, base)?;
            factored += counts;
            let Some((a, b)) = known.ends else {
                unreachable!("a bracket has its ends")
            };
            (a, b, known.inside, Some((first, last)), (a.0, b.0))
        }
    };
    let delta = end_delta(k, mass, asked.0, asked.1);
    let total = b.1.saturating_sub(a.1);
    let mut known: Vec<(f64, usize)> = inside
        .into_iter()
        .filter(|&(t, _)| t > a.0 && t < b.0)
        .collect();
    known.push(a);
    known.push(b);
    known.sort_by(|x, y| x.0.total_cmp(&y.0));
    known.dedup_by(|x, y| x.0 == y.0);
    let count_seconds = t0.elapsed().as_secs_f64();
    let by_rates = slicing.split == GroupSplit::Rates && ng > 1;
    // Shares by the flexible phase's rates (or equal).
    let shares = if by_rates {
        let r = flexible_rates(k, base, groups)?;
        let sum: f64 = r.iter().sum();
        if sum > 0.0 && sum.is_finite() {
            r.iter().map(|x| total as f64 * x / sum).collect()
        } else {
            vec![total as f64 / ng as f64; ng]
        }
    } else {
        vec![total as f64 / ng as f64; ng]
    };
    let parts = split_counts(
        k,
        mass,
        a,
        b,
        &shares,
        &mut known,
        delta,
        threads,
        base,
        &mut factored,
    )?;
    let (sol, secs) = solve_part(k, mass, parts[g], &gc, params, slicing, spaces);
    let times = all_group_values(base, groups, secs);
    let piece = settled(base, sol)?;
    // Assembly: every part's pairs on every process, ascending.
    let mut sol = assemble(k, mass, base, out, &gc, groups, g, pos, &piece, params)?;
    sol.outcome = worst_outcome(base, piece.outcome);
    let tmax = times.iter().copied().fold(0.0, f64::max);
    let tmean = times.iter().sum::<f64>() / times.len().max(1) as f64;
    let mut report = IntervalReport {
        lower: asked.0,
        upper: asked.1,
        counted_lower: a.0,
        counted_upper: b.0,
        count: total,
        slices: sol.stats.interval.map_or(0, |iv| iv.slices),
        counts: factored + sol.stats.interval.map_or(0, |iv| iv.counts),
        retried: sol.stats.interval.map_or(0, |iv| iv.retried),
        count_seconds,
        below: a.1,
        first_index: None,
        groups: ng,
        imbalance_percent: if tmax > 0.0 {
            100.0 * (tmax - tmean) / tmax
        } else {
            0.0
        },
    };
    if let Some((first, last)) = indices {
        let from = first.saturating_sub(a.1).min(sol.eigenvalues.len());
        let to = (last + 1).saturating_sub(a.1).min(sol.eigenvalues.len());
        keep_pairs(&mut sol, from..to);
        report.count = last + 1 - first;
        report.first_index = Some(first);
    }
    let wanted = report.count;
    Ok(finish(sol, wanted, report, t0))
}

/// The outcome of the groups' parts taken together, on every process: a
/// stop before a spent budget before pairs missing (one global max).
fn worst_outcome<B: Comm>(base: &B, mine: Outcome) -> Outcome {
    const ORDER: [Outcome; 4] = [
        Outcome::Converged,
        Outcome::Incomplete,
        Outcome::BudgetSpent,
        Outcome::Stopped,
    ];
    let mut w = [ORDER.iter().position(|&o| o == mine).unwrap_or(0) as u64];
    base.all_reduce_u64(&mut w, ReduceOp::Max);
    ORDER[(w[0] as usize).min(ORDER.len() - 1)]
}

/// The outcome of a group's part, the same on every process: its pairs, or
/// the error where it failed and a `Factorization` error naming the failure
/// elsewhere (one global max).
fn settled<B: Comm>(base: &B, res: Result<Solution, JdError>) -> Result<Solution, JdError> {
    let mut f = [u64::from(res.is_err())];
    base.all_reduce_u64(&mut f, ReduceOp::Max);
    match res {
        Err(e) => Err(e),
        Ok(_) if f[0] > 0 => Err(JdError::Factorization(
            "another solve group's slices failed (its processes report why)".into(),
        )),
        Ok(s) => Ok(s),
    }
}

/// The value of each group's first process, on every process (one
/// all-gather).
fn all_group_values<B: Comm>(base: &B, groups: &[Vec<usize>], v: f64) -> Vec<f64> {
    let mut all = vec![0.0; base.size()];
    base.all_gather(&[v], &mut all);
    groups.iter().map(|gr| all[gr[0]]).collect()
}

/// Points from `a` to `b` cutting the count into consecutive parts of
/// `shares` eigenvalues (the last takes the rest up to `b` only when the
/// shares sum to b's count): each cut where the counts, interpolated
/// between the known points around it, reach its target, counted there
/// (then once more when it missed by more than a tenth of its share and 2).
/// Returns each part's ends. Collective over `comm`.
#[allow(clippy::too_many_arguments)]
fn split_counts<C: Comm + ?Sized>(
    k: &CsrMatrix,
    mass: Option<&CsrMatrix>,
    a: (f64, usize),
    b: (f64, usize),
    shares: &[f64],
    known: &mut Vec<(f64, usize)>,
    delta: f64,
    threads: usize,
    comm: &C,
    factored: &mut usize,
) -> Result<Vec<Part>, JdError> {
    let mut parts = Vec::with_capacity(shares.len());
    let mut lo = a;
    let mut target = a.1 as f64;
    let sum: f64 = shares.iter().sum();
    let exact_end = (a.1 as f64 + sum - b.1 as f64).abs() < 0.5;
    for (i, &share) in shares.iter().enumerate() {
        target += share;
        let last = i + 1 == shares.len();
        if last && exact_end {
            parts.push((lo, b));
            lo = b;
            continue;
        }
        let mut cut = b;
        if target < b.1 as f64 - 0.5 && lo.0 < b.0 {
            for _ in 0..2 {
                // the known points around the target
                let below = known
                    .iter()
                    .rev()
                    .find(|p| (p.1 as f64) <= target && p.0 >= lo.0)
                    .copied()
                    .unwrap_or(lo);
                let above = known
                    .iter()
                    .find(|p| (p.1 as f64) > target && p.0 > below.0)
                    .copied()
                    .unwrap_or(b);
                let t = interpolate(below.0, below.1, above.0, above.1, target);
                let p = count_at(k, mass, t, 1.0, delta, threads, comm, factored)?;
                if p.0 > lo.0 && p.0 < b.0 {
                    let at = known.partition_point(|q| q.0 < p.0);
                    if known.get(at).is_none_or(|q| q.0 != p.0) {
                        known.insert(at, p);
                    }
                    cut = p;
                }
                if (cut.1 as f64 - target).abs() <= (0.1 * share).max(2.0) {
                    break;
                }
            }
        }
        if cut.0 < lo.0 {
            cut = lo;
        }
        parts.push((lo, cut));
        lo = cut;
    }
    Ok(parts)
}

/// This group's part [lo, hi) solved on its communicator, and its seconds.
fn solve_part<C: Comm>(
    k: &CsrMatrix,
    mass: Option<&CsrMatrix>,
    part: Part,
    gc: &C,
    params: &JdParams,
    slicing: &SliceParams,
    spaces: Spaces<'_>,
) -> (Result<Solution, JdError>, f64) {
    let t = gc.wtime();
    let (lo, hi) = part;
    let known = Counted {
        ends: Some((lo, hi)),
        inside: Vec::new(),
    };
    let res = if hi.1 <= lo.1 {
        crate::slicing::empty(gc, k)
    } else {
        run_values(
            k, mass, lo.0, hi.0, &known, gc, params, slicing, spaces, None,
        )
    };
    (res, gc.wtime() - t)
}

/// The parts' pairs of every group (`p`: this group's)
/// in ascending order on every process of `base`, this process's rows of
/// the partition over `out`, each part's vectors made orthogonal to the part
/// before; the counters summed over the groups.
#[allow(clippy::too_many_arguments)]
fn assemble<B: Comm, C: Comm>(
    k: &CsrMatrix,
    mass: Option<&CsrMatrix>,
    base: &B,
    out: &dyn Comm,
    gc: &C,
    groups: &[Vec<usize>],
    g: usize,
    pos: usize,
    p: &Solution,
    params: &JdParams,
) -> Result<Solution, JdError> {
    let n = k.nrows();
    // pairs of every group (from its first process) and the column offsets
    let mut all = vec![0u64; base.size()];
    base.all_gather_u64(&[p.eigenvalues.len() as u64], &mut all);
    let mut offsets = Vec::with_capacity(groups.len() + 1);
    let mut at = 0;
    for gr in groups {
        offsets.push(at);
        at += all[gr[0]] as usize;
    }
    offsets.push(at);
    let total = at;
    // values, residuals, flags and the vectors, zero but this group's
    // columns on its first process, summed over base
    let mut vals = vec![0.0; 3 * total];
    let mut vecs = vec![0.0; n * total];
    let mut counters = vec![0u64; 8];
    {
        let q = p.eigenvalues.len();
        let full = global_block(gc, &p.eigenvectors, p.n_local, p.row_offset, n, q);
        if pos == 0 {
            let o = offsets[g];
            for j in 0..q {
                vals[o + j] = p.eigenvalues[j];
                vals[total + o + j] = p.residual_norms[j];
                vals[2 * total + o + j] = f64::from(u8::from(p.converged[j]));
            }
            vecs[o * n..(o + q) * n].copy_from_slice(&full);
            let s = &p.stats;
            let iv = s.interval.unwrap_or_default();
            for (c, v) in counters.iter_mut().zip([
                s.matvecs,
                s.mass_matvecs,
                s.outer_iterations as u64,
                s.restarts as u64,
                s.global_sums,
                iv.slices as u64,
                iv.counts as u64,
                iv.retried as u64,
            ]) {
                *c += v;
            }
        }
    }
    base.all_reduce(&mut vals, ReduceOp::Sum);
    base.all_reduce(&mut vecs, ReduceOp::Sum);
    base.all_reduce_u64(&mut counters, ReduceOp::Sum);
    // this process's rows of the partition over `out`
    let (n_local, row_offset) = if out.size() > 1 {
        let part = matrices::partition::RowPartition::balanced_by_nnz(k, out.size())
            .map_err(|e| JdError::invalid("partition", e))?;
        let r = part.range(out.rank());
        (r.len(), r.start)
    } else {
        (n, 0)
    };
    let mut x = vec![0.0; n_local * total];
    for j in 0..total {
        x[j * n_local..(j + 1) * n_local]
            .copy_from_slice(&vecs[j * n + row_offset..j * n + row_offset + n_local]);
    }
    drop(vecs);
    // each part orthogonal to the one before
    let mrows = mass_rows(k, mass, out, params, total.max(1))?;
    let mop = mrows.as_ref().map(|r| &r.op as &dyn Operator);
    let mut bounds = offsets;
    bounds.dedup();
    for w in bounds.windows(3) {
        let (p0, p1, p2) = (w[0], w[1], w[2]);
        if p1 > p0 && p2 > p1 {
            let (prev, next) = x.split_at_mut(p1 * n_local);
            orthogonalize_block(
                &prev[p0 * n_local..],
                &mut next[..(p2 - p1) * n_local],
                n_local,
                mop,
                out,
                params.execution.threads,
            );
        }
    }
    let mut stats = Stats {
        matvecs: counters[0],
        mass_matvecs: counters[1],
        outer_iterations: counters[2] as usize,
        restarts: counters[3] as usize,
        global_sums: counters[4],
        ..Stats::default()
    };
    stats.interval = Some(IntervalReport {
        slices: counters[5] as usize,
        counts: counters[6] as usize,
        retried: counters[7] as usize,
        ..IntervalReport::default()
    });
    Ok(Solution {
        outcome: Outcome::Converged,
        wanted: total,
        eigenvalues: vals[..total].to_vec(),
        residual_norms: vals[total..2 * total].to_vec(),
        converged: vals[2 * total..].iter().map(|&c| c > 0.5).collect(),
        eigenvectors: x,
        n_local,
        row_offset,
        multigrain: None,
        stats,
    })
}
