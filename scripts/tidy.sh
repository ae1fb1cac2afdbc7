#!/usr/bin/env bash
# clang-tidy over src/ with the checks in .clang-tidy, using <build>/compile_commands.json.
# Usage: scripts/tidy.sh [build-dir] [file-regex]   (also: cmake --build <build> --target tidy)
# Prints every finding and a count; exits 0 (a developer tool, not a CI gate yet).
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
FILTER=${2:-'/src/.*\.cpp$'}
TIDY=$(command -v clang-tidy-14 || command -v clang-tidy || true)
RUNNER=$(command -v run-clang-tidy-14 || command -v run-clang-tidy || true)
if [ -z "$TIDY" ] || [ -z "$RUNNER" ]; then
  echo "tidy: clang-tidy not found (scripts/setup.sh installs clang-tidy)" >&2
  exit 1
fi
if [ ! -f "$BUILD/compile_commands.json" ]; then
  echo "tidy: $BUILD/compile_commands.json missing; configure first: cmake -S . -B $BUILD -G Ninja" >&2
  exit 1
fi
log=$(mktemp)
# -j2: the project's machines are small; raise TIDY_JOBS on a bigger one.
# run-clang-tidy colours its output even into a pipe: strip the escapes so the counts below match.
"$RUNNER" -clang-tidy-binary "$TIDY" -p "$BUILD" -j "${TIDY_JOBS:-2}" -quiet "$FILTER" 2>/dev/null |
  sed -u -r 's/\x1b\[[0-9;]*m//g' | tee "$log" | grep --line-buffered -E '(warning|error):' || true
n=$(grep -cE ': (warning|error): .*\[[a-z]' "$log" || true)
uniq=$(grep -E ': (warning|error): .*\[[a-z]' "$log" | sort -u | wc -l)
echo "tidy: $uniq distinct findings ($n with repeats from headers)"
grep -oE '\[[a-z][a-z0-9.-]+(,[a-z0-9.-]+)*\]$' "$log" | sort | uniq -c | sort -rn
rm -f "$log"
