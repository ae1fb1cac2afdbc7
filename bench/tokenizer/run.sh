#!/usr/bin/env bash
# Tokenizer encode throughput: tensorfold vs npm peers, same corpus, same machine, same run.
# Usage: bench/tokenizer/run.sh [BUILD_DIR] [TOKENIZER_DIR] [CORPUS_MB] [REPEATS]
# Builds tokenizer_bench (-DTF_BENCH=ON), installs the npm peers into bench/tokenizer/node_modules, writes the
# corpus with make_corpus.py and prints a markdown table.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
BUILD="${1:-$ROOT/build-bench}"
TOKDIR="$(cd "${2:-$ROOT/tests/data/qwen3}" && pwd)"
MB="${3:-12}"
REPEATS="${4:-3}"
CORPUS="$HERE/corpus.txt"

cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTF_BENCH=ON -DTF_BUILD_TESTS=OFF >/dev/null
cmake --build "$BUILD" --target tokenizer_bench -j2 >/dev/null
[ -d "$HERE/node_modules/tokenizers" ] || (cd "$HERE" && npm install --ignore-scripts --no-audit --no-fund >/dev/null)
python3 "$HERE/make_corpus.py" "$CORPUS" "$MB" >&2

{
  "$BUILD/bench/tokenizer_bench" "$TOKDIR/tokenizer.json" "$CORPUS" "$REPEATS"
  (cd "$HERE" && node peers.mjs "$TOKDIR/tokenizer.json" "$TOKDIR/tokenizer_config.json" "$CORPUS" "$REPEATS")
} > "$HERE/.results.tsv"

echo "corpus: $(wc -c < "$CORPUS") bytes, $(tr -cd '\036' < "$CORPUS" | wc -c) separators; one document per" \
     "encode call, one thread, add_special_tokens=false, best of $REPEATS; $(nproc) CPUs: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo
echo "| implementation | MB/s (CPU time) | MB/s (wall) | CPU s | wall s | tokens | ids checksum | tensorfold speed-up (CPU) |"
echo "|---|---:|---:|---:|---:|---:|---|---:|"
ours=$(head -1 "$HERE/.results.tsv" | cut -f2)
while IFS=$'\t' read -r name mbs wmbs secs wsecs ntok sum; do
  echo "| $name | $mbs | $wmbs | $secs | $wsecs | $ntok | $sum | $(python3 -c "print(f'{$ours/$mbs:.2f}x')") |"
done < "$HERE/.results.tsv"
rm -f "$HERE/.results.tsv"
