//! Complex Hermitian problems in `jdmg solve` and `jdmg info`: a `complex`
//! MatrixMarket file or a generated magnetic Laplacian (`maglap2d:`,
//! `maglap3d:`) is solved as its real embedding in every mode, and the complex
//! pairs are recovered and written ([`jdmg::hermitian`]).

use std::fmt::Write as _;
use std::io::Read;
use std::path::Path;

use faer::c64;
use jdmg::hermitian::{check_hermitian, Recovery};
use jdmg::{JdError, JdParams, Solution};
use matrices::mm::{is_complex_file, read_complex_matrix_market, read_header_bytes};
use matrices::{ComplexCsr, CsrMatrix, MagSpec};

use crate::output::{write_atomic, Fail, EXIT_BAD_INPUT};
use crate::vectors::{load_complex, Vectors};

/// The inputs of `jdmg solve` that decide whether a problem is complex.
pub struct Inputs<'a> {
    pub file: Option<&'a Path>,
    pub generate: Option<&'a str>,
    pub mass: Option<&'a Path>,
    pub mass_generate: bool,
    pub initial: Option<&'a Path>,
    pub deflate: Option<&'a Path>,
}

/// A complex Hermitian pencil (A, or K with M) and where it came from.
pub struct ComplexPencil {
    pub a: ComplexCsr,
    pub m: Option<ComplexCsr>,
    pub source: String,
    /// `--initial` and `--deflate` as blocks of the embedding.
    pub vectors: Vectors,
    /// The complex deflation vectors (n rows, column-major; empty for none).
    pub deflation: Vec<c64>,
}

fn read_complex(path: &Path) -> Result<ComplexCsr, Fail> {
    if is_complex_file(path) {
        read_complex_matrix_market(path)
            .map(|m| m.matrix)
            .map_err(|e| Fail(EXIT_BAD_INPUT, format!("{}: {e}", path.display())))
    } else {
        let (m, _) = crate::read(path)?;
        Ok(ComplexCsr::from_real(&m))
    }
}

/// The complex pencil of `jdmg solve`'s inputs, or None for a real
/// problem. A real `--mass` file is taken as a complex M with zero imaginary
/// part.
///
/// # Errors
/// Exit 2: an unreadable or non-Hermitian matrix (with `check`), a bad
/// `maglap` spec, `--mass-generate` (no mass generator for these), or start
/// and deflation vectors (`--initial`, `--deflate`) that are not arrays of n
/// rows of finite complex (or real) numbers.
pub fn load(args: &Inputs<'_>, check: bool) -> Result<Option<ComplexPencil>, Fail> {
    let (a, source) = match (args.file, args.generate) {
        (Some(f), None) if is_complex_file(f) => (read_complex(f)?, f.display().to_string()),
        (None, Some(g)) if g.starts_with("maglap") => {
            let spec: MagSpec = g.parse().map_err(|e| (EXIT_BAD_INPUT, e))?;
            let a = spec.build().map_err(|e| (EXIT_BAD_INPUT, e))?;
            (a, format!("generated {spec}"))
        }
        _ => return Ok(None),
    };
    if args.mass_generate {
        return Err(Fail::bad(
            "--mass-generate: no mass matrix generator for a complex problem (give --mass FILE)",
        ));
    }
    let m = args.mass.map(read_complex).transpose()?;
    if check {
        check_hermitian(&a, m.as_ref()).map_err(|e| Fail::bad(format!("{source}: {e}")))?;
    }
    let source = match args.mass {
        Some(p) => format!("{source} with mass {}", p.display()),
        None => source,
    };
    let (vectors, deflation) = load_complex(args.initial, args.deflate, a.nrows())?;
    Ok(Some(ComplexPencil {
        a,
        m,
        source,
        vectors,
        deflation,
    }))
}

impl ComplexPencil {
    /// The real embeddings of A and M, solved in place of them.
    ///
    /// # Errors
    /// Exit 2 when twice the order does not fit 32-bit indices.
    pub fn embeddings(&self) -> Result<(CsrMatrix, Option<CsrMatrix>), Fail> {
        let embed = |x: &ComplexCsr| x.real_embedding().map_err(|e| (EXIT_BAD_INPUT, e));
        Ok((embed(&self.a)?, self.m.as_ref().map(embed).transpose()?))
    }

    /// The settings of the embedded solve (twice the pairs and sizes).
    pub fn params(&self, p: &JdParams) -> JdParams {
        jdmg::hermitian::embedded_params(p)
    }

    /// The complex pairs of the embedded solve `res` (whole vectors), as a
    /// solution with interleaved complex eigenvectors.
    pub fn recover(
        &self,
        res: Result<Solution, JdError>,
        params: &JdParams,
    ) -> Result<Solution, JdError> {
        let rec = Recovery {
            a: &self.a,
            m: self.m.as_ref(),
            deflation: &self.deflation,
        };
        Ok(rec.recover(res?, params)?.solution)
    }

    /// Writes the complex eigenvectors of `sol` (interleaved) as a
    /// MatrixMarket `array complex general` of n rows.
    pub fn write_vectors(&self, path: &Path, sol: &Solution) -> Result<(), Fail> {
        let x = matrices::complex::deinterleave(&sol.eigenvectors);
        let mut buf = Vec::new();
        matrices::mm::write_complex_array(&mut buf, self.a.nrows(), sol.eigenvalues.len(), &x)
            .map_err(|e| Fail::bad(format!("--eigenvectors {}: {e}", path.display())))?;
        write_atomic(path, &buf)
    }
}

/// `jdmg info` of a complex file: size, entries, storage and how far from
/// Hermitian.
pub fn info(file: &Path, json: bool) -> Result<String, Fail> {
    let mut head = Vec::new();
    let _ = std::fs::File::open(file).and_then(|f| f.take(1 << 16).read_to_end(&mut head));
    let h = read_header_bytes(&head)
        .map_err(|e| Fail(EXIT_BAD_INPUT, format!("{}: {e}", file.display())))?;
    let a = read_complex(file)?;
    let defect = a.hermitian_defect();
    let hermitian = defect <= jdmg::hermitian::HERMITIAN_TOL;
    let mut out = String::new();
    if json {
        let v = serde_json::json!({
            "file": file.display().to_string(),
            "field": "complex",
            "storage": h.symmetry.as_str(),
            "nrows": a.nrows(),
            "ncols": a.ncols(),
            "nnz": a.nnz(),
            "hermitian": hermitian,
            "hermitian_defect": defect,
            "norm1": a.norm1(),
        });
        let _ = writeln!(out, "{v}");
    } else {
        let _ = writeln!(out, "file            {}", file.display());
        let _ = writeln!(out, "size            {} x {}", a.nrows(), a.ncols());
        let _ = writeln!(out, "nonzeros        {} stored", a.nnz());
        let _ = writeln!(
            out,
            "field           complex, {} storage",
            h.symmetry.as_str()
        );
        let _ = writeln!(
            out,
            "hermitian       {} (max |a_ij - conj(a_ji)| = {defect:.3e} of the largest entry)",
            if hermitian { "yes" } else { "no" }
        );
        let _ = writeln!(out, "norm1           {:.6e}", a.norm1());
    }
    Ok(out)
}
