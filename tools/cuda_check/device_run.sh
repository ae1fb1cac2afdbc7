#!/usr/bin/env bash
# The CUDA backend's checks on the GPU machine, in one device call (tools/cuda_check/README.md):
#   1. the op contract (CUDA vs CPU on random and odd shapes, planted controls, batch invariance);
#   2. every model golden and parity test with TF_TEST_BACKEND=cuda (same goldens, same rules as CPU);
#   3. `tensorfold ocr --backend cuda` on the committed held-out sets of both demo models: greedy ids
#      equal to the committed CPU transcriptions.
# Binaries come prebuilt in .gpu/bin.tar.xz (tools/cuda_check/pack.sh; the GPU image lacks the Debian
# -dev packages), or BUILD=1 builds there. Logs go to $OUT.
set -uo pipefail
OUT=${OUT:-/tmp/tf-out}
mkdir -p "$OUT"
root=$PWD
# The test binaries look for goldens at the path they were built in.
src_dir=$(cat .gpu/source_dir 2>/dev/null || echo /work/main)
if [ "$src_dir" != "$root" ] && [ ! -e "$src_dir" ]; then
  mkdir -p "$(dirname "$src_dir")" && ln -s "$root" "$src_dir"
fi
mkdir -p build-cuda && tar xJf .gpu/bin.tar.xz -C build-cuda
export LD_LIBRARY_PATH=$root/build-cuda/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
(cd tools/reference && python3 -c "import common; print('unpacked', common.unpack_goldens('../../tests/golden'))")
nvidia-smi -L | tee "$OUT/gpu.txt"
status=0
step() {  # name, command...
  local name=$1 t0=$SECONDS
  shift
  "$@" >"$OUT/$name.log" 2>&1
  local rc=$?
  echo "== $name: exit $rc, $((SECONDS - t0)) s" | tee -a "$OUT/summary.txt"
  tail -n 12 "$OUT/$name.log"
  [ $rc = 0 ] || status=1
}
step contract build-cuda/tests/test_backend --gtest_filter='CudaContract*'
step models_cuda env TF_TEST_BACKEND=cuda build-cuda/tests/test_models
if [ -x build-cuda/tests/test_runtime ]; then  # packed with PACK_RUNTIME=1
  step runtime_cuda env TF_TEST_BACKEND=cuda build-cuda/tests/test_runtime
fi
# The CUDA backend's stage-by-stage differences from Transformers on one golden case (the one whose
# lm_head stage is most sensitive to 1-ulp changes in exp: see tools/cuda_check/README.md).
g=tests/golden
step stage_diff_qwen_untied build-cuda/tools/stage_diff/stage_diff $g/ckpt/qwen3_5-tiny-bf16-untied \
  $g/model/qwen3_5-tiny-bf16-untied/text_only --images $g/images --backend cuda
for m in demo-lighton demo-qwen35; do
  for set in heldout heldout_blocks; do
    step "ocr_${m}_${set}" python3 tools/cuda_check/compare_ocr.py build-cuda/tensorfold models/$m examples/$set 8
  done
done
if [ -x build-cuda/bench/linear_bench ]; then  # packed with PACK_BINS including bench/linear_bench
  step linear_bench build-cuda/bench/linear_bench 200
fi
grep -h "contract \]" "$OUT/contract.log" | head -60 > "$OUT/contract_counts.txt"
# A device call brings back at most 8 files: everything also goes back as one archive.
(cd "$OUT" && tar cJf all.tar.xz --exclude=all.tar.xz -- *)
exit $status
