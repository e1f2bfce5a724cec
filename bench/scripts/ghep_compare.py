#!/usr/bin/env python3
"""Generalized eigenproblems K x = lambda M x (issue 23): jdmg against SLEPc
(EPS_GHEP, LOBPCG and Krylov-Schur), PRIMME (primme.eigsh(M=...)) and SciPy's
lobpcg(B=...), on a FEM stiffness/mass pair from jdmg's generator.

Usage:
  ghep_compare.py --jdmg target/release/jdmg --spec fem3d:40 [--nev 4]
                  [--tol 1e-8] [--repeat 3] [--solvers jdmg,slepc-lobpcg,slepc-ks,primme,scipy-lobpcg]
                  [--workdir /tmp/ghep_bench]

Run with the anchors' Python (numpy, scipy, slepc4py, primme), e.g.
  /tmp/anchors/bin/python bench/scripts/ghep_compare.py --jdmg target/release/jdmg --spec fem3d:40

Every measurement is a fresh process (this script re-invokes itself with
--one SOLVER for the Python solvers; jdmg is its own process), interleaved
round by round; the table gives the median wall time of --repeat rounds.
Times are of the eigensolve, setup included (jdmg: stats.wall_seconds +
stats.setup_seconds, the matrices generated in memory; the others: the
solver call after the matrices were read), one thread
(OMP_NUM_THREADS=OPENBLAS_NUM_THREADS=1, jdmg --threads 1).

Convergence: jdmg's default test, ||Kx - tMx|| <= tol (||K|| + |t| ||M||) ||x||;
SLEPc EPS_CONV_NORM, the same backward error; PRIMME's tol is relative to
its estimate of ||K||; SciPy lobpcg's tol is its own residual norm. The script
recomputes for every solver the backward errors of the returned pairs and
checks the eigenvalues against the closed form (the generator's).

The matrices are written under --workdir (not committed).
"""
import argparse
import json
import math
import os
import subprocess
import sys
import time


def emit(obj):
    print(json.dumps(obj), flush=True)


def load(path):
    import scipy.io

    return scipy.io.mmread(path).tocsr()


def exact_fem(spec, nev):
    """Smallest generalized eigenvalues of femNd:N (cube/square/interval)."""
    import numpy as np

    kind, rest = spec.split(":", 1)
    dim = int(kind[3])
    dims = [int(x) for x in rest.split(":")[0].split("x")]
    if len(dims) == 1:
        dims = dims * dim
    vals = np.array([0.0])
    for m in dims:
        h = 1.0 / (m + 1)
        th = np.arange(1, m + 1) * math.pi / (m + 1)
        l1 = 6 * (1 - np.cos(th)) / (h * h * (2 + np.cos(th)))
        vals = (vals[:, None] + l1[None, :]).ravel()
        vals.sort()
        vals = vals[: max(nev * 8, 64)]
    return [float(v) for v in vals[:nev]]


def backward(k, m, w, v):
    import numpy as np
    import scipy.sparse.linalg as sla

    kn = sla.norm(k, 1)
    mn = sla.norm(m, 1)
    r = k @ v - (m @ v) * w[np.newaxis, :]
    return [
        float(np.linalg.norm(r[:, j]) / ((kn + abs(w[j]) * mn) * np.linalg.norm(v[:, j])))
        for j in range(len(w))
    ]


def run_slepc(k, m, args, kind):
    import numpy as np
    import slepc4py

    slepc4py.init([])
    from petsc4py import PETSc
    from slepc4py import SLEPc

    def aij(a):
        csr = (a.indptr.astype(PETSc.IntType), a.indices.astype(PETSc.IntType), a.data)
        return PETSc.Mat().createAIJ(size=a.shape, csr=csr)

    K, M = aij(k), aij(m)
    PETSc.Log.begin()
    t0 = time.perf_counter()
    eps = SLEPc.EPS().create()
    eps.setOperators(K, M)
    eps.setProblemType(SLEPc.EPS.ProblemType.GHEP)
    eps.setType(SLEPc.EPS.Type.KRYLOVSCHUR if kind == "ks" else SLEPc.EPS.Type.LOBPCG)
    eps.setWhichEigenpairs(SLEPc.EPS.Which.SMALLEST_REAL)
    eps.setDimensions(args.nev)
    eps.setConvergenceTest(SLEPc.EPS.Conv.NORM)
    eps.setTolerances(args.tol, 1000000)
    eps.setFromOptions()
    eps.solve()
    wall = time.perf_counter() - t0
    nconv = eps.getConverged()
    w, vs = [], []
    vr = K.createVecs()[0]
    for i in range(min(nconv, args.nev)):
        w.append(eps.getEigenpair(i, vr).real)
        vs.append(vr.getArray().copy())
    order = np.argsort(w)
    w = np.array(w)[order]
    v = np.array(vs).T[:, order] if vs else None
    mv = PETSc.Log.Event("MatMult").getPerfInfo()["count"]
    mm = PETSc.Log.Event("MatMatMultNum").getPerfInfo()["count"]
    return {
        "eigenvalues": [float(x) for x in w],
        "backward": backward(k, m, w, v) if v is not None else [],
        "converged": nconv >= args.nev,
        "matvecs": int(mv + mm * args.nev),
        "wall_seconds": wall,
        "settings": f"{eps.getType()} st={eps.getST().getType()} "
        f"ksp={eps.getST().getKSP().getType()} pc={eps.getST().getKSP().getPC().getType()}",
    }


