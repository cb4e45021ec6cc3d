#!/usr/bin/env bash
# Builds the GPU proof kit: a self-contained folder (default `.gpu-bundle/`,
# ignored by git) that `scripts/gpu-check.sh --bundle DIR` runs on a GPU
# machine with no Rust toolchain and no network.
#
# It holds, all built in release and stripped:
#   bin/<test>      the test executables that need a GPU (listed in
#                   scripts/gpu-tests.txt, found through cargo's JSON messages)
#   bin/fuel-opt    the CLI (devices, demo, bench)
#   deb/            the Vulkan loader (libvulkan1) as a .deb, unpacked on the
#                   GPU machine into a private prefix, never into /
#   tests.txt       which binary runs with which libtest arguments
#   MANIFEST        sizes, the commit and the date it was built from
#
# Fails if the bundle plus the working tree that travels with it (tracked and
# untracked-but-not-ignored files) exceed 60 MiB, the device tool's limit less
# room to spare.
#
# Usage: scripts/gpu-bundle.sh [DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
out="${1:-.gpu-bundle}"
limit_mib=60

die() { echo "gpu-bundle: $*" >&2; exit 1; }
command -v cargo >/dev/null || die "cargo not found: build the bundle on a machine with the Rust toolchain"
command -v python3 >/dev/null || die "python3 not found (it reads cargo's JSON messages)"
command -v strip >/dev/null || die "strip not found (apt-get install binutils)"
command -v apt-get >/dev/null || die "apt-get not found: the Vulkan loader is fetched as a Debian package"

# The list of GPU test binaries and their libtest arguments, one per line:
#   <test target> [libtest arguments...]
list=scripts/gpu-tests.txt
[ -f "$list" ] || die "$list is missing"
mapfile -t entries < <(grep -v '^[[:space:]]*\(#\|$\)' "$list")
[ ${#entries[@]} -gt 0 ] || die "$list names no test"
targets=()
for e in "${entries[@]}"; do targets+=("${e%% *}"); done

rm -rf "$out"
mkdir -p "$out/bin" "$out/deb"

echo "gpu-bundle: building ${targets[*]} and fuel-opt (release)"
test_args=()
for t in "${targets[@]}"; do test_args+=(--test "$t"); done
json=$(mktemp)
trap 'rm -f "$json"' EXIT
cargo test --workspace --release --no-run --message-format=json "${test_args[@]}" >"$json"
cargo build --release --bin fuel-opt --message-format=json >>"$json"

# Map each wanted target to the executable cargo built for it.
python3 - "$json" "$out/bin" "${targets[@]}" <<'PY'
import json, shutil, sys
path, dest, wanted = sys.argv[1], sys.argv[2], sys.argv[3:]
found = {}
for line in open(path):
    try:
        msg = json.loads(line)
    except ValueError:
        continue
    if msg.get("reason") != "compiler-artifact" or not msg.get("executable"):
        continue
    t = msg["target"]
    name, kinds = t["name"], t["kind"]
    if ("test" in kinds and name in wanted) or ("bin" in kinds and name == "fuel-opt"):
        found[name] = msg["executable"]
missing = [w for w in wanted + ["fuel-opt"] if w not in found]
if missing:
    sys.exit(f"gpu-bundle: cargo built no executable for {missing}")
for name, exe in sorted(found.items()):
    shutil.copy2(exe, f"{dest}/{name}")
PY
strip "$out"/bin/*
printf '%s\n' "${entries[@]}" >"$out/tests.txt"

echo "gpu-bundle: fetching the Vulkan loader (libvulkan1)"
fetch_loader() { (cd "$out/deb" && apt-get download -q -o APT::Sandbox::User=root libvulkan1 >/dev/null); }
if ! fetch_loader; then
  # Stale or missing package lists: refresh them once where we may.
  [ "$(id -u)" = 0 ] && apt-get update -qq >/dev/null && fetch_loader ||
    die "apt-get download libvulkan1 failed; run apt-get update and try again"
fi
ls "$out"/deb/libvulkan1_*.deb >/dev/null 2>&1 || die "no libvulkan1 .deb was downloaded"

cp scripts/gpu-check.sh "$out/"

bundle_bytes=$(du -sb "$out" | cut -f1)
tree_bytes=$(git ls-files -z --cached --others --exclude-standard |
  xargs -0 -r stat -c %s -- 2>/dev/null | awk '{s += $1} END {print s + 0}')
total=$((bundle_bytes + tree_bytes))
mib() { awk -v b="$1" 'BEGIN {printf "%.1f", b / 1048576}'; }
{
  echo "commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo ' (with uncommitted changes)')"
  echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -m)"
  for f in "$out"/bin/* "$out"/deb/*; do
    echo "$(basename "$f") $(stat -c %s "$f")"
  done
  echo "bundle $(mib "$bundle_bytes") MiB, working tree $(mib "$tree_bytes") MiB, together $(mib "$total") MiB (limit $limit_mib MiB)"
} >"$out/MANIFEST"
cat "$out/MANIFEST"
if [ "$total" -gt $((limit_mib * 1048576)) ]; then
  die "the bundle and the working tree come to $(mib "$total") MiB, over the $limit_mib MiB that may travel; drop a test binary or slim the tree"
fi
if ! git -C "$root" check-ignore -q "$out" 2>/dev/null; then
  echo "gpu-bundle: warning: $out is not ignored by git, so it would travel as untracked files too" >&2
fi
echo "gpu-bundle: ok: $out (run: bash scripts/gpu-check.sh --bundle $out)"
