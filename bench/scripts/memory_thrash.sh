#!/usr/bin/env bash
# Real memory contention for `jdmg solve --memory-balance` (issue 10, item 4;
# McCombs et al. §5 and its ref. [24]: anti-thrashing memory balancing).
#
# A 2-rank JDcg solve (--groups equal: one rank per solve group) runs with rank 0
# on CPU 0 and rank 1 on CPU 1. Rank 1 and a competitor that allocates HOG_MB and
# keeps touching every page share a memory cgroup limited to LIMIT_MB, with swap
# on: both page in and out, and rank 1 takes major faults while its CPU idles.
# Each repetition runs the solve without and with --memory-balance (interleaved);
# every run's JSON line goes to OUT (jsonl) and a table of medians is printed:
# wall time, rank 1's major faults, phases cut short, matvecs.
#
# Needs root, cgroup v1 memory controller at /sys/fs/cgroup/memory, and swapon
# (a swap file is made under /tmp when the machine has no swap; removed at exit).
#
#   bench/scripts/memory_thrash.sh                  # defaults below
#   PROBLEM=lap3d:40 LIMIT_MB=60 HOG_MB=100 REPEAT=3 bench/scripts/memory_thrash.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
JDMG=${JDMG:-target-exp/release/jdmg}
PROBLEM=${PROBLEM:-lap3d:40}
LIMIT_MB=${LIMIT_MB:-60}
HOG_MB=${HOG_MB:-100}
REPEAT=${REPEAT:-3}
OUT=${OUT:-bench/results/memory_thrash.jsonl}
CG=/sys/fs/cgroup/memory/jdmg_thrash
SWAP=/tmp/jdmg_thrash.swap
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

[ -x "$JDMG" ] || { echo "memory_thrash: build $JDMG first (--features jdmg-cli/mpi)" >&2; exit 2; }
[ -d /sys/fs/cgroup/memory ] || { echo "memory_thrash: no cgroup v1 memory controller" >&2; exit 2; }

made_swap=0
cleanup() {
  [ -n "${HOG:-}" ] && kill "$HOG" 2>/dev/null || true
  if [ -d "$CG" ]; then
    for p in $(cat "$CG/cgroup.procs" 2>/dev/null); do kill -9 "$p" 2>/dev/null || true; done
    sleep 0.2; rmdir "$CG" 2>/dev/null || true
  fi
  if [ "$made_swap" = 1 ]; then swapoff "$SWAP" 2>/dev/null || true; rm -f "$SWAP"; fi
}
trap cleanup EXIT

if [ -z "$(swapon --show --noheadings)" ]; then
  fallocate -l 2G "$SWAP" && chmod 600 "$SWAP" && mkswap "$SWAP" >/dev/null && swapon "$SWAP"
  made_swap=1
fi
mkdir -p "$CG"
echo $((LIMIT_MB << 20)) > "$CG/memory.limit_in_bytes"
echo 100 > "$CG/memory.swappiness" 2>/dev/null || true

# the competitor: allocates HOG_MB and writes one byte per page, forever
sh -c "echo \$\$ > $CG/cgroup.procs; exec taskset -c 1 python3 -c '
import sys
n = $HOG_MB << 20
b = bytearray(n)
while True:
    for i in range(0, n, 4096):
        b[i] = (b[i] + 1) & 255
'" &
HOG=$!
sleep 3

mkdir -p "$(dirname "$OUT")"
: > "$OUT"
ARGS="solve --mpi --generate $PROBLEM --nev 2 --block 2 --tol 1e-8 --groups equal --json"
for rep in $(seq 1 "$REPEAT"); do
  for mb in off on; do
    flag=""; [ "$mb" = on ] && flag="--memory-balance"
    mpirun --oversubscribe --bind-to none \
      -np 1 taskset -c 0 "$JDMG" $ARGS $flag : \
      -np 1 sh -c "echo \$\$ > $CG/cgroup.procs; exec taskset -c 1 $JDMG $ARGS $flag" \
      | python3 -c "
import json, sys
d = json.load(sys.stdin); m = d['multigrain']
print(json.dumps({'memory_balance': '$mb', 'rep': $rep, 'wall_seconds': d['wall_seconds'],
  'matvecs': d['matvecs'], 'converged': d['converged'], 'eigenvalues': d['eigenvalues'],
  'imbalance_percent': d['imbalance_percent'], 'major_faults': m['major_faults'],
  'recessions': m['memory_total']['recessions'], 'memory': m['memory_total'], 'group_inner_steps': m['group_inner_steps'],
  'limit_mb': $LIMIT_MB, 'hog_mb': $HOG_MB, 'problem': '$PROBLEM'}))" >> "$OUT"
    tail -n 1 "$OUT"
  done
done

python3 - "$OUT" <<'PY'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
print("\n| --memory-balance | runs | wall s (median) | rank 1 major faults | phases cut short | matvecs |")
print("|---|---:|---:|---:|---:|---:|")
for mb in ("off", "on"):
    r = [x for x in runs if x["memory_balance"] == mb and x["converged"]]
    if not r:
        continue
    med = lambda k: statistics.median(k(x) for x in r)
    print(f"| {mb} | {len(r)} | {med(lambda x: x['wall_seconds']):.2f} | "
          f"{med(lambda x: x['major_faults'][1]):.0f} | {med(lambda x: x['recessions']):.0f} | "
          f"{med(lambda x: x['matvecs']):.0f} |")
PY
