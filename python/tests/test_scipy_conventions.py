"""jdmg.eigsh takes every argument of scipy.sparse.linalg.eigsh with SciPy's
meaning (issue #41): rng, tol=0, which with sigma for every kind of A and M, the
modes 'buckling' and 'cayley', SciPy's exceptions and its rule for k >= n. Each
result is checked against scipy.linalg.eigh and, where SciPy can run the case,
against scipy.sparse.linalg.eigsh itself."""

import warnings

import numpy as np
import pytest
import scipy.linalg as sl
import scipy.sparse as sp
import scipy.sparse.linalg as sla

import jdmg


def sym(n, seed):
    """SciPy's test matrices: a random symmetric matrix, entries U(-1, 1)."""
    rng = np.random.default_rng(seed)
    u = rng.uniform(-1, 1, (n, n))
    return u + u.T


def spd(n, seed):
    rng = np.random.default_rng(seed)
    u = rng.uniform(-1, 1, (n, n))
    return u @ u.T / n + np.eye(n)


def norm2(a):
    return np.linalg.norm(a, 2)


def select(lam, k, which, nu):
    """The k eigenvalues of lam that ARPACK's ``which`` picks on the
    transformed values nu, ascending."""
    o = np.argsort(nu, kind="stable")
    oa = np.argsort(np.abs(nu), kind="stable")
    hi = (k + 1) // 2
    sel = {
        "LA": o[len(o) - k :],
        "SA": o[:k],
        "LM": oa[len(oa) - k :],
        "SM": oa[:k],
        "BE": np.concatenate([o[: k - hi], o[len(o) - hi :]]),
    }[which]
    return np.sort(lam[sel])


def transformed(lam, sigma, mode="normal"):
    with np.errstate(divide="ignore"):
        return {
            "normal": 1.0 / (lam - sigma),
            "buckling": lam / (lam - sigma),
            "cayley": (lam + sigma) / (lam - sigma),
        }[mode]


# ---------------------------------------------------------------------------
# 1. rng


RNGS = {
    "int": lambda: 12345,
    "numpy_int": lambda: np.int64(12345),
    "generator": lambda: np.random.default_rng(3),
    "random_state": lambda: np.random.RandomState(3),
    "seed_sequence": lambda: np.random.SeedSequence(3),
}


@pytest.mark.parametrize("kind", sorted(RNGS))
def test_the_same_rng_gives_bitwise_the_same_result(kind):
    a = sp.csr_matrix(sym(150, 1))
    w1, v1 = jdmg.eigsh(a, k=5, rng=RNGS[kind]())
    w2, v2 = jdmg.eigsh(a, k=5, rng=RNGS[kind]())
    assert np.array_equal(w1, w2) and np.array_equal(v1, v2)
    lam = np.linalg.eigvalsh(a.toarray())
    np.testing.assert_allclose(w1, select(lam, 5, "LM", lam), rtol=1e-12)
    # and the same eigenvalues as ARPACK given that rng
    np.testing.assert_allclose(w1, np.sort(sla.eigsh(a, k=5, rng=RNGS[kind](), return_eigenvectors=False)), rtol=1e-12)


def test_a_generator_gives_the_seed_it_draws():
    a = sp.csr_matrix(sym(120, 2))
    g = np.random.default_rng(11)
    w, v = jdmg.eigsh(a, k=3, which="LA", rng=g)
    ref = np.random.default_rng(11)
    seed = int(ref.integers(0, 2**64, dtype=np.uint64))
    w2, v2 = jdmg.eigsh(a, k=3, which="LA", seed=seed)
    assert np.array_equal(w, w2) and np.array_equal(v, v2)
    # one draw taken: the generator goes on as the reference does
    assert g.integers(0, 2**32) == ref.integers(0, 2**32)
    rs = np.random.RandomState(11)
    w3 = jdmg.eigsh(a, k=3, which="LA", rng=rs, return_eigenvectors=False)
    seed = int(np.random.RandomState(11).randint(0, 2**64, dtype=np.uint64))
    assert np.array_equal(w3, jdmg.eigsh(a, k=3, which="LA", seed=seed, return_eigenvectors=False))


