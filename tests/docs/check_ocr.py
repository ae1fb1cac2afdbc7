"""Checks on `tensorfold ocr --json` output for the document tests (tests/docs/ocr_docs.sh).

  check_ocr.py cer PAGES.jsonl TRUTH.txt MAX_CER [DOCUMENT]
      The pages' texts (in order; only DOCUMENT's when given) against the ground truth's pages (separated by
      form-feed lines, as tests/docs/make_pdfs.py writes them): prints the CER (tools/train_demo/cer.py's
      definition, all pages together) and fails above MAX_CER.
  check_ocr.py field PAGES.jsonl EXPR
      Prints EXPR evaluated for every page (p is the page's JSON object), one line each.
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "train_demo"))
from cer import cer  # noqa: E402


def load(path, document=None):
    with open(path, encoding="utf-8") as f:
        pages = [json.loads(line) for line in f if line.strip()]
    return [p for p in pages if document is None or p["document"] == document]


def main(argv):
    if len(argv) >= 5 and argv[1] == "cer":
        pages = load(argv[2], argv[5] if len(argv) > 5 else None)
        with open(argv[3], encoding="utf-8") as f:
            truth = [t.strip("\n") for t in f.read().split("\n\f\n")]
        hyps = [p["text"].strip("\n") for p in pages]
        if len(hyps) != len(truth):
            print(f"{len(hyps)} pages read, {len(truth)} in the ground truth")
            return 1
        rate, edits, chars, exact = cer(truth, hyps)
        print(f"CER {100 * rate:.2f} % ({edits} edits / {chars} chars, {exact}/{len(truth)} pages exact; "
              f"bound {100 * float(argv[4]):.2f} %)")
        for t, h in zip(truth, hyps):
            if t != h:
                print(f"  truth {t!r}\n  read  {h!r}")
        return 0 if rate <= float(argv[4]) else 1
    if len(argv) == 4 and argv[1] == "field":
        for p in load(argv[2]):
            print(eval(argv[3], {}, {"p": p}))  # noqa: S307 (test helper, expressions from the test script)
        return 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
