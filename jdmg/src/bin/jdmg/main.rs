//! The `jdmg` command line: `info`, `generate` and `solve`.
//!
//! Exit codes: 0 success (converged); 2 bad input or options (missing file, bad
//! file with its line, non-symmetric matrix, nev > n, unknown flag values);
//! 3 not converged (partial results are still printed).

#[cfg(feature = "dense")]
mod plan_cmd;

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};
use jdmg::{
    ConvTest, InnerSolver, InnerStop, IterationEvent, JdError, JdParams, PrecondChoice, Solution,
    Target,
};
use lblib::Comm;
use matrices::generate::{generate, GenSpec};
use matrices::info::matrix_info;
use matrices::mm::{read_matrix_market, MmHeader};
use matrices::CsrMatrix;

const EXIT_BAD_INPUT: u8 = 2;
const EXIT_NOT_CONVERGED: u8 = 3;

#[derive(Parser)]
#[command(
    name = "jdmg",
    version,
    about = "Block Jacobi-Davidson eigensolver for large sparse symmetric matrices"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

// Parsed once at start-up: the size difference between variants does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
enum Cmd {
    /// Size, storage, symmetry, Gershgorin bounds and memory of a MatrixMarket file.
    Info {
        /// MatrixMarket file.
        file: PathBuf,
        /// Print one JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Writes a generated matrix (e.g. lap3d:40, stencil27:64) as MatrixMarket.
    Generate {
        /// Generator spec: lap2d:N[xM], lap3d:N[xMxK], stencil27:N, aniso3d:N:ax,ay,az, spectrum:N:lo:hi[:seed].
        spec: String,
        /// Output file.
        #[arg(short, long)]
        output: PathBuf,
        /// Store only the lower triangle (symmetric storage).
        #[arg(long)]
        symmetric: bool,
    },
    /// Computes eigenpairs of FILE.mtx or of a generated matrix.
    Solve(SolveArgs),
    /// Schedules from processor speeds: malleable task graphs (`dag`), BLR tile allocation (`tiles`).
    #[cfg(feature = "dense")]
    Plan(plan_cmd::PlanArgs),
}

#[derive(Clone, Copy, ValueEnum)]
enum Which {
    Smallest,
    Largest,
}

#[derive(Clone, Copy, ValueEnum)]
enum Conv {
    Norm,
    Rel,
    Abs,
}

#[derive(Clone, Copy, ValueEnum)]
enum Prec {
    None,
    Jacobi,
    Ilu0,
    Ilut,
    Spai,
    Fsai,
}

#[derive(Clone, Copy, ValueEnum)]
enum BalanceArg {
    None,
    Fastest,
    Slowest,
}

#[derive(Clone, Copy, ValueEnum)]
enum OnOff {
    On,
    Off,
}

#[derive(Clone, Copy, ValueEnum)]
enum Inner {
    Adaptive,
    Fixed,
}

#[derive(Clone, Copy, ValueEnum)]
enum Solver {
    Bicgstab,
    Qmrs,
}

#[derive(Args)]
struct SolveArgs {
    /// MatrixMarket file (or use --generate).
    file: Option<PathBuf>,
    /// Generate the matrix instead of reading a file (e.g. lap3d:40).
    #[arg(long, conflicts_with = "file")]
    generate: Option<String>,
    /// Number of eigenpairs.
    #[arg(long)]
    nev: Option<usize>,
    /// Which end of the spectrum.
    #[arg(long, value_enum)]
    which: Option<Which>,
    /// Interior target σ: eigenvalues closest to it (overrides --which).
    #[arg(long, allow_hyphen_values = true)]
    target: Option<f64>,
    /// Convergence tolerance.
    #[arg(long)]
    tol: Option<f64>,
    /// Convergence test: norm (‖r‖ ≤ tol‖A‖), rel (≤ tol|λ|), abs (≤ tol).
    #[arg(long, value_enum)]
    conv: Option<Conv>,
    /// ‖A‖ for the norm test (default: estimated).
    #[arg(long)]
    anorm: Option<f64>,
    /// Block size k.
    #[arg(long)]
    block: Option<usize>,
    /// Maximum basis size.
    #[arg(long)]
    max_basis: Option<usize>,
    /// Basis size after restart.
    #[arg(long)]
    restart: Option<usize>,
    /// Preconditioner of the correction equations.
    #[arg(long, value_enum)]
    precond: Option<Prec>,
    /// Shift σ of the preconditioner (A − σI).
    #[arg(long, allow_hyphen_values = true)]
    precond_shift: Option<f64>,
    /// Inner steps cap per correction equation.
    #[arg(long)]
    maxits: Option<usize>,
    /// Inner stopping rule (adaptive: 2^-iter for bicgstab, JDQMR's dynamic rules
    /// for qmrs).
    #[arg(long, value_enum)]
    inner: Option<Inner>,
    /// Inner solver: bicgstab (the paper's) or qmrs (symmetric QMR, one matvec per
    /// step, JDQMR stopping; raise --maxits, e.g. 100).
    #[arg(long, value_enum)]
    inner_solver: Option<Solver>,
    /// Matvec budget.
    #[arg(long)]
    max_matvecs: Option<u64>,
    /// Seed of the start vectors.
    #[arg(long)]
    seed: Option<u64>,
    /// Threads per process.
    #[arg(long)]
    threads: Option<usize>,
    /// Fine-grain ranks on the thread backend (one process).
    #[arg(long, default_value_t = 1)]
    ranks: usize,
    /// Run over MPI (launch with mpirun; needs the `mpi` feature).
    #[arg(long)]
    mpi: bool,
    /// Multigrain solve groups (seeds/003 §6): `equal` (P/k equal groups), a group
    /// count, rank lists like `0-3,4-5,6,7`, or `host` (one group per host).
    /// Needs --ranks > 1 or --mpi.
    #[arg(long)]
    groups: Option<String>,
    /// Hierarchical partitioning for equal solve groups (seeds/003 §6, MPP's): the
    /// fine↔group all-to-alls run inside groups of k processes instead of over all
    /// P. `off`, or groups of unequal sizes: one global all-to-all.
    #[arg(long, value_enum, default_value = "on")]
    hierarchical: OnOff,
    /// Load balancing of the multigrain correction phase (seeds/003 §4, §7).
    #[arg(long, value_enum, default_value = "none")]
    balance: BalanceArg,
    /// Per-rank slowdown factors (e.g. 1,1,4,4) to emulate heterogeneous
    /// processors: virtual clocks on the thread backend, sleeping under MPI.
    #[arg(long, value_delimiter = ',')]
    slowdown: Vec<f64>,
    /// Parameters file (TOML or JSON, keys of JdParams); flags override it.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Write the eigenvectors as a MatrixMarket array.
    #[arg(long)]
    eigenvectors: Option<PathBuf>,
    /// Print one JSON object on stdout.
    #[arg(long)]
    json: bool,
    /// Skip the symmetry check of the input.
    #[arg(long)]
    no_symmetry_check: bool,
}

/// A failure with its exit code.
struct Fail(u8, String);

impl<E: std::fmt::Display> From<(u8, E)> for Fail {
    fn from((c, e): (u8, E)) -> Self {
        Fail(c, e.to_string())
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let r = match cli.cmd {
        Cmd::Info { file, json } => info(&file, json),
        Cmd::Generate {
            spec,
            output,
            symmetric,
        } => gen_cmd(&spec, &output, symmetric),
        Cmd::Solve(a) => solve_cmd(&a),
        #[cfg(feature = "dense")]
        Cmd::Plan(a) => plan_cmd::plan_cmd(&a),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(Fail(code, msg)) => {
            if !msg.is_empty() {
                eprintln!("jdmg: {msg}");
            }
            ExitCode::from(code)
        }
    }
}

fn read(path: &Path) -> Result<(CsrMatrix, Option<MmHeader>), Fail> {
    let m = read_matrix_market(path)
        .map_err(|e| Fail(EXIT_BAD_INPUT, format!("{}: {e}", path.display())))?;
    Ok((m.matrix, Some(m.header)))
}

fn info(file: &Path, json: bool) -> Result<(), Fail> {
    let (a, h) = read(file)?;
    let inf = matrix_info(&a, h.as_ref());
    if json {
        println!(
            "{}",
            serde_json::to_string(&inf).map_err(|e| (EXIT_BAD_INPUT, e))?
        );
    } else {
        println!("file            {}", file.display());
        println!("size            {} x {}", inf.nrows, inf.ncols);
        println!(
            "nonzeros        {} stored{}",
            inf.nnz,
            inf.nnz_file
                .map(|f| format!(" ({f} in file)"))
                .unwrap_or_default()
        );
        println!("storage         {}", inf.storage);
        match inf.max_asymmetry {
            Some(x) => println!(
                "symmetric       {} (max |a_ij - a_ji| = {x:.3e})",
                inf.symmetric
            ),
            None => println!("symmetric       {}", inf.symmetric),
        }
        if let (Some(lo), Some(hi)) = (inf.gershgorin_lower, inf.gershgorin_upper) {
            println!("gershgorin      [{lo:.6e}, {hi:.6e}]");
        }
        println!("row nnz         {} .. {}", inf.min_row_nnz, inf.max_row_nnz);
        println!(
            "memory          {:.1} MiB",
            inf.memory_bytes as f64 / (1 << 20) as f64
        );
    }
    Ok(())
}

fn gen_cmd(spec: &str, out: &Path, symmetric: bool) -> Result<(), Fail> {
    let spec: GenSpec = spec.parse().map_err(|e| (EXIT_BAD_INPUT, e))?;
    let a = generate(&spec).map_err(|e| (EXIT_BAD_INPUT, e))?;
    matrices::mm::write_coordinate_file(out, &a, symmetric)
        .map_err(|e| Fail(EXIT_BAD_INPUT, format!("{}: {e}", out.display())))?;
    eprintln!(
        "wrote {} ({} rows, {} nonzeros)",
        out.display(),
        a.nrows(),
        a.nnz()
    );
    Ok(())
}

fn params_from(a: &SolveArgs) -> Result<JdParams, Fail> {
    let mut p = match &a.config {
        None => JdParams::default(),
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| Fail(EXIT_BAD_INPUT, format!("{}: {e}", path.display())))?;
            let is_json =
                path.extension().is_some_and(|e| e == "json") || text.trim_start().starts_with('{');
            if is_json {
                serde_json::from_str(&text)
                    .map_err(|e| Fail(EXIT_BAD_INPUT, format!("{}: {e}", path.display())))?
            } else {
                toml::from_str(&text)
                    .map_err(|e| Fail(EXIT_BAD_INPUT, format!("{}: {e}", path.display())))?
            }
        }
    };
    if let Some(v) = a.nev {
        p.nev = v;
    }
    if let Some(w) = a.which {
        p.target = match w {
            Which::Smallest => Target::Smallest,
            Which::Largest => Target::Largest,
        };
    }
    if let Some(s) = a.target {
        p.target = Target::Closest(s);
    }
    if let Some(v) = a.tol {
        p.tol = v;
    }
    if let Some(c) = a.conv {
        p.conv = match c {
            Conv::Norm => ConvTest::Norm,
            Conv::Rel => ConvTest::Rel,
            Conv::Abs => ConvTest::Abs,
        };
    }
    if a.anorm.is_some() {
        p.anorm = a.anorm;
    }
    if let Some(v) = a.block {
        p.block = v;
    }
    if let Some(v) = a.max_basis {
        p.max_basis = v;
    }
    if let Some(v) = a.restart {
        p.restart_size = v;
    }
    if let Some(v) = a.precond {
        p.precond = match v {
            Prec::None => PrecondChoice::None,
            Prec::Jacobi => PrecondChoice::Jacobi,
            Prec::Ilu0 => PrecondChoice::Ilu0,
            Prec::Ilut => PrecondChoice::Ilut,
            Prec::Spai => PrecondChoice::Spai,
            Prec::Fsai => PrecondChoice::Fsai,
        };
    }
    if a.precond_shift.is_some() {
        p.precond_shift = a.precond_shift;
    }
    if let Some(v) = a.maxits {
        p.maxits = v;
    }
    if let Some(v) = a.inner {
        p.inner = match v {
            Inner::Adaptive => InnerStop::Adaptive,
            Inner::Fixed => InnerStop::Fixed,
        };
    }
    if let Some(v) = a.inner_solver {
        p.inner_solver = match v {
            Solver::Bicgstab => InnerSolver::Bicgstab,
            Solver::Qmrs => InnerSolver::Qmrs,
        };
    }
    if let Some(v) = a.max_matvecs {
        p.max_matvecs = v;
    }
    if let Some(v) = a.seed {
        p.seed = v;
    }
    if let Some(v) = a.threads {
        p.threads = v;
    }
    Ok(p)
}

