#!/usr/bin/env bash
# The CUDA backend's checks on the GPU machine, in one device call (tools/cuda_check/README.md):
#   1. the op contract (CUDA vs CPU on random and odd shapes, planted controls, batch invariance; CONTRACT=a
#      gtest filter, default CudaContract*);
#   2. every model golden and parity test with TF_TEST_BACKEND=cuda (same goldens, same rules as CPU), and
#      test_runtime the same way where it was packed (PACK_RUNTIME=1); CASES=a gtest filter narrows both;
#   3. `tensorfold ocr --backend cuda` on the committed held-out sets (OCR_SETS, default heldout and
#      heldout_blocks; "" for none) of both demo models: greedy ids equal to the committed CPU transcriptions;
#   4. what was packed of the benchmarks: linear_bench (large rows, or with LINEAR_SMALL_CONFIGS those small-row
#      candidates on the 1B's and the 4B's shapes; small rows at each SPLIT_CHUNKS value of
#      TF_CUDA_LINEAR_SPLIT_MIN_CHUNKS), attention_bench;
#   (PARALLEL=1 runs steps 1-3 at once; AB_SHAPES=lighton-1b,qwen3_5-0.8b adds whole runs of a second packed
#   tensorfold, AB_OLD (default build-cuda/tensorfold_old), against this one, or of AB_ENVS: bench/model/ab_runs.py;
#   NCU_KERNELS=REGEX: ncu's counters of the first NCU_COUNT kernels matching REGEX in the 1B page's run, e.g.
#   "attention_wgmma|linear_wgmma|rms_norm_warp" for one vision layer)
#   5. with SERVE_CUT=1, serving 128 pages x SERVE_TOKENS (default 300) tokens (bench/serve/gpu_serve_bench.py,
#      tensorfold only) with the paged attention cut on, then off, SERVE_REPS times (default 1).
# Binaries come prebuilt in .gpu/bin.tar.xz (tools/cuda_check/pack.sh; the GPU image lacks the Debian
# -dev packages). The demo checkpoints' weights (31 MB) often have to stay behind for the 64 MiB a call
# carries (tools/cuda_check/aside.sh): without them the demo cases are filtered out and step 3 is skipped,
# and the summary says so. Every step is cut to what is left of DEADLINE seconds (default 575, under the
# call's 600). Logs go to $OUT: summary.txt, and everything as all.tar.xz (a call returns at most 8 files).
set -uo pipefail
OUT=${OUT:-/tmp/tf-out}
DEADLINE=${DEADLINE:-575}
mkdir -p "$OUT/logs"
root=$PWD
# The test binaries look for goldens at the path they were built in.
src_dir=$(cat .gpu/source_dir 2>/dev/null || echo /work/main)
if [ "$src_dir" != "$root" ] && [ ! -e "$src_dir" ]; then
  mkdir -p "$(dirname "$src_dir")" && ln -s "$root" "$src_dir"
fi
mkdir -p build-cuda && tar xJf .gpu/bin.tar.xz -C build-cuda
export LD_LIBRARY_PATH=$root/build-cuda/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
(cd tools/reference && python3 -c "import common; print('unpacked', common.unpack_goldens('../../tests/golden'))")
nvidia-smi -L | tee "$OUT/summary.txt"
echo "commit $(cat .gpu/commit 2>/dev/null)" >>"$OUT/summary.txt"
status=0
step() {  # name, limit s, command...: run under what is left of DEADLINE
  local name=$1 lim=$2 t0=$SECONDS left=$((DEADLINE - SECONDS))
  shift 2
  [ "$lim" -gt "$left" ] && lim=$left
  if [ "$lim" -lt 10 ]; then
    echo "== $name: not run (time)" | tee -a "$OUT/summary.txt"
    return
  fi
  timeout "$lim" "$@" >"$OUT/logs/$name.log" 2>&1
  local rc=$?
  echo $rc >"$OUT/logs/$name.rc"  # for the steps run in parallel (PARALLEL=1), whose status is a subshell's
  echo "== $name: exit $rc, $((SECONDS - t0)) s" | tee -a "$OUT/summary.txt"
  tail -n 6 "$OUT/logs/$name.log"
  [ $rc = 0 ] || status=1
}
# Demo checkpoints left behind (aside.sh): their cases filtered out, their held-out sets not read.
demos=()
excl=()
for m in demo-lighton demo-qwen35; do
  if [ -e "models/$m/model.safetensors" ]; then
    demos+=("$m")
  else
    excl+=("*${m//-/_}*")
    [ $m = demo-lighton ] && excl+=("PromptCacheDemo.*")
  fi
