#!/usr/bin/env bash
# The small-row linear's checks and timings on the GPU machine in one device call (issue 16, decode GEMV):
# the linear contract tests (tolerance, planted controls, batch invariance of every configuration at 1..256
# rows, small-row configurations against each other) and linear_bench's decode section (the 1B's decode
# shapes at 1/2/4/8/16/64 rows, every small-row configuration, bits checked against configuration 0).
#   here:   ninja -C build test_backend linear_bench
#           PACK_BINS="tests/test_backend bench/linear_bench" tools/cuda_check/pack.sh build
#           mkdir -p <repo>/.gpu/gemv16 && cp .gpu/bin.tar.xz tools/cuda_check/linear_small_run.sh <repo>/.gpu/gemv16/
#   device: bash .gpu/gemv16/linear_small_run.sh        (carry [".gpu/gemv16"]; logs under $OUT)
# CONFIGS: the small-row configurations to time; PDL_CONFIGS: more, in a second run (so a failure there
# cannot lose the first table).
set -uo pipefail
OUT=${OUT:-/tmp/tf-out}
mkdir -p "$OUT"
here=$(cd "$(dirname "$0")" && pwd)
b=/tmp/gemv16-bin
mkdir -p $b && tar xJf "$here/bin.tar.xz" -C $b
export LD_LIBRARY_PATH=$b/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv | tee "$OUT/gpu.txt"
t0=$SECONDS
timeout 90 $b/bench/linear_bench 200 --small-only --configs "${CONFIGS:-0,7,8,9,10}" >"$OUT/bench.log" 2>&1
echo "== bench: exit $?, $((SECONDS - t0)) s" | tee -a "$OUT/summary.txt"
if [ -n "${PDL_CONFIGS:-}" ]; then
  t0=$SECONDS
  timeout 60 $b/bench/linear_bench 200 --small-only --configs "$PDL_CONFIGS" >"$OUT/bench_pdl.log" 2>&1
  echo "== bench_pdl: exit $?, $((SECONDS - t0)) s" | tee -a "$OUT/summary.txt"
fi
t0=$SECONDS
tests='CudaContract.Linear:CudaContract.LinearPlantedControl:CudaContract.BatchInvarianceLinear'
tests+=':CudaContract.BatchInvarianceLinearRowCounts:CudaContract.BatchInvarianceLinearPlantedControl'
tests+=':CudaContract.BatchInvarianceLinearSmallConfigs'
timeout ${CONTRACT_TIMEOUT:-150} $b/tests/test_backend --gtest_filter="$tests" >"$OUT/contract.log" 2>&1
echo "== contract: exit $?, $((SECONDS - t0)) s" | tee -a "$OUT/summary.txt"
grep -E "^\[  (PASSED|FAILED) |^\[       OK|^\[  FAILED|DIFFERS|differs from|Failure" "$OUT/contract.log" | head -40
grep -h -A100 "one decode step" "$OUT"/bench*.log
cat "$OUT/summary.txt"
