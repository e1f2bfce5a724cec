"""jdmg.svds against numpy's dense SVD and scipy.sparse.linalg.svds: values,
SciPy's return conventions, residuals and orthonormality recomputed from what
is returned, LinearOperators, errors."""

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.linalg as sla

import jdmg


def grad2d(nx, ny, alpha):
    """The grid graph's gradient over alpha * I, and its singular values."""
    def path(n):
        return sp.diags([-np.ones(n - 1), np.ones(n - 1)], [0, 1], shape=(n - 1, n))

    a = sp.vstack([
        sp.kron(sp.identity(ny), path(nx)),
        sp.kron(path(ny), sp.identity(nx)),
        alpha * sp.identity(nx * ny),
    ]).tocsr()
    ev = lambda n: 2 - 2 * np.cos(np.pi * np.arange(n) / n)
    s = np.sort(np.sqrt((ev(nx)[:, None] + ev(ny)[None, :]).ravel() + alpha**2))
    return a, s


def random_rect(m, n, seed=0):
    rng = np.random.default_rng(seed)
    b = sp.random(m, n, density=0.08, random_state=rng, format="csr")
    return (b + sp.eye(m, n)).tocsr()


def audit(a, u, s, vh, tol):
    av = a @ vh.T
    atu = a.T @ u
    res = np.sqrt(np.sum((av - u * s) ** 2, axis=0) + np.sum((atu - vh.T * s) ** 2, axis=0))
    anorm = np.linalg.norm(a.toarray(), 2)
    assert res.max() <= tol * anorm * 1.001
    np.testing.assert_allclose(u.T @ u, np.eye(len(s)), atol=1e-9)
    np.testing.assert_allclose(vh @ vh.T, np.eye(len(s)), atol=1e-9)


@pytest.mark.parametrize("which", ["LM", "SM"])
@pytest.mark.parametrize("wide", [False, True])
def test_grid_gradient_against_closed_form(which, wide):
    a, truth = grad2d(12, 9, 0.05)
    if wide:
        a = a.T.tocsr()
    u, s, vh = jdmg.svds(a, k=5, which=which, tol=1e-10)
    want = truth[-5:] if which == "LM" else truth[:5]
    np.testing.assert_allclose(s, want, rtol=1e-9)  # ascending, as SciPy
    assert u.shape == (a.shape[0], 5) and vh.shape == (5, a.shape[1])
    audit(a, u, s, vh, 1e-10)


@pytest.mark.parametrize("which", ["LM", "SM"])
def test_random_against_dense_and_scipy(which):
    a = random_rect(80, 50)
    dense = np.linalg.svd(a.toarray(), compute_uv=False)
    want = np.sort(dense)[-4:] if which == "LM" else np.sort(dense)[:4]
    s = jdmg.svds(a, k=4, which=which, return_singular_vectors=False)
    np.testing.assert_allclose(s, want, rtol=1e-10)
    ref = sla.svds(a, k=4, which=which, return_singular_vectors=False, rng=0)
    np.testing.assert_allclose(s, ref, rtol=1e-8)


def test_tol_zero_is_machine_precision_and_vectors_as_asked():
    a = random_rect(60, 40, seed=3)
    dense = np.sort(np.linalg.svd(a.toarray(), compute_uv=False))
    u, s, vh = jdmg.svds(a, k=3)
    np.testing.assert_allclose(s, dense[-3:], rtol=1e-13)
    audit(a, u, s, vh, 1e-12)
    u2, s2, vh2 = jdmg.svds(a, k=3, return_singular_vectors="u")
    assert vh2 is None and u2.shape == (60, 3)
    u3, s3, vh3 = jdmg.svds(a, k=3, return_singular_vectors="vh")
    assert u3 is None and vh3.shape == (3, 40)
    np.testing.assert_array_equal(s, s2)


def test_linear_operator_with_rmatvec():
    a, truth = grad2d(10, 7, 0.3)
    op = sla.LinearOperator(a.shape, matvec=lambda x: a @ x, rmatvec=lambda y: a.T @ y, dtype=float)
    u, s, vh = jdmg.svds(op, k=3, which="SM", tol=1e-10)
    np.testing.assert_allclose(s, truth[:3], rtol=1e-9)
    audit(a, u, s, vh, 1e-10)


def test_same_rng_same_result_and_stats():
    a = random_rect(70, 45, seed=5)
    r1 = jdmg.svds(a, k=3, which="SM", rng=np.random.default_rng(7), return_stats=True)
    r2 = jdmg.svds(a, k=3, which="SM", rng=np.random.default_rng(7), return_stats=True)
    np.testing.assert_array_equal(r1[1], r2[1])
    stats = r1[3]
    assert stats["products"] == stats["norm_products"] + stats["stage1_products"] + stats["stage2_products"]
    assert stats["normal_side"] == "AtA"


def test_errors_as_scipy():
    a = random_rect(20, 10)
    for kwargs in [dict(k=0), dict(k=11), dict(which="LA"), dict(tol=-1.0), dict(maxiter=0),
                   dict(return_singular_vectors="x"), dict(solver="nope"), dict(v0=np.ones(3))]:
        with pytest.raises(ValueError):
            sla.svds(a, **{"k": 3, **kwargs})
        with pytest.raises(ValueError):
            jdmg.svds(a, **{"k": 3, **kwargs})
    # complex A: the real embedding (test_complex.py), the same singular values
    np.testing.assert_allclose(
        jdmg.svds(a.astype(complex), k=2, return_singular_vectors=False),
        jdmg.svds(a, k=2, return_singular_vectors=False),
        rtol=1e-10,
    )


def test_budget_raises_no_convergence_with_the_converged_values():
    a, _ = grad2d(25, 25, 0.01)
    with pytest.raises(jdmg.NoConvergence) as e:
        jdmg.svds(a, k=4, which="SM", maxiter=5, tol=1e-12)
    assert isinstance(e.value, sla.ArpackNoConvergence)
    assert len(e.value.eigenvalues) < 4
    assert e.value.stats["products"] > 0
