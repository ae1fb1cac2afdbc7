"""Serving speed on the GPU machine, in one device call: `tensorfold serve --backend cuda` measured by
`tensorfold bench`, against Transformers 5.17 batched `generate` (bf16, its default attention) on the same
GPU and pages, each figure beside its hardware bound.

  python3 bench/serve/gpu_serve_bench.py TENSORFOLD [OUT_DIR] [--shape lighton-1b] [--max-tokens 128]
          [--levels 1,8,32] [--pages 8] [--budget 540] [--level-cap 90] [--hf-reserve 150, 0 with --skip-hf] [--skip-hf]

  TENSORFOLD the CUDA build's binary (BENCHMARKS.md "Serving" has the device call); OUT_DIR gets the table
  (serve_bench.md), raw results (serve_bench.json) and logs (default $OUT). --shape: lighton-1b (default; pages
  1540 px), qwen3_5-0.8b or qwen3_5-4b (2048 px). TF_SERVE_BENCH_C128=1 adds concurrency 128;
  TF_SERVE_BENCH_SERVER_ARGS adds flags to `tensorfold serve` (e.g. --enforce-eager with TF_CUDA_OP_PROFILE).

Steps, each bounded by the overall --budget (seconds from start; the device call's limit is 600 s):
1. a full-size random bf16 checkpoint of the shape (bench/model/gpu_bench.py build_full: the oracle's
   tools/reference/checkpoints.py with its tiny tokenizer; embeddings keep the real row count);
2. --pages synthetic document pages rendered with PIL (heading, paragraphs, a table), all one size;
3. `tensorfold serve CKPT --vision --backend cuda --no-drafts --cache-mb 0` and `tensorfold bench` at each
   level (requests = max(2, c); eos ignored, greedy, --token-ids since random weights emit ids the tiny
   tokenizer cannot spell), each level capped at --level-cap s and at the time left minus --hf-reserve:
   requests still streaming at the cap are cut and their tokens counted; a level that cannot get 15 s is
   "not run (time)". Peak GPU memory of the server process from nvidia-smi.
4. Transformers: one batch of c pages per level, generate(max_new_tokens=N, eos ignored, greedy), TTFT and
   TPOT from a logits processor's timestamps, torch.cuda.max_memory_allocated; "OOM" where it runs out.
5. one markdown table, each figure beside its bound (bench/serve/serve_report.py says how they are computed).
"""
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tools", "reference"))
sys.path.insert(0, os.path.join(ROOT, "bench", "model"))
sys.path.insert(0, HERE)
from serve_report import REPORT, measure_hardware, model_shape, write_report  # noqa: E402

T0 = time.monotonic()


def log(msg):
    print(f"[{time.monotonic() - T0:6.1f} s] {msg}", flush=True)


def parse_args(argv):
    a = {"shape": "lighton-1b", "max_tokens": 128, "levels": "1,8,32", "pages": 8, "budget": 540.0,
         "level_cap": 90.0, "hf_reserve": 150.0, "skip_hf": False, "pos": []}
    i = 1
    while i < len(argv):
        k = argv[i]
        if k == "--skip-hf":
            a["skip_hf"] = True
        elif k.startswith("--") and k[2:].replace("-", "_") in a and i + 1 < len(argv):
            key = k[2:].replace("-", "_")
            a[key] = type(a[key])(argv[i + 1])
            i += 1
        elif k.startswith("--"):
            raise SystemExit(f"unknown flag {k}\n\n{__doc__}")
        else:
            a["pos"].append(k)
        i += 1
    if not a["pos"]:
        raise SystemExit(__doc__)
    if a["skip_hf"] and "--hf-reserve" not in argv:
        a["hf_reserve"] = 0.0  # nothing to reserve time for (the default 150 s left short calls no tensorfold level)
    a["tensorfold"] = os.path.abspath(a["pos"][0])
    a["out"] = os.path.abspath(a["pos"][1] if len(a["pos"]) > 1 else os.environ.get("OUT", "/tmp/tf-serve-bench"))
    a["levels"] = [int(x) for x in a["levels"].split(",") if x]
    if os.environ.get("TF_SERVE_BENCH_C128") == "1" and 128 not in a["levels"]:
        a["levels"].append(128)
    return a


def left(args):
    return args["budget"] - (time.monotonic() - T0)


