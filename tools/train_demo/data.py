"""Synthetic single-line text images for the demo OCR model (seeded, PIL + numpy only).

Every image is IMG_H x IMG_W, a multiple of 28 on both sides and within the processor's longest_edge,
so the Pixtral image processor never resamples it: 2 x 20 merged image tokens per line.
"""
import glob
import os
import random
import string

import numpy as np

IMG_H, IMG_W = 56, 560
MAX_CHARS = 28
PUNCT = ".,:;-/%()$#&+'!?@*="
CHARSET = string.ascii_letters + string.digits + PUNCT + " "   # CTC alphabet (index + 1; 0 = blank)

WORDS = """the of and to in is for on that with as by at from this be are or it an was not have has
which but will can all more one new other about also their time up after first people year two may
page total date name number amount invoice order price tax due paid item qty unit balance account
address city street phone email report table figure section chapter summary result results model data
value method system document text image line reading scan print office market river house water light
green blue red black white small large north south east west monday friday january march june october
december morning evening hello world quick brown fox jumps over lazy dog paper letter review note notes
customer service company limited receipt cash card change subtotal discount store open closed hours
doctor patient school student teacher class room floor level version release update build test check
""".split()
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


def _noise(rng):
    """A unit Gaussian field: a random window of a fixed seeded bank (one normal() per line is too slow)."""
    if not _NOISE:
        _NOISE.append(np.random.default_rng(12345).normal(0, 1, (IMG_H * 2, IMG_W * 2)).astype(np.float32))
    bank = _NOISE[0]
    y, x = rng.randrange(IMG_H), rng.randrange(IMG_W)
    return bank[y:y + IMG_H, x:x + IMG_W]


def _font(path, size):
    from PIL import ImageFont
    key = (path, size)
    if key not in _FONT_CACHE:
        _FONT_CACHE[key] = ImageFont.truetype(path, size)
    return _FONT_CACHE[key]


def render(text, rng, fonts, clean=False):
    """Return a uint8 [IMG_H, IMG_W] grayscale line image."""
    from PIL import Image, ImageDraw, ImageFilter
    path = fonts[rng.randrange(len(fonts))]
    size = rng.randint(22, 30) if clean else rng.randint(18, 34)
    while True:
        font = _font(path, size)
        x0, y0, x1, y1 = font.getbbox(text)
        if (x1 - x0 <= IMG_W - 8 and y1 - y0 <= IMG_H - 4) or size <= 12:
            break
        size -= 2
    bg = 255 if clean else rng.randint(185, 255)
    fg = 0 if clean else rng.randint(0, 70)
    im = Image.new("L", (IMG_W, IMG_H), bg)
    d = ImageDraw.Draw(im)
    w, h = x1 - x0, y1 - y0
    x = 8 if clean else rng.randint(2, max(2, min(40, IMG_W - w - 4)))
    y = (IMG_H - h) // 2 + (0 if clean else rng.randint(-3, 3))
    d.text((x - x0, y - y0), text, fill=fg, font=font)
    if not clean:
        if rng.random() < 0.3:
            im = im.filter(ImageFilter.GaussianBlur(rng.uniform(0.3, 0.9)))
        a = np.asarray(im, dtype=np.float32)
        if rng.random() < 0.5:
            a = a + _noise(rng) * rng.uniform(2, 10)
        return np.clip(a, 0, 255).astype(np.uint8)
    return np.asarray(im, dtype=np.uint8)


def render_chunk(args):
    """Pool worker: (seed, n, font_dir, p_random, post) -> (texts, uint8 [n, IMG_H, IMG_W]); post(arr), if given,
    transforms the rendered images in the worker (qwen3_5: the processor's resize)."""
    seed, n, font_dir, p_random, post = args
    rng = random.Random(seed)
    fonts = font_files(font_dir)
    texts = [make_text(rng, p_random) for _ in range(n)]
    arr = np.stack([render(t, rng, fonts) for t in texts])
    return texts, (post(arr) if post else arr)


def render_many(n, seed, font_dir, p_random, procs, post=None):
    from multiprocessing import Pool
    chunk = 2000
    jobs = [(seed * 1000003 + i, min(chunk, n - i * chunk), font_dir, p_random, post)
            for i in range((n + chunk - 1) // chunk)]
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
