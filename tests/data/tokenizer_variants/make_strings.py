#!/usr/bin/env python3
"""Writes tests/data/tokenizer_variants/strings.jsonl: every 20th string of the oracle's
tests/golden/text/strings.jsonl.gz that has at most 300 characters, plus strings aimed at the variants' added
tokens (lstrip/rstrip/single_word/normalized). Run from the repository root, then make_goldens.mjs."""
import gzip
import json

rows = [json.loads(line) for line in gzip.open("tests/golden/text/strings.jsonl.gz", "rt", encoding="utf-8")]
sel = [r["text"] for r in rows[::20] if len(r["text"]) <= 300]
extra = ["a <mask> b", "a  <mask>b", "x[R]  y", "[R]\n\nz", "the theory of the", "bathe the", "Ångström and Ångström",
         "an apple, banana an", "  an  ", "<|im_start|>user\nhi<|im_end|>", "<|im<|im_end|>", "<mask><mask>  <mask>",
         "the\tthe", "ÅÅ", "", "e.e..e. e.", "1a2b33c 4 55", "Hello, world!! How?  Are you."]
with open("tests/data/tokenizer_variants/strings.jsonl", "w", encoding="utf-8") as f:
    for t in sel + extra:
        f.write(json.dumps({"text": t}, ensure_ascii=False) + "\n")
print(len(sel) + len(extra), "strings")
