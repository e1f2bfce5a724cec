"""Complex Hermitian ``eigsh`` and complex ``svds`` through the real embedding.

A complex m x n matrix A acts on x = a + ib as the real 2m x 2n matrix whose
2x2 block (i, j) is [[Re a_ij, -Im a_ij], [Im a_ij, Re a_ij]], on the
interleaved vector w (w[2j] = Re x_j, w[2j+1] = Im x_j: numpy's complex128
memory layout, so ``x.view(float64)`` is w). For Hermitian A the embedding is
real symmetric with A's eigenvalues, each twice (x and ix); for any A its
singular values are A's, each twice, and the embedding of A^H is its
transpose. The real solvers run on the embedding with 2k pairs; the complex
pairs come back by a Rayleigh-Ritz step on the complex span of the real
vectors (``_orthonormal_span``), and their residuals are recomputed.
"""

import math as _math
import time as _time
import warnings as _warnings

import numpy as _np

# Gram eigenvalues of the complex views of orthonormal real vectors: 2 for a
# pair (x, ix), 1 for a lone x, 0 for the redundant direction, ~tol^2 noise.
_GRAM_KEEP = 0.25


def dtype_of(x):
    """The numpy dtype of a matrix, array or LinearOperator; None when unknown."""
    if x is None:
        return None
    dt = getattr(x, "dtype", None)
    if dt is None:
        from . import _is_linear_operator

        if callable(x) or _is_linear_operator(x):
            return None
        try:
            dt = _np.asarray(x).dtype
        except (TypeError, ValueError):
            return None
    try:
        return _np.dtype(dt)
    except TypeError:
        return None


def is_complex(x):
    dt = dtype_of(x)
    return dt is not None and _np.issubdtype(dt, _np.complexfloating)


# --- views and embeddings ----------------------------------------------------


def to_complex(W):
    """Interleaved real (2n,) or (2n, p) -> complex128 (n,) or (n, p)."""
    W = _np.asarray(W, dtype=_np.float64)
    if W.ndim == 1:
        return _np.ascontiguousarray(W).view(_np.complex128)
    return _np.ascontiguousarray(W.T).view(_np.complex128).T


def to_real(X):
    """complex (n,) or (n, p) -> interleaved real (2n,) or (2n, p)."""
    X = _np.asarray(X, dtype=_np.complex128)
    if X.ndim == 1:
        return _np.ascontiguousarray(X).view(_np.float64)
    return _np.ascontiguousarray(X.T).view(_np.float64).T


def _is_matrix(x):
    from . import _is_linear_operator, _sparse_module

    sp = _sparse_module()
    if sp is not None and sp.issparse(x):
        return True
    return not (_is_linear_operator(x) or callable(x))


def embed_matrix(a):
    """The real embedding of a complex matrix: a dense ndarray for a dense
    one, else a CSR matrix; the entries that are exactly zero (the imaginary
    parts of real entries) left out, so a Hermitian A gives a symmetric one."""
    from . import _sparse_module

    sp = _sparse_module()
    if sp is not None and sp.issparse(a):
        c = sp.coo_matrix(a)
        c.sum_duplicates()
        m, n = c.shape
        r = c.row.astype(_np.int64)
        j = c.col.astype(_np.int64)
        re = _np.asarray(c.data.real, dtype=_np.float64)
        im = _np.asarray(c.data.imag, dtype=_np.float64)
        rows = _np.concatenate([2 * r, 2 * r + 1, 2 * r, 2 * r + 1])
        cols = _np.concatenate([2 * j, 2 * j + 1, 2 * j + 1, 2 * j])
        vals = _np.concatenate([re, re, -im, im])
        keep = vals != 0
        return sp.csr_matrix((vals[keep], (rows[keep], cols[keep])), shape=(2 * m, 2 * n))
    a = _np.asarray(a)
    m, n = a.shape
    e = _np.empty((m, 2, n, 2))
    e[:, 0, :, 0] = a.real
    e[:, 0, :, 1] = -a.imag
    e[:, 1, :, 0] = a.imag
    e[:, 1, :, 1] = a.real
    return e.reshape(2 * m, 2 * n)


