"""Synthetic text images for the demo OCR models (seeded, PIL + numpy only): single lines and small blocks.

A line image is IMG_H x IMG_W; a block image (2-4 lines of a paragraph, a table, a receipt or mixed lines, one
line per LINE_PITCH px, ground truth lines joined by "\n", table cells and receipt columns by one space) is
BLOCK_H x IMG_W. Both are multiples of 28 within the processor's longest_edge, so the Pixtral image processor
never resamples them: 2 x 20 merged image tokens per line image, 8 x 20 per block.
"""
import glob
import os
import random
import string

import numpy as np

IMG_H, IMG_W = 56, 560
BLOCK_LINES, LINE_PITCH = 4, 56
BLOCK_H = BLOCK_LINES * LINE_PITCH
BLOCK_KINDS = ("paragraph", "table", "receipt", "mixed")
MAX_CHARS = 28
PUNCT = ".,:;-/%()$#&+'!?@*="
CHARSET = string.ascii_letters + string.digits + PUNCT + " "   # CTC alphabet (index + 1; 0 = blank)

from words import WORDS  # noqa: E402  (the word list)

FIRST = "Anna Ben Clara David Emma Felix Grace Hugo Iris Jack Laura Marc Nina Oscar Paul Rosa Sam Tom Vera".split()


def font_files(font_dir):
    files = sorted(glob.glob(os.path.join(font_dir, "*.ttf")))
    if not files:
        raise SystemExit(f"no .ttf files in {font_dir}")
    return files


def random_string(rng):
    n = rng.randint(3, 24)
    pool = string.ascii_letters + string.digits * 2 + PUNCT
    out = []
    for i in range(n):
        if 0 < i < n - 1 and out[-1] != " " and rng.random() < 0.12:
            out.append(" ")
        else:
            out.append(rng.choice(pool))
    return "".join(out).strip()


def word_line(rng):
    ws = [rng.choice(WORDS) for _ in range(rng.randint(1, 5))]
    style = rng.random()
    if style < 0.25:
        ws[0] = ws[0].capitalize()
    elif style < 0.35:
        ws = [w.upper() for w in ws]
    elif style < 0.5:
        ws = [w.capitalize() for w in ws]
    if rng.random() < 0.2:
        ws.insert(rng.randrange(len(ws) + 1), rng.choice(FIRST))
    s = " ".join(ws)
    if rng.random() < 0.4:
        s += rng.choice(".,:;!?")
    return s


def number_line(rng):
    k = rng.randrange(8)
    if k == 0:
        return f"{rng.randint(1, 9999)}.{rng.randint(0, 99):02d}"
    if k == 1:
        return f"{rng.randint(1990, 2039)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
    if k == 2:
        return f"{rng.randint(1, 28):02d}/{rng.randint(1, 12):02d}/{rng.randint(1990, 2039)}"
    if k == 3:
        return f"+{rng.randint(1, 99)} {rng.randint(100, 999)} {rng.randint(100, 999)} {rng.randint(1000, 9999)}"
    if k == 4:
        return f"{rng.choice(WORDS).capitalize()}: ${rng.randint(0, 999)}.{rng.randint(0, 99):02d}"
    if k == 5:
        return f"{rng.randint(0, 100)}.{rng.randint(0, 9)}%"
    if k == 6:
        return f"{rng.choice(WORDS).upper()[:3]}-{rng.randint(0, 999999):06d}"
    return f"{rng.randint(1, 99)} x {rng.randint(1, 999)}.{rng.randint(0, 99):02d} = {rng.randint(1, 9999)}"


def make_text(rng, p_random):
    while True:
        r = rng.random()
        if r < p_random:
            s = random_string(rng)
        elif r < p_random + (1 - p_random) * 0.6:
            s = word_line(rng)
        else:
            s = number_line(rng)
        if 1 <= len(s) <= MAX_CHARS:
            return s


_FONT_CACHE = {}
_NOISE = []


def _noise(rng, h=IMG_H, w=IMG_W):
    """A unit Gaussian field: a random window of a fixed seeded bank (one normal() per image is too slow)."""
    if not _NOISE:
        _NOISE.append(np.random.default_rng(12345).normal(0, 1, (BLOCK_H * 2, IMG_W * 2)).astype(np.float32))
    bank = _NOISE[0]
    y, x = rng.randrange(bank.shape[0] - h), rng.randrange(bank.shape[1] - w)
    return bank[y:y + h, x:x + w]


def _font(path, size):
    from PIL import ImageFont
    key = (path, size)
    if key not in _FONT_CACHE:
        _FONT_CACHE[key] = ImageFont.truetype(path, size)
    return _FONT_CACHE[key]