fn load(a: &SolveArgs) -> Result<(CsrMatrix, String), Fail> {
    let (m, source, header) = match (&a.file, &a.generate) {
        (Some(f), None) => {
            let (m, h) = read(f)?;
            (m, f.display().to_string(), h)
        }
        (None, Some(g)) => {
            let spec: GenSpec = g.parse().map_err(|e| (EXIT_BAD_INPUT, e))?;
            (
                generate(&spec).map_err(|e| (EXIT_BAD_INPUT, e))?,
                format!("generated {spec}"),
                None,
            )
        }
        _ => {
            return Err(Fail(
                EXIT_BAD_INPUT,
                "give a MatrixMarket FILE or --generate SPEC".into(),
            ))
        }
    };
    if m.nrows() != m.ncols() {
        return Err(Fail(
            EXIT_BAD_INPUT,
            format!(
                "{source}: matrix is {} x {}, not square",
                m.nrows(),
                m.ncols()
            ),
        ));
    }
    if !a.no_symmetry_check {
        let inf = matrix_info(&m, header.as_ref());
        if !inf.symmetric {
            return Err(Fail(
                EXIT_BAD_INPUT,
                format!(
                    "{source}: matrix is not symmetric (max |a_ij - a_ji| = {:.3e}, relative {:.3e}); jdmg solves symmetric problems",
                    inf.max_asymmetry.unwrap_or(f64::NAN),
                    inf.max_asymmetry_rel.unwrap_or(f64::NAN)
                ),
            ));
        }
    }
    Ok((m, source))
}

