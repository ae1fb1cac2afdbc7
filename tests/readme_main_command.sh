#!/usr/bin/env bash
# The README's main command, as written in its first code block (the `tensorfold ocr ...` after the last `&&`),
# run with the built binary: it must exit 0 and print the text the example page was rendered from
# (IMAGE.txt beside IMAGE.png, written by tools/train_demo/make_heldout.py with the image).
# usage: readme_main_command.sh SOURCE_DIR TENSORFOLD_BINARY
set -euo pipefail
src=$1 bin=$2
cd "$src"
line=$(awk '/^```sh/{getline; print; exit}' README.md)
cmd=${line##*&& }
case $cmd in
  "build/tensorfold ocr "*) ;;
  *) echo "README's first command does not end in 'build/tensorfold ocr ...': $cmd"; exit 1 ;;
esac
image=${cmd##* }
truth=${image%.png}.txt
[ -f "$truth" ] || { echo "no ground truth $truth for $image"; exit 1; }
want=$(cat "$truth")
# shellcheck disable=SC2086
got=$("$bin" ${cmd#build/tensorfold })
if [ "$got" != "$want" ]; then
  printf 'README main command: %s\nprinted:\n%s\nexpected (the page text):\n%s\n' "$cmd" "$got" "$want"
  exit 1
fi
echo "README main command prints the page text: $cmd"
