"""Train the demo checkpoints (models/demo-lighton, models/demo-qwen35) on synthetic text lines and blocks.

Runs on the GPU machine with Transformers 5.17's own LightOnOcrForConditionalGeneration (--family lighton_ocr,
helpers in lighton.py) or Qwen3_5ForConditionalGeneration (--family qwen3_5, helpers in qwen35.py). One command:

  python3 tools/train_demo/train.py [--family F] --fonts .fonts --out OUT [--train-seconds 420] [--steps N]

Each step trains on line images (--batch) or, for --block-frac of the steps, on 4-line block images
(--block-batch). --steps 0 (default): the cosine schedule runs over --train-seconds of wall time and the log prints
the step count reached (pass it back with --steps to rerun that many steps on a step schedule). --smoke: a few steps, save, reload,
generate. Writes OUT/model.tar.gz (the checkpoint directory, refreshed every --ckpt-every seconds; gzip keeps the
8.5 M qwen3_5 checkpoint under the 16 MiB a device call returns per file), OUT/train_log.txt
and, for each committed held-out set (--heldout-dir, --heldout-blocks-dir), OUT/oracle_<set>.jsonl: greedy
transcriptions of the reloaded bf16 checkpoint by the stock Transformers code. --resume CKPT continues from a saved
checkpoint (same tokenizer and files).
"""
import argparse
import copy
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
import lighton  # noqa: E402
import qwen35  # noqa: E402

SEED = 20261129
BPE_VOCAB = 320       # byte alphabet (256) + 64 merges: nearly character level, so the decoder has no easy prior
MODEL_VOCAB = 384     # embedding rows (>= 320 + 26 added tokens)
MAX_TGT = {"line": 32, "block": 128}  # target tokens per image incl. <|im_end|>
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
    corpus += [data.block_text(data.make_block(rng, data.BLOCK_KINDS[i % 4])) for i in range(4000)]
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


def write_static_files(fam, family, tok, ids, out):
    """Processor, tokenizer, template and generation config next to the weights (greedy by default); `fam` is
    the family's helper module (lighton or qwen35)."""
    import checkpoints as ck
    import tiny_tokenizer as tt
    with open(os.path.join(HERE, "..", "reference", "templates", ck.TEMPLATE[family]), encoding="utf-8") as f:
        template = f.read()
    proc = fam.make_processor(tok, template)
    proc.save_pretrained(out)
    with open(os.path.join(out, "tokenizer.json"), "w", encoding="utf-8") as f:
        f.write(tt.tokenizer_json_text(tok))
    ck.write_json(os.path.join(out, "tokenizer_config.json"), ck.tokenizer_config(family, "tiny"))
    with open(os.path.join(out, "chat_template.jinja"), "w", encoding="utf-8") as f:
        f.write(template)
    proc.image_processor.to_json_file(os.path.join(out, "preprocessor_config.json"))
    eot, im_end = ids["<|endoftext|>"], ids["<|im_end|>"]
    ck.write_json(os.path.join(out, "generation_config.json"),
                  {"bos_token_id": eot, "do_sample": False, "eos_token_id": [im_end, eot], "pad_token_id": eot,
                   "transformers_version": __import__("transformers").__version__})


def save_checkpoint(model, static_dir, out_dir, tar_path, arcname):
    import shutil
    import torch
    os.makedirs(out_dir, exist_ok=True)
    m = copy.deepcopy(model).to(torch.bfloat16)
    m.config.dtype = torch.bfloat16
    for sub in ("text_config", "vision_config"):
        getattr(m.config, sub).dtype = torch.bfloat16
    m.save_pretrained(out_dir)
    for name in os.listdir(static_dir):
        shutil.copy(os.path.join(static_dir, name), os.path.join(out_dir, name))
    if tar_path:
        tmp = tar_path + ".tmp"
        with tarfile.open(tmp, "w:gz", compresslevel=6) as t:
            t.add(out_dir, arcname=arcname)
        os.replace(tmp, tar_path)
    del m


