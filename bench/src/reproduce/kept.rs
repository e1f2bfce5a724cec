//! Rows from runs kept in `bench/results/` that `reproduce` does not re-run: the
//! real-contention and sleep-emulation experiments under `mpirun` (they need an MPI
//! build of jdmg, busy loops pinned by `taskset` and a quiet machine). Each row names
//! its file; a missing file gives no row.

use std::path::Path;

use serde_json::Value;

use super::{rel_verdict, Row};

/// Setting of a kept run.
fn kept(what: &str, file: &str) -> String {
    format!("{what}; kept run `results/{file}`, not re-run")
}

fn summary(results: &Path, file: &str) -> Option<Vec<Value>> {
    let text = std::fs::read_to_string(results.join(file)).ok()?;
    let v: Value = serde_json::from_str(&text).ok()?;
    v.get("summary")?.as_array().cloned()
}

fn field(v: &[Value], label: &str, key: &str) -> Option<f64> {
    v.iter()
        .find(|s| s.get("label").and_then(Value::as_str) == Some(label))?
        .get(key)?
        .as_f64()
}

/// 003: Table 1 under real contention (three 2-rank JDcg jobs overlapping on the
/// two cores) and the slow link of Tables 2–3 (latency emulated by sleeping).
pub fn rows_003(results: &Path) -> Vec<Row> {
    let mut rows = Vec::new();
    let file = "grid_competing_real/competing.json";
    if let Some(s) = summary(results, file) {
        let paper = [
            (4515.0, 1848.0, 50.2, 4.6),
            (4448.0, 1896.0, 49.8, 5.8),
            (4292.0, 1852.0, 49.2, 6.4),
        ];
        for (j, (cpus, (pu, pb, piu, pib))) in ["0,1", "1,1", "0,1"].iter().zip(paper).enumerate() {
            let lu = format!("job {} (CPUs {cpus}), balance none", j + 1);
            let lb = format!("job {} (CPUs {cpus}), balance fastest", j + 1);
            let (Some(tu), Some(tb), Some(iu), Some(ib)) = (
                field(&s, &lu, "wall_seconds"),
                field(&s, &lb, "wall_seconds"),
                field(&s, &lu, "imbalance_percent"),
                field(&s, &lb, "imbalance_percent"),
            ) else {
                continue;
            };
            let mut r = Row::num(
                format!(
                    "Table 1, job {} under real contention (2 MPI ranks on CPUs {cpus}, three jobs at once, lap3d:30): \
                     time balanced / unbalanced, %imbalance",
                    j + 1
                ),
                tb / tu,
                Some(pb / pu),
                |x| format!("{x:.2}"),
                &kept("real contention", file),
                format!(
                    "{}; on 2 cores the ranks of a job are at most 2× apart, which bounds the gain at 0.5{}",
                    rel_verdict(tb / tu, pb / pu),
                    if cpus == &"1,1" {
                        "; both ranks on one core: nothing to balance"
                    } else {
                        ""
                    }
                ),
            );
            r.ours = format!("{:.2} ({iu:.1} % → {ib:.1} %)", tb / tu);
            r.paper = format!("{:.2} ({piu} % → {pib} %)", pb / pu);
            rows.push(r);
        }
    }
    let file = "grid_slowlink/slowlink.json";
    if let Some(s) = summary(results, file) {
        for lat in ["0.5", "2", "5"] {
            let (Some(tf), Some(tm)) = (
                field(&s, &format!("fine grain, link {lat} ms"), "wall_seconds"),
                field(&s, &format!("multigrain, link {lat} ms"), "wall_seconds"),
            ) else {
                continue;
            };
            rows.push(Row::num(
                format!(
                    "Tables 2–3: multigrain / fine grain time across a slow link ({lat} ms per collective, 2 MPI ranks, lap3d:30)"
                ),
                tm / tf,
                Some(1198.0 / 1714.0),
                |x| format!("{x:.2}"),
                &kept("sleep emulation of the link latency, real processes", file),
                "paper: (AB)C against fine-grain ABC, 1198 / 1714 s; multigrain hides the latency in both, \
                 ours with 2 ranks and an emulated link, the paper's with 3 clusters",
            ));
        }
    }
    rows
}

/// 000 §3: heterogeneous cyclic(B) against cyclic under real busy loops.
pub fn rows_000(results: &Path) -> Vec<Row> {
    [
        ("LU", "dense_hetero_busyloops_quiet.jsonl"),
        ("QR", "dense_hetero_qr_busyloops.jsonl"),
    ]
    .into_iter()
    .filter_map(|(op, file)| hetero_busyloops_row(results, op, file))
    .collect()
}

/// The row of one kept `bench/scripts/dense_hetero.sh` run (n = 3000, 2 MPI
/// ranks, 2 busy loops on core 1): the median time of the heterogeneous
/// cyclic(4) layout over the cyclic one's, and 000's model on the measured rates.
fn hetero_busyloops_row(results: &Path, op: &str, file: &str) -> Option<Row> {
    let text = std::fs::read_to_string(results.join(file)).ok()?;
    let runs: Vec<Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let pick = |layout: &str, slice: Option<u64>, key: &str| -> Vec<f64> {
        runs.iter()
            .filter(|r| {
                r["layout"] == layout && slice.is_none_or(|b| r["slice"].as_u64() == Some(b))
            })
            .filter_map(|r| r[key].as_f64())
            .collect()
    };
    let tc = crate::median(pick("cyclic", None, "wall_seconds"));
    let th = crate::median(pick("hetero", Some(4), "wall_seconds"));
    let model: Vec<f64> = runs
        .iter()
        .filter(|r| r["layout"] == "hetero" && r["slice"].as_u64() == Some(4))
        .filter_map(|r| Some(r["predicted_time"].as_f64()? / r["predicted_cyclic_time"].as_f64()?))
        .collect();
    let pm = crate::median(model);
    let reps = pick("cyclic", None, "wall_seconds").len();
    (tc.is_finite() && th.is_finite()).then(|| {
        Row::num(
            format!("§3: {op} n = 3000, 2 MPI ranks, 2 busy loops on core 1 (rank 1 ≈ 3× slower): t_hetero(4) / t_cyclic"),
            th / tc,
            None,
            |x| format!("{x:.2}"),
            &kept("real contention (busy loops pinned by taskset, nice −10)", file),
            format!(
                "000's model on the measured rates: {pm:.2}; medians of {reps}; the paper measures lip/lhpc without printing the times"
            ),
        )
    })
}
