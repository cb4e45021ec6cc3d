#!/usr/bin/env bash
# Runs the cargo-fuzz targets for a fixed time each.
#   scripts/fuzz.sh [SECONDS] [TARGET...]     (default: 60 s, targets parse, lower and run)
# cargo-fuzz needs nightly flags; RUSTC_BOOTSTRAP=1 lets the stable compiler
# accept them. New corpus entries go to a scratch folder; the committed seed
# corpus under tests/fuzz/corpus/ is only read. Inputs that found a bug and
# are too slow to seed the mutations (a 60 000-node chain) live in
# tests/fuzz/regressions/<target>/ and are each run once first.
set -euo pipefail
cd "$(dirname "$0")/../tests/fuzz"
secs=${1:-60}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(parse lower run)
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
export RUSTC_BOOTSTRAP=1
for t in "${targets[@]}"; do
  scratch=$(mktemp -d)
  echo "=== fuzzing $t for ${secs}s"
  log="$scratch.log"
  status=0
  # parse takes text, so longer inputs help, and its dictionary seeds the
  # tokens that reach the size checks; lower's and run's inputs are small
  # structs, and each runs the whole pipeline (run also the executor; lower
  # one in 512 on a 60 000-node chain), so they get more time per input.
  case "$t" in
    lower | run) flags=(-max_len=512 -timeout=30) ;;
    parse) flags=(-max_len=4096 -timeout=10 -dict=parse.dict) ;;
    *) flags=(-max_len=4096 -timeout=10) ;;
  esac
  if [ -d "regressions/$t" ]; then
    # Files as arguments: libFuzzer runs each once.
    cargo fuzz run "$t" regressions/"$t"/* -- -timeout=120 >"$log" 2>&1 || status=$?
    echo "replayed $(ls "regressions/$t" | wc -l) regression input(s)"
  fi
  [ "$status" -ne 0 ] || cargo fuzz run "$t" "$scratch" "corpus/$t" -- -max_total_time="$secs" "${flags[@]}" \
    -print_final_stats=1 >>"$log" 2>&1 || status=$?
  grep -E "stat::number_of_executed_units|Done [0-9]+ runs|panicked|SUMMARY|ERROR" "$log" || true
  [ "$status" -eq 0 ] || tail -n 60 "$log"
  rm -rf "$scratch" "$log"
  if [ "$status" -ne 0 ]; then
    echo "fuzz target $t failed (exit $status); the crashing input is under tests/fuzz/artifacts/$t/" >&2
    exit "$status"
  fi
done
