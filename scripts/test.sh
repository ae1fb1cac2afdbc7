#!/usr/bin/env bash
# The test command (CI runs it through .ci/run on a fresh clone). Gates, in this order, each printing
# "gate <name>: <seconds> s (<result>)":
#   setup       Debian packages, test data, the e2e client (scripts/setup.sh)
#   layout      size budget and include directions (scripts/check_layout.sh)
#   format      clang-format (scripts/check_format.sh)
#   build       gcc, -Werror, into $BUILD (default build)
#   test        every unit and end-to-end test in $BUILD
#   asan-build  clang-14 with AddressSanitizer + UBSan (fatal) + LeakSanitizer, and the libFuzzer
#               targets, into $ASAN_BUILD (default build-asan)
#   asan-test   the same unit and end-to-end tests under the sanitizers; any report or leak fails
#   fuzz        each libFuzzer target replays its corpus, then runs $FUZZ_SECONDS s (scripts/fuzz_ci.sh)
# TF_GATES="layout build test" runs only those. Every gate runs even after a failure, except one whose
# prerequisite failed (test needs build; asan-build needs build; asan-test and fuzz need asan-build),
# so the plain build and tests report first and one run shows every independent failure.
# For quick local runs: TF_TARGETS="test_tensor" builds only those targets, TF_CTEST_ARGS="-R ^DType"
# passes a test filter to both ctest runs.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
ASAN_BUILD=${ASAN_BUILD:-build-asan}
JOBS=${JOBS:-$(nproc)}
GATES=${TF_GATES:-setup layout format build test asan-build asan-test fuzz}

# Sanitizer runtime options for everything run from asan-test and fuzz (the e2e server inherits
# them through node). Leaks fail (LSan's exit code); UBSan stops at the first report.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:halt_on_error=1:detect_stack_use_after_return=1:check_initialization_order=1:strict_init_order=1:detect_odr_violation=2}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$PWD/scripts/lsan.supp:print_suppressions=0}

declare -A result
summary=()
wanted() { [[ " $GATES " == *" $1 "* ]]; }
gate() {  # name, prerequisite gate or "-", command...
  local name=$1 need=$2
  shift 2
  wanted "$name" || return 0
  if [ "$need" != - ] && [ "${result[$need]:-ok}" != ok ]; then
    result[$name]=skipped
    summary+=("gate $name: skipped ($need failed)")
    echo "gate $name: skipped ($need failed)"
    return 0
  fi
  echo "=== gate $name"
  local t0=$SECONDS
  if "$@"; then result[$name]=ok; else result[$name]=FAILED; fi
  summary+=("gate $name: $((SECONDS - t0)) s (${result[$name]})")
  echo "gate $name: $((SECONDS - t0)) s (${result[$name]})"
}

build_plain() {
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTF_WERROR=ON >/dev/null &&
    cmake --build "$BUILD" -j"$JOBS" ${TF_TARGETS:+--target $TF_TARGETS}
}
build_asan() {
  cmake -S . -B "$ASAN_BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTF_WERROR=ON -DTF_SANITIZE=ON \
    -DTF_FUZZ=ON -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 >/dev/null &&
    cmake --build "$ASAN_BUILD" -j"$JOBS" ${TF_TARGETS:+--target $TF_TARGETS}
}
# shellcheck disable=SC2086  # TF_CTEST_ARGS is a list of arguments
run_tests() { ctest --test-dir "$1" --output-on-failure -j"$JOBS" ${TF_CTEST_ARGS:-}; }

T0=$SECONDS
gate setup - scripts/setup.sh
gate layout - scripts/check_layout.sh
gate format - scripts/check_format.sh
gate build - build_plain
gate test build run_tests "$BUILD"
gate asan-build build build_asan
gate asan-test asan-build run_tests "$ASAN_BUILD"
gate fuzz asan-build scripts/fuzz_ci.sh "$ASAN_BUILD"

echo "=== summary ($((SECONDS - T0)) s in all)"
printf '%s\n' "${summary[@]}"
for g in "${!result[@]}"; do
  [ "${result[$g]}" = ok ] || exit 1
done
exit 0
