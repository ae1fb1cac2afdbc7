"""Character error rate: total Levenshtein edits / total reference characters (pure Python, no dependencies).

Usage: python3 cer.py GROUND_TRUTH.jsonl PREDICTIONS.jsonl   (each line {"file": ..., "text": ...})
Prints the CER over the files present in the ground truth; a file missing from the predictions counts as "",
then the CER of the even-numbered files (random strings in examples/heldout) and of the odd ones (words, numbers),
or, where the ground truth names a "kind" (examples/heldout_blocks, heldout_pages) or a "mode" (gray / rgb:
examples/heldout_lines_any, heldout_pages), the CER of each kind and each mode.
"""
import json
import sys


def edit_distance(a, b):
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i] + [0] * len(b)
        for j, cb in enumerate(b, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb))
        prev = cur
    return prev[-1]


def cer(refs, hyps):
    """refs, hyps: equal-length lists of strings. Returns (cer, edits, chars, exact_lines)."""
    edits = sum(edit_distance(r, h) for r, h in zip(refs, hyps))
    chars = sum(len(r) for r in refs)
    exact = sum(r == h for r, h in zip(refs, hyps))
    return edits / max(chars, 1), edits, chars, exact


def load_jsonl(path, key="text"):
    with open(path, encoding="utf-8") as f:
        return {d["file"]: d.get(key) for d in map(json.loads, filter(str.strip, f))}


def main(argv):
    if len(argv) != 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    gt, pred = load_jsonl(argv[1]), load_jsonl(argv[2])
    files = sorted(gt)
    c, e, n, x = cer([gt[f] for f in files], [pred.get(f, "").strip() for f in files])
    print(f"CER {100 * c:.2f}% ({e} edits / {n} chars), exact {x}/{len(files)}")
    kinds, modes = load_jsonl(argv[1], "kind"), load_jsonl(argv[1], "mode")
    parts = [("even (random strings)", files[0::2]), ("odd (words/numbers)", files[1::2])]
    if any(kinds.values()) or any(modes.values()):  # the any-geometry sets: per kind, then per mode
        parts = [(k, [f for f in files if kinds[f] == k]) for k in sorted(set(kinds.values()) - {None})]
        parts += [(m, [f for f in files if modes[f] == m]) for m in sorted(set(modes.values()) - {None})]
    for label, part in parts:
        c, e, n, x = cer([gt[f] for f in part], [pred.get(f, "").strip() for f in part])
        print(f"  {label}: CER {100 * c:.2f}% ({e}/{n}), exact {x}/{len(part)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