def test_none_and_ints_are_seeds():
    a = sp.csr_matrix(sym(100, 3))
    # None: jdmg's default seed 1 with the time-adaptive inner solver, the same
    # eigenvalues to the tolerance (SciPy would draw from the OS entropy)
    np.testing.assert_allclose(
        jdmg.eigsh(a, k=4, return_eigenvectors=False), jdmg.eigsh(a, k=4, seed=1, return_eigenvectors=False), rtol=1e-12
    )
    assert np.array_equal(jdmg.eigsh(a, k=4, rng=7, return_eigenvectors=False), jdmg.eigsh(a, k=4, seed=7, return_eigenvectors=False))
    # an int past 64 bits seeds a Generator, which gives the seed
    big = 2**70 + 5
    seed = int(np.random.default_rng(big).integers(0, 2**64, dtype=np.uint64))
    assert np.array_equal(
        jdmg.eigsh(a, k=4, rng=big, return_eigenvectors=False), jdmg.eigsh(a, k=4, seed=seed, return_eigenvectors=False)
    )


@pytest.mark.parametrize("rng,error", [(-1, ValueError), ("abc", TypeError), (True, TypeError), (1.5, TypeError)])
def test_bad_rng(rng, error):
    with pytest.raises(error):
        jdmg.eigsh(sp.csr_matrix(sym(20, 4)), k=2, rng=rng)


def test_rng_and_seed_together_is_an_error():
    with pytest.raises(ValueError, match="rng or seed"):
        jdmg.eigsh(sp.csr_matrix(sym(20, 4)), k=2, rng=1, seed=1)


# ---------------------------------------------------------------------------
# 2. tol = 0: machine precision


@pytest.mark.parametrize("which", ["LM", "SM", "LA", "SA", "BE"])
def test_tol_zero_matches_lapack(which):
    a = sym(120, 5)
    lam = np.linalg.eigvalsh(a)
    w, v, st = jdmg.eigsh(sp.csr_matrix(a), k=5, which=which, tol=0, return_stats=True)
    np.testing.assert_allclose(w, select(lam, 5, which, lam), rtol=1e-12, atol=1e-13 * norm2(a))
    # the residuals at rounding level, far below the 1e-10 ||A|| of the first solve
    r = np.linalg.norm(a @ v - v * w, axis=0)
    assert r.max() < 1e-13 * norm2(a)
    assert np.max(st["rnorms"]) < 1e-13 * norm2(a)
    # as ARPACK at tol = 0
    ws = sla.eigsh(a, k=5, which=which, tol=0, return_eigenvectors=False, rng=0)
    np.testing.assert_allclose(w, np.sort(ws), rtol=1e-12, atol=1e-13 * norm2(a))


def test_tol_zero_refines_beyond_the_first_solve():
    a = sp.csr_matrix(sym(150, 6))
    _, _, loose = jdmg.eigsh(a, k=4, which="LA", tol=1e-10, return_stats=True)
    _, _, tight = jdmg.eigsh(a, k=4, which="LA", tol=0, return_stats=True)
    assert np.max(tight["rnorms"]) < 1e-2 * np.max(loose["rnorms"])
    assert tight["numMatvecs"] > loose["numMatvecs"]  # the tightening solves are counted


def test_negative_tol_is_machine_precision_as_arpack():
    a = sp.csr_matrix(sym(100, 44))
    w0, v0 = jdmg.eigsh(a, k=3, which="SA", tol=0, seed=2)
    w1, v1 = jdmg.eigsh(a, k=3, which="SA", tol=-1.0, seed=2)
    assert np.array_equal(w0, w1) and np.array_equal(v0, v1)
    np.testing.assert_allclose(w1, np.sort(sla.eigsh(a, k=3, which="SA", tol=-1.0, return_eigenvectors=False, rng=0)), rtol=1e-12)
    with pytest.raises(ValueError):
        jdmg.eigsh(a, k=3, tol=np.nan)


