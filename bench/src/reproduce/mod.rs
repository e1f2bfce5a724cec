//! `reproduce`: every table and figure of the five papers that the project
//! reproduces, one list of items per paper (issue 40).
//!
//! Each item runs an experiment at a size this 2-core machine finishes in minutes
//! ([`Size::Normal`]; seconds with [`Size::Quick`]), writes CSV (and an SVG plot where
//! the paper has a figure) under `bench/results/<paper>/`, and returns [`Row`]s: the
//! item, our figure, the paper's figure, the setting (real contention, virtual
//! clocks, emulation or the paper's model) and a verdict. The rows of a paper are
//! kept in `bench/results/<paper>/rows.json`; [`assemble_markdown`] builds
//! `bench/REPRODUCTION.md` from every paper's fragment, so that running one paper
//! keeps the sections of the others.

use std::fmt::Display;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::{Deserialize, Serialize};

mod dense;
mod kept;
mod p000;
mod p001;
mod p002;
mod p003;
mod p004;
pub mod plot;

/// How large the experiments are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Size {
    /// The smallest sizes, for unit tests (a few seconds in all, debug or release).
    Tiny,
    /// Seconds per paper (`--quick`, for CI).
    Quick,
    /// Minutes per paper on this 2-core machine (the default).
    Normal,
    /// The paper's sizes where this machine can run them (`--full`).
    Full,
}

impl Size {
    /// The name written into the results.
    pub fn name(self) -> &'static str {
        match self {
            Size::Tiny => "tiny",
            Size::Quick => "quick",
            Size::Normal => "normal",
            Size::Full => "full",
        }
    }
}

/// How an item's figure was obtained.
pub mod setting {
    /// Deterministic: the paper's own cost model or worked example, computed.
    pub const MODEL: &str = "model";
    /// A schedule built by the paper's algorithm, evaluated in the paper's cost model.
    pub const MODEL_SCHEDULE: &str = "model (simulated schedule)";
    /// Thread ranks on manual clocks.
    pub const MANUAL: &str = "virtual clocks (thread ranks, emulated slowdowns)";
    /// Thread ranks whose clocks are their CPU time × slowdown.
    pub const CPU: &str = "virtual clocks (thread ranks, CPU time × slowdown)";
    /// Simulated clocks of the dense schedulers.
    pub const SIMULATED: &str = "virtual clocks (simulated schedule)";
    /// Not run.
    pub const NONE: &str = "not run";
}

/// One line of a paper's table in REPRODUCTION.md.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Row {
    /// The paper's table or figure and what is compared.
    pub item: String,
    /// Our figure, as printed.
    pub ours: String,
    /// The paper's figure, as printed.
    pub paper: String,
    /// How ours was obtained (see [`setting`]).
    pub setting: String,
    /// Within how much, or why not comparable.
    pub verdict: String,
    /// Our figure as a number, when it is one.
    #[serde(default)]
    pub ours_value: Option<f64>,
    /// The paper's figure as a number, when it is one.
    #[serde(default)]
    pub paper_value: Option<f64>,
}

impl Row {
    /// A row with numbers.
    pub fn num(
        item: impl Into<String>,
        ours: f64,
        paper: Option<f64>,
        fmt: impl Fn(f64) -> String,
        setting: &str,
        verdict: impl Into<String>,
    ) -> Self {
        Row {
            item: item.into(),
            ours: fmt(ours),
            paper: paper.map(&fmt).unwrap_or_else(|| "–".into()),
            setting: setting.into(),
            verdict: verdict.into(),
            ours_value: Some(ours),
            paper_value: paper,
        }
    }

    /// A row with text figures.
    pub fn text(
        item: impl Into<String>,
        ours: impl Into<String>,
        paper: impl Into<String>,
        setting: &str,
        verdict: impl Into<String>,
    ) -> Self {
        Row {
            item: item.into(),
            ours: ours.into(),
            paper: paper.into(),
            setting: setting.into(),
            verdict: verdict.into(),
            ours_value: None,
            paper_value: None,
        }
    }

    /// A row of the paper's model with text figures: "exact" when ours equal
    /// the paper's (`equal`), "differs" otherwise.
    pub fn model_exact(
        item: impl Into<String>,
        ours: impl Into<String>,
        paper: impl Into<String>,
        equal: bool,
    ) -> Self {
        let verdict = if equal { "exact" } else { "differs" };
        Row::text(item, ours, paper, setting::MODEL, verdict)
    }

