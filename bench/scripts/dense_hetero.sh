#!/usr/bin/env bash
# The heterogeneous experiment of Boudet et al. §3 on this machine (bench/README.md,
# "Dense kernels"): 2 MPI ranks pinned one per core, BUSY busy loops pinned on
# core 1 (2 loops: rank 1 gets a third of its core, 3x slower), LU (or OP=qr) of order N
# with the homogeneous cyclic layout, the heterogeneous cyclic(B) layout for
# several slice sizes B, and the optimized distribution. Appends
# `jdmg dense --json` lines to OUT, then plots them.
# NICE (default 0) runs the ranks and the loops at that niceness: -10 with
# /proc/sys/kernel/sched_autogroup_enabled = 0 keeps other work on the machine
# from competing, so that the loops alone set rank 1's share of its core.
# usage: [JDMG=…] [NICE=-10] [OP=qr] bench/scripts/dense_hetero.sh [N] [BLOCK] [REPS] [BUSY] [OUT] [RATE_SECONDS]
set -euo pipefail
cd "$(dirname "$0")/../.."
N=${1:-3000}; BLOCK=${2:-64}; REPS=${3:-3}; BUSY=${4:-2}; OUT=${5:-/tmp/dense_hetero.jsonl}; RATE=${6:-0.1}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
JDMG=${JDMG:-target/release/jdmg}
NICE=${NICE:-0}
OP=${OP:-lu}
PLOT=${PLOT:-bench/figures/dense_hetero_busyloops.svg}
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT
for _ in $(seq "$BUSY"); do
  nice -n "$NICE" taskset -c 1 sh -c 'while :; do :; done' &
  pids+=($!)
done
run() { nice -n "$NICE" mpirun -np 2 --bind-to core --map-by core "$JDMG" dense "$OP" --mpi --n "$N" --block "$BLOCK" --no-check --rate-seconds "$RATE" --json "$@" >> "$OUT"; }
for _ in $(seq "$REPS"); do
  run --layout cyclic
  for B in 2 3 4 6 8; do run --layout hetero --slice "$B"; done
  run --layout optimized
done
cleanup
${DENSEBENCH:-target/release/densebench} plot --input "$OUT" --output "$PLOT"
