"""jdmg: block Jacobi-Davidson eigensolver for large sparse symmetric matrices
(complex Hermitian ones through their real embedding).

``jdmg.eigsh`` takes the arguments of ``scipy.sparse.linalg.eigsh`` (and the
``return_stats`` of ``primme.eigsh``) and returns the eigenvalues in ascending
order with their eigenvectors::

    import jdmg, scipy.sparse as sp
    A = sp.diags([-1, 2, -1], [-1, 0, 1], shape=(1000, 1000))
    w, v = jdmg.eigsh(A, k=4, which="SA")

The solver itself is the Rust library ``jdmg``; the computation runs without
the GIL, which is taken back only to call Python operators, preconditioners
and to check for Ctrl-C.
"""

import operator as _operator
import json as _json
import time as _time
import warnings as _warnings

import numpy as _np

from . import _complex, _core
from ._core import JdmgError

__all__ = ["eigsh", "svds", "NoConvergence", "JdmgError"]
__version__ = _core.__version__

try:  # SciPy is optional: NoConvergence subclasses ArpackNoConvergence when it is there.
    from scipy.sparse.linalg import ArpackNoConvergence as _NoConvergenceBase
except ImportError:  # pragma: no cover - exercised only without SciPy

    class _NoConvergenceBase(RuntimeError):
        def __init__(self, msg, eigenvalues, eigenvectors):
            RuntimeError.__init__(self, msg)
            self.eigenvalues = eigenvalues
            self.eigenvectors = eigenvectors


class NoConvergence(_NoConvergenceBase):
    """The solve ran out of its budget (``maxiter`` outer iterations or
    ``maxmatvecs`` products) before ``k`` eigenpairs converged.

    ``eigenvalues`` (ascending) and ``eigenvectors`` (columns) hold the pairs
    that did converge; ``stats`` the counters of the solve. A subclass of
    ``scipy.sparse.linalg.ArpackNoConvergence`` when SciPy is installed.
    """

    def __init__(self, msg, eigenvalues, eigenvectors, stats=None):
        super().__init__(msg, eigenvalues, eigenvectors)
        self.args = (msg,)  # not ArpackError's "ARPACK error -1: ..."
        self.stats = stats


_WHICH = ("LM", "SM", "LA", "SA", "BE")
_PRECONDS = ("auto", "none", "jacobi", "ilu0", "ilut", "spai", "fsai")
_METHODS = {"auto": "auto", "bicgstab": "bicgstab", "qmrs": "qmrs", "jdqmr": "qmrs"}
# tol = 0 (SciPy's "machine precision"): the Norm test ||r|| <= tol ||A|| at this
# tol. 1e-12 is out of reach on some problems (shift-and-invert of lap3d:20 at
# sigma = 1, a 4-fold eigenvalue: true residuals stall at 3e-12 ||B||, and the solve
# runs to maxiter); 1e-10 converges there in 84 products.
_TOL_ZERO = 1e-10
# tol = 0 then tightens: solves again from the vectors found at each of these
# tols in turn, the first that converges kept (SciPy's tol = 0 is machine
# precision: ARPACK's eigenvalues agree with LAPACK's to rounding). 1e-14 ||A||
# is reached on most problems, in about half the products of the first solve;
# where rounding stalls the residuals above it, 1e-12.
_TOL_LADDER = (1e-14, 1e-12)
# The smallest basis taken from ncv: the library's default for blocks of three or
# more on small matrices (it defaults to 16 and 20 for blocks of one and two, and
# from 20,000 rows on to max(5 * block + k, 8); ncv, an ARPACK-style Krylov
# dimension, is raised to at least this).
_MIN_BASIS = 24


def _sparse_module():
    try:
        import scipy.sparse as sp

        return sp
    except ImportError:  # pragma: no cover
        return None


def _is_linear_operator(A):
    try:
        from scipy.sparse.linalg import LinearOperator
    except ImportError:  # pragma: no cover
        LinearOperator = ()
    if LinearOperator and isinstance(A, LinearOperator):
        return True
    return (
        not isinstance(A, _np.ndarray)
        and hasattr(A, "shape")
        and (hasattr(A, "matmat") or hasattr(A, "matvec"))
        and not hasattr(A, "tocsr")
    )


def _check_real_dtype(dtype, what):
    if dtype is not None and _np.issubdtype(_np.dtype(dtype), _np.complexfloating):
        raise TypeError(f"{what} is complex: jdmg solves real symmetric problems only")


def _square_shape(shape, what):
    if len(shape) != 2 or shape[0] != shape[1]:
        raise ValueError(f"{what} must be square, got shape {tuple(shape)}")
    n = int(shape[0])
    if n == 0:
        raise ValueError(f"{what} is empty")
    return n


def _csr_arrays(A, what="A"):
    """(n, indptr, indices, data) of a sparse or dense matrix, float64, sorted
    column indices, duplicates summed; None when A is not a matrix."""
    sp = _sparse_module()
    if sp is not None and sp.issparse(A):
        _check_real_dtype(A.dtype, what)
        n = _square_shape(A.shape, what)
        if A.dtype == _np.bool_ or not _np.issubdtype(A.dtype, _np.number):
            A = A.astype(_np.float64)
        A = A.tocsr()
        if not A.has_canonical_format:
            A = A.copy()
            A.sum_duplicates()
        return (
            n,
            _np.asarray(A.indptr, dtype=_np.int64),
            _np.asarray(A.indices, dtype=_np.int64),
            _np.ascontiguousarray(A.data, dtype=_np.float64),
        )
    if _is_linear_operator(A) or callable(A):
        return None
    a = _np.asarray(A)
    _check_real_dtype(a.dtype, what)
    if a.dtype == object:
        try:
            a = a.astype(_np.float64)
        except (TypeError, ValueError) as e:
            raise TypeError(f"{what} is not a numeric matrix: {e}") from None
    if a.ndim != 2:
        raise ValueError(f"{what} must be a 2-D matrix, got {a.ndim} dimensions")
    n = _square_shape(a.shape, what)
    a = _np.asarray(a, dtype=_np.float64)
    nz = a != 0
    indptr = _np.zeros(n + 1, dtype=_np.int64)
    _np.cumsum(nz.sum(axis=1), out=indptr[1:])
    _, cols = _np.nonzero(nz)
    return n, indptr, cols.astype(_np.int64), _np.ascontiguousarray(a[nz])