def applier(op, n_in, n_out, adjoint=False):
    """X (n_in, p) complex -> op @ X (op^H @ X when ``adjoint``), complex128
    (n_out, p). A real operator is applied to the real and imaginary parts."""
    from . import _sparse_module

    sp = _sparse_module()
    if _is_matrix(op):
        mat = op if (sp is not None and sp.issparse(op)) else _np.asarray(op)
        if adjoint:
            mat = mat.conj().T
            if sp is not None and sp.issparse(mat):
                mat = mat.tocsr()

        def raw(X):
            return mat @ X

        real_op = not is_complex(mat)
    else:
        mm = getattr(op, "rmatmat" if adjoint else "matmat", None)
        mv = getattr(op, "rmatvec" if adjoint else "matvec", None)
        if mm is not None:
            raw = mm
        elif mv is not None:

            def raw(X):
                return _np.column_stack([_np.asarray(mv(X[:, j])).reshape(n_out) for j in range(X.shape[1])])

        elif callable(op) and not adjoint:
            raw = op  # lobpcg's convention: a callable on (n, p) blocks
        else:
            raise TypeError(f"the operator needs {'rmatvec' if adjoint else 'matvec'}")
        dt = dtype_of(op)
        real_op = dt is not None and not _np.issubdtype(dt, _np.complexfloating)

    def dense(Y, p):
        if sp is not None and sp.issparse(Y):
            Y = Y.toarray()
        Y = _np.asarray(Y)
        if Y.size != n_out * p:
            raise ValueError(f"the operator returned shape {Y.shape} for a block of shape {(n_in, p)}")
        return Y.reshape(n_out, p)

    def f(X):
        X = _np.asarray(X, dtype=_np.complex128)
        p = X.shape[1]
        if real_op:  # a real operator may not take complex vectors
            Y = dense(raw(_np.hstack([X.real, X.imag])), 2 * p)
            return Y[:, :p] + 1j * Y[:, p:]
        return dense(raw(X), p).astype(_np.complex128, copy=False)

    return f


class Embedded:
    """The real 2m x 2n operator of a complex one (forward f, adjoint g on
    complex blocks), with SciPy's LinearOperator methods."""

    def __init__(self, shape, forward, adjoint=None):
        self.shape = (2 * shape[0], 2 * shape[1])
        self.dtype = _np.dtype(_np.float64)
        self._f, self._g = forward, adjoint

    def _run(self, fun, W):
        W = _np.asarray(W, dtype=_np.float64)
        if W.ndim == 1:
            return to_real(fun(to_complex(W)[:, None])[:, 0])
        return to_real(fun(to_complex(W)))

    def matmat(self, W):
        return self._run(self._f, W)

    def matvec(self, w):
        return self._run(self._f, _np.asarray(w).reshape(-1))

    def rmatmat(self, W):
        if self._g is None:
            raise TypeError("no adjoint")
        return self._run(self._g, W)

    def rmatvec(self, w):
        return self.rmatmat(_np.asarray(w).reshape(-1))

    def __call__(self, W):  # as a preconditioner callable
        return self.matmat(W)


def embed(op, shape, adjoint=False):
    """The real embedding of a complex matrix (kept a matrix) or operator."""
    if _is_matrix(op):
        return embed_matrix(op)
    m, n = shape
    return Embedded(shape, applier(op, n, m), applier(op, m, n, adjoint=True) if adjoint else None)


def _hermitian_check(a, what):
    """ValueError when max |a_ij - conj(a_ji)| > 1e-12 max |a_ij| (the rule of
    the real symmetry check); returns the matrix, made exactly Hermitian (the
    embedding then exactly symmetric) when it is so only to rounding."""
    from . import _sparse_module

    sp = _sparse_module()
    if sp is not None and sp.issparse(a):
        d = (a - a.conj().T).tocoo()
        gap = float(_np.abs(d.data).max(initial=0.0))
        scale = float(_np.abs(a.data).max(initial=0.0)) if a.nnz else 0.0
    else:
        a = _np.asarray(a)
        gap = float(_np.abs(a - a.conj().T).max(initial=0.0))
        scale = float(_np.abs(a).max(initial=0.0))
    if not _np.isfinite(gap) or not _np.isfinite(scale):
        raise ValueError(f"{what} holds NaN or Inf")
    if gap > 1e-12 * max(scale, 1e-300):
        raise ValueError(
            f"{what} is not Hermitian: max |a_ij - conj(a_ji)| = {gap:.3e}, relative "
            f"{gap / max(scale, 1e-300):.3e} (above 1e-12); eigsh solves Hermitian problems"
        )
    if gap > 0:
        a = (a + a.conj().T) / 2
    return a


