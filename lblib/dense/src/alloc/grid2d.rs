//! Two-dimensional heterogeneous grids of Mehaut and Robert §4.3–4.4: block panels
//! distributed over a `p x q` grid of processors with cycle-times `t[i][j]`,
//! each grid row `i` receiving `r_i` block rows and each grid column `j`
//! receiving `c_j` block columns, so that processor `(i, j)` works
//! `r_i t_ij c_j` (every processor keeps four direct neighbours). Also the
//! Kalinov–Lastovetsky heterogeneous block-cyclic distribution that relaxes
//! the neighbour constraint.

use serde::{Deserialize, Serialize};

use super::{at_least, optimal_chunks, strictly_less, validate_times, AllocError, Allocation};

/// Limits of the exhaustive searches of `001` §4.4 (the exact algorithms
/// are exponential in the grid size, as the paper notes).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grid2dParams {
    /// Maximum number of candidates (spanning trees tried by
    /// [`grid_2d_rational`], column compositions by [`grid_2d_panel`]).
    /// Default: 2,000,000 (a 4x4 grid needs C(16,7) = 11,440 trees; a
    /// 2-column panel of width 1000 needs 1001 compositions).
    pub max_candidates: u64,
}

impl Default for Grid2dParams {
    fn default() -> Self {
        Self {
            max_candidates: 2_000_000,
        }
    }
}

/// Validates a grid of cycle-times; returns `(p, q)`.
fn validate_grid(t: &[Vec<f64>]) -> Result<(usize, usize), AllocError> {
    if t.is_empty() {
        return Err(AllocError::Empty { what: "grid rows" });
    }
    let q = t[0].len();
    if q == 0 {
        return Err(AllocError::Empty {
            what: "grid columns",
        });
    }
    for (row, r) in t.iter().enumerate() {
        if r.len() != q {
            return Err(AllocError::RaggedGrid {
                row,
                len: r.len(),
                expected: q,
            });
        }
        if let Err(AllocError::BadTime { index, value, .. }) = validate_times(r, "grid") {
            return Err(AllocError::BadTime {
                what: "grid (row-major)",
                index: row * q + index,
                value,
            });
        }
    }
    Ok((t.len(), q))
}

/// Refuses an exhaustive search of `count` candidates above `limit`
/// (`Grid2dParams::max_candidates`).
fn within_limit(what: &'static str, count: u128, limit: u64) -> Result<(), AllocError> {
    if count > limit as u128 {
        return Err(AllocError::TooLarge {
            what,
            count,
            limit: limit as u128,
        });
    }
    Ok(())
}

/// Binomial coefficient, saturating at `u128::MAX`.
fn binomial(n: u128, k: u128) -> u128 {
    let k = k.min(n.saturating_sub(k));
    let mut acc: u128 = 1;
    for i in 0..k {
        acc = match acc.checked_mul(n - i) {
            Some(v) => v / (i + 1),
            None => return u128::MAX,
        };
    }
    acc
}

/// Optimal rational row and column shares for a fixed grid arrangement
/// (`001` §4.4, objectives `Obj_1` / `Obj_2`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Grid2dRational {
    /// Row shares `r_i`, summing to 1.
    pub r: Vec<f64>,
    /// Column shares `c_j`, summing to 1.
    pub c: Vec<f64>,
    /// `T_ave = max_ij r_i t_ij c_j` with the normalized shares: the average
    /// time per matrix element (`Obj_1`). Equals `1 / Obj_2`.
    pub t_ave: f64,
    /// `busy[i][j] = r_i t_ij c_j / T_ave`: the fraction of the time each
    /// processor works (1 for all when the balance is perfect).
    pub busy: Vec<Vec<f64>>,
}

