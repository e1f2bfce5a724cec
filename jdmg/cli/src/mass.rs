//! `jdmg solve --mass M.mtx` and `--mass-generate`: the mass matrix of a
//! generalized problem K x = λ M x (K the FILE or --generate matrix).

use std::path::Path;

use matrices::generate::{generate, FemPart, GenSpec};
use matrices::info::matrix_info;
use matrices::CsrMatrix;

use crate::output::{Fail, EXIT_BAD_INPUT};

/// Reads (`--mass FILE`) or generates (`--mass-generate` with a femNd spec)
/// M, and checks it against K: same size, symmetric (unless
/// `--no-symmetry-check`), positive diagonal. None without either option.
///
/// # Errors
/// Exit 2 with a message naming M.
pub fn load(
    file: Option<&Path>,
    generate_mass: bool,
    spec: Option<&str>,
    k: &CsrMatrix,
    symmetry_check: bool,
) -> Result<Option<(CsrMatrix, String)>, Fail> {
    let (m, source, header) = match (file, generate_mass) {
        (None, false) => return Ok(None),
        (Some(_), true) => {
            return Err(Fail::bad("give --mass FILE or --mass-generate, not both"));
        }
        (Some(f), false) => {
            let (m, h) = crate::read(f)?;
            (m, f.display().to_string(), Some(h))
        }
        (None, true) => {
            let Some(spec) = spec else {
                return Err(Fail::bad(
                    "--mass-generate needs --generate femNd:... (the generator's mass matrix)",
                ));
            };
            let s: GenSpec = spec.parse().map_err(|e| (EXIT_BAD_INPUT, e))?;
            let Some(ms) = s.fem_part(FemPart::Mass) else {
                return Err(Fail::bad(format!(
                    "--mass-generate: {spec} has no mass matrix (fem1d, fem2d, fem3d have)"
                )));
            };
            if s.fem_part(FemPart::Stiffness) != Some(s.clone()) {
                return Err(Fail::bad(format!(
                    "--mass-generate: --generate {spec} is the mass matrix itself; give the stiffness (drop :mass)"
                )));
            }
            (
                generate(&ms).map_err(|e| (EXIT_BAD_INPUT, e))?,
                format!("generated {ms}"),
                None,
            )
        }
    };
    if m.nrows() != m.ncols() || m.nrows() != k.nrows() {
        return Err(Fail::bad(format!(
            "mass matrix {source}: {} x {}, the matrix K is {} x {}: they must have the same size",
            m.nrows(),
            m.ncols(),
            k.nrows(),
            k.ncols()
        )));
    }
    if symmetry_check {
        let inf = matrix_info(&m, header.as_ref());
        if !inf.symmetric {
            return Err(Fail::bad(format!(
                "mass matrix {source}: not symmetric (max |m_ij - m_ji| = {:.3e}, relative {:.3e}); K x = λ M x needs M symmetric positive definite",
                inf.max_asymmetry.unwrap_or(f64::NAN),
                inf.max_asymmetry_rel.unwrap_or(f64::NAN)
            )));
        }
    }
    if let Some((i, d)) = m
        .diagonal()
        .into_iter()
        .enumerate()
        .find(|&(_, d)| d <= 0.0 || d.is_nan())
    {
        return Err(Fail::bad(format!(
            "mass matrix {source}: not positive definite: diagonal entry ({0}, {0}) is {d:e}",
            i + 1
        )));
    }
    Ok(Some((m, source)))
}