def run_primme(k, m, args):
    import numpy as np
    import primme

    t0 = time.perf_counter()
    w, v, stats = primme.eigsh(
        k, k=args.nev, M=m, which="SA", tol=args.tol, return_stats=True, maxMatvecs=200000
    )
    wall = time.perf_counter() - t0
    order = np.argsort(w)
    w, v = w[order], v[:, order]
    return {
        "eigenvalues": [float(x) for x in w],
        "backward": backward(k, m, w, v),
        "converged": True,
        "matvecs": int(stats["numMatvecs"]),
        "wall_seconds": wall,
        "settings": "primme.eigsh(M=M, which='SA') default method",
    }


def run_scipy_lobpcg(k, m, args):
    import numpy as np
    from scipy.sparse.linalg import lobpcg

    rng = np.random.default_rng(1)
    x = rng.standard_normal((k.shape[0], args.nev))
    t0 = time.perf_counter()
    w, v = lobpcg(k, x, B=m, largest=False, tol=args.tol, maxiter=2000)
    wall = time.perf_counter() - t0
    order = np.argsort(w)
    w, v = w[order], v[:, order]
    return {
        "eigenvalues": [float(x) for x in w],
        "backward": backward(k, m, w, v),
        "converged": True,
        "matvecs": None,
        "wall_seconds": wall,
        "settings": "scipy lobpcg(B=M, largest=False, maxiter=2000), no preconditioner",
    }


def one(args):
    k = load(os.path.join(args.workdir, "K.mtx"))
    m = load(os.path.join(args.workdir, "M.mtx"))
    s = args.one
    if s.startswith("slepc-"):
        res = run_slepc(k, m, args, "ks" if s == "slepc-ks" else "lobpcg")
    elif s == "primme":
        res = run_primme(k, m, args)
    elif s == "scipy-lobpcg":
        res = run_scipy_lobpcg(k, m, args)
    else:
        raise SystemExit(f"unknown solver {s}")
    res["solver"] = s
    emit(res)


def run_jdmg(args):
    out = subprocess.run(
        [
            args.jdmg,
            "solve",
            "--generate",
            args.spec,
            "--mass-generate",
            "--nev",
            str(args.nev),
            "--tol",
            str(args.tol),
            "--threads",
            "1",
            "--json",
            "--eigenvectors",
            os.path.join(args.workdir, "X.mtx"),
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    d = json.loads(out)
    st = d["stats"]
    import numpy as np
    import scipy.io

    k = load(os.path.join(args.workdir, "K.mtx"))
    m = load(os.path.join(args.workdir, "M.mtx"))
    x = np.asarray(scipy.io.mmread(os.path.join(args.workdir, "X.mtx")))
    w = np.array(d["eigenvalues"])
    return {
        "solver": "jdmg",
        "eigenvalues": d["eigenvalues"],
        "backward": backward(k, m, w, x),
        "converged": d["converged"],
        "matvecs": st["matvecs"],
        "mass_matvecs": st.get("mass_matvecs"),
        "wall_seconds": st["wall_seconds"] + st.get("setup_seconds", 0.0),
        "settings": "jdmg solve --generate SPEC --mass-generate (defaults)",
    }


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--jdmg", default="target/release/jdmg")
    p.add_argument("--spec", default="fem3d:40")
    p.add_argument("--nev", type=int, default=4)
    p.add_argument("--tol", type=float, default=1e-8)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--solvers", default="jdmg,slepc-lobpcg,slepc-ks,primme,scipy-lobpcg")
    p.add_argument("--workdir", default="/tmp/ghep_bench")
    p.add_argument("--one", default=None)
    args = p.parse_args()
    if args.one:
        return one(args)
    os.makedirs(args.workdir, exist_ok=True)
    for part, name in (("", "K.mtx"), (":mass", "M.mtx")):
        path = os.path.join(args.workdir, name)
        subprocess.run([args.jdmg, "generate", args.spec + part, "-o", path], check=True)
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    exact = exact_fem(args.spec, args.nev)
    runs = {s: [] for s in args.solvers.split(",")}
    for rnd in range(args.repeat):
        for s in runs:
            if s == "jdmg":
                res = run_jdmg(args)
            else:
                out = subprocess.run(
                    [sys.executable, __file__, "--one", s] + sys.argv[1:],
                    check=False,
                    capture_output=True,
                    text=True,
                    env=env,
                )
                if out.returncode != 0:
                    res = {"solver": s, "error": out.stderr[-400:]}
                else:
                    res = json.loads(out.stdout.strip().splitlines()[-1])
            res["round"] = rnd
            if "eigenvalues" in res:
                ev = res["eigenvalues"]
                res["right_set"] = len(ev) == len(exact) and all(
                    abs(a - b) <= 1e-6 * abs(b) for a, b in zip(ev, exact)
                )
            print(json.dumps(res), file=sys.stderr, flush=True)
            runs[s].append(res)
    base = None
    rows = []
    for s, rs in runs.items():
        ok = [r for r in rs if "wall_seconds" in r]
        if not ok:
            rows.append((s, None, None, None, None, rs[0].get("error", "")))
            continue
        t = sorted(r["wall_seconds"] for r in ok)[len(ok) // 2]
        if s == "slepc-lobpcg":
            base = t
        worst = max(max(r["backward"]) if r["backward"] else float("nan") for r in ok)
        rows.append((s, ok[0]["matvecs"], t, all(r.get("right_set") for r in ok), worst, ok[0]["settings"]))
    print(f"| solver | matvecs | median wall (s) | / SLEPc LOBPCG | right set | max backward error | settings |")
    print("|---|---|---|---|---|---|---|")
    for s, mv, t, right, worst, settings in rows:
        ratio = f"{t / base:.2f}" if (t is not None and base) else ""
        tt = f"{t:.3f}" if t is not None else "failed"
        we = f"{worst:.1e}" if worst is not None else ""
        print(f"| {s} | {mv} | {tt} | {ratio} | {right} | {we} | {settings} |")


if __name__ == "__main__":
    main()
