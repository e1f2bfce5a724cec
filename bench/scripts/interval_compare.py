#!/usr/bin/env python3
"""Every eigenvalue in an interval [a, b] (issue 42): jdmg's spectrum slicing
against SLEPc's Krylov-Schur spectrum slicing and PRIMME (and jdmg) asked for
the same number of smallest eigenvalues.

Usage:
  interval_compare.py --jdmg target/release/jdmg --matrix FILE.mtx --interval A:B
                      [--tol 1e-8] [--repeat 3]
                      [--solvers jdmg-interval,jdmg-nev,slepc-slicing,primme,slepc-lobpcg]

Run with the anchors' Python (numpy, scipy, slepc4py, primme), e.g.
  /tmp/anchors/bin/python bench/scripts/interval_compare.py \\
      --matrix /tmp/m/lap3d30.mtx --interval 0:0.8

Solvers:
  jdmg-interval  jdmg solve FILE --interval A:B (slices by shift-and-invert, LDL^T counts)
  jdmg-nev       jdmg solve FILE --nev C --which smallest (C: the interval's count;
                 only when A lies below the spectrum)
  slepc-slicing  SLEPc Krylov-Schur with EPSSetInterval(A, B), ST sinvert, KSP preonly,
                 PETSc's Cholesky of an SBAIJ matrix (the inertia at the slices' ends)
  primme         primme.eigsh(A, C, which='SA') (PRIMME's defaults otherwise)
  slepc-lobpcg   SLEPc LOBPCG asked for the C smallest (EPSSetDimensions(C), its
                 defaults otherwise; not in the default list: it takes minutes)

Every measurement is a fresh process, interleaved round by round (this script
re-invokes itself with --one SOLVER); the table gives the median of --repeat
rounds of the solve time (factorizations included; jdmg: stats.wall_seconds,
which holds the counts and every slice; the others: from the solver call after
reading the matrix). One thread (OMP_NUM_THREADS=1, jdmg --threads 1). The
count C comes from the first jdmg-interval run; every solver's eigenvalues are
compared with the first that returned C of them, and true residuals
||Av - lv|| / ||A||_1 are recomputed from the returned vectors.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time


def load(path):
    import scipy.io

    return scipy.io.mmread(path).tocsr()


def check(a, w, v):
    """Largest true residual ||Av - lv|| / ||A||_1 over the returned pairs."""
    import numpy as np
    import scipy.sparse.linalg as sla

    if len(w) == 0:
        return 0.0
    anorm = sla.norm(a, 1)
    v = np.asarray(v)
    r = a @ v - v * np.asarray(w)[np.newaxis, :]
    nv = np.linalg.norm(v, axis=0)
    return float(max(np.linalg.norm(r, axis=0) / nv) / anorm)


def run_jdmg(args, how, count, vecfile):
    cmd = [args.jdmg, "solve", args.matrix, "--tol", repr(args.tol), "--threads", "1",
           "--json", "--quiet", "--eigenvectors", vecfile]
    if how == "jdmg-interval":
        cmd += ["--interval", f"{args.lo!r}:{args.hi!r}"]
    else:
        cmd += ["--nev", str(count), "--which", "smallest"]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        return {"status": "error", "message": out.stderr.strip()[-300:]}
    d = json.loads(out.stdout)
    s = d["stats"]
    w = d["eigenvalues"]
    if how == "jdmg-nev":
        # the interval's part of the smallest C
        keep = [i for i, x in enumerate(w) if args.lo <= x <= args.hi]
        w = [w[i] for i in keep]
    else:
        keep = None
    return {
        "status": "ok" if d.get("converged") else "not converged",
        "eigenvalues": w,
        "keep": keep,
        "seconds": s["wall_seconds"] + (0.0 if how == "jdmg-interval" else s.get("setup_seconds", 0.0)),
        "vectors": vecfile,
    }


def run_slepc(args):
    import scipy.sparse as sp
    from petsc4py import PETSc
    from slepc4py import SLEPc

    a = load(args.matrix)
    up = sp.triu(a).tocsr()
    A = PETSc.Mat().createSBAIJ(size=a.shape, bsize=1,
                                csr=(up.indptr, up.indices, up.data))
    A.assemble()
    t0 = time.perf_counter()
    eps = SLEPc.EPS().create()
    eps.setOperators(A)
    eps.setProblemType(SLEPc.EPS.ProblemType.HEP)
    eps.setType(SLEPc.EPS.Type.KRYLOVSCHUR)
    eps.setWhichEigenpairs(SLEPc.EPS.Which.ALL)
    eps.setInterval(args.lo, args.hi)
    eps.setTolerances(args.tol)
    eps.setConvergenceTest(SLEPc.EPS.Conv.NORM)
    st = eps.getST()
    st.setType(SLEPc.ST.Type.SINVERT)
    ksp = st.getKSP()
    ksp.setType("preonly")
    ksp.getPC().setType("cholesky")
    eps.solve()
    secs = time.perf_counter() - t0
    return eps_result(eps, A, a, secs, eps.getConverged(), -float("inf"), float("inf"))


def eps_result(eps, A, a, secs, nconv, lo, hi):
    """The first nconv pairs of a solved SLEPc EPS within [lo, hi], ascending, with
    their largest true residual."""
    import numpy as np

    w, vs = [], []
    vr, _ = A.createVecs()
    for i in range(nconv):
        w.append(eps.getEigenpair(i, vr).real)
        vs.append(vr.getArray().copy())
    keep = [i for i in np.argsort(w) if lo <= w[i] <= hi]
    v = np.array([vs[i] for i in keep]).T if keep else None
    w = [float(w[i]) for i in keep]
    return {
        "status": "ok",
        "eigenvalues": w,
        "seconds": secs,
        "residual": check(a, w, v) if v is not None else 0.0,
    }


def run_slepc_lobpcg(args):
    from petsc4py import PETSc
    from slepc4py import SLEPc

    a = load(args.matrix)
    A = PETSc.Mat().createAIJ(size=a.shape, csr=(a.indptr, a.indices, a.data))
    A.assemble()
    t0 = time.perf_counter()
    eps = SLEPc.EPS().create()
    eps.setOperators(A)
    eps.setProblemType(SLEPc.EPS.ProblemType.HEP)
    eps.setType(SLEPc.EPS.Type.LOBPCG)
    eps.setWhichEigenpairs(SLEPc.EPS.Which.SMALLEST_REAL)
    eps.setDimensions(args.count)
    eps.setTolerances(args.tol)
    eps.setConvergenceTest(SLEPc.EPS.Conv.NORM)
    eps.solve()
    secs = time.perf_counter() - t0
    nconv = min(eps.getConverged(), args.count)
    return eps_result(eps, A, a, secs, nconv, args.lo, args.hi)


def run_primme(args):
    import numpy as np
    import primme

    a = load(args.matrix)
    t0 = time.perf_counter()
    w, v = primme.eigsh(a, k=args.count, which="SA", tol=args.tol)
    secs = time.perf_counter() - t0
    order = np.argsort(w)
    w, v = w[order], v[:, order]
    keep = [i for i, x in enumerate(w) if args.lo <= x <= args.hi]
    w, v = w[keep], v[:, keep]
    return {
        "status": "ok",
        "eigenvalues": [float(x) for x in w],
        "seconds": secs,
        "residual": check(a, w, v),
    }


def one(args):
    if args.one == "slepc-slicing":
        return run_slepc(args)
    if args.one == "primme":
        return run_primme(args)
    if args.one == "slepc-lobpcg":
        return run_slepc_lobpcg(args)
    raise SystemExit(f"unknown solver {args.one}")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--jdmg", default="target/release/jdmg")
    p.add_argument("--matrix", required=True)
    p.add_argument("--interval", required=True)
    p.add_argument("--tol", type=float, default=1e-8)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--solvers", default="jdmg-interval,jdmg-nev,slepc-slicing,primme")
    p.add_argument("--count", type=int, default=0)
    p.add_argument("--one")
    args = p.parse_args()
    args.lo, args.hi = (float(x) for x in args.interval.split(":"))
    if args.one:
        try:
            print(json.dumps(one(args)), flush=True)
        except Exception as e:  # reported, not raised: the table goes on
            print(json.dumps({"status": "error", "message": str(e)[-300:]}), flush=True)
        return
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    solvers = args.solvers.split(",")
    runs = {s: [] for s in solvers}
    count = args.count
    for round_ in range(args.repeat):
        for s in solvers:
            if s.startswith("jdmg"):
                vecfile = f"/tmp/interval_{s}_{os.getpid()}_{round_}.mtx"
                if s == "jdmg-nev" and count == 0:
                    r = {"status": "error", "message": "no count (run jdmg-interval first)"}
                else:
                    r = run_jdmg(args, s, count, vecfile)
                if s == "jdmg-interval" and r["status"] == "ok" and count == 0:
                    count = len(r["eigenvalues"])
            else:
                cmd = [sys.executable, __file__, "--one", s, "--matrix", args.matrix,
                       "--interval", args.interval, "--tol", repr(args.tol),
                       "--count", str(count)]
                out = subprocess.run(cmd, capture_output=True, text=True, env=env)
                try:
                    r = json.loads(out.stdout.strip().splitlines()[-1])
                except (IndexError, json.JSONDecodeError):
                    r = {"status": "error", "message": out.stderr.strip()[-300:]}
            runs[s].append(r)
    a = load(args.matrix)
    import numpy as np
    import scipy.io

    for s in solvers:
        for r in runs[s]:
            if "vectors" in r:
                if r["status"] == "ok" and os.path.exists(r["vectors"]):
                    v = np.asarray(scipy.io.mmread(r["vectors"]))
                    if r.get("keep") is not None:
                        v = v[:, r["keep"]]
                    r["residual"] = check(a, r["eigenvalues"], v)
                if os.path.exists(r["vectors"]):
                    os.remove(r["vectors"])
    ref = None
    for s in solvers:
        ok = [r for r in runs[s] if r["status"] == "ok" and len(r["eigenvalues"]) == count]
        if ok and ref is None:
            ref = sorted(ok[0]["eigenvalues"])
    print(f"matrix {args.matrix}, interval [{args.lo}, {args.hi}] ({count} eigenvalues), "
          f"tol {args.tol}, median of {args.repeat}, one thread")
    print("| solver | status | median s | ratio to jdmg-interval | returned | "
          "max |lambda - ref| | residual / ||A||_1 |")
    print("|---|---|---:|---:|---:|---:|---:|")
    base = None
    for s in solvers:
        ok = [r for r in runs[s] if r["status"] == "ok"]
        if ok and s == "jdmg-interval":
            base = statistics.median(r["seconds"] for r in ok)
    for s in solvers:
        rs = runs[s]
        ok = [r for r in rs if r["status"] == "ok"]
        if not ok:
            print(f"| {s} | {rs[0]['status']}: {rs[0].get('message', '')[:80]} | | | | | |")
            continue
        med = statistics.median(r["seconds"] for r in ok)
        ev = sorted(ok[0]["eigenvalues"])
        dev = (max((abs(x - y) for x, y in zip(ev, ref)), default=0.0)
               if ref is not None and len(ev) == len(ref) else float("nan"))
        res = ok[0].get("residual")
        res_s = f"{res:.1e}" if res is not None else "-"
        ratio = f"{med / base:.2f}" if base else "-"
        print(f"| {s} | ok ({len(ok)}/{len(rs)}) | {med:.2f} | {ratio} | {len(ev)} | "
              f"{dev:.1e} | {res_s} |")


if __name__ == "__main__":
    main()