def evaluate(ckpt_dir, files, folder, dev, batch=40, max_new=48):
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
            o = m.generate(**e, do_sample=False, max_new_tokens=max_new)
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
    log(f"{tag} CER {100 * c:.2f}% ({ed}/{nc}), exact {ex}/{len(gt)}")
    return c




class Bucket:
    """The training images of one size (lines or blocks) with their targets, prompt and placeholder rows."""

    def __init__(self, name, texts, imgs, tok, ids, batch, dev):
        import torch
        self.name, self.batch, self.max_tgt = name, batch, MAX_TGT[name]
        cidx = {c: i + 1 for i, c in enumerate(data.CHARSET)}
        enc = tok.encode_batch(texts, add_special_tokens=False)
        tgt = np.full((len(texts), self.max_tgt), -100, np.int64)
        ctc_t = np.zeros((len(texts), data.MAX_CHARS), np.int64)
        ctc_l = np.zeros(len(texts), np.int64)
        keep = np.zeros(len(texts), bool)
        for i, (e, s) in enumerate(zip(enc, texts)):
            tids = e.ids + [ids["<|im_end|>"]]
            if len(tids) <= self.max_tgt:
                tgt[i, :len(tids)] = tids
                if name == "line":
                    ctc_t[i, :len(s)] = [cidx[c] for c in s]
                    ctc_l[i] = len(s)
                keep[i] = True
        log(f"{name}: kept {keep.sum()}/{len(texts)}; mean target tokens {np.mean([len(e.ids) for e in enc]):.1f}; "
            f"sample {texts[:3]}")
        self.imgs = torch.from_numpy(imgs[keep]).to(dev)  # [N, H, W] uint8 (qwen3_5: already resized)
        self.tgt = torch.from_numpy(tgt[keep]).to(dev)  # [N, max_tgt]
        self.ctc_t, self.ctc_l = torch.from_numpy(ctc_t[keep]).to(dev), torch.from_numpy(ctc_l[keep]).to(dev)
        self.N = self.imgs.shape[0]

    def set_prompt(self, proc, probe_path, dev):
        enc = proc.apply_chat_template([{"role": "user", "content": [{"type": "image", "path": probe_path}]}],
                                       add_generation_prompt=True, tokenize=True, return_dict=True,
                                       return_tensors="pt")
        self.enc = enc
        self.prompt = enc["input_ids"][0].to(dev)  # [P]
        self.P = self.prompt.shape[0]


def render_data(args, qwen):
    post = qwen35.resize_lines if qwen else None
    t0 = time.time()
    lines = data.render_many(args.n_lines, args.seed, args.fonts, 0.6, args.procs, post)
    blocks = data.render_many(args.n_blocks, args.seed, args.fonts, 0.6, args.procs, post, blocks=True) \
        if args.n_blocks else None
    log(f"rendered {args.n_lines} lines {lines[1].shape} and {args.n_blocks} blocks "
        f"{None if blocks is None else blocks[1].shape} in {time.time() - t0:.1f}s")
    return lines, blocks