def _block_callable(op, n, what):
    """f(x, k) on k column-major vectors (flat float64) for the Rust side:
    ``op.matmat`` on the (n, k) block when op has it, else ``op.matvec`` per
    column, else ``op(X)`` (a callable: lobpcg's convention), else ``op @ X``."""
    mm = getattr(op, "matmat", None)
    mv = getattr(op, "matvec", None)
    if mm is not None:
        apply = mm
    elif mv is not None:

        def apply(X):
            return _np.column_stack([_np.asarray(mv(X[:, j])).reshape(n) for j in range(X.shape[1])])

    elif callable(op):
        apply = op
    else:

        def apply(X):
            return op @ X

    def f(x, k):
        X = x.reshape(k, n).T  # (n, k), a view
        Y = apply(X)
        sp = _sparse_module()
        if sp is not None and sp.issparse(Y):
            Y = Y.toarray()
        Y = _np.asarray(Y)
        if _np.iscomplexobj(Y):
            raise TypeError(f"{what} returned complex values")
        if Y.shape != (n, k):
            if Y.size == n * k and (Y.ndim == 1 or k == 1):
                Y = Y.reshape(n, k)
            else:
                raise ValueError(
                    f"{what} returned shape {Y.shape} for a block of shape {(n, k)}"
                )
        return _np.ascontiguousarray(Y.T, dtype=_np.float64).reshape(-1)

    return f


def _sandwich(opinv, m, n):
    """X -> M @ OPinv @ M @ X on (n, k) blocks."""
    f_o = _block_callable(opinv, n, "OPinv")
    f_m = _block_callable(m, n, "M")

    def apply(X):
        k = X.shape[1]
        x = _np.ascontiguousarray(X.T, dtype=_np.float64).reshape(-1)
        return f_m(f_o(f_m(x, k), k), k).reshape(k, n).T

    return apply


def _start_block(v, n, what):
    v = _np.asarray(v)
    _check_real_dtype(v.dtype, what)
    v = _np.asarray(v, dtype=_np.float64)
    if v.ndim == 1:
        v = v[:, None]
    if v.ndim != 2 or v.shape[0] != n:
        raise ValueError(f"{what} must have shape ({n},) or ({n}, p), got {v.shape}")
    if not _np.all(_np.isfinite(v)):
        raise ValueError(f"{what} holds NaN or Inf")
    return _np.ascontiguousarray(v.T).reshape(-1)  # column-major


def _seed_of(rng):
    """The integer seed of SciPy's ``rng``: an int is the seed itself; a
    ``numpy.random.Generator``, ``RandomState``, ``BitGenerator`` or
    ``SeedSequence`` gives one by drawing a 64-bit integer from it (which
    advances its state, as an ARPACK start vector drawn from it would)."""
    if isinstance(rng, bool):
        raise TypeError(f"rng must be None, an integer or a numpy random generator, got {rng!r}")
    if isinstance(rng, (int, _np.integer)):
        if rng < 0:
            raise ValueError(f"rng: a seed must be non-negative, got {rng}")
        if rng < 2**64:
            return int(rng)
        rng = _np.random.default_rng(int(rng))
    if isinstance(rng, _np.random.RandomState):
        return int(rng.randint(0, 2**64, dtype=_np.uint64))
    if not isinstance(rng, _np.random.Generator):
        try:
            rng = _np.random.default_rng(rng)
        except (TypeError, ValueError) as e:
            raise TypeError(f"rng must be None, an integer or a numpy random generator, got {rng!r} ({e})") from None
    return int(rng.integers(0, 2**64, dtype=_np.uint64))


# The counters of work in the statistics: summed over the solves of one call.
_WORK = {
    "outer_iterations", "matvecs", "precond_applications", "inner_steps", "inner_stops",
    "gdk_iterations", "jdqmr_iterations", "method_switches", "global_sums", "restarts",
    "replaced_vectors", "basis_passes", "verification_passes", "mass_matvecs", "phases",
}


def _merge_stats(raws):
    """The statistics of several solves of one call (JSON strings) as one JSON
    string: the counters of work (and the seconds) added up, the other fields
    the last solve's."""
    if len(raws) == 1:
        return raws[0]
    dicts = [_json.loads(r) for r in raws]
    merged = dict(dicts[-1])

    def add(x, y):
        if isinstance(x, dict) and isinstance(y, dict):
            return {key: add(x[key], y[key]) if key in y else x[key] for key in x}
        if isinstance(x, (int, float)) and isinstance(y, (int, float)) and not isinstance(x, bool):
            return x + y
        return x

    for key in merged:
        if key in _WORK or key.endswith("_seconds"):
            total = dicts[0][key]
            for other in dicts[1:]:
                total = add(total, other[key])
            merged[key] = total
    return _json.dumps(merged)


def _dense_eigh(A, M, vectors, return_stats, t0):
    """SciPy's answer for k >= n with dense matrices: every eigenpair, by
    ``scipy.linalg.eigh`` (numpy's eigh without SciPy and M)."""
    cplx = _np.iscomplexobj(A) or (M is not None and _np.iscomplexobj(M))
    dt = _np.complex128 if cplx else _np.float64
    a = _np.asarray(A, dtype=dt)
    m = None if M is None else _np.asarray(M, dtype=dt)
    for x, what in ((a, "A"), (m, "M")):
        if x is not None and _np.abs(x - x.conj().T).max() > 1e-12 * max(_np.abs(x).max(), 1e-300):
            raise ValueError(f"{what} is not {'Hermitian' if cplx else 'symmetric'}")
    try:
        import scipy.linalg as sl

        w, v = sl.eigh(a, b=m)
    except ImportError:  # pragma: no cover
        if m is not None:
            raise
        w, v = _np.linalg.eigh(a)
    out = (w, v) if vectors else (w,)
    if return_stats:
        mv = v if m is None else m @ v
        rn = _np.linalg.norm(a @ v - mv * w, axis=0)
        stats = dict.fromkeys(("numOuterIterations", "numRestarts", "numMatvecs", "numPreconds", "numInnerSteps"), 0)
        stats.update(
            method="scipy.linalg.eigh",
            elapsedTime=_time.perf_counter() - t0,
            rnorms=rn,
            converged=_np.ones(len(w), dtype=bool),
        )
        out = out + (stats,)
    return out if len(out) > 1 else out[0]


