#!/usr/bin/env python3
"""Interior eigenvalues without a factorization (issue 23): PRIMME's harmonic
Ritz extraction on lap3d:N, for comparison with `jdmg solve --generate
lap3d:N --target S --extraction harmonic`.

Usage (the anchors' Python: numpy, scipy, primme):
  interior_primme.py N [--sigma 1.0] [--nev 4] [--tol 1e-8]
                       [--precond none|jacobi] [--projection harmonic|rr|refined]
                       [--block 1]

lap3d:N is built as jdmg generates it (7-point Laplacian, Dirichlet, h = 1:
diagonal 6, off-diagonals -1). primme.eigsh(A, k, sigma=S, which='SM') with
projection_projection = primme_proj_harmonic (or _RR, _refined), PRIMME's
default method (DYNAMIC) and block size 1 unless --block, tol relative to ||A|| as jdmg's `norm` test;
--precond jacobi passes OPinv = diag(1 / (a_ii - S)). Prints one JSON line:
matvecs, preconditioner applications, solve seconds, eigenvalues and the largest
true residual ||Av - lv|| / ||A||_1.
"""
import argparse
import json
import time

import numpy as np
import primme
import scipy.sparse as sp
import scipy.sparse.linalg as sla


def lap3d(n):
    t = sp.diags([-np.ones(n - 1), 2 * np.ones(n), -np.ones(n - 1)], [-1, 0, 1])
    i = sp.identity(n)
    return (sp.kron(sp.kron(t, i), i) + sp.kron(sp.kron(i, t), i)
            + sp.kron(sp.kron(i, i), t)).tocsr()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("n", type=int)
    p.add_argument("--sigma", type=float, default=1.0)
    p.add_argument("--nev", type=int, default=4)
    p.add_argument("--tol", type=float, default=1e-8)
    p.add_argument("--precond", default="none", choices=["none", "jacobi"])
    p.add_argument("--projection", default="harmonic", choices=["harmonic", "rr", "refined"])
    p.add_argument("--block", type=int, default=1, help="PRIMME's maxBlockSize")
    a = p.parse_args()
    A = lap3d(a.n)
    opinv = None
    if a.precond == "jacobi":
        d = A.diagonal() - a.sigma
        opinv = sp.diags(1.0 / d)
    proj = {"harmonic": "primme_proj_harmonic", "rr": "primme_proj_RR",
            "refined": "primme_proj_refined"}[a.projection]
    t0 = time.perf_counter()
    w, v, stats = primme.eigsh(A, k=a.nev, sigma=a.sigma, which="SM", tol=a.tol, OPinv=opinv,
                               return_stats=True, projection_projection=proj,
                               maxBlockSize=a.block)
    secs = time.perf_counter() - t0
    r = A @ v - v * w[np.newaxis, :]
    res = float(max(np.linalg.norm(r, axis=0)) / sla.norm(A, 1))
    print(json.dumps({"n": A.shape[0], "matvecs": int(stats["numMatvecs"]),
                      "preconds": int(stats["numPreconds"]), "seconds": secs,
                      "eigenvalues": sorted(w.tolist()), "max_residual_over_norm1": res}))


if __name__ == "__main__":
    main()
