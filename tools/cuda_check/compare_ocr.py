"""Run `tensorfold ocr --backend cuda` on every image of a held-out set and compare its greedy token ids
with the committed CPU transcription (examples/<set>/<model>.tensorfold_cpu.jsonl).

  python3 tools/cuda_check/compare_ocr.py build-cuda/tensorfold models/demo-lighton examples/heldout [JOBS]

Prints one line per differing image and a summary line "<model> <set>: N/M equal". The CUDA backend
computes bf16 linears and attention on tensor cores (its own accumulation order), so it may part from the
CPU where the model's top two logits are nearly tied: each first difference is reported with the
oracle's top-2 margin at that step (examples/<set>/<model>.oracle_cpu_ids.jsonl, Transformers on the CPU),
and the run fails when a margin is >= 0.5 logit (the greedy tie rule) or an image fails.
"""
import concurrent.futures
import json
import os
import subprocess
import sys
import time


def run_one(exe, ckpt, img):
    cmd = [exe, "ocr", ckpt, img, "--temperature", "0", "--max-tokens", "160", "--json", "--backend", "cuda"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        return None, r.stderr.strip()[-300:]
    return json.loads(r.stdout)["token_ids"], ""


def main(argv):
    if len(argv) not in (4, 5):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    exe, ckpt, folder = argv[1:4]
    jobs = int(argv[4]) if len(argv) == 5 else 8
    model = os.path.basename(os.path.normpath(ckpt))
    with open(os.path.join(folder, model + ".tensorfold_cpu.jsonl"), encoding="utf-8") as f:
        ref = [json.loads(line) for line in f if line.strip()]
    t0 = time.time()
    with concurrent.futures.ThreadPoolExecutor(jobs) as ex:
        futs = [ex.submit(run_one, exe, ckpt, os.path.join(folder, r["file"])) for r in ref]
        got = [fu.result() for fu in futs]
    oracle = {}
    opath = os.path.join(folder, model + ".oracle_cpu_ids.jsonl")
    if os.path.exists(opath):
        with open(opath, encoding="utf-8") as f:
            oracle = {o["file"]: o for o in (json.loads(line) for line in f if line.strip())}
    equal, bad = 0, 0
    for r, (ids, err) in zip(ref, got):
        if ids == r["token_ids"]:
            equal += 1
            continue
        if ids is None:
            print(f"{r['file']}: failed: {err}")
            bad += 1
            continue
        k = next((i for i, (a, b) in enumerate(zip(ids, r["token_ids"])) if a != b), min(len(ids), len(r["token_ids"])))
        o = oracle.get(r["file"])
        margin = None
        if o and k < len(o["top1_logit"]) and o["ids"][:k] == ids[:k]:
            margin = o["top1_logit"][k] - o["top2_logit"][k]
        elif o:
            # The CPU left the oracle's path earlier (at a tie of its own): judge CUDA against the oracle
            # itself, at CUDA's first difference from the oracle's ids, where the oracle's margin is known.
            j = next((i for i, (a, b) in enumerate(zip(ids, o["ids"])) if a != b), None)
            if j is not None and j < len(o["top1_logit"]):
                k = j
                margin = o["top1_logit"][j] - o["top2_logit"][j]
        if margin is None or margin >= 0.5:
            bad += 1
        print(f"{r['file']}: first difference at output {k}: cuda {ids[k:k + 3]} cpu {r['token_ids'][k:k + 3]}; "
              f"oracle margin there {'unknown' if margin is None else f'{margin:.4f}'}")
    print(f"{model} {os.path.basename(os.path.normpath(folder))}: {equal}/{len(ref)} equal, {bad} outside the tie rule "
          f"({time.time() - t0:.1f} s, {jobs} processes)")
    return 0 if bad == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