fn progress(ev: &IterationEvent) {
    let r = ev.residual_norms.first().copied().unwrap_or(f64::NAN);
    let t = ev.ritz_values.first().copied().unwrap_or(f64::NAN);
    eprint!(
        "\r  iter {:6}  matvecs {:9}  converged {:3}  basis {:3}  θ {:+.10e}  ‖r‖ {:.2e}   ",
        ev.outer_iteration, ev.matvecs, ev.nconverged, ev.basis_size, t, r
    );
}

fn solve_cmd(a: &SolveArgs) -> Result<(), Fail> {
    let params = params_from(a)?;
    if a.mpi {
        return solve_mpi(a, &params);
    }
    let (m, source) = load(a)?;
    let live = std::io::stderr().is_terminal() && !a.json;
    let mut obs = |ev: &IterationEvent| progress(ev);
    let observer: Option<jdmg::jd::Observer<'_>> = if live { Some(&mut obs) } else { None };
    if a.groups.is_some() && a.ranks < 2 {
        return Err(Fail(
            EXIT_BAD_INPUT,
            "--groups needs --ranks N (N > 1) or --mpi".into(),
        ));
    }
    let (res, nprocs, extra) = if a.ranks > 1 {
        let slow = if a.slowdown.is_empty() {
            vec![1.0; a.ranks]
        } else {
            a.slowdown.clone()
        };
        if slow.len() != a.ranks || slow.iter().any(|f| !(f.is_finite() && *f > 0.0)) {
            return Err(Fail(
                EXIT_BAD_INPUT,
                format!("--slowdown needs {} positive factors", a.ranks),
            ));
        }
        let clock = if a.slowdown.is_empty() {
            lblib::ClockMode::Real
        } else {
            lblib::ClockMode::Virtual
        };
        let cfg = lblib::ThreadConfig::with_slowdowns(&slow, clock);
        let out = lblib::ThreadComm::run_with(cfg, |comm| run_distributed(a, &params, &m, &comm));
        let first = out.into_iter().next().expect("rank 0");
        (first.0?, a.ranks, first.1)
    } else {
        if !a.slowdown.is_empty() {
            return Err(Fail(
                EXIT_BAD_INPUT,
                "--slowdown needs --ranks N or --mpi".into(),
            ));
        }
        (
            jdmg::solve_matrix(&m, &params, observer),
            1,
            serde_json::json!({}),
        )
    };
    if live {
        eprintln!();
    }
    report(a, &params, &source, &m, res, nprocs, extra)
}

