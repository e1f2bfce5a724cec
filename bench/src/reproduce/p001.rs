//! 001, Mehaut and Robert: the 2-D grid allocations (§4.3–4.4, Figures 7 and 10,
//! Kalinov–Lastovetsky) and the clusters-of-clusters allocation (§4.5), computed by
//! `hetdense::alloc` from the paper's cycle-times.

use hetdense::alloc::{
    grid_2d_panel, grid_2d_rational, kalinov_lastovetsky, optimized_dp, panel_column_order,
    two_level_allocation, Grid2dParams, TwoLevelParams,
};

use hetdense::grid::GridAlloc;
use hetdense::{ColumnLayout, DenseOp, DenseParams, LayoutKind};

use super::{dense, err, plot, setting, Ctx, Row, Size};

/// The items of 001.
pub fn run(ctx: &Ctx) -> Result<Vec<Row>, String> {
    let prm = Grid2dParams::default();
    let mut rows = Vec::new();
    let mut lines = Vec::new();
    // Figure 7: rank-1 grid t = [[1,2],[3,6]], 4×3 panel.
    let t1 = vec![vec![1.0, 2.0], vec![3.0, 6.0]];
    let p = grid_2d_panel(&t1, 4, 3, &prm).map_err(err)?;
    lines.push(format!("fig7,{:?},{:?},{}", p.r, p.c, p.exec_time));
    rows.push(Row::model_exact(
        "Fig. 7: grid t = [[1,2],[3,6]], 4×3 panel: rows r, columns c, loads",
        format!("r = {:?}, c = {:?}, loads {:?}", p.r, p.c, p.loads),
        "r = (3,1), c = (2,1), every load 6",
        p.r == [3, 1] && p.c == [2, 1],
    ));
    // Figure 10: non-rank-1 t = [[1,2],[3,5]], 8×6 panel.
    let t2 = vec![vec![1.0, 2.0], vec![3.0, 5.0]];
    let p = grid_2d_panel(&t2, 8, 6, &prm).map_err(err)?;
    let order = panel_column_order(&t2, &p.r, &p.c).map_err(err)?;
    let abab: String = order
        .iter()
        .map(|&c| if c == 0 { 'A' } else { 'B' })
        .collect();
    lines.push(format!("fig10,{:?},{:?},{}", p.r, p.c, p.exec_time));
    rows.push(Row::model_exact(
        "Fig. 10: grid t = [[1,2],[3,5]], 8×6 panel: rows, columns, column order",
        format!("r = {:?}, c = {:?}, order {abab}", p.r, p.c),
        "r = (6,2), c = (4,2), order ABAABA",
        p.r == [6, 2] && p.c == [4, 2] && abab == "ABAABA",
    ));
    let g = grid_2d_rational(&t2, &prm).map_err(err)?;
    rows.push(Row::num(
        "§4.3: t = [[1,2],[3,5]]: busy fraction of P22 with the rational optimum",
        g.busy[1][1],
        Some(5.0 / 6.0),
        |x| format!("{x:.3}"),
        setting::MODEL,
        "exact (P22 idles every sixth step)",
    ));
    // Kalinov–Lastovetsky: 40 of every 61 columns.
    let kl = kalinov_lastovetsky(&t2).map_err(err)?;
    let cols = kl.integer_columns(61).map_err(err)?.counts;
    lines.push(format!("kl,{cols:?},,{}", kl.t_ave));
    rows.push(Row::model_exact(
        "§4.4: Kalinov–Lastovetsky on t = [[1,2],[3,5]]: columns of 61 to the first processor column",
        format!("{} of 61", cols[0]),
        "40 of 61",
        cols[0] == 40,
    ));
    // §4.5: clusters of clusters, A = (2,3,4), B = (3,5,8), panels of 5 blocks.
    let clusters = vec![vec![2.0, 3.0, 4.0], vec![3.0, 5.0, 8.0]];
    let a = two_level_allocation(&clusters, 5, &TwoLevelParams::default()).map_err(err)?;
    let seq: String = a
        .panel_cluster
        .iter()
        .map(|&c| if c == 0 { 'A' } else { 'B' })
        .collect();
    lines.push(format!("clusters,{seq},{:?},", a.panel_times));
    rows.push(Row::model_exact(
        "§4.5: clusters A = (2,3,4), B = (3,5,8): panel order and panel times",
        format!("{seq}, times {:?}", a.panel_times),
        "BAABA, times 10, 6, 6, 9, 6 (\"10 and not 9\")",
        seq == "BAABA" && a.panel_times == [10.0, 6.0, 6.0, 9.0, 6.0],
    ));
    // §4.5: the optimized DP of (3,5,8): 33|85335385.
    let dp = optimized_dp(&[3.0, 5.0, 8.0], 10).map_err(err)?;
    let lab = |i: usize| ["3", "5", "8"][i];
    let s: String = dp
        .initial
        .iter()
        .enumerate()
        .flat_map(|(i, &c)| std::iter::repeat_n(lab(i), c))
        .collect::<String>()
        + "|"
        + &dp
            .slice_layout()
            .iter()
            .map(|&i| lab(i))
            .collect::<String>();
    rows.push(Row::model_exact(
        "§4.5: optimized allocation of (3,5,8), 10 blocks",
        s.clone(),
        "33|85335385",
        s == "33|85335385",
    ));
    ctx.csv(
        "grids.csv",
        "item,rows_or_sequence,columns_or_times,time",
        &lines,
    )?;
    let lu = grid_measured(ctx, &mut rows, DenseOp::Lu)?;
    let qr = grid_measured(ctx, &mut rows, DenseOp::Qr)?;
    plot::grouped_bars(
        &ctx.path("grid_measured.svg"),
        "001 §4.3–4.4: 2×2 grid, cycle-times 1, 2, 3, 6: t_hetero / t_cyclic",
        "t_hetero / t_cyclic",
        &[
            "panel allocation".to_string(),
            "Kalinov–Lastovetsky".to_string(),
        ],
        &[
            ("LU", lu.to_vec()),
            ("QR", qr.to_vec()),
            ("Fig. 7 loads (1/3)", vec![1.0 / 3.0; 2]),
        ],
    )?;
    clusters_executed(ctx, &mut rows)?;
    Ok(rows)
}

