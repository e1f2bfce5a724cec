#!/usr/bin/env bash
# Dense LU, 2 MPI ranks of `jdmg dense` against SciPy/OpenBLAS `lu_factor` on 2
# threads (bench/README.md, "Dense kernels"), run in turn (A B A B, PAIRS pairs),
# factorization only on both sides (the matrix generated and, for jdmg,
# distributed before the clock starts). OpenBLAS runs at its best kernel for
# this CPU: OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE are unset (SkylakeX on an
# AVX-512 machine; threadpoolctl reports it). Appends JSON lines to OUT and prints
# the medians and the median of the pairwise ratios.
# usage: [PYTHON=…] [JDMG=…] bench/scripts/dense_lu_pairs.sh [N] [BLOCK] [PAIRS] [OUT]
set -euo pipefail
cd "$(dirname "$0")/../.."
N=${1:-4000}; BLOCK=${2:-256}; PAIRS=${3:-7}; OUT=${4:-/tmp/dense_lu_pairs.jsonl}
PYTHON=${PYTHON:-python3}
JDMG=${JDMG:-target/release/jdmg}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
: > "$OUT"
for _ in $(seq "$PAIRS"); do
  mpirun --oversubscribe -np 2 --bind-to core "$JDMG" dense lu --mpi --n "$N" \
    --block "$BLOCK" --no-check --json | "$PYTHON" -c \
    'import json,sys; d=json.load(sys.stdin); d["who"]="jdmg"; print(json.dumps(d))' >> "$OUT"
  env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OPENBLAS_NUM_THREADS=2 \
    "$PYTHON" bench/scripts/dense_openblas.py lu "$N" | "$PYTHON" -c \
    'import json,sys; d=json.load(sys.stdin); d["who"]="openblas"; print(json.dumps(d))' >> "$OUT"
done
"$PYTHON" - "$OUT" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
a = [r["gflops"] for r in rows if r["who"] == "jdmg"]
b = [r["gflops"] for r in rows if r["who"] == "openblas"]
ratios = [x / y for x, y in zip(a, b)]
print(f"jdmg 2 ranks   GFLOP/s median {statistics.median(a):.1f}  ({min(a):.1f}-{max(a):.1f})")
print(f"OpenBLAS 2 thr GFLOP/s median {statistics.median(b):.1f}  ({min(b):.1f}-{max(b):.1f})")
print(f"jdmg/OpenBLAS rate: median of pairs {statistics.median(ratios):.2f}  "
      f"({', '.join(f'{r:.2f}' for r in ratios)})")
PY