done
neg=""
if [ ${#excl[@]} -gt 0 ]; then
  excl+=("DemoGoldenSet.*")
  neg="-$(IFS=:; echo "${excl[*]}")"
  echo "demo checkpoints in this call: ${demos[*]:-none}; filtered: ${excl[*]}" >>"$OUT/summary.txt"
fi
filter=("--gtest_filter=${CASES:-*}$neg")  # CASES: a gtest filter for test_models / test_runtime
# PARALLEL=1: steps 1-3 at once (each leaves the GPU mostly idle: ~140 s on an H100 instead of ~300 s; the
# timings below then run alone).
par() { if [ "${PARALLEL:-0}" = 1 ]; then "$@" & else "$@"; fi; }
ocr_sets() {
  for m in "${demos[@]}"; do  # OCR_SETS="" skips them
    for set in ${OCR_SETS-heldout heldout_blocks}; do
      step "ocr_${m}_${set}" 120 python3 tools/cuda_check/compare_ocr.py build-cuda/tensorfold "models/$m" \
        "examples/$set" 8
    done
  done
}
par step contract 200 build-cuda/tests/test_backend --gtest_filter="${CONTRACT:-CudaContract*}"
par step models_cuda 150 env TF_TEST_BACKEND=cuda build-cuda/tests/test_models "${filter[@]}"
if [ -x build-cuda/tests/test_runtime ]; then  # packed with PACK_RUNTIME=1
  par step runtime_cuda 200 env TF_TEST_BACKEND=cuda build-cuda/tests/test_runtime "${filter[@]}"
fi
[ "${PARALLEL:-0}" = 1 ] && par ocr_sets
wait
for f in "$OUT"/logs/*.rc; do [ "$(cat "$f")" = 0 ] || status=1; done
grep -H '^\[  FAILED\|^\[  PASSED' "$OUT"/logs/*.log | sed "s|$OUT/logs/||" >>"$OUT/summary.txt"
if [ -x build-cuda/tools/stage_diff/stage_diff ]; then
  # The CUDA backend's stage-by-stage differences from Transformers on one golden case (the one whose
  # lm_head stage is most sensitive to 1-ulp changes in exp: see tools/cuda_check/README.md).
  g=tests/golden
  step stage_diff_qwen_untied 60 build-cuda/tools/stage_diff/stage_diff $g/ckpt/qwen3_5-tiny-bf16-untied \
    $g/model/qwen3_5-tiny-bf16-untied/text_only --images $g/images --backend cuda
fi
[ "${PARALLEL:-0}" = 1 ] || ocr_sets
if [ -x build-cuda/bench/linear_bench ]; then  # packed with PACK_BINS including bench/linear_bench
  if [ -n "${LINEAR_SMALL_CONFIGS:-}" ]; then  # e.g. 7,11,12: small-row candidates, 1B and 4B shapes
    step linear_small_1b 90 build-cuda/bench/linear_bench 30 --small-only --configs "$LINEAR_SMALL_CONFIGS"
    step linear_small_4b 120 build-cuda/bench/linear_bench 30 --small-only --4b --configs "$LINEAR_SMALL_CONFIGS"
  else
    step linear_large 90 build-cuda/bench/linear_bench 30 --large-only
  fi
  for c in ${SPLIT_CHUNKS:-}; do
    step "linear_split_min_chunks$c" 60 env TF_CUDA_LINEAR_SPLIT_MIN_CHUNKS="$c" build-cuda/bench/linear_bench 30 \
      --small-only --configs 7
  done
fi
if [ -x build-cuda/bench/attention_bench ]; then
  step attention_bench 90 build-cuda/bench/attention_bench 20
fi
if [ -n "${NCU_KERNELS:-}" ]; then  # counters of the first NCU_COUNT (4) kernels matching the regex in the 1B page's run
  python3 -c "import sys; sys.path.insert(0, 'bench/model'); import gpu_bench; gpu_bench.build_full('/tmp/tf-bench', ('lighton-1b',))" \
    >"$OUT/logs/build_full.log" 2>&1
  step ncu 150 ncu --clock-control none --set full --import-source no -k "regex:$NCU_KERNELS" -c "${NCU_COUNT:-4}" \
    build-cuda/tensorfold ocr /tmp/tf-bench/lighton-1b-random tests/golden/images/page_1540x1190.png --backend cuda \
    --max-tokens 2 --ignore-eos --no-drafts --temperature 0
  grep -hE "^  [a-zA-Z].*\(|Duration|Executed Instructions  |Issue Slots Busy|Registers Per|L1/TEX Cache Throughput" \
    "$OUT/logs/ncu.log" | cut -c1-150 >>"$OUT/summary.txt"
fi
if [ -n "${AB_SHAPES:-}" ]; then  # whole runs, interleaved: AB_OLD (a second tensorfold, packed) against this one
  envs=${AB_ENVS:-"{\"old\": [\"${AB_OLD:-build-cuda/tensorfold_old}\", {}], \"new\": {}}"}
  step ab_runs 240 python3 bench/model/ab_runs.py build-cuda/tensorfold "$envs" "$AB_SHAPES" 128
  grep -h "tok/s" "$OUT/logs/ab_runs.log" >>"$OUT/summary.txt"
fi
if [ "${SERVE_CUT:-0}" = 1 ]; then  # the first run also builds the full-size random 1B checkpoint (cached)
  # SERVE_TOKENS output tokens per request (default 300), SERVE_REPS pairs (default 1), on then off in each.
  tokens=${SERVE_TOKENS:-300}
  cap=$((tokens >= 1000 ? 110 : 80))
  first=1
  for rep in $(seq 1 "${SERVE_REPS:-1}"); do
    for cut in 1 0; do
      budget=$((cap + 25 + (first ? 50 : 0)))
      first=0
      name="serve_cut${cut}_r$rep"
      step "$name" $((budget + 5)) env TF_PAGED_ATTENTION_CUT=$cut TF_SERVE_BENCH_C128=1 \
        python3 bench/serve/gpu_serve_bench.py build-cuda/tensorfold "$OUT/logs/$name" --max-tokens "$tokens" \
        --levels 128 --pages 8 --budget "$budget" --level-cap "$cap" --hf-reserve 0 --skip-hf
      grep -h '^| tensorfold' "$OUT/logs/$name/serve_bench.md" 2>/dev/null | sed "s/^/cut=$cut rep=$rep /" \
        >>"$OUT/summary.txt"
    done
  done
fi
grep -h "contract \]" "$OUT/logs/contract.log" | head -60 >"$OUT/contract_counts.txt"
(cd "$OUT" && tar cJf all.tar.xz logs && rm -rf logs)
exit $status
