//! The symmetry check of explicit matrices made by the drivers before a solve
//! ([`crate::ProblemSettings::check_symmetry`]): jdmg solves symmetric problems, and a
//! non-symmetric matrix would run up to the matvec budget and return garbage.

use matrices::info::matrix_info;
use matrices::CsrMatrix;

use crate::error::JdError;
use crate::params::JdParams;

pub use crate::error::SYMMETRY_TOL;

/// `Err(JdError::NotSymmetric)` when `a` is square and its relative asymmetry
/// exceeds [`SYMMETRY_TOL`], unless `params.check_symmetry` is false. One
/// parallel pass over the nonzeros (a binary search in the transposed row).
///
/// # Errors
/// [`JdError::NotSymmetric`] with the absolute and relative asymmetry.
pub fn check_symmetric(a: &CsrMatrix, params: &JdParams) -> Result<(), JdError> {
    if !params.problem.check_symmetry || a.nrows() != a.ncols() {
        return Ok(());
    }
    let info = matrix_info(a, None);
    match (info.max_asymmetry, info.max_asymmetry_rel) {
        (Some(abs), Some(rel)) if rel > SYMMETRY_TOL || !rel.is_finite() => {
            Err(JdError::NotSymmetric {
                max_asymmetry: abs,
                relative: rel,
            })
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::ProblemSettings;

    #[test]
    fn tolerates_rounding_and_refuses_asymmetry() {
        let a = CsrMatrix::from_triplets(
            2,
            2,
            &[(0, 0, 2.0), (0, 1, 1.0), (1, 0, 1.0 + 1e-15), (1, 1, 2.0)],
        )
        .unwrap();
        assert!(check_symmetric(&a, &JdParams::default()).is_ok());
        let b = CsrMatrix::from_triplets(2, 2, &[(0, 0, 2.0), (0, 1, 1.0), (1, 1, 2.0)]).unwrap();
        match check_symmetric(&b, &JdParams::default()) {
            Err(JdError::NotSymmetric {
                max_asymmetry,
                relative,
            }) => {
                assert_eq!(max_asymmetry, 1.0);
                assert_eq!(relative, 0.5);
            }
            other => panic!("expected NotSymmetric, got {other:?}"),
        }
        let off = JdParams {
            problem: ProblemSettings {
                check_symmetry: false,
                ..Default::default()
            },
            ..JdParams::default()
        };
        assert!(check_symmetric(&b, &off).is_ok());
    }
}
