"""The serving benchmark's figures beside their bounds, and its report (bench/serve/gpu_serve_bench.py).

Bounds, from the measured device-to-device copy bandwidth and bf16 matmul rate (nominal H200 figures if
measuring fails): decode tok/s <= c / step, step = (text weight bytes + c x KV bytes at the mean context) /
bandwidth; pages/s <= 1 / (prefill FLOPs per page / matmul rate + N x step / c), prefill FLOPs = 2 x (vision
params x patches + text params x prompt tokens). Attention's quadratic terms are left out, so the bounds are
loose for long prompts; they say how far a figure is from what the hardware allows, not what is reachable.
"""
import json
import os
import time

NOMINAL_BW = 4.3e12      # H200 HBM3e, bytes/s
NOMINAL_FLOPS = 989e12   # H200 dense bf16, FLOP/s

def measure_hardware(log=print):
    """Device-to-device copy bandwidth (bytes read + written per second) and bf16 matmul FLOP/s."""
    import torch
    res = {"gpu": torch.cuda.get_device_name(0), "bw": NOMINAL_BW, "flops": NOMINAL_FLOPS, "measured": False}
    try:
        a = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")  # 1 GiB
        b = torch.empty_like(a)
        for _ in range(2):
            b.copy_(a)
        torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(10):
            b.copy_(a)
        torch.cuda.synchronize()
        res["bw"] = 2 * 10 * a.numel() / (time.perf_counter() - t)
        del a, b
        x = torch.randn(8192, 8192, dtype=torch.bfloat16, device="cuda")
        y = torch.randn(8192, 8192, dtype=torch.bfloat16, device="cuda")
        for _ in range(3):
            x @ y
        torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(20):
            x @ y
        torch.cuda.synchronize()
        res["flops"] = 20 * 2 * 8192 ** 3 / (time.perf_counter() - t)
        res["measured"] = True
        del x, y
        torch.cuda.empty_cache()
    except Exception as e:  # nominal figures then; say so
        log(f"hardware measurement failed ({e}); using nominal H200 figures")
    return res


def model_shape(ckpt):
    """Parameter counts and KV bytes per token from the checkpoint's config and safetensors headers."""
    import struct
    cfg = json.load(open(os.path.join(ckpt, "config.json")))
    tc = cfg["text_config"]
    n_vision = n_text = 0
    for f in sorted(os.listdir(ckpt)):
        if not f.endswith(".safetensors"):
            continue
        with open(os.path.join(ckpt, f), "rb") as fh:
            header = json.loads(fh.read(struct.unpack("<Q", fh.read(8))[0]))
        for name, t in header.items():
            if name == "__metadata__" or name.startswith("mtp."):
                continue
            n = 1
            for s in t["shape"]:
                n *= s
            if "vision" in name or ".visual." in name or "multi_modal_projector" in name:
                n_vision += n
            else:
                n_text += n
    types = tc.get("layer_types") or ["full_attention"] * tc["num_hidden_layers"]
    n_full = sum(1 for t in types if t == "full_attention")
    kv_per_token = n_full * 2 * tc["num_key_value_heads"] * tc["head_dim"] * 2  # K and V, bf16
    merge = cfg.get("spatial_merge_size", cfg.get("vision_config", {}).get("spatial_merge_size", 2))
    return {"n_vision": n_vision, "n_text": n_text, "kv_per_token": kv_per_token, "merge": merge,
            "image_token_id": cfg.get("image_token_id")}


def bounds(shape, hw, c, prompt_tokens, n_patches, n_new):
    """Decode tok/s and pages/s bounds at c in flight (see the module docstring)."""
    ctx = prompt_tokens + n_new / 2
    step = (2 * shape["n_text"] + c * shape["kv_per_token"] * ctx) / hw["bw"]
    prefill = 2 * (shape["n_vision"] * n_patches + shape["n_text"] * prompt_tokens) / hw["flops"]
    return {"tok_s": c / step, "pages_s": 1 / (prefill + n_new * step / c)}


REPORT = {"info": {}, "hw": None, "shape": None}


def fmt(v, d=1):
    return "-" if v is None else f"{v:,.{d}f}"


def vs(v, bound, d=1):
    if v is None:
        return "-"
    if not bound:
        return fmt(v, d)
    return f"{fmt(v, d)} / {fmt(bound, d)} ({100 * v / bound:.0f} %)"


