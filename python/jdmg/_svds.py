"""``jdmg.svds``: SciPy's ``scipy.sparse.linalg.svds`` on jdmg's two-stage
singular value solver (normal equations, then the augmented matrix)."""

import json as _json
import time as _time

import numpy as _np

from . import _complex, _core
from ._svd_args import _SOLVERS, _SVD_TOL_ZERO, _check_shape_k_ncv


def _rect_arrays(A):
    """(nrows, ncols, indptr, indices, data) of a sparse or dense matrix, or
    None for a LinearOperator."""
    from . import _check_real_dtype, _is_linear_operator, _sparse_module

    sp = _sparse_module()
    if sp is not None and sp.issparse(A):
        _check_real_dtype(A.dtype, "A")
        A = A.tocsr().astype(_np.float64)
        if not A.has_canonical_format:
            A = A.copy()
            A.sum_duplicates()
        m, n = A.shape
        return (
            m,
            n,
            _np.asarray(A.indptr, dtype=_np.int64),
            _np.asarray(A.indices, dtype=_np.int64),
            _np.ascontiguousarray(A.data, dtype=_np.float64),
        )
    if _is_linear_operator(A):
        return None
    a = _np.asarray(A)
    _check_real_dtype(a.dtype, "A")
    if a.ndim != 2:
        raise ValueError(f"A must be a 2-D matrix, got {a.ndim} dimensions")
    a = _np.asarray(a, dtype=_np.float64)
    m, n = a.shape
    nz = a != 0
    indptr = _np.zeros(m + 1, dtype=_np.int64)
    _np.cumsum(nz.sum(axis=1), out=indptr[1:])
    _, cols = _np.nonzero(nz)
    return m, n, indptr, cols.astype(_np.int64), _np.ascontiguousarray(a[nz])


def _apply(op, name, n_in, n_out):
    """f(x, k) for the Rust side: ``op.matmat``/``op.rmatmat`` on (n_in, k)
    blocks (else ``matvec``/``rmatvec`` per column), flat column-major."""
    block = getattr(op, "matmat" if name == "matvec" else "rmatmat", None)
    single = getattr(op, name, None)
    if block is None and single is None:
        raise TypeError(f"A LinearOperator for svds needs {name}")

    def f(x, k):
        X = x.reshape(k, n_in).T
        if block is not None:
            Y = _np.asarray(block(X))
        else:
            Y = _np.column_stack([_np.asarray(single(X[:, j])).reshape(n_out) for j in range(k)])
        if _np.iscomplexobj(Y):
            raise TypeError(f"A.{name} returned complex values")
        Y = Y.reshape(n_out, k)
        return _np.ascontiguousarray(Y.T, dtype=_np.float64).reshape(-1)

    return f


