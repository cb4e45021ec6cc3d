#!/usr/bin/env bash
# Builds fuel-collective with the `mpi` feature and runs the MpiDriver checks:
# `examples/mpi_driver.rs` on 4 processes (all_reduce, send/recv, the SPMD
# communicator), `examples/mpi_collectives.rs` on 4 (every MPI collective,
# every dtype and op, exact against an oracle; rank-identical floats; no
# fallback fold; disagreeing ranks; a join naming exactly the missing rank),
# then `examples/mpi_threads.rs` on 2 processes (two threads per process,
# each on a group of its own, calling MPI at the same time; finalize refused
# while a communicator lives). Installs nothing: it needs Open MPI (mpirun,
# libmpi) and libclang already present, e.g.
#   apt-get install -y libopenmpi-dev openmpi-bin libclang-dev clang
# Exits non-zero if the build fails or any rank of either run fails.
set -euo pipefail
cd "$(dirname "$0")/.."

command -v mpirun >/dev/null || { echo "mpi-check: mpirun not found (install openmpi-bin)" >&2; exit 2; }

cargo build -p fuel-collective --features mpi --example mpi_driver --example mpi_collectives --example mpi_threads
dir="${CARGO_TARGET_DIR:-target}/debug/examples"
out="$(mktemp)"
trap 'rm -f "$out"' EXIT

# run EXAMPLE N SECONDS: mpirun -n N, every rank must print one PROOF line.
run() {
  local name=$1 n=$2 limit=$3
  # --oversubscribe: this runs on 2-core machines; --allow-run-as-root: CI runs as root.
  if ! timeout "$limit" mpirun -n "$n" --oversubscribe --allow-run-as-root "$dir/$name" | tee "$out"; then
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
# Before MPI ran at MPI_THREAD_MULTIPLE with a communicator per group, this
# deadlocked (the two threads' collectives met each other on one world).
run mpi_threads 2 120
