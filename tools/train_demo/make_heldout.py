"""Render the committed evaluation images (PIL + numpy, the fonts of tools/train_demo/README.md).

  python3 tools/train_demo/make_heldout.py FONT_DIR REPO_ROOT

Writes examples/heldout_blocks/ (40 clean 560 x 224 blocks, the four kinds in turn, ground_truth.jsonl) and the
README's example pages examples/{receipt,table,paragraph}.png with their text beside them (.txt). The line set examples/heldout/ (120 clean lines,
data.heldout(120, SEED + 1000, fonts)) was written the same way by an earlier version of train.py and is kept.
"""
import json
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import data  # noqa: E402

SEED = 20261129
PAGES = {
    "receipt": ("receipt", [["CORNER CAFE"], ["Coffee", "3.50"], ["Croissant", "2.20"], ["TOTAL", "$5.70"]]),
    "table": ("table", [["Item", "Qty", "Price"], ["Paper", "12", "4.80"], ["Ink", "2", "19.90"]]),
    "paragraph": ("paragraph", [["The quick brown fox"], ["jumps over the lazy"], ["dog on Monday."]]),
}


def main(argv):
    if len(argv) != 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    from PIL import Image
    fonts, root = data.font_files(argv[1]), argv[2]
    out = os.path.join(root, "examples", "heldout_blocks")
    os.makedirs(out, exist_ok=True)
    rows = []
    for i, (text, arr) in enumerate(data.heldout_blocks(40, SEED + 2000, argv[1])):
        name = f"block_{i:03d}.png"
        Image.fromarray(arr).convert("RGB").save(os.path.join(out, name))
        rows.append({"file": name, "kind": data.BLOCK_KINDS[i % len(data.BLOCK_KINDS)], "text": text})
    with open(os.path.join(out, "ground_truth.jsonl"), "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    sans = [f for f in fonts if os.path.basename(f) == "DejaVuSans.ttf"] or fonts[:1]
    for j, (name, (kind, cells)) in enumerate(PAGES.items()):
        arr = data.render_block(cells, kind, random.Random(j), sans, clean=True)
        Image.fromarray(arr).convert("RGB").save(os.path.join(root, "examples", f"{name}.png"))
        with open(os.path.join(root, "examples", f"{name}.txt"), "w", encoding="utf-8") as f:
            f.write(data.block_text(cells) + "\n")
    print(f"wrote {len(rows)} blocks to {out} and {len(PAGES)} example pages")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
