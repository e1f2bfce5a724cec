"""jdmg.eigsh against scipy.sparse.linalg.eigsh and numpy.linalg.eigh, on cases
shaped after SciPy's eigsh tests (test_arpack.py: which/sigma modes, dtypes,
LinearOperator, v0, no convergence) and PRIMME's (preconditioners, return_stats,
block start vectors, lock)."""

import threading

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.linalg as sla

import jdmg


def lap1d(n):
    return sp.diags([-np.ones(n - 1), 2 * np.ones(n), -np.ones(n - 1)], [-1, 0, 1], format="csr")


def lap2d(m):
    t = lap1d(m)
    i = sp.identity(m, format="csr")
    return (sp.kron(t, i) + sp.kron(i, t)).tocsr()


def random_spd(n, density=0.05, seed=0):
    rng = np.random.default_rng(seed)
    b = sp.random(n, n, density=density, random_state=rng, format="csr")
    a = b + b.T
    # diagonally dominant: SPD, eigenvalues spread
    d = np.asarray(abs(a).sum(axis=1)).ravel() + rng.uniform(1, 10, n)
    return (a + sp.diags(d)).tocsr()


def random_indefinite(n, seed=1):
    rng = np.random.default_rng(seed)
    b = sp.random(n, n, density=0.05, random_state=rng, format="csr")
    return (b + b.T + sp.diags(rng.uniform(-5, 5, n))).tocsr()


def dense_eigs(a):
    return np.linalg.eigh(a.toarray() if sp.issparse(a) else np.asarray(a))


def expected(a, k, which, sigma=None):
    """The k eigenvalues SciPy's conventions select, ascending (from eigh)."""
    w = dense_eigs(a)[0]
    key = w if sigma is None else 1.0 / (w - sigma)
    if which == "LA":
        sel = np.argsort(key)[-k:]
    elif which == "SA":
        sel = np.argsort(key)[:k]
    elif which == "LM":
        sel = np.argsort(np.abs(key))[-k:]
    elif which == "SM":
        sel = np.argsort(np.abs(key))[:k]
    else:  # BE
        hi = (k + 1) // 2
        o = np.argsort(key)
        sel = np.concatenate([o[: k - hi], o[len(o) - hi :]])
    return np.sort(w[sel])


def check_pairs(a, w, v, tol=1e-8):
    """Ascending, unit, orthogonal eigenvectors with small residuals."""
    assert np.all(np.diff(w) >= -1e-12)
    assert v.shape == (a.shape[0], len(w))
    np.testing.assert_allclose(v.T @ v, np.eye(len(w)), atol=1e-8)
    av = a @ v if not isinstance(a, sla.LinearOperator) else a.matmat(v)
    scale = max(1.0, np.abs(w).max())
    assert np.linalg.norm(av - v * w, axis=0).max() <= tol * scale


# ---------------------------------------------------------------------------
# which, sigma, matrix kinds


@pytest.mark.parametrize("which", ["LA", "SA", "LM", "SM", "BE"])
def test_which_diagonal(which):
    # SciPy's DiagonalGenerator-like case: distinct eigenvalues on both sides of 0
    d = np.linspace(-3.0, 7.0, 60)
    a = sp.diags(d, format="csr")
    w, v = jdmg.eigsh(a, k=5, which=which)
    np.testing.assert_allclose(w, expected(a, 5, which), atol=1e-9)
    check_pairs(a, w, v)


@pytest.mark.parametrize("which", ["LA", "SA", "LM", "BE"])
def test_which_against_scipy(which):
    a = random_indefinite(150)
    w, v = jdmg.eigsh(a, k=4, which=which)
    ws = sla.eigsh(a, k=4, which=which, return_eigenvectors=False)
    np.testing.assert_allclose(w, np.sort(ws), rtol=1e-8, atol=1e-9)
    check_pairs(a, w, v)


def test_default_which_is_lm_and_k_is_6():
    a = random_indefinite(120, seed=3)
    w = jdmg.eigsh(a, return_eigenvectors=False)
    assert w.shape == (6,)
    np.testing.assert_allclose(w, expected(a, 6, "LM"), atol=1e-9)