/// Solves `001` §4.4 `Obj_2` exactly for a fixed `p x q` arrangement:
/// maximize `(sum r_i)(sum c_j)` subject to `r_i t_ij c_j <= 1`.
///
/// Method: in log variables the feasible set is a polyhedron and the
/// objective is convex, so an optimum is a vertex, i.e. `p + q - 1` tight
/// constraints `r_i t_ij c_j = 1` forming a spanning tree of the bipartite
/// row/column graph. All such edge sets are enumerated (`C(pq, p+q-1)`
/// candidates; exponential, as the paper says), the shares propagated along
/// the tree from `r_1 = 1`, infeasible ones discarded. For a rank-1 grid such
/// as `[[1,2],[3,6]]` the balance is perfect: `r ∝ (3,1)`, `c ∝ (2,1)`.
///
/// # Errors
/// [`AllocError::Empty`], [`AllocError::RaggedGrid`], [`AllocError::BadTime`]
/// for a bad grid; [`AllocError::TooLarge`] if the number of candidates
/// exceeds `params.max_candidates`.
pub fn grid_2d_rational(
    t: &[Vec<f64>],
    params: &Grid2dParams,
) -> Result<Grid2dRational, AllocError> {
    let (p, q) = validate_grid(t)?;
    let n_edges = p * q;
    let k = p + q - 1;
    let count = binomial(n_edges as u128, k as u128);
    within_limit(
        "spanning-tree search of the 2D grid",
        count,
        params.max_candidates,
    )?;
    let mut best: Option<(f64, Vec<f64>, Vec<f64>)> = None;
    let mut comb: Vec<usize> = (0..k).collect();
    loop {
        if let Some((obj, r, c)) = tree_solution(t, p, q, &comb) {
            let better = match &best {
                None => true,
                Some((b, _, _)) => strictly_less(*b, obj),
            };
            if better {
                best = Some((obj, r, c));
            }
        }
        // Next combination in lexicographic order.
        let mut i = k;
        while i > 0 && comb[i - 1] == n_edges - k + i - 1 {
            i -= 1;
        }
        if i == 0 {
            break;
        }
        comb[i - 1] += 1;
        for l in i..k {
            comb[l] = comb[l - 1] + 1;
        }
    }
    // There is always at least one feasible tree (the optimum exists and is a vertex).
    let (obj, r, c) = best.ok_or(AllocError::Empty {
        what: "feasible spanning trees",
    })?;
    let sr: f64 = r.iter().sum();
    let sc: f64 = c.iter().sum();
    let r: Vec<f64> = r.iter().map(|x| x / sr).collect();
    let c: Vec<f64> = c.iter().map(|x| x / sc).collect();
    let t_ave = 1.0 / obj;
    let busy = (0..p)
        .map(|i| (0..q).map(|j| r[i] * t[i][j] * c[j] / t_ave).collect())
        .collect();
    Ok(Grid2dRational { r, c, t_ave, busy })
}

/// Shares for the tight edge set `comb` (edge `e` = `(e / q, e % q)`), if it
/// is a spanning tree with a feasible solution: `(objective, r, c)`.
fn tree_solution(
    t: &[Vec<f64>],
    p: usize,
    q: usize,
    comb: &[usize],
) -> Option<(f64, Vec<f64>, Vec<f64>)> {
    // Union-find over p row nodes and q column nodes.
    let mut parent: Vec<usize> = (0..p + q).collect();
    fn find(parent: &mut [usize], mut x: usize) -> usize {
        while parent[x] != x {
            parent[x] = parent[parent[x]];
            x = parent[x];
        }
        x
    }
    for &e in comb {
        let (a, b) = (find(&mut parent, e / q), find(&mut parent, p + e % q));
        if a == b {
            return None;
        }
        parent[a] = b;
    }
    // p + q - 1 edges and no cycle: a spanning tree. Propagate from r_0 = 1.
    let mut r = vec![f64::NAN; p];
    let mut c = vec![f64::NAN; q];
    r[0] = 1.0;
    let mut changed = true;
    while changed {
        changed = false;
        for &e in comb {
            let (i, j) = (e / q, e % q);
            if r[i].is_nan() && !c[j].is_nan() {
                r[i] = 1.0 / (t[i][j] * c[j]);
                changed = true;
            } else if c[j].is_nan() && !r[i].is_nan() {
                c[j] = 1.0 / (t[i][j] * r[i]);
                changed = true;
            }
        }
    }
    for i in 0..p {
        for j in 0..q {
            if r[i] * t[i][j] * c[j] > 1.0 + 1e-9 {
                return None;
            }
        }
    }
    let obj = r.iter().sum::<f64>() * c.iter().sum::<f64>();
    Some((obj, r, c))
}

/// Optimal integer panel allocation on a 2D grid (`001` §4.3, Figures 7, 8, 10).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Grid2dPanel {
    /// Block rows per grid row, summing to `B_p`.
    pub r: Vec<usize>,
    /// Block columns per grid column, summing to `B_q`.
    pub c: Vec<usize>,
    /// `loads[i][j] = r_i t_ij c_j`: time processor `(i, j)` spends on one panel.
    pub loads: Vec<Vec<f64>>,
    /// `max_ij loads[i][j]`: time to process one panel.
    pub exec_time: f64,
    /// `exec_time / (B_p B_q)`: average time per block.
    pub time_per_block: f64,
}

