#!/usr/bin/env bash
# CPU speed of whole `tensorfold ocr` runs: vision seconds, prefill and decode tokens/s, per checkpoint.
# usage: bench/model/cpu_bench.sh BUILD_DIR [CKPT IMAGE NEW_TOKENS]...
# Prints a markdown table (numbers from the --json usage block of each run; best of 2 runs).
set -euo pipefail
build=$1; shift
echo "| checkpoint | image | prompt tokens | vision s | prefill tok/s | decode tok/s | threads |"
echo "|---|---|---:|---:|---:|---:|---:|"
while [ $# -ge 3 ]; do
  ckpt=$1 img=$2 n=$3; shift 3
  best=""
  for run in 1 2; do
    out=$("$build/tensorfold" ocr "$ckpt" "$img" --json --max-tokens "$n" --ignore-eos --temperature 0)
    line=$(/usr/bin/python3 - "$out" <<'PY'
import json, sys
u = json.loads(sys.argv[1])["usage"]
dec = (u["completion_tokens"] - 1) / u["decode_seconds"] if u["decode_seconds"] > 0 else 0
print(f'{u["prompt_tokens"]} {u["vision_seconds"]:.3f} {u["prompt_tokens"] / u["prefill_seconds"]:.1f} {dec:.2f}')
PY
)
    # keep the run with the faster decode
    if [ -z "$best" ] || awk -v a="$line" -v b="$best" 'BEGIN{split(a,x," ");split(b,y," ");exit !(x[4]>y[4])}'; then best=$line; fi
  done
  read -r p v pf dc <<<"$best"
  echo "| $(basename "$ckpt") | $(basename "$img") | $p | $v | $pf | $dc | ${TF_THREADS:-$(nproc)} |"
done
