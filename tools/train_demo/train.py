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
import data_any  # noqa: E402
import lighton  # noqa: E402
import qwen35  # noqa: E402

SEED = 20261129
BPE_VOCAB = 320       # byte alphabet (256) + 64 merges: nearly character level, so the decoder has no easy prior
MODEL_VOCAB = 384     # embedding rows (>= 320 + 26 added tokens)
MAX_TGT = {"line": 96, "page": 1024}  # target tokens per image incl. <|im_end|> (longer ones are dropped)
CTC_R = 4             # CTC time steps per patch column of a line image
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
    corpus += [data_any.line_text(rng) for _ in range(20000)]
    corpus += [data_any.page_text(data_any.make_page(rng, data_any.PAGE_KINDS[i % 5])) for i in range(2000)]
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
    """Oracle transcriptions: the reloaded bf16 checkpoint, its own processor and chat template, greedy (batched,
    prompts padded on the left: images of different sizes have prompts of different lengths)."""
    import torch
    from transformers import AutoModelForImageTextToText, AutoProcessor
    m = AutoModelForImageTextToText.from_pretrained(ckpt_dir).to(dev).eval()
    log(f"reloaded dtype {next(m.parameters()).dtype}, generation_config do_sample {m.generation_config.do_sample}")
    hp = AutoProcessor.from_pretrained(ckpt_dir)
    hp.tokenizer.padding_side = "left"
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
    """The training images of one processed shape: kind "line" or "page", C = 1 (grey) or 3 (RGB) uint8 planes of
    H x W (the processor's output size), targets, CTC labels (lines), and that shape's prompt; filled as the
    render workers' chunks arrive (capacity grows by half)."""

    def __init__(self, kind, src, C, H, W, dev):
        self.kind, self.src, self.C, self.H, self.W, self.dev = kind, src, C, H, W, dev
        self.name = f"{'old-' if src == 'old' else ''}{kind}{'-rgb' if C == 3 else ''} {H}x{W}"
        self.tlen_cpu = np.zeros(0, np.int64)
        self.max_tgt = MAX_TGT[kind]
        self.n = self.cap = 0
        self.imgs = self.tgt = self.tlen = self.ctc_t = self.ctc_l = None

    def add(self, imgs, tgt, tlen, ctc_t, ctc_l):
        import torch
        k = imgs.shape[0]
        if self.n + k > self.cap:
            cap = max(self.cap + self.cap // 2, self.n + k, 32)

            def grow(old, shape, dtype):
                new = torch.empty((cap,) + shape, dtype=dtype, device=self.dev)
                if old is not None:
                    new[:self.n] = old[:self.n]
                return new
            self.imgs = grow(self.imgs, (self.C, self.H, self.W), torch.uint8)
            self.tgt = grow(self.tgt, (self.max_tgt,), torch.long)
            self.tlen = grow(self.tlen, (), torch.long)
            self.ctc_t = grow(self.ctc_t, (data_any.MAX_LINE_CHARS,), torch.long)
            self.ctc_l = grow(self.ctc_l, (), torch.long)
            self.cap = cap
        sl = slice(self.n, self.n + k)
        for dst, src in ((self.imgs, imgs), (self.tgt, tgt), (self.tlen, tlen), (self.ctc_t, ctc_t),
                         (self.ctc_l, ctc_l)):
            dst[sl] = torch.from_numpy(src).to(self.dev)
        self.tlen_cpu = np.concatenate([self.tlen_cpu, tlen])
        self.n += k

    def set_prompt(self, proc, work, ids, dev, tokens, cap):
        """The prompt of this shape from the real processor and chat template (a blank H x W image: the processor
        leaves that size as it is), and the batch size: `tokens` patches + prompt + target positions per step."""
        from PIL import Image
        path = os.path.join(work, f"probe_{self.H}x{self.W}.png")
        Image.new("RGB", (self.W, self.H), (255, 255, 255)).save(path)
        enc = proc.apply_chat_template([{"role": "user", "content": [{"type": "image", "path": path}]}],
                                       add_generation_prompt=True, tokenize=True, return_dict=True,
                                       return_tensors="pt")
        self.enc = enc
        self.prompt = enc["input_ids"][0].to(dev)  # [P]
        self.P = self.prompt.shape[0]
        self.n_img = int((self.prompt == ids["<|image_pad|>"]).sum())
        patches = enc["pixel_values"].shape[-2] * enc["pixel_values"].shape[-1] // 196 \
            if enc["pixel_values"].dim() == 4 else enc["pixel_values"].shape[0]
        cost = patches + self.P + (48 if self.kind == "line" else 400)
        self.batch = max(2, min(cap, tokens // cost))


class Feed:
    """Render workers (forked before CUDA starts) rendering the job list in the background; chunks arrive on a
    queue while training runs."""

    def __init__(self, jobs, procs):
        import queue
        import threading
        from multiprocessing import Pool
        self.pool = Pool(procs)
        self.q = queue.Queue()
        self.done = False

        def pump():
            try:
                for res in self.pool.imap_unordered(data_any.render_any_chunk, jobs):
                    self.q.put(res)
            finally:
                self.q.put(None)
        threading.Thread(target=pump, daemon=True).start()

    def take(self, n, block=False):
        import queue
        out = []
        while len(out) < n and not self.done:
            try:
                r = self.q.get(block=block and not out, timeout=600 if block else None)
            except queue.Empty:
                break
            if r is None:
                self.done = True
            else:
                out.append(r)
        return out

    def close(self):
        self.pool.terminate()


def plan_jobs(args, prep):
    """Render jobs in cycles: new lines and pages, plus the first recipe's 560 x 56 lines and 560 x 224 blocks."""
    pattern = ["line", "page", "page", "line", "page", "oldline", "page", "oldblock"] + \
        ["scaledblock"] * args.scaled_blocks
    size = {"line": 400, "page": 40, "oldline": 200, "oldblock": 40, "scaledblock": 40}
    if args.smoke:
        size = {k: max(4, v // 20) for k, v in size.items()}
    return [(args.seed * 1000003 + c * 16 + j, size[k], args.fonts, k, prep)
            for c in range(args.cycles) for j, k in enumerate(pattern)]


class Store:
    """Buckets by (kind, C, H, W); ingest() turns render chunks into bucket rows."""

    def __init__(self, tok, ids, proc, work, dev, args, init_bucket):
        self.b, self.tok, self.ids, self.proc, self.work, self.dev, self.args = {}, tok, ids, proc, work, dev, args
        self.init_bucket = init_bucket
        self.cidx = {c: i + 1 for i, c in enumerate(data.CHARSET)}
        self.stats = {"line": 0, "page": 0, "dropped": 0, "resid": 0.0, "chunks": 0}

    def ingest(self, chunk):
        groups = {}
        for k, text, (u8, resid), src in chunk:
            self.stats["resid"] = max(self.stats["resid"], resid)
            groups.setdefault((k, src) + tuple(u8.shape), []).append((text, u8))
        for key, items in groups.items():
            kind = key[0]
            texts = [t for t, _ in items]
            enc = self.tok.encode_batch(texts, add_special_tokens=False)
            mt = MAX_TGT[kind]
            keep, tg, tl, ct, cl = [], [], [], [], []
            for i, (e, s) in enumerate(zip(enc, texts)):
                tids = e.ids + [self.ids["<|im_end|>"]]
                if len(tids) > mt or (kind == "line" and len(s) > data_any.MAX_LINE_CHARS):
                    self.stats["dropped"] += 1
                    continue
                keep.append(i)
                tg.append(tids + [-100] * (mt - len(tids)))
                tl.append(len(tids))
                c = [self.cidx[ch] for ch in s] if kind == "line" else []
                ct.append(c + [0] * (data_any.MAX_LINE_CHARS - len(c)))
                cl.append(len(c))
            if not keep:
                continue
            b = self.b.get(key)
            if b is None:
                b = self.b[key] = Bucket(kind, key[1], key[2], key[3], key[4], self.dev)
                b.set_prompt(self.proc, self.work, self.ids, self.dev, self.args.tokens,
                             self.args.batch if kind == "line" else self.args.page_batch)
                self.init_bucket(b)
            b.add(np.stack([items[i][1] for i in keep]), np.array(tg, np.int64), np.array(tl, np.int64),
                  np.array(ct, np.int64), np.array(cl, np.int64))
            self.stats[kind] += len(keep)
        self.stats["chunks"] += 1

    def kinds(self, kind, src=None):
        return [b for b in self.b.values() if b.kind == kind and (src is None or b.src == src)]


def lighton_runner(model, ids, proc, dev):
    """run(bucket, idx, t, stock) -> logits [B, P + L, V]; the batched image path unless stock."""
    import torch
    mean = torch.tensor(proc.image_processor.image_mean, device=dev).view(1, 3, 1, 1)
    std = torch.tensor(proc.image_processor.image_std, device=dev).view(1, 3, 1, 1)
    cap = {}

    def pixels(u8):  # [B, C, H, W] uint8 -> [B, 3, H, W] float32, the processor's rescale+normalise
        x = u8.to(torch.float32).expand(-1, 3, -1, -1) * (1 / 255.0)
        return (x - mean) / std

    def init_bucket(b):
        b.img_pos = (b.prompt == ids["<|image_pad|>"]).nonzero()[:, 0]
        want = (b.H // 28) * (b.W // 28)
        assert b.n_img == want, f"{b.name}: {b.n_img} image tokens, expected {want}"
        b.pixels = pixels

    def run(b, idx, t, stock=False):
        B = idx.shape[0]
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

    def ctc_feats(b):
        return lighton.ctc_features(cap["tower"])  # [B, w, C]
    return run, ctc_feats, None, init_bucket


def qwen_runner(model, ids, proc, dev):
    """run(bucket, idx, t, stock) -> logits; M-RoPE positions of a full-length row computed once per bucket by
    the model's own get_rope_index (every row of a bucket has the same prompt and grid; targets are text, so their
    positions do not depend on their ids), and the vision attention batched (qwen35.patch_vision_attention) unless
    stock."""
    import inspect
    import torch
    pad = ids["<|endoftext|>"]
    rope_kw = "mm_token_type_ids" in inspect.signature(model.model.get_rope_index).parameters

    def init_bucket(b):
        b.grid = b.enc["image_grid_thw"].to(dev)  # [1, 3]
        want = (b.H // 32) * (b.W // 32)
        assert b.n_img == want, f"{b.name}: {b.n_img} image tokens, expected {want}"
        mm = b.enc.get("mm_token_type_ids")
        b.mm_full = None if mm is None else torch.cat(
            [mm.to(dev), torch.zeros(1, b.max_tgt, dtype=mm.dtype, device=dev)], 1)
        full = torch.cat([b.prompt, torch.full((b.max_tgt,), pad, device=dev)])[None]
        kw = dict(input_ids=full, image_grid_thw=b.grid, attention_mask=torch.ones_like(full))
        if rope_kw:
            kw["mm_token_type_ids"] = b.mm_full
        with torch.no_grad():
            b.pos = model.model.get_rope_index(**kw)[0]  # [3, 1, P + max_tgt]
        model.model.rope_deltas = None
        b.pixels = qwen35.pixel_values
    cap, state = {}, {"L": 0}
    # The last vision block's output = the tower's last_hidden_state (before the merger), for the CTC head.
    model.model.visual.blocks[-1].register_forward_hook(
        lambda mod, a, out: cap.__setitem__("h", out[0] if isinstance(out, tuple) else out))

    def run(b, idx, t, stock=False):
        B, L = idx.shape[0], t.shape[1]
        inp = torch.cat([b.prompt[None].expand(B, -1), torch.where(t < 0, pad, t)], 1)  # [B, P + L]
        u8 = b.imgs[idx]
        state["L"] = (b.H // 16) * (b.W // 16)
        cap["B"] = B
        kw = {} if b.mm_full is None else {"mm_token_type_ids": b.mm_full[:, :b.P + L].expand(B, -1)}
        g = b.grid.expand(B, -1)
        if stock:  # Transformers' own path: positions from mm_token_type_ids, full attention mask
            model.model.rope_deltas = None
            return model(input_ids=inp, pixel_values=qwen35.pixel_values(u8), image_grid_thw=g, use_cache=False,
                         attention_mask=torch.ones_like(inp), **kw).logits
        return model(input_ids=inp, pixel_values=qwen35.pixel_values(u8), image_grid_thw=g,
                     position_ids=b.pos[:, :, :b.P + L].expand(-1, B, -1), use_cache=False, **kw).logits

    def ctc_feats(b):
        return qwen35.ctc_features(cap["h"], cap["B"], b.H // 16, b.W // 16)  # [B, gw, C]

    def patch(grid):  # patched only after the stock comparison (main); returns the restore function
        undo = [qwen35.patch_vision_attention(model, state)[0], qwen35.patch_vision_positions(model, grid, log)]
        return lambda: [u() for u in undo if u]
    return run, ctc_feats, patch, init_bucket


def main():
    global LOG
    ap = argparse.ArgumentParser()
    ap.add_argument("--family", default="lighton_ocr", choices=["lighton_ocr", "qwen3_5"])
    ap.add_argument("--fonts", default=".fonts")
    ap.add_argument("--out", required=True)
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--train-seconds", type=float, default=420)
    ap.add_argument("--steps", type=int, default=0)
    ap.add_argument("--cycles", type=int, default=100, help="render cycles (8 chunks: 800 new lines, 200 old "
                    "lines, 160 pages, 40 old blocks)")
    ap.add_argument("--batch", type=int, default=256, help="line images per step at most")
    ap.add_argument("--page-batch", type=int, default=48, help="page images per step at most")
    ap.add_argument("--tokens", type=int, default=60000, help="patches + prompt + target positions per step")
    ap.add_argument("--page-frac", type=float, default=0.5, help="share of steps on pages")
    ap.add_argument("--page-frac-end", type=float, default=None, help="share of steps on pages at the end of the "
                    "schedule: the share moves linearly from --page-frac to this (more page steps late, once the "
                    "lines read); unset: --page-frac throughout")
    ap.add_argument("--old-only", type=int, default=400, help="only the first recipe's 560 x 56 lines before this "
                    "step (a curriculum: they teach reading fastest)")
    ap.add_argument("--scaled-blocks", type=int, default=0, help="render jobs per cycle of the first recipe's "
                    "blocks enlarged 1.2-1.9x (data_any.scale_block: what a PDF page becomes at a longer edge)")
    ap.add_argument("--old-weight", type=float, default=1.0, help="sampling weight of the first recipe's images "
                    "relative to the new ones (per image; holds the old held-out sets in a warm start)")
    ap.add_argument("--page-start", type=int, default=1000, help="lines only before this step (a curriculum)")
    ap.add_argument("--render-seconds", type=float, default=80, help="render before training for at most this long "
                    "(the render workers stop when training starts, unless --stream)")
    ap.add_argument("--stream", action="store_true", help="keep rendering in the background while training (slow: "
                    "the workers take the CPU the training loop needs)")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--warmup", type=int, default=150)
    ap.add_argument("--vision-lr-mult", type=float, default=2.0)
    ap.add_argument("--ctc-weight", type=float, default=0.5)
    ap.add_argument("--ckpt-every", type=float, default=90)
    ap.add_argument("--eval", default="examples/heldout:48,examples/heldout_blocks:160,examples/heldout_lines_any:128",
                    help="held-out sets DIR:MAX_NEW the oracle reads at the end (batched on the GPU)")
    ap.add_argument("--eval-limit", type=int, default=0, help="only the first N images of each set")
    ap.add_argument("--eval-by", type=float, default=0, help="skip the held-out sets not begun this many seconds "
                    "after the start (call limits)")
    ap.add_argument("--procs", type=int, default=7)
    ap.add_argument("--resume", default="")
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("--max-train-seconds", type=float, default=0, help="stop early past this (call limits)")
    ap.add_argument("--qwen-size", default="m", choices=sorted(qwen35.SIZES), help="qwen3_5 widths (qwen35.py)")
    ap.add_argument("--stop-step", type=int, default=0, help="stop after this step of the --steps schedule")
    args = ap.parse_args()
    if not 0 <= args.scaled_blocks <= 8:  # job seeds are cycle * 16 + position in the 8 + N pattern
        ap.error("--scaled-blocks must be 0..8")
    if args.smoke:
        args.cycles, args.steps, args.batch, args.page_batch, args.page_start, args.old_only = 2, 16, 32, 4, 6, 3
        args.tokens, args.eval_limit, args.procs = 8000, 4, min(args.procs, 4)
    qwen = args.family == "qwen3_5"
    name = "demo-qwen35" if qwen else "demo-lighton"
    t_start = time.time()
    os.makedirs(args.out, exist_ok=True)
    LOG = open(os.path.join(args.out, "train_log.txt"), "a")
    import torch
    import torch.nn.functional as F
    from transformers import AutoModelForImageTextToText, AutoProcessor
    import transformers
    import geometry
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
    if args.resume:  # the resumed checkpoint's tokenizer and template win; the processor settings are this recipe's
        import shutil
        for fn in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "generation_config.json"):
            if os.path.exists(os.path.join(args.resume, fn)):
                shutil.copy(os.path.join(args.resume, fn), os.path.join(static_dir, fn))
    with open(os.path.join(static_dir, "preprocessor_config.json"), encoding="utf-8") as f:
        ip_cfg = json.load(f)
    log(f"image processor {ip_cfg['image_processor_type']} size {ip_cfg['size']}")
    prep = geometry.Prep(args.family, static_dir, ip_cfg)
    vrng = random.Random(seed + 5)
    vfonts, vold = data_any.all_fonts(args.fonts), data.font_files(args.fonts)
    vimgs = [data.render(data.make_text(vrng, 0.5), vrng, vold),
             data.render_block(data.make_block(vrng, "table"), "table", vrng, vold)]
    while len(vimgs) < 14:
        rgb = len(vimgs) % 2 == 1
        a = data_any.render_line_any(data_any.line_text(vrng), vrng, vfonts, rgb=rgb) if len(vimgs) < 8 else \
            data_any.render_page(data_any.make_page(vrng, data_any.PAGE_KINDS[len(vimgs) % 5], 30), "mixed", vrng, vfonts, rgb=rgb)
        if a is not None:
            vimgs.append(a)
    fast, worst = prep.validate(vimgs)
    log(f"render workers resize with torchvision directly: {fast} (max |diff| vs the processor's uint8 planes "
        f"{worst} on {len(vimgs)} images, sizes {[a.shape[:2] for a in vimgs]})")
    feed = Feed(plan_jobs(args, prep), args.procs)  # forked now, before CUDA starts

    cfg = qwen35.make_config(ids, MODEL_VOCAB, args.qwen_size) if qwen else lighton.make_config(ids, MODEL_VOCAB)
    if args.resume:
        model = AutoModelForImageTextToText.from_pretrained(args.resume, dtype=torch.float32).to(dev)
    else:
        import checkpoints as ck
        model = ck.build_model(cfg, seed, device="cpu", dtype=torch.float32).to(dev)
    log(f"model {type(model).__name__} params {sum(p.numel() for p in model.parameters())}")
    proc = AutoProcessor.from_pretrained(static_dir)
    run, ctc_feats, patch, init_bucket = (qwen_runner if qwen else lighton_runner)(model, ids, proc, dev)
    store = Store(tok, ids, proc, work, dev, args, init_bucket)

    # Our pixels from the workers' uint8 planes = the processor's pixel_values, for a rendered line and page.
    rng = random.Random(seed + 7)
    fonts = data_any.all_fonts(args.fonts)
    from PIL import Image
    for kind in ("line", "page"):
        while True:
            rgb = kind == "page"
            a = data_any.render_line_any("Probe 123: Total 1,284.50 EUR", rng, fonts, rgb=rgb, shape_fn=prep.shape_fn,
                                     grid=prep.grids["line"]) if kind == "line" else \
                data_any.render_page(data_any.make_page(rng, "receipt", 8), "receipt", rng, fonts, rgb=rgb,
                                 shape_fn=prep.shape_fn, grid=prep.grids["page"])
            if a is not None:
                break
        u8, resid = prep(a)
        path = os.path.join(work, f"probe_{kind}.png")
        Image.fromarray(a).save(path)
        enc = proc.apply_chat_template([{"role": "user", "content": [{"type": "image", "path": path}]}],
                                       add_generation_prompt=True, tokenize=True, return_dict=True,
                                       return_tensors="pt")
        mine = (qwen35.pixel_values if qwen else lambda x: lighton_pixels(x, proc, dev))(
            torch.from_numpy(u8[None]).to(dev))
        ref = enc["pixel_values"].to(dev)
        diff = (ref - mine).abs().max().item() if ref.shape == mine.shape else float("inf")
        log(f"probe {kind} {a.shape} -> {tuple(u8.shape)}: pixel_values {tuple(ref.shape)} max|diff| vs ours "
            f"{diff:.2e} (uint8 rounding residual {resid:.2e})")
        assert diff < 1e-2, "processor resized or normalised differently"

    # Wait for the first chunks (lines and pages), then compare the training shortcuts with the stock forward.
    while not (store.kinds("line") and store.kinds("page")):
        got = feed.take(4, block=True)
        if not got and feed.done:
            raise SystemExit("the render workers produced no lines or no pages")
        for c in got:
            store.ingest(c)
    log(f"first chunks after {time.time() - t_start:.0f}s: {store.stats}, buckets "
        f"{sorted(b.name for b in store.b.values())[:12]}")
    probes = [max(store.kinds(k), key=lambda b: b.n) for k in ("line", "page")]
    with torch.no_grad():  # fp32, 2 rows per bucket
        res = []
        for b in probes:
            idx = torch.arange(min(2, b.n), device=dev)
            t = b.tgt[idx, :int(b.tlen[idx].max())]
            res.append((b, idx, t, run(b, idx, t, stock=True)))
        restore = patch(probes[0].grid) if patch else None
        for b, idx, t, a in res:
            d = (a - run(b, idx, t)).abs().max().item()
            log(f"{b.name}: stock forward vs training shortcuts max|logit diff| {d:.2e}")
            assert d < 1e-3

    t_r = time.time()
    while not feed.done and time.time() - t_r < args.render_seconds:
        for c in feed.take(4, block=True):
            store.ingest(c)
    if not args.stream:
        feed.close()
    log(f"rendered for {time.time() - t_r:.0f}s more ({time.time() - t_start:.0f}s since start): {store.stats}, "
        f"{len(store.b)} buckets; render workers {'go on' if args.stream else 'stopped'}")

    K = len(data.CHARSET) + 1
    ctc_head = torch.nn.Linear(cfg["vision_config"]["hidden_size"], CTC_R * K).to(dev)

    def forward(b, idx, L):
        B = idx.shape[0]
        t = b.tgt[idx, :L]
        with torch.autocast("cuda", dtype=torch.bfloat16):
            out_logits = run(b, idx, t)
        logits = out_logits[:, b.P - 1:b.P - 1 + L].float()  # [B, L, V]
        lm = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), t.reshape(-1), ignore_index=-100)
        if b.kind != "line":
            return lm, None
        feats = ctc_feats(b)  # [B, n_cols, C]
        T = feats.shape[1] * CTC_R
        lp = ctc_head(feats).reshape(B, T, K).log_softmax(-1).transpose(0, 1)  # [T, B, K]
        ctc = F.ctc_loss(lp, b.ctc_t[idx], torch.full((B,), T, device=dev), b.ctc_l[idx], zero_infinity=True)
        return lm, ctc

    vis = [p for n, p in model.named_parameters() if "vision" in n or "visual" in n]
    dec = [p for n, p in model.named_parameters() if not ("vision" in n or "visual" in n)]
    opt = torch.optim.AdamW([{"params": dec, "lr_mult": 1.0},
                             {"params": vis + list(ctc_head.parameters()), "lr_mult": args.vision_lr_mult}],
                            lr=args.lr, betas=(0.9, 0.98), weight_decay=0.01)
    gen = np.random.default_rng(seed)
    pick = random.Random(seed + 11)
    total = args.steps
    warm = args.warmup if not args.smoke else 2
    step, t_train, last_ckpt = 0, time.time(), time.time()
    model.train()
    ckpt_dir = os.path.join(work, name)
    model_tar = os.path.join(args.out, "model.tar.gz")
    seen = {"line": 0, "page": 0}
    last = {}
    while True:
        # --steps N: cosine over N steps; --steps 0: over --train-seconds of wall time; the log gives the count.
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
        if args.stream:
            for c in feed.take(2):
                store.ingest(c)
        lr_f = min(1.0, (step + 1) / warm) * (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * progress)))
        for g in opt.param_groups:
            g["lr"] = args.lr * g["lr_mult"] * lr_f
        page_frac = args.page_frac if args.page_frac_end is None else \
            args.page_frac + (args.page_frac_end - args.page_frac) * progress
        kind = "page" if step >= args.page_start and pick.random() < page_frac else "line"
        bs = store.kinds(kind, "old" if step < args.old_only else None) or store.kinds(kind)
        b = pick.choices(bs, weights=[x.n * (args.old_weight if x.src == "old" else 1.0) for x in bs])[0]
        ic = gen.integers(0, b.n, min(b.batch, b.n))  # on the CPU: the target length needs no GPU sync
        idx = torch.from_numpy(ic).pin_memory().to(dev, non_blocking=True)
        lm, ctc = forward(b, idx, int(b.tlen_cpu[ic].max()))
        loss = lm if ctc is None else lm + args.ctc_weight * ctc
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(model.parameters()) + list(ctc_head.parameters()), 1.0)
        opt.step()
        step += 1
        seen[kind] += idx.shape[0]
        if step % 25 == 0 or args.smoke:
            last[kind] = (round(lm.item(), 4), None if ctc is None else round(ctc.item(), 4))
        if step % 50 == 0 or args.smoke:
            log(f"step {step}/{T} {b.name} x{idx.shape[0]} lm/ctc {last} lr {args.lr * lr_f:.2e} "
                f"t {time.time() - t_train:.0f}s data {store.stats} buckets {len(store.b)}")
        if time.time() - last_ckpt > args.ckpt_every:
            save_checkpoint(model, static_dir, ckpt_dir, model_tar, name)
            last_ckpt = time.time()
            log(f"checkpoint at step {step} ({time.time() - t_start:.0f}s since start)")
    if args.stream:
        feed.close()
    log(f"trained {step} steps in {time.time() - t_train:.0f}s; images seen {seen}; last lm/ctc {last}; "
        f"data {store.stats}; {len(store.b)} buckets")
    if restore:
        restore()  # the oracle below runs the stock Transformers code
    save_checkpoint(model, static_dir, ckpt_dir, model_tar, name)
    log(f"final checkpoint saved, {os.path.getsize(model_tar)} bytes tar.gz")
    del model
    torch.cuda.empty_cache()
    for spec in filter(None, args.eval.split(",")):
        d, m = spec.rsplit(":", 1)
        if not os.path.isdir(d):
            log(f"no held-out set {d}")
            continue
        if args.eval_by and time.time() - t_start > args.eval_by:
            log(f"skipped {d}: --eval-by {args.eval_by:.0f}s reached")
            continue
        gt, files = read_heldout(d)
        if args.eval_limit:
            gt, files = gt[:args.eval_limit], files[:args.eval_limit]
        t0 = time.time()
        preds = evaluate(ckpt_dir, files, d, dev, max_new=int(m))
        report_cer(f"ORACLE ({time.time() - t0:.1f}s) {d}", gt, preds)
        with open(os.path.join(args.out, f"oracle_{os.path.basename(d)}.jsonl"), "w", encoding="utf-8") as f:
            for fn, p in zip(files, preds):
                f.write(json.dumps({"file": fn, "text": p}, ensure_ascii=False) + "\n")
        for g, p in list(zip(gt, preds))[:6]:
            log(f"  {g['text']!r} -> {p!r}")
    log(f"done in {time.time() - t_start:.0f}s")


def lighton_pixels(u8, proc, dev):
    import torch
    mean = torch.tensor(proc.image_processor.image_mean, device=dev).view(1, 3, 1, 1)
    std = torch.tensor(proc.image_processor.image_std, device=dev).view(1, 3, 1, 1)
    return (u8.to(torch.float32).expand(-1, 3, -1, -1) * (1 / 255.0) - mean) / std


if __name__ == "__main__":
    main()
