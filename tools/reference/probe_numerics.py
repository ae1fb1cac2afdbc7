"""Probe the oracle's own arithmetic (issue #4): which summation order torch's CPU bf16 GEMM and SDPA use,
and how far legitimate re-runs of Transformers (1 thread, CUDA) land from the committed CPU goldens.

Run on the GPU machine from the repo root: python3 tools/reference/probe_numerics.py OUT_DIR
Prints a report and writes OUT_DIR/probe.json. Nothing here feeds a golden; the per-stage noise floor on the
same ids that the tests use is tools/reference/noise_floor.py.
"""
import json
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from noise_floor import cos_rel  # noqa: E402


def bf16_round(a32):
    """float32 array -> float32 array holding the bf16 RNE value."""
    u = a32.astype(np.float32).view(np.uint32).astype(np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16
    return r.astype(np.uint32).view(np.float32)


def env():
    import torch
    out = {"torch": torch.__version__, "threads": torch.get_num_threads(),
           "cpu_capability": torch.backends.cpu.get_cpu_capability(),
           "mkldnn": torch.backends.mkldnn.is_available()}
    try:
        flags = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        out["model"] = [l for l in flags.splitlines() if "Model name" in l]
        out["amx_bf16"] = "amx_bf16" in flags
        out["avx512_bf16"] = "avx512_bf16" in flags
    except Exception as e:  # noqa: BLE001
        out["lscpu"] = str(e)
    return out


def dot_candidates(x, w):
    """x [n,K], w [N,K] float32 holding bf16 values. Returns {name: [n,N] float32 before the bf16 rounding}."""
    n, K = x.shape
    N = w.shape[0]
    c = {}
    acc = np.zeros((n, N), np.float32)
    for k in range(K):
        acc = (acc + np.outer(x[:, k], w[:, k]).astype(np.float32)).astype(np.float32)
    c["seq"] = acc
    acc = np.zeros((n, N), np.float32)
    for k in range(0, K, 2):
        for kk in (k + 1, k):
            acc = (acc + np.outer(x[:, kk], w[:, kk]).astype(np.float32)).astype(np.float32)
    c["seq_oddfirst"] = acc
    acc = np.zeros((n, N), np.float32)
    for k in range(0, K, 2):  # the pair summed exactly, one rounding per pair
        pair = np.outer(x[:, k], w[:, k]).astype(np.float64) + np.outer(x[:, k + 1], w[:, k + 1]).astype(np.float64)
        acc = (acc.astype(np.float64) + pair).astype(np.float32)
    c["seq_pairfused"] = acc
    for lanes in (8, 16, 32, 64):
        if K % lanes:
            continue
        parts = np.zeros((lanes, n, N), np.float32)
        for k in range(K):
            parts[k % lanes] = (parts[k % lanes] + np.outer(x[:, k], w[:, k]).astype(np.float32)).astype(np.float32)
        s = parts[0].copy()
        for l in range(1, lanes):
            s = (s + parts[l]).astype(np.float32)
        c[f"lanes{lanes}_linear"] = s
        while parts.shape[0] > 1:  # tree reduction of the lanes
            h = parts.shape[0] // 2
            parts = (parts[:h] + parts[h:]).astype(np.float32)
        c[f"lanes{lanes}_tree"] = parts[0]
    for kb in (16, 32, 64):  # blocks of kb summed sequentially, then block sums added in order
        if K % kb or K == kb:
            continue
        tot = np.zeros((n, N), np.float32)
        for b0 in range(0, K, kb):
            blk = np.zeros((n, N), np.float32)
            for k in range(b0, b0 + kb):
                blk = (blk + np.outer(x[:, k], w[:, k]).astype(np.float32)).astype(np.float32)
            tot = (tot + blk).astype(np.float32)
        c[f"kblock{kb}"] = tot
    c["exact"] = (x.astype(np.float64) @ w.astype(np.float64).T).astype(np.float32)
    return c


def probe_linear(report):
    import torch
    import torch.nn.functional as F
    g = torch.Generator().manual_seed(7)
    rows = []
    for (n, K, N) in [(300, 64, 192), (300, 192, 64), (300, 128, 64), (1, 64, 192), (1, 192, 64), (64, 1024, 256)]:
        x = (torch.randn(n, K, generator=g) * 0.7).bfloat16()
        w = (torch.randn(N, K, generator=g) * 0.25).bfloat16()
        res = {}
        for th in (8, 1):
            torch.set_num_threads(th)
            res[th] = F.linear(x, w).float().numpy()
        torch.set_num_threads(8)
        ref = res[8]
        cands = dot_candidates(x.float().numpy(), w.float().numpy())
        cands["torch_f32_mm"] = (x.float() @ w.float().T).numpy()
        row = {"shape": [n, K, N], "threads8_vs_1_mismatch": float(np.mean(res[8] != res[1]))}
        for name, v in cands.items():
            row[name] = float(np.mean(bf16_round(v) != ref))
        # Does a row computed alone (n=1) equal the same row inside the batch?
        one = F.linear(x[:1], w).float().numpy()
        row["row0_alone_vs_batch_mismatch"] = float(np.mean(one != ref[:1]))
        rows.append(row)
        print("linear", row, flush=True)
    # fp32 linear: the fp32 goldens' tolerance question (#5).
    for (n, K, N) in [(300, 64, 192), (300, 192, 64)]:
        x = torch.randn(n, K, generator=g) * 0.7
        w = torch.randn(N, K, generator=g) * 0.25
        ref = F.linear(x, w).numpy()
        cands = dot_candidates(x.numpy(), w.numpy())
        row = {"shape_f32": [n, K, N]}
        for name, v in cands.items():
            row[name] = float(np.mean(v != ref))
        rows.append(row)
        print("linear_f32", row, flush=True)
    report["linear"] = rows


def probe_sdpa(report):
    import torch
    import torch.nn.functional as F
    g = torch.Generator().manual_seed(11)
    rows = []
    for (H, L, D, causal) in [(4, 160, 16, False), (4, 300, 32, True), (4, 40, 32, True), (4, 700, 16, False)]:
        q = (torch.randn(1, H, L, D, generator=g) * 1.5).bfloat16()
        k = (torch.randn(1, H, L, D, generator=g) * 1.5).bfloat16()
        v = torch.randn(1, H, L, D, generator=g).bfloat16()
        scale = D ** -0.5
        ref = F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale).float().numpy()[0]
        mask = None
        if not causal:
            mask = torch.zeros(1, 1, L, L, dtype=torch.bfloat16)  # HF Pixtral passes a (block) mask
            ref_m = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale).float().numpy()[0]
        qf, kf, vf = (t.float().numpy()[0] for t in (q, k, v))
        out = {}
        for variant in ("div", "recip", "div_exact_s", "div_p_norm_round"):
            o = np.zeros((H, L, D), np.float32)
            for h in range(H):
                if variant == "div_exact_s":
                    s = (qf[h].astype(np.float64) @ kf[h].astype(np.float64).T).astype(np.float32)
                else:
                    s = dot_candidates(qf[h], kf[h])["seq"]
                s = (s * np.float32(scale)).astype(np.float32)
                if causal:
                    s = np.where(np.tril(np.ones((L, L), bool)), s, -np.inf).astype(np.float32)
                m = s.max(-1, keepdims=True)
                e = np.exp((s - m).astype(np.float32)).astype(np.float32)
                lsum = np.zeros((L, 1), np.float32)
                for j in range(L):
                    lsum = (lsum + e[:, j:j + 1]).astype(np.float32)
                if variant == "div_p_norm_round":
                    p = bf16_round((e / lsum).astype(np.float32))
                    o[h] = dot_candidates(p, vf[h].T.copy())["seq"]
                    continue
                p = bf16_round(e)
                acc = dot_candidates(p, vf[h].T.copy())["seq"]
                o[h] = (acc / lsum).astype(np.float32) if variant != "recip" else (acc * (np.float32(1) / lsum)).astype(np.float32)
            out[variant] = float(np.mean(bf16_round(o) != ref))
        row = {"H_L_D_causal": [H, L, D, causal], **out}
        if mask is not None:
            row["mask_vs_nomask_mismatch"] = float(np.mean(ref_m != ref))
        rows.append(row)
        print("sdpa", row, flush=True)
    report["sdpa"] = rows