def write_report(args, rows):
    info, hw, shape = REPORT["info"], REPORT["hw"], REPORT["shape"]
    n = args["max_tokens"]
    lines = [f"GPU: {info.get('gpu', '?')}; torch {info.get('torch', '?')}; transformers {info.get('transformers', '?')} "
             f"({info.get('hf_attention', '?')} attention); tensorfold {info.get('commit', '?')}; {info.get('date', '')}",
             f"Checkpoint: {args['shape']} random bf16 ({fmt((shape or {}).get('n_text', 0) / 1e6, 0)} M text + "
             f"{fmt((shape or {}).get('n_vision', 0) / 1e6, 0)} M vision parameters); {info.get('n_pages', '?')} pages "
             f"{info.get('page_size', '?')}, prompt {info.get('prompt_tokens', '?')} tokens "
             f"({info.get('image_tokens', '?')} image tokens); {n} new tokens each, greedy, eos ignored",
             f"Bounds: copy bandwidth {fmt((hw or {}).get('bw', 0) / 1e12, 2)} TB/s, bf16 matmul "
             f"{fmt((hw or {}).get('flops', 0) / 1e12, 0)} TFLOP/s ({'measured' if (hw or {}).get('measured') else 'nominal'})"
             "; figure / bound (ratio)",
             "",
             "| engine | in flight | done / sent | pages/s / bound | output tok/s / decode bound | TTFT p50 ms | "
             "TPOT p50 ms | E2E p50 s | peak GPU MiB | note |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        c = r["c"]
        b = None
        if hw and shape and info.get("prompt_tokens"):
            patches = (info.get("image_tokens") or 0) * shape["merge"] ** 2
            b = bounds(shape, hw, c, info["prompt_tokens"], patches, n)
        peak = fmt(r.get("peak_mib"), 0)
        if r["status"] != "ok":
            lines.append(f"| {r['engine']} | {c} | - | - | - | - | - | - | {peak if r['engine'] == 'tensorfold' else '-'} "
                         f"| {r['status']} |")
            continue
        if r["engine"] == "tensorfold":
            lv = r["level"]
            note = []
            if lv.get("time_limited"):
                note.append(f"cut at {lv.get('time_limit_s', 0):.0f} s: {lv['aborted']} cut, {lv['not_sent']} not sent")
            if lv.get("errors"):
                note.append(f"{lv['errors']} errors: {lv.get('first_error')}")
            lines.append(f"| tensorfold | {c} | {lv['done']} / {lv['sent']} | {vs(lv['pages_per_s'], b and b['pages_s'], 3)} | "
                         f"{vs(lv['output_tokens_per_s'], b and b['tok_s'])} | {fmt(lv['ttft_ms']['p50'])} | "
                         f"{fmt((lv.get('tpot_ms') or {}).get('p50'), 2)} | {fmt(lv['e2e_s']['p50'], 2)} | {peak} | {'; '.join(note)} |")
        else:
            note = f"cut at {r['wall']:.0f} s after {r['n_new']} tokens" if r.get("cut") else ""
            lines.append(f"| transformers | {c} | {0 if r.get('cut') else c} / {c} | "
                         f"{vs(r['pages_s'], b and b['pages_s'], 3)} | {vs(r['tok_s'], b and b['tok_s'])} | "
                         f"{fmt(r['ttft_ms'])} | {fmt(r['tpot_ms'], 2)} | {fmt(r['wall'], 2)} | {peak} | {note} |")
    lines.append("")
    if info.get("failure"):
        lines.append(f"The run stopped early: {info['failure']}")
    lines.append("tensorfold: `serve --backend cuda --no-drafts --cache-mb 0`, measured by `tensorfold bench --token-ids "
                 "--ignore-eos --temperature 0` (TTFT p50 over requests that got a first token, TPOT and E2E over completed ones; tok/s = tokens streamed in the "
                 "level's wall time; TPOT = (E2E - TTFT) / (tokens - 1) per request). Transformers: one generate() of c "
                 "pages; TTFT = its first forward (the batch's prefill), TPOT = its median step, E2E = the whole batch. "
                 "Peak GPU memory: nvidia-smi of the server process (tensorfold), torch.cuda.max_memory_allocated "
                 "(Transformers). Bounds: bench/serve/serve_report.py.")
    text = "\n".join(lines) + "\n"
    os.makedirs(args["out"], exist_ok=True)
    with open(os.path.join(args["out"], "serve_bench.md"), "w") as f:
        f.write(text)
    with open(os.path.join(args["out"], "serve_bench.json"), "w") as f:
        json.dump({"args": {k: v for k, v in args.items() if k != "pos"}, "info": info, "hw": hw, "shape": shape,
                   "rows": rows}, f, indent=1, default=str)
    return text
