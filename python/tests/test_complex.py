"""Complex Hermitian eigsh and complex svds (the real embedding) against
scipy.linalg.eigh and numpy.linalg.svd: eigenvalues, residuals and
orthonormality recomputed from what is returned, dtypes, errors."""

import warnings

import numpy as np
import pytest
import scipy.linalg as sl
import scipy.sparse as sp
import scipy.sparse.linalg as sla

import jdmg


def random_hermitian(n, seed=0):
    rng = np.random.default_rng(seed)
    b = rng.standard_normal((n, n)) + 1j * rng.standard_normal((n, n))
    return (b + b.conj().T) / 2


def sparse_hermitian(n, seed=0):
    rng = np.random.default_rng(seed)
    b = sp.random(n, n, density=0.06, random_state=rng, format="csr")
    b = b + 1j * sp.random(n, n, density=0.06, random_state=rng, format="csr")
    d = sp.diags(np.linspace(-3.0, 3.0, n))
    return (b + b.conj().T + d).tocsr()


def hpd(n, seed=5):
    """A sparse Hermitian positive definite mass matrix (complex tridiagonal)."""
    rng = np.random.default_rng(seed)
    off = 0.3 * np.exp(2j * np.pi * rng.random(n - 1))
    return sp.diags([off.conj(), 2.0 + rng.random(n), off], [-1, 0, 1]).tocsr()


def magnetic_laplacian(nx, ny, phi):
    """The 2-D grid's magnetic Laplacian (Dirichlet): 4 on the diagonal,
    -exp(i theta) between neighbours, Landau gauge (theta = 2 pi phi x on
    the edges along y at column x, 0 along x)."""
    idx = lambda x, y: x + nx * y  # noqa: E731
    rows, cols, vals = [], [], []
    for y in range(ny):
        for x in range(nx):
            if x + 1 < nx:
                rows += [idx(x, y), idx(x + 1, y)]
                cols += [idx(x + 1, y), idx(x, y)]
                vals += [-1.0, -1.0]
            if y + 1 < ny:
                t = np.exp(2j * np.pi * phi * x)
                rows += [idx(x, y), idx(x, y + 1)]
                cols += [idx(x, y + 1), idx(x, y)]
                vals += [-t, -np.conj(t)]
    n = nx * ny
    h = sp.coo_matrix((vals, (rows, cols)), shape=(n, n)) + 4.0 * sp.identity(n)
    return h.tocsr()


def dense(a):
    return a.toarray() if sp.issparse(a) else np.asarray(a)


def expected(ev, k, which, sigma=None):
    nu = ev if sigma is None else 1.0 / (ev - sigma)
    score = {"LM": np.abs(nu), "SM": -np.abs(nu), "LA": nu, "SA": -nu}[which]
    return np.sort(ev[np.argsort(-score, kind="stable")[:k]])


def check_pairs(a, w, v, m=None, tol=1e-8):
    """Residuals ||A v - lambda M v|| <= tol ||A||, V^H M V = I, ascending w."""
    a, mm = dense(a).astype(complex), None if m is None else dense(m).astype(complex)
    v = v.astype(complex)
    mv = v if mm is None else mm @ v
    res = np.linalg.norm(a @ v - mv * w, axis=0)
    assert res.max() <= tol * np.linalg.norm(a, 2), res
    np.testing.assert_allclose(v.conj().T @ mv, np.eye(len(w)), atol=max(tol, 1e-6) * 10)
    assert np.all(np.diff(w) >= 0)


def as_kind(a, kind):
    if kind == "dense":
        return dense(a)
    if kind == "csr":
        return sp.csr_matrix(a)
    return sla.aslinearoperator(a)


