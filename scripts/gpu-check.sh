#!/usr/bin/env bash
# Builds and runs the CUDA + Vulkan executor tests (hand-lowered graphs in
# exec_cuda, DeviceGroup-lowered ones in e2e_group, and a driver_all_reduce
# over a CUDA island run through NCCL: exec_cuda's
# cuda_island_driver_all_reduce_through_nccl) and the NCCL driver tests
# (driver_nccl, including nccl_spmd_comm_all_reduce_keeps_the_buffer_on_the_gpu:
# SPMD comm.* nodes on the GPU buffers) on a GPU machine and fails
# if any of them printed SKIP (so a missing driver cannot pass silently).
# Needs libcuda (an NVIDIA driver) and a Vulkan loader + ICD
# (`apt-get install -y mesa-vulkan-drivers libvulkan1` gives lavapipe).
# `cuda_without_a_driver` is left out: it checks the no-driver error and can
# only SKIP where a driver exists.
set -euo pipefail
cd "$(dirname "$0")/.."
log=$(mktemp)
FUEL_REQUIRE_VULKAN=1 FUEL_REQUIRE_CUDA=1 \
  cargo test -p fuel-tests --test exec_cuda --test e2e_group -- cuda --nocapture --test-threads=1 \
    --skip cuda_without_a_driver 2>&1 | tee "$log"
# NCCL driver tests: need libnccl.so on LD_LIBRARY_PATH (with the pip wheel,
# symlink nvidia/nccl/lib/libnccl.so.2 to libnccl.so: cudarc never loads .so.2).
FUEL_REQUIRE_CUDA=1 \
  cargo test -p fuel-collective --test driver_nccl -- --nocapture --test-threads=1 2>&1 | tee -a "$log"
if grep -q 'SKIP' "$log"; then
  echo "gpu-check: FAILED, some tests were skipped:" >&2
  grep 'SKIP' "$log" >&2
  exit 1
fi
grep -q '^PROOF ' "$log" || { echo "gpu-check: no PROOF lines" >&2; exit 1; }
echo "gpu-check: ok ($(grep -c '^PROOF ' "$log") PROOF lines)"
