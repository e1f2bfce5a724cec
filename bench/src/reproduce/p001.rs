//! 001, Mehaut and Robert: the 2-D grid allocations (§4.3–4.4, Figures 7 and 10,
//! Kalinov–Lastovetsky) and the clusters-of-clusters allocation (§4.5), computed by
//! `hetdense::alloc` from the paper's cycle-times.

use hetdense::alloc::{
    grid_2d_panel, grid_2d_rational, kalinov_lastovetsky, optimized_dp, panel_column_order,
    two_level_allocation, Grid2dParams, TwoLevelParams,
};

use super::{err, setting, Ctx, Row};

/// The items of 001.
pub fn run(ctx: &Ctx) -> Result<Vec<Row>, String> {
    let prm = Grid2dParams::default();
    let mut rows = Vec::new();
    let mut lines = Vec::new();
    // Figure 7: rank-1 grid t = [[1,2],[3,6]], 4×3 panel.
    let t1 = vec![vec![1.0, 2.0], vec![3.0, 6.0]];
    let p = grid_2d_panel(&t1, 4, 3, &prm).map_err(err)?;
    lines.push(format!("fig7,{:?},{:?},{}", p.r, p.c, p.exec_time));
    rows.push(Row::text(
        "Fig. 7: grid t = [[1,2],[3,6]], 4×3 panel: rows r, columns c, loads",
        format!("r = {:?}, c = {:?}, loads {:?}", p.r, p.c, p.loads),
        "r = (3,1), c = (2,1), every load 6",
        setting::MODEL,
        if p.r == [3, 1] && p.c == [2, 1] {
            "exact"
        } else {
            "differs"
        },
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
    rows.push(Row::text(
        "Fig. 10: grid t = [[1,2],[3,5]], 8×6 panel: rows, columns, column order",
        format!("r = {:?}, c = {:?}, order {abab}", p.r, p.c),
        "r = (6,2), c = (4,2), order ABAABA",
        setting::MODEL,
        if p.r == [6, 2] && p.c == [4, 2] && abab == "ABAABA" {
            "exact"
        } else {
            "differs"
        },
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
    rows.push(Row::text(
        "§4.4: Kalinov–Lastovetsky on t = [[1,2],[3,5]]: columns of 61 to the first processor column",
        format!("{} of 61", cols[0]),
        "40 of 61",
        setting::MODEL,
        if cols[0] == 40 { "exact" } else { "differs" },
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
    rows.push(Row::text(
        "§4.5: clusters A = (2,3,4), B = (3,5,8): panel order and panel times",
        format!("{seq}, times {:?}", a.panel_times),
        "BAABA, times 10, 6, 6, 9, 6 (\"10 and not 9\")",
        setting::MODEL,
        if seq == "BAABA" && a.panel_times == [10.0, 6.0, 6.0, 9.0, 6.0] {
            "exact"
        } else {
            "differs"
        },
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
    rows.push(Row::text(
        "§4.5: optimized allocation of (3,5,8), 10 blocks",
        s.clone(),
        "33|85335385",
        setting::MODEL,
        if s == "33|85335385" {
            "exact"
        } else {
            "differs"
        },
    ));
    ctx.csv(
        "grids.csv",
        "item,rows_or_sequence,columns_or_times,time",
        &lines,
    )?;
    rows.push(Row::missing(
        "§4.5: clusters of clusters executed (look-ahead across clusters)",
        "planned allocation only",
        "the allocation is computed; a run across emulated clusters is issue 40 item 2",
    ));
    rows.push(Row::missing(
        "2-D QR on a heterogeneous grid",
        "§4",
        "no 2-D QR code yet (issue 40 item 2)",
    ));
    rows.push(Row::missing(
        "LU on the 2-D grid, measured (virtual clocks, kept in bench/README)",
        "–",
        "thread-backend runs of `jdmg dense lu --grid 2x2` not wired in yet",
    ));
    Ok(rows)
}