@pytest.mark.parametrize("kind", ["dense", "csr", "operator"])
@pytest.mark.parametrize("which", ["LM", "SA", "LA", "SM"])
def test_hermitian_against_eigh(kind, which):
    a = random_hermitian(50, seed=1)
    ev = sl.eigh(a, eigvals_only=True)
    w, v = jdmg.eigsh(as_kind(a, kind), k=4, which=which)
    np.testing.assert_allclose(w, expected(ev, 4, which), rtol=1e-10, atol=1e-12)
    assert w.dtype == np.float64 and v.dtype == np.complex128 and v.shape == (50, 4)
    check_pairs(a, w, v, tol=1e-10)


@pytest.mark.parametrize("kind", ["dense", "csr", "operator"])
def test_single_precision_gives_single_precision(kind):
    a = random_hermitian(40, seed=2).astype(np.complex64)
    ev = sl.eigh(a.astype(np.complex128), eigvals_only=True)
    w, v = jdmg.eigsh(as_kind(a, kind), k=3, which="SA")
    assert w.dtype == np.float32 and v.dtype == np.complex64
    np.testing.assert_allclose(w, ev[:3], rtol=1e-5, atol=1e-5)
    check_pairs(a, w, v, tol=1e-5)


def test_sparse_hermitian_and_return_eigenvectors_false():
    a = sparse_hermitian(120, seed=3)
    ev = sl.eigh(a.toarray(), eigvals_only=True)
    w = jdmg.eigsh(a, k=5, which="LA", return_eigenvectors=False)
    assert isinstance(w, np.ndarray) and w.shape == (5,)
    np.testing.assert_allclose(w, ev[-5:], rtol=1e-10)
    w2, v2 = jdmg.eigsh(a, k=5, which="LA", tol=1e-9)
    np.testing.assert_allclose(w2, ev[-5:], rtol=1e-8)
    check_pairs(a, w2, v2, tol=1e-8)


@pytest.mark.parametrize("kind", ["dense", "csr", "operator"])
@pytest.mark.parametrize("which", ["LM", "LA", "SA"])
def test_shift_invert(kind, which):
    a = sparse_hermitian(80, seed=4)
    ev = sl.eigh(a.toarray(), eigvals_only=True)
    sigma = 0.37
    w, v = jdmg.eigsh(as_kind(a, kind), k=3, sigma=sigma, which=which)
    np.testing.assert_allclose(w, expected(ev, 3, which, sigma), rtol=1e-9)
    check_pairs(a, w, v, tol=1e-9)


def test_shift_invert_with_opinv():
    a = random_hermitian(60, seed=6)
    ev = sl.eigh(a, eigvals_only=True)
    sigma = 0.2
    lu = sl.lu_factor(a - sigma * np.eye(60))
    opinv = sla.LinearOperator(a.shape, matvec=lambda x: sl.lu_solve(lu, x), dtype=np.complex128)
    w, v = jdmg.eigsh(sla.aslinearoperator(a), k=4, sigma=sigma, OPinv=opinv)
    np.testing.assert_allclose(w, expected(ev, 4, "LM", sigma), rtol=1e-9)
    check_pairs(a, w, v, tol=1e-9)


@pytest.mark.parametrize("which", ["SA", "LM", "SM"])
@pytest.mark.parametrize("kind", ["csr", "operator"])
def test_generalized_with_hermitian_positive_definite_m(which, kind):
    a, m = sparse_hermitian(70, seed=7), hpd(70)
    ev = sl.eigh(a.toarray(), m.toarray(), eigvals_only=True)
    w, v = jdmg.eigsh(as_kind(a, kind), k=4, M=as_kind(m, kind), which=which)
    np.testing.assert_allclose(w, expected(ev, 4, which), rtol=1e-9)
    check_pairs(a, w, v, m=m, tol=1e-9)
    # shift-and-invert on A - sigma M
    ws, vs = jdmg.eigsh(a, k=3, M=m, sigma=0.5)
    np.testing.assert_allclose(ws, expected(ev, 3, "LM", 0.5), rtol=1e-9)
    check_pairs(a, ws, vs, m=m, tol=1e-9)