# ---------------------------------------------------------------------------------------------- pages

WORDS = ("invoice total amount order customer account balance payment due date quantity price item "
         "description shipping address reference number tax subtotal discount the of and to in for with "
         "report summary results analysis section figure table method data value sample page").split()


def render_pages(out_dir, n, longest):
    """n portrait pages, longest x round(longest * 0.773) px: a heading, paragraphs and a ruled table."""
    import random
    from PIL import Image, ImageDraw, ImageFont
    os.makedirs(out_dir, exist_ok=True)
    h, w = longest, int(round(longest * 0.773))
    size = max(12, longest // 64)

    def font(px, bold=False):
        name = "DejaVuSans-Bold.ttf" if bold else "DejaVuSans.ttf"
        for d in ("/usr/share/fonts/truetype/dejavu", os.path.dirname(__import__("PIL").__file__) + "/fonts"):
            try:
                return ImageFont.truetype(os.path.join(d, name), px)
            except OSError:
                pass
        try:
            return ImageFont.load_default(size=px)  # Pillow >= 10.1
        except TypeError:
            return ImageFont.load_default()

    body, head = font(size), font(int(size * 1.6), bold=True)
    paths = []
    for k in range(n):
        rng = random.Random(1000 + k)
        img = Image.new("RGB", (w, h), "white")
        d = ImageDraw.Draw(img)
        m, y = w // 14, h // 20
        d.text((m, y), f"Document {k + 1}: " + " ".join(rng.choice(WORDS).title() for _ in range(4)),
               fill="black", font=head)
        y += int(size * 3)
        line_h = int(size * 1.5)
        for _ in range(3):  # paragraphs
            for _ in range(rng.randint(5, 8)):
                line, x_max = [], w - 2 * m
                while True:
                    line.append(rng.choice(WORDS))
                    if d.textlength(" ".join(line), font=body) > x_max:
                        line.pop()
                        break
                d.text((m, y), " ".join(line), fill="black", font=body)
                y += line_h
            y += line_h
        cols, rows = 4, rng.randint(8, 12)
        cw = (w - 2 * m) // cols
        for r in range(rows + 1):
            if y + line_h > h - m:
                break
            d.line([(m, y), (m + cols * cw, y)], fill="black", width=2)
            if r < rows:
                for c in range(cols):
                    cell = rng.choice(WORDS).title() if c == 0 else f"{rng.uniform(1, 9999):,.2f}"
                    d.text((m + c * cw + size // 2, y + size // 4), cell, fill="black", font=body)
            y += line_h
        path = os.path.join(out_dir, f"page_{k:02d}.png")
        img.save(path)
        paths.append(path)
    return paths, (w, h)


def prompt_info(ckpt, page, shape, info):
    """Prompt and image token counts of one page as the checkpoint's processor builds them (CPU only)."""
    from transformers import AutoProcessor
    proc = AutoProcessor.from_pretrained(ckpt)
    conv = [{"role": "user", "content": [{"type": "image", "path": page}]}]
    ids = proc.apply_chat_template(conv, add_generation_prompt=True, tokenize=True, return_dict=True,
                                   return_tensors="pt")["input_ids"][0]
    info["prompt_tokens"] = int(ids.shape[0])
    info["image_tokens"] = int((ids == shape["image_token_id"]).sum()) if shape["image_token_id"] is not None else 0


# ------------------------------------------------------------------------------------------ tensorfold

class GpuMemWatch:
    """Peak GPU memory (MiB) of one process from nvidia-smi once a second; where nvidia-smi cannot see the
    process (a container's PID namespace), the device's peak use above what it used at the start."""

    def __init__(self, pid):
        self.pid, self.peak, self.total_peak, self.stop_flag = pid, None, None, False
        self.baseline = self.query(["--query-gpu=memory.used"])
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    @staticmethod
    def query(what):
        try:
            out = subprocess.run(["nvidia-smi", *what, "--format=csv,noheader,nounits"], capture_output=True,
                                 text=True, timeout=10).stdout
            return [[x.strip() for x in line.split(",")] for line in out.splitlines() if line.strip()]
        except Exception:
            return []

    def run(self):
        while not self.stop_flag:
            for p in self.query(["--query-compute-apps=pid,used_memory"]):
                if len(p) == 2 and p[0] == str(self.pid) and p[1].isdigit():
                    self.peak = max(self.peak or 0, int(p[1]))
            for p in self.query(["--query-gpu=memory.used"])[:1]:
                if p and p[0].isdigit():
                    self.total_peak = max(self.total_peak or 0, int(p[0]))
            time.sleep(1)

    def stop(self):
        self.stop_flag = True
        self.t.join(timeout=15)
        if self.peak is None and self.total_peak is not None and self.baseline and self.baseline[0][0].isdigit():
            return self.total_peak - int(self.baseline[0][0])
        return self.peak


def start_server(args, ckpt, ctx, max_level, log_path):
    backend = os.environ.get("TF_SERVE_BENCH_BACKEND", "cuda")  # cpu: a dry run of this script without a GPU
    cmd = [args["tensorfold"], "serve", ckpt, "--vision", "--backend", backend, "--host", "127.0.0.1", "--port", "0",
           "--parallel", str(max_level), "--context", str(ctx), "--cache-mb", "0", "--no-drafts"]
    cmd += os.environ.get("TF_SERVE_BENCH_SERVER_ARGS", "").split()  # e.g. --enforce-eager (op profiles)
    log(" ".join(cmd))
    logf = open(log_path, "w")
    proc = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + min(240, max(30, left(args) - args["hf_reserve"]))
    base = None
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}: {tail(log_path)}")
        text = open(log_path, errors="replace").read()
        if base is None and "listening on http://127.0.0.1:" in text:
            port = text.split("listening on http://127.0.0.1:")[1].split()[0].strip("'\"")
            base = f"http://127.0.0.1:{int(''.join(ch for ch in port if ch.isdigit()))}"
        if base:
            try:
                with urllib.request.urlopen(base + "/health", timeout=5) as r:
                    if r.status == 200:
                        return proc, base
            except Exception:
                pass
        time.sleep(0.5)
    stop_server(proc)
    raise RuntimeError(f"server not ready in time: {tail(log_path)}")


def stop_server(proc):
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def tail(path, n=600):
    try:
        return open(path, errors="replace").read()[-n:].replace("\n", " | ")
    except OSError:
        return "(no log)"


def run_bench(args, base, pages_dir, c, requests, cap, out_json, max_tokens=None):
    cmd = [args["tensorfold"], "bench", base, "--images", pages_dir, "--concurrency", str(c), "--requests",
           str(requests), "--max-tokens", str(max_tokens or args["max_tokens"]), "--ignore-eos", "--token-ids", "--temperature", "0",
           "--time-limit", f"{cap:.0f}", "--timeout", f"{cap + 30:.0f}", "--json"]
    log(" ".join(cmd))
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=cap + 90)
    with open(out_json, "w") as f:
        f.write(r.stdout)
    if r.returncode not in (0, 3):
        raise RuntimeError(f"bench exit {r.returncode}: {r.stderr.strip()[-400:]}")
    return json.loads(r.stdout)["levels"][0]


def tensorfold_levels(args, ckpt, pages_dir, ctx, rows):
    max_level = max(args["levels"])
    try:
        proc, base = start_server(args, ckpt, ctx, max_level, os.path.join(args["out"], "serve.log"))
    except Exception as e:
        for c in args["levels"]:
            rows.append({"engine": "tensorfold", "c": c, "status": f"server failed: {str(e)[:300]}"})
        return
    watch = GpuMemWatch(proc.pid)
    try:
        try:  # warm-up: CUDA context, first allocations
            run_bench(args, base, pages_dir, 1, 1, min(60, max(15, left(args) - args["hf_reserve"])),
                      os.path.join(args["out"], "bench_warmup.json"), max_tokens=8)
        except Exception as e:
            log(f"warm-up failed: {e}")
        for i, c in enumerate(args["levels"]):
            remaining = left(args) - args["hf_reserve"] - 20
            cap = min(args["level_cap"], max(15, remaining / (len(args["levels"]) - i)))
            if remaining < 15:
                rows.append({"engine": "tensorfold", "c": c, "status": "not run (time)"})
                continue
            try:
                lv = run_bench(args, base, pages_dir, c, max(2, c), cap, os.path.join(args["out"], f"bench_c{c}.json"))
                rows.append({"engine": "tensorfold", "c": c, "status": "ok", "level": lv, "cap": cap})
            except Exception as e:
                rows.append({"engine": "tensorfold", "c": c, "status": f"failed: {str(e)[:300]}"})
            write_report(args, rows)
    finally:
        stop_server(proc)
        peak = watch.stop()
        for r in rows:
            if r["engine"] == "tensorfold":
                r["peak_mib"] = peak


# ---------------------------------------------------------------------------------------- Transformers

def hf_levels(args, ckpt, pages, rows, info):
    import torch
    from transformers import LogitsProcessor, LogitsProcessorList, StoppingCriteria, StoppingCriteriaList
    import model_goldens
    torch.use_deterministic_algorithms(False)  # build_full turned it on; Transformers runs as users run it
    if left(args) < 40:
        for c in args["levels"]:
            rows.append({"engine": "transformers", "c": c, "status": "not run (time)"})
        return
    t = time.monotonic()
    model, proc, _ = model_goldens.load(ckpt, "cuda")
    proc.tokenizer.padding_side = "left"
    info["hf_attention"] = getattr(model.config, "_attn_implementation", "?")
    log(f"Transformers loaded in {time.monotonic() - t:.0f} s ({info['hf_attention']} attention)")

    class Stamps(LogitsProcessor):  # called once per forward, after it: step timestamps
        def __init__(self):
            self.t = []

        def __call__(self, input_ids, scores):
            torch.cuda.synchronize()
            self.t.append(time.perf_counter())
            return scores

    class Deadline(StoppingCriteria):
        def __init__(self, at):
            self.at = at

        def __call__(self, input_ids, scores, **kw):
            return torch.full((input_ids.shape[0],), time.perf_counter() > self.at, dtype=torch.bool,
                              device=input_ids.device)

    def batch(c):
        convs = [[{"role": "user", "content": [{"type": "image", "path": pages[i % len(pages)]}]}] for i in range(c)]
        return proc.apply_chat_template(convs, add_generation_prompt=True, tokenize=True, return_dict=True,
                                        return_tensors="pt", padding=True).to("cuda")

    def gen(inputs, n, stamps, at):
        with torch.no_grad():
            return model.generate(**inputs, max_new_tokens=n, min_new_tokens=n, do_sample=False, temperature=None,
                                  top_p=None, top_k=None, eos_token_id=None,
                                  pad_token_id=proc.tokenizer.pad_token_id,
                                  logits_processor=LogitsProcessorList([stamps]),
                                  stopping_criteria=StoppingCriteriaList([Deadline(at)]))

    try:  # warm-up: cuBLAS handles, kernels
        gen(batch(1), 2, Stamps(), time.perf_counter() + 60)
    except Exception as e:
        log(f"Transformers warm-up failed: {e}")
    oom_at = None
    for i, c in enumerate(args["levels"]):
        row = {"engine": "transformers", "c": c}
        rows.append(row)
        remaining = left(args) - 10
        cap = min(args["level_cap"], max(10, remaining / (len(args["levels"]) - i)))
        if oom_at is not None:
            row["status"] = f"OOM (as at {oom_at})"
            continue
        if remaining < 10:
            row["status"] = "not run (time)"
            continue
        stamps = Stamps()
        try:
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
            inputs = batch(c)
            p = inputs["input_ids"].shape[1]
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            out = gen(inputs, args["max_tokens"], stamps, t0 + cap)
            torch.cuda.synchronize()
            wall = time.perf_counter() - t0
            n_new = int(out.shape[1] - p)
            gaps = [b - a for a, b in zip(stamps.t, stamps.t[1:])]
            full = n_new >= args["max_tokens"]
            row.update(status="ok", wall=wall, n_new=n_new, cut=not full,
                       pages_s=c / wall if full else None, tok_s=c * n_new / wall,
                       ttft_ms=1e3 * (stamps.t[0] - t0) if stamps.t else None,
                       tpot_ms=1e3 * statistics.median(gaps) if gaps else None,
                       peak_mib=torch.cuda.max_memory_allocated() / (1 << 20))
            del out, inputs
        except torch.cuda.OutOfMemoryError:
            row["status"] = "OOM"
            oom_at = f"c={c}"
        except Exception as e:
            if "out of memory" in str(e).lower():
                row["status"], oom_at = "OOM", f"c={c}"
            else:
                row["status"] = f"failed: {str(e)[:300]}"
        torch.cuda.empty_cache()
        log(f"Transformers c={c}: {row}")
        write_report(args, rows)
    del model
    torch.cuda.empty_cache()


def commit():
    """The binary's commit: $TF_COMMIT, else .gpu/commit (pack.sh writes it beside the binaries it packs; the
    device copy's git state may be older than the pack), else git where the tree has .git."""
    try:
        return os.environ.get("TF_COMMIT") or open(os.path.join(ROOT, ".gpu", "commit")).read().strip()
    except OSError:
        pass
    try:
        c = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                           timeout=10).stdout.strip()
        return c or "?"
    except Exception:
        return "?"