/// Exact optimal `r` (summing to `bp`) and `c` (summing to `bq`) minimizing
/// the panel time `max_ij r_i t_ij c_j` (`001` §4.3–4.4, integer form of
/// `Obj_1`). Every composition `c` of `bq` into `q` non-negative parts is
/// tried; for a fixed `c`, grid row `i` behaves like one processor of
/// cycle-time `T_i = max_j t_ij c_j`, and Algorithm 2.1
/// ([`optimal_chunks`]) gives the optimal `r` (Proposition 1).
///
/// `[[1,2],[3,6]]`, `4 x 3` panel: `r = (3,1)`, `c = (2,1)`, all loads 6.
/// `[[1,2],[3,5]]`, `8 x 6` panel: `r = (6,2)`, `c = (4,2)`, panel time 24
/// (Figure 10).
///
/// # Errors
/// Bad grid as in [`grid_2d_rational`]; [`AllocError::TooSmall`] if `bp` or
/// `bq` is 0; [`AllocError::TooLarge`] if `C(bq+q-1, q-1)` exceeds
/// `params.max_candidates`.
pub fn grid_2d_panel(
    t: &[Vec<f64>],
    bp: usize,
    bq: usize,
    params: &Grid2dParams,
) -> Result<Grid2dPanel, AllocError> {
    let (p, q) = validate_grid(t)?;
    at_least("panel height B_p", bp, 1)?;
    at_least("panel width B_q", bq, 1)?;
    let count = binomial((bq + q - 1) as u128, (q - 1) as u128);
    within_limit(
        "column compositions of the 2D panel",
        count,
        params.max_candidates,
    )?;
    let mut best: Option<(f64, Vec<usize>, Vec<usize>)> = None;
    let mut c = vec![0usize; q];
    let mut row_times = vec![0.0; p];
    let mut visit = |c: &[usize]| -> Result<(), AllocError> {
        for (i, rt) in row_times.iter_mut().enumerate() {
            *rt = (0..q).map(|j| t[i][j] * c[j] as f64).fold(0.0, f64::max);
        }
        let Allocation { counts, cost } = optimal_chunks(&row_times, bp)?;
        let better = match &best {
            None => true,
            Some((b, _, _)) => strictly_less(cost, *b),
        };
        if better {
            best = Some((cost, counts, c.to_vec()));
        }
        Ok(())
    };
    compositions(&mut c, 0, bq, &mut visit)?;
    let (exec_time, r, c) = best.ok_or(AllocError::Empty {
        what: "column compositions",
    })?;
    let loads = (0..p)
        .map(|i| {
            (0..q)
                .map(|j| r[i] as f64 * t[i][j] * c[j] as f64)
                .collect()
        })
        .collect();
    Ok(Grid2dPanel {
        r,
        c,
        loads,
        exec_time,
        time_per_block: exec_time / (bp as f64 * bq as f64),
    })
}

/// Calls `f` on every composition of `left` into `c[pos..]` (non-negative
/// parts), first part largest first.
fn compositions<F>(c: &mut [usize], pos: usize, left: usize, f: &mut F) -> Result<(), AllocError>
where
    F: FnMut(&[usize]) -> Result<(), AllocError>,
{
    if pos + 1 == c.len() {
        c[pos] = left;
        return f(c);
    }
    for v in (0..=left).rev() {
        c[pos] = v;
        compositions(c, pos + 1, left - v, f)?;
    }
    Ok(())
}

/// The heterogeneous block-cyclic distribution of Kalinov and Lastovetsky
/// (`001` §4.3, Figure 9): balance each grid column independently with the
/// 1D scheme, then balance the columns, weighting each by the inverse of the
/// harmonic mean of its cycle-times. Perfect balance, at the price of
/// processors with several west neighbours.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KalinovLastovetsky {
    /// `row_shares[j][i]`: share of grid column `j`'s matrix rows given to
    /// processor `(i, j)`, proportional to `1/t_ij` (sums to 1 per column).
    pub row_shares: Vec<Vec<f64>>,
    /// Harmonic mean `p / sum_i (1/t_ij)` of column `j`: the cycle-time of
    /// the column seen as one processor (the paper's 3/2 and 20/7).
    pub column_times: Vec<f64>,
    /// Share of matrix columns given to grid column `j`, proportional to
    /// `1/column_times[j]` (sums to 1; 40/61 and 21/61 in the paper).
    pub column_shares: Vec<f64>,
    /// Average time per matrix element, `1 / sum_ij (1/t_ij)` (perfect balance).
    pub t_ave: f64,
}