def test_double_eigenvalue_every_copy():
    n = 40
    rng = np.random.default_rng(8)
    q, _ = np.linalg.qr(rng.standard_normal((n, n)) + 1j * rng.standard_normal((n, n)))
    d = np.concatenate([[1.0, 1.0, 1.5, 2.0, 2.0, 2.0], np.linspace(3.0, 9.0, n - 6)])
    a = (q * d) @ q.conj().T
    a = (a + a.conj().T) / 2
    for kind in ("dense", "csr", "operator"):
        w, v = jdmg.eigsh(as_kind(a, kind), k=6, which="SA")
        np.testing.assert_allclose(w, d[:6], rtol=1e-10)
        check_pairs(a, w, v, tol=1e-10)
        # the double eigenvalue's eigenspace is the whole of it
        np.testing.assert_allclose(np.linalg.svd(q[:, :2].conj().T @ v[:, :2], compute_uv=False), 1.0, atol=1e-8)


def test_magnetic_laplacian():
    h = magnetic_laplacian(20, 20, 0.1)
    assert abs(h - h.conj().T).max() == 0
    ev = sl.eigh(h.toarray(), eigvals_only=True)
    w, v, stats = jdmg.eigsh(h, k=6, which="SA", return_stats=True)
    np.testing.assert_allclose(w, ev[:6], rtol=1e-10)
    check_pairs(h, w, v, tol=1e-10)
    assert stats["numMatvecs"] > 0 and stats["embedding"] == 800
    np.testing.assert_allclose(stats["rnorms"], np.linalg.norm(h @ v - v * w, axis=0), rtol=1e-6, atol=1e-13)
    # the same as an operator, with a complex start vector
    op = sla.LinearOperator(h.shape, matvec=lambda x: h @ x, dtype=np.complex128)
    v0 = np.ones(400) + 1j * np.linspace(0, 1, 400)
    w2, v2 = jdmg.eigsh(op, k=6, which="SA", v0=v0, tol=1e-10)
    np.testing.assert_allclose(w2, ev[:6], rtol=1e-8)
    check_pairs(h, w2, v2, tol=1e-9)


def test_lock_and_subsets():
    a = sparse_hermitian(60, seed=9)
    ev = sl.eigh(a.toarray(), eigvals_only=True)
    w1, v1 = jdmg.eigsh(a, k=2, which="SA")
    w2, v2 = jdmg.eigsh(a, k=2, which="SA", lock=v1)  # the next two
    np.testing.assert_allclose(w2, ev[2:4], rtol=1e-9)
    assert abs(v1.conj().T @ v2).max() < 1e-8
    wi, vi = jdmg.eigsh(a, subset_by_index=(3, 6))
    np.testing.assert_allclose(wi, ev[3:7], rtol=1e-9)
    check_pairs(a, wi, vi, tol=1e-9)
    lo, hi = (ev[10] + ev[11]) / 2, (ev[14] + ev[15]) / 2
    wv, vv = jdmg.eigsh(a, subset_by_value=(lo, hi))
    np.testing.assert_allclose(wv, ev[11:15], rtol=1e-9)


def test_cayley_and_both_ends():
    a, m = sparse_hermitian(60, seed=10), hpd(60, seed=11)
    ev = sl.eigh(a.toarray(), m.toarray(), eigvals_only=True)
    sigma = 0.4
    w, v = jdmg.eigsh(a, k=3, M=m, sigma=sigma, which="LM", mode="cayley")
    nu = (ev + sigma) / (ev - sigma)
    np.testing.assert_allclose(w, np.sort(ev[np.argsort(-np.abs(nu))[:3]]), rtol=1e-9)
    check_pairs(a, w, v, m=m, tol=1e-9)
    w = jdmg.eigsh(a, k=5, which="BE", return_eigenvectors=False)
    ev_a = sl.eigh(a.toarray(), eigvals_only=True)
    np.testing.assert_allclose(w, np.concatenate([ev_a[:2], ev_a[-3:]]), rtol=1e-9)


