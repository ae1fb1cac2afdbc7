#!/usr/bin/env python3
"""Device-side checks: Transformers loads every committed tiny checkpoint, processes every golden image through
the chat template, and generates; full-size configs build, report parameter counts, save, load and generate."""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def verify_tiny(root):
    import torch
    from safetensors import safe_open
    from transformers import AutoTokenizer
    import model_goldens
    ok = True
    with open(os.path.join(root, "images", "cases.json")) as f:
        cases = json.load(f)
    for name in sorted(os.listdir(os.path.join(root, "ckpt"))):
        ck = os.path.join(root, "ckpt", name)
        model, proc, cfg = model_goldens.load(ck)
        tok = AutoTokenizer.from_pretrained(ck)
        with open(os.path.join(ck, "tokenizer.json")) as f:
            tj = json.load(f)
        live = json.loads(tok.backend_tokenizer.to_str())
        same_pre = live["pre_tokenizer"]["pretokenizers"][0] == tj["pre_tokenizer"]["pretokenizers"][0]
        sample = "Hello, wörld! e\u0301 12345 <|im_start|>user\n<think>x</think>"
        same_ids = tok(sample)["input_ids"] == __import__("tokenizers").Tokenizer.from_file(
            os.path.join(ck, "tokenizer.json")).encode(sample).ids
        with safe_open(os.path.join(ck, "model.safetensors"), "pt") as f:
            keys = list(f.keys())
        n_mtp = sum(k.startswith("mtp.") for k in keys)
        print(f"[{name}] class={type(model).__name__} dtype={next(model.parameters()).dtype} "
              f"tokenizer={type(tok).__name__} same_split_regex={same_pre} same_ids={same_ids} "
              f"normalizer={live['normalizer']} mtp_tensors={n_mtp} lm_head_stored={'lm_head.weight' in keys}")
        ok &= same_ids
        for c in cases:
            msgs = [{"role": "user", "content": [{"type": "image", "path": os.path.join(root, "images", c["file"])},
                                                 {"type": "text", "text": "Read."}]}]
            try:
                inp = proc.apply_chat_template(msgs, add_generation_prompt=True, tokenize=True, return_dict=True,
                                               return_tensors="pt")
                n_img = int((inp["input_ids"] == model.config.image_token_id).sum())
                with torch.no_grad():
                    o = model.generate(**inp, max_new_tokens=3, do_sample=False)
                print(f"   {c['name']:16s} ok  image_tokens={n_img:4d} prompt={inp['input_ids'].shape[1]:4d} "
                      f"new={o[0, inp['input_ids'].shape[1]:].tolist()}")
            except Exception as e:  # noqa: BLE001
                print(f"   {c['name']:16s} ERROR {type(e).__name__}: {str(e)[:200]}")
    return ok


def verify_full(names, save):
    import torch
    import checkpoints
    import tiny_tokenizer as tt
    from transformers import AutoModelForImageTextToText, AutoProcessor
    from PIL import Image
    for fam, cfgfile in names:
        t0 = time.time()
        out = f"/tmp/full/{os.path.basename(cfgfile)}"
        cfgpath = os.path.join(os.path.dirname(os.path.abspath(__file__)), "configs", cfgfile)
        if save:
            s = checkpoints.write_checkpoint(fam, "full", out, cfgpath, dtype="bf16")
            print(f"[full {cfgfile}] params={s['n_params']:,} ({s['n_params'] / 1e9:.3f} B) "
                  f"vision={s['n_vision_params']:,} built+saved in {time.time() - t0:.0f}s", flush=True)
            model = AutoModelForImageTextToText.from_pretrained(out, dtype=torch.bfloat16, device_map="cuda")
            proc = AutoProcessor.from_pretrained(out)
        else:
            tok = tt.train(checkpoints.family_regex(fam))
            cfg = checkpoints.make_config_dict(fam, "full", tt.token_ids(tok), cfgpath)
            model = checkpoints.build_model(cfg, 0, device="cuda", dtype=torch.bfloat16)
            n = sum(p.numel() for p in model.parameters())
            print(f"[full {cfgfile}] params={n:,} ({n / 1e9:.3f} B) built in {time.time() - t0:.0f}s", flush=True)
            proc = checkpoints.make_processor(fam, "full", tok, open(os.path.join(
                os.path.dirname(os.path.abspath(__file__)), "templates", checkpoints.TEMPLATE[fam])).read())
        img = Image.new("RGB", (700, 500), (240, 240, 240))
        msgs = [{"role": "user", "content": [{"type": "image", "image": img}]}]
        inp = proc.apply_chat_template(msgs, add_generation_prompt=True, tokenize=True, return_dict=True,
                                       return_tensors="pt").to("cuda")
        with torch.no_grad():
            o = model.generate(**inp, max_new_tokens=4, do_sample=False)
        print(f"   loaded={type(model).__name__} generated {o[0, inp['input_ids'].shape[1]:].tolist()} "
              f"total {time.time() - t0:.0f}s", flush=True)
        del model
        torch.cuda.empty_cache()


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "golden"))
    ap.add_argument("--tiny", action="store_true")
    ap.add_argument("--full", action="store_true")
    ap.add_argument("--save-full", action="store_true")
    a = ap.parse_args()
    if a.tiny:
        verify_tiny(a.root)
    if a.full:
        verify_full([("lighton_ocr", "lightonocr-1b.lighton_ocr.config.json"),
                     ("mistral3", "lightonocr-1b.mistral3.config.json"),
                     ("qwen3_5", "qwen3.5-0.8b.config.json"), ("qwen3_5", "qwen3.5-4b.config.json")], a.save_full)
