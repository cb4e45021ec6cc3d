#!/usr/bin/env bash
# Issue 7's CPU targets, repeated: runs
#   fuel-opt bench --devices DEVICES --sizes SIZES --iters ITERS --algorithm A --csv
# for A in auto, star, hierarchical, ring, tree, RUNS times (default 5),
# interleaved in a rotating order, and prints per size: each algorithm's median time over the
# runs, auto's pick, auto / best fixed, and the median ratio of auto's
# algbw to the host bound measured in the same run.
# On a shared machine one run swings by 2x; compare medians.
#
#   scripts/cpu-sweep.sh [RUNS] [FUEL_OPT]        # default target/release/fuel-opt
#   DEVICES=cpu:0,cpu:1 SIZES=1M,16M ITERS=50 scripts/cpu-sweep.sh
set -euo pipefail
runs=${1:-5}
bin=${2:-target/release/fuel-opt}
devices=${DEVICES:-cpu:0,cpu:1,cpu:2,cpu:3}
sizes=${SIZES:-4K..16M}
iters=${ITERS:-20}
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
algs=(auto star hierarchical ring tree)
for r in $(seq "$runs"); do
  # Rotate the order each run, so no algorithm always runs first.
  for k in 0 1 2 3 4; do
    a=${algs[$(((r + k) % 5))]}
    "$bin" bench --devices "$devices" --sizes "$sizes" --iters "$iters" --algorithm "$a" --csv |
      grep -v '^size' | sed "s/^/$a,/" >>"$tmp"
  done
done
# requested,size,count,type,redop,algorithm,time_us,algbw,busbw,wrong,bound_gbps,ratio,model_bound_us
python3 - "$tmp" <<'PY'
import csv, statistics, sys
rows = list(csv.reader(open(sys.argv[1])))
algs = ["auto", "star", "hierarchical", "ring", "tree"]
t, ratio, pick = {}, {}, {}
for r in rows:
    a, size = r[0], int(r[1])
    t.setdefault((a, size), []).append(float(r[6]))
    if a == "auto":
        ratio.setdefault(size, []).append(float(r[11]))
        pick[size] = r[5].split(":")[-1]
print(f"{'size':>9} " + " ".join(f"{a:>12}" for a in algs) + "  pick          auto/best  ratio(auto)")
for size in sorted(ratio):
    med = {a: statistics.median(t[(a, size)]) for a in algs}
    best = min(med[a] for a in algs[1:])
    cols = " ".join(f"{med[a]:>10.1f}us" for a in algs)
    print(f"{size:>9} {cols}  {pick[size]:<13} {med['auto'] / best:>9.2f}  {statistics.median(ratio[size]):>11.2f}")
PY