impl KalinovLastovetsky {
    /// Integer split of `n_cols` matrix columns over the grid columns
    /// (Algorithm 2.1 on [`column_times`](Self::column_times)); 61 columns
    /// of `[[1,2],[3,5]]` give `(40, 21)`.
    ///
    /// # Errors
    /// Never for a value built by [`kalinov_lastovetsky`].
    pub fn integer_columns(&self, n_cols: usize) -> Result<Allocation, AllocError> {
        optimal_chunks(&self.column_times, n_cols)
    }
}

/// Computes the [`KalinovLastovetsky`] distribution of `001` §4.3 for a grid
/// of cycle-times. `[[1,2],[3,5]]`: rows 3:1 and 5:2, columns 40 of every 61
/// to the first grid column.
///
/// # Errors
/// Bad grid as in [`grid_2d_rational`].
pub fn kalinov_lastovetsky(t: &[Vec<f64>]) -> Result<KalinovLastovetsky, AllocError> {
    let (p, q) = validate_grid(t)?;
    let mut row_shares = Vec::with_capacity(q);
    let mut column_times = Vec::with_capacity(q);
    let mut total_rate = 0.0;
    for j in 0..q {
        let column: Vec<f64> = t.iter().map(|row| row[j]).collect();
        let rate: f64 = column.iter().map(|x| 1.0 / x).sum();
        total_rate += rate;
        row_shares.push(column.iter().map(|x| (1.0 / x) / rate).collect());
        column_times.push(p as f64 / rate);
    }
    let inv: f64 = column_times.iter().map(|x| 1.0 / x).sum();
    let column_shares = column_times.iter().map(|x| (1.0 / x) / inv).collect();
    Ok(KalinovLastovetsky {
        row_shares,
        column_times,
        column_shares,
        t_ave: 1.0 / total_rate,
    })
}

/// Order of the panel columns for LU/QR on a 2D grid (`001` §4.3, Figure 10):
/// grid column `j`, with `r_i` blocks on processor `(i, j)`, acts as one
/// processor of cycle-time `1 / sum_i (r_i / t_ij)`; the uni-dimensional
/// dynamic programming (`000` §2.2) orders the `sum c_j` panel columns, each
/// grid column receiving exactly `c_j` of them (a column whose quota is
/// exhausted is skipped), and the order is reversed as for the 1D slices.
/// `[[1,2],[3,5]]` with `r = (6,2)`, `c = (4,2)`: cycle-times 3/20 and 5/17,
/// order `ABAABA` (`[0,1,0,0,1,0]`). Returns the grid column of every panel
/// column, left to right.
///
/// # Errors
/// Bad grid as in [`grid_2d_rational`]; [`AllocError::LengthMismatch`] if
/// `r`/`c` do not match the grid; [`AllocError::TooSmall`] if `sum c == 0`
/// or a grid column with `c_j > 0` has no rows (`sum_i r_i == 0`).
pub fn panel_column_order(
    t: &[Vec<f64>],
    r: &[usize],
    c: &[usize],
) -> Result<Vec<usize>, AllocError> {
    let (p, q) = validate_grid(t)?;
    if r.len() != p {
        return Err(AllocError::LengthMismatch {
            what: "row counts r",
            got: r.len(),
            expected: p,
        });
    }
    if c.len() != q {
        return Err(AllocError::LengthMismatch {
            what: "column counts c",
            got: c.len(),
            expected: q,
        });
    }
    let total: usize = c.iter().sum();
    at_least("panel width sum(c)", total, 1)?;
    at_least("panel height sum(r)", r.iter().sum(), 1)?;
    let tau: Vec<f64> = (0..q)
        .map(|j| 1.0 / (0..p).map(|i| r[i] as f64 / t[i][j]).sum::<f64>())
        .collect();
    let mut used = vec![0usize; q];
    let mut order = Vec::with_capacity(total);
    for _ in 0..total {
        let mut best: Option<(usize, f64)> = None;
        for j in 0..q {
            if used[j] >= c[j] {
                continue;
            }
            let exec = (0..q)
                .map(|l| (used[l] + usize::from(l == j)) as f64 * tau[l])
                .fold(0.0, f64::max);
            if best.is_none_or(|(_, b)| strictly_less(exec, b)) {
                best = Some((j, exec));
            }
        }
        // total = sum c guarantees a column with quota left.
        let Some((j, _)) = best else { break };
        used[j] += 1;
        order.push(j);
    }
    order.reverse();
    Ok(order)
}