def test_default_lm_set_is_right_in_every_repeated_call():
    # The drop-in report's matrix: scipy.sparse.random of order 2,000 and density
    # 0.001, symmetrized; its largest magnitudes lie at both ends, with nearly
    # equal values at the two (7 of 20 identical calls once returned a value of
    # the wrong end). Every call, and every seed, gives LAPACK's set.
    rng = np.random.default_rng(0)
    r = sp.random(2000, 2000, density=0.001, random_state=rng, format="csr")
    a = ((r + r.T) / 2).tocsr()
    want = expected(a, 6, "LM")
    assert want[0] < 0 < want[-1]
    for call in range(20):
        w = jdmg.eigsh(a, k=6, rng=call % 4, return_eigenvectors=False)
        np.testing.assert_allclose(w, want, rtol=1e-8, atol=1e-9, err_msg=f"call {call}")


def test_laplacian_1d_analytic():
    n = 300
    w, v = jdmg.eigsh(lap1d(n), k=6, which="SA", tol=1e-10)
    exact = 2 - 2 * np.cos(np.arange(1, 7) * np.pi / (n + 1))
    np.testing.assert_allclose(w, exact, atol=1e-10)
    check_pairs(lap1d(n), w, v)


def test_laplacian_2d_multiple_eigenvalues():
    a = lap2d(20)
    w, v = jdmg.eigsh(a, k=5, which="SA")
    np.testing.assert_allclose(w, expected(a, 5, "SA"), atol=1e-9)
    check_pairs(a, w, v)


def test_random_spd_against_eigh():
    a = random_spd(200)
    for which in ("SA", "LA"):
        w, v = jdmg.eigsh(a, k=6, which=which)
        np.testing.assert_allclose(w, expected(a, 6, which), rtol=1e-10)
        check_pairs(a, w, v)
        # the eigenvectors match eigh's up to sign
        ew, ev = dense_eigs(a)
        idx = [np.argmin(np.abs(ew - x)) for x in w]
        np.testing.assert_allclose(np.abs(np.sum(v * ev[:, idx], axis=0)), 1.0, atol=1e-8)


@pytest.mark.parametrize("which", ["LM", "LA", "SA", "SM", "BE"])
def test_sigma_shift_invert_against_scipy(which):
    a = random_spd(120, seed=4)
    sigma = float(np.median(dense_eigs(a)[0])) + 0.1234
    w, v = jdmg.eigsh(a, k=4, sigma=sigma, which=which)
    np.testing.assert_allclose(w, expected(a, 4, which, sigma), rtol=1e-9)
    check_pairs(a, w, v)
    if which != "SM":
        ws = sla.eigsh(a, k=4, sigma=sigma, which=which, return_eigenvectors=False)
        np.testing.assert_allclose(w, np.sort(ws), rtol=1e-9)


def test_sigma_with_linear_operator_interior():
    a = sp.diags(np.arange(1.0, 101.0), format="csr")
    op = sla.aslinearoperator(a)
    w, v = jdmg.eigsh(op, k=3, sigma=50.2, maxits=20, tol=1e-10)
    np.testing.assert_allclose(w, [49.0, 50.0, 51.0], atol=1e-8)
    check_pairs(a, w, v)


def test_default_tol_converges_with_shift_invert_on_a_multiple_eigenvalue():
    # lap3d:12 at sigma = 1: the eigenvalues nearest 1 are one 3-fold and one 6-fold
    # value; tol = 0 must not ask for more than double precision gives
    t = lap1d(12)
    i = sp.identity(12)
    a = (sp.kron(sp.kron(t, i), i) + sp.kron(sp.kron(i, t), i) + sp.kron(sp.kron(i, i), t)).tocsr()
    w, v = jdmg.eigsh(a, k=4, sigma=1.0, maxiter=2000)
    e1 = 2 - 2 * np.cos(np.arange(1, 13) * np.pi / 13)
    ew = (e1[:, None, None] + e1[None, :, None] + e1[None, None, :]).ravel()
    np.testing.assert_allclose(w, np.sort(ew[np.argsort(np.abs(ew - 1.0))[:4]]), rtol=1e-10)
    check_pairs(a, w, v)


@pytest.mark.parametrize("kw", [dict(which="SM"), dict(sigma=0.0), dict(sigma=0.5)])
def test_sigma_at_an_eigenvalue(kw):
    # a double eigenvalue at 1e-16 and sigma = 0 (which='SM' shifts there too), and
    # sigma exactly at the eigenvalue 0.5: the pairs at sigma are found by inverse
    # iteration, the rest on the inverse restricted to their complement (the loop on
    # B ran to its budget before: 3.6 s and over 10^5 products for n = 60)
    rng = np.random.default_rng(0)
    n = 60
    q, _ = np.linalg.qr(rng.standard_normal((n, n)))
    lam = np.concatenate([[1e-16, 1e-16], np.linspace(0.5, 3.0, n - 2)])
    a = (q * lam) @ q.T
    a = sp.csr_matrix((a + a.T) / 2)
    w, v, stats = jdmg.eigsh(a, k=3, return_stats=True, **kw)
    want = [0.0, 0.0, 0.5] if kw.get("sigma", 0.0) == 0.0 else [0.5, 0.5 + 2.5 / 57, 0.5 + 5.0 / 57]
    np.testing.assert_allclose(np.sort(w), np.sort(want), atol=1e-12)
    check_pairs(a, w, v)
    assert stats["numMatvecs"] < 2000, stats["numMatvecs"]