def test_real_matrix_given_complex_and_complex_m():
    a = sparse_hermitian(50, seed=12).real.tocsr()
    a = (a + a.T).tocsr()
    w_real = jdmg.eigsh(a, k=3, which="SA", return_eigenvectors=False)
    w_c, v_c = jdmg.eigsh(a.astype(np.complex128), k=3, which="SA")
    np.testing.assert_allclose(w_c, w_real, rtol=1e-10)
    check_pairs(a, w_c, v_c, tol=1e-10)
    m = hpd(50)
    ev = sl.eigh(a.toarray(), m.toarray(), eigvals_only=True)
    w, v = jdmg.eigsh(a, k=3, M=m, which="SA")  # real A, complex M
    np.testing.assert_allclose(w, ev[:3], rtol=1e-9)
    check_pairs(a, w, v, m=m, tol=1e-9)


def test_k_at_least_n_dense_fallback():
    a = random_hermitian(8, seed=13)
    with pytest.warns(RuntimeWarning):
        w, v = jdmg.eigsh(a, k=8)
    np.testing.assert_allclose(w, sl.eigh(a, eigvals_only=True), rtol=1e-12)
    assert v.dtype == np.complex128
    with pytest.raises(TypeError):
        jdmg.eigsh(sp.csr_matrix(a), k=9)


def test_errors():
    a = random_hermitian(30, seed=14)
    bad = a.copy()
    bad[0, 1] += 0.5j
    for x in (bad, sp.csr_matrix(bad)):
        with pytest.raises(ValueError, match="Hermitian"):
            jdmg.eigsh(x, k=2)
    with pytest.raises(ValueError, match="Hermitian"):
        jdmg.eigsh(a, k=2, M=sp.identity(30) + sp.csr_matrix(bad - a))
    with pytest.raises(TypeError):
        jdmg.eigsh(a, k=2, sigma=1 + 1j)
    w = jdmg.eigsh(a, k=2, sigma=1 + 0j, return_eigenvectors=False)  # a real sigma
    np.testing.assert_allclose(w, expected(sl.eigh(a, eigvals_only=True), 2, "LM", 1.0), rtol=1e-9)
    with pytest.raises(ValueError, match="buckling"):
        jdmg.eigsh(a, k=2, sigma=1.0, mode="buckling")
    with pytest.raises(ValueError):
        jdmg.eigsh(a, k=2, which="XX")
    with pytest.raises(ValueError):
        jdmg.eigsh(a, k=0)
    with pytest.raises(ValueError):
        jdmg.eigsh(a, k=2, ncv=2)
    with pytest.raises(ValueError):
        jdmg.eigsh(a, k=2, v0=np.ones(29, dtype=complex))
    with pytest.raises(ValueError):
        jdmg.eigsh(a[:, :20], k=2)


@pytest.mark.parametrize("maxiter", [2, 60, 70])  # none, 2 and 4 of 6 converge
def test_budget_raises_no_convergence_with_the_converged_pairs(maxiter):
    a = sparse_hermitian(300, seed=2)
    ev = sl.eigh(a.toarray(), eigvals_only=True)
    with pytest.raises(jdmg.NoConvergence) as e:
        jdmg.eigsh(a, k=6, which="SA", maxiter=maxiter, tol=1e-10, rng=0, method="bicgstab")
    assert isinstance(e.value, sla.ArpackNoConvergence)
    got, v = e.value.eigenvalues, e.value.eigenvectors
    assert len(got) < 6 and v.shape == (300, len(got))
    if len(got):  # the pairs that did converge are eigenpairs
        assert np.linalg.norm(a @ v - v * got, axis=0).max() < 1e-8
        assert np.all(np.min(np.abs(got[:, None] - ev[None, :]), axis=1) < 1e-9)


# --- svds ---------------------------------------------------------------------


