"""Render the committed evaluation images (PIL + numpy, the fonts of tools/train_demo/README.md).

  python3 tools/train_demo/make_heldout.py FONT_DIR REPO_ROOT        # the first recipe's sets (below)
  python3 tools/train_demo/make_heldout.py FONT_DIR REPO_ROOT any    # the any-geometry sets (issue 21)

`any` writes examples/heldout_lines_any/ (120 lines of data_any.heldout_any_lines: 150-1,600 px wide, 24-120 px high,
grayscale and RGB in turn), examples/heldout_pages/ (24 pages of data_any.heldout_pages: 3-30 lines, up to 1,600 px,
the five page kinds in turn, grayscale and RGB in turn), each with ground_truth.jsonl (file, text, size, mode,
kind), and the README's page examples/page.png + page.txt. Seeds SEED + 3000 and SEED + 4000; grayscale images
are saved as 8-bit grayscale PNG, RGB ones as RGB PNG (optimised).

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
import data_any  # noqa: E402

SEED = 20261129
PAGES = {
    "receipt": ("receipt", [["CORNER CAFE"], ["Coffee", "3.50"], ["Croissant", "2.20"], ["TOTAL", "$5.70"]]),
    "table": ("table", [["Item", "Qty", "Price"], ["Paper", "12", "4.80"], ["Ink", "2", "19.90"]]),
    "paragraph": ("paragraph", [["The quick brown fox"], ["jumps over the lazy"], ["dog on Monday."]]),
}


README_PAGE = [["INVOICE INV-2026-0412"], ["Date: 02/12/2026"], ["Customer: Laura Martin"],
               ["Paper A4, 5 x 4.80", "24.00"], ["Ink cartridge", "19.90"], ["Total amount: 43.90 EUR"]]


def write_set(folder, items, name):
    """items: [(text, uint8 image, extra fields)] -> folder/NAME_NNN.png + ground_truth.jsonl"""
    from PIL import Image
    os.makedirs(folder, exist_ok=True)
    rows = []
    for i, (text, arr, extra) in enumerate(items):
        fn = f"{name}_{i:03d}.png"
        Image.fromarray(arr).save(os.path.join(folder, fn), optimize=True)
        rows.append({"file": fn, "text": text, "width": int(arr.shape[1]), "height": int(arr.shape[0]),
                     "mode": "rgb" if arr.ndim == 3 else "gray", **extra})
    with open(os.path.join(folder, "ground_truth.jsonl"), "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    return rows


def main_any(font_dir, root):
    from PIL import Image
    lines = data_any.heldout_any_lines(120, SEED + 3000, font_dir)
    write_set(os.path.join(root, "examples", "heldout_lines_any"), [(t, a, {}) for t, a in lines], "line")
    pages = data_any.heldout_pages(24, SEED + 4000, font_dir)
    write_set(os.path.join(root, "examples", "heldout_pages"), [(t, a, {"kind": k}) for k, t, a in pages], "page")
    sans = [f for f in data.font_files(font_dir) if os.path.basename(f) == "DejaVuSans.ttf"]
    rng = random.Random(5)
    arr = None
    while arr is None:
        arr = data_any.render_page(README_PAGE, "receipt", rng, sans, clean=True)
    Image.fromarray(arr).save(os.path.join(root, "examples", "page.png"), optimize=True)
    with open(os.path.join(root, "examples", "page.txt"), "w", encoding="utf-8") as f:
        f.write(data_any.page_text(README_PAGE) + "\n")
    print(f"wrote {len(lines)} lines, {len(pages)} pages and examples/page.png ({arr.shape[1]} x {arr.shape[0]})")
    return 0


def main(argv):
    if len(argv) == 4 and argv[3] == "any":
        return main_any(argv[1], argv[2])
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
