"""tensorfold's greedy ids against the CPU oracle's over a held-out set, with the oracle's margin where they part.

  python3 tools/train_demo/parity.py ORACLE_IDS.jsonl TENSORFOLD.jsonl

ORACLE_IDS.jsonl comes from oracle_ids.py (ids through EOS and each step's top-1 / top-2 logits), TENSORFOLD.jsonl
from transcribe.py (token_ids of `tensorfold ocr --json`). For every image whose ids differ, prints the first
differing step, both ids and the oracle's top-2 margin there, in bf16 ulps of its top logit (the rule of
tests/unit/models/oracle_noise.h: a first difference is a tie or a near tie when the margin is <= 2 ulps).
Exit status 1 when some first difference has a larger margin.
"""
import json
import math
import sys


def bf16_ulp(v):
    return 2.0 ** (math.floor(math.log2(abs(v))) - 7) if v else 2.0 ** -133


def load(path):
    with open(path, encoding="utf-8") as f:
        return {d["file"]: d for d in map(json.loads, filter(str.strip, f))}


def main(argv):
    if len(argv) != 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    oracle, ours = load(argv[1]), load(argv[2])
    same, bad, diffs = 0, 0, []
    for name in sorted(oracle):
        a = oracle[name]["ids"]
        b = ours.get(name, {}).get("token_ids", [])
        n = min(len(a), len(b))
        i = next((k for k in range(n) if a[k] != b[k]), n)
        if i == len(a) and (len(b) == len(a) or b[len(a):] == []):
            same += 1
            continue
        if i >= len(a):  # the oracle stopped (EOS) and tensorfold went on: cannot happen with the same ids
            diffs.append(f"{name}: tensorfold longer than the oracle after {len(a)} ids")
            bad += 1
            continue
        t1, t2 = oracle[name]["top1_logit"][i], oracle[name]["top2_logit"][i]
        ulps = (t1 - t2) / bf16_ulp(t1)
        ok = ulps <= 2
        bad += not ok
        diffs.append(f"{name}: step {i}: oracle id {a[i]} tensorfold id {b[i] if i < len(b) else None}; "
                     f"oracle margin {t1 - t2:.6g} = {ulps:.2f} ulp of {t1:.6g}{'' if ok else '  <-- NOT A TIE'}")
    print(f"same ids on {same}/{len(oracle)} images; {len(diffs)} differ, {bad} not at a tie or near tie")
    for d in diffs:
        print("  " + d)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