def _square(x, what, n=None):
    shape = tuple(getattr(x, "shape", ()))
    if len(shape) != 2 or shape[0] != shape[1]:
        raise ValueError(f"{what} must be square, got shape {shape}")
    if n is not None and shape[0] != n:
        raise ValueError(f"{what} has shape {shape}, A {(n, n)}")
    if shape[0] == 0:
        raise ValueError(f"{what} is empty")
    return int(shape[0])


def _out_dtypes(*ops):
    """(complex, real) output dtypes: single precision when every operand is."""
    dts = [dtype_of(x) for x in ops if x is not None]
    if dts and all(d is not None and d in (_np.dtype(_np.complex64), _np.dtype(_np.float32)) for d in dts):
        return _np.complex64, _np.float32
    return _np.complex128, _np.float64


def _start(v, n, what, pairs=False):
    """Complex start (or deflation) vectors (n,) or (n, p) as interleaved real
    ones; with ``pairs``, x and ix for each column."""
    v = _np.asarray(v)
    if v.ndim not in (1, 2) or v.shape[0] != n:
        raise ValueError(f"{what} must have shape ({n},) or ({n}, p), got {v.shape}")
    v = v.astype(_np.complex128)
    if not pairs:
        return to_real(v)
    v = v[:, None] if v.ndim == 1 else v
    return to_real(_np.hstack([v, 1j * v]))


# --- recovery -----------------------------------------------------------------


def _orthonormal_span(X, MX):
    """C (p, r) with Q = X C orthonormal (Q^H M Q = I) spanning the complex
    span of X's columns: the Gram eigenvectors with eigenvalue above 0.25,
    scaled by mu^(-1/2)."""
    G = X.conj().T @ MX
    G = (G + G.conj().T) / 2
    mu, U = _np.linalg.eigh(G)
    keep = mu > _GRAM_KEEP
    return U[:, keep] / _np.sqrt(mu[keep])


def _pick(k, which, nu):
    """Indices of the k eigenvalues that ``which`` selects on their
    (transformed) values ``nu``, as the real path selects."""
    from . import _score

    if which == "BE":
        hi = (k + 1) // 2
        top = _np.argsort(-nu, kind="stable")[:hi]
        rest = _np.setdiff1d(_np.arange(len(nu)), top)
        low = rest[_np.argsort(nu[rest], kind="stable")[: k - hi]]
        return _np.concatenate([top, low])
    return _np.argsort(-_score(which, nu), kind="stable")[:k]


def _recover_eig(W, lam_real, apply_a, apply_m):
    """Complex eigenpairs from real eigenvectors W (2n, p) of the embedding
    (eigenvalues lam_real): (theta, Z, residual norms, residual norms of the
    real vectors themselves), theta ascending."""
    X = to_complex(W)
    AX = apply_a(X)
    MX = X if apply_m is None else apply_m(X)
    res_real = _np.linalg.norm(AX - MX * lam_real, axis=0)
    C = _orthonormal_span(X, MX)
    Q, AQ, MQ = X @ C, AX @ C, MX @ C
    H = Q.conj().T @ AQ
    theta, Y = _np.linalg.eigh((H + H.conj().T) / 2)
    Z = Q @ Y
    res = _np.linalg.norm(AQ @ Y - (MQ @ Y) * theta, axis=0)
    return theta, Z, res, res_real