def _stats(raw, rnorms, converged, elapsed):
    s = _json.loads(raw)
    s.update(
        numOuterIterations=s["outer_iterations"],
        numRestarts=s["restarts"],
        numMatvecs=s["matvecs"],
        numPreconds=s["precond_applications"],
        numInnerSteps=s["inner_steps"],
        estimateLargestSVal=s["anorm_estimate"],
        elapsedTime=elapsed,
        rnorms=rnorms,
        converged=converged,
    )
    return s


_MODES = ("normal", "buckling", "cayley")


def _transform(mode, sigma):
    """(a, b, s) of SciPy's transformed values nu = a + b / (t - s) in the
    variable t of the pencil jdmg solves: t = lambda for 'normal' (nu =
    1/(lambda - sigma)) and 'cayley' (nu = (lambda + sigma)/(lambda - sigma));
    t = 1/lambda for 'buckling' (nu = lambda/(lambda - sigma), the pencil
    M x = t A x)."""
    if mode == "normal":
        return 0.0, 1.0, sigma
    if mode == "cayley":
        return 1.0, 2.0 * sigma, sigma
    return 0.0, -1.0 / sigma, 1.0 / sigma


def _nu(t, a, b, s):
    with _np.errstate(divide="ignore", invalid="ignore"):
        return a + b / (_np.asarray(t, dtype=_np.float64) - s)


def _score(which, nu):
    """Larger is selected first: LA nu, SA -nu, LM |nu|, SM -|nu|."""
    return {"LA": nu, "SA": -nu, "LM": _np.abs(nu), "SM": -_np.abs(nu)}[which]


def _selected_set_covered(which, tau, a, b, s, region, slack):
    """Whether every real t whose score is at least tau (the score of the
    last pair selected) lies in ``region`` (merged closed intervals, ends may
    be infinite): then no eigenvalue outside the known ones can be selected."""
    if not _np.isfinite(tau):
        return True  # only the pole itself scores +inf
    levels = {"LA": [tau], "SA": [-tau], "LM": [tau, -tau], "SM": [tau, -tau] if tau <= 0 else []}[which]
    points = [s] + [s + b / (lv - a) for lv in levels if lv != a]
    points = sorted({float(p) for p in points if _np.isfinite(p)})
    pieces = list(zip([-_np.inf] + points, points + [_np.inf]))
    for lo, hi in pieces:
        if _np.isinf(lo) and _np.isinf(hi):
            mid = 0.0
        elif _np.isinf(lo):
            mid = hi - (1.0 + abs(hi))
        elif _np.isinf(hi):
            mid = lo + (1.0 + abs(lo))
        else:
            mid = 0.5 * (lo + hi)
        if _score(which, _nu(mid, a, b, s)) < tau:
            continue
        if not any(r0 <= lo + slack and hi - slack <= r1 for r0, r1 in region):
            return False
    return True


def _merged(region, slack):
    out = []
    for lo, hi in sorted(region):
        if out and lo <= out[-1][1] + slack:
            out[-1][1] = max(out[-1][1], hi)
        else:
            out.append([lo, hi])
    return [tuple(x) for x in out]


def _select_transformed(run, n, k, which, mode, sigma, a_in, m_in, pc, vectors):
    """The k eigenpairs of A x = lambda M x whose transformed values nu (of
    ``mode`` at ``sigma``, as ARPACK's) ``which`` selects, for every kind of A
    and M; one result tuple of ``_core.solve``'s form. 'buckling' solves the
    pencil M x = (1/lambda) A x (A the positive definite mass, as in SciPy),
    or, without M or when A is not definite, A x = lambda M x itself."""
    if mode != "buckling":
        return _select_on(run, n, k, which, a_in, m_in, pc, vectors, _transform(mode, sigma), False)
    if sigma == 0:
        raise ValueError("mode='buckling' needs sigma != 0")
    direct = (1.0, sigma, sigma)  # nu = 1 + sigma/(lambda - sigma)
    if m_in is None:
        r = _select_on(run, n, k, which, a_in, None, pc, vectors, direct, False)
        if vectors and len(r[1]) and _np.all(r[1] > 0):  # SciPy's A-orthonormal vectors
            v = r[2].reshape(-1, n) / _np.sqrt(r[1])[:, None]
            r = r[:2] + (v.reshape(-1),) + r[3:]
        return r
    try:
        return _select_on(run, n, k, which, m_in, a_in, None, vectors, _transform(mode, sigma), True)
    except ValueError as e:
        if "positive definite" not in str(e):
            raise
    try:
        return _select_on(run, n, k, which, a_in, m_in, pc, vectors, direct, False)
    except ValueError as e:
        if "positive definite" not in str(e):
            raise
        raise ValueError(f"mode='buckling' needs A (or M) positive definite: {e}") from None