def probe_model_noise(report, out_dir):
    """Re-run the committed goldens' teacher-forced pass as legitimate variants of the oracle and compare
    every stage with the committed golden: the oracle's own noise floor."""
    import torch
    from safetensors.numpy import load_file
    from common import deterministic, unpack_goldens
    from model_goldens import write_golden
    root = os.path.join(HERE, "../../tests/golden")
    unpack_goldens(root)  # the committed stages are .xz
    res = {}
    for ck, subset in [("lighton_ocr-tiny-bf16", ["ocr_plain", "text_only"]),
                       ("mistral3-tiny-bf16-untied", ["ocr_plain"]),
                       ("qwen3_5-tiny-bf16", None), ("lighton_ocr-tiny-fp32", ["ocr_plain"]),
                       ("qwen3_5-tiny-fp32", None)]:
        for variant in ("cpu_threads1", "cuda", "cpu_threads8_again"):
            if variant == "cuda" and not torch.cuda.is_available():
                continue
            deterministic(1 if variant == "cpu_threads1" else 8)
            d = os.path.join(out_dir, "noise", ck, variant)
            try:
                write_golden(os.path.join(root, "ckpt", ck), d, os.path.join(root, "images"),
                             subset=subset, device="cuda" if variant == "cuda" else "cpu")
            except Exception as e:  # noqa: BLE001
                res[f"{ck}/{variant}"] = {"error": repr(e)}
                continue
            for case in sorted(os.listdir(d)):
                gold = os.path.join(root, "model", ck, case, "stages.safetensors")
                mine = os.path.join(d, case, "stages.safetensors")
                if not (os.path.exists(gold) and os.path.exists(mine)):
                    continue
                G, M = load_file(gold), load_file(mine)
                worst = []
                for name in sorted(G):
                    if name.startswith("input.") or name not in M or G[name].dtype.kind != "f":
                        continue
                    c, r = cos_rel(M[name], G[name])
                    worst.append((name, round(c, 8), float(f"{r:.3e}")))
                gj = json.load(open(os.path.join(root, "model", ck, case, "greedy.json")))
                mj = json.load(open(os.path.join(d, case, "greedy.json")))
                first = next((i for i, (a, b) in enumerate(zip(gj["new_ids"], mj["new_ids"])) if a != b), None)
                key = f"{ck}/{case}/{variant}"
                res[key] = {"min_cos": min(w[1] for w in worst), "max_rel": max(w[2] for w in worst),
                            "stages": worst, "greedy_first_diff": first,
                            "greedy_first_diff_margin": None if first is None else gj["steps"][first]["margin"]}
                print(key, "min_cos", res[key]["min_cos"], "max_rel", res[key]["max_rel"], "greedy_first_diff",
                      first, res[key]["greedy_first_diff_margin"], flush=True)
    report["model_noise"] = res


