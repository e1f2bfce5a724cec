#!/usr/bin/env python3
"""jdmg.eigsh against primme.eigsh, SciPy's eigsh (ARPACK) and lobpcg, and
slepc4py (EPS LOBPCG, Krylov-Schur) on lap3d:N, and the overhead of the Python
call against the CLI's solve time.

Usage:
  python_bench.py [--n 64] [--nev 4] [--tol 1e-8] [--repeat 3]
                  [--cli target/release/jdmg] [--solvers jdmg,cli,primme,...]
                  [--json out.json]

Every solver gets the 4 (--nev) smallest eigenvalues of the 7-point Laplacian
on an N^3 grid (Dirichlet; the matrix of `jdmg generate lap3d:N`, built here
with scipy.sparse.kron) to ||r|| <= tol * ||A|| (PRIMME's and jdmg's test;
SLEPc's NORM test; ARPACK and lobpcg are given the tolerance that implies it,
see below), one thread, and is timed around the solver call alone (the matrix
is built before). The table shows the medians of --repeat runs, the products
with A of the last run and the largest true residual ||Ax - lx|| / ||A||.

Overhead: `jdmg.eigsh` with GD+k steps (`method='bicgstab'`, whose counters
repeat run to run) is timed around the whole Python call (the conversion of
the SciPy matrix, the call, the results); the CLI, `jdmg solve --generate
lap3d:N --nev 4 --inner-solver bicgstab --json`, reports its own solve time
(`stats.wall_seconds` + `stats.setup_seconds`: preconditioner setup and
solve, without the generation of the matrix). The runs alternate CLI and
Python; the overhead is (median Python call - median CLI solve) / median CLI
solve. The same matvec count on both sides shows that they ran the same
solve. Since other jobs make the solve times vary by more than the overhead,
the time of the Python call outside the solve it reports (the whole call less
`setup_seconds + wall_seconds`) is printed too. The default method (`auto`, GD+k or block JDQMR by measured progress
per second) is timed too, but its steps follow timings, so its runs differ.

slepc4py: eig_compare.py's settings (HEP, SMALLEST_REAL, NORM test).
ARPACK: eigsh(A, k, which='SA', tol=tol*||A||/|l_k|), so that ||r|| <=
tol*|l| means ||r|| <= tol*||A||; capped at --arpack-maxiter restarts.
lobpcg: its test is ||r|| <= tol (absolute), given tol*||A||; no preconditioner
(the diagonal is constant here, and with an incomplete LU from spilu lobpcg
stalled at ||r|| ~ 1e-5 on the triple eigenvalue); capped at --lobpcg-maxiter;
run --lobpcg-repeat times (default once: minutes per run).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np
import scipy.sparse as sp


def lap3d(m):
    t = sp.diags([-np.ones(m - 1), 2 * np.ones(m), -np.ones(m - 1)], [-1, 0, 1], format="csr")
    i = sp.identity(m, format="csr")
    a = sp.kron(sp.kron(t, i), i) + sp.kron(sp.kron(i, t), i) + sp.kron(sp.kron(i, i), t)
    a = a.tocsr()
    a.sort_indices()
    return a


def true_residual(a, w, v, anorm):
    if v is None or len(w) == 0:
        return float("nan")
    r = a @ v - v * w
    return float(np.linalg.norm(r, axis=0).max() / anorm)


class Counting:
    """A LinearOperator counting products (for ARPACK and lobpcg)."""

    def __init__(self, a):
        from scipy.sparse.linalg import LinearOperator

        self.count = 0
        self.a = a

        def mv(x):
            self.count += 1
            return a @ x

        def mm(x):
            self.count += x.shape[1]
            return a @ x

        self.op = LinearOperator(a.shape, matvec=mv, matmat=mm, dtype=np.float64)


def run_jdmg(a, args, method=None):
    import jdmg

    kw = {} if method is None else {"method": method}
    t = time.perf_counter()
    w, v, st = jdmg.eigsh(a, k=args.nev, which="SA", tol=args.tol, return_stats=True, **kw)
    wall = time.perf_counter() - t
    return dict(w=w, v=v, wall=wall, matvecs=st["matvecs"], solve=st["wall_seconds"] + st["setup_seconds"])


def run_cli(args, method=None):
    cmd = [args.cli, "solve", "--generate", f"lap3d:{args.n}", "--nev", str(args.nev), "--tol", str(args.tol), "--json"]
    if method is not None:
        cmd += ["--inner-solver", method]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    j = json.loads(out)
    st = j["stats"] if "stats" in j else j["solution"]["stats"]
    w = j.get("eigenvalues") or j["solution"]["eigenvalues"]
    return dict(w=np.sort(np.asarray(w)), v=None, wall=st["wall_seconds"] + st["setup_seconds"], matvecs=st["matvecs"])


def run_primme(a, args):
    import primme

    t = time.perf_counter()
    w, v, st = primme.eigsh(a, k=args.nev, which="SA", tol=args.tol, return_stats=True)
    wall = time.perf_counter() - t
    o = np.argsort(w)
    return dict(w=w[o], v=v[:, o], wall=wall, matvecs=int(st["numMatvecs"]))


def run_arpack(a, args):
    from scipy.sparse.linalg import ArpackNoConvergence, eigsh

    c = Counting(a)
    # ||r|| <= tol_a * |l| for each wanted l: tol_a = tol * ||A|| / |l_k| gives ||r|| <= tol*||A||
    tol_a = args.tol * args.anorm / args.lam_k
    t = time.perf_counter()
    try:
        w, v = eigsh(c.op, k=args.nev, which="SA", tol=tol_a, maxiter=args.arpack_maxiter)
        note = ""
    except ArpackNoConvergence as e:
        w, v = e.eigenvalues, e.eigenvectors
        note = f"not converged ({len(w)}/{args.nev})"
    wall = time.perf_counter() - t
    o = np.argsort(w)
    return dict(w=np.asarray(w)[o], v=np.asarray(v)[:, o], wall=wall, matvecs=c.count, note=note)


def run_lobpcg(a, args):
    import warnings

    from scipy.sparse.linalg import lobpcg

    c = Counting(a)
    x = np.random.default_rng(1).standard_normal((a.shape[0], args.nev))
    t = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        w, v = lobpcg(c.op, x, largest=False, tol=args.tol * args.anorm, maxiter=args.lobpcg_maxiter)
    wall = time.perf_counter() - t
    o = np.argsort(w)
    w, v = w[o], v[:, o]
    # lobpcg warns when it stops at maxiter short of its tolerance
    missed = any("not reaching the requested tolerance" in str(m.message) for m in caught)
    note = "not converged (maxiter)" if missed else ""
    return dict(w=w, v=v, wall=wall, matvecs=c.count, note=note)


def run_slepc(a, args, kind):
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
    mv0 = PETSc.Log.Event("MatMult").getPerfInfo()["count"]
    mm0 = PETSc.Log.Event("MatMatMultNum").getPerfInfo()["count"]
    eps = SLEPc.EPS().create()
    eps.setOperators(mat)
    eps.setProblemType(SLEPc.EPS.ProblemType.HEP)
    eps.setType(SLEPc.EPS.Type.KRYLOVSCHUR if kind == "ks" else SLEPc.EPS.Type.LOBPCG)
    eps.setWhichEigenpairs(SLEPc.EPS.Which.SMALLEST_REAL)
    eps.setDimensions(args.nev)
    eps.setConvergenceTest(SLEPc.EPS.Conv.NORM)
    eps.setTolerances(args.tol, 1000000)
    t = time.perf_counter()
    eps.solve()
    wall = time.perf_counter() - t
    nconv = min(eps.getConverged(), args.nev)
    xr = mat.createVecRight()
    w, vs = [], []
    for i in range(nconv):
        w.append(eps.getEigenpair(i, xr).real)
        vs.append(xr.getArray().copy())
    w = np.asarray(w)
    o = np.argsort(w)
    v = np.column_stack(vs)[:, o] if vs else None
    # block products (MatMatMult) counted as nev matvecs each, as eig_compare.py does
    mv = PETSc.Log.Event("MatMult").getPerfInfo()["count"] - mv0
    mm = PETSc.Log.Event("MatMatMultNum").getPerfInfo()["count"] - mm0
    note = "" if nconv >= args.nev else f"not converged ({nconv}/{args.nev})"
    return dict(w=w[o], v=v, wall=wall, matvecs=int(mv) + args.nev * int(mm), note=note)


LABELS = {
    "jdmg": "jdmg.eigsh (defaults: auto)",
    "jdmg-gdk": "jdmg.eigsh method='bicgstab' (GD+k)",
    "cli": "jdmg CLI solve (defaults: auto)",
    "cli-gdk": "jdmg CLI solve --inner-solver bicgstab",
    "primme": "primme.eigsh (defaults)",
    "arpack": "scipy eigsh (ARPACK, which='SA')",
    "lobpcg": "scipy lobpcg (no preconditioner)",
    "slepc-lobpcg": "slepc4py EPS LOBPCG (defaults: ILU(0))",
    "slepc-ks": "slepc4py EPS Krylov-Schur",
}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", type=int, default=64)
    p.add_argument("--nev", type=int, default=4)
    p.add_argument("--tol", type=float, default=1e-8)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--cli", default=os.path.join(os.path.dirname(__file__), "../../target/release/jdmg"))
    p.add_argument("--solvers", default="cli-gdk,jdmg-gdk,cli,jdmg,primme,slepc-lobpcg,slepc-ks,lobpcg,arpack")
    p.add_argument("--arpack-maxiter", type=int, default=2000)
    p.add_argument("--lobpcg-maxiter", type=int, default=2000)
    p.add_argument("--lobpcg-repeat", type=int, default=1, help="runs of lobpcg (minutes each on lap3d:64)")
    p.add_argument("--json", default=None)
    args = p.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    m = args.n
    a = lap3d(m)
    n = a.shape[0]
    # exact spectrum: 2 - 2cos(j pi/(m+1)) summed over the three axes
    e1 = 2 - 2 * np.cos(np.arange(1, m + 1) * np.pi / (m + 1))
    args.anorm = 3 * e1.max()
    exact = np.sort((e1[:6, None, None] + e1[None, :6, None] + e1[None, None, :6]).ravel())[: args.nev]
    args.lam_k = exact[-1]
    print(f"lap3d:{m}: n = {n}, nnz = {a.nnz}, nev = {args.nev}, tol = {args.tol}, repeat = {args.repeat}", flush=True)

    solvers = args.solvers.split(",")
    runs = {s: [] for s in solvers}
    for r in range(args.repeat):
        for s in solvers:  # interleaved: every solver sees the same load in each round
            if s == "lobpcg" and r >= args.lobpcg_repeat:
                continue
            if s == "cli":
                res = run_cli(args)
            elif s == "cli-gdk":
                res = run_cli(args, "bicgstab")
            elif s == "jdmg":
                res = run_jdmg(a, args)
            elif s == "jdmg-gdk":
                res = run_jdmg(a, args, "bicgstab")
            elif s == "primme":
                res = run_primme(a, args)
            elif s == "arpack":
                res = run_arpack(a, args)
            elif s == "lobpcg":
                res = run_lobpcg(a, args)
            elif s in ("slepc-lobpcg", "slepc-ks"):
                res = run_slepc(a, args, s.split("-")[1])
            else:
                sys.exit(f"unknown solver {s}")
            res["err"] = float(np.abs(np.asarray(res["w"][: args.nev]) - exact[: len(res["w"])]).max()) if len(res["w"]) else float("nan")
            res["res"] = true_residual(a, res["w"], res["v"], args.anorm)
            res.pop("v", None)
            res["w"] = [float(x) for x in res["w"]]
            runs[s].append(res)
            print(f"  round {r + 1} {s}: {res['wall']:.3f} s, {res['matvecs']} matvecs", flush=True)

    med = {s: statistics.median(x["wall"] for x in runs[s]) for s in solvers}
    base = med.get("cli", None)
    print()
    print("| solver | matvecs | median s | / CLI (auto) | max eigenvalue error | max ‖r‖/‖A‖ |")
    print("|---|---:|---:|---:|---:|---:|")
    for s in solvers:
        last = runs[s][-1]
        ratio = f"{med[s] / base:.2f}" if base else ""
        res = "" if np.isnan(last["res"]) else f"{last['res']:.1e}"
        note = f" ({last['note']})" if last.get("note") else ""
        print(f"| {LABELS.get(s, s)}{note} | {last['matvecs']} | {med[s]:.3f} | {ratio} | {last['err']:.1e} | {res} |")
    summary = {"problem": f"lap3d:{m}", "n": n, "nev": args.nev, "tol": args.tol, "median_seconds": med}
    for py, cli in (("jdmg-gdk", "cli-gdk"), ("jdmg", "cli")):
        if py in runs and cli in runs:
            over = (med[py] - med[cli]) / med[cli]
            inner = statistics.median(x["solve"] for x in runs[py])
            same = [x["matvecs"] for x in runs[py]] == [x["matvecs"] for x in runs[cli]]
            print(
                f"\noverhead {py} vs {cli}: Python call {med[py]:.3f} s (solve inside it {inner:.3f} s), "
                f"CLI solve {med[cli]:.3f} s: {100 * over:+.1f} % "
                f"({'same' if same else 'different'} matvecs: {[x['matvecs'] for x in runs[py]]} vs {[x['matvecs'] for x in runs[cli]]})"
            )
            # the Python call's own time: the whole call less the solve it reports
            # (setup + solve, the CLI's measure), independent of the solve's noise
            outside = statistics.median(x["wall"] - x["solve"] for x in runs[py])
            print(
                f"  time of the {py} call outside the solve (median): {1000 * outside:.1f} ms "
                f"= {100 * outside / med[cli]:.2f} % of the CLI solve"
            )
            summary[f"overhead_{py}"] = over
            summary[f"outside_seconds_{py}"] = outside
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"summary": summary, "runs": runs}, f, indent=1, default=float)


if __name__ == "__main__":
    main()
