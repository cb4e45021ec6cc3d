#!/usr/bin/env bash
# Builds fuel-collective with the `mpi` feature and runs the MpiDriver checks:
# `examples/mpi_driver.rs` on 4 processes (all_reduce, send/recv, the
# counts-per-rank all_gather_uneven/reduce_scatter_uneven, the SPMD
# communicator with an even and an uneven all_to_all), `examples/mpi_collectives.rs` on 4 (every MPI collective,
# every dtype and op, exact against an oracle; rank-identical floats; no
# fallback fold; disagreeing ranks; a join naming exactly the missing rank),
# then `examples/mpi_threads.rs` on 2 processes (two threads per process,
# each on a group of its own, calling MPI at the same time; finalize refused
# while a communicator lives), and `examples/mpi_schedule.rs` on 2, 3 and 4
# (issue 33: every rank records a data-parallel step with extern matmuls
# through a WorldGroup, runs schedule-collectives, and the ranks' schedule
# hashes must be equal; the step then runs, checked bit for bit), and once
# more on 2 with rank 1 given another topology file: every rank must fail
# at the join (E0442) inside a hard `timeout`. Installs nothing: it needs Open MPI (mpirun,
# libmpi) and libclang already present, e.g.
#   apt-get install -y libopenmpi-dev openmpi-bin libclang-dev clang
# Then builds fuel-opt with MPI by the README's command
# (`cargo build --release -p fuel-opt --features mpi`; MPI_CHECK_PROFILE=debug
# builds a debug one instead, for a quick local run) and runs
# `fuel-opt demo --world` with P=2 and P=4, each with `--devices cpu:0` and
# `--devices cpu:0,vulkan:0`: every rank must print PROOF; then
# `fuel-opt bench --world` at 64K on 2 x [cpu:0,vulkan:0] and 4 x [cpu:0].
# Then worlds that must not hang (issue 38): rank 1 exiting at once, printing
# --help, or disagreeing on --runs, --sizes or --op; each must end with an
# error on every rank inside a hard `timeout`.
# Exits non-zero if a build fails or any rank of any run fails.
set -euo pipefail
cd "$(dirname "$0")/.."

command -v mpirun >/dev/null || { echo "mpi-check: mpirun not found (install openmpi-bin)" >&2; exit 2; }

cargo build -p fuel-collective --features mpi --example mpi_driver --example mpi_collectives --example mpi_threads --example mpi_schedule
dir="${CARGO_TARGET_DIR:-target}/debug/examples"
out="$(mktemp)"
trap 'rm -f "$out"' EXIT

# run EXAMPLE N SECONDS: mpirun -n N, every rank must print one PROOF line.
run() {
  local name=$1 n=$2 limit=$3
  shift 3
  # --oversubscribe: this runs on 2-core machines; --allow-run-as-root: CI runs as root.
  if ! timeout "$limit" mpirun -n "$n" --oversubscribe --allow-run-as-root "$dir/$name" "$@" | tee "$out"; then
    echo "mpi-check: $name: mpirun failed or hung (limit ${limit}s)" >&2
    exit 1
  fi
  local proofs
  proofs="$(grep -c '^PROOF ' "$out" || true)"
  if [ "$proofs" -ne "$n" ]; then
    echo "mpi-check: $name: expected $n PROOF lines, got $proofs" >&2
    exit 1
  fi
  echo "mpi-check: $name: all $n ranks passed"
}

run mpi_driver 4 300
run mpi_collectives 4 300
# Three ranks: the float all-reduce's ring goes round an odd number of runs.
run mpi_collectives 3 300
# Before MPI ran at MPI_THREAD_MULTIPLE with a communicator per group, this
# deadlocked (the two threads' collectives met each other on one world).
run mpi_threads 2 120
# Issue 33: a world schedules its training step alike on every rank (the
# schedule hashes are gathered and compared), and the step runs.
for n in 2 3 4; do
  run mpi_schedule "$n" 300
