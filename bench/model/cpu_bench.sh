#!/usr/bin/env bash
# CPU speed of whole `tensorfold ocr` runs: vision seconds, prefill and decode tokens/s, per checkpoint.
# usage: bench/model/cpu_bench.sh BUILD_DIR[,BUILD_DIR...] [CKPT IMAGE NEW_TOKENS]...
# Prints a markdown table (numbers from the --json usage block of each run). Several build directories (e.g.
# the commit before a change and after it) run interleaved, case by case, RUNS times each (default 2); each
# figure is the best of its runs (least vision seconds, most prefill and decode tokens/s, taken separately),
# and the last column is the output's token sha256, which must agree between builds that keep every bit.
set -euo pipefail
IFS=, read -r -a builds <<<"$1"; shift
runs=${RUNS:-2}
echo "| build | checkpoint | image | prompt tokens | vision s | prefill tok/s | decode tok/s | threads | token sha256 |"
echo "|---|---|---|---:|---:|---:|---:|---:|---|"
while [ $# -ge 3 ]; do
  ckpt=$1 img=$2 n=$3; shift 3
  declare -A lines=()
  for run in $(seq "$runs"); do
    for b in "${builds[@]}"; do
      out=$("$b/tensorfold" ocr "$ckpt" "$img" --json --max-tokens "$n" --ignore-eos --temperature 0 2>/dev/null)
      lines[$b]+=$(/usr/bin/python3 - "$out" <<'PY'
import json, sys
j = json.loads(sys.argv[1])
u = j["usage"]
dec = (u["completion_tokens"] - 1) / u["decode_seconds"] if u["decode_seconds"] > 0 else 0
print(f'{u["prompt_tokens"]} {u["vision_seconds"]:.3f} {u["prompt_tokens"] / u["prefill_seconds"]:.1f} {dec:.2f} '
      f'{j.get("token_sha256", "-")[:12]}')
PY
)$'\n'
    done
  done
  for b in "${builds[@]}"; do
    best=$(printf '%s' "${lines[$b]}" | awk 'NF == 5 {
        if (!n++ || $2 < v) v = $2; if ($3 > pf) pf = $3; if ($4 > dc) dc = $4; p = $1; sha = $5 }
        END { printf "%s %.3f %.1f %.2f %s", p, v, pf, dc, sha }')
    read -r p v pf dc sha <<<"$best"
    echo "| $b | $(basename "$ckpt") | $(basename "$img") | $p | $v | $pf | $dc | ${TF_THREADS:-$(nproc)} | $sha |"
  done
  unset lines
done