    /// An item not reproduced here, with the reason.
    pub fn missing(
        item: impl Into<String>,
        paper: impl Into<String>,
        why: impl Into<String>,
    ) -> Self {
        Row::text(item, "–", paper, setting::NONE, why)
    }
}

/// The rows of one paper and how they were made (`bench/results/<paper>/rows.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PaperRun {
    /// "000" … "004".
    pub paper: String,
    /// Authors and title.
    pub title: String,
    /// Size of the run.
    pub size: Size,
    /// UTC date of the run, YYYY-MM-DD HH:MM.
    pub date: String,
    /// Wall seconds of the whole paper.
    pub seconds: f64,
    /// The command that made it.
    pub command: String,
    /// The rows.
    pub rows: Vec<Row>,
}

/// The papers, in order, with their titles.
pub const PAPERS: [(&str, &str); 5] = [
    (
        "000",
        "Boudet, Rastello, Robert: A Proposal for a Heterogeneous Cluster ScaLAPACK (Dense Linear Solvers)",
    ),
    (
        "001",
        "Mehaut, Robert: Algorithms and Tools for (Distributed) Heterogeneous Computing: A Prospective Report",
    ),
    (
        "002",
        "Barbosa, Morais, Tadeu: Data Parallel Scheduling of Operations in Linear Algebra on Heterogeneous Clusters",
    ),
    (
        "003",
        "McCombs, Mills, Stathopoulos: Dynamic Load Balancing of an Iterative Eigensolver on Grids of Heterogeneous Clusters",
    ),
    (
        "004",
        "Beaumont, Eyraud-Dubois, Vérité: 2-D tile allocation for BLR matrices on heterogeneous processors",
    ),
];

/// Error text of any displayable error.
pub(crate) fn err(e: impl Display) -> String {
    e.to_string()
}

/// The values as they print, joined by `sep` (lists inside a CSV cell or a
/// row's text).
pub(crate) fn joined<T: Display>(values: &[T], sep: &str) -> String {
    values
        .iter()
        .map(|x| x.to_string())
        .collect::<Vec<_>>()
        .join(sep)
}

/// Where an item writes its files.
pub struct Ctx {
    /// `bench/results/<paper>/`.
    pub dir: PathBuf,
    /// Experiment size.
    pub size: Size,
    /// `bench/results/` (kept runs are read from there).
    pub results: PathBuf,
}

impl Ctx {
    /// Writes `name` (CSV text) into the paper's directory.
    ///
    /// # Errors
    /// The I/O error, with the path.
    pub fn csv(&self, name: &str, header: &str, lines: &[String]) -> Result<(), String> {
        let mut s = String::from(header);
        s.push('\n');
        for l in lines {
            s.push_str(l);
            s.push('\n');
        }
        let p = self.dir.join(name);
        fs::write(&p, s).map_err(|e| format!("{}: {e}", p.display()))
    }

    /// Path of a file in the paper's directory.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }
}

/// Runs every item of `paper` at `size`, writing its files and `rows.json` under
/// `results/<paper>/`.
///
/// # Errors
/// An unknown paper, or an item's failure (I/O, a solver error).
pub fn run_paper(
    paper: &str,
    size: Size,
    results: &Path,
    command: &str,
) -> Result<PaperRun, String> {
    let title = PAPERS
        .iter()
        .find(|(p, _)| *p == paper)
        .map(|(_, t)| t.to_string())
        .ok_or_else(|| format!("unknown paper {paper:?} (000, 001, 002, 003, 004 or all)"))?;
    let dir = results.join(paper);
    fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let ctx = Ctx {
        dir,
        size,
        results: results.to_path_buf(),
    };
    let t0 = Instant::now();
    let rows = match paper {
        "000" => p000::run(&ctx)?,
        "001" => p001::run(&ctx)?,
        "002" => p002::run(&ctx)?,
        "003" => p003::run(&ctx)?,
        _ => p004::run(&ctx)?,
    };
    let run = PaperRun {
        paper: paper.to_string(),
        title,
        size,
        date: utc_now(),
        seconds: t0.elapsed().as_secs_f64(),
        command: command.to_string(),
        rows,
    };
    let p = ctx.path("rows.json");
    let text = serde_json::to_string_pretty(&run).map_err(err)?;
    fs::write(&p, text + "\n").map_err(|e| format!("{}: {e}", p.display()))?;
    Ok(run)
}