def test_tol_zero_keeps_to_the_matvec_budget():
    # a budget spent by the first solve leaves it as it is: no tightening
    a = sp.csr_matrix(sym(150, 6))
    w1, v1, st1 = jdmg.eigsh(a, k=4, which="LA", tol=1e-10, seed=3, return_stats=True)
    w0, v0, st0 = jdmg.eigsh(a, k=4, which="LA", tol=0, seed=3, maxmatvecs=st1["numMatvecs"], return_stats=True)
    assert np.array_equal(w0, w1) and np.array_equal(v0, v1)
    assert st0["numMatvecs"] == st1["numMatvecs"]


@pytest.mark.parametrize("kind", ["sparse", "dense", "linop"])
def test_tol_zero_generalized(kind):
    a, m = sym(80, 7), spd(80, 8)
    lam = sl.eigh(a, m, eigvals_only=True)
    conv = {"sparse": sp.csr_matrix, "dense": np.asarray, "linop": sla.aslinearoperator}[kind]
    w, v = jdmg.eigsh(conv(a), k=4, M=conv(m), which="SA", tol=0)
    np.testing.assert_allclose(w, lam[:4], rtol=1e-12)
    r = np.linalg.norm(a @ v - m @ v * w, axis=0)
    assert r.max() < 1e-12 * norm2(a)
    np.testing.assert_allclose(w, np.sort(sla.eigsh(a, k=4, M=m, which="SA", tol=0, return_eigenvectors=False, rng=0)), rtol=1e-12)


def test_tol_zero_shift_invert_and_linear_operator():
    a = sym(100, 9)
    lam = np.linalg.eigvalsh(a)
    sigma = float(lam[40]) + 0.05
    w, v = jdmg.eigsh(sp.csr_matrix(a), k=4, sigma=sigma, tol=0)
    np.testing.assert_allclose(w, select(lam, 4, "LM", transformed(lam, sigma)), rtol=1e-12, atol=1e-13 * norm2(a))
    assert np.linalg.norm(a @ v - v * w, axis=0).max() < 1e-12 * norm2(a)
    w, v = jdmg.eigsh(sla.aslinearoperator(a), k=4, which="LA", tol=0)
    np.testing.assert_allclose(w, lam[-4:], rtol=1e-12)
    assert np.linalg.norm(a @ v - v * w, axis=0).max() < 1e-13 * norm2(a)


def test_tol_zero_float32_is_solved_in_double():
    a = sym(90, 10).astype(np.float32)
    lam = np.linalg.eigvalsh(a.astype(np.float64))
    w = jdmg.eigsh(sp.csr_matrix(a), k=3, which="LA", tol=0, return_eigenvectors=False)
    assert w.dtype == np.float64
    np.testing.assert_allclose(w, lam[-3:], rtol=1e-12)
    # ARPACK works in single precision here: agreement to float32 only
    ws = np.sort(sla.eigsh(sp.csr_matrix(a), k=3, which="LA", tol=0, return_eigenvectors=False, rng=0))
    np.testing.assert_allclose(w, ws, rtol=1e-5)


def test_tol_zero_interval():
    a = sym(60, 11)
    lam = np.linalg.eigvalsh(a)
    lo, hi = 0.5 * (lam[10] + lam[11]), 0.5 * (lam[17] + lam[18])
    w, v = jdmg.eigsh(sp.csr_matrix(a), subset_by_value=(lo, hi), tol=0)
    np.testing.assert_allclose(w, lam[11:18], rtol=1e-12, atol=1e-13 * norm2(a))
    assert np.linalg.norm(a @ v - v * w, axis=0).max() < 1e-12 * norm2(a)


# ---------------------------------------------------------------------------
# 3. which with sigma, every kind of A and M

KINDS = ["sparse_M", "dense_M", "linop_A", "linop_A_sparse_M", "linop_M", "linop_both"]