def probe_sdpa_paths(report):
    """Which SDPA kernel F.scaled_dot_product_attention runs for bf16 on the CPU, and which emulation matches it."""
    import torch
    import torch.nn.functional as F
    g = torch.Generator().manual_seed(11)
    rows = []
    for (H, L, D, causal) in [(4, 160, 16, False), (4, 300, 32, True), (4, 40, 32, True)]:
        q = (torch.randn(1, H, L, D, generator=g) * 1.5).bfloat16()
        k = (torch.randn(1, H, L, D, generator=g) * 1.5).bfloat16()
        v = torch.randn(1, H, L, D, generator=g).bfloat16()
        scale = D ** -0.5
        ref = F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)
        row = {"H_L_D_causal": [H, L, D, causal]}
        try:
            row["fused_choice"] = int(torch._fused_sdp_choice(q, k, v, None, 0.0, causal, scale=scale))
        except Exception as e:  # noqa: BLE001
            row["fused_choice"] = repr(e)[:200]
        try:
            fl = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, causal, scale=scale)[0]
            row["flash_vs_F"] = float((fl != ref).float().mean())
        except Exception as e:  # noqa: BLE001
            row["flash_vs_F"] = repr(e)[:200]
        try:
            ma = torch.ops.aten._scaled_dot_product_attention_math(q, k, v, None, 0.0, causal, scale=scale)[0]
            row["math_vs_F"] = float((ma != ref).float().mean())
        except Exception as e:  # noqa: BLE001
            row["math_vs_F"] = repr(e)[:200]
        ref = ref.float().numpy()[0]
        qf, kf, vf = (t.float().numpy()[0] for t in (q, k, v))
        cands = {}
        for h in range(H):
            s = (qf[h].astype(np.float64) @ kf[h].astype(np.float64).T).astype(np.float32)
            s = (s * np.float32(scale)).astype(np.float32)
            msk = np.tril(np.ones((L, L), bool)) if causal else np.ones((L, L), bool)
            s = np.where(msk, s, -np.inf).astype(np.float32)
            m = s.max(-1, keepdims=True)
            e = np.exp((s - m).astype(np.float64)).astype(np.float32)
            l = e.astype(np.float64).sum(-1, keepdims=True).astype(np.float32)
            vv = vf[h].astype(np.float64)
            def put(name, o):
                cands.setdefault(name, np.zeros((H, L, D), np.float32))[h] = o
            put("flash_pbf16_exp64", ((bf16_round(e).astype(np.float64) @ vv).astype(np.float32) / l).astype(np.float32))
            put("p_f32_unrounded", ((e.astype(np.float64) @ vv).astype(np.float32) / l).astype(np.float32))
            pt = (e.view(np.uint32) & 0xFFFF0000).view(np.float32)
            put("p_bf16_truncated", ((pt.astype(np.float64) @ vv).astype(np.float32) / l).astype(np.float32))
            lb = bf16_round(e).astype(np.float64).sum(-1, keepdims=True).astype(np.float32)
            put("p_bf16_sum_rounded", ((bf16_round(e).astype(np.float64) @ vv).astype(np.float32) / lb).astype(np.float32))
            sq = np.float32(np.sqrt(np.float32(scale)))
            qs, ks = bf16_round((qf[h] * sq).astype(np.float32)), bf16_round((kf[h] * sq).astype(np.float32))
            s2 = bf16_round((qs.astype(np.float64) @ ks.astype(np.float64).T).astype(np.float32))
            s2 = np.where(msk, s2, -np.inf).astype(np.float32)
            e2 = np.exp((s2 - s2.max(-1, keepdims=True)).astype(np.float64)).astype(np.float32)
            p2 = bf16_round((e2 / e2.astype(np.float64).sum(-1, keepdims=True)).astype(np.float32))
            put("math_bf16", (p2.astype(np.float64) @ vv).astype(np.float32))
            qs, ks = (qf[h] * sq).astype(np.float32), (kf[h] * sq).astype(np.float32)
            s3 = (qs.astype(np.float64) @ ks.astype(np.float64).T).astype(np.float32)
            s3 = np.where(msk, s3, -np.inf).astype(np.float32)
            e3 = np.exp((s3 - s3.max(-1, keepdims=True)).astype(np.float64)).astype(np.float32)
            p3 = (e3 / e3.astype(np.float64).sum(-1, keepdims=True).astype(np.float32)).astype(np.float32)
            put("math_f32", (p3.astype(np.float64) @ vv).astype(np.float32))
        for name, o in cands.items():
            row[name] = float(np.mean(bf16_round(o) != ref))
        rows.append(row)
        print("sdpa_paths", row, flush=True)
    report["sdpa_paths"] = rows


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else "/tmp/probe"
    os.makedirs(out_dir, exist_ok=True)
    import torch
    torch.set_num_threads(8)
    report = {"env": env()}
    print("env", report["env"], flush=True)
    which = sys.argv[2].split(",") if len(sys.argv) > 2 else ["linear", "sdpa", "noise"]
    if "linear" in which:
        probe_linear(report)
    if "sdpa" in which:
        probe_sdpa(report)
    if "paths" in which:
        probe_sdpa_paths(report)
    if "noise" in which:
        probe_model_noise(report, out_dir)
    with open(os.path.join(out_dir, "probe.json"), "w") as f:
        json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
