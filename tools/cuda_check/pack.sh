#!/usr/bin/env bash
# Packs the CUDA build's binaries for the GPU machine, whose image has no Debian -dev packages:
# stripped test_backend, test_models, tensorfold and stage_diff, plus the shared libraries they need
# beyond glibc and libstdc++, into .gpu/bin.tar.xz (git-ignored; carried by the device call).
#   tools/cuda_check/pack.sh [BUILD_DIR]     (default build-cuda, configured with TF_CUDA=ON)
# PACK_BINS="tensorfold" packs only those (relative to BUILD_DIR; bench/serve/gpu_serve_bench.py needs only
# tensorfold, so only that target has to be built).
# PACK_RUNTIME=1 adds tests/test_runtime (prompt cache, drafts, engine on TF_TEST_BACKEND=cuda). The pack and the
# working tree travel together under the device call's 64 MiB: tools/cuda_check/aside.sh leaves a demo
# checkpoint behind.
set -euo pipefail
cd "$(dirname "$0")/../.."
B=${1:-build-cuda}
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/tests" "$stage/tools/stage_diff" "$stage/lib" .gpu
bins=${PACK_BINS:-"tests/test_backend tests/test_models tensorfold tools/stage_diff/stage_diff"}
[ "${PACK_RUNTIME:-0}" = 1 ] && bins="$bins tests/test_runtime"
for f in $bins; do
  mkdir -p "$stage/$(dirname "$f")"
  strip --strip-all -o "$stage/$f" "$B/$f"
done
# Libraries outside the C/C++ runtime, resolved here (the GPU image may lack or differ in them).
for f in "$stage/tensorfold" "$stage/tests/test_models"; do
  if [ -e "$f" ]; then ldd "$f" | awk '/=> \//{print $3}'; fi
done | sort -u | { grep -v -E '/(libc|libm|libstdc\+\+|libgcc_s|libpthread|libdl|librt|ld-linux[^/]*)\.so' || true; } |
  while read -r lib; do cp -L "$lib" "$stage/lib/"; done
# One xz stream with a dictionary larger than any binary: the binaries share most of their bytes (the CUDA
# kernels each links), so all after the first cost little (7 binaries: 30 MB with xz's default, 13 MB so).
tar cf - -C "$stage" . | xz -T1 --lzma2=preset=6,dict=192MiB >.gpu/bin.tar.xz
echo "$PWD" > .gpu/source_dir
git rev-parse --short HEAD > .gpu/commit 2>/dev/null || true
ls -la .gpu/bin.tar.xz
tar tJf .gpu/bin.tar.xz