def operands(kind, a, m):
    lin = sla.aslinearoperator
    return {
        "sparse_M": (sp.csr_matrix(a), sp.csr_matrix(m)),
        "dense_M": (a, m),
        "linop_A": (lin(a), None),
        "linop_A_sparse_M": (lin(a), sp.csr_matrix(m)),
        "linop_M": (sp.csr_matrix(a), lin(m)),
        "linop_both": (lin(a), lin(m)),
    }[kind]


@pytest.mark.parametrize("which", ["LM", "SM", "LA", "SA", "BE"])
@pytest.mark.parametrize("kind", KINDS)
def test_which_with_sigma_for_every_kind(kind, which):
    a, m = sym(60, 12), spd(60, 13)
    A, M = operands(kind, a, m)
    mm = np.eye(60) if M is None else m
    lam = sl.eigh(a, mm, eigvals_only=True)
    sigma = float(0.5 * (lam[25] + lam[26])) + 0.1 * (lam[26] - lam[25])
    want = select(lam, 4, which, transformed(lam, sigma))
    w, v = jdmg.eigsh(A, k=4, M=M, sigma=sigma, which=which)
    np.testing.assert_allclose(w, want, rtol=1e-9, atol=1e-10 * norm2(a))
    np.testing.assert_allclose(v.T @ mm @ v, np.eye(4), atol=1e-8)
    assert np.linalg.norm(a @ v - mm @ v * w, axis=0).max() < 1e-8 * norm2(a)
    if kind == "sparse_M" and which != "SM":  # ARPACK's 'SM' here misses -10.1 for 7.8
        ws = sla.eigsh(sp.csr_matrix(a), k=4, M=sp.csr_matrix(m), sigma=sigma, which=which, return_eigenvectors=False, rng=0)
        np.testing.assert_allclose(w, np.sort(ws), rtol=1e-9, atol=1e-10 * norm2(a))


@pytest.mark.parametrize("which", ["LA", "SA", "BE", "SM"])
@pytest.mark.parametrize("kind", ["sparse", "sparse_M", "linop_A", "linop_both"])
def test_which_with_sigma_wraps_around(kind, which):
    # sigma above all but one eigenvalue: 'LA' takes that one, then the smallest
    # (the negative 1/(lambda - sigma) nearest 0); n = 10, k = 4
    a, m = sym(10, 14), spd(10, 15)
    if kind == "sparse":
        A, M, mm = sp.csr_matrix(a), None, np.eye(10)
    else:
        A, M = operands({"sparse_M": "sparse_M", "linop_A": "linop_A", "linop_both": "linop_both"}[kind], a, m)
        mm = np.eye(10) if M is None else m
    lam = sl.eigh(a, mm, eigvals_only=True)
    sigma = float(0.5 * (lam[8] + lam[9]))
    want = select(lam, 4, which, transformed(lam, sigma))
    w = jdmg.eigsh(A, k=4, M=M, sigma=sigma, which=which, return_eigenvectors=False)
    np.testing.assert_allclose(w, want, rtol=1e-9, atol=1e-10 * norm2(a))
    if kind in ("sparse", "sparse_M"):
        ws = sla.eigsh(sp.csr_matrix(a), k=4, M=None if M is None else sp.csr_matrix(m), sigma=sigma, which=which, return_eigenvectors=False, rng=0)
        np.testing.assert_allclose(w, np.sort(ws), rtol=1e-9, atol=1e-10 * norm2(a))


