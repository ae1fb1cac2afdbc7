"""A/B whole runs of tensorfold's CUDA backend (device machine): `tensorfold ocr --json` on the full-size random
checkpoints (built as gpu_bench.py builds them), once per environment setting, interleaved, twice each, on the
paragraph and on the family's page; prints TTFT (vision + prefill), decode tok/s and the output's token sha256
per run, so a change that must keep every bit (a kernel's launch shape, a fused op) shows its speed and its
unchanged ids in one call.

  python3 bench/model/ab_runs.py TENSORFOLD ENVS SHAPES [NEW]

ENVS: JSON {"label": {"VAR": "value", ...}, ...} (e.g. '{"old": {"TF_CUDA_LINEAR_SMALL_GRID": "1000000"}, "new": {}}');
a label's value may also be ["OTHER_TENSORFOLD", {env}]: that binary instead of TENSORFOLD (two builds, e.g. the
commit before a change, in the same call);
SHAPES: comma-separated gpu_bench.py FULL_SHAPES keys (lighton-1b, qwen3_5-0.8b, qwen3_5-4b); NEW: new tokens (128).
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


def run(exe, ckpt, img, new, env):
    r = subprocess.run([exe, "ocr", ckpt, img, "--backend", "cuda", "--json", "--max-tokens", new, "--ignore-eos",
                        "--no-drafts", "--temperature", "0"], capture_output=True, text=True,
                       env=dict(os.environ, **env), timeout=300)
    if r.returncode:
        return f"failed: {r.stderr[-300:]}"
    j = json.loads(r.stdout)
    u = j["usage"]
    dec = (u["completion_tokens"] - 1) / u["decode_seconds"] if u["decode_seconds"] > 0 else 0.0
    return (f"ttft {1000 * (u['vision_seconds'] + u['prefill_seconds']):7.1f} ms (vision "
            f"{1000 * u['vision_seconds']:6.1f} + prefill {1000 * u['prefill_seconds']:6.1f}) decode {dec:7.1f} "
            f"tok/s sha {j['token_sha256'][:12]}")


def main(argv):
    if len(argv) < 4:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    exe, envs, shapes = os.path.abspath(argv[1]), json.loads(argv[2]), tuple(argv[3].split(","))
    new = argv[4] if len(argv) > 4 else "128"
    from gpu_bench import build_full
    for ckpt in build_full("/tmp/tf-bench", shapes):
        fam = "lighton" if "lighton" in os.path.basename(ckpt) else "qwen"
        for img in (os.path.join(ROOT, "examples", "paragraph.png"), os.path.join(ROOT, PAGES[fam])):
            for _ in range(2):
                for label, env in envs.items():
                    bin_, env = (os.path.abspath(env[0]), env[1]) if isinstance(env, list) else (exe, env)
                    print(f"{os.path.basename(ckpt):22s} {os.path.basename(img):22s} {label:6s} "
                          f"{run(bin_, ckpt, img, new, env)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
