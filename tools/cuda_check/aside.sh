#!/usr/bin/env bash
# Moves the demo checkpoints' weights (models/demo-*/model.safetensors, 31 MB) out of the working tree for a
# device call and back: the call carries at most 64 MiB, tracked files and the binaries' pack together.
#   tools/cuda_check/aside.sh out [MODEL ...]   before the call (to ${ASIDE_DIR:-/tmp/tf-aside}; default both,
#                                              e.g. `out demo-qwen35` keeps demo-lighton's 14 MB in the call)
#   tools/cuda_check/aside.sh in                after it (also safe to run when nothing is aside)
# device_run.sh notices an absent checkpoint and filters its cases out.
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=${ASIDE_DIR:-/tmp/tf-aside}
all=(demo-lighton demo-qwen35)
case ${1:-} in
  out)
    mkdir -p "$dir"
    shift
    [ $# -gt 0 ] || set -- "${all[@]}"
    for m in "$@"; do
      if [ -e "models/$m/model.safetensors" ]; then mv "models/$m/model.safetensors" "$dir/$m.safetensors"; fi
      # So that a `git add -A` or `commit -a` meanwhile does not record the weights' absence.
      git update-index --skip-worktree "models/$m/model.safetensors"
    done
    ;;
  in)
    for m in "${all[@]}"; do
      if [ -e "$dir/$m.safetensors" ]; then mv "$dir/$m.safetensors" "models/$m/model.safetensors"; fi
      [ -e "models/$m/model.safetensors" ] || { echo "models/$m/model.safetensors is missing" >&2; exit 1; }
      git update-index --no-skip-worktree "models/$m/model.safetensors"
    done
    ;;
  *)
    echo "usage: $0 out|in" >&2
    exit 2
    ;;
esac
{ git ls-files -z | xargs -0 du -cb 2>/dev/null || true; } | tail -1 | awk '{printf "tracked files present: %.1f MiB\n", $1 / 1048576}'
