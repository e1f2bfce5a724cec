//! `jdmg solve`: options, parameters (flags over a config file), the checks
//! made before any long work (paths, memory, thread and rank counts, MPI
//! launcher), the serial, thread-rank and MPI runs, and the report.

use std::fmt::Write as _;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Mutex;

use clap::builder::{PossibleValuesParser, TypedValueParser};
use clap::{Args, ValueEnum};
use jdmg::checkpoint::rank_path;
use jdmg::checkpoint::set::{self, FileSink, ResumeError, StopWhen};
use jdmg::names::{Named, UnknownName};
use jdmg::report::{ResumedFrom, RunMode, SolveReport};
use jdmg::{
    Balance, Checkpoint, CheckpointRequest, CheckpointSink, Checkpointing, ConvTest, Extraction,
    InnerSolver, InnerStop, IterationEvent, JdError, JdParams, Outcome, PrecondChoice,
    ProblemSettings, Solution, Stats, Target, Verify,
};
use lblib::Comm;
use matrices::generate::{generate, GenSpec};
use matrices::info::matrix_info;
use matrices::CsrMatrix;

use crate::mpi_detect;
use crate::output::{
    check_output_path, emit, note, require_stdout, write_atomic, Fail, EXIT_BAD_INPUT,
    EXIT_NOT_CONVERGED,
};
use crate::progress::{History, Live};
use crate::resources::{
    check_count, check_groups, check_memory, checkpoint_bytes, generated_bytes, solve_bytes,
    MAX_RANKS, MAX_THREADS,
};

