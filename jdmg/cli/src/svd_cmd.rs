//! `jdmg svd`: the largest or smallest singular triplets of a rectangular
//! matrix (a MatrixMarket file or a `grad2d`/`grad3d` generator), by
//! [`jdmg::svds`].

use std::fmt::Write as _;
use std::path::PathBuf;

use clap::{Args, ValueEnum};
use jdmg::{svds, SvdParams, SvdSolution, SvdWhich};
use matrices::rectangular::GradSpec;
use matrices::CsrMatrix;
use serde::Serialize;

use crate::output::{self, emit, require_stdout, Fail, EXIT_BAD_INPUT, EXIT_NOT_CONVERGED};

/// Which end, on the command line.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum WhichArg {
    /// The largest singular values.
    #[value(alias = "LM")]
    Largest,
    /// The smallest singular values.
    #[value(alias = "SM")]
    Smallest,
}

/// Arguments of `jdmg svd`.
#[derive(Args, Debug)]
pub struct SvdArgs {
    /// MatrixMarket file (any shape, general storage; real or complex), or a generator with
    /// known singular values: grad2d:N[xM][:alpha], grad3d:N[xMxK][:alpha]
    /// (the grid graph's gradient stacked over alpha·I).
    pub input: String,
    /// Number of singular triplets.
    #[arg(long, short = 'k', default_value_t = 6)]
    pub nsv: usize,
    /// Which end (SciPy's LM and SM are aliases).
    #[arg(long, value_enum, default_value_t = WhichArg::Largest, ignore_case = true)]
    pub which: WhichArg,
    /// Tolerance: (‖Av − σu‖² + ‖Aᵀu − σv‖²)^½ ≤ tol·‖A‖.
    #[arg(long, default_value_t = 1e-8)]
    pub tol: f64,
    /// ‖A‖₂ if known (default: estimated).
    #[arg(long)]
    pub anorm: Option<f64>,
    /// Seed of the start vectors.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Block size of stage 1 (0: min(nsv, 8)).
    #[arg(long, default_value_t = 0)]
    pub block: usize,
    /// Budget of products with A.
    #[arg(long, default_value_t = 10_000_000)]
    pub max_products: u64,
    /// Print one JSON object (values, residuals, counters) instead of text.
    #[arg(long)]
    pub json: bool,
    /// Also print the counters of each stage.
    #[arg(long, short = 'v')]
    pub verbose: bool,
    /// Write U and V (column-major, one value per line; "re im" for a complex
    /// matrix) to PREFIX.u and PREFIX.v.
    #[arg(long, value_name = "PREFIX")]
    pub vectors: Option<PathBuf>,
}

#[derive(Serialize)]
struct Report<'a> {
    input: &'a str,
    which: SvdWhich,
    tol: f64,
    converged_all: bool,
    #[serde(flatten)]
    solution: &'a SvdSolution,
}

/// The matrix of `jdmg svd`: real, or complex (solved on its real embedding).
enum Input {
    Real(CsrMatrix),
    Complex(matrices::ComplexCsr),
}

/// Loads the matrix of `input`: a generator spec or a file (a `complex`
/// MatrixMarket file gives a complex matrix).
fn load(input: &str) -> Result<Input, Fail> {
    if input.starts_with("grad2d:") || input.starts_with("grad3d:") {
        let g = GradSpec::parse(input).map_err(|e| (EXIT_BAD_INPUT, e))?;
        return Ok(Input::Real(g.matrix()));
    }
    let path = std::path::Path::new(input);
    if matrices::mm::is_complex_file(path) {
        let m = matrices::mm::read_complex_matrix_market(path)
            .map_err(|e| Fail::bad(format!("{input}: {e}")))?;
        return Ok(Input::Complex(m.matrix));
    }
    let m =
        matrices::mm::read_matrix_market(path).map_err(|e| Fail::bad(format!("{input}: {e}")))?;
    Ok(Input::Real(m.matrix))
}

