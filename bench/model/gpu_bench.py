"""GPU speed of tensorfold's CUDA backend against Transformers on the same GPU, in one run (device machine).

  python3 bench/model/gpu_bench.py TENSORFOLD OUT.md [--full [--4b]] [--new N] [--only NAME] [--eager]

Cases: the two bundled demo models on examples/line1.png, and with --full the real LightOnOCR-1B
(`lighton_ocr`) and Qwen3.5-0.8B shapes (random bf16 weights, built here by tools/reference/checkpoints.py
with the oracle's tiny tokenizer: the embedding and lm_head keep the real row count) on examples/paragraph.png
and on full pages (tests/golden/images/page_1540x1190.png for the 1B, page_1583x2048.png for Qwen3.5);
--4b adds the Qwen3.5-4B shapes (an ~9 GB checkpoint under /tmp/tf-bench) on the same two images.

Per case, greedy, eos ignored, N new tokens, one request:
- tensorfold: `ocr CKPT IMAGE --backend cuda --json --max-tokens N --ignore-eos --no-drafts --temperature 0`, best of 3 by
  decode speed; TTFT = vision + prefill seconds of its usage block (both printed), decode tok/s = (N - 1) / decode seconds.
- Transformers 5.17 (bf16, its default attention, same chat template and image processor):
  `generate` on the GPU; TTFT = median of 3 timed generate(max_new_tokens=1), decode tok/s = (N - 1) /
  (median of 3 timed generate(N) - TTFT), after one warm-up; torch.cuda.synchronize around each.
- --eager: tensorfold again with --enforce-eager (every step op by op, no CUDA graphs): its decode tok/s in a last
  column; its ids must equal the recorded run's.
- ids: how many of the N greedy ids the two agree on before the first difference, and there Transformers' margin
  (its logit of its own id minus its logit of tensorfold's, from one more generate that keeps its scores, whose
  ids are the ones compared): the tie rule wants it small.
Prints a markdown table and writes it to OUT.md.
"""
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tools", "reference"))


def tensorfold_run(exe, ckpt, img, n, extra=()):
    best = None
    for _ in range(3):
        cmd = [exe, "ocr", ckpt, img, "--backend", "cuda", "--json", "--max-tokens", str(n), "--ignore-eos", "--no-drafts",
               "--temperature", "0", *extra]
        t0 = time.time()
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        wall = time.time() - t0
        if r.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)}: exit {r.returncode}: {r.stderr[-400:]}")
        j = json.loads(r.stdout)
        u = j["usage"]
        dec = (u["completion_tokens"] - 1) / u["decode_seconds"] if u["decode_seconds"] > 0 else 0.0
        row = {"prompt": u["prompt_tokens"], "ttft": u["vision_seconds"] + u["prefill_seconds"], "decode": dec,
               "vision": u["vision_seconds"], "prefill": u["prefill_seconds"],
               "ids": j["token_ids"], "wall": wall}
        if best is None or row["decode"] > best["decode"]:
            best = row
    return best


def hf_run(ckpt, img, n):
    import torch
    import model_goldens
    model, proc, _ = model_goldens.load(ckpt, "cuda")
    msgs = [{"role": "user", "content": [{"type": "image", "path": os.path.abspath(img)}]}]
    inputs = proc.apply_chat_template(msgs, add_generation_prompt=True, tokenize=True, return_dict=True,
                                      return_tensors="pt").to("cuda")

    def gen(k):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        with torch.no_grad():
            out = model.generate(**inputs, max_new_tokens=k, min_new_tokens=k, do_sample=False, eos_token_id=None,
                                 temperature=None, top_p=None, top_k=None)
        torch.cuda.synchronize()
        return time.perf_counter() - t0, out

    gen(n)  # warm-up
    t1 = statistics.median(gen(1)[0] for _ in range(3))
    runs = [gen(n) for _ in range(3)]
    tn = statistics.median(r[0] for r in runs)
    p = inputs["input_ids"].shape[1]
    # The ids compared, with Transformers' logits along them: one more, untimed run that keeps its scores (on
    # the random checkpoints' near-ties its runs need not agree with each other: cuBLAS and SDPA choose their
    # kernels per call).
    with torch.no_grad():
        g = model.generate(**inputs, max_new_tokens=n, min_new_tokens=n, do_sample=False, eos_token_id=None,
                           temperature=None, top_p=None, top_k=None, output_scores=True,
                           return_dict_in_generate=True)
    ids = g.sequences[0, p:].tolist()
    scores = [x[0].float().cpu() for x in g.scores]
    del model
    torch.cuda.empty_cache()
    return {"prompt": p, "ttft": t1, "decode": (n - 1) / (tn - t1), "ids": ids, "scores": scores}


def first_diff(tf_ids, hf):
    """(k, margin): the ids agree before step k; margin = Transformers' logit of its own id minus its logit of
    tensorfold's id at step k (None when all agree). The tie rule wants every margin small (< 0.5)."""
    k = next((i for i, (a, b) in enumerate(zip(tf_ids, hf["ids"])) if a != b), None)
    if k is None:
        return min(len(tf_ids), len(hf["ids"])), None
    s = hf["scores"][k]
    return k, float(s[hf["ids"][k]] - s[tf_ids[k]])