def render(text, rng, fonts, clean=False):
    """Return a uint8 [IMG_H, IMG_W] grayscale line image."""
    path = fonts[rng.randrange(len(fonts))]
    size = rng.randint(22, 30) if clean else rng.randint(18, 34)
    while True:
        font = _font(path, size)
        x0, y0, x1, y1 = font.getbbox(text)
        if (x1 - x0 <= IMG_W - 8 and y1 - y0 <= IMG_H - 4) or size <= 12:
            break
        size -= 2
    im, d, bg, fg = _canvas(IMG_H, rng, clean)
    w, h = x1 - x0, y1 - y0
    x = 8 if clean else rng.randint(2, max(2, min(40, IMG_W - w - 4)))
    y = (IMG_H - h) // 2 + (0 if clean else rng.randint(-3, 3))
    d.text((x - x0, y - y0), text, fill=fg, font=font)
    return np.asarray(im, dtype=np.uint8) if clean else _degrade(im, bg, rng, 1.0)


def _canvas(h, rng, clean):
    """A blank IMG_W x h page: white/black when clean, else a grey background and a dark ink."""
    from PIL import Image, ImageDraw
    bg = 255 if clean else rng.randint(185, 255)
    fg = 0 if clean else rng.randint(0, 70)
    im = Image.new("L", (IMG_W, h), bg)
    return im, ImageDraw.Draw(im), bg, fg


def _degrade(im, bg, rng, max_deg):
    """Training-only damage: mild rotation (bilinear, background fill), blur, Gaussian noise."""
    from PIL import Image, ImageFilter
    if rng.random() < 0.35:
        im = im.rotate(rng.uniform(-max_deg, max_deg), resample=Image.BILINEAR, fillcolor=bg)
    if rng.random() < 0.3:
        im = im.filter(ImageFilter.GaussianBlur(rng.uniform(0.3, 0.9)))
    a = np.asarray(im, dtype=np.float32)
    if rng.random() < 0.5:
        a = a + _noise(rng, a.shape[0], a.shape[1]) * rng.uniform(2, 10)
    return np.clip(a, 0, 255).astype(np.uint8)


def _fit(words, width):
    """Greedy word wrap to lines of at most `width` characters."""
    lines, cur = [], ""
    for w in words:
        if cur and len(cur) + 1 + len(w) > width:
            lines.append(cur)
            cur = w
        else:
            cur = f"{cur} {w}" if cur else w
    return lines + ([cur] if cur else [])


def _price(rng):
    return f"{rng.randint(0, 99)}.{rng.randint(0, 99):02d}"


def make_block(rng, kind):
    """-> list of rows (each at most MAX_CHARS characters as text)."""
    while True:
        rows = _make_block(rng, kind)
        if all(len(" ".join(r)) <= MAX_CHARS for r in rows):
            return rows


def _make_block(rng, kind):
    """-> list of rows; a row is a list of cells (one cell = plain text; several = columns) of <= MAX_CHARS chars
    when joined by one space."""
    n = rng.randint(2, BLOCK_LINES)
    if kind == "paragraph":
        words = [rng.choice(WORDS) for _ in range(rng.randint(4 * n, 5 * n + 4))]
        words[0] = words[0].capitalize()
        for i in range(1, len(words)):
            if rng.random() < 0.1:
                words[i - 1] += rng.choice(".,;:")
                if words[i - 1].endswith("."):
                    words[i] = words[i].capitalize()
            elif rng.random() < 0.08:
                words[i] = rng.choice(FIRST + [str(rng.randint(1, 999))])
        rows = [[line] for line in _fit(words, rng.randint(18, MAX_CHARS))][:n]
        rows[-1][0] = rows[-1][0].rstrip(".,;:") + "."
        return rows
    if kind == "table":
        head = rng.choice([["Item", "Qty", "Price"], ["Name", "Code", "Total"], ["Date", "Ref", "Amount"],
                           ["ITEM", "QTY", "EUR"], ["Product", "Units", "Cost"]])
        rows = [head]
        for _ in range(n - 1):
            a = rng.choice(WORDS + FIRST)
            if head[0].startswith("Date"):
                a = f"{rng.randint(1, 28):02d}/{rng.randint(1, 12):02d}"
            b = str(rng.randint(1, 99)) if rng.random() < 0.6 else f"{rng.choice(WORDS).upper()[:2]}{rng.randint(1, 99)}"
            rows.append([a.capitalize() if head[0][1].islower() else a.upper(), b, _price(rng)])
        return rows
    if kind == "receipt":
        store = " ".join(rng.choice(WORDS).upper() for _ in range(rng.randint(1, 2)))
        rows = [[store[:MAX_CHARS]]]
        total = 0
        for _ in range(rng.randint(1, BLOCK_LINES - 2)):
            p = _price(rng)
            total += float(p)
            rows.append([" ".join(rng.choice(WORDS).capitalize() for _ in range(rng.randint(1, 2))), p])
        rows.append([rng.choice(["TOTAL", "Total", "Subtotal", "Amount due", "CASH"]), f"${total:.2f}"])
        return rows
    return [[make_text(rng, 0.4)] for _ in range(n)]


