"""hidden_act goldens: every vision activation tensorfold admits, checked against Transformers 5.17 (CPU).

* Variants: tiny checkpoints that are a committed one with only `vision_config.hidden_act` changed (the same
  weights: activations have no parameters), each with one conversation's golden under
  tests/golden/model/<variant>/ (greedy ids and a reduced stage set). Only the golden is committed; the
  checkpoint is the base directory plus the override recorded in the golden's meta.json
  (`base_checkpoint`, `config_overrides`), rebuilt by `materialise` here and by the C++ tests.
* Probe: acts.safetensors in tests/golden/acts/, ACT2FN[act](x) and ACT2FN[act](x) * up on bf16 tensors on the
  CPU, for every admitted activation, over every bf16 value with 2^-8 <= |x| < 16 plus edge values; the
  backend's act / act_mul ops are compared with it element by element.
"""
import json
import os
import shutil

from common import SEED, deterministic, save_tensors, tensor_sha256, write_json

ACTS = ["silu", "gelu", "gelu_pytorch_tanh", "gelu_new", "quick_gelu", "relu"]
# variant -> (base checkpoint, config overrides, conversation). silu is the base itself.
VARIANTS = {f"lighton_ocr-tiny-bf16-{a}": ("lighton_ocr-tiny-bf16", {"vision_config": {"hidden_act": a}}, "ocr_plain")
            for a in ACTS if a != "silu"}
# Stages kept for a variant (the rest keep their sha256 in prompt.json): the vision tower, where the
# activation runs, and what follows it down to the logits.
KEEP_STAGES = ("model.vision_encoder.transformer.layers.", "model.vision_projection",
               "model.vision_tower.transformer.layers.", "model.multi_modal_projector",
               "model.language_model.layers.0:input", "model.language_model.norm", "lm_head.tail8", "input.input_ids")
TMP = "/tmp/tf_act_variants"


def merge(base, over):
    out = dict(base)
    for k, v in over.items():
        out[k] = merge(out.get(k, {}), v) if isinstance(v, dict) else v
    return out


def materialise(root, name, base=None, overrides=None):
    """The checkpoint directory of a variant: the base's files, config.json with the overrides applied."""
    if base is None:
        with open(os.path.join(root, "model", name, "meta.json")) as f:
            meta = json.load(f)
        base, overrides = meta["base_checkpoint"], meta["config_overrides"]
    src = os.path.join(root, "ckpt", base)
    dst = os.path.join(TMP, name)
    shutil.rmtree(dst, ignore_errors=True)
    os.makedirs(dst)
    for f in sorted(os.listdir(src)):
        if f != "config.json":
            shutil.copy2(os.path.join(src, f), os.path.join(dst, f))
    with open(os.path.join(src, "config.json")) as f:
        cfg = json.load(f)
    with open(os.path.join(dst, "config.json"), "w") as f:
        json.dump(merge(cfg, overrides), f, indent=2, sort_keys=True)
    return dst


def prune_stages(case_dir):
    """Keep KEEP_STAGES; every dropped tensor keeps its sha256 in prompt.json -> hashed_tensors."""
    from safetensors.torch import load_file
    path = os.path.join(case_dir, "stages.safetensors")
    stages = load_file(path)
    keep = {k: v for k, v in stages.items() if k.startswith(KEEP_STAGES)}
    with open(os.path.join(case_dir, "prompt.json")) as f:
        prompt = json.load(f)
    for k, v in sorted(stages.items()):
        if k not in keep:
            prompt["hashed_tensors"][k] = {"sha256": tensor_sha256(v), "shape": list(v.shape),
                                           "dtype": str(v.dtype).replace("torch.", "")}
    write_json(os.path.join(case_dir, "prompt.json"), prompt)
    os.remove(path)
    save_tensors(path, keep)
    return len(keep)


def write_variant_goldens(root, only=None):
    import model_goldens
    summaries = {}
    for name, (base, overrides, case) in VARIANTS.items():
        if only and name not in only:
            continue
        ck = materialise(root, name, base, overrides)
        out = os.path.join(root, "model", name)
        shutil.rmtree(out, ignore_errors=True)
        deterministic()
        s = model_goldens.write_golden(
            ck, out, os.path.join(root, "images"), [case], command=f"ref.py acts (act_goldens.VARIANTS['{name}'])",
            extra_meta={"base_checkpoint": base, "config_overrides": overrides, "seed": SEED,
                        "kept_stages": list(KEEP_STAGES)})
        n = prune_stages(os.path.join(out, case))
        summaries[name] = s
        print(name, s, f"{n} stages kept", flush=True)
    return summaries


def bf16_probe_values():
    """Every bf16 value with 2^-8 <= |x| < 16, then zeros, tiny and large values (2 * 12 * 128 + 16)."""
    import torch
    bits = []
    for e in range(127 - 8, 127 + 4):  # biased exponents of [2^-8, 16)
        for m in range(128):
            bits.append((e << 7) | m)
    bits += [b | 0x8000 for b in bits]
    x = torch.tensor([b - 65536 if b >= 32768 else b for b in bits], dtype=torch.int16).view(torch.bfloat16)
    edge = torch.tensor([0.0, -0.0, 1e-30, -1e-30, 1e-5, -1e-5, 20.0, -20.0, 30.0, -30.0, 50.0, -50.0,
                         88.0, -88.0, 100.0, -100.0], dtype=torch.bfloat16)
    return torch.cat([x, edge])


def write_act_probe(out_dir):
    import torch
    import transformers
    from transformers.activations import ACT2FN
    deterministic()
    x = bf16_probe_values()
    g = torch.Generator().manual_seed(SEED)
    up = (torch.randn(x.shape, generator=g) * 2.0).to(torch.bfloat16)
    tensors = {"x": x, "up": up}
    classes = {}
    with torch.no_grad():
        for a in ACTS:
            f = ACT2FN[a]
            classes[a] = type(f).__name__
            y = f(x)
            assert y.dtype == torch.bfloat16
            tensors[f"{a}.act"] = y
            tensors[f"{a}.act_mul"] = f(x) * up  # PixtralMLP: act_fn(gate_proj(x)) * up_proj(x)
    os.makedirs(out_dir, exist_ok=True)
    save_tensors(os.path.join(out_dir, "acts.safetensors"), tensors)
    write_json(os.path.join(out_dir, "acts.json"), {
        "command": "ref.py acts", "device": "cpu", "threads": torch.get_num_threads(), "n": int(x.numel()),
        "transformers": transformers.__version__, "torch": torch.__version__, "classes": classes,
        "tensors": {k: {"sha256": tensor_sha256(v), "shape": list(v.shape)} for k, v in sorted(tensors.items())}})
    print(f"acts probe: {x.numel()} values x {len(ACTS)} activations ({classes})", flush=True)