def test_sigma_with_opinv():
    a = lap1d(200)
    sigma = 1.01
    lu = sla.splu((a - sigma * sp.identity(200)).tocsc())
    opinv = sla.LinearOperator((200, 200), matvec=lu.solve, matmat=lu.solve)
    w, v = jdmg.eigsh(sla.aslinearoperator(a), k=4, sigma=sigma, OPinv=opinv)
    np.testing.assert_allclose(w, expected(a, 4, "LM", sigma), rtol=1e-10)
    check_pairs(a, w, v)


@pytest.mark.parametrize(
    "convert",
    [
        lambda a: a.tocsr(),
        lambda a: a.tocsc(),
        lambda a: a.tocoo(),
        lambda a: a.todok(),
        lambda a: sp.csr_array(a),
        lambda a: sp.coo_array(a),
        lambda a: a.toarray(),
        lambda a: np.asmatrix(a.toarray()),
        lambda a: a.toarray().tolist(),
    ],
    ids=["csr", "csc", "coo", "dok", "csr_array", "coo_array", "ndarray", "matrix", "list"],
)
def test_input_kinds(convert):
    a = random_spd(80, seed=5)
    w, v = jdmg.eigsh(convert(a), k=3, which="SA")
    np.testing.assert_allclose(w, expected(a, 3, "SA"), rtol=1e-10)
    check_pairs(a, w, v)


def test_unsorted_and_duplicate_entries_are_summed():
    a = random_spd(50, seed=6).tocoo()
    # split every entry in two halves, shuffled: COO with duplicates
    rng = np.random.default_rng(0)
    p = rng.permutation(2 * a.nnz)
    r = np.concatenate([a.row, a.row])[p]
    c = np.concatenate([a.col, a.col])[p]
    d = np.concatenate([a.data / 2, a.data / 2])[p]
    b = sp.coo_matrix((d, (r, c)), shape=a.shape)
    w = jdmg.eigsh(b, k=3, which="LA", return_eigenvectors=False)
    np.testing.assert_allclose(w, expected(a.tocsr(), 3, "LA"), rtol=1e-10)


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64, np.int8, np.bool_])
def test_dtype_conversion(dtype):
    a = lap2d(12)
    if dtype == np.bool_:
        a = (abs(a) > 0).astype(np.float64)  # the adjacency with self-loops: symmetric 0/1
    b = a.astype(dtype)
    w, v = jdmg.eigsh(b, k=4, which="LA")
    assert w.dtype == np.float64 and v.dtype == np.float64
    np.testing.assert_allclose(w, expected(a, 4, "LA"), rtol=1e-10)
    w2 = jdmg.eigsh(b.toarray(), k=4, which="LA", return_eigenvectors=False)
    np.testing.assert_allclose(w2, w, rtol=1e-10)


def test_k_equal_n_small_matrix():
    a = random_spd(8, density=0.5, seed=7)
    w, v = jdmg.eigsh(a, k=8, which="SA")
    np.testing.assert_allclose(w, dense_eigs(a)[0], rtol=1e-9)


@pytest.mark.parametrize("n", [6, 20])
@pytest.mark.parametrize("sigma", [None, 0.5])
@pytest.mark.parametrize("which", ["LM", "SM", "LA", "SA", "BE"])
def test_small_random_matrices_every_mode(n, sigma, which):
    # SciPy's test_symmetric_modes: small random symmetric matrices (indefinite),
    # k = 1..3, SciPy's ncv = 2k+1, float32 and float64, dense, sparse and
    # LinearOperator, with and without v0
    rng = np.random.default_rng(n)
    m = rng.standard_normal((n, n))
    ad = m + m.T
    for k in (1, 2, 3):
        want = expected(ad, k, which, sigma)
        for dtype in (np.float32, np.float64):
            a = ad.astype(dtype)
            kinds = [a, sp.csr_matrix(a), sla.aslinearoperator(a)]
            for x in kinds:
                for v0 in (None, np.ones(n)):
                    w, v = jdmg.eigsh(x, k=k, which=which, sigma=sigma, ncv=min(n, 2 * k + 1), v0=v0)
                    atol = (1e-4 if dtype == np.float32 else 1e-8) * np.abs(want).max()
                    np.testing.assert_allclose(w, want, atol=atol)
                    assert np.linalg.norm(ad @ v - v * w, axis=0).max() < 1e-6 * np.abs(ad).sum()


