"""Synthetic text images at any geometry for the demo OCR models (issue 21; seeded, PIL + numpy only).

Single lines 150-1,600 px wide and 24-120 px high, and multi-line pages (3-30 lines, up to 1,600 px on the long
side) of paragraphs, key-value lines, tables, receipts and mixed dates / amounts / codes; grayscale or RGB, white
or off-white, fonts of FONT_PX px in regular, bold and italic faces (the fonts of font_dir plus font_dir/extra).
Training images are damaged (blur, JPEG, noise, slight rotation); the held-out ones (clean=True) only get what
keeps a PNG small (off-white, colour, a mild blur or tilt). The first recipe's 560 x 56 lines and 560 x 224
blocks (data.py) stay in the training mix.
"""
import glob
import os
import random
import string

import numpy as np

from data import (BLOCK_KINDS, CHARSET, FIRST, _fit, _font, block_text, font_files, make_block, make_text,
                  number_line, random_string, render, render_block, word_line)
from words import MORE_NAMES, MORE_WORDS, WORDS

LINE_HMIN, LINE_HMAX, LINE_WMIN, LINE_WMAX = 24, 120, 150, 1600
PAGE_MAX = 1600
FONT_PX = (16, 40)
MAX_LINE_CHARS = 72      # text of one line image (the CTC labels are padded to this)
MAX_PAGE_CHARS = 900     # text of one page (keeps a page's target within MAX_TGT["page"] tokens)
PAGE_KINDS = ("paragraph", "keyvalue", "table", "receipt", "mixed")

ALL_WORDS = WORDS + MORE_WORDS
MONTHS = "January February March April May June July August September October November December".split()
DAYS = "Monday Tuesday Wednesday Thursday Friday Saturday Sunday".split()
LABELS = ["Name", "Date", "Invoice no", "Invoice", "Order", "Order ID", "Customer", "Account", "Reference", "Ref",
          "Total", "Total amount", "Amount due", "Subtotal", "Tax", "VAT", "Balance", "Due date", "Phone", "Email",
          "Address", "City", "Country", "Zip", "Status", "Payment", "Method", "Card", "Time", "Room", "Client ID",
          "Item", "Quantity", "Price", "Discount", "Shipping", "Contact", "Project", "Version", "Code", "Page"]
CURRENCIES = ["EUR", "USD", "GBP", "CHF", "$", "EUR ", "USD "]


def pseudo_word(rng):
    """A pronounceable non-word (so the decoder cannot lean on a vocabulary)."""
    c, v = "bcdfghjklmnprstvwz", "aeiou"
    return "".join(rng.choice(c) + rng.choice(v) + (rng.choice(c) if rng.random() < 0.3 else "")
                   for _ in range(rng.randint(1, 4)))


def any_word(rng):
    r = rng.random()
    w = rng.choice(ALL_WORDS) if r < 0.7 else pseudo_word(rng) if r < 0.85 else rng.choice(FIRST + MORE_NAMES)
    s = rng.random()
    return w.capitalize() if s < 0.15 else w.upper() if s < 0.2 else w


def amount(rng):
    v = rng.choice([rng.randint(0, 99), rng.randint(0, 9999), rng.randint(0, 999999)])
    cents = rng.randint(0, 99)
    k = rng.randrange(7)
    if k == 0:
        return f"{v:,}.{cents:02d}"
    if k == 1:
        return f"{v:,}.{cents:02d} {rng.choice(['EUR', 'USD', 'GBP', 'CHF'])}"
    if k == 2:
        return f"${v:,}.{cents:02d}"
    if k == 3:
        return f"{v}.{cents:02d}"
    if k == 4:
        return f"-{v}.{cents:02d}"
    if k == 5:
        return f"{rng.choice(['EUR', 'USD'])} {v:,}.{cents:02d}"
    return f"{v},{cents:02d}"


def date_text(rng):
    y, m, d = rng.randint(1990, 2039), rng.randint(1, 12), rng.randint(1, 28)
    k = rng.randrange(9)
    if k == 0:
        return f"{y}-{m:02d}-{d:02d}"
    if k == 1:
        return f"{d:02d}/{m:02d}/{y}"
    if k == 2:
        return f"{d:02d}.{m:02d}.{y}"
    if k == 3:
        return f"{MONTHS[m - 1]} {d}, {y}"
    if k == 4:
        return f"{d} {MONTHS[m - 1][:3]} {y}"
    if k == 5:
        return f"{DAYS[rng.randrange(7)]} {d} {MONTHS[m - 1]}"
    if k == 6:
        return f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}"
    if k == 7:
        return f"{m}/{d}/{y % 100:02d}"
    return f"{d:02d}/{m:02d}/{y} {rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}"


