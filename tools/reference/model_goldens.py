"""`golden` subcommand: prompt ids, processor outputs, per-stage tensors and greedy ids from Transformers."""
import copy
import json
import os
import re

from common import compact_bf16, put, save_tensors, tensor_sha256, write_json

N_NEW = 64
N_TAIL = 8  # teacher-forced logits rows kept: positions P-1 .. P+6 (predicting new tokens 0..7)


def _img(images_dir, f):
    return {"type": "image", "path": os.path.join(images_dir, f)}


def conversations(family, images_dir, subset=None):
    sys_msg = {"role": "system", "content": "You are a helpful assistant."}
    q = {"role": "user", "content": [{"type": "text", "text": "What is 12 + 30? Answer briefly, then explain."}]}
    if family == "qwen3_5":
        convs = [
            ("ocr_nothink", [{"role": "user", "content": [_img(images_dir, "page_1583x2048.png")]}],
             {"enable_thinking": False}),
            ("grounding_think", [{"role": "user", "content": [_img(images_dir, "photo_noise.png"),
                                                              {"type": "text", "text": "grounding"}]}],
             {"enable_thinking": True}),
            ("two_images", [{"role": "user", "content": [_img(images_dir, "webp_lossless.webp"),
                                                         _img(images_dir, "palette_P.png"),
                                                         {"type": "text", "text": "Describe both."}]}],
             {"enable_thinking": False}),
            ("text_only", [sys_msg, q], {}),
        ]
    else:
        convs = [
            ("ocr_plain", [{"role": "user", "content": [_img(images_dir, "page_1583x2048.png")]}], {}),
            ("grounding", [{"role": "user", "content": [_img(images_dir, "page_1540x1190.png"),
                                                        {"type": "text", "text": "grounding"}]}], {}),
            ("two_images", [{"role": "user", "content": [_img(images_dir, "rgba_alpha.png"),
                                                         _img(images_dir, "jpeg_exif6.jpg"),
                                                         {"type": "text", "text": "Compare the two images."}]}], {}),
            ("text_only", [sys_msg, q], {}),
        ]
    if subset:
        convs = [c for c in convs if c[0] in subset]
    return convs


def stage_patterns(model_type):
    if model_type == "qwen3_5":
        v = r"model\.visual\."
        return [v + r"patch_embed", v + r"rotary_pos_emb", v + r"blocks\.\d+", v + r"merger",
                r"model\.language_model\.(rotary_emb|norm)", r"model\.language_model\.layers\.\d+",
                r"model\.language_model\.layers\.0\.(linear_attn|mlp)", r"model\.language_model\.layers\.3\.self_attn",
                r"lm_head"]
    vt = r"model\.vision_encoder" if model_type == "lighton_ocr" else r"model\.vision_tower"
    pj = r"model\.vision_projection" if model_type == "lighton_ocr" else r"model\.multi_modal_projector"
    return [vt + r"\.(patch_conv|ln_pre|patch_positional_embedding)", vt + r"\.transformer\.layers\.\d+",
            pj, pj + r"\.(norm|patch_merger)", r"model\.language_model\.(rotary_emb|norm)",
            r"model\.language_model\.layers\.\d+", r"model\.language_model\.layers\.0\.(self_attn|mlp)", r"lm_head"]


def input_patterns(model_type):
    """Modules whose first input is also captured (stored as '<name>:input')."""
    if model_type == "qwen3_5":
        return [r"model\.visual\.blocks\.0", r"model\.language_model\.layers\.0"]
    return [r"model\.language_model\.layers\.0"]