/// Runs `jdmg svd`. Exit 0 when every triplet converged, 3 (with the
/// triplets reached printed) when not, 2 for bad input.
pub fn svd_cmd(a: &SvdArgs) -> Result<(), Fail> {
    require_stdout()?;
    let vectors = a.vectors.as_ref().map(|p| {
        let with = |ext: &str| PathBuf::from(format!("{}.{ext}", p.display()));
        (with("u"), with("v"))
    });
    if let Some((pu, pv)) = &vectors {
        output::check_output_path("--vectors", pu)?;
        output::check_output_path("--vectors", pv)?;
    }
    let matrix = load(&a.input)?;
    let params = SvdParams {
        nsv: a.nsv,
        which: match a.which {
            WhichArg::Largest => SvdWhich::Largest,
            WhichArg::Smallest => SvdWhich::Smallest,
        },
        tol: a.tol,
        anorm: a.anorm,
        seed: a.seed,
        max_products: a.max_products,
        block: a.block,
        ..SvdParams::default()
    };
    let (sol, complex) = match &matrix {
        Input::Real(m) => (svds(m, &params), false),
        Input::Complex(m) => (jdmg::svds_complex(m, &params), true),
    };
    let sol = sol.map_err(|e| Fail::bad(e.to_string()))?;
    let converged = sol.is_converged();
    if let Some((pu, pv)) = &vectors {
        write_column_major(pu, &sol.u, complex)?;
        write_column_major(pv, &sol.v, complex)?;
    }
    let text = if a.json {
        let r = Report {
            input: &a.input,
            which: params.which,
            tol: a.tol,
            converged_all: converged,
            solution: &sol,
        };
        serde_json::to_string(&r).map_err(|e| (EXIT_BAD_INPUT, e))? + "\n"
    } else {
        text_report(&sol, &params, a.verbose)
    };
    emit(&text)?;
    if converged {
        Ok(())
    } else {
        Err(Fail(EXIT_NOT_CONVERGED, String::new()))
    }
}

/// One value per line, column-major; complex vectors (interleaved) as
/// "re im" per line.
fn write_column_major(path: &std::path::Path, x: &[f64], complex: bool) -> Result<(), Fail> {
    let mut s = String::with_capacity(x.len() * 24);
    if complex {
        for z in x.chunks_exact(2) {
            let _ = writeln!(s, "{:.17e} {:.17e}", z[0], z[1]);
        }
    } else {
        for v in x {
            let _ = writeln!(s, "{v:.17e}");
        }
    }
    output::write_atomic(path, s.as_bytes())
}

fn text_report(s: &SvdSolution, p: &SvdParams, verbose: bool) -> String {
    let mut out = String::new();
    let end = match p.which {
        SvdWhich::Largest => "largest",
        SvdWhich::Smallest => "smallest",
    };
    let _ = writeln!(
        out,
        "{} {end} singular values of a {} x {} matrix, tol {:e}: (‖Av−σu‖² + ‖Aᵀu−σv‖²)^½ ≤ tol·‖A‖ = {:.3e}",
        p.nsv,
        s.nrows,
        s.ncols,
        p.tol,
        p.tol * s.stats.anorm
    );
    let _ = writeln!(
        out,
        "{:>4}  {:>24}  {:>10}  converged",
        "j", "sigma", "residual"
    );
    for (j, ((v, r), c)) in s
        .values
        .iter()
        .zip(&s.residual_norms)
        .zip(&s.converged)
        .enumerate()
    {
        let _ = writeln!(out, "{j:>4}  {v:>24.16e}  {r:>10.3e}  {c}");
    }
    let st = &s.stats;
    let _ = writeln!(
        out,
        "{} of {} converged in {:.3} s: {} products with A and as many with Aᵀ",
        s.nconverged(),
        s.values.len(),
        st.wall_seconds,
        st.products
    );
    if verbose {
        let _ = writeln!(
            out,
            "‖A‖ {:.6e}; stage 1 ({}) {} products; stage 2 (augmented) {} products, {} triplets refined; ‖A‖ estimate {} products; {} outer iterations",
            st.anorm, st.normal_side, st.stage1_products, st.stage2_products, st.refined, st.norm_products, st.outer_iterations
        );
    }
    out
}