def block_text(rows):
    return "\n".join(" ".join(r) for r in rows)


def render_block(rows, kind, rng, fonts, clean=False):
    """Return a uint8 [BLOCK_H, IMG_W] grayscale image of the rows, one per LINE_PITCH px: paragraphs and mixed
    lines left-aligned, table columns at fixed x stops, receipt amounts right-aligned."""
    path = fonts[rng.randrange(len(fonts))]
    size = rng.randint(22, 30) if clean else rng.randint(18, 32)
    stops = [8, 280, 400] if clean else [rng.randint(2, 24), rng.randint(250, 300), rng.randint(380, 420)]
    while True:
        font = _font(path, size)
        ok = True
        for r in rows:
            if len(r) == 1 or kind == "receipt":
                ok &= font.getlength(" ".join(r)) <= IMG_W - 16
            else:
                ok &= all(stops[i] + font.getlength(c) <= (stops[i + 1] - 8 if i + 1 < len(r) else IMG_W - 4)
                          for i, c in enumerate(r))
        if ok or size <= 12:
            break
        size -= 2
    im, d, bg, fg = _canvas(BLOCK_H, rng, clean)
    y0 = 0 if clean else rng.randint(-2, 2)
    for i, r in enumerate(rows):
        cy = y0 + i * LINE_PITCH + LINE_PITCH // 2
        if kind == "receipt" and len(r) == 2:
            d.text((stops[0], cy), r[0], fill=fg, font=font, anchor="lm")
            d.text((IMG_W - stops[0] - 4, cy), r[1], fill=fg, font=font, anchor="rm")
        elif len(r) == 1:
            d.text((stops[0], cy), r[0], fill=fg, font=font, anchor="lm")
        else:
            for x, c in zip(stops, r):
                d.text((x, cy), c, fill=fg, font=font, anchor="lm")
    return np.asarray(im, dtype=np.uint8) if clean else _degrade(im, bg, rng, 1.5)


def render_chunk(args):
    """Pool worker: (seed, n, font_dir, p_random, post, blocks) -> (texts, uint8 [n, H, W]) with H = IMG_H for
    lines, BLOCK_H for blocks; post(arr), if given, transforms the images in the worker (qwen3_5: the
    processor's resize)."""
    seed, n, font_dir, p_random, post, blocks = args
    rng = random.Random(seed)
    fonts = font_files(font_dir)
    if blocks:
        texts, ims = [], []
        for _ in range(n):
            kind = BLOCK_KINDS[rng.randrange(len(BLOCK_KINDS))]
            rows = make_block(rng, kind)
            texts.append(block_text(rows))
            ims.append(render_block(rows, kind, rng, fonts))
        arr = np.stack(ims)
    else:
        texts = [make_text(rng, p_random) for _ in range(n)]
        arr = np.stack([render(t, rng, fonts) for t in texts])
    return texts, (post(arr) if post else arr)


def render_many(n, seed, font_dir, p_random, procs, post=None, blocks=False):
    from multiprocessing import Pool
    chunk = 2000 if not blocks else 500
    jobs = [(seed * 1000003 + i + (7919 if blocks else 0), min(chunk, n - i * chunk), font_dir, p_random, post,
             blocks) for i in range((n + chunk - 1) // chunk)]
    with Pool(procs) as pool:
        parts = pool.map(render_chunk, jobs)
    texts = [t for p in parts for t in p[0]]
    return texts, np.concatenate([p[1] for p in parts])


def heldout(n, seed, font_dir):
    """Clean lines (white background, black text, no noise/blur): half random strings, half words/numbers."""
    rng = random.Random(seed)
    fonts = font_files(font_dir)
    out = []
    for i in range(n):
        text = make_text(rng, 1.0 if i % 2 == 0 else 0.0)
        out.append((text, render(text, rng, [fonts[i % len(fonts)]], clean=True)))
    return out


def heldout_blocks(n, seed, font_dir):
    """Clean blocks (white background, black text, no damage), the kinds in turn."""
    rng = random.Random(seed)
    fonts = font_files(font_dir)
    out = []
    for i in range(n):
        kind = BLOCK_KINDS[i % len(BLOCK_KINDS)]
        rows = make_block(rng, kind)
        out.append((block_text(rows), render_block(rows, kind, rng, [fonts[i % len(fonts)]], clean=True)))
    return out

