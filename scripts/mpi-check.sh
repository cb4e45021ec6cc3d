#!/usr/bin/env bash
# Builds fuel-collective with the `mpi` feature and runs the MpiDriver check
# on 4 processes. Installs nothing: it needs Open MPI (mpirun, libmpi) and
# libclang already present, e.g.
#   apt-get install -y libopenmpi-dev openmpi-bin libclang-dev clang
# Exits non-zero if the build fails or any rank fails.
set -euo pipefail
cd "$(dirname "$0")/.."

command -v mpirun >/dev/null || { echo "mpi-check: mpirun not found (install openmpi-bin)" >&2; exit 2; }

cargo build -p fuel-collective --features mpi --example mpi_driver
bin="${CARGO_TARGET_DIR:-target}/debug/examples/mpi_driver"
n=4
out="$(mktemp)"
trap 'rm -f "$out"' EXIT
# --oversubscribe: this runs on 2-core machines; --allow-run-as-root: CI runs as root.
if ! timeout 300 mpirun -n "$n" --oversubscribe --allow-run-as-root "$bin" | tee "$out"; then
  echo "mpi-check: mpirun failed" >&2
  exit 1
fi
proofs="$(grep -c '^PROOF ' "$out" || true)"
if [ "$proofs" -ne "$n" ]; then
  echo "mpi-check: expected $n PROOF lines, got $proofs" >&2
  exit 1
fi
echo "mpi-check: all $n ranks passed"