def lighton_runner(model, buckets, ids, proc, dev):
    """run(bucket, idx, stock) -> logits [B, P + max_tgt, V]; the batched image path unless stock."""
    import torch
    mean = torch.tensor(proc.image_processor.image_mean, device=dev).view(1, 3, 1, 1)
    std = torch.tensor(proc.image_processor.image_std, device=dev).view(1, 3, 1, 1)
    cap = {}

    def pixels(u8):  # [B, H, W] uint8 -> [B, 3, H, W] float32, exactly the processor's rescale+normalise
        x = u8.to(torch.float32).unsqueeze(1).expand(-1, 3, -1, -1) * (1 / 255.0)
        return (x - mean) / std

    for b in buckets:
        b.img_pos = (b.prompt == ids["<|image_pad|>"]).nonzero()[:, 0]
        b.pixels = pixels

    def run(b, idx, stock=False):
        B = idx.shape[0]
        t = b.tgt[idx]
        inp = torch.cat([b.prompt[None].expand(B, -1), torch.where(t < 0, ids["<|endoftext|>"], t)], 1)
        am = torch.cat([torch.ones(B, b.P, dtype=torch.long, device=dev), (t >= 0).long()], 1)
        pv = pixels(b.imgs[idx])
        if stock:
            sizes = torch.tensor([list(pv.shape[-2:])], device=dev).expand(B, -1)
            return model(input_ids=inp, attention_mask=am, pixel_values=pv, image_sizes=sizes).logits
        feats, cap["tower"] = lighton.image_features(model, pv)
        emb = model.get_input_embeddings()(inp).clone()
        emb[:, b.img_pos] = feats.to(emb.dtype)
        return model(inputs_embeds=emb, attention_mask=am).logits

    def ctc_feats():
        return lighton.ctc_features(cap["tower"])  # [B, 40, C]
    return run, ctc_feats, None