/// A processor arrangement on a `p x q` grid with its optimal rational shares
/// (`001` §4.4, "The 2D load-balancing problem").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GridArrangement {
    /// `grid[i][j]`: index (into the `times` given) of the processor placed
    /// at grid position `(i, j)`.
    pub grid: Vec<Vec<usize>>,
    /// Optimal shares of this arrangement ([`grid_2d_rational`]).
    pub shares: Grid2dRational,
}

/// Solves the 2D load-balancing problem of `001` §4.4 exactly for small
/// grids: arranges the `n = p q` processors of cycle-times `times` on a
/// `p x q` grid so that the optimal `T_ave` of [`grid_2d_rational`] is
/// smallest. Arrangements equal up to a permutation of grid rows or of grid
/// columns are the same problem, so only `n! / (p! q!)` canonical ones are
/// tried (processor 0 at `(0,0)`, first row and first column increasing);
/// each costs a spanning-tree search, so the whole is exponential, as the
/// paper warns. Ties keep the first arrangement in lexicographic order.
/// Processors `{1,2,3,6}` on `2 x 2` give the rank-1 grid `[[1,2],[3,6]]`.
///
/// # Errors
/// [`AllocError::Empty`] / [`AllocError::BadTime`] for bad `times`;
/// [`AllocError::TooSmall`] if `p` or `q` is 0; [`AllocError::LengthMismatch`]
/// if `times.len() != p q`; [`AllocError::TooLarge`] if
/// `n!/(p! q!) * C(pq, p+q-1)` exceeds `params.max_candidates`.
pub fn best_grid_arrangement(
    times: &[f64],
    p: usize,
    q: usize,
    params: &Grid2dParams,
) -> Result<GridArrangement, AllocError> {
    validate_times(times, "times")?;
    at_least("grid rows p", p, 1)?;
    at_least("grid columns q", q, 1)?;
    let n = p.saturating_mul(q);
    if times.len() != n {
        return Err(AllocError::LengthMismatch {
            what: "processors for a p x q grid",
            got: times.len(),
            expected: n,
        });
    }
    let factorial = |k: usize| (1..=k as u128).try_fold(1u128, |a, x| a.checked_mul(x));
    let arrangements = match (factorial(n), factorial(p), factorial(q)) {
        (Some(a), Some(b), Some(c)) => a / b / c,
        _ => u128::MAX,
    };
    let count = arrangements.saturating_mul(binomial(n as u128, (p + q - 1) as u128));
    within_limit(
        "arrangement search of the 2D grid",
        count,
        params.max_candidates,
    )?;
    let unlimited = Grid2dParams {
        max_candidates: u64::MAX,
    };
    let mut best: Option<GridArrangement> = None;
    let mut cells = vec![usize::MAX; n];
    let mut used = vec![false; n];
    cells[0] = 0;
    used[0] = true;
    let mut search = |cells: &[usize]| -> Result<(), AllocError> {
        let grid: Vec<Vec<usize>> = cells.chunks(q).map(<[usize]>::to_vec).collect();
        let t: Vec<Vec<f64>> = grid
            .iter()
            .map(|row| row.iter().map(|&k| times[k]).collect())
            .collect();
        let shares = grid_2d_rational(&t, &unlimited)?;
        let better = match &best {
            None => true,
            Some(b) => strictly_less(shares.t_ave, b.shares.t_ave),
        };
        if better {
            best = Some(GridArrangement { grid, shares });
        }
        Ok(())
    };
    fill_canonical(&mut cells, &mut used, 1, q, &mut search)?;
    best.ok_or(AllocError::Empty {
        what: "grid arrangements",
    })
}

/// Fills `cells[pos..]` (row-major, `q` columns) with the unused processors,
/// keeping the first row and the first column increasing, and calls `f` on
/// every complete canonical arrangement.
fn fill_canonical<F>(
    cells: &mut [usize],
    used: &mut [bool],
    pos: usize,
    q: usize,
    f: &mut F,
) -> Result<(), AllocError>
where
    F: FnMut(&[usize]) -> Result<(), AllocError>,
{
    if pos == cells.len() {
        return f(cells);
    }
    let (i, j) = (pos / q, pos % q);
    for k in 0..cells.len() {
        if used[k] || (i == 0 && k < cells[pos - 1]) || (j == 0 && k < cells[pos - q]) {
            continue;
        }
        used[k] = true;
        cells[pos] = k;
        fill_canonical(cells, used, pos + 1, q, f)?;
        used[k] = false;
    }
    cells[pos] = usize::MAX;
    Ok(())
}
