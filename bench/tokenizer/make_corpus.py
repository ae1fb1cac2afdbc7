#!/usr/bin/env python3
"""Writes a deterministic mixed corpus (>= 10 MB) for the tokenizer benchmark: documents separated by U+001E.

Mix: Python standard-library source (code), Debian changelogs/NEWS from /usr/share/doc (English prose), and
multilingual text (the 315 HF golden strings plus seeded random sentences in CJK, Arabic, Devanagari, Thai,
Hangul, Cyrillic, Greek, Latin with diacritics, emoji with ZWJ, digits and whitespace runs).
Usage: make_corpus.py OUT [MB]. The sources are whatever this machine's Debian 12 install has.
"""
import glob
import gzip
import json
import os
import random
import sys

SEP = "\x1e"


def take(files, reader, budget):
    docs, used = [], 0
    for f in files:
        if used >= budget:
            break
        try:
            t = reader(f)
        except (OSError, UnicodeDecodeError, EOFError):
            continue
        t = t.replace(SEP, " ")
        for k in range(0, len(t), 8192):  # documents of at most 8 KiB characters
            docs.append(t[k:k + 8192])
        used += len(t.encode("utf-8"))
    return docs, used


def multilingual(rng, budget, goldens):
    pools = [
        (0x4E00, 0x9FFF, ""), (0x3040, 0x309F, ""), (0xAC00, 0xD7A3, " "), (0x0600, 0x064A, " "),
        (0x0900, 0x097F, " "), (0x0E01, 0x0E3A, ""), (0x0410, 0x044F, " "), (0x0391, 0x03C9, " "),
    ]
    latin = "abcdefghijklmnopqrstuvwxyzéèàüöäçñßøå"
    emoji = ["\U0001F600", "\U0001F44D\U0001F3FD", "\U0001F468\u200D\U0001F469\u200D\U0001F467", "\u2764\uFE0F",
             "\U0001F1EB\U0001F1F7", "\U0001F680"]
    docs, used = [], 0
    while used < budget:
        parts = [rng.choice(goldens)]
        for _ in range(rng.randint(20, 80)):
            kind = rng.random()
            if kind < 0.55:
                lo, hi, sep = rng.choice(pools)
                vocab_seed = rng.randint(0, 400)  # a small per-script vocabulary: words repeat, as in text
                wr = random.Random(vocab_seed * 7919 + lo)
                word = "".join(chr(wr.randint(lo, hi)) for _ in range(wr.randint(1, 6)))
                parts.append(word + sep)
            elif kind < 0.8:
                wr = random.Random(rng.randint(0, 2000))
                parts.append("".join(wr.choice(latin) for _ in range(wr.randint(1, 10))) + " ")
            elif kind < 0.88:
                parts.append(rng.choice(emoji))
            elif kind < 0.95:
                parts.append(str(rng.randint(0, 10**rng.randint(1, 12))) + rng.choice([" ", ", ", ".\n"]))
            else:
                parts.append(rng.choice(["\n\n", "   ", "\t", " \u00A0", "\r\n", "\u3000"]))
        d = "".join(parts)
        docs.append(d)
        used += len(d.encode("utf-8"))
    return docs, used


def main():
    out = sys.argv[1]
    mb = float(sys.argv[2]) if len(sys.argv) > 2 else 12.0
    total = int(mb * 1024 * 1024)
    here = os.path.dirname(os.path.abspath(__file__))
    golden = os.path.join(here, "..", "..", "tests", "data", "qwen3", "golden_encodings.jsonl")
    with open(golden, encoding="utf-8") as f:
        goldens = [json.loads(line)["text"] for line in f if line.strip()]
    rng = random.Random(1234)
    code_files = sorted(glob.glob("/usr/lib/python3.11/**/*.py", recursive=True))
    prose_files = sorted(glob.glob("/usr/share/doc/*/changelog*.gz") + glob.glob("/usr/share/doc/*/NEWS*.gz"))
    code, c_used = take(code_files, lambda p: open(p, encoding="utf-8").read(), total * 0.4)
    prose, p_used = take(prose_files, lambda p: gzip.open(p, "rt", encoding="utf-8").read(), total * 0.3)
    multi, m_used = multilingual(rng, total - c_used - p_used, goldens)
    docs = code + prose + multi
    rng.shuffle(docs)
    with open(out, "w", encoding="utf-8", newline="") as f:
        f.write(SEP.join(docs))
    print(f"corpus: {out}: {len(docs)} documents, code {c_used/1e6:.1f} MB, prose {p_used/1e6:.1f} MB, "
          f"multilingual {m_used/1e6:.1f} MB")


if __name__ == "__main__":
    main()