# Full-size random checkpoints the oracle builds: shape name -> (family, config under tools/reference/configs, dir).
FULL_SHAPES = {
    "lighton-1b": ("lighton_ocr", "lightonocr-1b.lighton_ocr.config.json", "lighton-1b-random"),
    "qwen3_5-0.8b": ("qwen3_5", "qwen3.5-0.8b.config.json", "qwen3_5-0.8b-random"),
    "qwen3_5-4b": ("qwen3_5", "qwen3.5-4b.config.json", "qwen3_5-4b-random"),
}


def build_full(out_dir, shapes=("lighton-1b", "qwen3_5-0.8b")):
    """Builds (or reuses) the named full-size random bf16 checkpoints under out_dir; returns their paths.
    Also used by bench/serve/gpu_serve_bench.py."""
    import checkpoints
    from common import deterministic
    made = []
    for shape in shapes:
        family, cfg, name = FULL_SHAPES[shape]
        path = os.path.join(out_dir, name)
        if not os.path.exists(os.path.join(path, "config.json")):
            deterministic()
            t0 = time.time()
            s = checkpoints.write_checkpoint(family, "full", path,
                                             os.path.join(ROOT, "tools", "reference", "configs", cfg))
            print(f"built {name}: {s['n_params']:,} parameters in {time.time() - t0:.0f} s", flush=True)
        made.append(path)
    return made


def main(argv):
    args = [a for a in argv[1:] if not a.startswith("--")]
    if len(args) < 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    exe, out = args[0], args[1]
    n = int(argv[argv.index("--new") + 1]) if "--new" in argv else 64
    cases = [(os.path.join(ROOT, "models", "demo-lighton"), "examples/line1.png"),
             (os.path.join(ROOT, "models", "demo-qwen35"), "examples/line1.png")]
    eager = "--eager" in argv
    only = argv[argv.index("--only") + 1] if "--only" in argv else None  # e.g. "lighton": one family's cases
    if only:
        cases = [c for c in cases if only in os.path.basename(c[0])]
    if "--full" in argv:
        shapes = ("lighton-1b", "qwen3_5-0.8b") + (("qwen3_5-4b",) if "--4b" in argv else ())
        full = build_full("/tmp/tf-bench", tuple(s for s in shapes if not only or only in s))
        cases += [(p, "examples/paragraph.png") for p in full]
        # The page shapes: a 1190 x 1540 page for the 1B (2,333 prompt tokens), 1583 x 2048 for Qwen3.5.
        pages = {"lighton": "tests/golden/images/page_1540x1190.png", "qwen": "tests/golden/images/page_1583x2048.png"}
        cases += [(p, next(img for k, img in pages.items() if k in os.path.basename(p))) for p in full]
    here = [c for c in cases if os.path.exists(os.path.join(c[0], "config.json"))]
    missing = [os.path.basename(c[0]) for c in cases if c not in here]
    cases = here  # a device call may leave the demo checkpoints out (its 64 MiB limit)
    import torch
    lines = [f"GPU: {torch.cuda.get_device_name(0)}; torch {torch.__version__}; "
             f"transformers {__import__('transformers').__version__}; {n} new tokens, greedy, eos ignored",
             "",
             "| checkpoint | image | prompt tokens | TTFT ms tensorfold (vision + prefill) | TTFT ms Transformers | decode tok/s tensorfold "
             "| decode tok/s Transformers | decode speed-up | equal greedy ids |" + (" decode tok/s eager |" if eager else ""),
             "|---|---|---:|---:|---:|---:|---:|---:|---:|" + ("---:|" if eager else "")]
    for ckpt, img in cases:
        try:
            tf = tensorfold_run(exe, ckpt, img, n)
            # --eager: the same run op by op (--enforce-eager), to show what the recorded decode steps gain;
            # its ids must equal the recorded run's (a row's bits do not depend on the graph).
            ea = tensorfold_run(exe, ckpt, img, n, ("--enforce-eager",)) if eager else None
            if ea is not None and ea["ids"] != tf["ids"]:
                raise RuntimeError("--enforce-eager changed the greedy ids")
            hf = hf_run(ckpt, img, n)
        except Exception as e:  # one failing case must not lose the others' rows
            row = f"| {os.path.basename(ckpt)} | {os.path.basename(img)} | failed: {str(e)[:300]} |"
            print(row, flush=True)
            lines.append(row)
            continue
        k, margin = first_diff(tf["ids"], hf)
        diff = f"{k}/{n}" + ("" if margin is None else f" (margin {margin:.4g})")
        prompt = str(tf["prompt"]) if tf["prompt"] == hf["prompt"] else f"{tf['prompt']} / {hf['prompt']}"
        row = (f"| {os.path.basename(ckpt)} | {os.path.basename(img)} | {prompt} | {1e3 * tf['ttft']:.1f} ({1e3 * tf['vision']:.1f} + {1e3 * tf['prefill']:.1f}) | "
               f"{1e3 * hf['ttft']:.1f} | {tf['decode']:.1f} | {hf['decode']:.1f} | {tf['decode'] / hf['decode']:.2f}x | "
               f"{diff} |" + (f" {ea['decode']:.1f} |" if ea else ""))
        print(row, flush=True)
        lines.append(row)
    if missing:
        lines += ["", f"(not in this run, their checkpoint directories absent: {', '.join(missing)})"]
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
