"""Train the demo checkpoints (models/demo-lighton, models/demo-qwen35) on synthetic text lines.

Runs on the GPU machine with Transformers 5.17's own LightOnOcrForConditionalGeneration (--family lighton_ocr)
or Qwen3_5ForConditionalGeneration (--family qwen3_5, helpers in qwen35.py). One command:

  python3 tools/train_demo/train.py [--family F] --fonts .fonts --out OUT [--train-seconds 330] [--steps N]

--steps 0 (default) measures the first steps and fixes the step count to fit --train-seconds (printed in the log;
pass it back with --steps to rerun the same schedule). --smoke: a few steps, save, reload, generate (~20 s).
Writes OUT/model.tar (checkpoint dir `demo-lighton/`, refreshed every --ckpt-every seconds), OUT/extra.tar
(held-out images + ground truth + oracle transcriptions + example images) and OUT/train_log.txt.
With --heldout-dir DIR (the committed examples/heldout) the oracle reads those images instead and writes
OUT/oracle.jsonl; with --resume CKPT training continues from a saved checkpoint (same tokenizer and files).
"""
import argparse
import copy
import io
import json
import math
import os
import random
import sys
import tarfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "reference"))

import numpy as np  # noqa: E402

import cer as cermod  # noqa: E402
import data  # noqa: E402
import qwen35  # noqa: E402

SEED = 20261129
BPE_VOCAB = 320       # byte alphabet (256) + 64 merges: nearly character level, so the decoder has no easy prior
MODEL_VOCAB = 384     # embedding rows (>= 320 + 26 added tokens)
MAX_TGT = 32          # target tokens per line incl. <|im_end|>
LOG = None


def log(*a):
    s = " ".join(str(x) for x in a)
    print(s, flush=True)
    if LOG:
        LOG.write(s + "\n")
        LOG.flush()


def train_tokenizer(seed, regex=None):
    import tiny_tokenizer as tt
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
    rng = random.Random(seed)
    corpus = [data.make_text(rng, 0.5) for _ in range(20000)]
    tok = Tokenizer(models.BPE(dropout=None, unk_token=None, continuing_subword_prefix="", end_of_word_suffix="",
                               fuse_unk=False, byte_fallback=False, ignore_merges=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(regex or tt.QWEN3_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)])
    tok.post_processor = processors.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    tok.decoder = decoders.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    trainer = trainers.BpeTrainer(vocab_size=BPE_VOCAB, min_frequency=2, show_progress=False, special_tokens=[],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus, trainer=trainer)
    for content, special in tt.ADDED_TOKENS:
        t = AddedToken(content, single_word=False, lstrip=False, rstrip=False, normalized=False, special=special)
        (tok.add_special_tokens if special else tok.add_tokens)([t])
    return tok


def make_config(ids):
    import checkpoints as ck
    cfg = ck.make_config_dict("lighton_ocr", "tiny", ids, init_scale=0.02)
    cfg["text_config"].update(vocab_size=MODEL_VOCAB, hidden_size=256, intermediate_size=768, num_hidden_layers=4,
                              num_attention_heads=4, num_key_value_heads=2, head_dim=64, max_position_embeddings=4096)
    cfg["vision_config"].update(hidden_size=256, num_hidden_layers=4, num_attention_heads=4, head_dim=64,
                                intermediate_size=768)
    return cfg


