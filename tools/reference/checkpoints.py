"""`checkpoint` subcommand: complete HF checkpoint directories (tiny or full size) built by Transformers itself."""
import copy
import json
import os

from common import HERE, SEED, write_json
import tiny_tokenizer as tt

REAL_CONFIG = {
    "lighton_ocr": "lightonocr-1b.lighton_ocr.config.json",
    "mistral3": "lightonocr-1b.mistral3.config.json",
    "qwen3_5": "qwen3.5-0.8b.config.json",
}
TEMPLATE = {"lighton_ocr": "LightOnOCR-1B-1025.chat_template.jinja", "mistral3": "LightOnOCR-1B-1025.chat_template.jinja",
            "qwen3_5": "Qwen3.5.chat_template.jinja"}

INIT_SCALE = 0.25   # initializer_range of every sub-config for tiny checkpoints (HF default 0.02 gives flat logits)
NORM_JITTER = 0.1   # std of the seeded noise added to parameters that HF initialises to a constant (norms, biases)

CLIP_MEAN = [0.48145466, 0.4578275, 0.40821073]
CLIP_STD = [0.26862954, 0.26130258, 0.27577711]

# Tiny dims. Everything structural stays as in the real config: head_dim != hidden/heads, GQA, q/k norm,
# qwen3_5 3:1 linear/full pattern with a full layer in the middle, partial rotary with interleaved M-RoPE,
# GDN with Hv = 2*Hk, 2x2 merge, real patch sizes and the real 48x48 position table.
TINY_PIXTRAL_TEXT = dict(vocab_size=tt.MODEL_VOCAB, hidden_size=64, intermediate_size=192, num_hidden_layers=3,
                         num_attention_heads=4, num_key_value_heads=2, head_dim=32, max_position_embeddings=4096)
TINY_PIXTRAL_VISION = dict(hidden_size=64, num_hidden_layers=3, num_attention_heads=4, head_dim=16, intermediate_size=128)
TINY_QWEN_TEXT = dict(vocab_size=tt.MODEL_VOCAB, hidden_size=64, intermediate_size=192, num_hidden_layers=6,
                      num_attention_heads=4, num_key_value_heads=2, head_dim=64, linear_key_head_dim=16,
                      linear_value_head_dim=16, linear_num_key_heads=2, linear_num_value_heads=4,
                      max_position_embeddings=32768,
                      layer_types=["linear_attention", "linear_attention", "linear_attention", "full_attention",
                                   "linear_attention", "linear_attention"])
TINY_QWEN_ROPE_SECTION = [3, 3, 2]  # rotary dim 16 -> 8 frequencies, split like the real [11, 11, 10]
TINY_QWEN_VISION = dict(depth=3, hidden_size=64, intermediate_size=128, num_heads=4, out_hidden_size=64)

TINY_PROCESSOR = {"pixtral_longest_edge": 280, "qwen_min_pixels": 65536, "qwen_max_pixels": 131072}
REAL_PROCESSOR = {"pixtral_longest_edge": 1540, "qwen_min_pixels": 65536, "qwen_max_pixels": 16777216}


def family_regex(family):
    return tt.QWEN3_5_REGEX if family == "qwen3_5" else tt.QWEN3_REGEX


def make_config_dict(family, size, ids, config_path=None, untied=False, init_scale=INIT_SCALE):
    path = config_path or os.path.join(HERE, "configs", REAL_CONFIG[family])
    with open(path) as f:
        cfg = json.load(f)
    cfg = copy.deepcopy(cfg)
    tc, vc = cfg["text_config"], cfg["vision_config"]
    if size == "tiny":
        if family == "qwen3_5":
            tc.update(TINY_QWEN_TEXT)
            tc["rope_parameters"]["mrope_section"] = list(TINY_QWEN_ROPE_SECTION)
            vc.update(TINY_QWEN_VISION)
        else:
            tc.update(TINY_PIXTRAL_TEXT)
            vc.update(TINY_PIXTRAL_VISION)
        for c in (cfg, tc, vc):
            c["initializer_range"] = init_scale
        for c in (cfg, tc):
            c["dtype"] = "float32"
        cfg["dtype"] = "float32"
    # Token ids follow the tiny tokenizer (full-size checkpoints reuse it; their embeddings keep the real row count).
    if family == "qwen3_5":
        cfg.update(image_token_id=ids["<|image_pad|>"], video_token_id=ids["<|video_pad|>"],
                   vision_start_token_id=ids["<|vision_start|>"], vision_end_token_id=ids["<|vision_end|>"])
        tc["eos_token_id"] = ids["<|endoftext|>"]
    else:
        cfg.update(image_token_id=ids["<|image_pad|>"], eos_token_id=ids["<|im_end|>"], pad_token_id=ids["<|endoftext|>"])
    if untied:
        cfg["tie_word_embeddings"] = False
        tc["tie_word_embeddings"] = False
    return cfg