@pytest.mark.parametrize("which", ["LM", "SM", "LA", "SA", "BE"])
@pytest.mark.parametrize("m_kind", ["sparse", "linop"])
def test_opinv_with_m(which, m_kind):
    # SciPy's OPinv = (A - sigma M)^-1 with a LinearOperator A and M
    a, m = sym(60, 31), spd(60, 32)
    lam = sl.eigh(a, m, eigvals_only=True)
    sigma = float(0.5 * (lam[25] + lam[26])) + 0.1 * (lam[26] - lam[25])
    lu = sl.lu_factor(a - sigma * m)
    opinv = sla.LinearOperator((60, 60), matvec=lambda x: sl.lu_solve(lu, x), matmat=lambda X: sl.lu_solve(lu, X), dtype=float)
    M = sp.csr_matrix(m) if m_kind == "sparse" else sla.aslinearoperator(m)
    w, v = jdmg.eigsh(sla.aslinearoperator(a), k=4, M=M, sigma=sigma, OPinv=opinv, which=which)
    want = select(lam, 4, which, transformed(lam, sigma))
    np.testing.assert_allclose(w, want, rtol=1e-10, atol=1e-12 * norm2(a))
    np.testing.assert_allclose(v.T @ m @ v, np.eye(4), atol=1e-9)
    assert np.linalg.norm(a @ v - m @ v * w, axis=0).max() < 1e-8 * norm2(a)
    if which != "SM":
        ws = sla.eigsh(sla.aslinearoperator(a), k=4, M=sp.csr_matrix(m), sigma=sigma, OPinv=opinv, which=which, return_eigenvectors=False, rng=0)
        np.testing.assert_allclose(w, np.sort(ws), rtol=1e-10, atol=1e-12 * norm2(a))


@pytest.mark.parametrize("kind", ["dense", "sparse", "linop", "sparse_M", "opinv"])
def test_sm_with_sigma_when_the_two_ends_overlap(kind):
    # n = 7, k = 5: the 5 farthest from sigma come from both ends, whose solves
    # (5 pairs each) share 3 eigenvalues; each is returned once
    a, m = sym(7, 40), spd(7, 41)
    mm = m if kind == "sparse_M" else np.eye(7)
    lam = sl.eigh(a, mm, eigvals_only=True)
    for j in range(6):
        sigma = float(0.5 * (lam[j] + lam[j + 1]))
        kw = {}
        if kind == "opinv":
            kw["OPinv"] = sla.aslinearoperator(np.linalg.inv(a - sigma * np.eye(7)))
        A = {"dense": a, "sparse": sp.csr_matrix(a), "sparse_M": sp.csr_matrix(a)}.get(kind, sla.aslinearoperator(a))
        M = sp.csr_matrix(m) if kind == "sparse_M" else None
        w, v = jdmg.eigsh(A, k=5, M=M, sigma=sigma, which="SM", **kw)
        np.testing.assert_allclose(w, select(lam, 5, "SM", transformed(lam, sigma)), rtol=1e-10)
        np.testing.assert_allclose(v.T @ mm @ v, np.eye(5), atol=1e-8)


# ---------------------------------------------------------------------------
# 4. mode='buckling' and mode='cayley'


@pytest.mark.parametrize("which", ["LM", "SM", "LA", "SA", "BE"])
@pytest.mark.parametrize("with_m", [True, False])
def test_buckling_against_scipy(which, with_m):
    # A positive definite, M indefinite: A x = lambda M x
    a, m = spd(50, 16) * 10, sym(50, 17)
    mm = m if with_m else np.eye(50)
    mu = sl.eigh(mm, a, eigvals_only=True)  # mu = 1/lambda
    lam = 1.0 / mu
    sigma = float(np.sort(lam)[30]) + 0.3
    want = select(lam, 4, which, transformed(lam, sigma, "buckling"))
    M = sp.csr_matrix(m) if with_m else None
    w, v = jdmg.eigsh(sp.csr_matrix(a), k=4, M=M, sigma=sigma, which=which, mode="buckling")
    np.testing.assert_allclose(w, want, rtol=1e-9)
    ws = sla.eigsh(sp.csr_matrix(a), k=4, M=M, sigma=sigma, which=which, mode="buckling", return_eigenvectors=False, rng=0)
    np.testing.assert_allclose(w, np.sort(ws), rtol=1e-9)
    # SciPy's normalization in this mode: A-orthonormal
    np.testing.assert_allclose(v.T @ a @ v, np.eye(4), atol=1e-8)
    assert np.linalg.norm(a @ v - mm @ v * w, axis=0).max() < 1e-8 * norm2(a) * np.abs(w).max()