# ---------------------------------------------------------------------------
# LinearOperator, preconditioners, start vectors


class CountingOperator(sla.LinearOperator):
    """A LinearOperator with both _matvec and _matmat that records block sizes."""

    def __init__(self, a):
        super().__init__(dtype=np.float64, shape=a.shape)
        self.a = a
        self.blocks = []
        self.vectors = 0

    def _matvec(self, x):
        self.vectors += 1
        return self.a @ x

    def _matmat(self, X):
        self.blocks.append(X.shape[1])
        return self.a @ X


def test_linear_operator_called_by_blocks():
    a = lap2d(15)
    op = CountingOperator(a)
    w, v, st = jdmg.eigsh(op, k=4, which="SA", block=4, return_stats=True)
    np.testing.assert_allclose(w, expected(a, 4, "SA"), rtol=1e-9)
    assert max(op.blocks) > 1, "blocks go through matmat"
    assert op.vectors == 0
    assert sum(op.blocks) == st["matvecs"]


def test_linear_operator_matvec_only():
    a = random_spd(90, seed=8)
    calls = []

    def mv(x):
        calls.append(x.shape)
        return a @ x

    op = sla.LinearOperator(a.shape, matvec=mv, dtype=np.float64)
    w, v = jdmg.eigsh(op, k=3, which="LA")
    np.testing.assert_allclose(w, expected(a, 3, "LA"), rtol=1e-10)
    assert calls and all(s in ((90,), (90, 1)) for s in calls)


def test_duck_typed_operator_with_matvec():
    a = random_spd(60, seed=9)

    class Op:
        shape = a.shape

        def matvec(self, x):
            return a @ x

    w = jdmg.eigsh(Op(), k=2, which="SA", return_eigenvectors=False)
    np.testing.assert_allclose(w, expected(a, 2, "SA"), rtol=1e-10)


def test_callable_preconditioner():
    a = random_spd(300, seed=10)
    d = a.diagonal()
    seen = []

    def jacobi(r):
        seen.append(r.shape)
        return r / d[:, None]

    w, v, st = jdmg.eigsh(a, k=4, which="SA", precond=jacobi, return_stats=True)
    np.testing.assert_allclose(w, expected(a, 4, "SA"), rtol=1e-10)
    assert seen and all(s[0] == 300 and len(s) == 2 for s in seen)
    assert st["numPreconds"] == sum(s[1] for s in seen)
    check_pairs(a, w, v)


@pytest.mark.parametrize("kind", ["sparse", "dense", "linop"])
def test_matrix_and_linear_operator_preconditioners(kind):
    a = lap2d(14)
    p = sp.diags(1.0 / a.diagonal(), format="csr")
    pc = {"sparse": p, "dense": p.toarray(), "linop": sla.aslinearoperator(p)}[kind]
    w, v = jdmg.eigsh(sla.aslinearoperator(a), k=3, which="SA", precond=pc)
    np.testing.assert_allclose(w, expected(a, 3, "SA"), rtol=1e-9)


@pytest.mark.parametrize("name", ["auto", "none", "jacobi", "ilu0", "ilut", "spai", "fsai"])
def test_named_preconditioners(name):
    a = random_spd(150, seed=11)
    w = jdmg.eigsh(a, k=3, which="SA", precond=name, return_eigenvectors=False)
    np.testing.assert_allclose(w, expected(a, 3, "SA"), rtol=1e-10)


@pytest.mark.parametrize("method", ["auto", "bicgstab", "qmrs", "jdqmr"])
def test_methods(method):
    a = lap2d(16)
    w = jdmg.eigsh(a, k=4, which="SA", method=method, return_eigenvectors=False)
    np.testing.assert_allclose(w, expected(a, 4, "SA"), rtol=1e-9)