def _select_on(run, n, k, which, K, B, pc, vectors, transform, inverse):
    """``which`` on nu = a + b/(t - s) ((a, b, s) = ``transform``) over the
    eigenvalues t of K x = t B x, returned as 1/t when ``inverse``. Solves
    for the eigenvalues closest to the pole s of nu (and to its zero, for
    'SM' with a != 0) and at the two ends, with twice as many pairs each
    round, until every t that would be selected before the last pair taken
    lies where all eigenvalues are known."""
    matrices = K[0] == "csr" and (B is None or B[0] == "csr")
    a, b, s = transform
    parts = [((k + 1) // 2, "LA"), (k - (k + 1) // 2, "SA")] if which == "BE" else [(k, which)]
    # sources: ("near", point) for the eigenvalues closest to it, "low" and "high"
    if which == "SM":
        first = {("near", s - b / a): k} if a != 0 else {"low": k, "high": k}
    elif which == "LM":
        first = {("near", s): k}
    else:
        first = {("near", s): min(n, 2 * k)}
    counts = dict(first)
    done = {}
    raws = []
    while True:
        for src, cnt in counts.items():
            if done.get(src, (None,))[0] == cnt:
                continue
            if src == "low":
                r = run(cnt, "smallest", K=K, B=B, pc=pc)
            elif src == "high":
                r = run(cnt, "largest", K=K, B=B, pc=pc)
            elif matrices:
                r = run(cnt, "largest_magnitude", shift_invert=src[1], K=K, B=B, pc=pc)
            else:
                r = run(cnt, {"closest": src[1]}, K=K, B=B, pc=pc)
            raws.append(r[5])
            if r[0] != 0:  # out of budget: the pairs of this solve that converged
                with _np.errstate(divide="ignore"):
                    w = 1.0 / r[1] if inverse else r[1]
                return r[0], w, r[2], r[3], r[4], _merge_stats(raws)
            done[src] = (cnt, r)
        # the known eigenpairs, each once: a source adds those outside the
        # region of the sources before it
        t_all = _np.concatenate([d[1][1] for d in done.values()] + [_np.zeros(0)])
        scale = max(1.0, float(_np.max(_np.abs(t_all), initial=0.0)), abs(s))
        slack = 1e-9 * scale
        region, keep = [], []
        for src, (cnt, r) in done.items():
            t = _np.asarray(r[1], dtype=_np.float64)
            inside = _np.zeros(len(t), dtype=bool)
            for r0, r1 in _merged(region, slack):
                inside |= (t >= r0 - slack) & (t <= r1 + slack)
            keep.append((r, ~inside))
            if len(t) == 0:
                continue
            if cnt >= n:
                region.append((-_np.inf, _np.inf))
            elif src == "low":
                region.append((-_np.inf, float(t.max())))
            elif src == "high":
                region.append((float(t.min()), _np.inf))
            else:
                d = float(_np.max(_np.abs(t - src[1])))
                region.append((src[1] - d, src[1] + d))
        region = _merged(region, slack)
        t_known = _np.concatenate([r[1][m] for r, m in keep])
        nu = _nu(t_known, a, b, s)
        chosen, certain = [], True
        for cnt_part, w_part in parts:
            if cnt_part == 0:
                continue
            order = _np.argsort(-_score(w_part, nu), kind="stable")
            if len(order) < cnt_part:
                certain = False
                break
            tau = _score(w_part, nu)[order[cnt_part - 1]]
            if not _selected_set_covered(w_part, tau, a, b, s, region, slack):
                certain = False
                break
            chosen.append(order[:cnt_part])
        if certain or all(c >= n for c in counts.values()):
            break
        counts = {src: min(n, 2 * c) for src, c in counts.items()}
        counts.setdefault("low", k)
        counts.setdefault("high", k)
    if not certain:  # pragma: no cover - a full region always decides
        raise JdmgError("jdmg: the transformed selection could not be decided")
    sel = _np.unique(_np.concatenate(chosen)) if chosen else _np.zeros(0, dtype=int)
    status = max(r[0] for r, _ in keep)
    conv = _np.concatenate([_np.asarray(r[3], dtype=bool)[m] for r, m in keep])[sel]
    rn = _np.concatenate([_np.asarray(r[4])[m] for r, m in keep])[sel]
    t_sel = t_known[sel]
    if inverse:
        with _np.errstate(divide="ignore"):
            w = 1.0 / t_sel
    else:
        w = t_sel
    if vectors:
        v = _np.concatenate([_np.asarray(r[2]).reshape(-1, n)[m] for r, m in keep])[sel].reshape(-1)
    else:
        v = _np.zeros(0)
    return status, w, v, conv, rn, _merge_stats(raws)


def eigsh(
    A,
    k=6,
    M=None,
    sigma=None,
    which="LM",
    v0=None,
    ncv=None,
    maxiter=None,
    tol=0,
    return_eigenvectors=True,
    Minv=None,
    OPinv=None,
    mode="normal",
    rng=None,
    *,
    X0=None,
    lock=None,
    precond=None,
    block=None,
    method=None,
    maxits=None,
    threads=None,
    maxmatvecs=None,
    conv=None,
    seed=None,
    return_stats=False,
    subset_by_value=None,
    subset_by_index=None,
    **options,
):
    """The ``k`` eigenpairs of the real symmetric or complex Hermitian matrix
    ``A`` (or of the pencil A x = lambda M x) that ``which``, ``sigma`` and
    ``mode`` select, as ``scipy.sparse.linalg.eigsh`` does.

    Complex Hermitian A (or M): solved through the real embedding, the real
    symmetric 2n x 2n matrix of A acting on interleaved real and imaginary
    parts (A's eigenvalues, each twice): 2k pairs of it by the real solver,
    then the complex eigenvectors by a Rayleigh-Ritz step on the complex span
    of its eigenvectors, and their residuals recomputed. Every argument below
    applies, except: ``mode='buckling'`` (a ValueError, as in SciPy); a
    complex ``sigma`` with a nonzero imaginary part (a TypeError); v0, X0
    and lock are then complex (n,) or (n, p). complex64 input gives float32
    eigenvalues and complex64 eigenvectors (as SciPy); ``which='BE'`` is
    taken (SciPy refuses it for complex A). The statistics count the products
    of the real solve (each one product with A) and add ``embedding`` (2n)
    and ``recovery_matvecs`` (the products of the recovery).

    Parameters
    ----------
    A : scipy.sparse matrix or array, numpy array, or LinearOperator
        Real symmetric or complex Hermitian, n x n. Real sparse and dense
        matrices are converted to CSR float64 (float32 and integer inputs
        included: jdmg computes in double precision), complex ones to their
        real embedding; a non-symmetric (non-Hermitian: max |a_ij -
        conj(a_ji)| above 1e-12 max |a_ij|) matrix is a ValueError. A
        ``LinearOperator`` (or any object with ``shape`` and
        ``matmat``/``matvec``) is applied to blocks of vectors through
        ``matmat`` (else ``matvec`` per column).
    k : int
        Number of eigenpairs, 1 <= k <= n. As SciPy, k >= n with a dense A
        (and M) gives every eigenpair by ``scipy.linalg.eigh``, with a
        RuntimeWarning; with a sparse A or a LinearOperator, k = n is solved
        and k > n is a TypeError (SciPy: k >= n is one).
    M : scipy.sparse matrix, numpy array or LinearOperator, optional
        Symmetric mass matrix of the generalized problem A x = lambda M x
        (converted as A is), positive definite (except in 'buckling' mode).
        The eigenvectors returned are M-orthonormal (v.T @ M @ v = I; see
        ``mode`` for 'buckling'). ``Minv`` is not needed (jdmg never
        inverts M) and is ignored.
    sigma : float, optional
        Shift: ``which`` then applies to the transformed values nu of
        ``mode`` (1/(lambda - sigma) in the normal mode), as ARPACK's
        shift-and-invert, for every kind of A and M. With matrices, the
        eigenvalues nearest a point come from shift-and-invert on a sparse
        factorization of A - t M; with a LinearOperator, from interior
        Jacobi-Davidson (or shift-and-invert through ``OPinv``).
    which : {'LM', 'SM', 'LA', 'SA', 'BE'}
        Largest magnitude (default), smallest magnitude, largest algebraic,
        smallest algebraic, both ends (k/2 from each end, one more from the
        high end when k is odd), of lambda, or of nu with ``sigma``: 'LM' the
        eigenvalues nearest sigma, 'SM' the farthest, 'LA' those just above
        sigma (then from the bottom of the spectrum up, when fewer lie
        above), 'SA' just below, 'BE' half of each. jdmg takes lower case too.
    v0, X0 : array, optional
        Start vector(s): shape (n,) or (n, p).
    ncv : int, optional
        Maximum basis size, k < ncv (values above n are taken as n, as
        SciPy does; default max(5 * block + k, min(12 + 4 * block, 24))
        below 20,000 rows, max(5 * block + k, 8) from there on; the default
        gives back one column per locked pair, down to restart + 2 * block);
        values below 24 are raised to min(24, n): unlike ARPACK's Krylov
        space, a Jacobi-Davidson basis of 2k+1 vectors does not work.
    maxiter : int, optional
        Maximum number of outer iterations (default max(100000, 10 n), as
        ARPACK's 10 n).
    tol : float
        Convergence tolerance: a pair converges when ||A x - lambda x|| <=
        tol * ||A|| (``conv='norm'``, PRIMME's test; of the transformed
        problem in shift-and-invert, as ARPACK's). 0 (default) means machine
        precision, as SciPy: a solve at 1e-10, then again from its vectors
        at 1e-14 (at 1e-12 if rounding keeps the residuals above 1e-14
        ||A||), so that the residuals end at rounding level and the
        eigenvalues agree with LAPACK's to rounding. The statistics add up
        the counters of these solves. A negative tol is 0 too (ARPACK's rule).
    return_eigenvectors : bool
        Return (w, v) when true, else w.
    Minv : ignored
        SciPy's M^-1 for ``M`` without ``sigma`` (a ValueError without M or
        with sigma, as in SciPy).
    OPinv : LinearOperator, optional
        (A - sigma M)^-1 (M = I without M) for shift-and-invert with a
        LinearOperator A, in the normal mode; with M, jdmg solves the pencil
        (M OPinv M) x = nu M x.
    mode : {'normal', 'buckling', 'cayley'}
        SciPy's transformation with ``sigma`` (ignored without it); the
        eigenvalues returned are always those of A x = lambda M x, ``which``
        selects on nu: 'normal' nu = 1/(lambda - sigma); 'buckling' nu =
        lambda/(lambda - sigma), sigma != 0: A positive definite and M
        symmetric, possibly indefinite, as SciPy (solved as the pencil M x =
        (1/lambda) A x, eigenvectors A-orthonormal), or A symmetric without
        M or with M positive definite (solved as A x = lambda M x,
        eigenvectors M-orthonormal; A-orthonormal without M when A is
        definite); 'cayley' nu = (lambda + sigma)/(lambda - sigma), M
        positive definite. Every kind of A and M; solves for the eigenvalues
        nearest the pole of nu (and its zero, for 'SM' in 'cayley') and at
        the ends of the spectrum, with twice as many pairs each round, until
        the selected set is certain.
    rng : None, int, numpy.random.Generator or RandomState, optional
        The random start vectors. An int is the seed; a Generator or
        RandomState (or a SeedSequence, a BitGenerator) gives the seed by
        drawing one 64-bit integer from it, which advances its state. None
        (SciPy: entropy from the OS): jdmg's default seed 1. The same seed
        gives the same result bitwise, on a quiet or a loaded machine: the
        default ``method='auto'`` switches inner solvers by counted work,
        not by time.
    lock : array (n,) or (n, p), optional
        Deflation vectors: the eigenvectors returned are orthogonal to them
        (PRIMME's ``lock``).
    precond : str, matrix, LinearOperator or callable, optional
        A name: 'auto' (default: ILU(0) of A - sigma I when stable, else
        FSAI when A - sigma I looks definite, else Jacobi), 'none', 'jacobi',
        'ilu0', 'ilut', 'spai', 'fsai' (names need
        an explicit matrix, except 'none' and 'auto'; with M as an operator,
        the eigenvalues nearest a point are solved without one). Otherwise an
        approximation P of (A - sigma I)^-1 applied to blocks of residuals,
        Z = P @ R: a matrix, a LinearOperator (``matmat``) or a callable
        taking and returning (n, b) arrays (lobpcg's convention); not used
        in 'buckling' mode.
    block : int, optional
        Block size (Ritz pairs corrected per outer iteration; default
        min(k, 8)).
    method : {'auto', 'bicgstab', 'qmrs' or 'jdqmr'}, optional
        Inner solver of the correction equations (default 'auto': GD+k
        steps or block JDQMR, whichever makes more progress per counted
        work).
    maxits : int, optional
        Inner steps per correction equation (0: GD+k steps).
    threads : int, optional
        Threads of the sparse products and dense kernels (default 1).
    maxmatvecs : int, optional
        Budget of products with A (default max(100000, 10 n k)).
    conv : {'norm', 'rel', 'abs'}, optional
        Convergence test: ||r|| <= tol ||A|| (default), tol |lambda|, tol.
    seed : int, optional
        Seed of the random start vectors (default 1); as an int ``rng``.
    return_stats : bool
        Also return a dict of counters (as ``primme.eigsh``): jdmg's names
        (``matvecs``, ``outer_iterations``, ``inner_steps``,
        ``wall_seconds``, ...) and PRIMME's (``numMatvecs``,
        ``numOuterIterations``, ``numPreconds``, ``elapsedTime``, ``rnorms``).
    subset_by_value : (a, b), optional
        Every eigenpair in [a, b] instead of ``k`` of them (the name of
        ``scipy.linalg.eigh``; ``k`` and ``which`` are not used), certified
        complete by the inertia of LDL^T factorizations of A - tM at the
        ends; an end at an eigenvalue, to rounding, takes all of its copies
        in. Spectrum slicing, each slice by shift-and-invert. Needs A (and M)
        as matrices; no ``sigma``, ``OPinv``, ``v0``. The statistics'
        ``interval`` holds the count and the slices.
    subset_by_index : (i, j), optional
        The eigenpairs of ascending indices i to j (0-based, inclusive, as
        ``scipy.linalg.eigh``; ``k`` and ``which`` are not used): an
        interval holding them is bracketed by LDL^T counts, then solved as
        ``subset_by_value``; the same conditions.
    **options
        Any other setting of the Rust ``JdParams`` by its flat name
        (``restart_size``, ``verify``, ``locking``, ``anorm``,
        ``precond_shift``, ``ilut_fill``, ``check_symmetry``, ...; the list is
        ``JdParams::FLAT_KEYS``), or a whole group as a dict
        (``basis={"max_basis": 40}``).

    Returns
    -------
    w : ndarray (k,)
        Eigenvalues, ascending (SciPy's order too, except that SciPy returns
        'LM' and 'SM' without eigenvectors by magnitude).
    v : ndarray (n, k)
        Eigenvectors (columns), when ``return_eigenvectors``.
    stats : dict
        When ``return_stats``.

    Raises
    ------
    NoConvergence
        The budget ran out; carries the converged pairs. A subclass of
        ``scipy.sparse.linalg.ArpackNoConvergence``.
    ValueError
        Bad shapes or arguments (as SciPy: k <= 0, which, mode, ncv <= k,
        maxiter <= 0, OPinv without sigma, Minv without M or with sigma, M
        of another shape, a non-square A), a non-symmetric or non-Hermitian
        matrix, M not positive definite; 'buckling' mode with complex A.
    TypeError
        Complex v0, X0, lock or sigma with a real problem; a complex sigma
        with a nonzero imaginary part; k not an integer; k > n with a sparse
        A or a LinearOperator.

    Not as SciPy (yet)
    ------------------
    Complex Hermitian A: 'buckling' mode (SciPy refuses it too), and the
    order of the values returned without eigenvectors (SciPy's ``eigs``
    order; jdmg: ascending); ``OPinv`` with the modes
    'buckling' and 'cayley' (a ValueError: jdmg builds its own shifted
    solves there); ``sigma=0`` in 'buckling' mode (a ValueError; SciPy's
    answer is arbitrary, every nu being 1); 'buckling' mode with neither
    A nor M positive definite (one is the mass of the pencil jdmg solves); ``rng=None`` is
    jdmg's fixed seed, not fresh entropy; ``Minv`` is ignored rather than
    used; SciPy's order of the eigenvalues returned without eigenvectors for
    'LM' and 'SM' (jdmg: ascending). Beyond SciPy: k = n for sparse
    matrices and operators, lower-case ``which``, 'BE' and 'cayley' mode
    with complex A, and the keyword arguments after ``rng``.
    """
    t0 = _time.perf_counter()
    if _complex.is_complex(A) or _complex.is_complex(M):
        # complex Hermitian: the real path on the real embedding (_complex.py)
        return _complex.eigsh_hermitian(
            A, k, M, sigma, which, v0, ncv, maxiter, tol, return_eigenvectors, Minv, OPinv, mode, rng,
            X0=X0, lock=lock, precond=precond, block=block, method=method, maxits=maxits,
            threads=threads, maxmatvecs=maxmatvecs, conv=conv, seed=seed, return_stats=return_stats,
            subset_by_value=subset_by_value, subset_by_index=subset_by_index, options=options,
        )
    # --- arguments -------------------------------------------------------
    if Minv is not None and M is None:
        raise ValueError("Minv is used only with M")
    if mode not in _MODES:
        raise ValueError(f"mode must be one of {', '.join(_MODES)}, got {mode!r}")
    if not isinstance(which, str) or which.upper() not in _WHICH:
        raise ValueError(f"which must be one of {', '.join(_WHICH)}, got {which!r}")
    which = which.upper()
    csr = _csr_arrays(A)
    if csr is None:
        _check_real_dtype(getattr(A, "dtype", None), "A")
        if not hasattr(A, "shape"):
            raise TypeError("A must be a matrix, a sparse matrix or a LinearOperator")
        n = _square_shape(tuple(A.shape), "A")
    else:
        n = csr[0]
        if not _np.all(_np.isfinite(csr[3])):
            raise ValueError("A holds NaN or Inf")
    mass = None
    if M is not None:
        mass = _csr_arrays(M, "M")
        if mass is None:
            _check_real_dtype(getattr(M, "dtype", None), "M")
            if not hasattr(M, "shape"):
                raise TypeError("M must be a matrix, a sparse matrix or a LinearOperator")
            if tuple(M.shape) != (n, n):
                raise ValueError(f"M has shape {tuple(M.shape)}, A {(n, n)}")
        else:
            if mass[0] != n:
                raise ValueError(f"M has shape {(mass[0], mass[0])}, A {(n, n)}")
            if not _np.all(_np.isfinite(mass[3])):
                raise ValueError("M holds NaN or Inf")
    if isinstance(k, bool) or not isinstance(k, (int, _np.integer)):
        raise TypeError(f"k must be an integer, got {k!r}")
    k = int(k)
    if k <= 0:
        raise ValueError(f"k must be greater than 0, got {k}")
    if k >= n and subset_by_value is None and subset_by_index is None:
        # SciPy's rule: a dense A (and M) goes to the dense eigh, with a warning,
        # for all n eigenpairs; sparse matrices and operators are a TypeError
        # there, except that jdmg solves k = n itself.
        sp_mod = _sparse_module()
        dense_a = csr is not None and not (sp_mod is not None and sp_mod.issparse(A))
        dense_m = M is None or (mass is not None and not (sp_mod is not None and sp_mod.issparse(M)))
        if dense_a and dense_m:
            _warnings.warn(
                "k >= N for N * N square matrix. Attempting to use scipy.linalg.eigh instead.",
                RuntimeWarning,
                stacklevel=2,
            )
            return _dense_eigh(A, M, return_eigenvectors, return_stats, t0)
        if k > n:
            raise TypeError(
                f"k = {k} exceeds n = {n}: SciPy's dense fallback for k >= n takes no sparse "
                "matrix or LinearOperator (use k <= n, or a dense A)"
            )
    if sigma is not None:
        if isinstance(sigma, complex) or _np.iscomplexobj(sigma):
            raise TypeError("sigma is complex: jdmg solves real symmetric problems only")
        sigma = float(sigma)
        if not _np.isfinite(sigma):
            raise ValueError(f"sigma must be finite, got {sigma}")
    if OPinv is not None and sigma is None:
        raise ValueError("OPinv needs sigma")
    if Minv is not None and sigma is not None:
        raise ValueError("Minv should not be specified when sigma is specified")
    if OPinv is not None and mode != "normal":
        raise ValueError(f"OPinv with mode={mode!r}: jdmg takes OPinv in mode='normal' only")
    tol = 0.0 if tol is None else float(tol)
    if not _np.isfinite(tol):
        raise ValueError(f"tol must be finite, got {tol}")
    machine_tol = tol <= 0  # ARPACK's rule: tol <= 0 is machine precision
    if machine_tol:
        tol = _TOL_ZERO
    if v0 is not None and X0 is not None:
        raise ValueError("give v0 or X0, not both")
    start = v0 if v0 is not None else X0
    start = None if start is None else _start_block(start, n, "v0" if v0 is not None else "X0")
    defl = None if lock is None else _start_block(lock, n, "lock")

    params = dict(options)
    params["tol"] = tol
    if ncv is not None:
        ncv = min(int(ncv), n)  # as SciPy
    if ncv is not None and not (k < int(ncv) <= n or k == int(ncv) == n):
        raise ValueError(f"ncv must be k < ncv <= n, got ncv = {ncv} (k = {k}, n = {n})")
    if ncv is not None and "max_basis" not in params:
        # ARPACK's ncv is a Krylov dimension, which works small; a Jacobi-Davidson
        # basis of 2k+1 vectors (SciPy's default ncv for small k) does not.
        params["max_basis"] = max(int(ncv), min(n, _MIN_BASIS))
    if maxiter is not None:
        if int(maxiter) <= 0:
            raise ValueError(f"maxiter must be positive, got {maxiter}")
        params["max_outer"] = int(maxiter)
    if maxmatvecs is not None:
        params["max_matvecs"] = int(maxmatvecs)
    if block is not None:
        params["block"] = int(block)
    if maxits is not None:
        params["maxits"] = int(maxits)
    if threads is not None:
        params["threads"] = int(threads)
    if conv is not None:
        params["conv"] = conv
    if rng is not None:
        if seed is not None:
            raise ValueError("give rng or seed, not both")
        seed = _seed_of(rng)
    if seed is not None:
        params["seed"] = int(seed)
    if method is not None:
        if method not in _METHODS:
            raise ValueError(f"method must be one of {', '.join(_METHODS)}, got {method!r}")
        params["inner_solver"] = _METHODS[method]
    pc_call = None
    if isinstance(precond, str):
        if precond not in _PRECONDS:
            raise ValueError(f"precond must be one of {', '.join(_PRECONDS)} or an operator, got {precond!r}")
        if csr is None and precond not in ("auto", "none", "jacobi"):
            raise ValueError(f"precond={precond!r} needs an explicit matrix A")
        params["precond"] = precond
    elif precond is not None:
        if hasattr(precond, "shape"):
            if tuple(precond.shape) != (n, n):
                raise ValueError(f"precond has shape {tuple(precond.shape)}, A {(n, n)}")
            _check_real_dtype(getattr(precond, "dtype", None), "precond")
        elif not callable(precond):
            raise TypeError("precond must be a name, a matrix, a LinearOperator or a callable")
        pc_call = _block_callable(precond, n, "precond")

    interval = None
    if subset_by_value is not None:
        try:
            lo, hi = (float(x) for x in subset_by_value)
        except (TypeError, ValueError):
            raise ValueError(f"subset_by_value must be a pair (a, b), got {subset_by_value!r}") from None
        if not (_np.isfinite(lo) and _np.isfinite(hi) and lo <= hi):
            raise ValueError(f"subset_by_value must be finite with a <= b, got {subset_by_value!r}")
        if sigma is not None or OPinv is not None or start is not None:
            raise ValueError("subset_by_value takes no sigma, OPinv, v0 or X0")
        if csr is None or (M is not None and mass is None):
            raise ValueError("subset_by_value needs A (and M) as matrices: it factors A - tM")
        interval = (lo, hi)
    indices = None
    if subset_by_index is not None:
        if interval is not None:
            raise ValueError("give subset_by_value or subset_by_index, not both")
        try:
            i, j = (_operator.index(x) for x in subset_by_index)
        except (TypeError, ValueError):
            raise ValueError(f"subset_by_index must be a pair of integers (i, j), got {subset_by_index!r}") from None
        if not (0 <= i <= j < n):
            raise ValueError(f"subset_by_index must have 0 <= i <= j < n = {n}, got {subset_by_index!r}")
        if sigma is not None or OPinv is not None or start is not None:
            raise ValueError("subset_by_index takes no sigma, OPinv, v0 or X0")
        if csr is None or (M is not None and mass is None):
            raise ValueError("subset_by_index needs A (and M) as matrices: it factors A - tM")
        indices = (i, j)

    # --- the solves ---------------------------------------------------------
    # The operands as ("csr", arrays, name) or ("op", operator, name).
    a_in = ("csr", csr, "A") if csr is not None else ("op", A, "A")
    m_in = None if M is None else (("csr", mass, "M") if mass is not None else ("op", M, "M"))

    def call(p, nev, target, K, B, shift_invert, op, pc, x0, vectors):
        p = dict(p, nev=nev, target=target)
        if isinstance(target, dict) and K[0] == "csr" and B is not None and B[0] == "op" and precond is None:
            # A named preconditioner is built from A - sigma I, which M as an
            # operator leaves out: near sigma it stalls the solve (jacobi, ilu0)
            p["precond"] = "none"
        kw = dict(precond=pc, x0=x0, deflation=defl, vectors=vectors)
        if interval is not None:
            kw["interval"] = interval
        if indices is not None:
            kw["index_range"] = indices
        if op is not None:  # OPinv: no preconditioner
            kw.update(matvec=op, precond=None)
        elif K[0] == "csr":
            kw.update(indptr=K[1][1], indices=K[1][2], data=K[1][3], sigma=shift_invert)
        else:
            kw["matvec"] = _block_callable(K[1], n, K[2])
        if B is not None and op is None:
            if B[0] == "csr":
                kw.update(mass_indptr=B[1][1], mass_indices=B[1][2], mass_data=B[1][3])
            else:
                kw["mass_matvec"] = _block_callable(B[1], n, B[2])
        return _core.solve(n, _json.dumps(p), **kw)

    def run(nev, target, shift_invert=None, op=None, K=a_in, B=m_in, pc=pc_call, x0=start):
        """One solve; with tol = 0, then again from its own vectors at the
        tightest tol of _TOL_LADDER that converges (none: the first solve)."""
        vectors = return_eigenvectors or machine_tol
        r = call(params, nev, target, K, B, shift_invert, op, pc, x0, vectors)
        if not machine_tol or r[0] != 0 or len(r[1]) == 0:
            return r
        raws = [r[5]]
        budget = max(50, 2 * _json.loads(r[5])["outer_iterations"])
        if "max_outer" in params:
            budget = min(params["max_outer"], budget)
        spent = _json.loads(r[5])["matvecs"]
        for t in _TOL_LADDER:
            p = dict(params, tol=t, max_outer=budget)
            if "max_matvecs" in params:  # the budget is the call's
                if params["max_matvecs"] <= spent:
                    break
                p["max_matvecs"] = params["max_matvecs"] - spent
            start_again = None if interval is not None or indices is not None else r[2]
            r2 = call(p, nev, target, K, B, shift_invert, op, pc, start_again, vectors)
            raws.append(r2[5])
            spent += _json.loads(r2[5])["matvecs"]
            if r2[0] == 0 and len(r2[1]) == len(r[1]):
                r = r2
                break
        return r[:5] + (_merge_stats(raws),)

    def mapped(r, back):
        status, w, v, conv_, rn, st = r
        if back is not None:
            w = back(w)
        return status, w, v, conv_, rn, st

    # which -> (nev, target) pieces; with sigma, which applies to 1/(lambda - sigma)
    def targets(which):
        if which == "BE":
            hi = (k + 1) // 2
            return [(hi, "largest"), (k - hi, "smallest")]
        return [(k, {"LM": "largest_magnitude", "SM": {"closest": 0.0}, "LA": "largest", "SA": "smallest"}[which])]

    results = []
    if interval is not None or indices is not None:
        # every eigenpair in [a, b] (of indices i..j): k and which are not used
        results.append(run(1, "smallest"))
    elif sigma is not None and (
        mode != "normal" or which == "SM" or (which != "LM" and OPinv is None and (M is not None or csr is None))
    ):
        # which on the transformed values of a mode, by solves for the eigenvalues
        # closest to a point and at the ends, until the selection is certain
        results.append(
            _select_transformed(run, n, k, which, mode, sigma, a_in, m_in, pc_call, return_eigenvectors)
        )
    elif M is not None and OPinv is None and (sigma is not None or which == "SM"):
        if sigma is not None and csr is not None and mass is not None:
            # shift-and-invert on A - sigma M (the library maps back)
            results.append(run(k, "largest_magnitude", shift_invert=sigma))
        else:
            # operators: the eigenvalues closest to sigma (or 0) directly
            results.append(run(k, {"closest": 0.0 if sigma is None else sigma}))
    elif sigma is None and which == "SM" and csr is not None:
        # the eigenvalues closest to 0: shift-and-invert at 0 (ARPACK's advice), or
        # interior Jacobi-Davidson when A is singular
        try:
            results.append(run(k, "largest_magnitude", shift_invert=0.0))
        except JdmgError:
            results.append(run(k, {"closest": 0.0}))
    elif sigma is None:
        for nev, tgt in targets(which):
            if nev:
                results.append(run(nev, tgt))
    elif OPinv is not None or csr is not None:
        # shift-and-invert: B = (A - sigma I)^-1, theta = 1/(lambda - sigma)
        def back(t):
            with _np.errstate(divide="ignore"):
                return sigma + 1.0 / t

        opinv = None
        if OPinv is not None:
            if hasattr(OPinv, "shape") and tuple(OPinv.shape) != (n, n):
                raise ValueError(f"OPinv has shape {tuple(OPinv.shape)}, A {(n, n)}")
            opinv = _block_callable(OPinv, n, "OPinv")
            params.setdefault("maxits", 0)
            params["precond"] = "none"
        for nev, tgt in targets(which):
            if not nev:
                continue
            if opinv is not None and M is not None:
                # OPinv = (A - sigma M)^-1: nu of OPinv M x = nu x, as the pencil
                # (M OPinv M) x = nu M x (symmetric, M-orthonormal vectors)
                sandwich = ("op", _sandwich(OPinv, M if hasattr(M, "shape") else _np.asarray(M, dtype=_np.float64), n), "OPinv")
                results.append(mapped(run(nev, tgt, K=sandwich, pc=None), back))
            elif opinv is not None:
                results.append(mapped(run(nev, tgt, op=opinv), back))
            elif tgt == "largest_magnitude":
                results.append(run(nev, tgt, shift_invert=sigma))  # the library maps back
            else:
                results.append(mapped(run(nev, tgt, shift_invert=sigma), back))
    else:
        # a LinearOperator, which = 'LM': the eigenvalues closest to sigma directly
        results.append(run(k, {"closest": sigma}))

    # --- results -----------------------------------------------------------
    status = max(r[0] for r in results)
    w = _np.concatenate([r[1] for r in results])
    converged = _np.concatenate([r[3] for r in results])
    rnorms = _np.concatenate([r[4] for r in results])
    if return_eigenvectors:
        v = _np.concatenate([r[2] for r in results]).reshape(-1, n).T  # (n, nev)
    order = _np.argsort(w, kind="stable")
    w, converged, rnorms = w[order], converged[order], rnorms[order]
    if return_eigenvectors:
        v = v[:, order]
    stats = None
    if return_stats or status:
        raw = _merge_stats([r[5] for r in results])  # 'BE': the counters of both solves
        stats = _stats(raw, rnorms, converged, _time.perf_counter() - t0)
    if status:
        ev = w[converged]
        vec = v[:, converged] if return_eigenvectors else None
        raise NoConvergence(
            f"jdmg: {int(converged.sum())} of {len(w) if interval is not None or indices is not None else k} eigenpairs converged "
            f"after {stats['outer_iterations']} outer iterations and {stats['matvecs']} matvecs",
            ev,
            vec,
            stats,
        )
    out = (w, v) if return_eigenvectors else (w,)
    if return_stats:
        out = out + (stats,)
    return out if len(out) > 1 else out[0]


from ._svds import svds  # noqa: E402  (uses the helpers above)
