#!/usr/bin/env bash
# Semi-static versus static re-planning under a load that changes mid-run
# (Boudet et al. §2.1, §4.5; bench/README.md, "Dense kernels"). LU of order N,
# block BLOCK, heterogeneous cyclic(B) layout, --replan 0 (static) against
# --replan S (semi-static), REPS runs of each, interleaved (A B A B ...).
#
# 1. virtual: thread backend, 2 ranks, virtual clocks; at the start of panel
#    PANEL rank 1 becomes SLOW times slower (--slowdown-after PANEL:1,SLOW).
# 2. real: 2 MPI ranks bound one per core; DELAY seconds after mpirun starts,
#    BUSY busy loops (normal priority) are started pinned on core 1 (rank 1's),
#    and killed when the run ends.
#
# Appends `jdmg dense --json` lines (plus "mode", "replan_every", "delay") to
# OUT_virtual.jsonl / OUT_real.jsonl and prints medians.
# Environment: JDMG (default target/release/jdmg); RATES (updates|section,
# --replan-rates, default updates); GAIN (--replan-gain, default 0.1); NICE
# (default 0: the niceness of the ranks and the loops, -10 with autogroup off
# as in dense_hetero.sh); MODES (default "virtual real").
# usage: bench/scripts/dense_semistatic.sh [N] [BLOCK] [S] [REPS] [PANEL] [SLOW] [DELAY] [BUSY] [OUT]
set -euo pipefail
cd "$(dirname "$0")/../.."
N=${1:-3000}; BLOCK=${2:-64}; S=${3:-4}; REPS=${4:-3}; PANEL=${5:-12}; SLOW=${6:-3}
DELAY=${7:-1.0}; BUSY=${8:-2}; OUT=${9:-/tmp/dense_semistatic}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
JDMG=${JDMG:-target/release/jdmg}
RATES=${RATES:-updates}; GAIN=${GAIN:-0.1}; NICE=${NICE:-0}; MODES=${MODES:-virtual real}
REPLAN=(--replan-rates "$RATES" --replan-gain "$GAIN")
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; pids=(); }
trap cleanup EXIT
tag() { jq -c --arg m "$1" --argjson s "$2" --argjson d "$3" '. + {mode: $m, replan_every: $s, delay: $d}'; }

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for _ in $(seq "$REPS"); do
  [[ " $MODES " == *" virtual "* ]] || break
  for R in 0 "$S"; do
    "$JDMG" dense lu --n "$N" --block "$BLOCK" --ranks 2 --layout hetero --replan "$R" "${REPLAN[@]}" \
      --slowdown-after "$PANEL:1,$SLOW" --no-check --json | tag virtual "$R" 0 >> "$OUT"_virtual.jsonl
  done
done
for _ in $(seq "$REPS"); do
  [[ " $MODES " == *" real "* ]] || break
  for R in 0 "$S"; do
    tmp=$(mktemp)
    nice -n "$NICE" mpirun -np 2 --bind-to core --map-by core "$JDMG" dense lu --mpi --n "$N" \
      --block "$BLOCK" --layout hetero --replan "$R" "${REPLAN[@]}" --no-check --rate-seconds 0.05 \
      --json > "$tmp" &
    mp=$!
    sleep "$DELAY"
    for _ in $(seq "$BUSY"); do
      nice -n "$NICE" taskset -c 1 sh -c 'while :; do :; done' &
      pids+=($!)
    done
    wait "$mp"
    cleanup
    tag real "$R" "$DELAY" < "$tmp" >> "$OUT"_real.jsonl
    rm -f "$tmp"
    sleep 1
  done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for f in "$OUT"_virtual.jsonl "$OUT"_real.jsonl; do
  [ -f "$f" ] || continue
  echo "== $f"
  jq -s -r 'group_by(.replan_every)[] | (map(.wall_seconds) | sort) as $t
    | "replan \(.[0].replan_every): median \($t[(($t|length)/2|floor)]) s over \($t|length) runs; replans \(.[0].replans) (relayouts \(map(.relayouts // 0)|sort|.[((length)/2|floor)])); re-measuring s \(map(.replan_seconds)|sort|.[((length)/2|floor)]); bytes moved \(map(.bytes_moved)|sort|.[((length)/2|floor)]); columns \(.[-1].columns_per_rank); rates first \(.[0].rates|map(.*100|round/100)); last replan \(.[-1].replan_rates[-1] // [] | map(.*100|round/100))"' "$f"
done
