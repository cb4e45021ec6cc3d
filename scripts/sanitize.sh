#!/usr/bin/env bash
# The runtime's tests under sanitizers (docs/testing.md, "Sanitizers").
#
# 1. AddressSanitizer, on the stable toolchain (RUSTC_BOOTSTRAP=1 lets it
#    take -Zsanitizer): the executor, driver, concurrency, fault and soak
#    tests, and fuel-graph-ext's and fuel-runtime's unit tests, with Vulkan required (lavapipe)
#    so nothing skips. Leak checking is off (lavapipe and the Vulkan loader
#    keep allocations until exit); the soak test also runs without ASan's
#    quarantine, whose held-back frees would trip its memory-growth bound.
# 2. ThreadSanitizer, with an instrumented std (-Zbuild-std; without it
#    TSan reports hundreds of false races inside std's own synchronisation),
#    over the concurrency, driver and fault tests and fuel-graph-ext's unit
#    tests; and Miri over the unit tests of the pure modules (graph, text,
#    interp, verify, topology, the schedule; cost and plan). Both need a
#    nightly toolchain with rust-src (and miri); where there is none, the
#    script says so and skips them: stable cannot fetch one.
#
#   scripts/sanitize.sh               # all that this machine can run
#   scripts/sanitize.sh asan|tsan|miri  # only those (any of the three)
#   SANITIZE_DIR=DIR scripts/sanitize.sh  # build folders (default target/sanitize)
#
# Exits non-zero on any sanitizer report or test failure.
set -euo pipefail
cd "$(dirname "$0")/.."

parts=("$@")
[ ${#parts[@]} -gt 0 ] || parts=(asan tsan miri)
runs() { [[ " ${parts[*]} " == *" $1 "* ]]; }

triple=x86_64-unknown-linux-gnu
dir=${SANITIZE_DIR:-target/sanitize}
export FUEL_REQUIRE_VULKAN=1
export CARGO_TERM_COLOR=never

say() { printf '\n=== sanitize: %s (%s)\n' "$1" "$(date -u +%H:%M:%S)"; }

# The tests each sanitizer runs, as cargo arguments, package by package.
EXEC_TESTS=(--test exec_cpu --test exec_vulkan --test exec_driver)
FAULT_TESTS=(--test faults_cpu --test faults_vulkan)

asan() {
  RUSTC_BOOTSTRAP=1 \
    RUSTFLAGS="-Zsanitizer=address -Cunsafe-allow-abi-mismatch=sanitizer" \
    RUSTDOCFLAGS="-Zsanitizer=address -Cunsafe-allow-abi-mismatch=sanitizer" \
    CARGO_TARGET_DIR="$dir/asan" \
    cargo test --target "$triple" "$@"
}

if runs asan; then
  say "AddressSanitizer (stable, RUSTC_BOOTSTRAP=1)"
  export ASAN_OPTIONS=detect_leaks=0:halt_on_error=1
  asan -p fuel-graph-ext -p fuel-runtime --lib
  asan -p fuel-tests "${EXEC_TESTS[@]}" "${FAULT_TESTS[@]}" --test concurrency \
    -p fuel-collective --test driver_host
  say "AddressSanitizer: soak (no quarantine)"
  ASAN_OPTIONS=detect_leaks=0:halt_on_error=1:quarantine_size_mb=0 asan -p fuel-tests --test soak
  unset ASAN_OPTIONS
fi

nightly_has() {
  command -v rustup >/dev/null &&
    rustup component list --toolchain nightly --installed 2>/dev/null | grep -q "^$1"
}

if ! runs tsan; then
  :
elif nightly_has rust-src; then
  say "ThreadSanitizer (nightly, -Zbuild-std)"
  # second_deadlock_stack names both locks of a lock-order inversion; the
  # suppressions drop reports inside lavapipe and LLVM, which TSan cannot
  # see into (scripts/tsan.supp says why).
  # The concurrency tests' deadlines are 8x longer: TSan (and the debug
  # build) make their 24 MiB host adds many times slower.
  FUEL_TEST_DEADLINE_SCALE=8 \
    TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$PWD/scripts/tsan.supp" \
    RUSTFLAGS="-Zsanitizer=thread" \
    RUSTDOCFLAGS="-Zsanitizer=thread" \
    CARGO_TARGET_DIR="$dir/tsan" \
    cargo +nightly test -Zbuild-std --target "$triple" \
    -p fuel-graph-ext -p fuel-runtime --lib \
    -p fuel-tests --test concurrency --test exec_driver "${FAULT_TESTS[@]}" \
    -p fuel-collective --test driver_host
else
  say "ThreadSanitizer skipped"
  echo "sanitize: no nightly toolchain with rust-src on this machine, so no ThreadSanitizer"
  echo "sanitize: (it needs an instrumented std: rustup toolchain install nightly --component rust-src)"
fi

if ! runs miri; then
  :
elif nightly_has rust-src && nightly_has miri; then
  say "Miri (nightly): the pure modules"
  # Only the pure modules: the rest calls into Vulkan, CUDA or MPI (foreign
  # code Miri cannot run) or spends minutes per test in the interpreter.
  # long_text_is_cut_and_says_how_much builds a 20 MB line: minutes under
  # Miri for a test of string slicing the other runs cover.
  CARGO_TARGET_DIR="$dir/miri" cargo +nightly miri test -p fuel-graph-ext --lib -- \
    graph:: text:: interp:: verify:: topology:: plan:: \
    --skip long_text_is_cut_and_says_how_much
  CARGO_TARGET_DIR="$dir/miri" cargo +nightly miri test -p fuel-collective --no-default-features --lib -- \
    cost:: plan::
else
  say "Miri skipped"
  echo "sanitize: no nightly toolchain with rust-src and miri on this machine, so no Miri"
  echo "sanitize: (rustup toolchain install nightly --component rust-src --component miri)"
fi

say "done"