/// `--which`, with SciPy's names (`eigsh`'s `which`) as aliases.
#[derive(Clone, Copy, ValueEnum)]
pub enum Which {
    /// The smallest (algebraic) eigenvalues; SciPy's SA.
    #[value(alias = "SA", alias = "sa")]
    Smallest,
    /// The largest (algebraic) eigenvalues; SciPy's LA.
    #[value(alias = "LA", alias = "la")]
    Largest,
    /// The largest in magnitude, from both ends; SciPy's LM (its default).
    #[value(alias = "LM", alias = "lm")]
    Magnitude,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum OnOff {
    On,
    Off,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum Inner {
    Adaptive,
    Fixed,
}

/// The library's choices by name (`jdmg::names`), with their names listed
/// in `--help` and in the error of an unknown one.
fn named<T: Named + FromStr<Err = UnknownName> + Clone + Send + Sync>(
) -> impl TypedValueParser<Value = T> {
    PossibleValuesParser::new(T::names()).try_map(|s| s.parse::<T>())
}

#[derive(Args, Clone)]
pub struct SolveArgs {
    /// MatrixMarket file (or use --generate).
    pub file: Option<PathBuf>,
    /// Generate the matrix instead of reading a file (e.g. lap3d:40).
    #[arg(help_heading = "Problem", long, conflicts_with = "file")]
    pub generate: Option<String>,
    /// Number of eigenpairs [default: 4].
    #[arg(help_heading = "Problem", long)]
    pub nev: Option<usize>,
    /// Which eigenvalues [default: smallest]; SciPy's SA, LA and LM are
    /// accepted.
    #[arg(help_heading = "Problem", long, value_enum)]
    pub which: Option<Which>,
    /// Interior target σ: eigenvalues closest to it (overrides --which).
    #[arg(help_heading = "Problem", long, allow_hyphen_values = true)]
    pub target: Option<f64>,
    /// Convergence tolerance [default: 1e-8] of the --conv test (a positive
    /// number; `--tol -1` is read as a value and rejected).
    #[arg(help_heading = "Problem", long, allow_hyphen_values = true)]
    pub tol: Option<f64>,
    /// Convergence test: norm (‖r‖ ≤ tol‖A‖), rel (≤ tol|λ|), abs (≤ tol).
    #[arg(help_heading = "Problem", long, value_parser = named::<ConvTest>())]
    pub conv: Option<ConvTest>,
    /// ‖A‖ for the norm test (default: estimated).
    #[arg(help_heading = "Problem", long, allow_hyphen_values = true)]
    pub anorm: Option<f64>,
    /// Block size k.
    #[arg(help_heading = "Basis and extraction", long)]
    pub block: Option<usize>,
    /// Maximum basis size; default max(5k + nev, 16 for a block of 1, 20 for 2, 24 from 3 on)
    /// below 20,000 rows, max(5k + nev, 8) from there on; capped by n. The default
    /// gives back one column per locked pair (down to restart + 2k); a given size stays.
    #[arg(help_heading = "Basis and extraction", long)]
    pub max_basis: Option<usize>,
    /// Basis size after restart.
    #[arg(help_heading = "Basis and extraction", long)]
    pub restart: Option<usize>,
    /// Preconditioner of the correction equations; default auto: ILU(0) of A − σI
    /// when its factorization is stable (pivots with the diagonal's signs, none
    /// perturbed, bounded growth), else FSAI when A − σI looks definite to it (no
    /// negative local pivot) at a bounded setup cost, else Jacobi; none in solve
    /// groups.
    #[arg(help_heading = "Correction equations and preconditioner", long, value_parser = named::<PrecondChoice>())]
    pub precond: Option<PrecondChoice>,
    /// Shift σ of the preconditioner (A − σI); finite.
    #[arg(
        help_heading = "Correction equations and preconditioner",
        long,
        allow_hyphen_values = true
    )]
    pub precond_shift: Option<f64>,
    /// Inner steps cap per correction equation (0: Davidson steps, GD+k only);
    /// default 40 with qmrs and auto (a cap: JDQMR's dynamic rules stop earlier);
    /// with bicgstab 0 (GD+k) when preconditioned, 3 with --precond none; and 150
    /// in solve groups
    /// (--groups), where each phase runs the optimal m of McCombs et al. §4 (CG
    /// bound at 2^-iter) up to this cap.
    #[arg(help_heading = "Correction equations and preconditioner", long)]
    pub maxits: Option<usize>,
    /// Inner stopping rule (adaptive: 2^-iter for bicgstab, JDQMR's dynamic rules
    /// for qmrs).
    #[arg(
        help_heading = "Correction equations and preconditioner",
        long,
        value_enum
    )]
    pub inner: Option<Inner>,
    /// How the correction equations are solved: auto (default: with a
    /// preconditioner, GD+k steps and block JDQMR by progress per counted
    /// work, the same from run to run; without, block JDQMR; bicgstab in solve
    /// groups), bicgstab (the paper's) or qmrs (symmetric QMR, one matvec per
    /// step, JDQMR's dynamic stopping; serial and fine grain).
    #[arg(help_heading = "Correction equations and preconditioner", long, value_parser = named::<InnerSolver>())]
    pub inner_solver: Option<InnerSolver>,
    /// Verification pass for copies of multiple eigenvalues the block missed:
    /// auto (default: when a locked eigenvalue appears block-size times), always,
    /// never.
    #[arg(help_heading = "Basis and extraction", long, value_parser = named::<Verify>())]
    pub verify: Option<Verify>,
    /// How eigenpairs are extracted from the basis: auto (default: harmonic Ritz
    /// for --target without a mass matrix, going on with Rayleigh-Ritz if it
    /// stalls; Rayleigh-Ritz otherwise), ritz (standard Rayleigh-Ritz) or
    /// harmonic (needs --target; interior eigenvalues without a
    /// factorization; with --mass, solves with M by conjugate gradients).
    /// Not used with --st sinvert.
    #[arg(help_heading = "Basis and extraction", long, value_parser = named::<Extraction>())]
    pub extraction: Option<Extraction>,
    /// Matvec budget (all products, inner steps included; default max(1e5,
    /// 10 n nev) for order n and nev pairs). Checked
    /// once per outer iteration, before its correction equations: the total may
    /// exceed it by one outer iteration's products, up to block x (2 maxits + 1)
    /// with BiCGSTAB plus the residual checks of newly locked pairs.
    #[arg(help_heading = "Execution and budget", long)]
    pub max_matvecs: Option<u64>,
    /// Seed of the start vectors.
    #[arg(help_heading = "Execution and budget", long)]
    pub seed: Option<u64>,
    /// Threads per process (1 to 1024).
    #[arg(help_heading = "Execution and budget", long)]
    pub threads: Option<usize>,
    /// Fine-grain ranks on the thread backend (one process; 1 to 256, at most n).
    #[arg(help_heading = "Execution and budget", long, default_value_t = 1)]
    pub ranks: usize,
    /// Run over MPI. Needs a build with the `mpi` feature; not needed under
    /// mpirun, srun or mpiexec, which are detected from their environment.
    #[arg(help_heading = "Execution and budget", long, conflicts_with = "no_mpi")]
    pub mpi: bool,
    /// Do not use MPI even when launched by mpirun, srun or mpiexec (every
    /// process then solves alone).
    #[arg(help_heading = "Execution and budget", long)]
    pub no_mpi: bool,
    /// Multigrain solve groups (McCombs et al. §6): `equal` (P/k equal groups), a group
    /// count, rank lists like `0-3,4-5,6,7`, or `host` (one group per host).
    /// Needs --ranks > 1 or --mpi.
    #[arg(help_heading = "Solve groups and load balancing", long)]
    pub groups: Option<String>,
    /// Hierarchical partitioning for equal solve groups (McCombs et al. §6, MPP's): the
    /// fine↔group all-to-alls run inside groups of k processes instead of over all
    /// P. `off`, or groups of unequal sizes: one global all-to-all.
    #[arg(
        help_heading = "Solve groups and load balancing",
        long,
        value_enum,
        default_value = "on"
    )]
    pub hierarchical: OnOff,
    /// Load balancing of the multigrain correction phase (McCombs et al. §4, §7).
    /// Default: fastest whenever there is more than one solve group, else none.
    /// `none` is deterministic (rows split by equal nonzeros, not by timed rates):
    /// the same eigenvalues and matvecs on every run with the same ranks.
    #[arg(help_heading = "Solve groups and load balancing", long, value_parser = named::<Balance>())]
    pub balance: Option<Balance>,
    /// Rates the balancer decides with (McCombs et al. §5.1): `average` over each
    /// group's last correction phase, or `instant:W`, LBLIB's instantaneous rate
    /// over the last complete window of W seconds (for loads that change within a
    /// phase).
    #[arg(help_heading = "Solve groups and load balancing", long, value_name = "average|instant:W", default_value = "average", value_parser = parse_rates)]
    pub rates: (lblib::RateKind, f64),
    /// Semi-static re-partitioning of the fine rows with --groups (Boudet et al.
    /// §2.1, §4.5): per-rank rates (--rates) of the solve groups' products are
    /// measured during the solve; after two checks (every 5 outer iterations) above 10%
    /// imbalance the rows are re-weighted, moved and the halo plans rebuilt (at
    /// most 4 times). Only with balancing (never with --balance none).
    #[arg(
        help_heading = "Solve groups and load balancing",
        long,
        value_enum,
        default_value = "on"
    )]
    pub repartition: OnOff,
    /// Re-partitioning rates at each rank's share of its core (Linux scheduler
    /// statistics: time on a CPU against time waiting for one), so that a rank
    /// time-sliced with other processes gets rows for its share, not for the full
    /// speed its short products run at between slices. `off`: busy seconds as
    /// measured.
    #[arg(
        help_heading = "Solve groups and load balancing",
        long,
        value_enum,
        default_value = "on"
    )]
    pub core_share: OnOff,
    /// Memory (anti-thrashing) balancing of the correction phase (McCombs et al. §5):
    /// a group leader taking more than 20 major faults/s while using under half
    /// a CPU (two 20 ms samples in a row) leaves the phase early.
    #[arg(help_heading = "Solve groups and load balancing", long)]
    pub memory_balance: bool,
    /// Emulate a slow link between solve groups (McCombs et al. §7, Tables 2-3): every
    /// fine-grain collective and fine↔group all-to-all first waits this many
    /// seconds; a solve group's own collectives do not (use with
    /// --hierarchical off, whose all-to-alls run over the fine-grain ranks).
    #[arg(help_heading = "Solve groups and load balancing", long, default_value_t = 0.0, value_name = "SECONDS", value_parser = parse_latency)]
    pub link_latency: f64,
    /// Per-rank slowdown factors (e.g. 1,1,4,4) to emulate heterogeneous
    /// processors: virtual clocks on the thread backend, sleeping under MPI.
    #[arg(
        help_heading = "Solve groups and load balancing",
        long,
        value_delimiter = ','
    )]
    pub slowdown: Vec<f64>,
    /// Parameters file (TOML or JSON: the groups of JdParams as tables, or the
    /// flat names of its settings); flags override it.
    /// Interior target: `target = 1.5`, `target = "closest:1.5"` or
    /// `target = { closest = 1.5 }`.
    #[arg(help_heading = "Execution and budget", long)]
    pub config: Option<PathBuf>,
    /// Write the eigenvectors as a MatrixMarket array (atomically; the path
    /// is checked before the solve).
    #[arg(help_heading = "Output and checkpoints", long)]
    pub eigenvectors: Option<PathBuf>,
    /// Draw the residual history of every eigenpair (log scale, against
    /// matvecs) as an SVG file.
    #[arg(help_heading = "Output and checkpoints", long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
    /// Write the solver state (locked pairs, basis, counters) to FILE every
    /// --checkpoint-every seconds and when SIGINT or SIGTERM stops the solve;
    /// atomically, path checked before the solve. With --ranks N or MPI each
    /// rank writes its rows to FILE.rank<r> (with --groups: its fine rows, which
    /// a resumed solve keeps).
    #[arg(help_heading = "Output and checkpoints", long, value_name = "FILE")]
    pub checkpoint: Option<PathBuf>,
    /// Seconds between checkpoints (default 60; 0: every outer iteration).
    #[arg(
        help_heading = "Output and checkpoints",
        long,
        value_name = "SECONDS",
        requires = "checkpoint"
    )]
    pub checkpoint_every: Option<f64>,
    /// Continue from a checkpoint written by --checkpoint (FILE, or FILE.rank<r>
    /// with --ranks N or MPI): give the same matrix, options and number of
    /// ranks. The answer is that of the uninterrupted solve.
    #[arg(help_heading = "Output and checkpoints", long, value_name = "FILE")]
    pub resume: Option<PathBuf>,
    /// Print one JSON object on stdout.
    #[arg(help_heading = "Output and checkpoints", long)]
    pub json: bool,
    /// No live progress display (it is shown only when stderr is a terminal).
    #[arg(help_heading = "Output and checkpoints", long, short)]
    pub quiet: bool,
    /// Print the solver's counters and timings after the eigenpairs (outer
    /// iterations, inner steps, global sums, JDQMR stops, seconds per phase);
    /// --json always has them.
    #[arg(help_heading = "Output and checkpoints", long, short)]
    pub verbose: bool,
    /// Skip the symmetry check of the input.
    #[arg(help_heading = "Problem", long)]
    pub no_symmetry_check: bool,
    /// Start vectors: a MatrixMarket array of n rows (e.g. the --eigenvectors
    /// of an earlier solve); they fill the first block and the basis.
    #[arg(help_heading = "Problem", long, value_name = "FILE.mtx")]
    pub initial: Option<PathBuf>,
    /// Deflation vectors: a MatrixMarket array of n rows; the results are
    /// orthogonal to them (for known eigenvectors: the next eigenpairs).
    #[arg(help_heading = "Problem", long, value_name = "FILE.mtx")]
    pub deflate: Option<PathBuf>,
    /// Mass matrix M of a generalized problem K x = λ M x (K: FILE or
    /// --generate; M symmetric positive definite, same size): a MatrixMarket
    /// file. Eigenvectors come back M-orthonormal; convergence is
    /// ‖Kx − θMx‖ ≤ tol·(‖K‖ + |θ|‖M‖)·‖x‖. One process, --ranks N or MPI,
    /// with --groups (each solve group uses M's rows) and with --st sinvert.
    #[arg(help_heading = "Problem", long, value_name = "M.mtx")]
    pub mass: Option<PathBuf>,
    /// With --generate femNd:... (the stiffness matrix K): solve K x = λ M x
    /// with the generator's mass matrix M (femNd:...:mass), e.g.
    /// `--generate fem3d:40 --mass-generate`.
    #[arg(
        help_heading = "Problem",
        long,
        requires = "generate",
        conflicts_with = "mass"
    )]
    pub mass_generate: bool,
    /// Spectral transformation: none, or sinvert (shift-and-invert on a sparse
    /// direct factorization of A − σI, or of K − σM with --mass, σ from
    /// --target). With --ranks N or MPI the solver runs fine grain but rank 0
    /// factors and solves for all (blocks gathered to it and scattered back; the
    /// factorization is not distributed). Reports the number of eigenvalues
    /// below σ when the factorization (LDLᵀ) gives it.
    #[arg(help_heading = "Problem", long, value_enum, default_value = "none")]
    pub st: crate::vectors::St,
    /// Every eigenvalue in [A, B] (e.g. `--interval 0:0.8`, `--interval=-1:1`),
    /// certified complete by the inertia of LDLᵀ factorizations: spectrum
    /// slicing, each slice by shift-and-invert at its centre. --nev, --which
    /// and --target are not used. With --mass: of the pencil.
    #[arg(help_heading = "Problem", long, value_name = "A:B", allow_hyphen_values = true, value_parser = parse_interval,
          group = "range",
          conflicts_with_all = ["target", "which", "resume", "checkpoint", "initial"])]
    pub interval: Option<(f64, f64)>,
    /// The eigenvalues of ascending indices I to J (0-based, inclusive, e.g.
    /// `--indices 0:999` for the 1 000 smallest; SciPy's `subset_by_index`):
    /// an interval bracketing them is found by LDLᵀ counts, then solved as
    /// --interval. --nev, --which and --target are not used.
    #[arg(help_heading = "Problem", long, value_name = "I:J", value_parser = parse_indices, group = "range",
          conflicts_with_all = ["target", "which", "resume", "checkpoint", "initial"])]
    pub indices: Option<(usize, usize)>,
    /// With --interval or --indices: the most eigenvalues one slice holds (default 150).
    #[arg(help_heading = "Solve groups and load balancing", long, requires = "range", value_parser = clap::value_parser!(u64).range(1..))]
    pub per_slice: Option<u64>,
    /// With --interval or --indices: the method on each slice's (A − σI)⁻¹.
    #[arg(
        help_heading = "Solve groups and load balancing",
        long,
        value_enum,
        requires = "range",
        default_value = "lanczos"
    )]
    pub slice_method: crate::vectors::SliceMethod,
    /// With --interval or --indices and --groups (two or more): how the
    /// interval is shared among the solve groups, each solving its own
    /// slices.
    #[arg(
        help_heading = "Solve groups and load balancing",
        long,
        value_enum,
        requires = "range",
        default_value = "rates"
    )]
    pub slice_split: crate::vectors::SliceSplit,
}

/// `A:B` with finite A ≤ B.
fn parse_interval(s: &str) -> Result<(f64, f64), String> {
    let bad = || format!("'{s}' is not an interval A:B of two finite numbers with A <= B");
    let (a, b) = s.split_once(':').ok_or_else(bad)?;
    let (a, b): (f64, f64) = (
        a.trim().parse().map_err(|_| bad())?,
        b.trim().parse().map_err(|_| bad())?,
    );
    if a.is_finite() && b.is_finite() && a <= b {
        Ok((a, b))
    } else {
        Err(bad())
    }
}

/// `I:J` with I ≤ J.
fn parse_indices(s: &str) -> Result<(usize, usize), String> {
    let bad = || format!("'{s}' is not an index range I:J of two integers with 0 <= I <= J");
    let (i, j) = s.split_once(':').ok_or_else(bad)?;
    let (i, j): (usize, usize) = (
        i.trim().parse().map_err(|_| bad())?,
        j.trim().parse().map_err(|_| bad())?,
    );
    if i <= j {
        Ok((i, j))
    } else {
        Err(bad())
    }
}