class Capture:
    def __init__(self, model, model_type):
        self.calls, self.handles = {}, []
        pats = [re.compile(p + "$") for p in stage_patterns(model_type)]
        ipats = [re.compile(p + "$") for p in input_patterns(model_type)]
        for name, mod in model.named_modules():
            if any(p.match(name) for p in pats):
                self.handles.append(mod.register_forward_hook(self._out(name)))
            if any(p.match(name) for p in ipats):
                self.handles.append(mod.register_forward_pre_hook(self._in(name), with_kwargs=True))
            if name.endswith("rotary_emb") and name.startswith("model.language_model"):
                self.handles.append(mod.register_forward_pre_hook(self._pos(name), with_kwargs=True))

    def _add(self, key, t):
        self.calls.setdefault(key, []).append(t.detach().float().cpu().clone())

    def _out(self, name):
        def hook(mod, args, out):
            if isinstance(out, (tuple, list)):
                if "rotary" in name or "positional_embedding" in name:
                    for k, t in zip(("cos", "sin"), out):
                        self._add(f"{name}.{k}", t)
                    return
                out = next(o for o in out if hasattr(o, "shape"))
            elif not hasattr(out, "shape"):
                out = getattr(out, "last_hidden_state", None)
                if out is None:
                    return
            self._add(name, out)
        return hook

    def _in(self, name):
        def hook(mod, args, kwargs):
            x = args[0] if args else kwargs.get("hidden_states")
            if x is not None:
                self._add(name + ":input", x)
        return hook

    def _pos(self, name):
        def hook(mod, args, kwargs):
            p = args[1] if len(args) > 1 else kwargs.get("position_ids")
            if p is not None:
                self.calls.setdefault(name + ":position_ids", []).append(p.detach().cpu().clone())
        return hook

    def tensors(self):
        out = {}
        for k, lst in self.calls.items():
            if len(lst) == 1:
                out[k] = lst[0]
            else:
                for i, t in enumerate(lst):
                    out[f"{k}#{i}"] = t
        return out

    def close(self):
        for h in self.handles:
            h.remove()


def load(ckpt, device="cpu"):
    import torch
    from transformers import AutoModelForImageTextToText, AutoProcessor
    with open(os.path.join(ckpt, "config.json")) as f:
        cfg = json.load(f)
    dtype = torch.float32 if cfg.get("dtype", cfg.get("torch_dtype")) == "float32" else torch.bfloat16
    model = AutoModelForImageTextToText.from_pretrained(ckpt, dtype=dtype).to(device).eval()
    proc = AutoProcessor.from_pretrained(ckpt)
    return model, proc, cfg


def greedy(model, inputs, n_new=N_NEW):
    import torch
    gc = copy.deepcopy(model.generation_config)
    gc.eos_token_id = None  # eos must not stop: all n_new tokens exist
    gc.do_sample, gc.max_new_tokens, gc.min_new_tokens = False, n_new, None
    gc.temperature, gc.top_p, gc.top_k = None, None, None
    with torch.no_grad():
        o = model.generate(**inputs, generation_config=gc, output_logits=True, return_dict_in_generate=True)
    p = inputs["input_ids"].shape[1]
    ids = o.sequences[0, p:].tolist()
    steps = []
    for i, lg in enumerate(o.logits):
        l = lg[0].float()
        v, ix = torch.topk(l, 2)
        steps.append({"id": ids[i], "top1": int(ix[0]), "top2": int(ix[1]), "top1_logit": float(v[0]),
                      "top2_logit": float(v[1]), "margin": float(v[0] - v[1])})
        assert int(ix[0]) == ids[i] or float(v[0]) == float(v[1]), "greedy id is not the argmax"
    return ids, steps


