"""The oracle's own noise floor for every committed model golden (issue #4/#5).

For each tests/golden/model/<ckpt>/<case>, Transformers 5.17 re-runs the golden on CUDA:
  * stages: the teacher-forced pass over the SAME ids as the committed CPU golden (prompt + its 64 greedy ids),
    captured as the golden does, compared stage by stage with the committed CPU stages (cosine, relative error);
  * greedy: its own 64-token greedy decode on CUDA, compared with the CPU golden's ids (first difference and
    the CPU golden's top-2 margin there).
Written to tests/golden/model/<ckpt>/<case>/noise_floor.json. These numbers say how far Transformers itself
lands from its CPU goldens when only the kernels change; the model tests bound tensorfold's error by them.

Run on the GPU machine from the repo root: python3 tools/reference/noise_floor.py [--only CKPT...]
"""
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
ROOT = os.path.join(HERE, "../../tests/golden")


def cos_rel(a, b):
    a = a.astype(np.float64).ravel()
    b = b.astype(np.float64).ravel()
    cos = float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b) + 1e-300))
    rel = float(np.linalg.norm(a - b) / (np.linalg.norm(b) + 1e-300))
    return cos, rel


def main():
    import torch
    from common import unpack_goldens
    unpack_goldens(ROOT)  # the committed stages are .xz
    from safetensors.torch import load_file as _load

    def load_file(path):  # stages may be BF16 (compact_bf16): compare as f32
        return {k: (v.float().numpy() if v.is_floating_point() else v.numpy()) for k, v in _load(path).items()}
    import model_goldens as mg
    from common import deterministic, versions, write_json
    orig_conv, orig_greedy = mg.conversations, mg.greedy
    import act_goldens
    only = sys.argv[sys.argv.index("--only") + 1:] if "--only" in sys.argv else None
    tmp = "/tmp/noise_floor"
    for ck in sorted(os.listdir(os.path.join(ROOT, "model"))):
        cdir = os.path.join(ROOT, "model", ck)
        if not os.path.isdir(cdir) or (only and ck not in only):
            continue
        with open(os.path.join(cdir, "meta.json")) as f:
            meta = json.load(f)
        # a hidden_act variant (act_goldens.py) is its base checkpoint with a config override
        ck_dir = act_goldens.materialise(ROOT, ck) if "base_checkpoint" in meta else os.path.join(ROOT, "ckpt", ck)
        cases = sorted(c for c in os.listdir(cdir) if os.path.isdir(os.path.join(cdir, c)))
        cur = {}

        def conv(*a, **k):
            for name, msgs, kw in orig_conv(*a, **k):
                cur["name"] = name
                yield name, msgs, kw

        def golden_ids(model, inputs, n_new=64, ck=ck):
            gj = json.load(open(os.path.join(ROOT, "model", ck, cur["name"], "greedy.json")))
            return gj["new_ids"], gj["steps"]

        mg.conversations = conv
        out = {}
        for mode in ("same_tokens", "own_greedy"):
            mg.greedy = golden_ids if mode == "same_tokens" else orig_greedy
            deterministic(8)
            d = os.path.join(tmp, ck, mode)
            mg.write_golden(ck_dir, d, os.path.join(ROOT, "images"), subset=cases, device="cuda")
            for case in cases:
                o = out.setdefault(case, {})
                if mode == "same_tokens":
                    G = load_file(os.path.join(cdir, case, "stages.safetensors"))
                    M = load_file(os.path.join(d, case, "stages.safetensors"))
                    st = {}
                    for name in sorted(G):
                        if name.startswith("input.") or G[name].dtype.kind != "f" or name not in M:
                            continue
                        c, r = cos_rel(M[name], G[name])
                        st[name] = {"cos": c, "rel": r}
                    o["stages"] = st
                else:
                    gj = json.load(open(os.path.join(cdir, case, "greedy.json")))
                    mj = json.load(open(os.path.join(d, case, "greedy.json")))
                    first = next((i for i, (a, b) in enumerate(zip(gj["new_ids"], mj["new_ids"])) if a != b), None)
                    o["greedy_cuda_first_diff"] = first
                    o["greedy_cuda_first_diff_cpu_margin"] = None if first is None else gj["steps"][first]["margin"]
                    o["greedy_cuda_first_diff_cpu_top1_logit"] = None if first is None else gj["steps"][first]["top1_logit"]
        for case, o in out.items():
            o["command"] = "python3 tools/reference/noise_floor.py"
            o["compared"] = "Transformers on CUDA (H200, bf16/fp32 as the checkpoint) vs the committed CPU golden"
            o["versions"] = versions()
            o["min_cos"] = min(v["cos"] for v in o["stages"].values())
            o["max_rel"] = max(v["rel"] for v in o["stages"].values())
            write_json(os.path.join(cdir, case, "noise_floor.json"), o)
            print(f"{ck}/{case}: min_cos {o['min_cos']:.8f} max_rel {o['max_rel']:.3e} greedy first diff "
                  f"{o['greedy_cuda_first_diff']} margin {o['greedy_cuda_first_diff_cpu_margin']}", flush=True)
    mg.conversations, mg.greedy = orig_conv, orig_greedy


if __name__ == "__main__":
    main()
