#!/usr/bin/env bash
# ptx_diff.sh REV [FILE.cu ...]: for a change to CUDA code made without a GPU. Compiles each file (default:
# every src/backend/cuda/*.cu) to PTX twice, from src/ at git revision REV and from the working tree, with the
# build's device flags (sm_90, sm_90a for *_sm90a.cu, -fmad=false), and says which PTX differs once comments
# and debug lines are dropped. ptxas turns the same PTX into the same machine code, so a refactor whose PTX is unchanged
# computes the same bits and needs no GPU run to show it; a file whose PTX changed does.
#   tools/cuda_check/ptx_diff.sh HEAD~1 src/backend/cuda/attention_tc.cu
# "renamed": the PTX differs only in virtual register numbers, labels and the hash nvcc puts in an anonymous
# namespace's mangled names (it follows the file's text): the same instructions in the same order.
# KEEP=DIR copies the PTX (old/, new/, *.norm with registers renamed) there, to read a difference.
# Exit status: 0 when every PTX is unchanged or only renamed, 1 when one differs, 2 on a usage or compile error.
set -uo pipefail
cd "$(dirname "$0")/../.."
rev=${1:?usage: ptx_diff.sh REV [FILE.cu ...]}
shift
git rev-parse --verify -q "$rev^{commit}" >/dev/null || { echo "ptx_diff: no revision $rev" >&2; exit 2; }
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
[ -x "$NVCC" ] || { echo "ptx_diff: nvcc not found (set NVCC)" >&2; exit 2; }
files=("$@")
if [ ${#files[@]} -eq 0 ]; then mapfile -t files < <(ls src/backend/cuda/*.cu); fi

tmp=$(mktemp -d)
trap '[ -n "${KEEP:-}" ] && cp -r "$tmp" "$KEEP"; rm -rf "$tmp"' EXIT
# Both versions compile at the same path ($tmp/tree): anonymous namespaces' mangled names hash it.
compile_all() {  # which (old | new): PTX of every file into $tmp/which/
  mkdir -p "$tmp/$1"
  for f in "${files[@]}"; do
    [ -f "$tmp/tree/$f" ] || continue
    local out="$tmp/$1/$(basename "$f" .cu).ptx" arch=sm_90
    [[ $f == *_sm90a.cu ]] && arch=sm_90a  # built for sm_90a (src/CMakeLists.txt)
    "$NVCC" -DTF_HAVE_CUDA=1 -I"$tmp/tree/src" -O2 -DNDEBUG -arch=$arch -fmad=false --extended-lambda -std=c++20 \
      -ptx "$tmp/tree/$f" -o "$out" || { echo "ptx_diff: $f does not compile ($1)" >&2; exit 2; }
    grep -v -E '^\s*//|^\s*\.loc|^\s*\.file' "$out" >"$out.clean"
  done
}
mkdir -p "$tmp/tree"
git archive "$rev" src | tar -x -C "$tmp/tree"
compile_all old
rm -rf "$tmp/tree/src"
cp -r src "$tmp/tree/src"
compile_all new

status=0
for f in "${files[@]}"; do
  name=$(basename "$f" .cu)
  if [ ! -f "$tmp/old/$name.ptx.clean" ]; then
    echo "new       $f (no PTX at $rev)"
    status=1
  elif cmp -s "$tmp/old/$name.ptx.clean" "$tmp/new/$name.ptx.clean"; then
    echo "same      $f"
  else
    # Register numbers and labels renamed (an inlined helper allocates its virtual registers in another order):
    # the same instructions on the same dataflow when nothing else differs.
    for w in old new; do sed -E 's/%(r|rd|f|fd|p|rs|h)[0-9]+/%\1/g; s/\$L__BB[0-9_]+/L/g; s/_cu_[0-9a-f]{8}/_cu_X/g' "$tmp/$w/$name.ptx.clean" >"$tmp/$w/$name.norm"; done
    if cmp -s "$tmp/old/$name.norm" "$tmp/new/$name.norm"; then
      echo "renamed   $f (the same instructions in the same order, registers numbered otherwise)"
    else
      echo "DIFFERENT $f ($(diff "$tmp/old/$name.ptx.clean" "$tmp/new/$name.ptx.clean" | grep -c '^[<>]') lines;" \
        "$(diff "$tmp/old/$name.norm" "$tmp/new/$name.norm" | grep -c '^[<>]') with registers renamed)"
      status=1
    fi
  fi
done
exit $status