done
# Rank 1 plans from another topology file: every rank must end with E0442
# at the join, not wait on the others.
printf 'link host-host bandwidth=10 latency=1\n' >"$dir/mpi-schedule-a.topo"
printf 'link host-host bandwidth=20 latency=1\n' >"$dir/mpi-schedule-b.topo"
start=$(date +%s)
status=0
timeout 60 mpirun -n 2 --oversubscribe --allow-run-as-root scripts/mpi-rank1.sh "$dir/mpi_schedule" \
  "swap:$dir/mpi-schedule-a.topo=$dir/mpi-schedule-b.topo" --topology "$dir/mpi-schedule-a.topo" >"$out" 2>&1 || status=$?
cat "$out"
if [ "$status" -eq 0 ] || [ "$status" -eq 124 ] || [ "$status" -eq 137 ]; then
  echo "mpi-check: mpi_schedule with two topologies: ended with status $status (0: nothing refused; 124/137: hung past 60s)" >&2
  exit 1
fi
refused="$(grep -Ec '^FAIL rank [01] of 2: process [01] plans from another topology than process [01] ' "$out" || true)"
if [ "$refused" -ne 2 ]; then
  echo "mpi-check: mpi_schedule with two topologies: expected E0442 on both ranks, got it on $refused" >&2
  exit 1
fi
echo "mpi-check: mpi_schedule with two topologies: every rank ended in $(( $(date +%s) - start ))s with E0442"

# The world demo: fuel-opt built with MPI, P processes x k local devices.
profile="${MPI_CHECK_PROFILE:-release}"
if [ "$profile" = release ]; then
  cargo build --release -p fuel-opt --features mpi
else
  cargo build -p fuel-opt --features mpi
fi
dir="${CARGO_TARGET_DIR:-target}/$profile"
demo_out="$(mktemp -d)"
trap 'rm -f "$out"; rm -rf "$demo_out"' EXIT
for n in 2 4; do
  for devices in cpu:0 cpu:0,vulkan:0; do
    run fuel-opt "$n" 300 demo --world --devices "$devices" --elements 4096 --runs 2 --out "$demo_out"
  done
done

# The world benchmark: one small size, so CI stays fast. It checks its
# results bit for bit and fails on a wrong element; rank 0 prints one row.
for spec in "2 cpu:0,vulkan:0" "4 cpu:0"; do
  # shellcheck disable=SC2086 # split "P DEVICES" into $1 and $2
  set -- $spec
  if ! timeout 120 mpirun -n "$1" --oversubscribe --allow-run-as-root "$dir/fuel-opt" bench --world --devices "$2" --sizes 64K --iters 2 --warmup 1 | tee "$out"; then
    echo "mpi-check: bench --world on $1 x [$2] failed or hung" >&2
    exit 1
  fi
  if ! grep -Eq '^ +64K +16384 +f32 .* 0 ' "$out"; then
    echo "mpi-check: bench --world on $1 x [$2] printed no row with 0 wrong" >&2
    exit 1
  fi
  echo "mpi-check: bench --world on $1 x [$2] passed"
done
# The same as CSV, with bench's columns and its meaning of ratio.
if ! timeout 120 mpirun -n 2 --oversubscribe --allow-run-as-root "$dir/fuel-opt" bench --world --devices cpu:0 --sizes 64K --iters 2 --warmup 1 --csv | tee "$out"; then
  echo "mpi-check: bench --world --csv failed or hung" >&2
  exit 1
fi
if ! head -1 "$out" | grep -q '^size,count,type,time_us,.*,ratio$' || ! grep -Eq '^64K,16384,f32,[^,]*,[^,]*,[^,]*,0,' "$out"; then
  echo "mpi-check: bench --world --csv printed no header or no row with 0 wrong" >&2
  exit 1
fi
echo "mpi-check: bench --world --csv passed"

