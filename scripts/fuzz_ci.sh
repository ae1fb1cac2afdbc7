#!/usr/bin/env bash
# Fuzz gate: every libFuzzer target (fuzz/<name>_fuzz.cpp, built with -DTF_FUZZ=ON) first replays its
# committed corpus fuzz/corpus/<name>/, then fuzzes for FUZZ_SECONDS (default 60) with a fixed seed.
# Two targets run at a time (one per core). New coverage goes to a scratch directory, never into the
# committed corpus; a crash leaves its input under $FUZZ_OUT and fails the gate: fix the defect and
# commit the input to fuzz/corpus/<name>/ as a regression seed.
# Usage: scripts/fuzz_ci.sh [build-dir]   Reproduce one run: the command printed for its target.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build-asan}
SECS=${FUZZ_SECONDS:-60}
SEED=${FUZZ_SEED:-1}
PAR=${FUZZ_JOBS:-2}
OUT=${FUZZ_OUT:-$BUILD/fuzz-ci}
rm -rf "$OUT"
mkdir -p "$OUT"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:halt_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

targets=()
for src in fuzz/*_fuzz.cpp; do
  t=$(basename "$src" _fuzz.cpp)
  if [ ! -x "$BUILD/fuzz/${t}_fuzz" ]; then
    echo "FAIL fuzz: $BUILD/fuzz/${t}_fuzz not built (configure with -DTF_FUZZ=ON and clang)"
    exit 1
  fi
  targets+=("$t")
done

one() {  # target: replay, then a bounded run; all output to $OUT/<target>.log
  local t=$1 bin="$BUILD/fuzz/${1}_fuzz" corpus="fuzz/corpus/$1" log="$OUT/$1.log"
  local dict=()
  [ -f "fuzz/$t.dict" ] && dict=(-dict="fuzz/$t.dict")
  mkdir -p "$OUT/$t.new"
  # -rss_limit_mb: a single input may not balloon memory; -timeout: nor hang (seconds per input).
  local common=(-rss_limit_mb=2048 -timeout=30 -malloc_limit_mb=2048 -artifact_prefix="$OUT/$t-" "${dict[@]}")
  local t0=$SECONDS
  if ! "$bin" "${common[@]}" -runs=0 "$corpus" >"$log" 2>&1; then
    echo "FAIL fuzz $t: replaying $corpus ($(ls "$corpus" | wc -l) inputs); log $log"
    tail -n 40 "$log"
    return 1
  fi
  local replay=$((SECONDS - t0))
  local cmd=("$bin" "${common[@]}" -seed="$SEED" -max_total_time="$SECS" -print_final_stats=1 "$OUT/$t.new" "$corpus")
  if ! "${cmd[@]}" >>"$log" 2>&1; then
    echo "FAIL fuzz $t: crash, leak or timeout (inputs: $OUT/$t-*); reproduce: ${cmd[*]}"
    grep -E '^(==[0-9]+==ERROR|SUMMARY|.*runtime error|artifact_prefix|Test unit written)' "$log" | head -20
    tail -n 60 "$log"
    return 1
  fi
  local execs cov
  execs=$(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -oE '[0-9]+$')
  cov=$(grep -oE 'cov: [0-9]+' "$log" | tail -1)
  echo "ok   fuzz $t: replay $(ls "$corpus" | wc -l) inputs in ${replay} s; ${SECS} s seed $SEED: ${execs:-?} execs, ${cov:-cov ?}"
}
export -f one
export BUILD SECS SEED OUT
printf '%s\n' "${targets[@]}" | xargs -P "$PAR" -I{} bash -c 'one {}'