def build_model(cfg_dict, seed, device="cpu", dtype=None):
    import torch
    from transformers import AutoConfig, AutoModelForImageTextToText
    d = dict(cfg_dict)
    config = AutoConfig.for_model(d.pop("model_type"), **d)
    torch.manual_seed(seed)
    with torch.device(device):
        model = AutoModelForImageTextToText.from_config(config, dtype=dtype or torch.float32)
    return model


def jitter_constant_params(model, seed, std=NORM_JITTER):
    """HF initialises norms to 1 (or 0 for Qwen3.5's (1+w) norms), biases and dt_bias to constants; a C++ port
    that ignored such a tensor would still match. Add seeded noise so every tensor matters. Returns names touched."""
    import torch
    g = torch.Generator(device="cpu").manual_seed(seed + 1)
    touched = []
    with torch.no_grad():
        for name, p in sorted(model.named_parameters(), key=lambda kv: kv[0]):
            flat = p.detach().reshape(-1)
            if flat.numel() > 0 and bool((flat == flat[0]).all()):
                noise = torch.randn(p.shape, generator=g, dtype=torch.float32) * std
                p.add_(noise.to(p.device, p.dtype))
                touched.append(name)
    return touched


def mtp_tensors(tc, seed, dtype, init_scale):
    """Random MTP weights with the names/shapes of the published Qwen3.5 checkpoints (dropped by 5.17 at load)."""
    import torch
    g = torch.Generator(device="cpu").manual_seed(seed + 2)
    H, I, D = tc["hidden_size"], tc["intermediate_size"], tc["head_dim"]
    Hq, Hkv = tc["num_attention_heads"], tc["num_key_value_heads"]
    shapes = {
        "mtp.fc.weight": [H, 2 * H],
        "mtp.pre_fc_norm_embedding.weight": [H], "mtp.pre_fc_norm_hidden.weight": [H], "mtp.norm.weight": [H],
    }
    for i in range(tc.get("mtp_num_hidden_layers", 1)):
        p = f"mtp.layers.{i}."
        shapes.update({
            p + "input_layernorm.weight": [H], p + "post_attention_layernorm.weight": [H],
            p + "self_attn.q_proj.weight": [Hq * D * 2, H], p + "self_attn.k_proj.weight": [Hkv * D, H],
            p + "self_attn.v_proj.weight": [Hkv * D, H], p + "self_attn.o_proj.weight": [H, Hq * D],
            p + "self_attn.q_norm.weight": [D], p + "self_attn.k_norm.weight": [D],
            p + "mlp.gate_proj.weight": [I, H], p + "mlp.up_proj.weight": [I, H], p + "mlp.down_proj.weight": [H, I],
        })
    out = {}
    for name in sorted(shapes):
        std = NORM_JITTER if len(shapes[name]) == 1 else init_scale
        out[name] = (torch.randn(shapes[name], generator=g, dtype=torch.float32) * std).to(dtype)
    return out


def tokenizer_config(family, size):
    extra = [c for c, s in tt.ADDED_TOKENS if s and c != "<|endoftext|>"]
    d = {"add_bos_token": False, "add_prefix_space": False, "backend": "tokenizers", "bos_token": None,
         "clean_up_tokenization_spaces": False, "eos_token": "<|im_end|>", "errors": "replace",
         "extra_special_tokens": extra, "pad_token": "<|endoftext|>", "split_special_tokens": False,
         "unk_token": None}
    if family == "qwen3_5":
        d.update(tokenizer_class="Qwen3_5Tokenizer", model_max_length=262144, processor_class="Qwen3VLProcessor")
    else:
        d.update(tokenizer_class="Qwen2Tokenizer", model_max_length=131072, processor_class="LightOnOcrProcessor",
                 image_token="<|image_pad|>", image_break_token="<|vision_pad|>", image_end_token="<|vision_end|>")
    return d


def generation_config(family, ids):
    eot, im_end = ids["<|endoftext|>"], ids["<|im_end|>"]
    if family == "qwen3_5":
        return {"bos_token_id": eot, "do_sample": True, "eos_token_id": [im_end, eot], "pad_token_id": eot,
                "temperature": 1.0, "top_k": 20, "top_p": 0.95}
    return {"bos_token_id": eot, "do_sample": True, "eos_token_id": [im_end, eot], "pad_token_id": eot,
            "temperature": 0.2, "top_k": 0, "top_p": 0.9}