/// Reads a parameters file (TOML, or JSON when it ends in `.json` or starts
/// with `{`): the groups of [`JdParams`] as tables, or the flat names of its
/// settings at the top. The interior target may be written `target = 1.5`,
/// `target = "closest:1.5"` or serde's `target = { closest = 1.5 }`; a bare
/// `target = "closest"` is refused with these forms.
///
/// # Errors
/// Exit 2 naming the file: unreadable, malformed, unknown key, bad target.
fn config_params(path: &Path) -> Result<JdParams, Fail> {
    let fail = |e: &dyn std::fmt::Display| Fail::bad(format!("{}: {e}", path.display()));
    let text = std::fs::read_to_string(path).map_err(|e| fail(&e))?;
    let is_json =
        path.extension().is_some_and(|e| e == "json") || text.trim_start().starts_with('{');
    let mut v: serde_json::Value = if is_json {
        serde_json::from_str::<UniqueKeys>(&text)
            .map_err(|e| fail(&e))?
            .0
    } else {
        let t: toml::Value = toml::from_str(&text).map_err(|e| fail(&e))?;
        if let Some(key) = non_finite_key(&t, "") {
            return Err(fail(&format!(
                "{key}: nan and inf are not accepted (every number must be finite)"
            )));
        }
        serde_json::to_value(t).map_err(|e| fail(&e))?
    };
    if let Some(t) = v.get_mut("target") {
        *t = normalize_target(t).map_err(|e| fail(&e))?;
    }
    if let Some(t) = v.get_mut("problem").and_then(|p| p.get_mut("target")) {
        *t = normalize_target(t).map_err(|e| fail(&e))?;
    }
    serde_json::from_value(v).map_err(|e| fail(&e))
}

/// A JSON value whose objects have no key twice (`serde_json::Value` keeps the
/// last silently; TOML refuses duplicates itself).
struct UniqueKeys(serde_json::Value);

impl<'de> serde::Deserialize<'de> for UniqueKeys {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(UniqueKeysVisitor).map(UniqueKeys)
    }
}

struct UniqueKeysVisitor;

impl<'de> serde::de::Visitor<'de> for UniqueKeysVisitor {
    type Value = serde_json::Value;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Self::Value, E> {
        Ok(v.into())
    }
    fn visit_i64<E>(self, v: i64) -> Result<Self::Value, E> {
        Ok(v.into())
    }
    fn visit_u64<E>(self, v: u64) -> Result<Self::Value, E> {
        Ok(v.into())
    }
    fn visit_f64<E>(self, v: f64) -> Result<Self::Value, E> {
        Ok(v.into())
    }
    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(v.into())
    }
    fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
        Ok(v.into())
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(serde_json::Value::Null)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut s: A) -> Result<Self::Value, A::Error> {
        let mut out = Vec::new();
        while let Some(UniqueKeys(v)) = s.next_element()? {
            out.push(v);
        }
        Ok(serde_json::Value::Array(out))
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut m: A) -> Result<Self::Value, A::Error> {
        let mut out = serde_json::Map::new();
        while let Some(key) = m.next_key::<String>()? {
            let UniqueKeys(v) = m.next_value()?;
            if out.insert(key.clone(), v).is_some() {
                return Err(serde::de::Error::custom(format!("duplicate key `{key}`")));
            }
        }
        Ok(serde_json::Value::Object(out))
    }
}

/// The dotted key of the first non-finite float of a TOML value (`nan`,
/// `inf`: JSON has no such numbers, they became null, "invalid type: null"
/// for required keys and silently ignored for optional ones).
fn non_finite_key(v: &toml::Value, at: &str) -> Option<String> {
    let join = |k: &str| {
        if at.is_empty() {
            k.to_string()
        } else {
            format!("{at}.{k}")
        }
    };
    match v {
        toml::Value::Float(x) if !x.is_finite() => Some(if at.is_empty() {
            "a value".into()
        } else {
            at.to_string()
        }),
        toml::Value::Table(t) => t.iter().find_map(|(k, x)| non_finite_key(x, &join(k))),
        toml::Value::Array(a) => a
            .iter()
            .enumerate()
            .find_map(|(i, x)| non_finite_key(x, &format!("{at}[{i}]"))),
        _ => None,
    }
}

/// The serde form of a config `target`: numbers and `"closest:σ"` become
/// `{ "closest": σ }`.
fn normalize_target(t: &serde_json::Value) -> Result<serde_json::Value, String> {
    let forms = "write target = 1.5, target = \"closest:1.5\" or target = { closest = 1.5 } for the eigenvalues closest to 1.5";
    let closest = |s: f64| serde_json::json!({ "closest": s });
    match t {
        serde_json::Value::Number(x) => Ok(closest(x.as_f64().unwrap_or(f64::NAN))),
        serde_json::Value::String(s) => {
            let s = s.trim();
            let lower = s.to_ascii_lowercase();
            if lower == "closest" {
                return Err(format!("target \"closest\" needs the shift σ: {forms}"));
            }
            if let Some(x) = lower.strip_prefix("closest:") {
                return x
                    .trim()
                    .parse::<f64>()
                    .map(closest)
                    .map_err(|_| format!("target {s:?}: {x:?} is not a number; {forms}"));
            }
            match lower.as_str() {
                "smallest" | "largest" => Ok(serde_json::Value::String(lower)),
                _ => Err(format!(
                    "target {s:?}: expected \"smallest\", \"largest\" or a shift; {forms}"
                )),
            }
        }
        other => Ok(other.clone()),
    }
}

fn params_from(a: &SolveArgs) -> Result<JdParams, Fail> {
    let mut p = match &a.config {
        None => JdParams::default(),
        Some(path) => config_params(path)?,
    };
    if let Some(v) = a.nev {
        p.problem.nev = v;
    }
    if let Some(w) = a.which {
        p.problem.target = match w {
            Which::Smallest => Target::Smallest,
            Which::Largest => Target::Largest,
            Which::Magnitude => Target::LargestMagnitude,
        };
    }
    if let Some(s) = a.target {
        p.problem.target = Target::Closest(s);
    }
    if let Some(v) = a.tol {
        p.problem.tol = v;
    }
    if let Some(c) = a.conv {
        p.problem.conv = c;
    }
    if a.anorm.is_some() {
        p.problem.anorm = a.anorm;
    }
    if let Some(v) = a.block {
        p.basis.block = v;
    }
    if let Some(v) = a.max_basis {
        p.basis.max_basis = v;
    }
    if let Some(v) = a.restart {
        p.basis.restart_size = v;
    }
    if let Some(v) = a.precond {
        p.preconditioner.kind = v;
    }
    if a.precond_shift.is_some() {
        p.preconditioner.shift = a.precond_shift;
    }
    if let Some(v) = a.maxits {
        p.correction.maxits = Some(v);
    }
    if let Some(v) = a.inner {
        p.correction.stop = match v {
            Inner::Adaptive => InnerStop::Adaptive,
            Inner::Fixed => InnerStop::Fixed,
        };
    }
    if let Some(v) = a.verify {
        p.problem.verify = v;
    }
    if let Some(v) = a.extraction {
        p.basis.extraction = v;
    }
    if let Some(v) = a.inner_solver {
        p.correction.solver = v;
    }
    if let Some(v) = a.max_matvecs {
        p.execution.max_matvecs = Some(v);
    }
    if let Some(v) = a.seed {
        p.basis.seed = v;
    }
    if let Some(v) = a.threads {
        p.execution.threads = v;
    }
    check_count("--threads", p.execution.threads, MAX_THREADS)?;
    if a.no_symmetry_check {
        p.problem.check_symmetry = false;
    }
    // what the solver would refuse, before any work
    p.check().map_err(|e| Fail::bad(e.to_string()))?;
    Ok(p)
}

/// [`load`] and the mass matrix of `--mass` / `--mass-generate` (None without),
/// with the source line naming both.
fn load_pencil(a: &SolveArgs, check_symmetry: bool) -> Result<Pencil, Fail> {
    let inputs = crate::complex::Inputs {
        file: a.file.as_deref(),
        generate: a.generate.as_deref(),
        mass: a.mass.as_deref(),
        mass_generate: a.mass_generate,
        initial: a.initial.as_deref(),
        deflate: a.deflate.as_deref(),
    };
    if let Some(c) = crate::complex::load(&inputs, check_symmetry)? {
        let (k, m) = c.embeddings()?;
        let source = c.source.clone();
        return Ok((k, m, source, Some(c)));
    }
    let (m, source) = load(a, check_symmetry)?;
    let mass = crate::mass::load(
        a.mass.as_deref(),
        a.mass_generate,
        a.generate.as_deref(),
        &m,
        check_symmetry,
    )?;
    Ok(match mass {
        Some((mm, ms)) => (m, Some(mm), format!("{source} with mass {ms}"), None),
        None => (m, None, source, None),
    })
}

/// The blocks of `--initial` and `--deflate` for a matrix of n rows: read
/// with a complex pencil already (taken from it), else read here.
fn pencil_vectors(
    a: &SolveArgs,
    complex: Option<&mut crate::complex::ComplexPencil>,
    n: usize,
) -> Result<crate::vectors::Vectors, Fail> {
    match complex {
        Some(c) => Ok(std::mem::take(&mut c.vectors)),
        None => crate::vectors::load(a.initial.as_deref(), a.deflate.as_deref(), n),
    }
}

/// K (or A), M, where they came from, and for a complex Hermitian problem the
/// complex pencil (K and M are then its real embeddings).
type Pencil = (
    CsrMatrix,
    Option<CsrMatrix>,
    String,
    Option<crate::complex::ComplexPencil>,
);

/// The arguments of the solve on the real embedding of a complex problem when
/// they name an index range: complex indices i..=j are real ones 2i..=2j+1.
fn embedded_indices(a: &SolveArgs) -> Option<SolveArgs> {
    let (i, j) = a.indices?;
    Some(SolveArgs {
        indices: Some((2 * i, 2 * j + 1)),
        ..a.clone()
    })
}

/// The parameters of the library's solve: [`checked_by_load`], on the real
/// embedding of a complex problem.
fn library_params(params: &JdParams, complex: Option<&crate::complex::ComplexPencil>) -> JdParams {
    let lib = checked_by_load(params);
    match complex {
        Some(c) => c.params(&lib),
        None => lib,
    }
}