def test_v0_at_an_eigenvector_converges_at_once():
    a = random_spd(200, seed=12)
    ew, ev = dense_eigs(a)
    w, v, st = jdmg.eigsh(a, k=1, which="SA", v0=ev[:, 0], return_stats=True)
    np.testing.assert_allclose(w, ew[:1], rtol=1e-12)
    assert st["numOuterIterations"] <= 2
    assert st["initial_vectors"] == 1
    # a block X0 of start vectors
    w, v, st = jdmg.eigsh(a, k=3, which="SA", X0=ev[:, :3], return_stats=True)
    np.testing.assert_allclose(w, ew[:3], rtol=1e-12)
    assert st["initial_vectors"] == 3


def test_lock_deflates():
    a = random_spd(120, seed=13)
    ew, ev = dense_eigs(a)
    w, v = jdmg.eigsh(a, k=2, which="SA", lock=ev[:, :2])
    np.testing.assert_allclose(w, ew[2:4], rtol=1e-10)
    assert np.abs(ev[:, :2].T @ v).max() < 1e-8


def test_threads_and_seed_give_the_same_eigenvalues():
    a = lap2d(30)
    w1 = jdmg.eigsh(a, k=4, which="SA", threads=1, return_eigenvectors=False)
    w2 = jdmg.eigsh(a, k=4, which="SA", threads=2, seed=7, return_eigenvectors=False)
    np.testing.assert_allclose(w1, w2, rtol=1e-9)


def test_return_stats_keys():
    a = lap1d(100)
    w, v, st = jdmg.eigsh(a, k=2, which="SA", return_stats=True)
    for key in (
        "numMatvecs",
        "numOuterIterations",
        "numRestarts",
        "numPreconds",
        "numInnerSteps",
        "elapsedTime",
        "rnorms",
        "matvecs",
        "outer_iterations",
        "inner_steps",
        "wall_seconds",
    ):
        assert key in st, key
    assert st["numMatvecs"] > 0 and st["elapsedTime"] > 0
    assert np.all(st["rnorms"] <= 1e-10 * 4.0) and np.all(st["converged"])  # tol=0: 1e-10 ||A||
    w2, st2 = jdmg.eigsh(a, k=2, which="SA", return_eigenvectors=False, return_stats=True)
    np.testing.assert_allclose(w2, w)


def test_extra_jdparams_options():
    a = lap2d(12)
    w = jdmg.eigsh(a, k=3, which="SA", verify="always", restart_size=10, ncv=20, return_eigenvectors=False)
    np.testing.assert_allclose(w, expected(a, 3, "SA"), rtol=1e-9)
    with pytest.raises(ValueError, match="no_such_option"):
        jdmg.eigsh(a, k=3, no_such_option=1)
    # A whole group of settings as a dict, beside flat names.
    w = jdmg.eigsh(a, k=3, which="SA", basis={"restart_size": 10, "locking": True}, verify="always",
                   return_eigenvectors=False)
    np.testing.assert_allclose(w, expected(a, 3, "SA"), rtol=1e-9)
    # A group's key given flat is refused naming its place.
    with pytest.raises(ValueError, match="preconditioner.kind"):
        jdmg.eigsh(a, k=3, kind="ilu0")
    with pytest.raises(ValueError, match="given twice"):
        jdmg.eigsh(a, k=3, restart_size=8, basis={"restart_size": 10})


# ---------------------------------------------------------------------------
# errors


class Boom(Exception):
    pass


def test_exception_in_operator_reaches_the_caller_unchanged():
    a = lap2d(10)
    err = Boom("from matmat")
    count = [0]

    def mm(X):
        count[0] += 1
        if count[0] == 3:
            raise err
        return a @ X

    op = sla.LinearOperator(a.shape, matvec=lambda x: a @ x, matmat=mm, dtype=np.float64)
    with pytest.raises(Boom) as info:
        jdmg.eigsh(op, k=3, which="SA")
    assert info.value is err
    assert count[0] == 3, "no callback after the failing one"


def test_exception_in_preconditioner_reaches_the_caller():
    a = random_spd(100, seed=14)

    def pc(r):
        raise KeyError("precond failed")

    with pytest.raises(KeyError, match="precond failed"):
        jdmg.eigsh(a, k=2, which="SA", precond=pc)


def test_operator_returning_a_wrong_shape_is_a_value_error():
    a = lap1d(50)
    op = sla.LinearOperator(a.shape, matvec=lambda x: np.ones(7), dtype=np.float64)
    with pytest.raises(ValueError):
        jdmg.eigsh(op, k=2)