def write_static_files(tok, ids, out):
    """Tokenizer, template, processor and generation config next to the weights (greedy by default)."""
    import checkpoints as ck
    import tiny_tokenizer as tt
    from transformers import LightOnOcrProcessor, PixtralImageProcessor, TokenizersBackend
    with open(os.path.join(HERE, "..", "reference", "templates", ck.TEMPLATE["lighton_ocr"]), encoding="utf-8") as f:
        template = f.read()
    ht = TokenizersBackend(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>", bos_token=None,
                           image_token="<|image_pad|>", image_break_token="<|vision_pad|>",
                           image_end_token="<|vision_end|>")
    ip = PixtralImageProcessor(size={"longest_edge": data.IMG_W}, patch_size=14, resample=3,
                               image_mean=ck.CLIP_MEAN, image_std=ck.CLIP_STD, do_convert_rgb=True)
    proc = LightOnOcrProcessor(image_processor=ip, tokenizer=ht, patch_size=14, spatial_merge_size=2,
                               chat_template=template)
    proc.save_pretrained(out)
    with open(os.path.join(out, "tokenizer.json"), "w", encoding="utf-8") as f:
        f.write(tt.tokenizer_json_text(tok))
    ck.write_json(os.path.join(out, "tokenizer_config.json"), ck.tokenizer_config("lighton_ocr", "tiny"))
    with open(os.path.join(out, "chat_template.jinja"), "w", encoding="utf-8") as f:
        f.write(template)
    ip.to_json_file(os.path.join(out, "preprocessor_config.json"))
    eot, im_end = ids["<|endoftext|>"], ids["<|im_end|>"]
    ck.write_json(os.path.join(out, "generation_config.json"),
                  {"bos_token_id": eot, "do_sample": False, "eos_token_id": [im_end, eot], "pad_token_id": eot,
                   "transformers_version": __import__("transformers").__version__})


def save_checkpoint(model, static_dir, out_dir, tar_path, arcname="demo-lighton"):
    import shutil
    import torch
    os.makedirs(out_dir, exist_ok=True)
    venc = getattr(model.model, "vision_encoder", None)
    hook = venc.__dict__.pop("forward", None) if venc is not None else None  # the grouping wrapper holds tensors
    try:
        m = copy.deepcopy(model).to(torch.bfloat16)
    finally:
        if hook is not None:
            hook.last = None
            venc.forward = hook
    m.config.dtype = torch.bfloat16
    for sub in ("text_config", "vision_config"):
        getattr(m.config, sub).dtype = torch.bfloat16
    m.save_pretrained(out_dir)
    for name in os.listdir(static_dir):
        shutil.copy(os.path.join(static_dir, name), os.path.join(out_dir, name))
    if tar_path:
        tmp = tar_path + ".tmp"
        with tarfile.open(tmp, "w") as t:
            t.add(out_dir, arcname=arcname)
        os.replace(tmp, tar_path)
    del m


class ChunkedVision:
    """Runs the Pixtral tower on groups of images: HF builds one block mask over all patches of the call
    (quadratic in the batch), while per-group calls give the same per-image outputs far cheaper."""

    def __init__(self, venc, group):
        self.orig = venc.forward
        self.group = group
        self.last = None

    def __call__(self, pixel_values, image_sizes=None, *a, **k):
        import torch
        n = pixel_values.shape[0]
        if self.group <= 0 or n <= self.group:
            out = self.orig(pixel_values, image_sizes, *a, **k)
        else:
            outs = [self.orig(pixel_values[i:i + self.group], image_sizes[i:i + self.group], *a, **k)
                    for i in range(0, n, self.group)]
            d = {}
            for key in outs[0].keys():
                vals = [o[key] for o in outs]
                if torch.is_tensor(vals[0]):
                    d[key] = torch.cat(vals, dim=1)
                elif isinstance(vals[0], tuple):
                    d[key] = tuple(torch.cat([v[j] for v in vals], dim=1) for j in range(len(vals[0])))
            out = type(outs[0])(**d)
        self.last = out.last_hidden_state if hasattr(out, "last_hidden_state") else out[0]
        return out


def evaluate(ckpt_dir, files, folder, dev, batch=40):
    """Oracle transcriptions: the reloaded bf16 checkpoint, its own processor and chat template, greedy."""
    import torch
    from transformers import AutoModelForImageTextToText, AutoProcessor
    m = AutoModelForImageTextToText.from_pretrained(ckpt_dir).to(dev).eval()
    log(f"reloaded dtype {next(m.parameters()).dtype}, generation_config do_sample {m.generation_config.do_sample}")
    hp = AutoProcessor.from_pretrained(ckpt_dir)
    preds = []
    for s in range(0, len(files), batch):
        convs = [[{"role": "user", "content": [{"type": "image", "path": os.path.join(folder, f)}]}]
                 for f in files[s:s + batch]]
        e = hp.apply_chat_template(convs, add_generation_prompt=True, tokenize=True, return_dict=True,
                                   return_tensors="pt", padding=True).to(dev)
        with torch.no_grad():
            o = m.generate(**e, do_sample=False, max_new_tokens=48)
        new = o[:, e["input_ids"].shape[1]:]
        preds += hp.batch_decode(new, skip_special_tokens=True)
    del m
    torch.cuda.empty_cache()
    return preds