/// Reads or generates the matrix; a generated one is refused before
/// allocation when it does not fit in memory (a file is checked by the
/// reader itself).
fn load(a: &SolveArgs, check_symmetry: bool) -> Result<(CsrMatrix, String), Fail> {
    let (m, source, header) = match (&a.file, &a.generate) {
        (Some(f), None) => {
            let (m, h) = crate::read(f)?;
            (m, f.display().to_string(), Some(h))
        }
        (None, Some(g)) => {
            let spec: GenSpec = g.parse().map_err(|e| (EXIT_BAD_INPUT, e))?;
            spec.validate().map_err(|e| (EXIT_BAD_INPUT, e))?;
            check_memory(&format!("generating {spec}"), generated_bytes(&spec))?;
            (
                generate(&spec).map_err(|e| (EXIT_BAD_INPUT, e))?,
                format!("generated {spec}"),
                None,
            )
        }
        _ => return Err(Fail::bad("give a MatrixMarket FILE or --generate SPEC")),
    };
    if m.nrows() != m.ncols() {
        return Err(Fail::bad(format!(
            "{source}: matrix is {} x {}, not square",
            m.nrows(),
            m.ncols()
        )));
    }
    if check_symmetry {
        let inf = matrix_info(&m, header.as_ref());
        if !inf.symmetric {
            return Err(Fail::bad(format!(
                "{source}: matrix is not symmetric (max |a_ij - a_ji| = {:.3e}, relative {:.3e}); jdmg solves symmetric problems",
                inf.max_asymmetry.unwrap_or(f64::NAN),
                inf.max_asymmetry_rel.unwrap_or(f64::NAN)
            )));
        }
    }
    Ok((m, source))
}

/// The parameters handed to the library once [`load_pencil`] has checked the
/// matrices: its test (exact symmetry) is stricter than the library's (relative
/// asymmetry at most [`jdmg::symmetry::SYMMETRY_TOL`]), so the library's own sweep
/// over the nonzeros would only repeat it: without the repeat a whole `jdmg solve`
/// of stencil27:48 with nev = 1 takes 0.93× the time (0.95× read from a file;
/// medians of 7 and 5). The report keeps the options as given.
fn checked_by_load(params: &JdParams) -> JdParams {
    JdParams {
        problem: ProblemSettings {
            check_symmetry: false,
            ..params.problem
        },
        ..params.clone()
    }
}

/// Whether the solve factors K − σM (A − σI): shift-and-invert, intervals,
/// index ranges and the slices of many pairs, and the inertia certificate of
/// an interior target.
fn factors(a: &SolveArgs, p: &JdParams) -> bool {
    let certified =
        matches!(p.problem.target, Target::Closest(_)) && p.problem.verify != jdmg::Verify::Never;
    a.st == crate::vectors::St::Sinvert || slices(a, p) || certified
}

/// Checks made before the solve on the loaded matrix: process count against
/// n, and the memory of the solve, with the sparse LDLᵀ factor when the solve
/// makes one (its size from the symbolic factorization).
fn check_problem(
    a: &SolveArgs,
    (m, mass): (&CsrMatrix, Option<&CsrMatrix>),
    p: &JdParams,
    procs: usize,
    what: &str,
) -> Result<(), Fail> {
    let checkpoints = a.checkpoint.is_some() || a.resume.is_some();
    if procs > m.nrows() {
        return Err(Fail::bad(format!(
            "{procs} {what} for a matrix of n = {} rows: every process needs at least one row",
            m.nrows()
        )));
    }
    // per process: its share of the vectors, plus the whole matrix it read
    let share = m.nrows().div_ceil(procs);
    let mut per = solve_bytes(share, m.nnz().div_ceil(procs), p, 1);
    if checkpoints {
        per = per.saturating_add(checkpoint_bytes(share, p));
    }
    let per = if what == "ranks" {
        per.saturating_mul(procs as u64)
            .saturating_add(solve_bytes(0, m.nnz(), p, procs))
    } else {
        per
    };
    let factor = match factors(a, p) {
        true => jdmg::st::factor_bytes(m, mass).unwrap_or(0),
        false => 0,
    };
    check_memory("the solve", per.saturating_add(factor))
}

/// The signal (SIGINT or SIGTERM) that asked a single-process solve to stop; 0
/// while none did.
static INTERRUPTED: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

/// Set at the first iteration event of the solve: before it nothing is computed.
static ITERATED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
/// Whether a signal before the first iteration ends the process at once: set for
/// shift-and-invert solves in one process (serial or thread ranks), whose
/// factorization comes first and cannot be stopped midway (not for interval
/// slicing, whose slices report no iterations).
static EXIT_BEFORE_FIRST: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

extern "C" fn on_signal(sig: libc::c_int) {
    use std::sync::atomic::Ordering;
    // A second signal ends the process at once.
    if INTERRUPTED.swap(sig, Ordering::SeqCst) != 0 {
        unsafe { libc::_exit(128 + sig) };
    }
    // Before the first iteration (reading, partitioning, a factorization that
    // cannot be stopped midway) there is nothing to print or checkpoint.
    if EXIT_BEFORE_FIRST.load(Ordering::SeqCst) && !ITERATED.load(Ordering::SeqCst) {
        let msg = b"jdmg: interrupted before the first iteration (setup or factorization): nothing computed yet\n";
        // SAFETY: write(2) and _exit are async-signal-safe.
        unsafe {
            libc::write(2, msg.as_ptr().cast(), msg.len());
            libc::_exit(128 + sig);
        }
    }
}

/// Whether the solve slices an interval (or the lower end of the spectrum for
/// many pairs): its slices report no iteration events.
fn slices(a: &SolveArgs, p: &JdParams) -> bool {
    a.interval.is_some()
        || a.indices.is_some()
        || (p.execution.slice_from > 0
            && p.problem.nev >= p.execution.slice_from
            && matches!(p.problem.target, Target::Smallest | Target::Largest))
}

/// SIGINT, SIGTERM and SIGHUP (a closed terminal) stop the solve at the next
/// outer iteration (the observer breaks): the pairs converged so far are
/// printed and jdmg exits 130, 143 or 129; during the factorization of a
/// shift-and-invert solve in one process (see [`EXIT_BEFORE_FIRST`]), at once. Single-process solves, and
/// thread or MPI ranks (fine grain or solve groups): ranks could see the signal
/// at different iterations, and a checkpoint sink's poll (one global max per
/// iteration) makes them stop together ([`StopWhen`] when there is no
/// --checkpoint); [`agree_on_signal`] then gives every rank the signal. With
/// --checkpoint a last checkpoint is written.
fn catch_interrupts() {
    let handler = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
    // SAFETY: the handler only touches an atomic and calls the async-signal-safe _exit.
    unsafe {
        libc::signal(libc::SIGINT, handler);
        libc::signal(libc::SIGTERM, handler);
        libc::signal(libc::SIGHUP, handler);
    }
}

/// Gives every rank the signal that stopped the solve (the largest any rank
/// caught; collective): a signal that reached one MPI rank stops them all at the
/// same iteration, and then all report "interrupted" and exit 128 + signal, not
/// "not converged". Thread ranks share one process and its flag.
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
fn agree_on_signal<C: Comm + ?Sized>(comm: &C) {
    use std::sync::atomic::Ordering;
    let mut sig = [u64::try_from(INTERRUPTED.load(Ordering::SeqCst)).unwrap_or(0)];
    comm.all_reduce_u64(&mut sig, lblib::ReduceOp::Max);
    if let Ok(s @ 1..) = i32::try_from(sig[0]) {
        let _ = INTERRUPTED.compare_exchange(0, s, Ordering::SeqCst, Ordering::SeqCst);
    }
}

/// Whether a signal asked the solve to stop.
fn interrupted() -> bool {
    INTERRUPTED.load(std::sync::atomic::Ordering::SeqCst) != 0
}

/// Seconds between checkpoints when --checkpoint-every is not given.
const DEFAULT_CHECKPOINT_EVERY: f64 = 60.0;

/// Writes this rank's checkpoints to its file (`--checkpoint`, the library's
/// [`FileSink`], stopped by a signal) and says so on standard error: where
/// the last checkpoint went (rank 0), and the first and last failed write.
struct NotedSink {
    sink: FileSink,
    warned: bool,
    /// Whether to say on stderr where the last checkpoint went (rank 0).
    tell: bool,
}

impl NotedSink {
    fn new(a: &SolveArgs, rank: usize, nprocs: usize) -> Option<Self> {
        a.checkpoint.as_ref().map(|p| Self {
            sink: FileSink::new(
                p,
                rank,
                nprocs,
                a.checkpoint_every.unwrap_or(DEFAULT_CHECKPOINT_EVERY),
            )
            .stop_when(interrupted),
            warned: false,
            tell: rank == 0,
        })
    }
}

impl CheckpointSink for NotedSink {
    fn poll(&mut self, stats: &Stats) -> CheckpointRequest {
        self.sink.poll(stats)
    }

    fn save(&mut self, ck: &Checkpoint, last: bool) {
        self.sink.save(ck, last);
        match self.sink.last_error() {
            None if last && self.tell => note(&format!(
                "jdmg: checkpoint written to {} (outer iteration {}, {} matvecs)",
                self.sink.path().display(),
                ck.stats.outer_iterations,
                ck.stats.matvecs
            )),
            None => {}
            Some(e) => {
                if !self.warned || last {
                    note(&format!("jdmg: warning: checkpoint not written: {e}"));
                }
                self.warned = true;
            }
        }
    }
}

/// Checks made before any work on the checkpoint options of `nprocs`
/// processes, for the ranks in `ranks`: no solve groups, a sane interval, a
/// writable file per rank.
///
/// # Errors
/// Exit 2 naming the option.
fn check_checkpoint(
    a: &SolveArgs,
    ranks: std::ops::Range<usize>,
    nprocs: usize,
) -> Result<(), Fail> {
    if let Some(e) = a.checkpoint_every {
        if !(e.is_finite() && e >= 0.0) {
            return Err(Fail::bad(format!(
                "--checkpoint-every must be a number of seconds >= 0, got {e}"
            )));
        }
    }
    if let Some(p) = &a.checkpoint {
        for r in ranks {
            check_output_path("--checkpoint", &rank_path(p, r, nprocs))?;
        }
    }
    Ok(())
}

