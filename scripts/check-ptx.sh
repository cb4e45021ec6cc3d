#!/usr/bin/env bash
# Writes every PTX module the CUDA backend loads and assembles it with ptxas
# for sm_80 and sm_90, with no GPU needed. ptxas comes from the PyPI package
# nvidia-cuda-nvcc-cu12, installed into a venv under target/ptxas-venv.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=target/ptxas-venv
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet nvidia-cuda-nvcc-cu12
fi
ptxas=$("$venv/bin/python" -c 'import nvidia.cuda_nvcc, os; print(os.path.join(os.path.dirname(nvidia.cuda_nvcc.__file__), "bin", "ptxas"))' 2>/dev/null || true)
if [ -z "$ptxas" ] || [ ! -x "$ptxas" ]; then
  ptxas=$(find "$venv" -name ptxas -type f | head -n1)
fi
[ -x "$ptxas" ] || { echo "check-ptx: ptxas not found in $venv" >&2; exit 1; }
dir=target/ptx
rm -rf "$dir"
FUEL_PTX_DUMP_DIR="$PWD/$dir" cargo test -p fuel-runtime --lib backend::cuda::ptx::tests::dump_for_ptxas -- --exact >/dev/null
# The shipped extern kernels' PTX (docs/extern.md), as written.
cp fuel-graph-ext/runtime/shaders/*.ptx "$dir/"
n=0
for f in "$dir"/*.ptx; do
  for arch in sm_80 sm_90; do
    "$ptxas" -arch="$arch" -o /dev/null "$f"
    echo "ptxas $arch ok: $f"
  done
  n=$((n + 1))
done
[ "$n" -gt 0 ] || { echo "check-ptx: no PTX written" >&2; exit 1; }