def test_complex_input_is_solved_as_hermitian_or_refused():
    # complex A goes to the Hermitian path (test_complex.py); a real A keeps
    # refusing complex start vectors and shifts
    a = lap1d(20)
    w = jdmg.eigsh(a, k=2, return_eigenvectors=False)
    wc = jdmg.eigsh(a.astype(np.complex128), k=2, return_eigenvectors=False)
    np.testing.assert_allclose(wc, w, rtol=1e-10)
    wo = jdmg.eigsh(sla.aslinearoperator(a.astype(np.complex128)), k=2, return_eigenvectors=False)
    np.testing.assert_allclose(wo, w, rtol=1e-10)
    with pytest.raises(ValueError):  # not Hermitian
        jdmg.eigsh(a.toarray() * (1 + 1j), k=2)
    with pytest.raises(TypeError):
        jdmg.eigsh(a, k=2, v0=np.ones(20, dtype=complex))
    with pytest.raises(TypeError):
        jdmg.eigsh(a, k=2, sigma=1 + 1j)


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(A=np.ones((3, 4))),
        dict(A=np.ones(5)),
        dict(A=sp.random(5, 6, density=0.5, format="csr")),
        dict(A=sla.aslinearoperator(np.ones((4, 5)))),
        dict(A=np.zeros((0, 0))),
        dict(k=0),
        dict(k=-1),
        dict(which="XX"),
        dict(tol=np.nan),
        dict(v0=np.ones(29)),
        dict(v0=np.ones((30, 2, 1))),
        dict(v0=np.full(30, np.nan)),
        dict(ncv=1, k=4),
        dict(ncv=4, k=4),
        dict(maxiter=0),
        dict(precond="ilu9"),
        dict(precond=sp.identity(29)),
        dict(method="lanczos"),
        dict(conv="nope"),
        dict(sigma=np.inf),
        dict(mode="nope", sigma=1.0),
        dict(Minv=sp.identity(30)),
        dict(M=np.ones((3, 3))),
        dict(OPinv=sp.identity(30)),
        dict(v0=np.ones(30), X0=np.ones(30)),
    ],
)
def test_bad_arguments_are_value_errors(kwargs):
    kw = dict(A=lap1d(30), k=2)
    kw.update(kwargs)
    with pytest.raises(ValueError):
        jdmg.eigsh(kw.pop("A"), **kw)


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_non_finite_matrix_is_a_value_error(bad):
    a = lap1d(30).tolil()
    a[3, 3] = bad
    with pytest.raises(ValueError, match="NaN or Inf"):
        jdmg.eigsh(a.tocsr(), k=2)
    with pytest.raises(ValueError, match="NaN or Inf"):
        jdmg.eigsh(a.toarray(), k=2)


def test_non_symmetric_matrix_is_a_value_error():
    a = lap1d(30).tolil()
    a[0, 5] = 3.0
    with pytest.raises(ValueError, match="symmetric"):
        jdmg.eigsh(a.tocsr(), k=2)


# ---------------------------------------------------------------------------
# generalized problems A x = lambda M x


def fem_pair(n):
    """1-D linear finite elements: stiffness tridiag(-1, 2, -1), mass tridiag(1, 4, 1)/6."""
    m = sp.diags([np.ones(n - 1), 4 * np.ones(n), np.ones(n - 1)], [-1, 0, 1], format="csr") / 6.0
    return lap1d(n), m.tocsr()


def generalized_eigs(a, m):
    import scipy.linalg

    return scipy.linalg.eigh(a.toarray(), m.toarray())


@pytest.mark.parametrize("which", ["LA", "SA", "LM", "SM", "BE"])
def test_generalized_which(which):
    a, m = fem_pair(120)
    ew = generalized_eigs(a, m)[0]
    w, v = jdmg.eigsh(a, k=4, M=m, which=which)
    o = np.argsort(ew)
    oa = np.argsort(np.abs(ew))
    sel = {"LA": o[-4:], "SA": o[:4], "LM": oa[-4:], "SM": oa[:4], "BE": np.concatenate([o[:2], o[-2:]])}[which]
    np.testing.assert_allclose(w, np.sort(ew[sel]), rtol=1e-8)
    np.testing.assert_allclose(v.T @ (m @ v), np.eye(4), atol=1e-8)  # M-orthonormal
    r = a @ v - (m @ v) * w
    assert np.linalg.norm(r, axis=0).max() < 1e-7 * np.abs(w).max()


