#!/usr/bin/env python3
"""One eigensolve with PRIMME or SciPy/ARPACK, for bench/src/bin/eigbench.rs.

Usage:
  eig_compare.py --solver primme|primme-b4|arpack|slepc-lobpcg|slepc-lobpcg-nopc|slepc-ks
                 --matrix FILE.mtx [--nev 4] [--tol 1e-8]
                 [--anorm X] [--arpack-tol X] [--max-matvecs N]

Runs one solver on one matrix per invocation (so every measurement is a fresh
process) and prints one JSON line on stdout: solver, version, status
("ok", "not converged", "not installed", "error"), eigenvalues (ascending),
true residual norms ||A v - lambda v|| (recomputed here), converged, matvecs,
wall_seconds (the eigensolve only, not reading the file) and load_seconds.
Thread counts come from the environment (OMP_NUM_THREADS, OPENBLAS_NUM_THREADS).

Solvers are called with their defaults except for what the comparison needs:
  primme: primme.eigsh(A, k=nev, which='SA', tol=tol) -- PRIMME's default method;
          its test is ||r|| <= tol * (estimate of ||A||), the same as jdmg --conv norm.
          --max-matvecs sets maxMatvecs (a cap so that hopeless runs end).
  primme-b4: the same with maxBlockSize=4 (a block that can hold a triple eigenvalue).
  slepc-*: SLEPc EPS (slepc4py) on a PETSc AIJ copy of the matrix, HEP, SMALLEST_REAL,
          convergence test NORM (||r|| <= tol*||A||), nev = --nev, everything else SLEPc's
          default: slepc-lobpcg (EPSLOBPCG; note that its default spectral transform is
          STPRECOND with PCBJACOBI, i.e. ILU(0) on one process), slepc-lobpcg-nopc (the same
          with PCNONE), slepc-ks (Krylov-Schur, SLEPc's default solver). matvecs counts
          MatMult calls plus columns of the MatMatMult block products (from their
          logged flops, 2 nnz per column).
  arpack: scipy.sparse.linalg.eigsh(A, k=nev, which='SA', tol=arpack_tol) on a
          LinearOperator that counts matvecs. ARPACK's test is ||r|| <= tol * |theta|
          per Ritz value (|theta| floored at eps^(2/3)); the caller passes
          arpack_tol = tol * ||A|| / max(max|lambda_wanted|, eps^(2/3)) so that each pair
          meets ||r|| <= tol * ||A|| (the 4th exactly, the others more strictly). Without --arpack-tol, tol is used unchanged. --max-matvecs sets
          maxiter = ceil(N / (ncv - nev)) (ARPACK's maxiter counts restarts).
"""
import argparse
import json
import math
import sys
import time


def emit(obj):
    print(json.dumps(obj), flush=True)


def true_residuals(a, w, v):
    import numpy as np

    if v is None or len(w) == 0:
        return []
    r = a @ v - v * w[np.newaxis, :]
    return [float(x) for x in np.linalg.norm(r, axis=0)]


def module_version(name):
    try:
        from importlib.metadata import version

        return version(name)
    except Exception:
        return "unknown"


def load(path):
    try:
        import fast_matrix_market as fmm

        a = fmm.read_scipy(path)
    except ImportError:
        import scipy.io

        a = scipy.io.mmread(path)
    return a.tocsr()


def run_primme(a, args, block=1):
    import numpy as np
    import primme

    kw = {}
    cap = args.max_matvecs
    if cap:
        kw["maxMatvecs"] = int(cap)
    if block > 1:
        kw["maxBlockSize"] = block
    t = time.perf_counter()
    w, v, stats = primme.eigsh(
        a,
        k=args.nev,
        which="SA",
        tol=args.tol,
        return_stats=True,
        return_unconverged=True,
        raise_for_unconverged=False,
        **kw,
    )
    wall = time.perf_counter() - t
    matvecs = int(stats["numMatvecs"])
    # PRIMME returns only when every pair converged or a limit was hit; the only
    # limit set here is maxMatvecs.
    converged = not (cap and matvecs >= cap)
    order = np.argsort(w)
    w, v = np.asarray(w)[order], np.asarray(v)[:, order]
    return {
        "version": module_version("primme"),
        "eigenvalues": [float(x) for x in w],
        "residual_norms": true_residuals(a, w, v),
        "converged": bool(converged),
        "matvecs": matvecs,
        "wall_seconds": wall,
        "anorm_estimate": float(stats["estimateLargestSVal"]),
        "solver_tol": args.tol,
    }