def svds(
    A,
    k=6,
    ncv=None,
    tol=0,
    which="LM",
    v0=None,
    maxiter=None,
    return_singular_vectors=True,
    solver="arpack",
    rng=None,
    options=None,
    *,
    return_stats=False,
):
    """The ``k`` largest (``which='LM'``) or smallest (``'SM'``) singular
    values of the real or complex m x n matrix ``A``, with its singular
    vectors, as ``scipy.sparse.linalg.svds``.

    Complex A: through the real embedding (the real 2m x 2n matrix of A on
    interleaved real and imaginary parts, A's singular values each twice):
    2k triplets of it, then a complex orthonormal basis Q of the span of its
    singular vectors on the smaller side and the SVD of A Q (A^H Q for a wide
    A); the residuals are recomputed. complex64 gives complex64 vectors and
    float32 values (as SciPy); vh is the conjugate transpose of v.

    The two stages of PRIMME_SVDS: the eigenpairs of AᵀA (or AAᵀ, the smaller),
    each to the accuracy its triplet needs where rounding allows, then the
    eigenpairs of the augmented matrix [0 A; Aᵀ 0] for the triplets that
    rounding left short (small singular values). A triplet converges when
    (‖Av − σu‖² + ‖Aᵀu − σv‖²)^½ ≤ tol·‖A‖.

    Parameters
    ----------
    A : scipy.sparse matrix or array, numpy array, or LinearOperator
        Real or complex, any shape. A LinearOperator needs ``matvec`` (or
        ``matmat``) and ``rmatvec`` (or ``rmatmat``: A^H, as SciPy's).
    k : int
        Number of singular triplets, 1 <= k <= min(A.shape).
    ncv : int, optional
        Not used (the eigen-solves size their own bases); checked as SciPy
        does for ``solver='arpack'``.
    tol : float
        The triplet tolerance relative to ‖A‖; 0 (default) means 1e-12.
    which : {'LM', 'SM'}
        Largest or smallest singular values.
    v0 : array, optional
        Not used (jdmg's start vectors come from ``rng``); its shape is
        checked as SciPy does.
    maxiter : int, optional
        Budget: at most ``maxiter * k`` products with A (as many with Aᵀ);
        default 10⁷ products.
    return_singular_vectors : {True, False, 'u', 'vh'}
        As SciPy: (u, s, vh), s alone, or (u, s, None) / (None, s, vh).
    solver : {'arpack', 'propack', 'lobpcg', 'jdmg'}
        Accepted for SciPy's signature; jdmg's solver runs in every case.
    rng : None, int or numpy random generator
        Seed of the start vectors (a generator gives one by drawing from it);
        None is seed 1. The same seed gives the same result.
    options : dict, optional
        Fields of the Rust ``SvdParams`` (``anorm``, ``threads``,
        ``max_products``, ``seed``).
    return_stats : bool
        Also return a dict of counters (products per stage, triplets refined,
        the ‖A‖ used, residuals).

    Returns
    -------
    u : ndarray (m, k)
        Left singular vectors (columns), ordered as ``s``.
    s : ndarray (k,)
        Singular values, ascending (SciPy's order).
    vh : ndarray (k, n)
        Right singular vectors (rows).

    Raises
    ------
    NoConvergence
        The budget ran out, or a complex triplet recovered from the
        embedding missed the tolerance; ``eigenvalues`` holds the converged
        singular values, ``eigenvectors`` None, ``stats`` the counters and
        every triplet reached.
    ValueError, TypeError
        Bad arguments, as SciPy raises them.
    """
    from . import NoConvergence, _is_linear_operator, _seed_of

    t0 = _time.perf_counter()
    if str(solver).lower() not in _SOLVERS:
        raise ValueError(f"solver must be one of {set(_SOLVERS)}.")
    if _complex.is_complex(A):
        # the real path on the real embedding (_complex.py)
        return _complex.svds_complex(
            A, k, ncv, tol, which, v0, maxiter, return_singular_vectors, solver, rng, options, return_stats,
            real_svds=svds,
        )
    A, m, n, k = _check_shape_k_ncv(A, k, ncv)
    if not (tol >= 0 and _np.isfinite(tol)):
        raise ValueError("`tol` must be a non-negative floating point value.")
    tol = float(tol) if tol > 0 else _SVD_TOL_ZERO
    which = str(which).upper()
    if which not in ("LM", "SM"):
        raise ValueError("`which` must be in {'LM', 'SM'}.")
    if v0 is not None:
        v0 = _np.atleast_1d(v0)
        if v0.shape != (min(m, n),):
            raise ValueError(f"`v0` must have shape {(min(m, n),)}.")
    if maxiter is not None and (int(maxiter) != maxiter or maxiter <= 0):
        raise ValueError("`maxiter` must be a positive integer.")
    if return_singular_vectors not in (True, False, "u", "vh"):
        raise ValueError("`return_singular_vectors` must be in {True, False, 'vh', 'u'}.")
    params = {
        "nsv": k,
        "which": "largest" if which == "LM" else "smallest",
        "tol": tol,
        "seed": 1 if rng is None else _seed_of(rng),
    }
    if maxiter is not None:
        params["max_products"] = int(maxiter) * k
    for key, value in (options or {}).items():
        if key in ("nsv", "which", "tol"):
            raise ValueError(f"options: {key!r} is an argument of svds")
        params[key] = value
    vectors = return_singular_vectors is not False
    csr = None if _is_linear_operator(A) else _rect_arrays(A)
    if csr is not None:
        _, _, indptr, indices, data = csr
        if not _np.all(_np.isfinite(data)):
            raise ValueError("A holds NaN or Inf")
        raw = _core.svds(m, n, _json.dumps(params), indptr, indices, data, vectors=vectors)
    else:
        raw = _core.svds(
            m,
            n,
            _json.dumps(params),
            matvec=_apply(A, "matvec", n, m),
            rmatvec=_apply(A, "rmatvec", m, n),
            vectors=vectors,
        )
    status, s, u, v, converged, rnorms, stats_json = raw
    stats = _json.loads(stats_json)
    stats["residual_norms"] = _np.asarray(rnorms)
    stats["converged"] = _np.asarray(converged)
    stats["elapsed_seconds"] = _time.perf_counter() - t0
    order = _np.argsort(s, kind="stable")
    s = _np.asarray(s)[order]
    if status != 0:
        ok = _np.asarray(converged)[order]
        raise NoConvergence(
            f"jdmg.svds: {int(ok.sum())} of {k} singular triplets converged "
            f"after {stats['products']} products with A",
            s[ok],
            None,
            stats,
        )
    u = _np.asarray(u).reshape(k, m).T[:, order] if vectors else None
    vh = _np.asarray(v).reshape(k, n)[order] if vectors else None
    if return_singular_vectors == "u":
        vh = None
    elif return_singular_vectors == "vh":
        u = None
    out = (u, s, vh) if vectors else s
    if return_stats:
        return (*out, stats) if vectors else (out, stats)
    return out
