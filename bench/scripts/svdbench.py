"""jdmg svd against primme.svds and scipy.sparse.linalg.svds (ARPACK, PROPACK)
on the same matrix: solve seconds (medians of --repeat runs, interleaved) and
the singular values' error against the truth (closed form for grad2d/grad3d,
dense SVD for small files).

    python bench/scripts/svdbench.py --jdmg target/release/jdmg \
        --problems grad2d:200x200:0.01 --k 6 --repeat 3

A problem is grad2d:N[xM][:alpha], grad3d:N[xMxK][:alpha], or FILE.mtx[:cols]
(a real matrix, optionally its first `cols` columns: rectangular).
"""

import argparse
import json
import subprocess
import sys
import tempfile
import time

import numpy as np
import scipy.io
import scipy.sparse as sp
import scipy.sparse.linalg as sla


def grad(spec):
    kind, sizes, *rest = spec.split(":")
    dims = [int(x) for x in sizes.split("x")]
    axes = 2 if kind == "grad2d" else 3
    if len(dims) == 1:
        dims = dims * axes
    while len(dims) < 3:
        dims.append(1)
    alpha = float(rest[0]) if rest else 0.0
    a, b, c = dims

    def path(n):
        e = sp.diags([-np.ones(n - 1), np.ones(n - 1)], [0, 1], shape=(n - 1, n), format="csr")
        return e

    eye = lambda n: sp.identity(n, format="csr")
    # node index i + a*(j + b*k): the x axis is fastest (kron order k, j, i)
    blocks = []
    if a > 1:
        blocks.append(sp.kron(eye(c), sp.kron(eye(b), path(a))))
    if b > 1:
        blocks.append(sp.kron(eye(c), sp.kron(path(b), eye(a))))
    if c > 1:
        blocks.append(sp.kron(path(c), sp.kron(eye(b), eye(a))))
    if alpha > 0:
        blocks.append(alpha * eye(a * b * c))
    m = sp.vstack(blocks).tocsr()
    ev = lambda n: 2 - 2 * np.cos(np.pi * np.arange(n) / n)
    lam = (ev(a)[:, None, None] + ev(b)[None, :, None] + ev(c)[None, None, :]).ravel()
    return m, np.sort(np.sqrt(lam + alpha**2))


def load(problem):
    if problem.startswith("grad"):
        return grad(problem)
    path, *cols = problem.split(":")
    a = scipy.io.mmread(path).tocsr()
    if cols:
        a = a[:, : int(cols[0])].tocsr()
    truth = None
    if min(a.shape) <= 3000:
        truth = np.sort(np.linalg.svd(a.toarray(), compute_uv=False))
    return a, truth


def timed(f, repeat):
    out, times = None, []
    for _ in range(repeat):
        t = time.perf_counter()
        out = f()
        times.append(time.perf_counter() - t)
    return out, times


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--jdmg", required=True)
    p.add_argument("--problems", default="grad2d:200x200:0.01")
    p.add_argument("--k", type=int, default=6)
    p.add_argument("--tol", type=float, default=1e-8)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--which", default="largest,smallest")
    p.add_argument("--solvers", default="jdmg,primme,arpack,propack")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    import primme

    rows = []
    for problem in args.problems.split(","):
        a, truth = load(problem)
        anorm = truth[-1] if truth is not None else sla.norm(a, 2) if False else None
        with tempfile.TemporaryDirectory() as d:
            if problem.startswith("grad"):
                src = problem
            else:
                src = f"{d}/a.mtx"
                scipy.io.mmwrite(src, a)
            for which in args.which.split(","):
                want = (lambda s: s[-args.k :][::-1]) if which == "largest" else (lambda s: s[: args.k])
                solvers = {}
                for name in args.solvers.split(","):
                    if name == "jdmg":
                        def run():
                            r = subprocess.run(
                                [args.jdmg, "svd", src, "-k", str(args.k), "--which", which,
                                 "--tol", str(args.tol), "--json"],
                                capture_output=True, text=True)
                            if r.returncode not in (0, 3):
                                raise RuntimeError(r.stderr)
                            j = json.loads(r.stdout)
                            return np.array(j["values"]), j["stats"]["wall_seconds"], j["stats"]["products"]
                    elif name == "primme":
                        def run():
                            t = time.perf_counter()
                            s, st = primme.svds(a, args.k, which="LM" if which == "largest" else "SM",
                                                tol=args.tol, return_singular_vectors=False, return_stats=True)
                            return np.array(s), time.perf_counter() - t, st["numMatvecs"]
                    else:
                        def run(solver=name):
                            t = time.perf_counter()
                            s = sla.svds(a, args.k, which="LM" if which == "largest" else "SM",
                                         tol=args.tol, solver=solver, return_singular_vectors=False,
                                         maxiter=100000)
                            return np.array(s), time.perf_counter() - t, None
                    solvers[name] = run
                results = {n: [] for n in solvers}
                for _ in range(args.repeat):
                    for n, run in solvers.items():
                        try:
                            results[n].append(run())
                        except Exception as e:  # a solver that fails is reported, not fatal
                            results[n].append((None, float("nan"), str(e)[:80]))
                for n, rs in results.items():
                    vals = rs[-1][0]
                    err = None
                    if vals is not None and truth is not None:
                        got = np.sort(vals)[::-1] if which == "largest" else np.sort(vals)
                        err = float(np.max(np.abs(got - want(truth)) / want(truth)))
                    secs = float(np.median([r[1] for r in rs]))
                    rows.append(dict(problem=problem, shape=list(a.shape), which=which, solver=n,
                                     seconds=secs, rel_error=err, products=rs[-1][2]))
                    print(f"{problem:>24} {which:>8} {n:>8} {secs:9.3f} s  rel.err {err if err is None else f'{err:.1e}'}  products {rs[-1][2]}",
                          flush=True)
    if args.json:
        print(json.dumps(rows))


if __name__ == "__main__":
    sys.exit(main())
