"""The arguments of ``jdmg.svds`` checked as SciPy checks them, shared by the
real path (``_svds.py``) and the complex one (``_complex.py``)."""

import numpy as _np

# tol = 0 (SciPy: machine precision): the triplet test at this tol (1e-13 took
# minutes on the smallest of ill-conditioned matrices, kappa ~ 1e5).
_SVD_TOL_ZERO = 1e-12
_SOLVERS = ("arpack", "propack", "lobpcg", "jdmg")


def _check_shape_k_ncv(A, k, ncv):
    """SciPy's checks of A's shape, k and ncv: (A, m, n, int(k)), A made an
    array when it has no shape; ValueError as SciPy's."""
    shape = getattr(A, "shape", None)
    if shape is None or len(shape) != 2:
        A = _np.asarray(A)
        shape = A.shape
        if A.ndim != 2:
            raise ValueError(f"A must be a 2-D matrix, got {A.ndim} dimensions")
    m, n = (int(x) for x in shape)
    if m * n == 0:
        raise ValueError("`A` must not be empty.")
    if isinstance(k, bool) or int(k) != k or not (0 < k <= min(m, n)):
        raise ValueError("`k` must be an integer satisfying `0 < k <= min(A.shape)`.")
    k = int(k)
    if ncv is not None and (int(ncv) != ncv or not (k < ncv <= min(m, n))):
        raise ValueError("`ncv` must be an integer satisfying `k < ncv <= min(A.shape)`.")
    return A, m, n, k