def eigsh_hermitian(A, k, M, sigma, which, v0, ncv, maxiter, tol, return_eigenvectors,
                    Minv, OPinv, mode, rng, *, X0, lock, precond, block, method, maxits,
                    threads, maxmatvecs, conv, seed, return_stats, subset_by_value,
                    subset_by_index, options):
    """``jdmg.eigsh`` for complex Hermitian A (or M): the real path on the
    embedding with 2k pairs, then Rayleigh-Ritz on the complex span."""
    from . import (
        _MODES, _TOL_ZERO, _WHICH, JdmgError, NoConvergence, _dense_eigh, _nu, _sparse_module, _transform, eigsh,
    )

    t0 = _time.perf_counter()
    sp = _sparse_module()
    if mode not in _MODES:
        raise ValueError(f"mode must be one of {', '.join(_MODES)}, got {mode!r}")
    if mode == "buckling" and sigma is not None:
        raise ValueError(
            "mode='buckling' cannot be used with a complex matrix (as SciPy): its "
            "eigenvectors are A-orthonormal, which the complex recovery does not give"
        )
    if not isinstance(which, str) or which.upper() not in _WHICH:
        raise ValueError(f"which must be one of {', '.join(_WHICH)}, got {which!r}")
    which = which.upper()
    if isinstance(k, bool) or not isinstance(k, (int, _np.integer)):
        raise TypeError(f"k must be an integer, got {k!r}")
    k = int(k)
    if k <= 0:
        raise ValueError(f"k must be greater than 0, got {k}")
    if not hasattr(A, "shape") and _is_matrix(A):
        A = _np.asarray(A)
    if not hasattr(A, "shape"):
        raise TypeError("A must be a matrix, a sparse matrix or a LinearOperator")
    n = _square(A, "A")
    if M is not None:
        if not hasattr(M, "shape") and _is_matrix(M):
            M = _np.asarray(M)
        if not hasattr(M, "shape"):
            raise TypeError("M must be a matrix, a sparse matrix or a LinearOperator")
        _square(M, "M", n)
    if Minv is not None and M is None:
        raise ValueError("Minv is used only with M")
    zc, zr = _out_dtypes(A, M)
    a_mat, m_mat = _is_matrix(A), M is not None and _is_matrix(M)
    if a_mat:
        A = _hermitian_check(A, "A")
    if m_mat:
        M = _hermitian_check(M, "M")
    if sigma is not None:
        if _np.iscomplexobj(sigma):
            if complex(sigma).imag != 0:
                raise TypeError("sigma must be real: the eigenvalues of a Hermitian problem are")
            sigma = complex(sigma).real
        sigma = float(sigma)

    subset = subset_by_value is not None or subset_by_index is not None
    if k >= n and not subset:
        dense_a = a_mat and not (sp is not None and sp.issparse(A))
        dense_m = M is None or (m_mat and not (sp is not None and sp.issparse(M)))
        if dense_a and dense_m:  # SciPy's dense fallback, on the complex matrices
            _warnings.warn(
                "k >= N for N * N square matrix. Attempting to use scipy.linalg.eigh instead.",
                RuntimeWarning,
                stacklevel=3,
            )
            out = _dense_eigh(A, M, return_eigenvectors, return_stats, t0)
            out = out if isinstance(out, tuple) else (out,)
            w = out[0].astype(zr)
            rest = (out[1].astype(zc),) if return_eigenvectors else ()
            res = (w,) + rest + out[1 + len(rest):]
            return res if len(res) > 1 else res[0]
        if k > n:
            raise TypeError(
                f"k = {k} exceeds n = {n}: SciPy's dense fallback for k >= n takes no sparse "
                "matrix or LinearOperator (use k <= n, or a dense A)"
            )
    if ncv is not None:
        ncv = min(int(ncv), n)
        if not (k < ncv <= n or k == ncv == n):
            raise ValueError(f"ncv must be k < ncv <= n, got ncv = {ncv} (k = {k}, n = {n})")
        ncv = 2 * ncv
    if subset_by_index is not None:
        try:
            i, j = (int(x) for x in subset_by_index)
        except (TypeError, ValueError):
            raise ValueError(f"subset_by_index must be a pair of integers (i, j), got {subset_by_index!r}") from None
        if not (0 <= i <= j < n):
            raise ValueError(f"subset_by_index must have 0 <= i <= j < n = {n}, got {subset_by_index!r}")
        subset_by_index = (2 * i, 2 * j + 1)
    for op, what in ((OPinv, "OPinv"), (Minv, "Minv"), (precond, "precond")):
        if op is not None and not isinstance(op, str) and hasattr(op, "shape") and tuple(op.shape) != (n, n):
            raise ValueError(f"{what} has shape {tuple(op.shape)}, A {(n, n)}")

    # --- the real solve on the embedding -------------------------------------
    ea = embed(A, (n, n))
    em = None if M is None else embed(M, (n, n))
    ew = lambda op: None if op is None else embed(op, (n, n))  # noqa: E731
    real_kw = dict(
        X0=None if X0 is None else _start(X0, n, "X0"),
        lock=None if lock is None else _start(lock, n, "lock", pairs=True),
        precond=precond if precond is None or isinstance(precond, str) else Embedded((n, n), applier(precond, n, n)),
        block=block, method=method, maxits=maxits, threads=threads, maxmatvecs=maxmatvecs,
        conv=conv, seed=seed, return_stats=True, subset_by_value=subset_by_value,
        subset_by_index=subset_by_index, **options,
    )
    apply_a = applier(A, n, n)
    apply_m = None if M is None else applier(M, n, n)
    w0 = None if v0 is None else _start(v0, n, "v0")

    def solve(shift, wh):
        return eigsh(ea, 2 * k, em, shift, wh, w0, ncv, maxiter, tol, True, ew(Minv), ew(OPinv), mode, rng, **real_kw)

    failed, inverted = None, sigma is not None
    try:
        if which == "SM" and sigma is None and m_mat and a_mat and not subset:
            inverted = True
            # with M, the real path finds the eigenvalues nearest 0 by interior
            # Jacobi-Davidson, which stalls on the doubled ones of the embedding:
            # shift-and-invert at 0 (as it does without M), unless A is singular
            try:
                w_real, W, stats = solve(0.0, "LM")
            except JdmgError:
                inverted = False
                w_real, W, stats = solve(None, "SM")
        else:
            w_real, W, stats = solve(sigma, which)
    except NoConvergence as e:
        failed = e
        w_real, W, stats = _np.asarray(e.eigenvalues), e.eigenvectors, e.stats
        if W is None:
            W = _np.zeros((2 * n, 0))

    # --- recovery ---------------------------------------------------------------
    theta, Z, res, res_real = _recover_eig(W, w_real, apply_a, apply_m)
    if subset:
        sel = _np.arange(len(theta))
    else:
        nu = theta if sigma is None else _nu(theta, *_transform(mode, sigma))
        sel = _pick(k, which, nu)
    sel = sel[_np.argsort(theta[sel], kind="stable")]
    theta, Z, res = theta[sel], Z[:, sel], res[sel]
    # converged: within the real solve's test (||r|| <= tol ||A||, tol |lambda|
    # or tol) or the residuals its vectors reached (shift-and-invert tests the
    # transformed problem), times 2 sqrt(p): the Ritz residuals are at most
    # ||R C|| <= ||R|| ||C||, ||C|| <= 2 for mu > 1/4 (measured: <= 0.85 max ||r_j||)
    t = _TOL_ZERO if not tol or tol <= 0 else float(tol)
    anorm = max(0.0 if inverted else float(stats.get("anorm_estimate") or 0.0),  # of A, not of the inverse
                float(_np.max(_np.abs(w_real), initial=0.0)))
    scale = {"rel": _np.abs(theta), "abs": _np.ones_like(theta)}.get(conv, anorm * _np.ones_like(theta))
    slack = 2.0 * _math.sqrt(max(W.shape[1], 1))
    bound = slack * _np.maximum(t * scale, float(_np.max(res_real, initial=0.0)))
    ok = res <= bound
    stats = dict(stats, rnorms=res, converged=ok, embedding=2 * n, recovery_matvecs=W.shape[1])
    if failed is not None or (not subset and len(theta) < k) or not ok.all():
        raise NoConvergence(
            f"jdmg: {int(ok.sum())} of {k if not subset else len(theta)} eigenpairs converged "
            "(complex Hermitian, by the real embedding)"
            + ("" if failed is None else f"; the real solve: {failed.args[0]}"),
            theta[ok].astype(zr),
            Z[:, ok].astype(zc) if return_eigenvectors else None,
            stats,
        )
    out = (theta.astype(zr), Z.astype(zc)) if return_eigenvectors else (theta.astype(zr),)
    if return_stats:
        out = out + (stats,)
    return out if len(out) > 1 else out[0]


