#!/usr/bin/env python3
"""Time Python MatrixMarket readers on one file, for bench/src/bin/mmread.rs.

Usage: mmread_compare.py FILE.mtx [--repeat N]

Prints one JSON object per line and reader:
  {"reader": ..., "median_s": ..., "cpu_s": ..., "times": [...], "nnz": ..., "note": ...}
(median_s: median wall time; cpu_s: median CPU time of all threads per read).
or, when a package is missing, {"reader": ..., "median_s": null, "note": "not installed: ..."}.
Each reader gets one untimed warm-up read. Readers: fast_matrix_market.mmread (COO), the same followed by .tocsr() (the
work our reader does), and scipy.io.mmread (COO).
"""

import argparse
import json
import os
import statistics
import sys
import time


def timed(name, fn, repeat, note=""):
    times = []
    cpu = []
    nnz = None
    fn()  # untimed warm-up (imports, first-touch allocations)
    for _ in range(repeat):
        c0 = time.process_time()  # CPU time of all threads of the process
        t0 = time.perf_counter()
        m = fn()
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
        nnz = int(m.nnz)
        del m
    return {
        "reader": name,
        "median_s": statistics.median(times),
        "cpu_s": statistics.median(cpu),
        "times": times,
        "nnz": nnz,
        "note": note,
    }


def missing(name, err):
    return {"reader": name, "median_s": None, "times": [], "nnz": None,
            "note": f"not installed: {err}"}


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("path")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    repeat = max(1, args.repeat)
    out = []
    try:
        import fast_matrix_market as fmm
        par = getattr(fmm, "PARALLELISM", None)
        threads = par if par else f"{os.cpu_count()} (all cores)"
        note = f"v{fmm.__version__}, parallelism {threads}"
        out.append(timed("fast_matrix_market.mmread (COO)",
                         lambda: fmm.mmread(args.path), repeat, note))
        out.append(timed("fast_matrix_market.mmread + .tocsr()",
                         lambda: fmm.mmread(args.path).tocsr(), repeat, note))
    except ImportError as e:
        out.append(missing("fast_matrix_market.mmread", e))
    try:
        import scipy
        import scipy.io
        out.append(timed("scipy.io.mmread (COO)", lambda: scipy.io.mmread(args.path),
                         repeat, f"scipy {scipy.__version__}"))
    except ImportError as e:
        out.append(missing("scipy.io.mmread", e))
    for row in out:
        print(json.dumps(row))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