def code_text(rng):
    up, dg = string.ascii_uppercase, string.digits
    k = rng.randrange(7)
    if k == 0:
        return f"{rng.choice(['INV', 'ORD', 'REF', 'PO', 'TX'])}-{rng.randint(2000, 2039)}-{rng.randint(0, 9999):04d}"
    if k == 1:
        return "".join(rng.choice(up + dg) for _ in range(rng.randint(4, 12)))
    if k == 2:
        return "-".join("".join(rng.choice("0123456789ABCDEF") for _ in range(4)) for _ in range(rng.randint(2, 4)))
    if k == 3:
        return f"+{rng.randint(1, 99)} {rng.randint(1, 9)} {rng.randint(10, 99)} {rng.randint(10, 99)} {rng.randint(10, 99)}"
    if k == 4:
        return f"{rng.choice(ALL_WORDS)}.{rng.choice(ALL_WORDS)}@{rng.choice(ALL_WORDS)}.{rng.choice(['com', 'org', 'net', 'eu'])}"
    if k == 5:
        return f"{rng.randint(10000, 99999)} {rng.choice(MORE_NAMES[24:])}"
    return f"{rng.randint(1, 999)} {rng.choice(ALL_WORDS).capitalize()} {rng.choice(['Street', 'St.', 'Road', 'Ave'])}"


def sentence(rng, max_chars):
    words = [any_word(rng) for _ in range(rng.randint(2, 14))]
    words[0] = words[0].capitalize()
    for i in range(len(words) - 1):
        if rng.random() < 0.08:
            words[i] += rng.choice(",,;:")
        elif rng.random() < 0.05:
            words[i + 1] = rng.choice([str(rng.randint(1, 999)), amount(rng), date_text(rng)])
    s = " ".join(words)
    if rng.random() < 0.6:
        s += rng.choice("..!?:")
    return s[:max_chars].rstrip()


def key_value(rng):
    v = rng.random()
    val = (amount(rng) if v < 0.3 else date_text(rng) if v < 0.5 else code_text(rng) if v < 0.75 else
           " ".join(any_word(rng) for _ in range(rng.randint(1, 3))))
    lab = rng.choice(LABELS)
    lab = lab.upper() if rng.random() < 0.15 else lab
    return f"{lab}{rng.choice([':', ':', ':', '', ' -'])} {val}"


def line_text(rng, max_chars=MAX_LINE_CHARS):
    """One line of any kind (<= max_chars characters, >= 1)."""
    while True:
        r = rng.random()
        if r < 0.22:
            s = " ".join(random_string(rng) for _ in range(rng.randint(1, 3)))
        elif r < 0.5:
            s = sentence(rng, max_chars)
        elif r < 0.65:
            s = key_value(rng)
        elif r < 0.75:
            s = amount(rng) if rng.random() < 0.5 else date_text(rng)
        elif r < 0.85:
            s = code_text(rng)
        elif r < 0.93:
            s = number_line(rng)
        else:
            s = word_line(rng)
        if rng.random() < 0.15:  # short lines of a few characters (a page number, a total)
            s = s[:rng.randint(1, 6)].strip()
        s = " ".join(s.split())
        if 1 <= len(s) <= max_chars and all(c in CHARSET for c in s):
            return s


def _wrap(words, width):
    return _fit(words, width)