/// LU or QR on a 2×2 grid of thread ranks with the cycle-times of Figure 7 (1, 2,
/// 3, 6) as slowdowns: the cyclic panel against the heterogeneous panel and
/// Kalinov–Lastovetsky allocations. The rank-1 grid balances perfectly: every
/// processor's load 6 per 4×3 panel against 18 for the slowest one on the cyclic
/// 2×2, so the model's time ratio is 1/3 (§4.3: "the core of the LU and QR
/// decompositions is a rank-r update", so the same for both). Returns
/// `t_hetero / t_cyclic` of the panel and Kalinov–Lastovetsky allocations.
fn grid_measured(ctx: &Ctx, rows: &mut Vec<Row>, op: DenseOp) -> Result<[f64; 2], String> {
    let (n, block, reps) = match ctx.size {
        Size::Tiny => (256, 16, 1),
        Size::Quick => (600, 24, 1),
        Size::Normal => (1500, 32, 3),
        Size::Full => (3000, 64, 3),
    };
    let slow = [1.0, 2.0, 3.0, 6.0];
    let base = DenseParams {
        op,
        n,
        block,
        grid: Some((2, 2)),
        ..DenseParams::default()
    };
    let (tc, _) = dense::median_time(&base, &slow, reps)?;
    let mut lines = vec![format!("cyclic,{n},{block},{tc:.4},1")];
    let mut ratios = [0.0; 2];
    for (a, (alloc, name)) in [(GridAlloc::Panel, "panel"), (GridAlloc::Kl, "kl")]
        .into_iter()
        .enumerate()
    {
        let p = DenseParams {
            layout: LayoutKind::Hetero,
            grid_alloc: alloc,
            ..base.clone()
        };
        let (th, rep) = dense::median_time(&p, &slow, reps)?;
        lines.push(format!("hetero {name},{n},{block},{th:.4},{:.3}", th / tc));
        ratios[a] = th / tc;
        let which = if name == "panel" {
            "panel allocation"
        } else {
            "Kalinov–Lastovetsky"
        };
        let (item, extra) = match op {
            DenseOp::Qr => (
                format!(
                    "§4.3–4.4 measured: 2-D QR n = {n} on a 2×2 grid of thread ranks with cycle-times \
                     1, 2, 3, 6 ({which}): t_hetero / t_cyclic"
                ),
                format!(
                    "; ‖A − QR‖/‖A‖ = {:.1e}, ‖QᵀQ − I‖ = {:.1e}",
                    rep.backward_error.unwrap_or(f64::NAN),
                    rep.orthogonality.unwrap_or(f64::NAN)
                ),
            ),
            _ => (
                format!(
                    "§4.3–4.4 measured: LU n = {n} on a 2×2 grid of thread ranks with cycle-times \
                     1, 2, 3, 6 ({which}): t_hetero / t_cyclic"
                ),
                String::new(),
            ),
        };
        rows.push(Row::num(
            item,
            th / tc,
            Some(1.0 / 3.0),
            |x| format!("{x:.2}"),
            setting::CPU,
            format!(
                "the paper's figure is derived from its Fig. 7 loads (6 per processor and 4×3 panel against 18 \
                 for the slowest on the cyclic grid); {:.0} % above it (panel factorizations and broadcasts \
                 are not in that count); medians of {reps}{extra}",
                100.0 * (3.0 * th / tc - 1.0)
            ),
        ));
    }
    let file = match op {
        DenseOp::Qr => "grid_qr_measured.csv",
        _ => "grid_lu_measured.csv",
    };
    ctx.csv(file, "layout,n,block,virtual_seconds,over_cyclic", &lines)?;
    Ok(ratios)
}

