#!/usr/bin/env bash
# Issue 7's Vulkan target, repeated: runs
#   fuel-opt bench --devices vulkan:0,vulkan:1,cpu:0 --sizes 256K..4M --iters 5 --csv
# RUNS times (default 20) and prints, per size, the median all_reduce time,
# the median bound and the median / min / max of the per-run ratios.
# On a shared machine one run swings by 2x; the median of 20 is repeatable
# to about +-0.05 (docs/performance.md).
#
#   scripts/vulkan-ratio.sh [RUNS] [FUEL_OPT]        # default target/release/fuel-opt
#   FUEL_VULKAN_MAPPED=0 scripts/vulkan-ratio.sh     # the staging path
set -euo pipefail
runs=${1:-20}
bin=${2:-target/release/fuel-opt}
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
for _ in $(seq "$runs"); do
  "$bin" bench --devices vulkan:0,vulkan:1,cpu:0 --sizes "${SIZES:-256K..4M}" --iters 5 --csv |
    grep -v '^size' >>"$tmp"
done
# size,count,type,redop,algorithm,time_us,algbw,busbw,wrong,bound_gbps,ratio,model_bound_us
sort -t, -k1,1n "$tmp" | awk -F, '
  function med(a, n,   i, j, t) {
    for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  function flush() {
    if (n == 0) return
    tm = med(t, n); bm = med(b, n); rm = med(r, n)
    printf "%8d B  time %9.1f us  bound %6.3f GB/s  ratio %.2f (%.2f-%.2f)  runs %d\n", size, tm, bm, rm, r[1], r[n], n
    n = 0
  }
  $1 != size { flush(); size = $1 }
  { n++; t[n] = $6; b[n] = $10; r[n] = $11; wrong += $9 }
  END { flush(); if (wrong) { print "wrong elements: " wrong; exit 1 } }'
