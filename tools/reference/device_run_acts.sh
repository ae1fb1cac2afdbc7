#!/bin/bash
# One device call: the hidden_act goldens of act_goldens.py (the ACT2FN probe tests/golden/acts/ and the
# variant goldens tests/golden/model/<base>-<act>/), built twice (determinism proof), their noise floor on
# CUDA, SHA256SUMS, packed into $OUT/acts_goldens.tar. Needs the committed tests/golden/ckpt and images.
# Usage (from the repo root, on the GPU machine): bash tools/reference/device_run_acts.sh
# Back here: tar xf acts_goldens.tar -C tests/golden && (cd tests/golden && sha256sum -c --quiet SHA256SUMS)
set -o pipefail
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
T0=$(date +%s)
python3 tools/reference/ref.py acts 2>&1 | grep -v "Writing model shards\|Loading weights" | tee "$OUT/acts.log" || echo "ACTS FAILED"
rm -rf /tmp/g2 && cp -r tests/golden /tmp/g2
python3 tools/reference/ref.py acts --root /tmp/g2 > "$OUT/acts2.log" 2>&1 || echo "ACTS2 FAILED"
if diff tests/golden/SHA256SUMS /tmp/g2/SHA256SUMS > "$OUT/sums.diff"; then echo "SHA256SUMS IDENTICAL ($(wc -l < tests/golden/SHA256SUMS) files)"; else echo "SHA256SUMS DIFFER"; head -20 "$OUT/sums.diff"; fi
variants=$(cd tools/reference && python3 -c "import act_goldens; print(' '.join(act_goldens.VARIANTS))")
python3 tools/reference/noise_floor.py --only $variants 2>&1 | grep -v "Loading weights" | tee "$OUT/noise_floor.log" || echo "NOISE FLOOR FAILED"
(cd tools/reference && python3 -c "import ref; ref.write_sums(ref.GOLDEN)")
files="SHA256SUMS acts"
for v in $variants; do files="$files model/$v"; done
# only the committed forms: stages as .xz (the raw files are git-ignored)
tar cf "$OUT/acts_goldens.tar" -C tests/golden --exclude='stages.safetensors' $files && tar tvf "$OUT/acts_goldens.tar"
echo "total $(( $(date +%s) - T0 ))s"