/// A `--resume` failure: exit 2 with the library's message.
fn resume_fail(e: ResumeError) -> Fail {
    Fail::bad(format!("--resume {e}"))
}

/// Checks that the checkpoints to resume from are of a matrix of dimension `n`.
///
/// # Errors
/// Exit 2 naming both dimensions.
fn check_resume_dimension(a: &SolveArgs, resume: &[Checkpoint], n: usize) -> Result<(), Fail> {
    match &a.resume {
        Some(p) => set::check_dimension(p, resume, n).map_err(resume_fail),
        None => Ok(()),
    }
}

/// Reads the checkpoints of every rank of `nprocs` processes for --resume (one
/// process: thread ranks), the newest set of one outer iteration.
///
/// # Errors
/// Exit 2 as [`set::read_set`].
fn read_resume(a: &SolveArgs, nprocs: usize) -> Result<Vec<Checkpoint>, Fail> {
    let Some(path) = &a.resume else {
        return Ok(Vec::new());
    };
    let set = set::read_set(path, nprocs).map_err(resume_fail)?;
    if set.previous {
        note(&format!(
            "jdmg: resuming from the previous checkpoint set (outer iteration {}): the newest is incomplete",
            set.iteration
        ));
    }
    Ok(set.checkpoints)
}

/// Observer state: the live display and the residual history.
struct Watch {
    live: Option<Live>,
    history: Option<History>,
    nev: usize,
}

impl Watch {
    /// The observer of a solve of order `n`.
    fn new(a: &SolveArgs, p: &JdParams, n: usize) -> Self {
        let live = (!a.quiet && std::io::stderr().is_terminal())
            .then(|| Live::new(p.problem.nev, p.execution.matvec_budget(n, p.problem.nev)));
        Self {
            live,
            history: a.plot.as_ref().map(|_| History::default()),
            nev: p.problem.nev,
        }
    }

    fn see(&mut self, ev: &IterationEvent) {
        ITERATED.store(true, std::sync::atomic::Ordering::SeqCst);
        if let Some(l) = &self.live {
            l.update(ev);
        }
        if let Some(h) = &mut self.history {
            h.record(ev, self.nev);
        }
    }

    /// [`Watch::see`], then stop when a signal asked (single-process solves).
    fn see_or_stop(&mut self, ev: &IterationEvent) -> std::ops::ControlFlow<()> {
        self.see(ev);
        if INTERRUPTED.load(std::sync::atomic::Ordering::SeqCst) != 0 {
            std::ops::ControlFlow::Break(())
        } else {
            std::ops::ControlFlow::Continue(())
        }
    }

    fn done(&self) {
        if let Some(l) = &self.live {
            l.finish();
        }
    }
}

/// Where jdmg runs: one process, threads as ranks, or MPI.
enum Mode {
    Local,
    Mpi,
}

/// MPI when asked (`--mpi`) or launched by an MPI launcher, unless `--no-mpi`.
fn mode(a: &SolveArgs) -> Result<Mode, Fail> {
    if a.no_mpi {
        return Ok(Mode::Local);
    }
    if a.mpi {
        return Ok(Mode::Mpi);
    }
    match mpi_detect::detect() {
        None => Ok(Mode::Local),
        Some(l) if cfg!(feature = "mpi") => {
            let _ = l;
            Ok(Mode::Mpi)
        }
        Some(l) if l.size.is_some_and(|s| s > 1) => Err(Fail::bad(format!(
            "launched as one of {} MPI processes ({} is set), but this jdmg was built without MPI: every process would solve alone. Rebuild with --features mpi, or pass --no-mpi",
            l.size.unwrap_or(0),
            l.evidence
        ))),
        Some(_) => Ok(Mode::Local),
    }
}

/// Output paths and standard output, checked before any long work.
fn check_outputs(a: &SolveArgs) -> Result<(), Fail> {
    require_stdout()?;
    if let Some(p) = &a.eigenvectors {
        check_output_path("--eigenvectors", p)?;
    }
    if let Some(p) = &a.plot {
        check_output_path("--plot", p)?;
    }
    check_no_overwrite(a)
}

/// The file `p` names as (device, inode), symbolic links followed; None when
/// it does not exist.
fn file_id(p: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(p).ok().map(|m| (m.dev(), m.ino()))
}

/// `p` made absolute through its directory (for files not written yet).
fn path_key(p: &Path) -> Option<PathBuf> {
    if let Ok(c) = std::fs::canonicalize(p) {
        return Some(c);
    }
    let dir = p
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    Some(std::fs::canonicalize(dir).ok()?.join(p.file_name()?))
}

fn same_file(a: &Path, b: &Path) -> bool {
    matches!((file_id(a), file_id(b)), (Some(x), Some(y)) if x == y)
        || matches!((path_key(a), path_key(b)), (Some(x), Some(y)) if x == y)
}

/// Standard output as (device, inode) when it is a regular file (redirected).
fn stdout_file_id() -> Option<(u64, u64)> {
    // SAFETY: fstat on descriptor 1 into a zeroed stat buffer.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    let ok = unsafe { libc::fstat(1, &mut st) } == 0;
    (ok && (st.st_mode & libc::S_IFMT) == libc::S_IFREG).then_some((st.st_dev, st.st_ino))
}

/// Refuses outputs that would overwrite each other, an input (the matrix,
/// --config, --resume) or the file standard output is redirected to (the
/// eigenvalue table), before any work. --checkpoint may be the --resume file.
///
/// # Errors
/// Exit 2 naming both options and the path.
fn check_no_overwrite(a: &SolveArgs) -> Result<(), Fail> {
    let outputs: Vec<(&str, &Path)> = [
        ("--eigenvectors", &a.eigenvectors),
        ("--plot", &a.plot),
        ("--checkpoint", &a.checkpoint),
    ]
    .into_iter()
    .filter_map(|(o, p)| p.as_deref().map(|p| (o, p)))
    .collect();
    let inputs: Vec<(&str, &Path)> = [
        ("the input matrix", &a.file),
        ("--config", &a.config),
        ("--resume", &a.resume),
    ]
    .into_iter()
    .filter_map(|(o, p)| p.as_deref().map(|p| (o, p)))
    .collect();
    for (i, &(o, p)) in outputs.iter().enumerate() {
        for &(o2, p2) in &outputs[i + 1..] {
            if same_file(p, p2) {
                return Err(Fail::bad(format!(
                    "{o} and {o2} name the same file {}: one would overwrite the other",
                    p.display()
                )));
            }
        }
        for &(o2, p2) in &inputs {
            let resuming = o == "--checkpoint" && o2 == "--resume";
            if !resuming && same_file(p, p2) {
                return Err(Fail::bad(format!(
                    "{o} {} is {o2}: it would be overwritten",
                    p.display()
                )));
            }
        }
        if stdout_file_id().is_some_and(|s| file_id(p) == Some(s)) {
            return Err(Fail::bad(format!(
                "{o} {} is the file standard output goes to: the eigenvalue table would be overwritten",
                p.display()
            )));
        }
    }
    Ok(())
}

/// `jdmg solve`.
///
/// # Errors
/// The failure to report, with its exit code.
pub fn solve_cmd(a: &SolveArgs) -> Result<(), Fail> {
    let params = params_from(a)?;
    check_count("--ranks", a.ranks, MAX_RANKS)?;
    if let Some(g) = &a.groups {
        if a.ranks > 1 {
            check_groups(g, a.ranks)?;
        }
    }
    if let Mode::Mpi = mode(a)? {
        return solve_mpi(a, &params);
    }
    if a.groups.is_some() && a.ranks < 2 {
        return Err(Fail::bad("--groups needs --ranks N (N > 1) or --mpi"));
    }
    if !a.slowdown.is_empty() && a.ranks < 2 {
        return Err(Fail::bad("--slowdown needs --ranks N or --mpi"));
    }
    crate::vectors::check_options(a.st, a.groups.is_some(), &params)?;
    check_outputs(a)?;
    check_checkpoint(a, 0..a.ranks, a.ranks)?;
    let resume = read_resume(a, a.ranks)?;
    let (m, mass, source, mut complex) = load_pencil(a, params.problem.check_symmetry)?;
    let embedded_args = complex.as_ref().and_then(|_| embedded_indices(a));
    let a = embedded_args.as_ref().unwrap_or(a);
    check_problem(a, (&m, mass.as_ref()), &params, a.ranks, "ranks")?;
    check_resume_dimension(a, &resume, m.nrows())?;
    let vecs = pencil_vectors(a, complex.as_mut(), m.nrows())?;
    let watch = Mutex::new(Watch::new(a, &params, m.nrows()));
    let lib = library_params(&params, complex.as_ref());
    let factor_first = a.st == crate::vectors::St::Sinvert && !slices(a, &params);
    EXIT_BEFORE_FIRST.store(factor_first, std::sync::atomic::Ordering::SeqCst);
    let (res, nprocs, extra) = if a.ranks > 1 {
        let cfg = crate::resources::thread_config(&a.slowdown, a.ranks)?;
        // the checkpoint sink (or the StopWhen sink) makes the stop collective
        catch_interrupts();
        let out = crate::resources::run_ranks(cfg, |comm| {
            let w = (comm.rank() == 0).then_some(&watch);
            run_distributed(
                a,
                &lib,
                &m,
                mass.as_ref(),
                &comm,
                w,
                Resume::All(&resume),
                &vecs,
            )
        })?;
        let Some(first) = out.into_iter().next() else {
            return Err(Fail::bad("no rank returned a result"));
        };
        (first.0?, a.ranks, first.1)
    } else {
        let mut w = watch.lock().unwrap_or_else(|e| e.into_inner());
        catch_interrupts();
        let mut obs = |ev: &IterationEvent| w.see_or_stop(ev);
        let mut sink = NotedSink::new(a, 0, 1);
        let ck = Checkpointing {
            resume: resume.first(),
            sink: sink.as_mut().map(|s| s as &mut dyn CheckpointSink),
        };
        let solver = jdmg::Solver::new(&m, &lib)
            .observer(&mut obs)
            .checkpointing(ck)
            .spaces(vecs.spaces());
        let res = shift_invert_if_asked(mass_if_given(solver, mass.as_ref()), a, &params).run();
        (res, 1, Extra::default())
    };
    let watch = watch.into_inner().unwrap_or_else(|e| e.into_inner());
    watch.done();
    let extra = extra.resumed_from(resume.first());
    let problem = Solved {
        source: &source,
        m: &m,
        complex: complex.as_ref(),
    };
    report(a, &params, &problem, res, nprocs, extra, watch.history)
}