def qwen_runner(model, buckets, ids, proc, dev):
    """run(bucket, idx, stock) -> logits; M-RoPE positions of a full-length row computed once per bucket by the
    model's own get_rope_index (every row has the same prompt and grid; targets are text, so their positions do
    not depend on their ids), and the vision attention batched (qwen35.patch_vision_attention) unless stock."""
    import inspect
    import torch
    pad = ids["<|endoftext|>"]
    for b in buckets:
        b.grid = b.enc["image_grid_thw"].to(dev)  # [1, 3]
        mm = b.enc.get("mm_token_type_ids")
        b.mm_full = None if mm is None else torch.cat(
            [mm.to(dev), torch.zeros(1, b.max_tgt, dtype=mm.dtype, device=dev)], 1)
        full = torch.cat([b.prompt, torch.full((b.max_tgt,), pad, device=dev)])[None]
        kw = dict(input_ids=full, image_grid_thw=b.grid, attention_mask=torch.ones_like(full))
        if "mm_token_type_ids" in inspect.signature(model.model.get_rope_index).parameters:
            kw["mm_token_type_ids"] = b.mm_full
        b.pos = model.model.get_rope_index(**kw)[0]  # [3, 1, L]
        model.model.rope_deltas = None
        b.pixels = qwen35.pixel_values
        log(f"{b.name}: grid {b.grid.tolist()} rope positions {tuple(b.pos.shape)} last {b.pos[:, 0, -1].tolist()}")
    cap, state = {}, {"L": 0}
    # The last vision block's output = the tower's last_hidden_state (before the merger), for the CTC head.
    model.model.visual.blocks[-1].register_forward_hook(
        lambda mod, a, out: cap.__setitem__("h", out[0] if isinstance(out, tuple) else out))

    def run(b, idx, stock=False):
        B = idx.shape[0]
        t = b.tgt[idx]
        inp = torch.cat([b.prompt[None].expand(B, -1), torch.where(t < 0, pad, t)], 1)  # [B, L]
        u8 = b.imgs[idx]
        state["L"] = (u8.shape[1] // 16) * (u8.shape[2] // 16)
        cap["B"] = B
        kw = {} if b.mm_full is None else {"mm_token_type_ids": b.mm_full.expand(B, -1)}
        g = b.grid.expand(B, -1)
        if stock:  # Transformers' own path: positions from mm_token_type_ids, full attention mask
            model.model.rope_deltas = None
            return model(input_ids=inp, pixel_values=qwen35.pixel_values(u8), image_grid_thw=g, use_cache=False,
                         attention_mask=torch.ones_like(inp), **kw).logits
        return model(input_ids=inp, pixel_values=qwen35.pixel_values(u8), image_grid_thw=g,
                     position_ids=b.pos.expand(-1, B, -1), use_cache=False, **kw).logits

    def ctc_feats():
        return qwen35.ctc_features(cap["h"], cap["B"])  # [B, 36, C]
    # patched only after the stock comparison (main); returns the restore function
    def patch():
        undo = [qwen35.patch_vision_attention(model, state)[0],
                qwen35.patch_vision_positions(model, buckets[0].grid, log)]
        return lambda: [u() for u in undo if u]
    return run, ctc_feats, patch


def main():
    global LOG
    ap = argparse.ArgumentParser()
    ap.add_argument("--family", default="lighton_ocr", choices=["lighton_ocr", "qwen3_5"])
    ap.add_argument("--fonts", default=".fonts")
    ap.add_argument("--out", required=True)
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--train-seconds", type=float, default=420)
    ap.add_argument("--steps", type=int, default=0)
    ap.add_argument("--n-lines", type=int, default=140000)
    ap.add_argument("--n-blocks", type=int, default=40000)
    ap.add_argument("--batch", type=int, default=256, help="line images per step")
    ap.add_argument("--block-batch", type=int, default=0, help="block images per step (default batch / 4)")
    ap.add_argument("--block-frac", type=float, default=0.35, help="share of steps on blocks")
    ap.add_argument("--block-start", type=int, default=0, help="lines only before this step (a curriculum)")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--warmup", type=int, default=150)
    ap.add_argument("--vision-lr-mult", type=float, default=2.0)
    ap.add_argument("--ctc-weight", type=float, default=0.5)
    ap.add_argument("--ckpt-every", type=float, default=90)
    ap.add_argument("--heldout-dir", default="examples/heldout")
    ap.add_argument("--heldout-blocks-dir", default="examples/heldout_blocks")
    ap.add_argument("--procs", type=int, default=15)
    ap.add_argument("--resume", default="")
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("--max-train-seconds", type=float, default=0, help="stop early past this (call limits)")
    ap.add_argument("--qwen-size", default="m", choices=sorted(qwen35.SIZES), help="qwen3_5 widths (qwen35.py)")
    ap.add_argument("--profile", type=int, default=0, help="log a torch profile of this many steps from step 30")
    ap.add_argument("--stop-step", type=int, default=0, help="stop after this step of the --steps schedule")
    args = ap.parse_args()
    if args.smoke:
        args.n_lines, args.n_blocks, args.steps, args.batch = 4000, 1000, 12, 32
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
    fam = qwen35 if qwen else lighton
    write_static_files(fam, args.family, tok, ids, static_dir)
    if args.resume:  # the resumed checkpoint's own files win
        import shutil
        for fn in os.listdir(args.resume):
            if fn not in ("model.safetensors", "README.md", "config.json"):
                shutil.copy(os.path.join(args.resume, fn), os.path.join(static_dir, fn))
    (line_t, line_i), blocks = render_data(args, qwen)  # before CUDA starts, in forked workers
    bb = args.block_batch or max(1, args.batch // 4)
    buckets = [Bucket("line", line_t, line_i, tok, ids, args.batch, dev)]
    if blocks:
        buckets.append(Bucket("block", blocks[0], blocks[1], tok, ids, bb, dev))
    del line_i, blocks
    cfg = qwen35.make_config(ids, MODEL_VOCAB, args.qwen_size) if qwen else lighton.make_config(ids, MODEL_VOCAB)
    if args.resume:
        model = AutoModelForImageTextToText.from_pretrained(args.resume, dtype=torch.float32).to(dev)
    else:
        import checkpoints as ck
        model = ck.build_model(cfg, seed, device="cpu", dtype=torch.float32).to(dev)
    log(f"model {type(model).__name__} params {sum(p.numel() for p in model.parameters())}")

    # Prompt ids from the real processor + chat template, and a check that our pixels = the processor's.
    proc = AutoProcessor.from_pretrained(static_dir)
    from PIL import Image
    rng = random.Random(seed + 7)
    fonts = data.font_files(args.fonts)
    for b in buckets:
        probe = data.render("Probe 123", rng, fonts) if b.name == "line" else \
            data.render_block([["Probe", "123"], ["Two lines"]], "table", rng, fonts)
        b.probe_path = os.path.join(work, f"probe_{b.name}.png")
        Image.fromarray(probe).convert("RGB").save(b.probe_path)
        b.set_prompt(proc, b.probe_path, dev)
    run, ctc_feats, patch = (qwen_runner if qwen else lighton_runner)(model, buckets, ids, proc, dev)
    for b in buckets:
        raw = np.asarray(Image.open(b.probe_path).convert("L"))[None]
        mine = b.pixels(torch.from_numpy(qwen35.resize_lines(raw, 1) if qwen else raw).to(dev))
        ref = b.enc["pixel_values"].to(dev)
        diff = (ref - mine).abs().max().item() if ref.shape == mine.shape else float("inf")
        log(f"{b.name}: prompt len {b.P}, image tokens {(b.prompt == ids['<|image_pad|>']).sum().item()}, "
            f"pixel_values {tuple(ref.shape)} max|diff| vs ours {diff:.2e}")
        assert diff < 1e-4, "processor resized or normalised differently"
    with torch.no_grad():  # the training shortcuts against Transformers' stock forward, fp32, 6 rows per bucket
        idx = torch.arange(6, device=dev)
        stock = [run(b, idx, stock=True) for b in buckets]
        restore_attn = patch() if patch else None
        for b, a in zip(buckets, stock):
            d = (a - run(b, idx)).abs().max().item()
            log(f"{b.name}: stock forward vs training shortcuts max|logit diff| {d:.2e}")
            assert d < 1e-3

    K = len(data.CHARSET) + 1
    ctc_head = torch.nn.Linear(cfg["vision_config"]["hidden_size"], 2 * K).to(dev)

    def forward(b, idx):
        B = idx.shape[0]
        t = b.tgt[idx]
        with torch.autocast("cuda", dtype=torch.bfloat16):
            out_logits = run(b, idx)
        logits = out_logits[:, b.P - 1:b.P - 1 + b.max_tgt].float()  # [B, max_tgt, V]
        lm = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), t.reshape(-1), ignore_index=-100)
        if b.name != "line":
            return lm, None
        feats = ctc_feats()  # [B, n_cols, C]
        n_cols = feats.shape[1]
        lp = ctc_head(feats).reshape(B, n_cols * 2, K).log_softmax(-1).transpose(0, 1)  # [T, B, K]
        ctc = F.ctc_loss(lp, b.ctc_t[idx], torch.full((B,), n_cols * 2, device=dev), b.ctc_l[idx],
                         zero_infinity=True)
        return lm, ctc

    evals = [(d, m) for d, m in ((args.heldout_dir, 48), (args.heldout_blocks_dir, 160)) if d]
    if args.resume:
        for d, m in evals:
            gt, files = read_heldout(d)
            report_cer(f"BASELINE (resumed checkpoint) {d}", gt, evaluate(args.resume, files, d, dev, max_new=m))

    vis = [p for n, p in model.named_parameters() if "vision" in n or "visual" in n]
    dec = [p for n, p in model.named_parameters() if not ("vision" in n or "visual" in n)]
    opt = torch.optim.AdamW([{"params": dec, "lr_mult": 1.0},
                             {"params": vis + list(ctc_head.parameters()), "lr_mult": args.vision_lr_mult}],
                            lr=args.lr, betas=(0.9, 0.98), weight_decay=0.01)
    gen = torch.Generator(device=dev).manual_seed(seed)
    pick = random.Random(seed + 11)
    total = args.steps
    warm = args.warmup if not args.smoke else 2
    step, t_train, last_ckpt = 0, time.time(), time.time()
    model.train()
    ckpt_dir = os.path.join(work, name)
    model_tar = os.path.join(args.out, "model.tar.gz")
    seen = {b.name: 0 for b in buckets}
    last = {}
    while True:
        # --steps N: cosine over N steps; --steps 0: over --train-seconds of wall time (line and block steps differ
        # in cost, so a count measured on the first steps would not fit); the log gives the count to rerun with.
        elapsed = time.time() - t_train
        progress = step / total if total else elapsed / args.train_seconds
        if progress >= 1.0:
            if not total:
                log(f"--train-seconds {args.train_seconds:.0f} reached at step {step} (rerun with --steps {step})")
            break
        T = total or "?"
        if args.stop_step and step >= args.stop_step:
            log(f"stopping at step {step}/{T}: --stop-step")
            break
        if args.max_train_seconds and elapsed > args.max_train_seconds:
            log(f"stopping at step {step}/{T}: --max-train-seconds {args.max_train_seconds:.0f} reached")
            break
        lr_f = min(1.0, (step + 1) / warm) * (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * progress)))
        for g in opt.param_groups:
            g["lr"] = args.lr * g["lr_mult"] * lr_f
        blocks_on = len(buckets) > 1 and step >= args.block_start
        b = buckets[-1] if blocks_on and pick.random() < args.block_frac else buckets[0]
        idx = torch.randint(0, b.N, (b.batch,), device=dev, generator=gen)
        if args.profile and step == 30:
            prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                                      torch.profiler.ProfilerActivity.CUDA])
            prof.__enter__()
        if args.profile and step == 30 + args.profile:
            torch.cuda.synchronize()
            prof.__exit__(None, None, None)
            for key in ("self_cpu_time_total", "self_device_time_total"):
                log(f"profile of steps 30..{step - 1} by {key}:\n" +
                    prof.key_averages().table(sort_by=key, row_limit=14, max_name_column_width=48))
        lm, ctc = forward(b, idx)
        loss = lm if ctc is None else lm + args.ctc_weight * ctc
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(model.parameters()) + list(ctc_head.parameters()), 1.0)
        opt.step()
        step += 1
        seen[b.name] += b.batch
        if step % 25 == 0 or args.smoke:
            last[b.name] = (round(lm.item(), 4), None if ctc is None else round(ctc.item(), 4))
        if step % 50 == 0 or args.smoke:
            log(f"step {step}/{T} {b.name} lm/ctc {last} lr {args.lr * lr_f:.2e} t {time.time() - t_train:.0f}s")
        if time.time() - last_ckpt > args.ckpt_every:
            save_checkpoint(model, static_dir, ckpt_dir, model_tar, name)
            last_ckpt = time.time()
            log(f"checkpoint at step {step} ({time.time() - t_start:.0f}s since start)")
    log(f"trained {step} steps in {time.time() - t_train:.0f}s; images seen {seen}; last lm/ctc {last}")
    if restore_attn:
        restore_attn()  # the oracle below runs the stock Transformers code
    save_checkpoint(model, static_dir, ckpt_dir, model_tar, name)
    log(f"final checkpoint saved, {os.path.getsize(model_tar)} bytes tar.gz")
    del model
    torch.cuda.empty_cache()
    for d, m in evals:
        gt, files = read_heldout(d)
        t0 = time.time()
        preds = evaluate(ckpt_dir, files, d, dev, max_new=m)
        report_cer(f"ORACLE ({time.time() - t0:.1f}s) {d}", gt, preds)
        with open(os.path.join(args.out, f"oracle_{os.path.basename(d)}.jsonl"), "w", encoding="utf-8") as f:
            for fn, p in zip(files, preds):
                f.write(json.dumps({"file": fn, "text": p}, ensure_ascii=False) + "\n")
        for g, p in list(zip(gt, preds))[:8]:
            log(f"  {g['text']!r} -> {p!r}")
    log(f"done in {time.time() - t_start:.0f}s")


if __name__ == "__main__":
    main()