def run_slepc(a, args, kind):
    import numpy as np
    import petsc4py
    import slepc4py

    petsc4py.init([])
    slepc4py.init([])
    from petsc4py import PETSc
    from slepc4py import SLEPc

    csr = (a.indptr.astype(PETSc.IntType), a.indices.astype(PETSc.IntType), a.data)
    mat = PETSc.Mat().createAIJ(size=a.shape, csr=csr)
    mat.assemble()
    PETSc.Log.begin()
    eps = SLEPc.EPS().create()
    eps.setOperators(mat)
    eps.setProblemType(SLEPc.EPS.ProblemType.HEP)
    eps.setType(SLEPc.EPS.Type.KRYLOVSCHUR if kind == "ks" else SLEPc.EPS.Type.LOBPCG)
    eps.setWhichEigenpairs(SLEPc.EPS.Which.SMALLEST_REAL)
    eps.setDimensions(args.nev)
    eps.setConvergenceTest(SLEPc.EPS.Conv.NORM)
    eps.setTolerances(args.tol, args.max_matvecs or 1000000)
    if kind == "lobpcg-nopc":
        eps.getST().getKSP().getPC().setType("none")
    t = time.perf_counter()
    eps.solve()
    wall = time.perf_counter() - t
    nconv = eps.getConverged()
    w, vecs = [], []
    xr = mat.createVecRight()
    for i in range(min(nconv, args.nev)):
        w.append(eps.getEigenpair(i, xr).real)
        vecs.append(xr.getArray().copy())
    mv = PETSc.Log.Event("MatMult").getPerfInfo()["count"]
    # A sparse-times-dense product logs 2 nnz flops per column: its columns are its
    # matvecs (LOBPCG multiplies blocks of varying width; counting each call as 4
    # products gave 134 instead of 90 on lap3d:40 with nev = 1, and 523 instead
    # of 628 with nev = 4).
    mm_flops = PETSc.Log.Event("MatMatMultNum").getPerfInfo()["flops"]
    mm = round(mm_flops / (2.0 * max(a.nnz, 1)))
    w = np.asarray(w, dtype=float)
    v = np.column_stack(vecs) if vecs else None
    order = np.argsort(w)
    w = w[order]
    v = None if v is None else v[:, order]
    return {
        "version": module_version("slepc4py"),
        "eigenvalues": [float(x) for x in w],
        "residual_norms": true_residuals(a, w, v),
        "converged": bool(nconv >= args.nev),
        "matvecs": int(mv) + int(mm),
        "wall_seconds": wall,
        "solver_tol": args.tol,
        "settings": f"{eps.getType()} st={eps.getST().getType()} pc={eps.getST().getKSP().getPC().getType()}",
    }


def run_arpack(a, args):
    import numpy as np
    import scipy
    from scipy.sparse.linalg import ArpackNoConvergence, LinearOperator, eigsh

    n = a.shape[0]
    count = [0]

    def mv(x):
        count[0] += 1
        return a @ x

    op = LinearOperator(a.shape, matvec=mv, dtype=a.dtype)
    tol = args.arpack_tol if args.arpack_tol is not None else args.tol
    ncv = min(n, max(2 * args.nev + 1, 20))  # scipy's default, stated for maxiter
    kw = {}
    if args.max_matvecs:
        kw["maxiter"] = max(1, math.ceil(args.max_matvecs / (ncv - args.nev)))
    t = time.perf_counter()
    converged = True
    try:
        w, v = eigsh(op, k=args.nev, which="SA", tol=tol, ncv=ncv, **kw)
    except ArpackNoConvergence as e:
        converged = False
        w, v = e.eigenvalues, e.eigenvectors
    wall = time.perf_counter() - t
    w = np.asarray(w, dtype=float)
    order = np.argsort(w)
    w = w[order]
    v = None if v is None else np.asarray(v)[:, order]
    return {
        "version": scipy.__version__,
        "eigenvalues": [float(x) for x in w],
        "residual_norms": true_residuals(a, w, v),
        "converged": bool(converged and len(w) == args.nev),
        "matvecs": count[0],
        "wall_seconds": wall,
        "solver_tol": tol,
    }


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument(
        "--solver",
        required=True,
        choices=["primme", "primme-b4", "arpack", "slepc-lobpcg", "slepc-lobpcg-nopc", "slepc-ks"],
    )
    p.add_argument("--matrix", required=True)
    p.add_argument("--nev", type=int, default=4)
    p.add_argument("--tol", type=float, default=1e-8)
    p.add_argument("--arpack-tol", type=float, default=None)
    p.add_argument("--max-matvecs", type=int, default=0)
    args = p.parse_args()
    out = {"solver": args.solver, "matrix": args.matrix, "nev": args.nev, "tol": args.tol}
    mods = ["numpy", "scipy"]
    if args.solver.startswith("primme"):
        mods.append("primme")
    if args.solver.startswith("slepc"):
        mods += ["petsc4py", "slepc4py"]
    for m in mods:
        try:
            __import__(m)
        except ImportError:
            out.update(status="not installed", error=f"python module {m} not installed")
            emit(out)
            return 0
    try:
        t = time.perf_counter()
        a = load(args.matrix)
        out["load_seconds"] = time.perf_counter() - t
        out["n"] = int(a.shape[0])
        if args.solver.startswith("primme"):
            res = run_primme(a, args, 4 if args.solver == "primme-b4" else 1)
        elif args.solver.startswith("slepc"):
            res = run_slepc(a, args, args.solver[len("slepc-"):])
        else:
            res = run_arpack(a, args)
        out.update(res)
        out["status"] = "ok" if res["converged"] else "not converged"
    except Exception as e:  # report, never crash without a JSON line
        out.update(status="error", error=f"{type(e).__name__}: {e}")
    emit(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
