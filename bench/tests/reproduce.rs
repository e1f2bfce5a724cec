//! `reproduce` at the tiny size: every paper's rows are written, carry numbers where
//! they are computed, and REPRODUCTION.md is assembled from the kept fragments
//! (running one paper keeps the other papers' sections). No wall-clock thresholds.

use std::path::PathBuf;

use bench::reproduce::{assemble_markdown, read_runs, run_paper, Size};

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("jdmg-reproduce-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn tiny_runs_give_rows_with_numbers_and_keep_the_other_sections() {
    let dir = scratch("all");
    for p in ["000", "001", "002", "003", "004"] {
        let run = run_paper(p, Size::Tiny, &dir, "test").unwrap();
        assert!(!run.rows.is_empty(), "{p}: no rows");
        assert!(dir.join(p).join("rows.json").is_file(), "{p}: no rows.json");
        for r in &run.rows {
            assert!(!r.item.is_empty() && !r.setting.is_empty() && !r.verdict.is_empty());
            if let Some(x) = r.ours_value {
                assert!(x.is_finite(), "{p}: {}: {x}", r.item);
            }
        }
        let with_numbers = run.rows.iter().filter(|r| r.ours_value.is_some()).count();
        if p != "001" && p != "004" {
            assert!(with_numbers > 0, "{p}: no row with a number");
        }
    }
    // 003: the emulated Tables 1 and 3 reproduce the model's imbalance without
    // balancing and the paper's order of magnitude with it.
    let runs = read_runs(&dir);
    assert_eq!(runs.len(), 5);
    let r003 = runs.iter().find(|r| r.paper == "003").unwrap();
    let unbal = r003
        .rows
        .iter()
        .find(|r| r.item.contains("slowdowns 1,1,4,4") && r.item.ends_with("without balancing"))
        .unwrap();
    assert!((unbal.ours_value.unwrap() - 37.5).abs() < 0.5, "{unbal:?}");
    let bal = r003
        .rows
        .iter()
        .find(|r| r.item.contains("slowdowns 1,1,4,4") && r.item.ends_with("with balancing"))
        .unwrap();
    assert!(bal.ours_value.unwrap() < 15.0, "{bal:?}");
    // 003 on the real FE matrix (when it is here): AD, the first configuration of
    // Table 3, gains from balancing and is balanced within the paper's 10 %.
    if let Some(ad) = r003
        .rows
        .iter()
        .find(|r| r.item.starts_with("Table 3, AD on msc04515"))
    {
        assert!(ad.ours_value.unwrap() < 0.7, "{ad:?}");
        assert!(
            ad.verdict.contains("below the paper's tolerable 10 %"),
            "{ad:?}"
        );
    } else {
        assert!(!matrices::shared::required(), "{r003:?}");
    }
    // 002: the deterministic model gives the documented Figure 10 case 1.
    let r002 = runs.iter().find(|r| r.paper == "002").unwrap();
    let c1 = r002
        .rows
        .iter()
        .find(|r| r.item.starts_with("Fig. 10") && r.item.contains("case 1"))
        .unwrap();
    assert!((c1.ours_value.unwrap() - 31.6).abs() < 0.1, "{c1:?}");
    assert_eq!(c1.paper_value, Some(33.8));
    // 000: Figures 11 and 12 are computed (no "not run" row): the heuristic moves
    // 138 of the 210 tasks of the size-20 example, and with blocks of 32 columns
    // it stays within 1 % of the static distribution at n = 1000 and 2000.
    let r000 = runs.iter().find(|r| r.paper == "000").unwrap();
    let fig11 = r000
        .rows
        .iter()
        .find(|r| r.item.starts_with("Fig. 11 (left)"))
        .unwrap();
    assert_eq!(fig11.ours_value, Some(138.0), "{fig11:?}");
    let fig12 = r000
        .rows
        .iter()
        .find(|r| {
            r.item
                .starts_with("Fig. 12: t_dynamic / t_static, blocks of 32")
        })
        .unwrap();
    assert_eq!(fig12.ours, "0.996, 1.006", "{fig12:?}");
    assert_eq!(fig12.setting, "model (simulated schedule)");
    assert!(r000
        .rows
        .iter()
        .all(|r| !(r.item.contains("Maheswaran") && r.setting == "not run")));
    // 001: the 2-D QR and the §4.5 clusters run are measured (no "not run" row
    // left), and the QR checks are at rounding level.
    let r001 = runs.iter().find(|r| r.paper == "001").unwrap();
    assert!(r001.rows.iter().all(|r| r.setting != "not run"), "{r001:?}");
    let qr: Vec<_> = r001
        .rows
        .iter()
        .filter(|r| r.item.contains("2-D QR"))
        .collect();
    assert_eq!(qr.len(), 2, "{r001:?}");
    for r in qr {
        let x = r.ours_value.unwrap();
        assert!(x > 0.0 && x.is_finite(), "{r:?}");
        assert_eq!(r.paper_value, Some(1.0 / 3.0));
        assert!(r.verdict.contains("‖A − QR‖/‖A‖"), "{r:?}");
    }
    let clusters = r001
        .rows
        .iter()
        .filter(|r| r.item.starts_with("§4.5 executed (emulated clusters"))
        .count();
    assert_eq!(clusters, 4, "{r001:?}");
    let md = assemble_markdown(&dir);
    for p in ["## 000", "## 001", "## 002", "## 003", "## 004"] {
        assert!(md.contains(p), "{p} missing");
    }
    assert!(md.contains("| 31.6 | 33.8 |"), "{md}");
    // Re-running one paper keeps the others' fragments.
    std::fs::remove_file(dir.join("003").join("rows.json")).unwrap();
    run_paper("002", Size::Tiny, &dir, "test").unwrap();
    let md = assemble_markdown(&dir);
    assert!(md.contains("Not run yet: `cargo run --release -p bench --bin reproduce -- 003`"));
    assert!(md.contains("| 31.6 | 33.8 |") && md.contains("33\\|85335385"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn unknown_paper_is_an_error() {
    let dir = scratch("bad");
    assert!(run_paper("005", Size::Tiny, &dir, "test").is_err());
    let _ = std::fs::remove_dir_all(&dir);
}