/// `solver` on the pencil (K, M) when `mass` is given.
fn mass_if_given<'h, C: Comm>(
    solver: jdmg::Solver<'h, jdmg::solver::OnMatrix<'h, CsrMatrix, C>>,
    mass: Option<&'h CsrMatrix>,
) -> jdmg::Solver<'h, jdmg::solver::OnMatrix<'h, CsrMatrix, C>> {
    match mass {
        Some(mm) => solver.mass(mm),
        None => solver,
    }
}

/// `solver` with shift-and-invert at σ for `--st sinvert --target σ`.
fn shift_invert_if_asked<'h, C: Comm>(
    solver: jdmg::Solver<'h, jdmg::solver::OnMatrix<'h, CsrMatrix, C>>,
    a: &SolveArgs,
    params: &JdParams,
) -> jdmg::Solver<'h, jdmg::solver::OnMatrix<'h, CsrMatrix, C>> {
    let mut slicing = jdmg::slicing::SliceParams::default();
    if let Some(p) = a.per_slice {
        slicing.per_slice = usize::try_from(p).unwrap_or(usize::MAX);
    }
    slicing.method = a.slice_method.into();
    slicing.split = a.slice_split.into();
    if let Some((lo, hi)) = a.interval {
        return solver.interval(lo, hi, slicing);
    }
    if let Some((first, last)) = a.indices {
        return solver.indices(first, last, slicing);
    }
    match (a.st, params.problem.target) {
        (crate::vectors::St::Sinvert, Target::Closest(sigma)) => solver.shift_invert(sigma),
        _ => solver,
    }
}

/// The problem a report is about: where it came from, the matrix solved, and
/// for a complex problem the complex pencil whose pairs are recovered.
struct Solved<'s> {
    source: &'s str,
    m: &'s CsrMatrix,
    complex: Option<&'s crate::complex::ComplexPencil>,
}

/// What a run adds to the report beside the solution: the fields of
/// [`SolveReport`] that are not the solution's.
#[derive(Default)]
struct Extra {
    mode: Option<RunMode>,
    groups: Option<Vec<Vec<usize>>>,
    balance: Option<Balance>,
    multigrain: Option<jdmg::MultigrainStats>,
    imbalance_percent: Option<f64>,
    imbalance: Option<lblib::ImbalanceReport>,
    resumed_from: Option<ResumedFrom>,
}

impl Extra {
    /// Adds `resumed_from` (the checkpoint's outer iteration and matvecs) of a
    /// resumed solve.
    fn resumed_from(mut self, ck: Option<&Checkpoint>) -> Self {
        self.resumed_from = ck.map(|c| ResumedFrom {
            outer_iterations: c.stats.outer_iterations,
            matvecs: c.stats.matvecs,
        });
        self
    }

    /// Fills the report's fields.
    fn into_report(self, r: &mut SolveReport) {
        r.mode = self.mode;
        r.groups = self.groups;
        r.balance = self.balance;
        r.multigrain = self.multigrain;
        r.imbalance_percent = self.imbalance_percent;
        r.imbalance = self.imbalance;
        r.resumed_from = self.resumed_from;
    }
}

type DistOutcome = (Result<Result<Solution, JdError>, Fail>, Extra);

/// The checkpoints a distributed run resumes from: every rank's (thread
/// ranks, indexed by fine-grain rank), or this process's own (MPI, read from
/// the file of its fine-grain rank, `fine_rank`).
enum Resume<'c> {
    All(&'c [Checkpoint]),
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    Mine(Option<&'c Checkpoint>),
}

/// Fine grain (or multigrain with --groups) on the processes of `base`, with the
/// paper's imbalance tracer on the fine-grain communicator. Collective.
/// `watch` (on one rank) observes the fine-grain iterations.
#[allow(clippy::too_many_arguments)]
fn run_distributed<B: Comm>(
    a: &SolveArgs,
    params: &JdParams,
    m: &CsrMatrix,
    mass: Option<&CsrMatrix>,
    base: &B,
    watch: Option<&Mutex<Watch>>,
    resume: Resume<'_>,
    vecs: &crate::vectors::Vectors,
) -> DistOutcome {
    // Solve groups first: with the hierarchical layout (McCombs et al. §6) the fine-grain
    // communicator is ordered by fine part (jdmg::fine_rank_keys).
    let groups = match a.groups.as_deref() {
        Some(spec) => match check_groups(spec, base.size()).and_then(|()| {
            jdmg::groups_on(spec, base, params).map_err(|e| Fail::bad(e.to_string()))
        }) {
            Ok(g) => Some(g),
            Err(e) => return (Err(e), Extra::default()),
        },
        None => None,
    };
    let hierarchical = matches!(a.hierarchical, OnOff::On);
    // --link-latency: the fine-grain collectives and the fine↔group all-to-alls
    // cross the slow link, the solve groups' own ones do not
    let world = jdmg::fine_world(base, groups.as_deref(), hierarchical, a.link_latency);
    let mut extra = Extra::default();
    // the checkpoint of this fine-grain rank (with the hierarchical layout of
    // solve groups, the fine-grain rank differs from the rank in `base`)
    let resume = match resume {
        Resume::All(set) => set.get(world.rank()),
        Resume::Mine(ck) => ck,
    };
    // --checkpoint (or a StopWhen sink) makes a signal's stop collective
    let mut sink = NotedSink::new(a, world.rank(), world.size());
    let mut stop = StopWhen(interrupted);
    // (an interval solve takes no sink: its slices stop where they stop)
    let ranged = a.interval.is_some() || a.indices.is_some();
    let ck = Checkpointing {
        resume,
        sink: if ranged {
            None
        } else {
            Some(match sink.as_mut() {
                Some(s) => s as &mut dyn CheckpointSink,
                None => &mut stop,
            })
        },
    };
    let mut watch = watch.map(|w| w.lock().unwrap_or_else(|e| e.into_inner()));
    let mut obs = |ev: &IterationEvent| {
        if let Some(w) = watch.as_mut() {
            w.see(ev);
        }
        std::ops::ControlFlow::Continue(())
    };
    let mg;
    let r = match groups {
        Some(groups) => {
            let balance = match a.balance {
                None if groups.len() > 1 => Balance::Fastest,
                None => Balance::None,
                Some(b) => b,
            };
            mg = jdmg::MultigrainParams {
                groups: groups.clone(),
                balance,
                hierarchical,
                // timed rates only where balancing is asked: `none` is deterministic
                rate_weighted_rows: balance != Balance::None,
                rate_kind: a.rates.0,
                rate_window: a.rates.1,
                memory_balance: a.memory_balance.then(jdmg::multigrain::memory_params),
                repartition: jdmg::RepartitionParams {
                    enabled: matches!(a.repartition, OnOff::On),
                    core_share: matches!(a.core_share, OnOff::On),
                    ..jdmg::RepartitionParams::default()
                },
                ..jdmg::MultigrainParams::default()
            };
            // shift-and-invert runs fine grain over the groups' ranks (its
            // corrections are GD+k steps: nothing for groups to share)
            let sinvert = matches!(
                (a.st, params.problem.target),
                (crate::vectors::St::Sinvert, Target::Closest(_))
            );
            extra.mode = Some(if sinvert {
                RunMode::Fine
            } else {
                RunMode::Multigrain
            });
            extra.groups = Some(groups);
            extra.balance = Some(balance);
            let solver = jdmg::Solver::new(m, params)
                .comm(&world)
                .observer(&mut obs)
                .checkpointing(ck)
                .spaces(vecs.spaces());
            let solver = shift_invert_if_asked(mass_if_given(solver, mass), a, params);
            match solver.groups(base, &mg).run() {
                Ok(mut s) => {
                    extra.multigrain = s.multigrain.take();
                    Ok(s)
                }
                Err(e) => Err(e),
            }
        }
        None => {
            extra.mode = Some(RunMode::Fine);
            let solver = jdmg::Solver::new(m, params)
                .comm(&world)
                .observer(&mut obs)
                .checkpointing(ck)
                .spaces(vecs.spaces());
            shift_invert_if_asked(mass_if_given(solver, mass), a, params).run()
        }
    };
    drop(watch);
    if let Ok(rep) = world.report() {
        // hierarchical multigrain: plus the waits in the all-to-all groups (§4, §6)
        let pct = extra
            .multigrain
            .as_ref()
            .map_or(rep.imbalance_percent, |s| s.imbalance_percent(&rep));
        extra.imbalance_percent = Some(pct);
        extra.imbalance = Some(rep);
    }
    // over `world`: its rank order is the order of the fine row blocks
    let res = jdmg::gather_eigenvectors(&world, m.nrows(), r);
    (Ok(res), extra)
}

/// Longest `--link-latency`: an hour per collective.
const MAX_LINK_LATENCY: f64 = 3600.0;

/// `--link-latency`: seconds in [0, [`MAX_LINK_LATENCY`]].
fn parse_latency(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if (0.0..=MAX_LINK_LATENCY).contains(&v) => Ok(v),
        _ => Err(format!(
            "expected seconds in [0, {MAX_LINK_LATENCY}] (per collective), got {s:?}"
        )),
    }
}