@pytest.mark.parametrize("which", ["LM", "SM", "LA", "SA", "BE"])
@pytest.mark.parametrize("with_m", [True, False])
def test_cayley_against_scipy(which, with_m):
    a, m = sym(50, 18), spd(50, 19)
    mm = m if with_m else np.eye(50)
    lam = sl.eigh(a, mm, eigvals_only=True)
    sigma = float(lam[20]) + 0.37 * (lam[21] - lam[20])
    want = select(lam, 4, which, transformed(lam, sigma, "cayley"))
    M = sp.csr_matrix(m) if with_m else None
    w, v = jdmg.eigsh(sp.csr_matrix(a), k=4, M=M, sigma=sigma, which=which, mode="cayley")
    np.testing.assert_allclose(w, want, rtol=1e-9, atol=1e-10 * norm2(a))
    ws = sla.eigsh(sp.csr_matrix(a), k=4, M=M, sigma=sigma, which=which, mode="cayley", return_eigenvectors=False, rng=0)
    np.testing.assert_allclose(w, np.sort(ws), rtol=1e-9, atol=1e-10 * norm2(a))
    np.testing.assert_allclose(v.T @ mm @ v, np.eye(4), atol=1e-8)
    assert np.linalg.norm(a @ v - mm @ v * w, axis=0).max() < 1e-8 * norm2(a)


@pytest.mark.parametrize("with_m", [True, False])
@pytest.mark.parametrize("mode", ["buckling", "cayley"])
@pytest.mark.parametrize("which", ["LM", "SM", "LA", "SA", "BE"])
def test_modes_with_linear_operators(mode, which, with_m):
    if mode == "buckling":
        a, m = spd(40, 20) * 10, sym(40, 21)
    else:
        a, m = sym(40, 22), spd(40, 23)
    mm = m if with_m else np.eye(40)
    lam = 1.0 / sl.eigh(mm, a, eigvals_only=True) if mode == "buckling" else sl.eigh(a, mm, eigvals_only=True)
    sigma = float(np.sort(lam)[15]) + 0.21
    want = select(lam, 3, which, transformed(lam, sigma, mode))
    lin = sla.aslinearoperator
    w, v = jdmg.eigsh(lin(a), k=3, M=lin(m) if with_m else None, sigma=sigma, which=which, mode=mode)
    np.testing.assert_allclose(w, want, rtol=1e-8, atol=1e-9 * norm2(a))
    np.testing.assert_allclose(v.T @ (a if mode == "buckling" else mm) @ v, np.eye(3), atol=1e-8)


@pytest.mark.parametrize("mode", ["normal", "buckling", "cayley"])
def test_modes_float32_dense_and_no_vectors(mode):
    a32 = (spd(30, 33) * 10 if mode == "buckling" else sym(30, 34)).astype(np.float32)
    m32 = (sym(30, 35) if mode == "buckling" else spd(30, 36)).astype(np.float32)
    a, m = a32.astype(np.float64), m32.astype(np.float64)
    lam = 1.0 / sl.eigh(m, a, eigvals_only=True) if mode == "buckling" else sl.eigh(a, m, eigvals_only=True)
    sigma = float(np.sort(lam)[10]) + 0.13
    for which in ("LA", "SM"):
        want = select(lam, 3, which, transformed(lam, sigma, mode))
        w = jdmg.eigsh(a32, k=3, M=m32, sigma=sigma, which=which, mode=mode, return_eigenvectors=False)
        assert w.dtype == np.float64
        np.testing.assert_allclose(w, want, rtol=1e-9, atol=1e-10 * norm2(a))


