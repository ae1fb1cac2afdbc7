#!/usr/bin/env python3
"""The sample op against the peer, on the same GPU in one run: tensorfold's Backend::sample / argmax
(src/backend/cuda/sample.cu, argmax.cu; timed by CudaContract.SamplePrintsItsSpeed) and what Transformers
runs for the same step (generation's LogitsProcessorList: TemperatureLogitsWarper, TopKLogitsWarper,
TopPLogitsWarper, then softmax and torch.multinomial; greedy: argmax), over LightOnOCR's vocabulary.

  python3 bench/sample/sample_peer.py TEST_BACKEND_BINARY [--out FILE.md]

Prints a markdown table (µs per call, 50 calls after a warm-up, CUDA-synchronized). Transformers' rows use
normal logits (its cost does not depend on their values: it sorts); tensorfold's the contract test's rows
(normal, coarse, flat, -inf; its cost does, and flat rows are its worst case).
"""
import argparse
import re
import subprocess
import time

import torch
import transformers
from transformers.generation.logits_process import (LogitsProcessorList, TemperatureLogitsWarper,
                                                    TopKLogitsWarper, TopPLogitsWarper)

VOCAB = 151936


def time_us(fn, reps=50):
    fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / reps * 1e6


def peer(rows, top_p):
    logits = torch.randn(rows, VOCAB, device="cuda", dtype=torch.float32) * 3
    ids = torch.zeros(rows, 1, dtype=torch.long, device="cuda")
    if top_p is None:
        return time_us(lambda: torch.argmax(logits, dim=-1))
    procs = [TemperatureLogitsWarper(0.2), TopKLogitsWarper(50)]
    if top_p < 1.0:
        procs.append(TopPLogitsWarper(top_p))
    warpers = LogitsProcessorList(procs)

    def step():
        scores = warpers(ids, logits)
        probs = torch.softmax(scores, dim=-1)
        return torch.multinomial(probs, num_samples=1)

    return time_us(step)


def ours(binary):
    out = subprocess.run([binary, "--gtest_filter=CudaContract.SamplePrintsItsSpeed"], capture_output=True,
                         text=True, check=False).stdout
    got = {}
    for m in re.finditer(r"sample speed: argmax, (\d+) rows x \d+: ([\d.]+) us", out):
        got[(int(m.group(1)), None)] = float(m.group(2))
    for m in re.finditer(r"sample speed: (\d+) rows x \d+, T 0.2, top_k 50, top_p ([\d.]+): ([\d.]+) us", out):
        got[(int(m.group(1)), float(m.group(2)))] = float(m.group(3))
    if not got:
        raise SystemExit("no speed lines from " + binary + ":\n" + out[-2000:])
    return got


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("--out")
    a = ap.parse_args()
    mine = ours(a.binary)
    lines = [f"GPU: {torch.cuda.get_device_name()}; torch {torch.__version__}; transformers {transformers.__version__}; "
             f"vocab {VOCAB}, µs per call", "",
             "| rows | step | tensorfold µs | Transformers µs | speed-up |", "|---:|---|---:|---:|---:|"]
    for rows in (1, 64):
        for top_p, name in ((None, "greedy (argmax)"), (1.0, "T 0.2, top_k 50"), (0.9, "T 0.2, top_k 50, top_p 0.9")):
            t = mine.get((rows, top_p))
            h = peer(rows, top_p)
            tf = f"{t:.1f}" if t is not None else "–"
            up = f"{h / t:.2f}x" if t else "–"
            lines.append(f"| {rows} | {name} | {tf} | {h:.1f} | {up} |")
    text = "\n".join(lines)
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