def make_processor(family, size, tok, template):
    from transformers import TokenizersBackend
    procset = TINY_PROCESSOR if size == "tiny" else REAL_PROCESSOR
    if family == "qwen3_5":
        from transformers import Qwen2VLImageProcessor, Qwen3VLProcessor, Qwen3VLVideoProcessor
        ht = TokenizersBackend(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>", bos_token=None)
        ip = Qwen2VLImageProcessor(size={"shortest_edge": procset["qwen_min_pixels"], "longest_edge": procset["qwen_max_pixels"]},
                                   patch_size=16, temporal_patch_size=2, merge_size=2, image_mean=[0.5] * 3,
                                   image_std=[0.5] * 3, resample=3, do_convert_rgb=True)
        return Qwen3VLProcessor(image_processor=ip, tokenizer=ht, video_processor=Qwen3VLVideoProcessor(),
                                chat_template=template)
    from transformers import LightOnOcrProcessor, PixtralImageProcessor
    ht = TokenizersBackend(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>", bos_token=None,
                           image_token="<|image_pad|>", image_break_token="<|vision_pad|>",
                           image_end_token="<|vision_end|>")
    ip = PixtralImageProcessor(size={"longest_edge": procset["pixtral_longest_edge"]}, patch_size=14, resample=3,
                               image_mean=CLIP_MEAN, image_std=CLIP_STD, do_convert_rgb=True)
    return LightOnOcrProcessor(image_processor=ip, tokenizer=ht, patch_size=14, spatial_merge_size=2,
                               chat_template=template)


def write_checkpoint(family, size, out, config_path=None, seed=SEED, dtype="bf16", untied=False,
                     init_scale=INIT_SCALE, device=None):
    """Build, save and return a summary dict (param counts, touched tensors)."""
    import torch
    from safetensors.torch import load_file, save_file
    os.makedirs(out, exist_ok=True)
    tok = tt.train(family_regex(family))
    ids = tt.token_ids(tok)
    cfg = make_config_dict(family, size, ids, config_path, untied, init_scale)
    tdtype = torch.bfloat16 if dtype == "bf16" else torch.float32
    if size == "full":
        model = build_model(cfg, seed, device=device or "cuda", dtype=torch.bfloat16)
        touched = []
    else:
        model = build_model(cfg, seed, device="cpu", dtype=torch.float32)
        touched = jitter_constant_params(model, seed)
    model = model.to(tdtype)
    for sub in ("text_config", "vision_config"):  # keep sub-config dtypes consistent with the saved weights
        if hasattr(model.config, sub):
            getattr(model.config, sub).dtype = tdtype
    n_params = sum(p.numel() for p in model.parameters())  # tied weights are one Parameter, counted once
    n_vision = sum(p.numel() for n, p in model.named_parameters() if ".visual." in n or "vision_" in n)
    model.save_pretrained(out)
    if family == "qwen3_5":
        st = os.path.join(out, "model.safetensors")
        if os.path.exists(st):
            tensors = load_file(st)
            tensors.update(mtp_tensors(cfg["text_config"], seed, tdtype, init_scale))
            save_file({k: tensors[k] for k in sorted(tensors)}, st, metadata={"format": "pt"})
    with open(os.path.join(HERE, "templates", TEMPLATE[family]), encoding="utf-8") as f:
        template = f.read()
    proc = make_processor(family, size, tok, template)
    proc.save_pretrained(out)
    # Canonical tokenizer files (HF's save would re-serialise them through its own class).
    with open(os.path.join(out, "tokenizer.json"), "w", encoding="utf-8") as f:
        f.write(tt.tokenizer_json_text(tok))
    write_json(os.path.join(out, "tokenizer_config.json"), tokenizer_config(family, size))
    with open(os.path.join(out, "chat_template.jinja"), "w", encoding="utf-8") as f:
        f.write(template)
    proc.image_processor.to_json_file(os.path.join(out, "preprocessor_config.json"))
    gc = generation_config(family, ids)
    gc["transformers_version"] = __import__("transformers").__version__
    write_json(os.path.join(out, "generation_config.json"), gc)
    del model
    return {"family": family, "size": size, "dtype": dtype, "untied": untied, "seed": seed, "init_scale": init_scale,
            "norm_jitter": NORM_JITTER if size == "tiny" else 0.0, "n_params": n_params, "n_vision_params": n_vision,
            "jittered": touched, "token_ids": ids, "tokenizer_vocab": tok.get_vocab_size()}