def read_heldout(folder):
    with open(os.path.join(folder, "ground_truth.jsonl"), encoding="utf-8") as f:
        gt = [json.loads(line) for line in f if line.strip()]
    return gt, [g["file"] for g in gt]


def report_cer(tag, gt, preds):
    c, ed, nc, ex = cermod.cer([g["text"] for g in gt], [p.strip() for p in preds])
    log(f"{tag} held-out CER {100 * c:.2f}% ({ed}/{nc}), exact {ex}/{len(gt)}")
    return c


def main():
    global LOG
    ap = argparse.ArgumentParser()
    ap.add_argument("--family", default="lighton_ocr", choices=["lighton_ocr", "qwen3_5"])
    ap.add_argument("--fonts", default=".fonts")
    ap.add_argument("--out", required=True)
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--train-seconds", type=float, default=300)
    ap.add_argument("--steps", type=int, default=0)
    ap.add_argument("--n-lines", type=int, default=140000)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--warmup", type=int, default=150)
    ap.add_argument("--vision-lr-mult", type=float, default=2.0)
    ap.add_argument("--ctc-weight", type=float, default=0.5)
    ap.add_argument("--vision-group", type=int, default=16, help="lighton: images per Pixtral call")
    ap.add_argument("--ckpt-every", type=float, default=90)
    ap.add_argument("--n-heldout", type=int, default=120)
    ap.add_argument("--heldout-dir", default="", help="evaluate on this committed held-out set instead")
    ap.add_argument("--procs", type=int, default=15)
    ap.add_argument("--resume", default="")
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("--max-train-seconds", type=float, default=0, help="stop early past this (call limits)")
    ap.add_argument("--stop-step", type=int, default=0, help="stop after this step of the --steps schedule")
    args = ap.parse_args()
    if args.smoke:
        args.n_lines, args.steps, args.n_heldout, args.batch = 4000, 12, 16, 32
    qwen = args.family == "qwen3_5"
    name = "demo-qwen35" if qwen else "demo-lighton"
    t_start = time.time()
    os.makedirs(args.out, exist_ok=True)
    LOG = open(os.path.join(args.out, "train_log.txt"), "a")
    import torch
    import torch.nn.functional as F
    from transformers import AutoModelForImageTextToText, AutoProcessor
    import transformers
    log(f"torch {torch.__version__} transformers {transformers.__version__} args {vars(args)}")
    seed = args.seed
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    dev = "cuda"
    work = f"/tmp/demo_work_{name}"
    static_dir = os.path.join(work, "static")
    os.makedirs(static_dir, exist_ok=True)

    import tiny_tokenizer as tt
    tok = train_tokenizer(SEED, tt.QWEN3_5_REGEX if qwen else None)
    if args.resume:  # the resumed checkpoint's tokenizer defines the ids its embeddings were trained on
        from tokenizers import Tokenizer
        with open(os.path.join(args.resume, "tokenizer.json"), encoding="utf-8") as f:
            same = f.read() == tt.tokenizer_json_text(tok)
        log(f"resume: rebuilt tokenizer identical to {args.resume}/tokenizer.json: {same}")
        tok = Tokenizer.from_file(os.path.join(args.resume, "tokenizer.json"))
    ids = tt.token_ids(tok)
    log(f"tokenizer vocab {tok.get_vocab_size()} ids {ids['<|im_end|>']} {ids['<|image_pad|>']}")
    if qwen:
        qwen35.write_static_files(tok, ids, static_dir, HERE)
    else:
        write_static_files(tok, ids, static_dir)
    if args.resume:  # the resumed checkpoint's own files win
        import shutil
        for fn in os.listdir(args.resume):
            if fn not in ("model.safetensors", "README.md", "config.json"):
                shutil.copy(os.path.join(args.resume, fn), os.path.join(static_dir, fn))
    # Data (rendered before CUDA starts, in forked workers).
    cidx = {c: i + 1 for i, c in enumerate(data.CHARSET)}
    t0 = time.time()
    texts, imgs = data.render_many(args.n_lines, seed, args.fonts, 0.6, args.procs,
                                   qwen35.resize_lines if qwen else None)
    log(f"rendered {len(texts)} lines {imgs.shape} in {time.time() - t0:.1f}s; sample {texts[:6]}")
    enc_t = tok.encode_batch(texts, add_special_tokens=False)
    im_end, pad = ids["<|im_end|>"], ids["<|endoftext|>"]
    tgt = np.full((len(texts), MAX_TGT), -100, np.int64)
    ctc_t = np.zeros((len(texts), data.MAX_CHARS), np.int64)
    ctc_l = np.zeros(len(texts), np.int64)
    keep = np.zeros(len(texts), bool)
    for i, (e, s) in enumerate(zip(enc_t, texts)):
        tids = e.ids + [im_end]
        if len(tids) <= MAX_TGT and len(s) <= data.MAX_CHARS:
            tgt[i, :len(tids)] = tids
            ctc_t[i, :len(s)] = [cidx[c] for c in s]
            ctc_l[i] = len(s)
            keep[i] = True
    log(f"kept {keep.sum()} lines; mean target tokens {np.mean([len(e.ids) for e in enc_t]):.1f}")
    cfg = qwen35.make_config(ids, MODEL_VOCAB) if qwen else make_config(ids)
    if args.resume:
        model = AutoModelForImageTextToText.from_pretrained(args.resume, dtype=torch.float32).to(dev)
    else:
        import checkpoints as ck
        model = ck.build_model(cfg, seed, device="cpu", dtype=torch.float32).to(dev)
    n_params = sum(p.numel() for p in model.parameters())
    log(f"model {type(model).__name__} params {n_params}")

    # Prompt ids from the real processor + chat template, and a check that our pixels = the processor's.
    proc = AutoProcessor.from_pretrained(static_dir)
    from PIL import Image
    rng = random.Random(seed + 7)
    fonts = data.font_files(args.fonts)
    probe = data.render("Probe 123", rng, fonts)
    probe_path = os.path.join(work, "probe.png")
    Image.fromarray(probe).convert("RGB").save(probe_path)
    conv = [{"role": "user", "content": [{"type": "image", "path": probe_path}]}]
    enc = proc.apply_chat_template(conv, add_generation_prompt=True, tokenize=True, return_dict=True,
                                   return_tensors="pt")
    prompt = enc["input_ids"][0].to(dev)  # [P]
    P = prompt.shape[0]
    pv_ref = enc["pixel_values"].to(dev)
    if qwen:
        def pixels(u8):
            return qwen35.pixel_values(u8)
        mine = pixels(torch.from_numpy(qwen35.resize_lines(probe[None], 1)).to(dev))
        grid = enc["image_grid_thw"].to(dev)  # [1, 3]
        assert grid[0].tolist() == [1, qwen35.GH, qwen35.GW], f"unexpected grid {grid.tolist()}"
    else:
        mean = torch.tensor(proc.image_processor.image_mean, device=dev).view(1, 3, 1, 1)
        std = torch.tensor(proc.image_processor.image_std, device=dev).view(1, 3, 1, 1)

        def pixels(u8):  # [B, H, W] uint8 -> [B, 3, H, W] float32, exactly the processor's rescale+normalise
            x = u8.to(torch.float32).unsqueeze(1).expand(-1, 3, -1, -1) * (1 / 255.0)
            return (x - mean) / std
        mine = pixels(torch.from_numpy(probe).to(dev)[None])
        assert pv_ref.shape[-2:] == (data.IMG_H, data.IMG_W), "processor resized the line"
    diff = (pv_ref - mine).abs().max().item() if pv_ref.shape == mine.shape else float("inf")
    log(f"prompt len {P}, image tokens {(prompt == ids['<|image_pad|>']).sum().item()}, "
        f"pixel_values {tuple(pv_ref.shape)} max|diff| vs ours {diff:.2e}")
    assert diff < 1e-4, "processor resized or normalised differently"

    n_cols = qwen35.GW if qwen else data.IMG_W // 14
    K = len(data.CHARSET) + 1
    hid_v = cfg["vision_config"]["hidden_size"]
    ctc_head = torch.nn.Linear(hid_v, 2 * K).to(dev)
    imgs_g = torch.from_numpy(imgs[keep]).to(dev)
    tgt_g = torch.from_numpy(tgt[keep]).to(dev)
    ctc_t_g, ctc_l_g = torch.from_numpy(ctc_t[keep]).to(dev), torch.from_numpy(ctc_l[keep]).to(dev)
    del imgs
    N = imgs_g.shape[0]
    sizes = torch.tensor([[data.IMG_H, data.IMG_W]], device=dev)
    restore_attn = None
    if qwen:
        # M-RoPE positions of a full-length row, computed once by the model's own get_rope_index (every row has
        # the same prompt and grid; target tokens are text, so their positions do not depend on their ids).
        import inspect
        L = P + MAX_TGT
        mm = enc.get("mm_token_type_ids")
        mm_full = None if mm is None else torch.cat([mm.to(dev), torch.zeros(1, MAX_TGT, dtype=mm.dtype,
                                                                                  device=dev)], 1)
        full = torch.cat([prompt, torch.full((MAX_TGT,), pad, device=dev)])[None]
        sig = inspect.signature(model.model.get_rope_index).parameters
        kw = dict(input_ids=full, image_grid_thw=grid, attention_mask=torch.ones_like(full))
        if "mm_token_type_ids" in sig:
            kw["mm_token_type_ids"] = mm_full
        pos = model.model.get_rope_index(**kw)[0]  # [3, 1, L]
        model.model.rope_deltas = None
        log(f"rope positions {tuple(pos.shape)} last {pos[:, 0, -1].tolist()} mm_token_type_ids {mm is not None}")
        cap = {}
        # The last vision block's output = the tower's last_hidden_state (before the merger), for the CTC head.
        model.model.visual.blocks[-1].register_forward_hook(
            lambda mod, a, out: cap.__setitem__("h", out[0] if isinstance(out, tuple) else out))

        def run_model(idx, stock=False):
            B = idx.shape[0]
            t = tgt_g[idx]
            inp = torch.cat([prompt[None].expand(B, -1), torch.where(t < 0, pad, t)], 1)  # [B, L]
            pv = pixels(imgs_g[idx])  # [B * 144, 1536]
            g = grid.expand(B, -1)
            if stock:  # Transformers' own path: positions from mm_token_type_ids, full attention mask
                kw = dict(attention_mask=torch.ones_like(inp))
                if mm_full is not None:
                    kw["mm_token_type_ids"] = mm_full.expand(B, -1)
                model.model.rope_deltas = None
                return model(input_ids=inp, pixel_values=pv, image_grid_thw=g, use_cache=False, **kw).logits
            kw = {} if mm_full is None else {"mm_token_type_ids": mm_full.expand(B, -1)}
            return model(input_ids=inp, pixel_values=pv, image_grid_thw=g, position_ids=pos.expand(-1, B, -1),
                         use_cache=False, **kw).logits

        def vision_last(B):
            return qwen35.ctc_features(cap["h"], B)  # [B, n_cols, C]
        with torch.no_grad():  # the shortcuts against the stock path, fp32, 6 lines
            idx = torch.arange(6, device=dev)
            a = run_model(idx, stock=True)
            b = run_model(idx)
            restore_attn, _, _ = qwen35.patch_vision_attention(model)
            c = run_model(idx)
            log(f"stock vs precomputed positions max|diff| {(a - b).abs().max().item():.2e}; "
                f"+ batched vision attention {(a - c).abs().max().item():.2e}")
            assert (a - b).abs().max().item() < 1e-3 and (a - c).abs().max().item() < 1e-3
    else:
        venc = model.model.vision_encoder
        chunk = ChunkedVision(venc, args.vision_group)
        venc.forward = chunk
        n_rows = data.IMG_H // 14

        def run_model(idx):
            B = idx.shape[0]
            t = tgt_g[idx]
            inp = torch.cat([prompt[None].expand(B, -1), torch.where(t < 0, pad, t)], 1)  # [B, P + MAX_TGT]
            am = torch.cat([torch.ones(B, P, dtype=torch.long, device=dev), (t >= 0).long()], 1)
            return model(input_ids=inp, attention_mask=am, pixel_values=pixels(imgs_g[idx]),
                         image_sizes=sizes.expand(B, -1)).logits

        def vision_last(B):
            return chunk.last.float().reshape(B, n_rows, n_cols, -1).mean(1)  # [B, n_cols, C]
        # Equivalence check of the grouped vision tower (fp32, no autocast) on 40 images.
        with torch.no_grad():
            idx = torch.arange(40, device=dev)
            px = pixels(imgs_g[idx])
            chunk.group = 0
            a = chunk(px, sizes.expand(40, -1)).last_hidden_state
            chunk.group = args.vision_group
            b = chunk(px, sizes.expand(40, -1)).last_hidden_state
            log(f"grouped vision tower max|diff| {(a - b).abs().max().item():.2e} shape {tuple(a.shape)}")
            assert a.shape[1] == 40 * n_rows * n_cols and (a - b).abs().max().item() < 1e-3

    def forward(idx):
        B = idx.shape[0]
        t = tgt_g[idx]
        with torch.autocast("cuda", dtype=torch.bfloat16):
            out_logits = run_model(idx)
        logits = out_logits[:, P - 1:P - 1 + MAX_TGT].float()  # [B, MAX_TGT, V]
        lm = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), t.reshape(-1), ignore_index=-100)
        lp = ctc_head(vision_last(B)).reshape(B, n_cols * 2, K).log_softmax(-1).transpose(0, 1)  # [T, B, K]
        ctc = F.ctc_loss(lp, ctc_t_g[idx], torch.full((B,), n_cols * 2, device=dev), ctc_l_g[idx],
                         zero_infinity=True)
        return lm, ctc

    heldout_gt = None
    if args.heldout_dir:
        heldout_gt, heldout_files = read_heldout(args.heldout_dir)
        if args.resume:
            report_cer("BASELINE (resumed checkpoint)", heldout_gt,
                       evaluate(args.resume, heldout_files, args.heldout_dir, dev))

    vis = [p for n, p in model.named_parameters() if "vision" in n or "visual" in n]
    dec = [p for n, p in model.named_parameters() if not ("vision" in n or "visual" in n)]
    opt = torch.optim.AdamW([{"params": dec, "lr_mult": 1.0},
                             {"params": vis + list(ctc_head.parameters()), "lr_mult": args.vision_lr_mult}],
                            lr=args.lr, betas=(0.9, 0.98), weight_decay=0.01)
    gen = torch.Generator(device=dev).manual_seed(seed)
    total = args.steps
    warm = args.warmup if not args.smoke else 2
    step, t_train, last_ckpt = 0, time.time(), time.time()
    model.train()
    ckpt_dir = os.path.join(work, name)
    model_tar = os.path.join(args.out, "model.tar")
    ema = None
    while True:
        if total == 0 and step == 40:
            per = (time.time() - t_train) / 40
            total = int(args.train_seconds / per)
            log(f"step time {per * 1000:.1f} ms -> total steps {total} (rerun with --steps {total})")
        T = total if total else 10 ** 9
        if step >= T:
            break
        if args.stop_step and step >= args.stop_step:
            log(f"stopping at step {step}/{T}: --stop-step")
            break
        if args.max_train_seconds and time.time() - t_train > args.max_train_seconds:
            log(f"stopping at step {step}/{T}: --max-train-seconds {args.max_train_seconds:.0f} reached")
            break
        lr_f = min(1.0, (step + 1) / warm) * (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * min(1.0, step / T))))
        for g in opt.param_groups:
            g["lr"] = args.lr * g["lr_mult"] * lr_f
        idx = torch.randint(0, N, (args.batch,), device=dev, generator=gen)
        lm, ctc = forward(idx)
        loss = lm + args.ctc_weight * ctc
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(model.parameters()) + list(ctc_head.parameters()), 1.0)
        opt.step()
        step += 1
        lv = (lm.item(), ctc.item()) if step % 50 == 0 or args.smoke else None
        if lv:
            ema = lv
            log(f"step {step}/{T} lm {lv[0]:.4f} ctc {lv[1]:.4f} lr {args.lr * lr_f:.2e} t {time.time() - t_train:.0f}s")
        if time.time() - last_ckpt > args.ckpt_every:
            save_checkpoint(model, static_dir, ckpt_dir, model_tar, name)
            last_ckpt = time.time()
            log(f"checkpoint at step {step} ({time.time() - t_start:.0f}s since start)")
    log(f"trained {step} steps x {args.batch} lines in {time.time() - t_train:.0f}s; last lm/ctc {ema}")
    if restore_attn:
        restore_attn()  # the oracle below runs the stock Transformers code
    save_checkpoint(model, static_dir, ckpt_dir, model_tar, name)
    log(f"final checkpoint saved, {os.path.getsize(model_tar)} bytes tar")
    del model
    torch.cuda.empty_cache()

    if heldout_gt is not None:
        t0 = time.time()
        preds = evaluate(ckpt_dir, heldout_files, args.heldout_dir, dev)
        report_cer(f"ORACLE ({time.time() - t0:.1f}s)", heldout_gt, preds)
        with open(os.path.join(args.out, "oracle.jsonl"), "w", encoding="utf-8") as f:
            for fn, p in zip(heldout_files, preds):
                f.write(json.dumps({"file": fn, "text": p}, ensure_ascii=False) + "\n")
        for g, p in list(zip(heldout_gt, preds))[:12]:
            log(f"  {g['text']!r} -> {p!r}")
        log(f"done in {time.time() - t_start:.0f}s")
        return

    # Held-out set + oracle transcriptions from the reloaded bf16 checkpoint through the processor.
    hdir = os.path.join(work, "heldout")
    os.makedirs(hdir, exist_ok=True)
    gt, files = [], []
    for i, (text, arr) in enumerate(data.heldout(args.n_heldout, SEED + 1000, args.fonts)):
        fname = f"line_{i:03d}.png"
        Image.fromarray(arr).convert("RGB").save(os.path.join(hdir, fname))
        gt.append({"file": fname, "text": text})
        files.append(fname)
    t0 = time.time()
    preds = evaluate(ckpt_dir, files, hdir, dev)
    report_cer(f"ORACLE ({time.time() - t0:.1f}s)", gt, preds)
    for g, p in list(zip(gt, preds))[:12]:
        log(f"  {g['text']!r} -> {p!r}")
    with open(os.path.join(hdir, "ground_truth.jsonl"), "w", encoding="utf-8") as f:
        for g in gt:
            f.write(json.dumps(g, ensure_ascii=False) + "\n")
    with open(os.path.join(hdir, "oracle_transformers.jsonl"), "w", encoding="utf-8") as f:
        for fn, p in zip(files, preds):
            f.write(json.dumps({"file": fn, "text": p}, ensure_ascii=False) + "\n")
    # Examples: the three first held-out style lines rendered with readable content.
    exdir = os.path.join(work, "examples")
    os.makedirs(exdir, exist_ok=True)
    for j, text in enumerate(["Invoice 2026-11-29", "Total: $1,234.56", "The quick brown fox"]):
        Image.fromarray(data.render(text, random.Random(j), [fonts[j % len(fonts)]], clean=True)).convert(
            "RGB").save(os.path.join(exdir, f"line{j + 1}.png"))
    with tarfile.open(os.path.join(args.out, "extra.tar"), "w") as t:
        t.add(hdir, arcname="heldout")
        t.add(exdir, arcname="examples")
    log(f"done in {time.time() - t_start:.0f}s")


if __name__ == "__main__":
    main()