/// §4.5 executed on emulated clusters: six thread ranks, cluster A at the paper's
/// cycle-times (2, 3, 4) and cluster B at (3, 5, 8) (slowdowns of the virtual
/// clocks, CPU time × slowdown), run the 1-D right-looking LU with look-ahead of
/// depth 1 on three column allocations computed from those cycle-times: the
/// homogeneous cyclic one, the per-processor heterogeneous cyclic(B) of `000`
/// §2.2 over all six ranks (clusters ignored), and the two-level allocation of
/// §4.5 (panels of `B = 5` column blocks to the clusters by the DP on their
/// panel times, `BAABA` from the right, blocks inside a cluster by its
/// continued DP). Then again with a slow link: every collective of the 1-D LU
/// spans both clusters, and `link` virtual seconds are added to each one
/// (the paper overlaps the inter-cluster broadcast with updates through a
/// dedicated communication processor per cluster; here the broadcasts block,
/// and only the look-ahead hides part of the link).
fn clusters_executed(ctx: &Ctx, rows: &mut Vec<Row>) -> Result<(), String> {
    let (n, block, reps) = match ctx.size {
        Size::Tiny => (240, 8, 1),
        Size::Quick => (600, 16, 1),
        Size::Normal => (1500, 32, 3),
        Size::Full => (3000, 32, 3),
    };
    let link = 5e-4;
    let slow = [2.0, 3.0, 4.0, 3.0, 5.0, 8.0];
    let groups = vec![vec![0, 1, 2], vec![3, 4, 5]];
    let layouts = [
        (
            "cyclic",
            ColumnLayout::build(LayoutKind::Cyclic, &slow, n, block, None).map_err(err)?,
        ),
        (
            "per-processor",
            ColumnLayout::build(LayoutKind::Hetero, &slow, n, block, None).map_err(err)?,
        ),
        (
            "§4.5 two-level",
            ColumnLayout::build_clusters(&groups, &slow, n, block, Some(5)).map_err(err)?,
        ),
    ];
    let two = &layouts[2].1;
    // Panels are whole from the right end (the first one may be cut).
    let mut order: Vec<char> = two
        .home
        .rchunks(5)
        .map(|c| if c[0] < 3 { 'A' } else { 'B' })
        .collect();
    order.reverse();
    let order: String = order.into_iter().collect();
    let mut lines = Vec::new();
    let mut t = [[0.0; 3]; 2];
    // Per-run ratios (min, max) of §4.5 to cyclic and to per-processor: the three
    // allocations run back to back in every repetition, under the same load.
    let mut spread = [[(f64::INFINITY, 0.0f64); 2]; 2];
    let model: Vec<f64> = layouts
        .iter()
        .map(|(_, lay)| lay.predicted_time_weighted(&slow))
        .collect::<Result<_, _>>()
        .map_err(err)?;
    for (li, lat) in [0.0, link].into_iter().enumerate() {
        let mut ts = [vec![], vec![], vec![]];
        let mut be = [0.0; 3];
        for _ in 0..reps {
            for (k, (_, lay)) in layouts.iter().enumerate() {
                let (tm, e) = dense::lu_on_layout(lay, &slow, lat, true)?;
                ts[k].push(tm);
                be[k] = e;
            }
            let last = |k: usize| ts[k].last().copied().unwrap_or(f64::NAN);
            for (j, other) in [0, 1].into_iter().enumerate() {
                let r = last(2) / last(other);
                spread[li][j] = (spread[li][j].0.min(r), spread[li][j].1.max(r));
            }
        }
        for (k, (name, lay)) in layouts.iter().enumerate() {
            t[li][k] = crate::median(&ts[k]);
            let cols: Vec<String> = lay
                .columns_per_rank()
                .iter()
                .map(|c| c.to_string())
                .collect();
            let runs: Vec<String> = ts[k].iter().map(|x| format!("{x:.4}")).collect();
            lines.push(format!(
                "{name},{n},{block},{lat},{:.4},{},{:.3},{:.2},{:.1e},{}",
                t[li][k],
                runs.join(" "),
                t[li][k] / t[li][0],
                model[k],
                be[k],
                cols.join(" ")
            ));
        }
    }
    ctx.csv(
        "clusters_measured.csv",
        "allocation,n,block,link_seconds_per_collective,virtual_seconds,runs,over_cyclic,model_time,backward_error,columns_per_rank",
        &lines,
    )?;
    plot::grouped_bars(
        &ctx.path("clusters_measured.svg"),
        &format!("001 §4.5, emulated clusters A = (2,3,4), B = (3,5,8): LU n = {n}"),
        "t / t_cyclic",
        &[
            "no link cost".to_string(),
            format!("link {:.1} ms per collective", link * 1e3),
        ],
        &[
            ("cyclic", vec![1.0, 1.0]),
            (
                "per-processor (000 §2.2)",
                vec![t[0][1] / t[0][0], t[1][1] / t[1][0]],
            ),
            ("§4.5 two-level", vec![t[0][2] / t[0][0], t[1][2] / t[1][0]]),
        ],
    )?;
    let what = format!(
        "§4.5 executed (emulated clusters: 6 thread ranks, A = (2,3,4), B = (3,5,8)): LU n = {n}, \
         panels of 5 blocks ({order} left to right), look-ahead"
    );
    for (li, tag) in [
        (0, String::new()),
        (1, format!(", link {:.1} ms per collective", link * 1e3)),
    ] {
        let tt = t[li];
        rows.push(Row::num(
            format!("{what}{tag}: t_§4.5 / t_cyclic"),
            tt[2] / tt[0],
            None,
            |x| format!("{x:.2}"),
            setting::CPU,
            format!(
                "no measured figure in the paper (allocation only); the weighted model of 000 \
                 §2.2 predicts {:.2}{}; medians of {reps} (per-run ratios {:.2}–{:.2})",
                model[2] / model[0],
                if li == 1 {
                    " without the link (every collective of the 1-D LU crosses it, not overlapped)"
                } else {
                    ""
                },
                spread[li][0].0,
                spread[li][0].1
            ),
        ));
        rows.push(Row::num(
            format!("{what}{tag}: t_§4.5 / t_per-processor"),
            tt[2] / tt[1],
            None,
            |x| format!("{x:.2}"),
            setting::CPU,
            format!(
                "per-processor = 000 §2.2 heterogeneous cyclic(B) over the six ranks, t / t_cyclic = {:.2}; \
                 the model predicts {:.2} for t_§4.5 / t_per-processor; medians of {reps} \
                 (per-run ratios {:.2}–{:.2}): {}",
                tt[1] / tt[0],
                model[2] / model[1],
                spread[li][1].0,
                spread[li][1].1,
                if spread[li][1].0 <= 1.0 && spread[li][1].1 >= 1.0 {
                    "the two allocations tie within the run-to-run spread"
                } else if spread[li][1].1 < 1.0 {
                    "§4.5 faster in every run"
                } else {
                    "§4.5 slower in every run"
                }
            ),
        ));
    }
    Ok(())
}