type DistOutcome = (Result<Result<Solution, JdError>, Fail>, serde_json::Value);

/// Fine grain (or multigrain with --groups) on the processes of `base`, with the
/// paper's imbalance tracer on the fine-grain communicator. Collective.
fn run_distributed<B: Comm>(
    a: &SolveArgs,
    params: &JdParams,
    m: &CsrMatrix,
    base: &B,
) -> DistOutcome {
    // Solve groups first: with the hierarchical layout (seeds/003 §6) the fine-grain
    // communicator is ordered by fine part (jdmg::fine_rank_keys).
    let k = if params.block == 0 {
        params.nev.min(8)
    } else {
        params.block
    };
    let groups = match a.groups.as_deref() {
        Some("host") => {
            // one solve group per host: all-gather a hash of each rank's host name
            let mut keys = vec![0u64; base.size()];
            base.all_gather_u64(&[jdmg::multigrain::host_key()], &mut keys);
            Some(jdmg::multigrain::groups_by_key(&keys))
        }
        Some(spec) => match jdmg::parse_groups(spec, base.size(), k) {
            Ok(g) => Some(g),
            Err(e) => {
                return (
                    Err(Fail(EXIT_BAD_INPUT, e.to_string())),
                    serde_json::json!({}),
                )
            }
        },
        None => None,
    };
    let hierarchical = matches!(a.hierarchical, OnOff::On);
    let key = match &groups {
        Some(g) => jdmg::fine_rank_keys(g, hierarchical)
            .get(base.rank())
            .copied()
            .unwrap_or(base.rank()),
        None => base.rank(),
    };
    let world = lblib::Traced::new(base.split(0, key));
    let mut extra = serde_json::Map::new();
    let mut mg_stats = None;
    let r = match groups {
        Some(groups) => {
            let balance = match a.balance {
                BalanceArg::None => jdmg::Balance::None,
                BalanceArg::Fastest => jdmg::Balance::Fastest,
                BalanceArg::Slowest => jdmg::Balance::Slowest,
            };
            let mg = jdmg::MultigrainParams {
                groups: groups.clone(),
                balance,
                hierarchical,
                ..Default::default()
            };
            extra.insert("mode".into(), "multigrain".into());
            extra.insert("groups".into(), serde_json::json!(groups));
            extra.insert("balance".into(), serde_json::json!(balance));
            match jdmg::solve_multigrain(m, &world, base, params, &mg) {
                Ok(s) => {
                    extra.insert("multigrain".into(), serde_json::json!(s.multigrain));
                    mg_stats = Some(s.multigrain);
                    Ok((s.solution, 0..0))
                }
                Err(e) => Err(e),
            }
        }
        None => {
            extra.insert("mode".into(), "fine".into());
            jdmg::solve_distributed(m, &world, params, None)
        }
    };
    if let Ok(rep) = world.report() {
        // hierarchical multigrain: plus the waits in the all-to-all groups (§4, §6)
        let pct = mg_stats
            .as_ref()
            .map_or(rep.imbalance_percent, |s: &jdmg::MultigrainStats| {
                s.imbalance_percent(&rep)
            });
        extra.insert("imbalance_percent".into(), pct.into());
        extra.insert("imbalance".into(), serde_json::json!(rep));
    }
    // over `world`: its rank order is the order of the fine row blocks
    let res = gather(&world, m.nrows(), r);
    (Ok(res), serde_json::Value::Object(extra))
}