def test_mode_arguments_are_checked():
    a = sp.csr_matrix(spd(20, 24))
    with pytest.raises(ValueError, match="sigma != 0"):
        jdmg.eigsh(a, k=2, sigma=0.0, mode="buckling")
    with pytest.raises(ValueError, match="mode"):
        jdmg.eigsh(a, k=2, sigma=1.0, mode="shift")
    with pytest.raises(ValueError, match="OPinv"):
        jdmg.eigsh(a, k=2, sigma=1.0, mode="cayley", OPinv=sp.identity(20))
    # buckling needs A or M positive definite (the mass of the pencil solved)
    with pytest.raises(ValueError, match="positive definite"):
        jdmg.eigsh(sp.csr_matrix(sym(20, 25)), M=sp.csr_matrix(sym(20, 26)), k=2, sigma=1.0, mode="buckling")


@pytest.mark.parametrize("which", ["LM", "SM", "LA", "SA", "BE"])
@pytest.mark.parametrize("case", ["no_M", "M_definite"])
def test_buckling_with_an_indefinite_a(which, case):
    # A indefinite: jdmg solves A x = lambda M x itself (M = I, or M definite);
    # nu = lambda/(lambda - sigma) selects as before
    a = sym(40, 45)
    m = np.eye(40) if case == "no_M" else spd(40, 46)
    lam = sl.eigh(a, m, eigvals_only=True)
    sigma = float(0.5 * (lam[12] + lam[13]))
    M = None if case == "no_M" else sp.csr_matrix(m)
    w, v = jdmg.eigsh(sp.csr_matrix(a), k=4, M=M, sigma=sigma, which=which, mode="buckling")
    np.testing.assert_allclose(w, select(lam, 4, which, transformed(lam, sigma, "buckling")), rtol=1e-9, atol=1e-10 * norm2(a))
    assert np.linalg.norm(a @ v - m @ v * w, axis=0).max() < 1e-8 * norm2(a) * max(1.0, np.abs(w).max())


# ---------------------------------------------------------------------------
# 5. SciPy's exceptions in SciPy's situations, and k >= n


def bad_cases():
    a = sp.csr_matrix(spd(10, 26))
    return {
        "k=0": (ValueError, dict(A=a, k=0)),
        "which": (ValueError, dict(A=a, k=2, which="XX")),
        "not square": (ValueError, dict(A=np.ones((3, 4)), k=1)),
        "M shape": (ValueError, dict(A=a, k=2, M=sp.identity(9))),
        "mode": (ValueError, dict(A=a, k=2, sigma=1.0, mode="x")),
        "OPinv without sigma": (ValueError, dict(A=a, k=2, OPinv=sp.identity(10))),
        "Minv without M": (ValueError, dict(A=a, k=2, Minv=sp.identity(10))),
        "Minv with sigma": (ValueError, dict(A=a, k=2, M=sp.identity(10), sigma=1.5, Minv=sp.identity(10))),
        "ncv <= k": (ValueError, dict(A=a, k=2, ncv=2)),
        "maxiter 0": (ValueError, dict(A=a, k=2, maxiter=0)),
        "sparse k > n": (TypeError, dict(A=a, k=12)),
        "linop k > n": (TypeError, dict(A=sla.aslinearoperator(a), k=12)),
    }


@pytest.mark.parametrize("case", sorted(bad_cases()))
def test_the_exception_scipy_raises(case):
    error, kw = bad_cases()[case]
    A = kw.pop("A")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        with pytest.raises(error):
            sla.eigsh(A, **kw)
        with pytest.raises(error):
            jdmg.eigsh(A, **kw)


def test_where_scipy_fails_otherwise():
    # SciPy: SystemError from ARPACK, and a v0 of the wrong length taken or not
    a = sp.csr_matrix(spd(10, 26))
    with pytest.raises(TypeError):
        jdmg.eigsh(a, k=1.5)
    with pytest.raises(ValueError):
        jdmg.eigsh(a, k=2, v0=np.ones(7))


