#!/usr/bin/env bash
# `tensorfold ocr --backend`: an unknown backend is refused with a message naming the ones built; the cuda
# backend either transcribes like the CPU backend (a GPU is present) or is refused with a one-line reason
# (not built, no GPU, driver too old) and a non-zero exit. Never a crash or an empty success.
# The default, auto, picks cuda when the build has it and a GPU can be initialised, else cpu, and says which
# and why in one log line; with no visible GPU (CUDA_VISIBLE_DEVICES="", or a machine without one) it is cpu.
# usage: cli_backend.sh SOURCE_DIR TENSORFOLD_BINARY
set -uo pipefail
src=$1 bin=$2
cd "$src"
img=examples/line1.png
err_file=/tmp/cli_backend.$$
trap 'rm -f "$err_file"' EXIT
fail() { printf 'cli_backend: %s\n' "$*"; exit 1; }

out=$("$bin" ocr models/demo-lighton $img --backend tpu 2>&1) && fail "--backend tpu was accepted: $out"
case $out in
  *"unknown backend 'tpu'"*"this build has: cpu"*) ;;
  *) fail "--backend tpu: unexpected message: $out" ;;
esac

cpu=$("$bin" ocr models/demo-lighton $img --backend cpu --temperature 0 2>"$err_file") || fail "cpu backend failed"
grep -q "backend: " "$err_file" && fail "--backend cpu logged an auto choice: $(cat "$err_file")"
gpu_usable=0
if gpu=$("$bin" ocr models/demo-lighton $img --backend cuda --temperature 0 2>"$err_file"); then
  [ "$gpu" = "$cpu" ] || fail "cuda printed '$gpu', cpu '$cpu'"
  echo "cli_backend: cuda transcribes like cpu: $gpu"
  gpu_usable=1
else
  err=$(cat "$err_file")
  case $err in
    *"this build has no cuda backend"* | *"the cuda backend found no"*) echo "cli_backend: cuda refused: $err" ;;
    *) fail "cuda failed without a reason: $err" ;;
  esac
  [ "$(printf '%s\n' "$err" | wc -l)" -le 2 ] || fail "cuda refusal is not a short message: $err"
fi

# auto (the default): exactly one line saying which backend and why; the transcription is unchanged.
auto_check() {  # expected backend, description, env...
  local want=$1 what=$2
  shift 2
  local got lines
  got=$(env "$@" "$bin" ocr models/demo-lighton $img --temperature 0 2>"$err_file") || fail "auto ($what) failed: $(cat "$err_file")"
  [ "$got" = "$cpu" ] || fail "auto ($what) printed '$got', cpu '$cpu'"
  lines=$(grep -c "backend: " "$err_file")
  [ "$lines" = 1 ] || fail "auto ($what) logged $lines backend lines: $(cat "$err_file")"
  grep -qE "backend: $want \(auto: .+\)" "$err_file" || fail "auto ($what) did not pick $want with a reason: $(cat "$err_file")"
  echo "cli_backend: auto ($what): $(grep "backend: " "$err_file" | sed 's/^[0-9:]* info //')"
}
if [ $gpu_usable = 1 ]; then
  auto_check cuda "a usable GPU"
else
  auto_check cpu "no usable GPU or no cuda backend"
fi
auto_check cpu "CUDA_VISIBLE_DEVICES empty" CUDA_VISIBLE_DEVICES=
"$bin" ocr models/demo-lighton $img --backend auto --temperature 0 >/dev/null 2>"$err_file" || fail "--backend auto refused"
