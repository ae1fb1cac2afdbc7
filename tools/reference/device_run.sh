#!/bin/bash
# One device call: rebuild every committed golden twice (determinism proof), verify, pack results into $OUT.
# Usage (from the repo root, on the GPU machine): bash tools/reference/device_run.sh [--full] [--twice]
set -o pipefail
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
T0=$(date +%s)
python3 tools/reference/ref.py all 2>&1 | grep -v "Writing model shards\|Loading weights" | tee "$OUT/all.log" || echo "ALL FAILED"
echo "all took $(( $(date +%s) - T0 ))s"
if [[ " $* " == *" --twice "* ]]; then
  python3 tools/reference/ref.py all --root /tmp/g2 > "$OUT/all2.log" 2>&1 || echo "ALL2 FAILED"
  if diff tests/golden/SHA256SUMS /tmp/g2/SHA256SUMS > "$OUT/sums.diff"; then echo "SHA256SUMS IDENTICAL ($(wc -l < tests/golden/SHA256SUMS) files)"; else echo "SHA256SUMS DIFFER"; head -20 "$OUT/sums.diff"; fi
fi
python3 tools/reference/verify.py --tiny 2>&1 | grep -v "Loading weights" | tee "$OUT/verify.log"
tar cf /tmp/golden.tar -C tests golden && split -b 15M /tmp/golden.tar "$OUT/golden.tar." && ls -la "$OUT"
if [[ " $* " == *" --full "* ]]; then
  python3 tools/reference/verify.py --full $([[ " $* " == *" --save-full "* ]] && echo --save-full) 2>&1 | grep -v "Loading weights\|Writing model" | tee "$OUT/full.log"
fi
du -sh tests/golden/* 
echo "total $(( $(date +%s) - T0 ))s"