def test_generalized_against_scipy_and_positional_m():
    rng = np.random.default_rng(21)
    a = random_spd(100, seed=21)
    b = sp.random(100, 100, density=0.03, random_state=rng)
    m = (b @ b.T + sp.identity(100)).tocsr()  # SPD
    w, v = jdmg.eigsh(a, 3, m, which="SA")  # SciPy's positional order: A, k, M
    ws = sla.eigsh(a, k=3, M=m, which="SA", return_eigenvectors=False)
    np.testing.assert_allclose(w, np.sort(ws), rtol=1e-9)


@pytest.mark.parametrize("kind", ["linop_m", "linop_both", "dense", "precond"])
def test_generalized_operators(kind):
    a, m = fem_pair(80)
    ew = np.sort(generalized_eigs(a, m)[0])
    if kind == "linop_m":
        w, v = jdmg.eigsh(a, k=3, M=sla.aslinearoperator(m), which="SA")
    elif kind == "linop_both":
        w, v = jdmg.eigsh(sla.aslinearoperator(a), k=3, M=sla.aslinearoperator(m), which="SA")
    elif kind == "dense":
        w, v = jdmg.eigsh(a.toarray(), k=3, M=m.toarray(), which="SA")
    else:
        d = a.diagonal()
        w, v = jdmg.eigsh(a, k=3, M=m, which="SA", precond=lambda r: r / d[:, None])
    np.testing.assert_allclose(w, ew[:3], rtol=1e-8)


def test_generalized_sigma_gives_the_closest():
    a, m = fem_pair(100)
    ew = generalized_eigs(a, m)[0]
    sigma = float(np.median(ew)) + 0.01
    want = np.sort(ew[np.argsort(np.abs(ew - sigma))[:3]])
    # matrices: shift-and-invert on A - sigma M (it counts the eigenvalues below sigma)
    w, v, st = jdmg.eigsh(a, k=3, M=m, sigma=sigma, return_stats=True)
    np.testing.assert_allclose(w, want, rtol=1e-8)
    np.testing.assert_allclose(v.T @ (m @ v), np.eye(3), atol=1e-8)
    r = a @ v - (m @ v) * w
    assert np.linalg.norm(r, axis=0).max() <= 1e-6 * abs(w).max()
    # operators: interior Jacobi-Davidson, the same eigenvalues
    w2, _ = jdmg.eigsh(sla.aslinearoperator(a), k=3, M=sla.aslinearoperator(m), sigma=sigma, maxits=20)
    np.testing.assert_allclose(w2, want, rtol=1e-8)
    # which on 1/(lambda - sigma): 'LA' gives the eigenvalues just above sigma
    w3 = jdmg.eigsh(a, k=3, M=m, sigma=sigma, which="LA", return_eigenvectors=False)
    np.testing.assert_allclose(w3, np.sort(ew[ew > sigma])[:3], rtol=1e-8)


def test_generalized_errors():
    a, m = fem_pair(30)
    with pytest.raises(ValueError):
        jdmg.eigsh(a, k=2, M=sp.identity(29))
    with pytest.raises(ValueError):  # complex and not Hermitian
        jdmg.eigsh(a, k=2, M=m.astype(complex) * (1 + 1j))
    with pytest.raises(ValueError):  # not positive definite
        jdmg.eigsh(a, k=2, M=-m)
    with pytest.raises(ValueError):  # not symmetric
        mm = m.tolil()
        mm[0, 3] = 1.0
        jdmg.eigsh(a, k=2, M=mm.tocsr())


def test_no_convergence_carries_the_converged_pairs():
    a = lap2d(30)
    with pytest.raises(jdmg.NoConvergence) as info:
        jdmg.eigsh(a, k=6, which="SA", maxiter=8, block=1, tol=1e-12, precond="none", method="bicgstab")
    e = info.value
    assert isinstance(e, sla.ArpackNoConvergence)
    assert isinstance(e, RuntimeError)
    assert "converged" in str(e) and "ARPACK" not in str(e)
    nconv = len(e.eigenvalues)
    assert nconv < 6
    assert e.eigenvectors.shape == (900, nconv)
    assert e.stats["numOuterIterations"] == 8
    if nconv:
        check_pairs(a, e.eigenvalues, e.eigenvectors, tol=1e-10)
        ew = dense_eigs(a)[0]
        for x in e.eigenvalues:
            assert np.min(np.abs(ew - x)) < 1e-9


def test_no_convergence_with_a_matvec_budget():
    a = lap2d(30)
    with pytest.raises(sla.ArpackNoConvergence) as info:
        jdmg.eigsh(a, k=4, which="SA", maxmatvecs=20, precond="none")
    assert info.value.stats["matvecs"] >= 20


