#!/usr/bin/env python3
"""scipy.sparse CSR matvec timing for bench/src/bin/spmv.rs.

Usage: spmv_compare.py DIR N REPS
DIR holds raw little-endian arrays written by the Rust bench: indptr.i64, indices.i32,
data.f64 and x.f64 (length N). Prints one JSON object: median and best seconds of
REPS matvecs after one warm-up, the scipy version, and the sum of y (for a cross-check).
"""
import json
import sys
import time

import numpy as np
import scipy
import scipy.sparse as sp


def main():
    d, n, reps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    indptr = np.fromfile(f"{d}/indptr.i64", dtype="<i8")
    indices = np.fromfile(f"{d}/indices.i32", dtype="<i4")
    data = np.fromfile(f"{d}/data.f64", dtype="<f8")
    x = np.fromfile(f"{d}/x.f64", dtype="<f8")
    if indptr[-1] < 2**31:
        indptr = indptr.astype(np.int32)  # scipy's native index type for this size
    a = sp.csr_matrix((data, indices, indptr), shape=(n, n))
    y = a @ x
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        y = a @ x
        times.append(time.perf_counter() - t)
    print(json.dumps({
        "median_s": float(np.median(times)),
        "best_s": float(min(times)),
        "scipy": scipy.__version__,
        "sum_y": float(y.sum()),
    }))


if __name__ == "__main__":
    main()
