#!/usr/bin/env bash
# Issue 37's table: our all_reduce over N CPU devices against the numpy host
# bound (scripts/numpy-bound.py: one fold of the N shards plus N-1 copies,
# the faster of 1 and 2 threads), f32, per rank size. For each (N, size) it
# takes REPS turns, each a numpy run then a `fuel-opt bench` run, so a slow
# spell of a shared machine falls on both; it prints each side's median
# algbw over the turns and ours/bound (higher is better, 1.0 = the bound),
# with the lowest and highest per-turn ratio as the spread.
#
#   scripts/numpy-compare.sh [REPS]        # default 3
#
# Needs a release fuel-opt (cargo build --release -p fuel-opt) and numpy
# (pip install numpy). Not a CI gate: timings on shared machines are noisy.
set -euo pipefail
cd "$(dirname "$0")/.."
reps=${1:-3}
bin="${CARGO_TARGET_DIR:-target}/release/fuel-opt"
[ -x "$bin" ] || { echo "numpy-compare: $bin not found; run cargo build --release -p fuel-opt" >&2; exit 2; }
python3 -c 'import numpy' 2>/dev/null || { echo "numpy-compare: numpy is not installed; pip install numpy" >&2; exit 2; }

cpus() { seq -s, -f 'cpu:%g' 0 $(($1 - 1)); }
median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
iters_for() { if [ "$1" -le 262144 ]; then echo 50; else echo 10; fi; }

printf '%-3s %-9s %-10s %-10s %-8s %s\n' N per_rank ours_GB/s numpy_GB/s ratio spread
for spec in "2 256K 262144" "2 16M 16777216" "4 16M 16777216" "8 4M 4194304" "8 16M 16777216"; do
  # shellcheck disable=SC2086 # "N SIZE BYTES" into $1 $2 $3
  set -- $spec
  n=$1 size=$2 bytes=$3
  iters=$(iters_for "$bytes")
  ours=() numpy=() ratios=()
  for _ in $(seq "$reps"); do
    b=$(python3 scripts/numpy-bound.py --ranks "$n" --sizes "$size" --iters "$iters" | awk -F, '$3 ~ /^best/ { print $6 }')
    o=$("$bin" bench --devices "$(cpus "$n")" --sizes "$size" --iters "$iters" --warmup 3 --csv |
      awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "algbw_gbps") c = i } NR == 2 { print $c }')
    numpy+=("$b") ours+=("$o")
    ratios+=("$(awk -v o="$o" -v b="$b" 'BEGIN { printf "%.2f", o / b }')")
  done
  om=$(printf '%s\n' "${ours[@]}" | median)
  bm=$(printf '%s\n' "${numpy[@]}" | median)
  lo=$(printf '%s\n' "${ratios[@]}" | sort -g | head -1)
  hi=$(printf '%s\n' "${ratios[@]}" | sort -g | tail -1)
  printf '%-3s %-9s %-10s %-10s %-8s %s\n' "$n" "$size" "$om" "$bm" \
    "$(awk -v o="$om" -v b="$bm" 'BEGIN { printf "%.2f", o / b }')" "$lo-$hi"
done