/// `--rates`: `average` or `instant:W` (W > 0 seconds).
fn parse_rates(s: &str) -> Result<(lblib::RateKind, f64), String> {
    let default_window = jdmg::MultigrainParams::default().rate_window;
    match s.split_once(':') {
        None if s == "average" => Ok((lblib::RateKind::Average, default_window)),
        None if s == "instant" => Ok((lblib::RateKind::Instantaneous, default_window)),
        Some(("instant", w)) => match w.parse::<f64>() {
            Ok(w) if w.is_finite() && w > 0.0 => Ok((lblib::RateKind::Instantaneous, w)),
            _ => Err(format!("instant:W needs a window W > 0 seconds, got {w:?}")),
        },
        _ => Err(format!("expected average or instant:W, got {s:?}")),
    }
}

/// Prints the results (text or JSON) on standard output, then writes the
/// eigenvectors and the plot (atomically, paths checked before the solve):
/// the eigenvalues are printed even if a file cannot be written.
#[allow(clippy::too_many_arguments)]
fn report(
    a: &SolveArgs,
    params: &JdParams,
    problem: &Solved<'_>,
    res: Result<Solution, JdError>,
    nprocs: usize,
    extra: Extra,
    history: Option<History>,
) -> Result<(), Fail> {
    let (source, m) = (problem.source, problem.m);
    let res = match problem.complex {
        Some(c) => c.recover(res, params),
        None => res,
    };
    let sol = match res {
        Ok(s) => s,
        Err(e @ JdError::NonFinite(_)) => return Err(Fail::bad(format!("{e}{}", scale_hint(m)))),
        Err(e) => return Err(Fail::bad(e.to_string())),
    };
    let (n, nnz) = match problem.complex {
        Some(c) => (c.a.nrows(), c.a.nnz()),
        None => (m.nrows(), m.nnz()),
    };
    let mut rep = SolveReport::new(source, n, nnz, nprocs, params, &sol);
    extra.into_report(&mut rep);
    let all_conv = rep.converged;
    let mut out = String::new();
    if a.json {
        let _ = writeln!(out, "{}", rep.to_json());
    } else {
        text_report(&mut out, &rep, a.verbose);
    }
    emit(&out)?;
    match (&a.eigenvectors, problem.complex) {
        (Some(path), Some(c)) => c.write_vectors(path, &sol)?,
        (Some(path), None) => matrices::mm::write_array_file(
            path,
            sol.n_local,
            sol.eigenvalues.len(),
            &sol.eigenvectors,
        )
        .map_err(|e| Fail::bad(format!("--eigenvectors {}: {e}", path.display())))?,
        (None, _) => {}
    }
    if let (Some(path), Some(mut h)) = (&a.plot, history) {
        h.finish(sol.stats.matvecs, &sol.residual_norms);
        let threshold = match params.problem.conv {
            ConvTest::Norm => {
                Some(params.problem.tol * params.problem.anorm.unwrap_or(sol.stats.anorm_estimate))
            }
            ConvTest::Abs => Some(params.problem.tol),
            ConvTest::Rel | ConvTest::Sqrt => None,
        };
        let title = format!(
            "{source}: residual history of {} eigenpairs",
            sol.eigenvalues.len()
        );
        let svg = h
            .svg(&title, threshold)
            .map_err(|e| Fail::bad(format!("--plot {}: {e}", path.display())))?;
        write_atomic(path, svg.as_bytes())?;
    }
    let signal = INTERRUPTED.load(std::sync::atomic::Ordering::SeqCst);
    if signal != 0 {
        Err(Fail(
            u8::try_from(128 + signal).unwrap_or(130),
            format!(
                "interrupted: {} of {} eigenpairs converged (printed above)",
                sol.nconverged(),
                params.problem.nev
            ),
        ))
    } else if all_conv {
        Ok(())
    } else {
        Err(Fail(
            EXIT_NOT_CONVERGED,
            format!(
                "not converged ({}): {} of {} eigenpairs",
                sol.outcome.describe(),
                sol.nconverged(),
                sol.stats.interval.map_or(params.problem.nev, |iv| iv.count)
            ),
        ))
    }
}

/// The likely cause of a non-finite value in the solve, from the matrix's
/// entries: magnitudes whose squares overflow (above 1e154) or underflow
/// (below 1e-154) the doubles; empty when the entries are moderate.
fn scale_hint(m: &CsrMatrix) -> String {
    let (mut lo, mut hi) = (f64::INFINITY, 0.0f64);
    for &v in m.data().iter().filter(|v| **v != 0.0) {
        lo = lo.min(v.abs());
        hi = hi.max(v.abs());
    }
    if hi > 1e154 || (lo.is_finite() && lo < 1e-154) {
        format!(
            " (the matrix's entries range from {lo:.3e} to {hi:.3e} in magnitude: their \
             squares leave the range of doubles; scale the matrix towards 1)"
        )
    } else {
        String::new()
    }
}

/// `v` as compact JSON (a non-finite number is `null`).
fn json<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

/// What was asked for, and the convergence test with its threshold: "4
/// smallest eigenpairs, tol 1e-8: ‖r‖ ≤ tol·‖A‖ = 8.620e-8".
fn headline(rep: &SolveReport) -> String {
    let (p, s) = (&rep.params, &rep.stats);
    let pencil = s.mass_matvecs > 0;
    let what = match (&s.interval, p.problem.target) {
        (Some(_), _) => "every eigenpair of the range below".to_string(),
        (None, Target::Smallest) => format!("{} smallest eigenpairs", p.problem.nev),
        (None, Target::Largest) => format!("{} largest eigenpairs", p.problem.nev),
        (None, Target::LargestMagnitude) => {
            format!("{} eigenpairs of largest magnitude", p.problem.nev)
        }
        (None, Target::Closest(t)) => format!("{} eigenpairs closest to {t}", p.problem.nev),
    };
    let anorm = p.problem.anorm.unwrap_or(s.anorm_estimate);
    let shifted = s.eigenvalues_below_shift.is_some() || s.interval.is_some();
    let test = match (p.problem.conv, pencil) {
        (ConvTest::Norm, false) if shifted => "‖r‖ ≤ tol·(‖A‖₁ + |λ|)".to_string(),
        (ConvTest::Norm, true) if shifted => "‖Kx − λMx‖/‖x‖ ≤ tol·(‖K‖₁ + |λ|·‖M‖₁)".to_string(),
        (ConvTest::Norm, false) if anorm > 0.0 => {
            format!("‖r‖ ≤ tol·‖A‖ = {:.3e}", p.problem.tol * anorm)
        }
        (ConvTest::Norm, false) => "‖r‖ ≤ tol·‖A‖".to_string(),
        (ConvTest::Norm, true) => "‖Kx − λMx‖/‖x‖ ≤ tol·(‖K‖ + |λ|·‖M‖)".to_string(),
        (ConvTest::Rel, _) => "‖r‖ ≤ tol·|λ|".to_string(),
        (ConvTest::Abs, _) => "‖r‖ ≤ tol".to_string(),
        (ConvTest::Sqrt, _) => "‖r‖ ≤ max(tol·√|λ|, 1e3·ε·‖A‖)".to_string(),
    };
    format!(
        "{what}{}, tol {:e}: {test}",
        if pencil { " of K x = λ M x" } else { "" },
        p.problem.tol
    )
}

/// The human-readable report: what was solved, the pairs, how many converged
/// and what else a user acts on; the counters and timings with `verbose`.
fn text_report(out: &mut String, rep: &SolveReport, verbose: bool) {
    let _ = writeln!(
        out,
        "{}: n = {}, nnz = {}, {} process(es)",
        rep.source, rep.n, rep.nnz, rep.nprocs
    );
    let _ = writeln!(out, "{}", headline(rep));
    let _ = writeln!(
        out,
        "{:>4}  {:>24}  {:>12}  converged",
        "#", "eigenvalue", "residual"
    );
    for (j, (l, r)) in rep.eigenvalues.iter().zip(&rep.residual_norms).enumerate() {
        let _ = writeln!(
            out,
            "{j:>4}  {l:>24.16e}  {r:>12.3e}  {}",
            rep.converged_each[j]
        );
    }
    let s = &rep.stats;
    let wanted = s.interval.map_or(rep.nev, |iv| iv.count);
    let ended = match rep.outcome {
        Outcome::Converged => String::new(),
        o => format!(" ({})", o.describe()),
    };
    let _ = writeln!(
        out,
        "{} of {wanted} converged{ended} in {:.3} s: {} products with the matrix, {} outer iterations",
        rep.converged_each.iter().filter(|&&c| c).count(),
        s.wall_seconds,
        s.matvecs,
        s.outer_iterations
    );
    if verbose {
        counters(out, rep);
    }
    notes(out, rep);
}

/// The solver's counters and timings (`--verbose`).
fn counters(out: &mut String, rep: &SolveReport) {
    let s = &rep.stats;
    let _ = writeln!(
        out,
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
        let _ = writeln!(
            out,
            "JDQMR stops: maxits {}  stagnation {}  ritz {}  converged {}  reduced {}  linear {}  breakdown {}",
            q.steps, q.stagnation, q.ritz, q.converged, q.reduced, q.linear, q.breakdown
        );
    }
    let _ = writeln!(
        out,
        "time {:.3} s (projection {:.3}, correction {:.3}, setup {:.3})  ‖A‖ est {:.4e}",
        s.wall_seconds,
        s.projection_seconds,
        s.correction_seconds,
        s.setup_seconds,
        s.anorm_estimate
    );
    let ph = &s.phases;
    if ph != &jdmg::PhaseSeconds::default() {
        let steps: Vec<String> = jdmg::PhaseSeconds::NAMES
            .iter()
            .zip(ph.values())
            .map(|(name, t)| format!("{name} {t:.3}"))
            .collect();
        let _ = writeln!(
            out,
            "projection steps: {} s;  SpMV {:.3}  preconditioner {:.3}  dense {:.3} s",
            steps.join("  "),
            s.spmv_seconds,
            s.precond_seconds,
            s.dense_seconds
        );
    }
}