/// Collects the eigenvectors of a distributed solution on every rank.
fn gather<C: Comm>(
    comm: &C,
    n: usize,
    r: Result<(Solution, std::ops::Range<usize>), JdError>,
) -> Result<Solution, JdError> {
    let (mut s, boxed) = match r {
        Ok((s, _)) => (s, false),
        Err(JdError::NotConverged { partial, .. }) => (*partial, true),
        Err(e) => return Err(e),
    };
    let nloc = s.n_local;
    let nvec = s.eigenvalues.len();
    let mut counts = vec![0u64; comm.size()];
    comm.all_gather_u64(&[nloc as u64], &mut counts);
    let counts: Vec<usize> = counts.iter().map(|&c| c as usize).collect();
    let mut full = vec![0.0; n * nvec];
    let mut col = vec![0.0; n];
    for j in 0..nvec {
        comm.all_gather_v(s.eigenvector(j), &counts, &mut col);
        full[j * n..(j + 1) * n].copy_from_slice(&col);
    }
    s.eigenvectors = full;
    s.n_local = n;
    if boxed {
        let wanted = s.eigenvalues.len();
        Err(JdError::NotConverged {
            wanted,
            partial: Box::new(s),
        })
    } else {
        Ok(s)
    }
}

fn report(
    a: &SolveArgs,
    params: &JdParams,
    source: &str,
    m: &CsrMatrix,
    res: Result<Solution, JdError>,
    nprocs: usize,
    extra: serde_json::Value,
) -> Result<(), Fail> {
    let (sol, converged) = match res {
        Ok(s) => (s, true),
        Err(JdError::NotConverged { partial, .. }) => (*partial, false),
        Err(e) => return Err(Fail(EXIT_BAD_INPUT, e.to_string())),
    };
    if let Some(path) = &a.eigenvectors {
        matrices::mm::write_array_file(path, sol.n_local, sol.eigenvalues.len(), &sol.eigenvectors)
            .map_err(|e| Fail(EXIT_BAD_INPUT, format!("{}: {e}", path.display())))?;
    }
    let all_conv =
        converged && sol.converged.iter().all(|&c| c) && sol.eigenvalues.len() == params.nev;
    if a.json {
        let obj = serde_json::json!({
            "source": source,
            "n": m.nrows(),
            "nnz": m.nnz(),
            "nev": params.nev,
            "eigenvalues": sol.eigenvalues,
            "residual_norms": sol.residual_norms,
            "converged": all_conv,
            "converged_each": sol.converged,
            "matvecs": sol.stats.matvecs,
            "outer_iterations": sol.stats.outer_iterations,
            "wall_seconds": sol.stats.wall_seconds,
            "nprocs": nprocs,
            "params": params,
            "stats": sol.stats,
        });
        let mut obj = obj;
        if let (Some(o), serde_json::Value::Object(e)) = (obj.as_object_mut(), extra) {
            o.extend(e);
        }
        println!("{obj}");
    } else {
        println!(
            "{source}: n = {}, nnz = {}, {} process(es)",
            m.nrows(),
            m.nnz(),
            nprocs
        );
        println!(
            "{:>4}  {:>24}  {:>12}  converged",
            "#", "eigenvalue", "residual"
        );
        for (j, (l, r)) in sol.eigenvalues.iter().zip(&sol.residual_norms).enumerate() {
            println!("{j:>4}  {l:>24.16e}  {r:>12.3e}  {}", sol.converged[j]);
        }
        let s = &sol.stats;
        println!(
            "outer {}  matvecs {}  inner steps {}  precond {}  global sums {}  restarts {}",
            s.outer_iterations,
            s.matvecs,
            s.inner_steps,
            s.precond_applications,
            s.global_sums,
            s.restarts
        );
        let q = &s.inner_stops;
        if q != &jdmg::InnerStops::default() {
            println!(
                "JDQMR stops: maxits {}  stagnation {}  ritz {}  converged {}  reduced {}  linear {}  breakdown {}",
                q.steps, q.stagnation, q.ritz, q.converged, q.reduced, q.linear, q.breakdown
            );
        }
        println!(
            "time {:.3} s (projection {:.3}, correction {:.3}, setup {:.3})  ‖A‖ est {:.4e}",
            s.wall_seconds,
            s.projection_seconds,
            s.correction_seconds,
            s.setup_seconds,
            s.anorm_estimate
        );
        if let Some(p) = extra.get("imbalance_percent").and_then(|v| v.as_f64()) {
            println!("imbalance {p:.2}% (seeds/003 §4 metric, fine-grain collectives)");
        }
        if let Some(mg) = extra.get("multigrain") {
            println!(
                "solve groups {}  inner steps per group {}  rates {}",
                extra
                    .get("groups")
                    .map(|g| g.to_string())
                    .unwrap_or_default(),
                mg.get("group_inner_steps")
                    .map(|g| g.to_string())
                    .unwrap_or_default(),
                mg.get("group_rates")
                    .map(|g| g.to_string())
                    .unwrap_or_default()
            );
        }
    }
    let _ = std::io::stdout().flush();
    if all_conv {
        Ok(())
    } else {
        Err(Fail(
            EXIT_NOT_CONVERGED,
            format!(
                "not converged: {} of {} eigenpairs",
                sol.nconverged(),
                params.nev
            ),
        ))
    }
}

