#!/usr/bin/env python3
"""SciPy/OpenBLAS reference for `jdmg dense` (bench/README.md, "Dense kernels").

usage: OPENBLAS_NUM_THREADS=T dense_openblas.py lu|qr|gemm N
Prints one JSON line: op, n, threads, seconds (the factorization / product
only), gflops. The matrix is uniform in [-1, 1) like jdmg's seeded generator.
"""
import json
import os
import sys
import time

import numpy as np
import scipy.linalg as sl


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("lu", "qr", "gemm"):
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    op, n = sys.argv[1], int(sys.argv[2])
    rng = np.random.default_rng(0)
    a = np.asfortranarray(rng.uniform(-1.0, 1.0, (n, n)))
    b = np.asfortranarray(rng.uniform(-1.0, 1.0, (n, n)))
    t = time.perf_counter()
    if op == "lu":
        sl.lu_factor(a, overwrite_a=True, check_finite=False)
        flops = 2.0 * n**3 / 3.0
    elif op == "qr":
        sl.qr(a, overwrite_a=True, mode="raw", check_finite=False)
        flops = 4.0 * n**3 / 3.0
    else:
        a @ b
        flops = 2.0 * n**3
    s = time.perf_counter() - t
    print(json.dumps({"op": op, "n": n, "threads": os.environ.get("OPENBLAS_NUM_THREADS"),
                      "seconds": s, "gflops": flops / s * 1e-9}))


if __name__ == "__main__":
    main()
