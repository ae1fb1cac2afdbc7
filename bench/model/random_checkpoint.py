#!/usr/bin/python3
"""Writes a LightOnOCR (`lighton_ocr` layout) checkpoint with the shapes of a real config and random
bf16 weights, for CPU speed measurements only (numbers are meaningless; the oracle's real-shape
checkpoints are built on the GPU machine and are too large to bring back). Needs numpy.

usage: random_checkpoint.py CONFIG.json TOKENIZER_DIR OUT_DIR
  TOKENIZER_DIR holds tokenizer.json + tokenizer_config.json (the real Qwen3 tokenizer:
  scripts/fetch_test_data.sh puts it in tests/data/qwen3)."""
import json, os, shutil, struct, sys

import numpy as np


def bf16(a):
    u = a.astype(np.float32).view(np.uint32)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def main():
    cfg_path, tok_dir, out = sys.argv[1:4]
    cfg = json.load(open(cfg_path))
    t, v = cfg["text_config"], cfg["vision_config"]
    H, I, L = t["hidden_size"], t["intermediate_size"], t["num_hidden_layers"]
    nq, nkv, hd = t["num_attention_heads"], t["num_key_value_heads"], t["head_dim"]
    VH, VI, VL, P = v["hidden_size"], v["intermediate_size"], v["num_hidden_layers"], v["patch_size"]
    shapes = {"model.language_model.embed_tokens.weight": [t["vocab_size"], H], "model.language_model.norm.weight": [H]}
    for i in range(L):
        p = f"model.language_model.layers.{i}."
        shapes.update({p + "input_layernorm.weight": [H], p + "post_attention_layernorm.weight": [H],
                       p + "mlp.gate_proj.weight": [I, H], p + "mlp.up_proj.weight": [I, H],
                       p + "mlp.down_proj.weight": [H, I], p + "self_attn.q_proj.weight": [nq * hd, H],
                       p + "self_attn.k_proj.weight": [nkv * hd, H], p + "self_attn.v_proj.weight": [nkv * hd, H],
                       p + "self_attn.o_proj.weight": [H, nq * hd], p + "self_attn.q_norm.weight": [hd],
                       p + "self_attn.k_norm.weight": [hd]})
    shapes.update({"model.vision_encoder.ln_pre.weight": [VH], "model.vision_encoder.patch_conv.weight": [VH, 3, P, P],
                   "model.vision_projection.linear_1.weight": [H, VH], "model.vision_projection.linear_2.weight": [H, H],
                   "model.vision_projection.norm.weight": [VH],
                   "model.vision_projection.patch_merger.merging_layer.weight": [VH, 4 * VH]})
    for i in range(VL):
        p = f"model.vision_encoder.transformer.layers.{i}."
        for n in "qkvo":
            shapes[p + f"attention.{n}_proj.weight"] = [VH, VH]
        shapes.update({p + "attention_norm.weight": [VH], p + "ffn_norm.weight": [VH],
                       p + "feed_forward.gate_proj.weight": [VI, VH], p + "feed_forward.up_proj.weight": [VI, VH],
                       p + "feed_forward.down_proj.weight": [VH, VI]})
    rng = np.random.default_rng(0)
    header, blobs, off = {}, [], 0
    for name in sorted(shapes):
        s = shapes[name]
        a = np.ones(s, np.float32) if name.endswith("norm.weight") else rng.standard_normal(s, np.float32) * 0.02
        b = bf16(a).tobytes()
        header[name] = {"dtype": "BF16", "shape": s, "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    os.makedirs(out, exist_ok=True)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(os.path.join(out, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for b in blobs:
            f.write(b)
    shutil.copy(cfg_path, os.path.join(out, "config.json"))
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(tok_dir, f), os.path.join(out, f))
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.join(here, "..", "..")
    shutil.copy(os.path.join(root, "tools/reference/templates/LightOnOCR-1B-1025.chat_template.jinja"),
                os.path.join(out, "chat_template.jinja"))
    pre = {"image_processor_type": "PixtralImageProcessorFast", "do_convert_rgb": True, "do_resize": True,
           "do_rescale": True, "do_normalize": True, "size": {"longest_edge": 1540}, "patch_size": 14,
           "resample": 3, "rescale_factor": 0.00392156862745098,
           "image_mean": [0.48145466, 0.4578275, 0.40821073], "image_std": [0.26862954, 0.26130258, 0.27577711]}
    json.dump(pre, open(os.path.join(out, "preprocessor_config.json"), "w"), indent=1)
    json.dump({"do_sample": False, "eos_token_id": [151645, 151643]}, open(os.path.join(out, "generation_config.json"), "w"))
    print(f"{out}: {sum(int(np.prod(s)) for s in shapes.values()):,} parameters, {off:,} bytes")


if __name__ == "__main__":
    main()