def svds_complex(A, k, ncv, tol, which, v0, maxiter, return_singular_vectors, solver, rng,
                 options, return_stats, *, real_svds):
    """``jdmg.svds`` for complex A: the real path ``real_svds`` on the
    embedding with 2k triplets, then the SVD of A Q on the complex span Q of
    the real vectors of the smaller side."""
    from . import NoConvergence
    from ._svd_args import _SVD_TOL_ZERO, _check_shape_k_ncv

    A, m, n, k = _check_shape_k_ncv(A, k, ncv)
    which_u = str(which).upper()
    if which_u not in ("LM", "SM"):
        raise ValueError("`which` must be in {'LM', 'SM'}.")
    if return_singular_vectors not in (True, False, "u", "vh"):
        raise ValueError("`return_singular_vectors` must be in {True, False, 'vh', 'u'}.")
    if v0 is not None:
        v0 = _np.atleast_1d(v0)
        if v0.shape != (min(m, n),):
            raise ValueError(f"`v0` must have shape {(min(m, n),)}.")
        v0 = to_real(v0.astype(_np.complex128))
    zc, zr = _out_dtypes(A)
    if _is_matrix(A):
        a = A
        from . import _sparse_module

        sp = _sparse_module()
        if not (sp is not None and sp.issparse(a)):
            a = _np.asarray(a)
        vals = a.data if (sp is not None and sp.issparse(a)) else a
        if not _np.all(_np.isfinite(vals)):
            raise ValueError("A holds NaN or Inf")
        A = a
    ea = embed(A, (m, n), adjoint=True)
    apply_a = applier(A, n, m)
    apply_ah = applier(A, m, n, adjoint=True)
    try:
        u_r, s_r, vh_r, stats = real_svds(
            ea, 2 * k, None if ncv is None else 2 * ncv, tol, which_u, v0, maxiter, True, solver, rng,
            options, return_stats=True,
        )
    except NoConvergence as e:
        # no vectors come with it: the converged real values, each complex one twice
        s_ok = _np.sort(_np.asarray(e.eigenvalues, dtype=float))
        raise NoConvergence(
            f"jdmg.svds (complex, by the real embedding): {e.args[0]}", s_ok[::2].astype(zr), None, e.stats
        ) from None

    # the smaller side: right vectors of a tall A, left ones of a wide A
    if n <= m:
        X, fwd, back = to_complex(vh_r.T), apply_a, apply_ah
    else:
        X, fwd, back = to_complex(u_r), apply_ah, apply_a
    C = _orthonormal_span(X, X)
    Q = X @ C
    Ub, s, Wh = _np.linalg.svd(fwd(Q), full_matrices=False)  # fwd(Q) = Ub S Wh
    order = _np.argsort(s, kind="stable")
    order = order[-k:] if which_u == "LM" else order[:k]
    s = s[order]
    near = Q @ Wh.conj().T[:, order]  # fwd(near) = far * s
    far = Ub[:, order]
    v, u = (near, far) if n <= m else (far, near)
    r_fwd = fwd(near) - far * s
    r_back = back(far) - near * s
    res = _np.sqrt(_np.sum(_np.abs(r_fwd) ** 2, axis=0) + _np.sum(_np.abs(r_back) ** 2, axis=0))
    t = _SVD_TOL_ZERO if not tol or tol <= 0 else float(tol)
    anorm = max(float(stats.get("anorm") or 0.0), float(_np.max(s_r, initial=0.0)))
    res_real = _np.asarray(stats.get("residual_norms", _np.zeros(0)), dtype=float)
    slack = 2.0 * _math.sqrt(2 * k)  # as in eigsh_hermitian
    bound = slack * max(t * anorm, float(_np.max(res_real, initial=0.0)))
    converged = res <= bound
    stats = dict(stats, residual_norms=res, converged=converged, embedding=(2 * m, 2 * n))
    if len(s) < k or not converged.all():
        raise NoConvergence(
            f"jdmg.svds: {int(converged.sum())} of {k} singular triplets converged (complex, "
            "by the real embedding)",
            _np.sort(s[converged]).astype(zr),
            None,
            stats,
        )
    up = _np.argsort(s, kind="stable")  # SciPy's order: ascending
    s, u, v = s[up].astype(zr), u[:, up].astype(zc), v[:, up].astype(zc)
    vh = v.conj().T
    if return_singular_vectors == "u":
        vh = None
    elif return_singular_vectors == "vh":
        u = None
    out = (u, s, vh) if return_singular_vectors is not False else s
    if return_stats:
        return (*out, stats) if return_singular_vectors is not False else (out, stats)
    return out
