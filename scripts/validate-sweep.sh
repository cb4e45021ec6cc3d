#!/usr/bin/env bash
# Issue 15's check of the cost model, repeated: runs
#   fuel-opt bench --validate --devices GROUP --sizes SIZES --iters ITERS --csv [--topology T]
# RUNS times (default 3) for each group, then pools the runs: per point the
# median measured time over the runs; the estimate does not change between
# runs. It prints, per group, the table of pooled medians (estimate,
# measured, est/meas, auto's pick, the pooled best) and the summary the
# issue's targets are stated in: the median and the worst estimate/measured
# (worst: farthest from 1 either way), and auto against the measured best.
# On a shared machine one run swings by 2x; read the pooled numbers.
#
#   scripts/validate-sweep.sh [RUNS] [FUEL_OPT]     # default target/release/fuel-opt
#   DEVICE_GROUPS="cpu:0,cpu:1,cpu:2,cpu:3" SIZES=4K..1M ITERS=10 scripts/validate-sweep.sh 5
#   TOPOLOGY=/tmp/vk.topo scripts/validate-sweep.sh   # fixed figures instead of the cache
set -euo pipefail
runs=${1:-3}
bin=${2:-target/release/fuel-opt}
groups=${DEVICE_GROUPS:-"cpu:0,cpu:1,cpu:2,cpu:3 cpu:0,cpu:1,vulkan:0,vulkan:1 vulkan:0,vulkan:1,cpu:0"}
sizes=${SIZES:-4K..16M}
iters=${ITERS:-10}
warmup=${WARMUP:-3}
topo=()
if [ -n "${TOPOLOGY:-}" ]; then topo=(--topology "$TOPOLOGY"); fi
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
for r in $(seq "$runs"); do
  for g in $groups; do
    "$bin" bench --validate --devices "$g" --sizes "$sizes" --iters "$iters" --warmup "$warmup" --csv "${topo[@]}" 2>/dev/null |
      grep -v '^size' | sed "s/^/$g;$r;/" >>"$tmp"
  done
done
python3 - "$tmp" <<'PY'
import csv, statistics, sys, collections
rows = [l.rstrip("\n") for l in open(sys.argv[1])]
pts = collections.defaultdict(list)
est, pick = {}, {}
for l in rows:
    g, r, rest = l.split(";", 2)
    size, alg, e, m, a, b = rest.split(",")
    key = (g, int(size), alg)
    pts[key].append(float(m))
    est[key] = float(e)
    pick[key] = a == "1"
def far(x):
    return max(x, 1 / x) if x > 0 else float("inf")
for g in dict.fromkeys(k[0] for k in pts):
    print(f"# {g}")
    print(f"{'size':>9} {'algorithm':<13} {'estimate':>10} {'measured':>10} {'est/meas':>8} auto best")
    ratios, regrets = [], []
    for size in sorted({k[1] for k in pts if k[0] == g}):
        keys = [k for k in pts if k[0] == g and k[1] == size]
        med = {k: statistics.median(pts[k]) for k in keys}
        best = min(keys, key=lambda k: med[k])
        for k in keys:
            ratio = est[k] / med[k]
            ratios.append(ratio)
            print(f"{size:>9} {k[2]:<13} {est[k]:>10.1f} {med[k]:>10.1f} {ratio:>8.2f} {'*' if pick[k] else ' ':>4} {'*' if k == best else ' ':>4}")
        p = [k for k in keys if pick[k]]
        if p:
            regrets.append((size, med[p[0]] / med[best] - 1))
    errs = [abs(x - 1) for x in ratios]
    worst = max(ratios, key=far)
    in10 = sum(1 for _, x in regrets if x <= 0.10)
    print(f"# {g}: {len(ratios)} points, median est/meas {statistics.median(ratios):.2f}, "
          f"median |est/meas - 1| {statistics.median(errs):.2f}, worst {worst:.2f}, "
          f"within 20%: {sum(1 for e in errs if e <= 0.2)}/{len(errs)}; "
          f"auto within 10% of the best at {in10}/{len(regrets)} sizes, "
          f"worst regret {100 * max(x for _, x in regrets):.0f}%")
    print()
PY
