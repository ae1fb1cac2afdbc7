"""Run `tensorfold ocr --backend cuda` on every image of a held-out set and compare its greedy token ids
with the committed CPU transcription (examples/<set>/<model>.tensorfold_cpu.jsonl).

  python3 tools/cuda_check/compare_ocr.py build-cuda/tensorfold models/demo-lighton examples/heldout [JOBS]

Prints one line per differing image and a summary line "<model> <set>: N/M equal"; exits 1 on any
difference. The CPU backend is the reference here: the CUDA kernels reproduce its arithmetic, so the ids
must be equal for every image (not merely close).
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
    equal = 0
    for r, (ids, err) in zip(ref, got):
        if ids == r["token_ids"]:
            equal += 1
            continue
        if ids is None:
            print(f"{r['file']}: failed: {err}")
            continue
        k = next((i for i, (a, b) in enumerate(zip(ids, r["token_ids"])) if a != b), min(len(ids), len(r["token_ids"])))
        print(f"{r['file']}: first difference at output {k}: cuda {ids[k:k + 3]} cpu {r['token_ids'][k:k + 3]}")
    print(f"{model} {os.path.basename(os.path.normpath(folder))}: {equal}/{len(ref)} equal "
          f"({time.time() - t0:.1f} s, {jobs} processes)")
    return 0 if equal == len(ref) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
