"""Where one request's GPU time goes: runs `tensorfold ocr --backend cuda` on the full-size random checkpoints
(built by the oracle, as gpu_bench.py does) with TF_CUDA_OP_PROFILE set, and writes each run's per-op table
(src/backend/cuda/op_profile.h: GPU time per op and shape, largest first) under OUT with the run's TTFT split.

  python3 bench/model/op_profile.py TENSORFOLD OUT [--only lighton|qwen|4b] [--new N] [--4b]

Per checkpoint: the page (vision + prefill + decode steps as graph replays), the same with
CUDA_MODULE_LOADING=EAGER (kernels loaded at start instead of at their first launch, as a warm server has
them), and the paragraph with --enforce-eager (the decode step op by op: host gaps count to the op that waited).
--4b adds the Qwen3.5-4B shapes (gpu_bench.py's ~9 GB checkpoint); --only 4b runs only them.
"""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tools", "reference"))

PAGES = {"lighton": "tests/golden/images/page_1540x1190.png", "qwen": "tests/golden/images/page_1583x2048.png"}


def run(exe, ckpt, img, n, report, env_extra=None, extra=()):
    env = dict(os.environ, TF_CUDA_OP_PROFILE=report, **(env_extra or {}))
    cmd = [exe, "ocr", ckpt, img, "--backend", "cuda", "--json", "--max-tokens", str(n), "--ignore-eos", "--no-drafts",
           "--temperature", "0", *extra]
    with open(report, "a") as f:
        f.write(f"## {' '.join(cmd[1:])}{' ' + str(env_extra) if env_extra else ''}\n\n")
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {r.returncode}: {r.stderr[-400:]}")
    u = json.loads(r.stdout)["usage"]
    dec = (u["completion_tokens"] - 1) / u["decode_seconds"] if u["decode_seconds"] > 0 else 0.0
    line = (f"prompt {u['prompt_tokens']} tokens: vision {1000 * u['vision_seconds']:.1f} ms + prefill "
            f"{1000 * u['prefill_seconds']:.1f} ms; decode {dec:.1f} tok/s")
    with open(report, "a") as f:
        f.write(line + "\n\n")
    return line


def main(argv):
    args = [a for a in argv[1:] if not a.startswith("--")]
    if len(args) < 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    exe, out = os.path.abspath(args[0]), args[1]
    only = argv[argv.index("--only") + 1] if "--only" in argv else None
    n = int(argv[argv.index("--new") + 1]) if "--new" in argv else 64
    os.makedirs(out, exist_ok=True)
    from gpu_bench import build_full
    known = ("lighton-1b", "qwen3_5-0.8b") + (("qwen3_5-4b",) if "--4b" in argv or only == "4b" else ())
    shapes = tuple(s for s in known if not only or only in s)
    for ckpt in build_full("/tmp/tf-bench", shapes):
        fam = next(k for k in PAGES if k in os.path.basename(ckpt))
        report = os.path.join(out, f"profile_{os.path.basename(ckpt)}.md")
        page = os.path.join(ROOT, PAGES[fam])
        para = os.path.join(ROOT, "examples", "paragraph.png")
        for label, img, env, extra in (("page", page, None, ()),
                                       ("page, modules loaded at start", page, {"CUDA_MODULE_LOADING": "EAGER"}, ()),
                                       ("paragraph, eager decode", para, None, ("--enforce-eager",))):
            print(f"{os.path.basename(ckpt)} {label}: {run(exe, ckpt, img, n, report, env, extra)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
