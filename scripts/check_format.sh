#!/usr/bin/env bash
# Fails when a tracked C++/CUDA file differs from .clang-format's style; `--fix` rewrites them
# (also: cmake --build build --target format).
set -uo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files '*.h' '*.cpp' '*.cu' '*.cuh')
if [ "${1:-}" = "--fix" ]; then
  clang-format -i "${files[@]}"
  exit 0
fi
bad=0
for f in "${files[@]}"; do
  if ! clang-format --dry-run --Werror "$f" >/dev/null 2>&1; then
    echo "FAIL format: $f (run scripts/check_format.sh --fix)"
    bad=1
  fi
done
exit $bad