#[cfg(feature = "mpi")]
fn solve_mpi(a: &SolveArgs, params: &JdParams) -> Result<(), Fail> {
    let (_universe, world, _t) = lblib::mpi::init().map_err(|e| (EXIT_BAD_INPUT, e))?;
    let loaded = load(a);
    // Every rank must agree before entering collectives.
    let mut ok = [if loaded.is_ok() { 1.0 } else { 0.0 }];
    world.all_reduce(&mut ok, lblib::ReduceOp::Min);
    let (m, source) = match loaded {
        Ok(v) if ok[0] > 0.0 => v,
        Ok(_) => return Err(Fail(EXIT_BAD_INPUT, String::new())),
        Err(e) => {
            return Err(if world.rank() == 0 {
                e
            } else {
                Fail(e.0, String::new())
            })
        }
    };
    let factor = if a.slowdown.is_empty() {
        1.0
    } else if a.slowdown.len() == world.size() {
        a.slowdown[world.rank()]
    } else {
        return Err(Fail(
            EXIT_BAD_INPUT,
            format!("--slowdown needs {} factors", world.size()),
        ));
    };
    let slowed = lblib::Slowed::new(world.split(0, world.rank()), factor);
    let (r, extra) = run_distributed(a, params, &m, &slowed);
    let r = r?;
    let size = world.size();
    if world.rank() == 0 {
        report(a, params, &source, &m, r, size, extra)
    } else {
        match r {
            Ok(_) => Ok(()),
            Err(JdError::NotConverged { .. }) => Err(Fail(EXIT_NOT_CONVERGED, String::new())),
            Err(_) => Err(Fail(EXIT_BAD_INPUT, String::new())),
        }
    }
}

#[cfg(not(feature = "mpi"))]
fn solve_mpi(_a: &SolveArgs, _params: &JdParams) -> Result<(), Fail> {
    Err(Fail(
        EXIT_BAD_INPUT,
        "--mpi needs a build with `--features mpi` (cargo build --release -p jdmg --features mpi)"
            .into(),
    ))
}
