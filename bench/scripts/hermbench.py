"""Complex Hermitian eigensolves side by side: jdmg.eigsh (the real solver on
the real embedding, Python binding) against primme.eigsh, both on the same
complex128 magnetic Laplacian (maglap2d/maglap3d: the generator of
matrices::complex::MagSpec), k smallest, tol 1e-8 (both test
||r|| <= tol*||A||), one thread, interleaved runs, medians.

    OPENBLAS_NUM_THREADS=1 python bench/scripts/hermbench.py \
        --problems 200x200,35x35x35 --flux 0.1,0.01 --repeat 3 --out bench/results/hermitian

Needs jdmg's Python module and primme (pip install --no-index --find-links
../shared/wheels primme). Writes hermbench.csv and prints a markdown table.
"""
import argparse, csv, os, statistics, sys, time

import numpy as np
import scipy.sparse as sp


def maglap(dims, flux):
    """H = 2d I - sum over grid edges of e^{i theta}, Landau gauge: theta =
    2 pi flux x on the edges along y (Dirichlet boundaries)."""
    nx, ny, nz = (list(dims) + [1, 1])[:3]
    dim = 3 if nz > 1 else 2
    n = nx * ny * nz
    idx = np.arange(n).reshape(nz, ny, nx)
    rows, cols, vals = [np.arange(n)], [np.arange(n)], [np.full(n, 2.0 * dim, complex)]

    def edge(a, b, w):
        rows.extend([a.ravel(), b.ravel()])
        cols.extend([b.ravel(), a.ravel()])
        vals.extend([-w.ravel(), -np.conj(w).ravel()])

    a, b = idx[:, :, :-1], idx[:, :, 1:]
    edge(a, b, np.ones(a.shape, complex))
    a, b = idx[:, :-1, :], idx[:, 1:, :]
    x = np.broadcast_to(np.arange(nx), a.shape)
    edge(a, b, np.exp(2j * np.pi * flux * x))
    if nz > 1:
        a, b = idx[:-1], idx[1:]
        edge(a, b, np.ones(a.shape, complex))
    return sp.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(n, n))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--problems", default="200x200,35x35x35")
    ap.add_argument("--flux", default="0.1")
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--tol", type=float, default=1e-8)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    import jdmg
    import primme

    rows = []
    for prob in args.problems.split(","):
        dims = [int(v) for v in prob.split("x")]
        for flux in [float(f) for f in args.flux.split(",")]:
            H = maglap(dims, flux)
            norm = abs(H).sum(axis=0).max()
            t = {"jdmg": [], "primme": []}
            mv = {"jdmg": [], "primme": []}
            sets = {}
            for _ in range(args.repeat):
                s = time.perf_counter()
                w, _, st = primme.eigsh(H, k=args.k, which="SA", tol=args.tol, return_stats=True)
                t["primme"].append(time.perf_counter() - s)
                mv["primme"].append(st["numMatvecs"])
                sets["primme"] = np.sort(w)
                s = time.perf_counter()
                w, _, st = jdmg.eigsh(H, k=args.k, which="SA", tol=args.tol, return_stats=True)
                t["jdmg"].append(time.perf_counter() - s)
                mv["jdmg"].append(st["numMatvecs"])
                sets["jdmg"] = np.sort(w)
            diff = float(np.max(np.abs(sets["jdmg"] - sets["primme"])))
            row = {
                "problem": f"maglap{len(dims)}d:{prob}:{flux}",
                "n": H.shape[0],
                "flux": flux,
                "jdmg_s": statistics.median(t["jdmg"]),
                "primme_s": statistics.median(t["primme"]),
                "jdmg_products": int(statistics.median(mv["jdmg"])),
                "primme_products": int(statistics.median(mv["primme"])),
                "ratio": statistics.median(t["jdmg"]) / statistics.median(t["primme"]),
                "max_set_difference": diff,
                "tol_norm": args.tol * norm,
                "smallest": float(sets["jdmg"][0]),
            }
            rows.append(row)
            print(row, file=sys.stderr, flush=True)
    print("| problem | n | jdmg s (products) | PRIMME s (products) | jdmg/PRIMME | max set difference |")
    print("|---|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['problem']} | {r['n']} | {r['jdmg_s']:.2f} ({r['jdmg_products']}) | "
              f"{r['primme_s']:.2f} ({r['primme_products']}) | {r['ratio']:.2f} | {r['max_set_difference']:.1e} |")
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "hermbench.csv"), "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)


if __name__ == "__main__":
    main()