/// Reads `results/<paper>/rows.json` of every paper that has one.
pub fn read_runs(results: &Path) -> Vec<PaperRun> {
    PAPERS
        .iter()
        .filter_map(|(p, _)| {
            let text = fs::read_to_string(results.join(p).join("rows.json")).ok()?;
            serde_json::from_str(&text).ok()
        })
        .collect()
}

/// `|` and newlines would break a markdown table cell.
fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

/// REPRODUCTION.md from the kept rows of every paper (`results` is
/// `bench/results`; links are relative to `bench/`).
pub fn assemble_markdown(results: &Path) -> String {
    let runs = read_runs(results);
    let mut s = String::new();
    s.push_str("# Reproduction of the five papers\n\n");
    s.push_str(
        "Generated by `cargo run --release -p bench --bin reproduce -- <paper|all> [--quick|--full]` \
         (issue 40); do not edit by hand. Each paper's rows are kept in \
         `results/<paper>/rows.json` beside its CSV and SVG files, and this file is \
         assembled from all of them, so a run of one paper keeps the others' sections.\n\n",
    );
    s.push_str(
        "Settings:\n\n\
         - **model**: the paper's cost model or worked example, computed exactly (no timing).\n\
         - **model (simulated schedule)**: schedules built by the paper's algorithms and \
           evaluated in the paper's own cost model (no timing).\n\
         - **virtual clocks (simulated schedule)**: the schedule of the paper's processor and \
           network model, simulated (no timing).\n\
         - **virtual clocks (thread ranks, emulated slowdowns)**: the solver runs on thread \
           ranks whose clocks are manual: each sparse product charges its nonzeros times the \
           rank's slowdown factor, and collectives wait for the latest rank. Deterministic and \
           independent of this machine's load; slow processors are emulated, not real.\n\
         - **virtual clocks (thread ranks, CPU time × slowdown)**: the dense LU/QR runs on \
           thread ranks whose clocks are their own CPU time times a slowdown factor: the other \
           work on the machine does not count, but the figures vary by a few % between runs.\n\
         - **sleep emulation**: real runs where slow processes sleep (`--slowdown` under mpirun).\n\
         - **real contention**: real processes with busy loops pinned by `taskset`.\n\
         - **not run**: the row says why.\n\n",
    );
    for (p, title) in PAPERS {
        s.push_str(&format!("## {p} — {title}\n\n"));
        let Some(run) = runs.iter().find(|r| r.paper == p) else {
            s.push_str(&format!(
                "Not run yet: `cargo run --release -p bench --bin reproduce -- {p}`.\n\n"
            ));
            continue;
        };
        s.push_str(&format!(
            "Run {} UTC, size {}, {:.1} s (`{}`); files in [`results/{p}/`](results/{p}/).\n\n",
            run.date,
            run.size.name(),
            run.seconds,
            run.command
        ));
        s.push_str("| item | ours | paper | setting | verdict |\n|---|---|---|---|---|\n");
        for r in &run.rows {
            s.push_str(&format!(
                "| {} | {} | {} | {} | {} |\n",
                cell(&r.item),
                cell(&r.ours),
                cell(&r.paper),
                cell(&r.setting),
                cell(&r.verdict)
            ));
        }
        s.push('\n');
    }
    s
}

/// The current UTC time as "YYYY-MM-DD HH:MM".
pub fn utc_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // civil from days (Howard Hinnant's algorithm)
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}",
        rem / 3600,
        (rem % 3600) / 60
    )
}

/// "within X points" / "X points off" against a goal in points.
pub fn points_verdict(ours: f64, paper: f64, goal: f64) -> String {
    let d = (ours - paper).abs();
    if d <= goal {
        format!("within {d:.1} points (goal {goal})")
    } else {
        format!("{d:.1} points off (goal {goal})")
    }
}

/// How far a ratio is from the paper's, in percent of the paper's (no goal: the
/// papers state none for these).
pub fn rel_verdict(ours: f64, paper: f64) -> String {
    let d = 100.0 * (ours / paper - 1.0);
    if d.abs() < 0.5 {
        "equal to the paper's within 0.5 %".to_string()
    } else if d < 0.0 {
        format!("{:.0} % below the paper's", -d)
    } else {
        format!("{d:.0} % above the paper's")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_now_has_the_shape_of_a_date() {
        let s = utc_now();
        assert_eq!(s.len(), 16, "{s}");
        assert!(s.starts_with("20"), "{s}");
    }

    #[test]
    fn cells_escape_pipes() {
        assert_eq!(cell("a|b\nc"), "a\\|b c");
    }
}
