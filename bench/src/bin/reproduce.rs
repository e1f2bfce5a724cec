//! Every table and figure of the five papers that the project reproduces, by one
//! command (issue 40):
//!
//! ```text
//! cargo run --release -p bench --bin reproduce -- <000|001|002|003|004|all> [--quick|--full]
//! ```
//!
//! Writes CSV and SVG files and `rows.json` under `bench/results/<paper>/`, then
//! regenerates `bench/REPRODUCTION.md` from the kept rows of every paper (so running
//! one paper keeps the others' sections). See `bench::reproduce`.

use std::path::PathBuf;
use std::process::ExitCode;

use bench::reproduce::{assemble_markdown, run_paper, Size, PAPERS};
use clap::Parser;

#[derive(Parser, Debug)]
#[command(about = "Reproduce the tables and figures of the five papers (issue 40)")]
struct Args {
    /// 000, 001, 002, 003, 004 or all.
    paper: String,
    /// Sizes that finish in seconds (CI).
    #[arg(long, conflicts_with = "full")]
    quick: bool,
    /// The paper's sizes where this machine can run them.
    #[arg(long)]
    full: bool,
    /// The bench directory (results go to DIR/results, the report to
    /// DIR/REPRODUCTION.md). Default: this crate's directory.
    #[arg(long)]
    bench_dir: Option<PathBuf>,
}

fn main() -> ExitCode {
    let a = Args::parse();
    let size = if a.quick {
        Size::Quick
    } else if a.full {
        Size::Full
    } else {
        Size::Normal
    };
    let bench = a
        .bench_dir
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")));
    let results = bench.join("results");
    let papers: Vec<&str> = if a.paper == "all" {
        PAPERS.iter().map(|(p, _)| *p).collect()
    } else {
        vec![a.paper.as_str()]
    };
    let flag = match size {
        Size::Quick => " --quick",
        Size::Full => " --full",
        _ => "",
    };
    let mut failed = false;
    for p in papers {
        let cmd = format!("reproduce {p}{flag}");
        eprintln!("reproduce: paper {p} ({})", size.name());
        match run_paper(p, size, &results, &cmd) {
            Ok(run) => {
                for r in &run.rows {
                    eprintln!(
                        "  {} | ours {} | paper {} | {}",
                        r.item, r.ours, r.paper, r.verdict
                    );
                }
                eprintln!(
                    "reproduce: paper {p}: {} rows in {:.1} s",
                    run.rows.len(),
                    run.seconds
                );
            }
            Err(e) => {
                eprintln!("reproduce: paper {p}: {e}");
                failed = true;
            }
        }
    }
    let md = bench.join("REPRODUCTION.md");
    if let Err(e) = std::fs::write(&md, assemble_markdown(&results)) {
        eprintln!("reproduce: {}: {e}", md.display());
        return ExitCode::from(2);
    }
    eprintln!("reproduce: wrote {}", md.display());
    if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}