def random_complex_rect(m, n, seed=0, density=None):
    rng = np.random.default_rng(seed)
    if density is None:
        return rng.standard_normal((m, n)) + 1j * rng.standard_normal((m, n))
    b = sp.random(m, n, density=density, random_state=rng, format="csr")
    b = b + 1j * sp.random(m, n, density=density, random_state=rng, format="csr")
    return (b + sp.eye(m, n)).tocsr()


def audit_svd(a, u, s, vh, tol):
    a = dense(a).astype(complex)
    u, vh = u.astype(complex), vh.astype(complex)
    res = np.sqrt(
        np.sum(np.abs(a @ vh.conj().T - u * s) ** 2, axis=0)
        + np.sum(np.abs(a.conj().T @ u - vh.conj().T * s) ** 2, axis=0)
    )
    assert res.max() <= tol * np.linalg.norm(a, 2), res
    np.testing.assert_allclose(u.conj().T @ u, np.eye(len(s)), atol=max(tol, 1e-7) * 10)
    np.testing.assert_allclose(vh @ vh.conj().T, np.eye(len(s)), atol=max(tol, 1e-7) * 10)
    assert np.all(np.diff(s) >= 0)


@pytest.mark.parametrize("shape", [(60, 35), (35, 60)])
@pytest.mark.parametrize("which", ["LM", "SM"])
@pytest.mark.parametrize("kind", ["dense", "csr", "operator"])
def test_svds_complex_against_numpy(shape, which, kind):
    a = random_complex_rect(*shape, seed=15, density=0.2)
    sv = np.linalg.svd(a.toarray(), compute_uv=False)
    want = np.sort(sv)[-4:] if which == "LM" else np.sort(sv)[:4]
    op = {"dense": a.toarray(), "csr": a, "operator": sla.aslinearoperator(a)}[kind]
    u, s, vh = jdmg.svds(op, k=4, which=which)
    assert u.shape == (shape[0], 4) and vh.shape == (4, shape[1])
    assert u.dtype == np.complex128 and s.dtype == np.float64
    np.testing.assert_allclose(s, want, rtol=1e-10)
    audit_svd(a, u, s, vh, 1e-10)


def test_svds_operator_with_rmatvec_only_and_vector_choices():
    a = random_complex_rect(50, 30, seed=16)
    op = sla.LinearOperator(a.shape, matvec=lambda x: a @ x, rmatvec=lambda y: a.conj().T @ y, dtype=np.complex128)
    sv = np.linalg.svd(a, compute_uv=False)
    u, s, vh = jdmg.svds(op, k=3)
    np.testing.assert_allclose(s, np.sort(sv)[-3:], rtol=1e-10)
    audit_svd(a, u, s, vh, 1e-10)
    s_only = jdmg.svds(op, k=3, return_singular_vectors=False)
    np.testing.assert_allclose(s_only, s, rtol=1e-12)
    u2, s2, vh2 = jdmg.svds(a, k=3, return_singular_vectors="u")
    assert vh2 is None and u2.shape == (50, 3)
    u3, s3, vh3 = jdmg.svds(a, k=3, return_singular_vectors="vh")
    assert u3 is None and vh3.shape == (3, 30)


def test_svds_single_precision_and_errors():
    a = random_complex_rect(40, 25, seed=17).astype(np.complex64)
    u, s, vh = jdmg.svds(a, k=3, which="SM")
    assert u.dtype == np.complex64 and s.dtype == np.float32 and vh.dtype == np.complex64
    sv = np.sort(np.linalg.svd(a.astype(np.complex128), compute_uv=False))
    np.testing.assert_allclose(s, sv[:3], rtol=1e-5)
    audit_svd(a, u, s, vh, 1e-5)
    for kwargs in [dict(k=0), dict(k=26), dict(which="LA"), dict(v0=np.ones(3, dtype=complex)),
                   dict(return_singular_vectors="x")]:
        with pytest.raises(ValueError):
            jdmg.svds(a, **{"k": 3, **kwargs})
