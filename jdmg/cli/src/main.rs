//! The `jdmg` command line: `info`, `generate` and `solve`.
//!
//! Exit codes (also in `jdmg --help`): 0 success (converged); 2 bad input or
//! options (missing file, bad file with its line, non-symmetric matrix, nev > n,
//! unknown flag values, unwritable output path, a request for more memory,
//! threads or ranks than the machine has); 3 not converged (partial results are
//! still printed); 141 standard output is a closed pipe (nothing more is
//! printed); 130 / 143 interrupted by SIGINT / SIGTERM (after a last checkpoint
//! with `--checkpoint`). A panic (101) is a bug.

#[cfg(feature = "dense")]
mod complex;
mod dense_cmd;
mod mass;
mod mpi_detect;
mod output;
#[cfg(feature = "dense")]
mod plan_cmd;
mod progress;
mod resources;
mod solve;
mod svd_cmd;
mod vectors;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use matrices::generate::{generate, GenSpec};
use matrices::info::matrix_info;
use matrices::mm::{read_matrix_market, MmHeader};
use matrices::CsrMatrix;

use output::{emit, require_stdout, stdout_error, Fail, EXIT_BAD_INPUT};

const EXIT_CODES: &str = "\
Exit codes:
  0    success (all wanted eigenpairs converged)
  2    bad input or option: missing or malformed file (with its line), non-square or
       non-symmetric matrix, nev > n, unwritable output path (checked before any work),
       a --resume checkpoint that is corrupt or of another matrix, options or rank count,
       or a request the machine cannot meet (memory, with the figure; threads or ranks)
  3    not converged: what converged and the best estimates of the rest are printed
  141  standard output is a closed pipe (e.g. `jdmg solve ... | head`): stops quietly
  130  interrupted by SIGINT (143: SIGTERM); with --checkpoint a last checkpoint is written.
       Under MPI a signal to any rank stops every rank: all print as a serial run and
       exit 130 / 143, which mpirun passes on. A signal to mpirun itself reaches the
       ranks too (they print), but Open MPI's mpirun then exits 1 whatever the ranks
       return, and kills them 1 s later: signal the ranks for the codes above.
A panic (exit 101) is a bug: please report it.

Under mpirun, mpiexec or srun (OpenMPI, MPICH, Slurm), a jdmg built with the `mpi`
feature uses MPI without --mpi. JDMG_MEMORY_LIMIT=BYTES (K/M/G suffixes) caps the
memory jdmg may ask for.";

#[derive(Parser)]
#[command(
    name = "jdmg",
    version,
    about = "Block Jacobi-Davidson eigensolver for large sparse symmetric matrices",
    after_help = EXIT_CODES
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
        /// Output file (written atomically), or `-` for standard output.
        #[arg(short, long, allow_hyphen_values = true)]
        output: PathBuf,
        /// Store only the lower triangle (symmetric storage).
        #[arg(long)]
        symmetric: bool,
    },
    /// Computes eigenpairs of FILE.mtx or of a generated matrix.
    #[command(after_help = EXIT_CODES)]
    Solve(solve::SolveArgs),
    /// Largest or smallest singular triplets of FILE.mtx (any shape) or of a generated matrix.
    #[command(after_help = EXIT_CODES)]
    Svd(svd_cmd::SvdArgs),
    /// Distributed dense LU / QR / GEMM laid out on measured rates (Boudet et al.).
    #[cfg(feature = "dense")]
    Dense(dense_cmd::DenseArgs),
    /// Schedules from processor speeds: malleable task graphs (`dag`), BLR tile allocation (`tiles`).
    #[cfg(feature = "dense")]
    Plan(plan_cmd::PlanArgs),
}

fn main() -> ExitCode {
    resources::return_freed_memory();
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        // usage errors go to stderr with exit 2
        Err(e) if e.use_stderr() => e.exit(),
        // --help and --version go to stdout through the checked writer
        Err(e) => {
            return match emit(&e.render().to_string()) {
                Ok(()) => ExitCode::SUCCESS,
                Err(Fail(code, msg)) => {
                    if !msg.is_empty() {
                        output::note(&format!("jdmg: {msg}"));
                    }
                    ExitCode::from(code)
                }
            }
        }
    };
    let r = match cli.cmd {
        Cmd::Info { file, json } => info(&file, json),
        Cmd::Generate {
            spec,
            output,
            symmetric,
        } => gen_cmd(&spec, &output, symmetric),
        Cmd::Solve(a) => solve::solve_cmd(&a),
        Cmd::Svd(a) => svd_cmd::svd_cmd(&a),
        #[cfg(feature = "dense")]
        Cmd::Dense(a) => dense_cmd::dense_cmd(&a),
        #[cfg(feature = "dense")]
        Cmd::Plan(a) => plan_cmd::plan_cmd(&a),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(Fail(code, msg)) => {
            if !msg.is_empty() {
                output::note(&format!("jdmg: {msg}"));
            }
            ExitCode::from(code)
        }
    }
}