def test_no_convergence_is_arpack_no_convergence():
    a = sp.diags(np.linspace(1.0, 1.001, 400), format="csr")
    with pytest.raises(sla.ArpackNoConvergence) as info:
        jdmg.eigsh(a, k=6, which="SA", maxiter=2, precond="none", block=1)
    e = info.value
    assert isinstance(e, jdmg.NoConvergence)
    assert e.eigenvectors.shape == (400, len(e.eigenvalues))


@pytest.mark.parametrize("mode", ["normal", "buckling", "cayley"])
def test_no_convergence_of_a_transformed_selection(mode):
    # the budget runs out in one of the solves: its converged pairs, eigenpairs
    # of A x = lambda M x, come with the exception
    if mode == "buckling":
        a, m = spd(200, 42) * 10, sym(200, 43)
        lam = 1.0 / sl.eigh(m, a, eigvals_only=True)
    else:
        a, m = sym(200, 42), spd(200, 43)
        lam = sl.eigh(a, m, eigvals_only=True)
    sigma = float(np.median(lam)) + 0.01
    with pytest.raises(sla.ArpackNoConvergence) as info:
        jdmg.eigsh(sp.csr_matrix(a), M=sp.csr_matrix(m), k=6, sigma=sigma, which="LA", mode=mode, maxiter=30 if mode == "buckling" else 8, block=1, seed=1)
    e = info.value
    assert 1 <= len(e.eigenvalues) < 6 and e.eigenvectors.shape == (200, len(e.eigenvalues))
    for x in e.eigenvalues:
        assert np.min(np.abs(lam - x)) < 1e-8 * max(1.0, abs(x))


@pytest.mark.parametrize("k", [10, 12])
@pytest.mark.parametrize("with_m", [False, True])
def test_k_at_least_n_dense_is_scipy_linalg_eigh(k, with_m):
    a, m = sym(10, 27), spd(10, 28)
    M = m if with_m else None
    with pytest.warns(RuntimeWarning, match="k >= N"):
        w, v = jdmg.eigsh(a, k=k, M=M, which="LA", sigma=0.3)
    with pytest.warns(RuntimeWarning, match="k >= N"):
        ws, vs = sla.eigsh(a, k=k, M=M, which="LA", sigma=0.3, rng=0)
    lam, vec = sl.eigh(a, M)
    assert w.shape == (10,) and v.shape == (10, 10)
    np.testing.assert_allclose(w, lam, rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(w, ws, rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(np.abs(v), np.abs(vec), atol=1e-10)
    with pytest.warns(RuntimeWarning):
        w2, st = jdmg.eigsh(a, k=k, M=M, return_eigenvectors=False, return_stats=True)
    np.testing.assert_allclose(w2, lam, rtol=1e-13, atol=1e-14)
    assert st["numMatvecs"] == 0 and np.max(st["rnorms"]) < 1e-12 * norm2(a)


def test_k_n_and_n_minus_1_sparse_are_solved():
    a = sp.csr_matrix(sym(10, 29))
    lam = np.linalg.eigvalsh(a.toarray())
    w = jdmg.eigsh(a, k=9, return_eigenvectors=False)  # ARPACK's largest k
    np.testing.assert_allclose(w, select(lam, 9, "LM", lam), rtol=1e-10)
    np.testing.assert_allclose(w, np.sort(sla.eigsh(a, k=9, return_eigenvectors=False, rng=0)), rtol=1e-10)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning: jdmg solves k = n itself
        w = jdmg.eigsh(a, k=10, which="SA", return_eigenvectors=False)
    np.testing.assert_allclose(w, lam, rtol=1e-10, atol=1e-12)


def test_ncv_above_n_is_clipped_as_scipy():
    a = sp.csr_matrix(sym(12, 30))
    lam = np.linalg.eigvalsh(a.toarray())
    w = jdmg.eigsh(a, k=2, which="LA", ncv=40, return_eigenvectors=False)
    np.testing.assert_allclose(w, lam[-2:], rtol=1e-10)
    np.testing.assert_allclose(w, np.sort(sla.eigsh(a, k=2, which="LA", ncv=40, return_eigenvectors=False, rng=0)), rtol=1e-10)