def page_rows(rng, kind, n_lines):
    """-> rows (a row is a list of cells; several cells = columns) of one page of `kind`, <= n_lines rows."""
    if kind == "paragraph":
        width = rng.randint(20, 64)
        rows = []
        while len(rows) < n_lines:
            para = sentence(rng, 400) + " " + " ".join(sentence(rng, 400) for _ in range(rng.randint(0, 4)))
            rows += [[ln] for ln in _wrap(para.split(), width)]
            if rng.random() < 0.3 and len(rows) < n_lines:  # a heading or a short line between paragraphs
                rows.append([word_line(rng)])
        return rows[:n_lines]
    if kind == "keyvalue":
        rows = []
        for _ in range(n_lines):
            kv = key_value(rng)
            if ":" in kv and rng.random() < 0.5:  # value in its own column
                a, b = kv.split(":", 1)
                rows.append([a + ":", b.strip()])
            else:
                rows.append([kv])
        return rows
    if kind == "table":
        ncol = rng.randint(2, 5)
        heads = ["Item", "Qty", "Price", "Date", "Ref", "Amount", "Name", "Code", "Total", "Units", "Unit", "Status",
                 "Description", "No", "Rate", "Hours", "City", "ID"]
        head = rng.sample(heads, ncol)
        if rng.random() < 0.3:
            head = [h.upper() for h in head]
        rows = [head]
        cell = [rng.choice([lambda: any_word(rng), lambda: str(rng.randint(1, 999)), lambda: amount(rng).split()[0],
                            lambda: date_text(rng).split()[0], lambda: code_text(rng)[:10]]) for _ in range(ncol)]
        for _ in range(n_lines - 1):
            rows.append([c() for c in cell])
        return rows
    if kind == "receipt":
        rows = [[" ".join(rng.choice(ALL_WORDS).upper() for _ in range(rng.randint(1, 3)))]]
        if rng.random() < 0.7:
            rows.append([code_text(rng)])
        rows.append([date_text(rng)])
        total = 0.0
        for _ in range(max(1, n_lines - len(rows) - 2)):
            p = rng.randint(0, 9999) / 100
            total += p
            name = " ".join(any_word(rng) for _ in range(rng.randint(1, 3)))
            if rng.random() < 0.3:
                name = f"{rng.randint(2, 9)} x {name}"
            rows.append([name, f"{p:.2f}"])
        tax = round(total * rng.choice([0.05, 0.1, 0.2]), 2)
        rows.append([rng.choice(["Tax", "VAT", "TAX", "Tax 20%"]), f"{tax:.2f}"])
        rows.append([rng.choice(["TOTAL", "Total", "Amount due", "Total EUR", "CASH"]), f"{total + tax:,.2f}"])
        return rows[:n_lines]
    return [[line_text(rng, 48)] for _ in range(n_lines)]


def page_text(rows):
    return "\n".join(" ".join(c for c in r) for r in rows)


_COLOURS = [((255, 255, 255), (0, 0, 0)), ((250, 246, 232), (30, 30, 40)), ((236, 242, 250), (10, 30, 90)),
            ((255, 250, 240), (120, 20, 20)), ((240, 248, 240), (10, 70, 30)), ((248, 248, 248), (60, 60, 60)),
            ((255, 255, 224), (0, 0, 110)), ((245, 240, 255), (50, 0, 80))]


