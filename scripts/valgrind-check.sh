#!/usr/bin/env bash
# Runs the CPU executor's failure tests (tests/tests/faults_cpu.rs) once
# under valgrind and exits non-zero if valgrind finds a definite leak or a
# memory error. The binary is CPU-only, so no GPU driver is loaded and the
# report is about our code. On a 2-core machine the valgrind run takes about
# 10 s; building the test binary from scratch first adds about 2 minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR=never

command -v valgrind >/dev/null || {
  echo "valgrind-check: valgrind is not installed (apt-get install valgrind)" >&2
  exit 2
}

# Build the test binary and ask cargo where it is.
bin=$(cargo test -p fuel-tests --test faults_cpu --no-run --message-format=json 2>/dev/null |
  python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "faults_cpu" and m.get("executable"):
        print(m["executable"])
')
if [ -z "$bin" ]; then
  echo "valgrind-check: could not build the faults_cpu test binary" >&2
  cargo test -p fuel-tests --test faults_cpu --no-run >&2
  exit 2
fi
echo "valgrind-check: $bin"

# Definite leaks and memory errors fail; "possibly lost" and "still
# reachable" blocks (thread-locals, std's lazy statics) are reported only.
valgrind \
  --leak-check=full \
  --errors-for-leak-kinds=definite \
  --show-leak-kinds=definite \
  --error-exitcode=1 \
  --quiet \
  "$bin" --test-threads=1
echo "valgrind-check: no definite leaks, no memory errors"