def test_concurrent_solves_from_threads():
    # the GIL is released while Rust computes: solves in two threads both
    # complete (and the Python operator of one is served while the other runs)
    a = lap2d(25)
    op = sla.aslinearoperator(a)
    out = {}

    def run(name, arg):
        out[name] = jdmg.eigsh(arg, k=3, which="SA", return_eigenvectors=False)

    ts = [threading.Thread(target=run, args=("m", a)), threading.Thread(target=run, args=("o", op))]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    np.testing.assert_allclose(out["m"], expected(a, 3, "SA"), rtol=1e-9)
    np.testing.assert_allclose(out["o"], out["m"], rtol=1e-9)


def test_subset_by_value_returns_every_eigenvalue_in_the_interval():
    # lap2d:12: double eigenvalues (i, j and j, i); [0.5, 2.0] against numpy.
    a = lap2d(12)
    ref = np.linalg.eigvalsh(a.toarray())
    want = ref[(ref >= 0.5) & (ref <= 2.0 + 1e-9)]  # 2 is a multiple eigenvalue
    w, v, st = jdmg.eigsh(a, subset_by_value=(0.5, 2.0), tol=1e-10, return_stats=True)
    assert len(w) == len(want) and len(want) > 10
    np.testing.assert_allclose(w, want, rtol=1e-9)
    r = np.linalg.norm(a @ v - v * w, axis=0)
    assert r.max() < 1e-9 * sla.norm(a, 1)
    np.testing.assert_allclose(v.T @ v, np.eye(len(w)), atol=1e-9)
    assert st["interval"]["count"] == len(want)


def test_subset_by_value_of_a_pencil_and_an_empty_interval():
    a = lap2d(10)
    m = sp.diags(np.linspace(1.0, 2.0, 100), format="csr")
    import scipy.linalg as sl

    ref = sl.eigh(a.toarray(), m.toarray(), eigvals_only=True)
    lo, hi = 0.5 * (ref[3] + ref[4]), 0.5 * (ref[15] + ref[16])
    w, v = jdmg.eigsh(a, M=m, subset_by_value=(lo, hi), tol=1e-10)
    np.testing.assert_allclose(w, ref[4:16], rtol=1e-9)
    np.testing.assert_allclose(v.T @ (m @ v), np.eye(12), atol=1e-9)
    w, v = jdmg.eigsh(a, subset_by_value=(-2.0, -1.0))
    assert w.shape == (0,) and v.shape == (100, 0)


def test_subset_by_value_is_checked():
    a = lap2d(6)
    for bad in [(1.0, 0.0), (0.0, np.inf), "ab"]:
        with pytest.raises(ValueError):
            jdmg.eigsh(a, subset_by_value=bad)
    with pytest.raises(ValueError):
        jdmg.eigsh(a, sigma=1.0, subset_by_value=(0.0, 1.0))
    with pytest.raises(ValueError):
        jdmg.eigsh(sla.aslinearoperator(a), subset_by_value=(0.0, 1.0))


def test_subset_by_index_returns_the_eigenvalues_of_those_indices():
    # lap2d:12: indices 5..20 cut through double eigenvalues; and of a pencil.
    a = lap2d(12)
    ref = np.linalg.eigvalsh(a.toarray())
    w, v, st = jdmg.eigsh(a, subset_by_index=(5, 20), tol=1e-10, return_stats=True)
    np.testing.assert_allclose(w, ref[5:21], rtol=1e-9)
    r = np.linalg.norm(a @ v - v * w, axis=0)
    assert r.max() < 1e-9 * sla.norm(a, 1)
    np.testing.assert_allclose(v.T @ v, np.eye(16), atol=1e-9)
    assert st["interval"]["first_index"] == 5 and st["interval"]["count"] == 16
    import scipy.linalg as sl

    b = lap2d(10)
    m = sp.diags(np.linspace(1.0, 2.0, 100), format="csr")
    refm = sl.eigh(b.toarray(), m.toarray(), eigvals_only=True)
    w, v = jdmg.eigsh(b, M=m, subset_by_index=(0, 9), tol=1e-10)
    np.testing.assert_allclose(w, refm[:10], rtol=1e-9)
    for bad in [(3, 2), (0, 100), (-1, 2), (0.5, 2)]:
        with pytest.raises(ValueError):
            jdmg.eigsh(b, subset_by_index=bad)
    with pytest.raises(ValueError):
        jdmg.eigsh(b, subset_by_index=(0, 1), subset_by_value=(0.0, 1.0))
