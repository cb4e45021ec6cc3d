#!/usr/bin/env bash
# A short, fixed set of performance figures, each compared with the figure
# recorded for it in docs/performance.md (the `perf-baseline` block of
# "Perf check"), and printed as `held` or `regressed`.
#
# A tool for developers before they stop, not a CI gate: timings on shared
# machines move by up to 2x, so run it on a quiet machine (`uptime` load
# under 1), and rerun a check that regressed before believing it.
#
#   scripts/perf-check.sh            measure and compare
#   scripts/perf-check.sh --record   measure and write the figures into
#                                    docs/performance.md as the new baseline
#   PERF_CHECK_REPS=5 ...            runs per check (default 3; the median counts)
#   PERF_CHECK_MARGIN=0.3 ...        the noise margin (default 0.3: a figure
#                                    held if it is within 30% of the baseline
#                                    on the bad side)
#
# The figures (ratio = bound time / measured time, higher is better, as
# every bench table prints it; us/node lower is better):
#   ar-N-cpu-SIZE   all_reduce.sum f32 on N CPU devices, SIZE per rank:
#                   `fuel-opt bench`'s ratio to its own host bound
#   ar-4-cpu-16M-bf16  the same with --transport bf16 (the cast kernels)
#   lower-10k       lowering the 10k-collective chain over 8 devices
#                   (examples/lower_chain.rs): microseconds per emitted node
#
# Exits 1 when a figure regressed, 2 when a build or a run failed.
set -euo pipefail
cd "$(dirname "$0")/.."

record=0
[ "${1:-}" = "--record" ] && record=1
reps=${PERF_CHECK_REPS:-3}
margin=${PERF_CHECK_MARGIN:-0.3}
doc=docs/performance.md
target="${CARGO_TARGET_DIR:-target}/release"

echo "# perf-check: $(date -u +%Y-%m-%d) on $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), $reps runs per figure, margin $margin"
# Two builds: with `--example`, cargo builds only the named targets, so one
# call with `-p fuel-opt` would leave fuel-opt's binary unbuilt on a fresh
# checkout.
cargo build --release -q -p fuel-opt || exit 2
cargo build --release -q -p fuel-collective --example lower_chain || exit 2

# ratio ARGS...: the median over $reps runs of the `ratio` column of
# `fuel-opt bench ARGS --csv` (one size).
ratio() {
  local vals=()
  for _ in $(seq "$reps"); do
    local out
    out=$("$target/fuel-opt" bench "$@" --csv) || exit 2
    vals+=("$(printf '%s\n' "$out" | awk -F, 'NR==1 { for (i = 1; i <= NF; i++) if ($i == "ratio") c = i } NR==2 { print $c }')")
  done
  printf '%s\n' "${vals[@]}" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'
}

# per_node: the median microseconds per emitted node of lowering the 10k chain.
per_node() {
  "$target/examples/lower_chain" 10000 "$reps" | sed -n 's/.* \([0-9.]*\) us\/node.*/\1/p' | tail -1
}

cpus() { seq -s, -f 'cpu:%g' 0 $(($1 - 1)); }

declare -A got
got[ar-2-cpu-256K]=$(ratio --devices "$(cpus 2)" --sizes 256K --iters 50 --warmup 5)
got[ar-2-cpu-16M]=$(ratio --devices "$(cpus 2)" --sizes 16M --iters 10 --warmup 2)
got[ar-4-cpu-16M]=$(ratio --devices "$(cpus 4)" --sizes 16M --iters 10 --warmup 2)
got[ar-8-cpu-4M]=$(ratio --devices "$(cpus 8)" --sizes 4M --iters 10 --warmup 2)
got[ar-8-cpu-16M]=$(ratio --devices "$(cpus 8)" --sizes 16M --iters 5 --warmup 1)
got[ar-4-cpu-16M-bf16]=$(ratio --devices "$(cpus 4)" --sizes 16M --iters 5 --warmup 1 --transport bf16)
got[lower-10k]=$(per_node)

# The baseline block: lines `NAME higher|lower VALUE` between
# "```perf-baseline" and "```".
baseline=$(awk '/^```perf-baseline$/ { on = 1; next } /^```$/ { on = 0 } on' "$doc")
if [ -z "$baseline" ]; then
  echo "perf-check: $doc has no \`\`\`perf-baseline block; run with --record on a quiet machine" >&2
  exit 2
fi

regressed=0
new=""
while read -r name better want; do
  [ -z "$name" ] && continue
  have=${got[$name]:-}
  if [ -z "$have" ]; then
    echo "perf-check: no figure measured for $name (a run printed nothing)" >&2
    exit 2
  fi
  verdict=$(awk -v h="$have" -v w="$want" -v b="$better" -v m="$margin" 'BEGIN {
    ok = (b == "higher") ? (h >= w * (1 - m)) : (h <= w * (1 + m));
    print ok ? "held" : "regressed" }')
  printf '%-20s %-6s baseline %-8s now %-8s %s\n' "$name" "$better" "$want" "$have" "$verdict"
  [ "$verdict" = regressed ] && regressed=1
  new+="$name $better $have"$'\n'
done <<< "$baseline"

if [ "$record" = 1 ]; then
  awk -v new="$new" '
    /^```perf-baseline$/ { print; printf "%s", new; skip = 1; next }
    skip && /^```$/ { skip = 0 }
    !skip' "$doc" > "$doc.tmp" && mv "$doc.tmp" "$doc"
  echo "perf-check: recorded these figures as the baseline in $doc; say in its text when and on what machine"
  exit 0
fi
exit "$regressed"
