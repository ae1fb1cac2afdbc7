#!/usr/bin/env bash
# `tensorfold ocr --backend`: an unknown backend is refused with a message naming the ones built; the cuda
# backend either transcribes like the CPU backend (a GPU is present) or is refused with a one-line reason
# (not built, no GPU, driver too old) and a non-zero exit. Never a crash or an empty success.
# usage: cli_backend.sh SOURCE_DIR TENSORFOLD_BINARY
set -uo pipefail
src=$1 bin=$2
cd "$src"
img=examples/line1.png
fail() { printf 'cli_backend: %s\n' "$*"; exit 1; }

out=$("$bin" ocr models/demo-lighton $img --backend tpu 2>&1) && fail "--backend tpu was accepted: $out"
case $out in
  *"unknown backend 'tpu'"*"this build has: cpu"*) ;;
  *) fail "--backend tpu: unexpected message: $out" ;;
esac

cpu=$("$bin" ocr models/demo-lighton $img --backend cpu --temperature 0) || fail "cpu backend failed"
if gpu=$("$bin" ocr models/demo-lighton $img --backend cuda --temperature 0 2>/tmp/cli_backend.$$); then
  [ "$gpu" = "$cpu" ] || fail "cuda printed '$gpu', cpu '$cpu'"
  echo "cli_backend: cuda transcribes like cpu: $gpu"
else
  err=$(cat /tmp/cli_backend.$$)
  case $err in
    *"this build has no cuda backend"* | *"the cuda backend found no"*) echo "cli_backend: cuda refused: $err" ;;
    *) fail "cuda failed without a reason: $err" ;;
  esac
  [ "$(printf '%s\n' "$err" | wc -l)" -le 2 ] || fail "cuda refusal is not a short message: $err"
fi
rm -f /tmp/cli_backend.$$