def write_golden(ckpt, out_dir, images_dir, subset=None, device="cpu", command=None, extra_meta=None):
    import torch
    from common import sources
    model, proc, cfg = load(ckpt, device)
    mt = cfg["model_type"]
    family = mt
    summary = {}
    for name, msgs, kw in conversations("qwen3_5" if mt == "qwen3_5" else "lighton", images_dir, subset):
        cdir = os.path.join(out_dir, name)
        text = proc.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False, **kw)
        inputs = proc.apply_chat_template(msgs, add_generation_prompt=True, tokenize=True, return_dict=True,
                                          return_tensors="pt", **kw)
        inputs = {k: v.to(device) if hasattr(v, "to") else v for k, v in inputs.items()}
        ids, steps = greedy(model, inputs)
        store, hashes = {}, {}
        p = inputs["input_ids"].shape[1]
        full = torch.cat([inputs["input_ids"], torch.tensor([ids], device=device)], 1)
        tf_inputs = dict(inputs)
        tf_inputs["input_ids"] = full
        tf_inputs["attention_mask"] = torch.ones_like(full)
        if "mm_token_type_ids" in inputs:
            tf_inputs["mm_token_type_ids"] = torch.cat(
                [inputs["mm_token_type_ids"], torch.zeros((1, N_NEW), dtype=inputs["mm_token_type_ids"].dtype, device=device)], 1)
        cap = Capture(model, mt)
        with torch.no_grad():
            out = model(**tf_inputs, use_cache=False)
        cap.close()
        stages = cap.tensors()
        logits = stages.pop("lm_head")[0]  # [L, V]
        stages["lm_head.tail8"] = logits[p - 1:p - 1 + N_TAIL].contiguous()
        hashes["lm_head"] = {"sha256": tensor_sha256(logits), "shape": list(logits.shape), "dtype": "float32"}
        tf_argmax = logits[p - 1:p - 1 + N_NEW].argmax(-1).tolist()
        for k, v in sorted(stages.items()):
            put(store, hashes, k, v)
        store["input.input_ids"] = full[0].cpu()
        img_info = {}
        if "pixel_values" in inputs:
            put(store, hashes, "input.pixel_values", inputs["pixel_values"].float())
            if "image_sizes" in inputs:
                img_info["image_sizes"] = inputs["image_sizes"].tolist()
            if "image_grid_thw" in inputs:
                img_info["image_grid_thw"] = inputs["image_grid_thw"].tolist()
        image_id = model.config.image_token_id
        n_img = int((inputs["input_ids"] == image_id).sum())
        save_tensors(os.path.join(cdir, "stages.safetensors"), compact_bf16(store))
        write_json(os.path.join(cdir, "prompt.json"), {
            "messages": [{**m, "content": [{k: (os.path.basename(v) if k == "path" else v) for k, v in c.items()}
                                           for c in m["content"]] if isinstance(m["content"], list) else m["content"]}
                         for m in msgs],
            "images": [os.path.basename(c["path"]) for m in msgs if isinstance(m["content"], list)
                       for c in m["content"] if c.get("type") == "image"],
            "template_kwargs": kw, "prompt_text": text, "input_ids": inputs["input_ids"][0].tolist(),
            "n_image_tokens_total": n_img, "image_token_id": image_id, **img_info,
            "mm_token_type_ids": inputs["mm_token_type_ids"][0].tolist() if "mm_token_type_ids" in inputs else None,
            "hashed_tensors": hashes})
        agree = sum(int(a == b) for a, b in zip(tf_argmax, ids))
        write_json(os.path.join(cdir, "greedy.json"), {
            "prompt_len": p, "n_new": N_NEW, "new_ids": ids, "steps": steps,
            "min_margin": min(s["margin"] for s in steps),
            "teacher_forced_argmax": tf_argmax, "teacher_forced_agree": agree,
            "eos_stops": False})
        summary[name] = {"prompt_len": p, "n_image_tokens": n_img, "distinct_new": len(set(ids)),
                         "min_margin": min(s["margin"] for s in steps), "tf_agree": agree,
                         "stages": len(store)}
    write_json(os.path.join(out_dir, "meta.json"), {
        "command": command, "checkpoint": os.path.basename(os.path.normpath(ckpt)), "model_type": mt,
        "dtype": str(next(model.parameters()).dtype), "device": device, "threads": torch.get_num_threads(),
        "attn_implementation": getattr(model.config, "_attn_implementation", None), "n_new": N_NEW,
        "sources": sources(), "summary": summary, **(extra_meta or {})})
    return summary