/// What a user acts on beside the pairs: verification and certificates,
/// ranges, shift-and-invert, pencils, given vectors, scaling, resumes,
/// imbalance and solve groups.
fn notes(out: &mut String, rep: &SolveReport) {
    let s = &rep.stats;
    if s.verification_passes > 0 {
        let _ = writeln!(
            out,
            "verification: {} pass(es), {} missed cop{} of multiple eigenvalues found and locked{}",
            s.verification_passes,
            s.missed_copies,
            if s.missed_copies == 1 { "y" } else { "ies" },
            match (s.verified, &s.certificate) {
                (Some(false), Some(_)) => " (the inertia count disagrees: see below)",
                (Some(false), None) => " (cut short by the budget)",
                _ => "",
            }
        );
    }
    if s.floor_refinements > 0 {
        let _ = writeln!(
            out,
            "locking floor: {} cluster(s) of locked pairs refined again (their residuals held a later pair above the tolerance)",
            s.floor_refinements
        );
    }
    if let Some(c) = &s.certificate {
        let _ = writeln!(
            out,
            "{}: {} eigenvalues within {:.6e} of the target{}",
            if s.verified == Some(true) {
                "certified by inertia"
            } else {
                "NOT certified: the inertia counts"
            },
            c.count,
            c.radius,
            if c.repaired > 0 {
                format!(
                    ", all returned ({} missed and found by shift-and-invert)",
                    c.repaired
                )
            } else if s.verified == Some(true) {
                ", all returned".to_string()
            } else {
                String::new()
            }
        );
    }
    if let Some(iv) = &s.interval {
        let what = match iv.first_index {
            Some(i) => format!(
                "indices {i}..={} in [{:e}, {:e}]: {} eigenvalues",
                i + iv.count.saturating_sub(1),
                iv.lower,
                iv.upper,
                iv.count
            ),
            None => format!(
                "interval [{}, {}]: {} eigenvalues",
                iv.lower, iv.upper, iv.count
            ),
        };
        let _ = writeln!(
            out,
            "{what} by inertia ({} LDLᵀ counts, {:.3} s), {} returned \
             from {} slice(s){}",
            iv.counts,
            iv.count_seconds,
            rep.eigenvalues.len(),
            iv.slices,
            if iv.retried > 0 {
                format!(", {} solved again for missed eigenvalues", iv.retried)
            } else {
                String::new()
            }
        );
    }
    if let Some(below) = s.eigenvalues_below_shift {
        let _ = writeln!(
            out,
            "shift-and-invert: {below} eigenvalues below the shift (inertia of LDLᵀ)"
        );
    }
    if s.mass_matvecs > 0 {
        let _ = writeln!(
            out,
            "generalized K x = λ M x: {} products with M; eigenvectors M-orthonormal, residuals ‖Kx − λMx‖/‖x‖, ‖A‖ est is ‖K‖",
            s.mass_matvecs
        );
    }
    if s.deflation_vectors > 0 || s.initial_vectors > 0 {
        let _ = writeln!(
            out,
            "start vectors {}  deflation vectors {} (results orthogonal to them)",
            s.initial_vectors, s.deflation_vectors
        );
    }
    if s.scale != 1.0 && s.scale != 0.0 {
        let _ = writeln!(
            out,
            "internal scale {:e} (‖A‖ outside [1e-100, 1e100])",
            s.scale
        );
    }
    if let Some(r) = &rep.resumed_from {
        let _ = writeln!(
            out,
            "resumed from a checkpoint at outer iteration {} ({} matvecs); counters are totals",
            r.outer_iterations, r.matvecs
        );
    }
    // JSON's numbers: a non-finite one is null, and not printed
    if let Some(p) = rep.imbalance_percent.filter(|p| p.is_finite()) {
        let _ = writeln!(
            out,
            "imbalance {p:.2}% (McCombs et al. §4 metric, fine-grain collectives)"
        );
    }
    if let Some(mg) = &rep.multigrain {
        let _ = writeln!(
            out,
            "solve groups {}  inner steps per group {}  rates {}",
            rep.groups.as_ref().map(json).unwrap_or_default(),
            json(&mg.group_inner_steps),
            json(&mg.group_rates)
        );
        let rp = &mg.repartition;
        if rp.active {
            let _ = writeln!(
                out,
                "re-partitions {} ({:.3} s, {} values moved)  fine rows {}",
                rp.count,
                if rp.seconds.is_finite() {
                    rp.seconds
                } else {
                    0.0
                },
                rp.values_sent_total,
                json(&mg.fine_rows)
            );
            if let Some(last) = rp.core_shares.last() {
                let _ = writeln!(out, "core shares at the last check {}", json(last));
            }
        }
    }
}

/// The MPI run: every rank reads (or generates) the matrix and keeps its rows;
/// rank 0 checks the output paths and prints. All ranks agree on every check
/// before entering the solver's collectives.
#[cfg(feature = "mpi")]
fn solve_mpi(a: &SolveArgs, params: &JdParams) -> Result<(), Fail> {
    let (_universe, world, _t) = lblib::mpi::init().map_err(|e| (EXIT_BAD_INPUT, e))?;
    crate::output::said_before_finalize(solve_on(a, params, &world))
}

/// [`solve_mpi`] on the initialized world.
#[cfg(feature = "mpi")]
fn solve_on(a: &SolveArgs, params: &JdParams, world: &lblib::mpi::MpiComm) -> Result<(), Fail> {
    let (rank, size) = (world.rank(), world.size());
    let prepared = (|| {
        if rank == 0 {
            check_outputs(a)?;
        }
        check_checkpoint(a, rank..rank + 1, size)?;
        if let Some(g) = &a.groups {
            check_groups(g, size)?;
        }
        let resume = match &a.resume {
            Some(p) => {
                set::rank_options(p, fine_rank(a, params, rank, size), size).map_err(resume_fail)?
            }
            None => Vec::new(),
        };
        crate::vectors::check_options(a.st, a.groups.is_some(), params)?;
        let (m, mass, source, mut complex) = load_pencil(a, params.problem.check_symmetry)?;
        check_problem(a, (&m, mass.as_ref()), params, size, "MPI processes")?;
        check_resume_dimension(a, &resume, m.nrows())?;
        let vecs = pencil_vectors(a, complex.as_mut(), m.nrows())?;
        let factor = if a.slowdown.is_empty() {
            1.0
        } else if a.slowdown.len() == size && a.slowdown.iter().all(|f| f.is_finite() && *f > 0.0) {
            a.slowdown[rank]
        } else {
            return Err(Fail::bad(format!(
                "--slowdown needs {size} positive factors"
            )));
        };
        Ok((m, mass, source, complex, factor, resume, vecs))
    })();
    // Every rank must agree before entering collectives; the lowest failing
    // rank says why (a checkpoint file can be missing on one rank only).
    let (m, mass, source, complex, factor, resume, vecs) = crate::output::agree(world, prepared)?;
    let embedded_args = complex.as_ref().and_then(|_| embedded_indices(a));
    let a = embedded_args.as_ref().unwrap_or(a);
    // --resume: the newest outer iteration every rank has a checkpoint of.
    let resume = match &a.resume {
        Some(p) => match set::agree_on_set(world, p, resume) {
            Ok(set) => set.checkpoints,
            Err(e) => {
                let msg = if rank == 0 {
                    format!("--resume {e}")
                } else {
                    String::new()
                };
                return Err(Fail(EXIT_BAD_INPUT, msg));
            }
        },
        None => Vec::new(),
    };
    let slowed = lblib::Slowed::new(world.split(0, rank), factor);
    let watch = Mutex::new(Watch::new(a, params, m.nrows()));
    let w = (rank == 0).then_some(&watch);
    // the checkpoint sink (or the StopWhen sink) makes the stop collective
    catch_interrupts();
    let (r, extra) = run_distributed(
        a,
        &library_params(params, complex.as_ref()),
        &m,
        mass.as_ref(),
        &slowed,
        w,
        Resume::Mine(resume.first()),
        &vecs,
    );
    agree_on_signal(world);
    let extra = extra.resumed_from(resume.first());
    let watch = watch.into_inner().unwrap_or_else(|e| e.into_inner());
    watch.done();
    let r = r?;
    if rank == 0 {
        let problem = Solved {
            source: &source,
            m: &m,
            complex: complex.as_ref(),
        };
        report(a, params, &problem, r, size, extra, watch.history)
    } else {
        match r {
            Ok(s) if s.is_converged() => Ok(()),
            Ok(s) if s.outcome == Outcome::Stopped => {
                let signal = INTERRUPTED.load(std::sync::atomic::Ordering::SeqCst);
                let code = if signal != 0 { 128 + signal } else { 3 };
                Err(Fail(u8::try_from(code).unwrap_or(130), String::new()))
            }
            Ok(_) => Err(Fail(EXIT_NOT_CONVERGED, String::new())),
            Err(_) => Err(Fail(EXIT_BAD_INPUT, String::new())),
        }
    }
}

/// The fine-grain rank of MPI rank `rank`, whose checkpoint files it writes
/// and resumes from: its rank, or with hierarchical solve groups its place in
/// the fine-grain order ([`jdmg::fine_rank_keys`]). `--groups host` is
/// resolved collectively in the solve: its ranks keep their own.
#[cfg(feature = "mpi")]
fn fine_rank(a: &SolveArgs, params: &JdParams, rank: usize, size: usize) -> usize {
    match a.groups.as_deref() {
        Some(spec) if spec != "host" => {
            let k = if params.basis.block == 0 {
                params.problem.nev.min(jdmg::params::DEFAULT_BLOCK_CAP)
            } else {
                params.basis.block
            };
            let hierarchical = matches!(a.hierarchical, OnOff::On);
            jdmg::parse_groups(spec, size, k)
                .ok()
                .and_then(|g| jdmg::fine_rank_keys(&g, hierarchical).get(rank).copied())
                .unwrap_or(rank)
        }
        _ => rank,
    }
}

#[cfg(not(feature = "mpi"))]
fn solve_mpi(_a: &SolveArgs, _params: &JdParams) -> Result<(), Fail> {
    Err(Fail::bad(
        "--mpi needs a build with `--features mpi` (cargo build --release -p jdmg-cli --features mpi)",
    ))
}