def main(argv):
    args = parse_args(argv)
    REPORT["args"] = args
    os.makedirs(args["out"], exist_ok=True)
    if not os.access(args["tensorfold"], os.X_OK):
        raise SystemExit(f"{args['tensorfold']}: not an executable (see the docstring)")
    import torch
    import transformers
    from gpu_bench import FULL_SHAPES, build_full
    if args["shape"] not in FULL_SHAPES:
        raise SystemExit(f"--shape must be one of {', '.join(FULL_SHAPES)}")
    info = REPORT["info"]
    info.update(torch=torch.__version__, transformers=transformers.__version__,
                date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()))
    info["commit"] = commit()
    rows = REPORT["rows"] = []
    work = "/tmp/tf-serve-bench"
    log(f"building {args['shape']} (budget {args['budget']:.0f} s)")
    ckpt = build_full(os.path.join(work, "ckpt"), (args["shape"],))[0]
    torch.use_deterministic_algorithms(False)
    torch.cuda.empty_cache()
    hw = measure_hardware(log)
    REPORT["hw"], info["gpu"] = hw, hw["gpu"]
    shape = model_shape(ckpt)
    REPORT["shape"] = shape
    longest = 1540 if args["shape"].startswith("lighton") else 2048
    pages_dir = os.path.join(work, f"pages_{longest}")
    shutil.rmtree(pages_dir, ignore_errors=True)
    pages, (w, h) = render_pages(pages_dir, args["pages"], longest)
    shutil.copy(pages[0], os.path.join(args["out"], "page_example.png"))
    info.update(n_pages=len(pages), page_size=f"{w}x{h}")
    try:
        prompt_info(ckpt, pages[0], shape, info)
    except Exception as e:  # estimate: merged patches plus a break per row, and the template
        patch = 14 if args["shape"].startswith("lighton") else 16
        info["image_tokens"] = (h // (2 * patch)) * (w // (2 * patch))
        info["prompt_tokens"] = info["image_tokens"] + h // (2 * patch) + 64
        log(f"processor failed ({e}); prompt size estimated")
    # Context: the prompt + max_tokens, with room (the server refuses a prompt that does not fit).
    ctx = (info["prompt_tokens"] + args["max_tokens"] + 256 + 1023) // 1024 * 1024
    log(f"{len(pages)} pages {w}x{h}; {info['prompt_tokens']} prompt tokens ({info['image_tokens']} image tokens); "
        f"--context {ctx}; {left(args):.0f} s left")
    write_report(args, rows)
    tensorfold_levels(args, ckpt, pages_dir, ctx, rows)
    if args["skip_hf"]:
        for c in args["levels"]:
            rows.append({"engine": "transformers", "c": c, "status": "skipped (--skip-hf)"})
    else:
        try:
            hf_levels(args, ckpt, pages, rows, info)
        except Exception as e:
            log(f"Transformers failed: {e}")
            done = {r["c"] for r in rows if r["engine"] == "transformers"}
            rows.extend({"engine": "transformers", "c": c, "status": f"failed: {str(e)[:300]}"}
                        for c in args["levels"] if c not in done)
    text = write_report(args, rows)
    print(text, flush=True)
    log(f"done; {left(args):.0f} s of the budget left; results in {args['out']}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv))
    except SystemExit:
        raise
    except BaseException as e:  # whatever happened, the report says it
        import traceback
        traceback.print_exc()
        REPORT["info"]["failure"] = f"{type(e).__name__}: {str(e)[:500]}"
        if "args" in REPORT:
            print(write_report(REPORT["args"], REPORT.get("rows", [])), flush=True)
        print(f"gpu_serve_bench failed: {type(e).__name__}: {e}", flush=True)
        sys.exit(1)