# Worlds that must not hang (issue 38): rank 1 exits at once without MPI,
# prints --help, or runs with other flags. Every case must end, every rank
# with an error, well within the hard limit: --world-timeout 5 bounds each
# step, and a rank that disagrees is refused before any collective runs.
# hang CASE LIMIT WANT MODE ARGS...: WANT (an extended regular expression)
# must be in the output.
hang() {
  local name=$1 limit=$2 want=$3 mode=$4
  shift 4
  local start status
  start=$(date +%s)
  status=0
  timeout "$limit" mpirun -n 2 --oversubscribe --allow-run-as-root \
    scripts/mpi-rank1.sh "$dir/fuel-opt" "$mode" "$@" >"$out" 2>&1 || status=$?
  cat "$out"
  if [ "$status" -eq 0 ] || [ "$status" -eq 124 ] || [ "$status" -eq 137 ]; then
    echo "mpi-check: $name: ended with status $status (0: nothing refused; 124/137: hung past ${limit}s)" >&2
    exit 1
  fi
  if ! grep -Eq "$want" "$out"; then
    echo "mpi-check: $name: no \`$want\` in the output" >&2
    exit 1
  fi
  echo "mpi-check: $name: every rank ended in $(( $(date +%s) - start ))s with an error"
}
world=(demo --world --elements 64 --out "$demo_out" --world-timeout 5)
# Rank 0 stops inside MPI_Init (its watchdog says so), or, where MPI starts
# without rank 1, in the join, which names rank 1 (E0901).
gone="rank 0 of 2: no progress for 5 s while starting MPI|rank 0 of 2 timed out after 3750 ms; rank\(s\) \[1\] never arrived"
hang "rank 1 exits at once" 60 "$gone" exit "${world[@]}" --runs 2
hang "rank 1 prints --help" 60 "$gone" help "${world[@]}" --runs 2
# Either rank may say it first: mpirun ends the job as soon as one rank
# exits, so the other's line may never come (CI saw only rank 1's).
hang "ranks disagree on --runs" 60 "rank 1 differs from rank 0 in --runs \(rank 0 has 50, rank 1 has 1\)|rank 0 differs from rank 1 in --runs \(rank 1 has 1, rank 0 has 50\)" swap:50=1 "${world[@]}" --runs 50
hang "ranks disagree on --sizes" 60 "rank 1 differs from rank 0 in --sizes \(rank 0 has 64K|rank 0 differs from rank 1 in --sizes \(rank 1 has 4K" swap:64K=4K \
  bench --world --devices cpu:0 --sizes 64K --iters 2 --warmup 1 --world-timeout 5
hang "ranks disagree on --op" 60 "rank [01] differs from rank [01] in --op" swap:max=min "${world[@]}" --runs 2 --op max
# Ranks that would plan the world from different cost figures (issue 33):
# refused at the fingerprint, naming the topology, before any collective.
printf 'staging cpu:0\nlink host-host bandwidth=10 latency=1\n' >"$dir/mpi-check-a.topo"
printf 'staging cpu:0\nlink host-host bandwidth=20 latency=1\n' >"$dir/mpi-check-b.topo"
# Either rank may say it first here too (CI once saw only rank 1's line).
hang "ranks disagree on the topology" 60 "rank [01] differs from rank [01] in the cost model's topology" \
  "swap:$dir/mpi-check-a.topo=$dir/mpi-check-b.topo" \
  bench --world --devices cpu:0 --sizes 4K --iters 2 --warmup 1 --world-timeout 5 --topology "$dir/mpi-check-a.topo"
# --op is honoured, not ignored: a max over the world, checked bit for bit.
run fuel-opt 2 120 demo --world --devices cpu:0 --elements 64 --runs 2 --op max --out "$demo_out"
grep -q '^PROOF rank 0 of 2: world all_reduce.max' "$out" || { echo "mpi-check: demo --world --op max ran no max" >&2; exit 1; }
