"""`images` subcommand: deterministic golden input images of odd sizes and kinds (PIL only)."""
import io
import os

from common import write_json


def _page(w, h, seed, text_lines):
    """White page with deterministic boxes, rules and text rendered with Pillow's built-in font."""
    import random
    from PIL import Image, ImageDraw, ImageFont
    rng = random.Random(seed)
    img = Image.new("RGB", (w, h), (255, 255, 255))
    d = ImageDraw.Draw(img)
    font = ImageFont.load_default(size=max(10, h // 60))
    y = h // 20
    for i, line in enumerate(text_lines):
        d.text((w // 12, y), line, fill=(rng.randrange(40), rng.randrange(40), rng.randrange(60)), font=font)
        y += h // 40
        if y > h - h // 10:
            break
    for _ in range(6):
        x0, y0 = rng.randrange(w), rng.randrange(h)
        d.rectangle([x0, y0, min(w - 1, x0 + rng.randrange(10, w // 4 + 11)), min(h - 1, y0 + rng.randrange(5, h // 8 + 6))],
                    outline=(rng.randrange(256), rng.randrange(256), rng.randrange(256)), width=2)
    d.line([(0, h - 3), (w - 1, h - 3)], fill=(0, 0, 0), width=1)
    return img


TEXT = ["LightOnOCR golden page", "The quick brown fox jumps over the lazy dog. 0123456789",
        "Invoice total: $1,234.56 due 2026-11-29", "Table 3: Results (higher is better)",
        "| Name | Qty | Price |", "| Apple | 3 | 0.50 |", "Bonjour, ca va? Grosse Strasse.",
        "E = mc^2 ; integral of x^2 from 0 to 1 is 1/3", "- item one", "- item two", "- item three"]


def _gradient(w, h, seed, noise=0):
    import numpy as np
    from PIL import Image
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float64)
    r = 255 * xx / max(1, w - 1)
    g = 255 * yy / max(1, h - 1)
    b = 127.5 + 127.5 * np.sin((xx + 2 * yy) / 23.0)
    a = np.stack([r, g, b], -1)
    if noise:
        a = a + rng.normal(0, noise, a.shape)
    return Image.fromarray(np.clip(np.rint(a), 0, 255).astype(np.uint8))


def make_images():
    """Return [(name, filename, bytes)] in a fixed order."""
    import numpy as np
    from PIL import Image
    out = []

    def png(img, **kw):
        b = io.BytesIO()
        img.save(b, format="PNG", optimize=False, compress_level=9, **kw)
        return b.getvalue()

    out.append(("px1x1", "px1x1.png", png(Image.new("RGB", (1, 1), (200, 30, 90)))))
    out.append(("tall_13x977", "tall_13x977.png", png(_gradient(13, 977, 1))))
    out.append(("wide_977x13", "wide_977x13.png", png(_gradient(977, 13, 2))))
    out.append(("page_1540x1190", "page_1540x1190.png", png(_page(1540, 1190, 3, TEXT))))
    out.append(("page_1583x2048", "page_1583x2048.png", png(_page(1583, 2048, 4, TEXT * 3))))
    out.append(("gray_L", "gray_L.png", png(_gradient(300, 200, 5).convert("L"))))
    rgba = _gradient(256, 192, 6)
    alpha = np.tile(np.linspace(0, 255, 256).astype(np.uint8), (192, 1))
    alpha[:40, :40] = 0
    rgba = Image.merge("RGBA", (*rgba.split(), Image.fromarray(alpha)))
    out.append(("rgba_alpha", "rgba_alpha.png", png(rgba)))
    pal = _page(200, 150, 7, TEXT[:3]).quantize(colors=16, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
    out.append(("palette_P", "palette_P.png", png(pal, transparency=0)))
    yy, xx = np.mgrid[0:120, 0:160]
    g16 = ((xx * 409 + yy * 137) % 65536).astype(np.uint16)
    out.append(("gray16_I16", "gray16_I16.png", png(Image.fromarray(g16))))
    jpg_src = _page(320, 240, 8, TEXT[:5])
    exif = Image.Exif()
    exif[0x0112] = 6  # Orientation: rotate 90 CW to display
    b = io.BytesIO()
    jpg_src.save(b, format="JPEG", quality=90, exif=exif.tobytes(), subsampling=2)
    out.append(("jpeg_exif6", "jpeg_exif6.jpg", b.getvalue()))
    b = io.BytesIO()
    _gradient(300, 200, 9, noise=8).save(b, format="WEBP", quality=75, method=4)
    out.append(("webp_lossy", "webp_lossy.webp", b.getvalue()))
    b = io.BytesIO()
    _page(300, 200, 10, TEXT[:4]).save(b, format="WEBP", lossless=True, quality=100, method=4)
    out.append(("webp_lossless", "webp_lossless.webp", b.getvalue()))
    out.append(("photo_noise", "photo_noise.png", png(_gradient(320, 240, 11, noise=20))))
    return out


def write_images(out_dir):
    from PIL import Image
    os.makedirs(out_dir, exist_ok=True)
    cases = []
    for name, fname, data in make_images():
        with open(os.path.join(out_dir, fname), "wb") as f:
            f.write(data)
        im = Image.open(io.BytesIO(data))
        cases.append({"name": name, "file": fname, "mode": im.mode, "size": [im.width, im.height],
                      "format": im.format})
    write_json(os.path.join(out_dir, "cases.json"), cases)
    return cases