/// Reads a MatrixMarket file (the reader bounds its memory and names the
/// failing line).
fn read(path: &Path) -> Result<(CsrMatrix, MmHeader), Fail> {
    let m = read_matrix_market(path)
        .map_err(|e| Fail(EXIT_BAD_INPUT, format!("{}: {e}", path.display())))?;
    Ok((m.matrix, m.header))
}

fn info(file: &Path, json: bool) -> Result<(), Fail> {
    require_stdout()?;
    if matrices::mm::is_complex_file(file) {
        return emit(&complex::info(file, json)?);
    }
    let (a, h) = read(file)?;
    let inf = matrix_info(&a, Some(&h));
    let mut out = String::new();
    if json {
        let text = serde_json::to_string(&inf).map_err(|e| (EXIT_BAD_INPUT, e))?;
        let _ = writeln!(out, "{text}");
    } else {
        let _ = writeln!(out, "file            {}", file.display());
        let _ = writeln!(out, "size            {} x {}", inf.nrows, inf.ncols);
        let _ = writeln!(
            out,
            "nonzeros        {} stored{}",
            inf.nnz,
            inf.nnz_file
                .map(|f| format!(" ({f} in file)"))
                .unwrap_or_default()
        );
        let _ = writeln!(out, "storage         {}", inf.storage);
        let _ = match inf.max_asymmetry {
            Some(x) => writeln!(
                out,
                "symmetric       {} (max |a_ij - a_ji| = {x:.3e})",
                inf.symmetric
            ),
            None => writeln!(out, "symmetric       {}", inf.symmetric),
        };
        if let (Some(lo), Some(hi)) = (inf.gershgorin_lower, inf.gershgorin_upper) {
            let _ = writeln!(out, "gershgorin      [{lo:.6e}, {hi:.6e}]");
        }
        let _ = writeln!(
            out,
            "row nnz         {} .. {}",
            inf.min_row_nnz, inf.max_row_nnz
        );
        let _ = writeln!(
            out,
            "memory          {:.1} MiB",
            inf.memory_bytes as f64 / (1 << 20) as f64
        );
    }
    emit(&out)
}

/// `jdmg generate SPEC -o OUT`: refuses a matrix that does not fit in memory
/// before generating it; writes OUT atomically (its path checked first), or
/// standard output for `-`.
/// The temporary file that a signal removes (see [`remove_on_signal`]).
static TEMP_FILE: std::sync::OnceLock<std::ffi::CString> = std::sync::OnceLock::new();

extern "C" fn remove_temp_and_exit(sig: libc::c_int) {
    if let Some(p) = TEMP_FILE.get() {
        // SAFETY: unlink and _exit are async-signal-safe; the path was set before
        // the handler was installed and is never changed.
        unsafe { libc::unlink(p.as_ptr()) };
    }
    // SAFETY: as above.
    unsafe { libc::_exit(128 + sig) }
}

/// On SIGINT, SIGTERM or SIGHUP, `tmp` (the file being written) is removed and
/// the process exits 130, 143 or 129: an interrupted `jdmg generate` leaves
/// neither a partial output nor its temporary file.
fn remove_on_signal(tmp: &Path) {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(tmp.as_os_str().as_bytes()) else {
        return;
    };
    if TEMP_FILE.set(c).is_err() {
        return;
    }
    let handler = remove_temp_and_exit as extern "C" fn(libc::c_int) as libc::sighandler_t;
    // SAFETY: the handler only unlinks a fixed path and exits.
    unsafe {
        libc::signal(libc::SIGINT, handler);
        libc::signal(libc::SIGTERM, handler);
        libc::signal(libc::SIGHUP, handler);
    }
}

fn gen_cmd(spec: &str, out: &Path, symmetric: bool) -> Result<(), Fail> {
    let spec: GenSpec = spec.parse().map_err(|e| (EXIT_BAD_INPUT, e))?;
    spec.validate().map_err(|e| (EXIT_BAD_INPUT, e))?;
    let to_stdout = out == Path::new("-");
    if to_stdout {
        require_stdout()?;
    } else {
        output::check_output_path("-o", out)?;
    }
    resources::check_memory(
        &format!("generating {spec}"),
        resources::generated_bytes(&spec),
    )?;
    if !to_stdout {
        if let Ok(Some(tmp)) = matrices::mm::atomic_temp_path(out) {
            remove_on_signal(&tmp);
        }
    }
    let a = generate(&spec).map_err(|e| (EXIT_BAD_INPUT, e))?;
    if to_stdout {
        let w = std::io::BufWriter::new(std::io::stdout().lock());
        matrices::mm::write_coordinate(w, &a, symmetric).map_err(|e| {
            if e.kind() == std::io::ErrorKind::InvalidInput {
                Fail::bad(e.to_string())
            } else {
                stdout_error(e)
            }
        })?;
    } else {
        matrices::mm::write_coordinate_file(out, &a, symmetric)
            .map_err(|e| Fail::bad(format!("{}: {e}", out.display())))?;
        output::note(&format!(
            "wrote {} ({} rows, {} nonzeros)",
            out.display(),
            a.nrows(),
            a.nnz()
        ));
    }
    Ok(())
}