def _colours(rng, rgb, clean):
    """-> (background, ink), each an int (grayscale) or an RGB tuple."""
    if rgb:
        bg, ink = _COLOURS[rng.randrange(len(_COLOURS))]
        j = 0 if clean else 12
        bg = tuple(max(150, min(255, c + rng.randint(-j, j // 2))) for c in bg)
        ink = tuple(max(0, min(110, c + rng.randint(-j, j))) for c in ink)
        return bg, ink
    bg = rng.choice([255, 255, rng.randint(232, 252)]) if clean else rng.choice([255, rng.randint(175, 255)])
    ink = rng.randint(0, 50) if clean else rng.randint(0, 90)
    return bg, ink


def _new_font(rng, fonts, lo=FONT_PX[0], hi=FONT_PX[1]):
    return fonts[rng.randrange(len(fonts))], rng.randint(lo, hi)


def _damage(im, bg, rng, clean, max_deg):
    """PIL image -> uint8 array [h, w] or [h, w, 3]: tilt, blur, JPEG, noise (training); a mild tilt or blur
    (held-out)."""
    import io
    from PIL import Image, ImageFilter
    if rng.random() < (0.15 if clean else 0.35):
        im = im.rotate(rng.uniform(-max_deg, max_deg) * (0.5 if clean else 1), resample=Image.BICUBIC,
                       fillcolor=bg, expand=False)
    if rng.random() < (0.15 if clean and im.mode == "L" else 0 if clean else 0.3):
        im = im.filter(ImageFilter.GaussianBlur(rng.uniform(0.3, 0.7 if clean else 1.1)))
    if not clean and rng.random() < 0.3:
        buf = io.BytesIO()
        im.save(buf, "JPEG", quality=rng.randint(35, 90))
        im = Image.open(io.BytesIO(buf.getvalue()))
        im.load()
    a = np.asarray(im, dtype=np.uint8)
    if not clean and rng.random() < 0.4:
        f = a.astype(np.float32)
        n = _page_noise(rng, f.shape[0], f.shape[1]) * rng.uniform(2, 9)
        f += n[..., None] if f.ndim == 3 else n
        a = np.clip(f, 0, 255).astype(np.uint8)
    return a


_PAGE_NOISE = []


def _page_noise(rng, h, w):
    """A unit Gaussian field [h, w]: a random window of a seeded 2,200 x 2,200 bank (made once per process)."""
    if not _PAGE_NOISE:
        _PAGE_NOISE.append(np.random.default_rng(54321).normal(0, 1, (2200, 2200)).astype(np.float32))
    bank = _PAGE_NOISE[0]
    if h > bank.shape[0] or w > bank.shape[1]:
        return np.random.default_rng(rng.randrange(1 << 30)).normal(0, 1, (h, w)).astype(np.float32)
    y, x = rng.randrange(bank.shape[0] - h + 1), rng.randrange(bank.shape[1] - w + 1)
    return bank[y:y + h, x:x + w]


def _snap(h, w, shape_fn, grid):
    """Smallest (dh, dw) >= 0 (within a bound) so that shape_fn(h + dh, w + dw) lands on the grid (multiples of
    grid = (gh, gw)); None when there is none. The canvas grows by that much background, so every processed
    image of a training bucket has one of a few shapes."""
    if grid is None:
        return 0, 0
    gh, gw = grid
    ok = lambda s: s[0] % gh == 0 and s[1] % gw == 0  # noqa: E731
    for dh in range(0, 4 * gh):
        if shape_fn(h + dh, w)[0] % gh == 0:
            for dw in range(0, 4 * gw):
                if ok(shape_fn(h + dh, w + dw)):
                    return dh, dw
            break
    for dh in range(0, 4 * gh, 3):
        for dw in range(0, 4 * gw, 3):
            if ok(shape_fn(h + dh, w + dw)):
                return dh, dw
    return None


def _pad(im, dh, dw, bg, rng):
    """Grow the canvas by dh rows and dw columns of background, split at random between the sides."""
    if not dh and not dw:
        return im
    from PIL import Image
    top, left = rng.randint(0, dh), rng.randint(0, dw)
    out = Image.new(im.mode, (im.width + dw, im.height + dh), bg)
    out.paste(im, (left, top))
    return out


def render_line_any(text, rng, fonts, clean=False, rgb=False, shape_fn=None, grid=None):
    """A line image of any geometry: font FONT_PX px, canvas LINE_W* x LINE_H* px (wider than the text by random
    margins, sometimes much wider), text left-aligned (sometimes centred or right-aligned). Returns uint8
    [h, w] or [h, w, 3], or None when it cannot be snapped to the grid."""
    from PIL import Image, ImageDraw
    path, size = _new_font(rng, fonts)
    while True:
        font = _font(path, size)
        x0, y0, x1, y1 = font.getbbox(text)
        tw, th = x1 - x0, y1 - y0
        if (tw + 8 <= LINE_WMAX and th + 4 <= LINE_HMAX) or size <= 12:
            break
        size -= 2
    if tw + 8 > LINE_WMAX:
        return None
    left = rng.randint(2, 40) if rng.random() < 0.8 else rng.randint(2, 200)
    right = rng.randint(2, 60) if rng.random() < 0.6 else rng.randint(2, 600)
    w = max(LINE_WMIN, min(LINE_WMAX, tw + left + right))
    left = min(left, w - tw - 2)
    vm = rng.randint(2, max(3, size // 2)) if rng.random() < 0.7 else rng.randint(2, 40)
    h = max(LINE_HMIN, min(LINE_HMAX, th + vm + rng.randint(2, max(3, size // 2))))
    if rng.random() < 0.15:  # a tall crop around the line
        h = rng.randint(min(LINE_HMAX, th + 4), LINE_HMAX)
    top = max(1, min(h - th - 1, (h - th) // 2 + rng.randint(-vm // 2, vm // 2)))
    snap = _snap(h, w, shape_fn, grid) if shape_fn else (0, 0)
    if snap is None:
        return None
    bg, ink = _colours(rng, rgb, clean)
    im = Image.new("RGB" if rgb else "L", (w, h), bg)
    align = rng.random()
    x = left if align < 0.85 else (w - tw) // 2 if align < 0.93 else w - tw - left
    ImageDraw.Draw(im).text((x - x0, top - y0), text, fill=ink, font=font)
    im = _pad(im, snap[0], snap[1], bg, rng)
    return _damage(im, bg, rng, clean, 1.5)


def render_page(rows, kind, rng, fonts, clean=False, rgb=False, shape_fn=None, grid=None):
    """A page of rows: one font, line pitch 1.15-1.8 x the font size, margins, columns at stops (tables,
    key-value pairs), receipt amounts right-aligned. The font shrinks until the page fits PAGE_MAX px. Returns
    uint8 [h, w] or [h, w, 3], or None (too large even at 16 px, or no snap)."""
    from PIL import Image, ImageDraw
    path, size = _new_font(rng, fonts)
    pitch_f = rng.uniform(1.15, 1.8)
    gap = rng.uniform(1.0, 3.0)  # column gap in multiples of the font size
    while True:
        font = _font(path, size)
        pitch = int(round(size * pitch_f))
        ncol = max(len(r) for r in rows)
        colw = [0] * ncol
        for r in rows:
            if len(r) > 1 and kind != "receipt":
                for i, c in enumerate(r):
                    colw[i] = max(colw[i], font.getlength(c))
        stops = [0]
        for i in range(1, ncol):
            stops.append(stops[-1] + colw[i - 1] + gap * size)
        width = 0
        for r in rows:
            if len(r) == 1:
                width = max(width, font.getlength(r[0]))
            elif kind == "receipt":
                width = max(width, font.getlength(r[0]) + font.getlength(r[1]) + 2 * size)
            else:
                width = max(width, stops[len(r) - 1] + font.getlength(r[-1]))
        mx, my = rng.randint(6, 90), rng.randint(6, 90)
        w, h = int(width) + 2 * mx, len(rows) * pitch + 2 * my
        if max(w, h) <= PAGE_MAX:
            break
        if size <= FONT_PX[0]:
            return None
        size = max(FONT_PX[0], size - 2)
    if kind == "receipt":  # amounts right-aligned at the receipt's width (or a bit wider)
        w += rng.randint(0, min(300, PAGE_MAX - w))
    if rng.random() < 0.3:  # blank space below the text
        h += rng.randint(0, min(400, PAGE_MAX - h))
    snap = _snap(h, w, shape_fn, grid) if shape_fn else (0, 0)
    if snap is None:
        return None
    bg, ink = _colours(rng, rgb, clean)
    im = Image.new("RGB" if rgb else "L", (w, h), bg)
    d = ImageDraw.Draw(im)
    for i, r in enumerate(rows):
        cy = my + i * pitch + pitch // 2
        if kind == "receipt" and len(r) == 2:
            d.text((mx, cy), r[0], fill=ink, font=font, anchor="lm")
            d.text((w - mx, cy), r[1], fill=ink, font=font, anchor="rm")
        else:
            for x, c in zip(stops, r):
                d.text((mx + x, cy), c, fill=ink, font=font, anchor="lm")
    im = _pad(im, snap[0], snap[1], bg, rng)
    return _damage(im, bg, rng, clean, 1.0)


def make_page(rng, kind, max_lines=30):
    """-> rows of a page of `kind` with 3..max_lines lines and at most MAX_PAGE_CHARS characters."""
    n = rng.randint(3, max_lines) if rng.random() < 0.6 else rng.randint(3, 12)
    while True:
        rows = page_rows(rng, kind, n)
        text = page_text(rows)
        if len(text) <= MAX_PAGE_CHARS and len(rows) >= 3 and all(c in CHARSET + "\n" for c in text):
            return rows
        n = max(3, n - 3)


def scale_block(a, rng, shape_fn=None, grid=None, lo=1.2, hi=1.9):
    """A first-recipe block (uint8 [224, 560]) at the scale a PDF page of that size shows it when rasterised to
    a longer edge than 560 (tests/docs/make_pdfs.py's pages are such blocks; the call-8 demo-lighton, trained
    without this, read them at 46.67 % CER at longest_edge 1008): resized by s in [lo, hi] (bicubic), the canvas
    grown by background to the page bucket grid. None when no snap exists."""
    from PIL import Image
    s = rng.uniform(lo, hi)
    h, w = round(a.shape[0] * s), round(a.shape[1] * s)
    snap = _snap(h, w, shape_fn, grid) if shape_fn else (0, 0)
    if snap is None:
        return None
    im = Image.fromarray(a).resize((w, h), Image.BICUBIC)
    bg = int(np.median(a[0]))
    return np.asarray(_pad(im, snap[0], snap[1], bg, rng), dtype=np.uint8)


def all_fonts(font_dir):
    """The fonts of font_dir and font_dir/extra (regular, bold, italic faces)."""
    return font_files(font_dir) + sorted(glob.glob(os.path.join(font_dir, "extra", "*.ttf")))


def render_any_chunk(args):
    """Pool worker for the any-geometry training data: (seed, n, font_dir, kind, prep) -> list of (kind, text,
    image, source) where kind is "line" or "page" and image is what prep(image) returns (the family's processor, see
    train.py) and source is "old" for the first recipe's images, else "new"; kind "line" draws line_text lines, "page" pages of PAGE_KINDS, "oldline" / "oldblock" the
    560 x 56 lines and 560 x 224 blocks of the first demo recipe (kept so the old held-out sets still read),
    "scaledblock" those blocks enlarged (scale_block: the document path's pages; source "new")."""
    seed, n, font_dir, kind, prep = args
    rng = random.Random(seed)
    fonts = all_fonts(font_dir)
    old_fonts = font_files(font_dir)
    shape_fn, grids = prep.shape_fn, prep.grids
    out = []
    while len(out) < n:
        rgb = rng.random() < 0.3
        if kind == "line":
            text = line_text(rng)
            a = render_line_any(text, rng, fonts, rgb=rgb, shape_fn=shape_fn, grid=grids["line"])
            k = "line"
        elif kind == "page":
            pk = PAGE_KINDS[rng.randrange(len(PAGE_KINDS))]
            rows = make_page(rng, pk)
            text = page_text(rows)
            a = render_page(rows, pk, rng, fonts, rgb=rgb, shape_fn=shape_fn, grid=grids["page"])
            k = "page"
        elif kind == "oldline":
            text = make_text(rng, 0.6)
            a, k = render(text, rng, old_fonts), "line"
        else:
            bk = BLOCK_KINDS[rng.randrange(len(BLOCK_KINDS))]
            rows = make_block(rng, bk)
            text, a, k = block_text(rows), render_block(rows, bk, rng, old_fonts), "page"
            if kind == "scaledblock":
                a = scale_block(a, rng, shape_fn, grids["page"])
        if a is None:
            continue
        r = prep(a)
        if r is not None:
            out.append((k, text, r, "old" if kind.startswith("old") else "new"))
    return out


def heldout_any_lines(n, seed, font_dir):
    """Held-out lines of any geometry: even indices grayscale, odd RGB; clean but for off-white / colour and
    an occasional mild blur or tilt. -> [(text, uint8 image)]"""
    rng = random.Random(seed)
    fonts = all_fonts(font_dir)
    out = []
    while len(out) < n:
        text = line_text(rng)
        a = render_line_any(text, rng, fonts, clean=True, rgb=len(out) % 2 == 1)
        if a is not None:
            out.append((text, a))
    return out


def heldout_pages(n, seed, font_dir):
    """Held-out pages, PAGE_KINDS in turn, even indices grayscale, odd RGB. -> [(kind, text, uint8 image)]"""
    rng = random.Random(seed)
    fonts = all_fonts(font_dir)
    out = []
    while len(out) < n:
        kind = PAGE_KINDS[len(out) % len(PAGE_KINDS)]
        rows = make_page(rng, kind)
        a = render_page(rows, kind, rng, fonts, clean=True, rgb=len(out) % 2 == 1)
        if a is not None:
            out.append((kind, page_text(rows), a))
    return out
