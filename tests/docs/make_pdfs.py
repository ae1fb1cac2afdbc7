"""Writes the PDFs the `tensorfold ocr` document tests read (Python standard library only). Text is set in DejaVu Sans,
one of the fonts the demo models were trained on, not embedded: the PDF names it and carries its advance widths, and
poppler draws it from the system's copy (Debian's fonts-dejavu-core, which scripts/setup.sh installs). A standard
font (Helvetica) would be drawn with a substitute squeezed to Helvetica's widths, which the demo reads worse.

  python3 tests/docs/make_pdfs.py OUT_DIR          # every fixture below, plus <name>.txt ground truths
  python3 tests/docs/make_pdfs.py --example FILE   # the README's bundled example (examples/document.pdf)

Fixtures:
  multipage.pdf   8 pages of 560 x 224 pt, 4 lines each in the demo models' paragraph-block style (training-
                  vocabulary words, seeded, <= 27 characters, one line per 56 pt), so rendered at the demo's longest edge (560 px)
                  each page is exactly one training-sized block. multipage.txt: the pages' text, pages
                  separated by a line "\f".
  mixed.pdf       mixed sizes and rotations: 560 x 224 (/Rotate 0), 224 x 560 with /Rotate 90 (shown
                  landscape, text drawn so it reads upright once rotated), 1120 x 448 (/Rotate 180, text drawn
                  upside down), 280 x 700 portrait (/Rotate 0). mixed.json: each page's displayed size in pt.
  encrypted.pdf   RC4 40-bit standard security handler with a user password: unreadable without it.
  truncated.pdf   multipage.pdf cut at 40 % of its bytes (no xref, no trailer, page tree lost).
  empty.pdf       a page tree with no pages.
  garbage.pdf     not a PDF at all.
"""
import hashlib
import json
import os
import random
import sys

# Only words of the demo models' training vocabulary (tools/train_demo/data.py): inside a block they replace
# unseen words with known ones, which would measure the vocabulary, not the pipeline.
VOCAB = """the of and to in is for on that with as by at from this be are or it an was not have has which but will can
all more one new other about also their time up after first year two may page total date name number amount invoice
order price tax due paid item unit balance account address city street phone email report table figure section
chapter summary result results model data value method system document text image line reading scan print office
market river house water light green blue red black white small large north south east west morning evening hello
world quick brown fox jumps over lazy dog paper letter review note notes customer service company limited receipt
cash card change subtotal discount store open closed hours doctor patient school student teacher class room floor
level version release update build test check""".split()


def paragraph_pages(n, seed):
    """n pages of 4 lines (<= 26 characters) of a paragraph of training words, as the demo's "paragraph" blocks."""
    rng = random.Random(seed)
    pages = []
    for _ in range(n):
        words = [rng.choice(VOCAB) for _ in range(24)]
        words[0] = words[0].capitalize()
        lines, cur = [], ""
        for w in words:
            if cur and len(cur) + 1 + len(w) > 26:
                lines.append(cur)
                cur = w
            else:
                cur = f"{cur} {w}" if cur else w
            if len(lines) == 4:
                break
        lines = (lines + [cur])[:4]
        lines[-1] = lines[-1] + "."
        pages.append(lines)
    return pages


PAGES = [["The quick brown fox", "jumps over the lazy", "dog on Monday.", "Customer service open"]] + \
    paragraph_pages(7, 20261202)
ROTATED = ["Paper letter review", "notes for the office"]
UPSIDE = ["North street house", "water light green"]
PORTRAIT = ["Small room level"]
EXAMPLE = [
    ["Report summary for", "the new model release.", "Customer service open", "Monday to Friday."],
    ["Invoice total due", "for the customer account", "on the first of March."],
]


def esc(s):
    return s.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def text_ops(lines, size, x, top, pitch, matrix=(1, 0, 0, 1)):
    """Content stream: one line per `pitch` pt, the first line's middle at `top` pt below the page's top edge
    (in the text's own frame; `matrix` rotates that frame)."""
    a, b, c, d = matrix
    ops = []
    for i, line in enumerate(lines):
        # Baseline: the line's middle between DejaVu's ascender (0.928 em) and descender (-0.236) lies 0.346 em
        # above it (the demo's training text is drawn anchored there, PIL's anchor "lm").
        by = top - (i * pitch + pitch / 2) - size * 0.346
        ops.append(f"BT /F1 {size} Tf {a} {b} {c} {d} {x * a + by * c:.2f} {x * b + by * d:.2f} Tm ({esc(line)}) Tj ET")
    return "\n".join(ops).encode()


class Pdf:
    def __init__(self):
        self.objs = []  # bytes of objects 1..n

    def add(self, body):
        self.objs.append(body)
        return len(self.objs)

    def stream(self, data):
        return b"<< /Length %d >>\nstream\n" % len(data) + data + b"\nendstream"

    def build(self, pages, encrypt_user_password=None):
        """pages: list of (width_pt, height_pt, rotate, content bytes)."""
        desc = self.add(b"<< /Type /FontDescriptor /FontName /DejaVuSans /Flags 32 /FontBBox [-1021 -463 1793 1232] "
                        b"/ItalicAngle 0 /Ascent 928 /Descent -236 /CapHeight 729 /StemV 80 >>")
        font = self.add(b"<< /Type /Font /Subtype /TrueType /BaseFont /DejaVuSans /FirstChar 32 /LastChar 126 "
                        b"/Widths [%s] /FontDescriptor %d 0 R /Encoding /WinAnsiEncoding >>"
                        % (" ".join(map(str, DEJAVU_SANS_WIDTHS)).encode(), desc))
        pages_id = len(self.objs) + 2 * len(pages) + 1
        kids = []
        for w, h, rot, content in pages:
            c = self.add(None)
            self.objs[c - 1] = ("stream", content)
            kids.append(self.add(b"<< /Type /Page /Parent %d 0 R /MediaBox [0 0 %g %g] /Rotate %d "
                                 b"/Resources << /Font << /F1 %d 0 R >> >> /Contents %d 0 R >>"
                                 % (pages_id, w, h, rot, font, c)))
        assert self.add(b"<< /Type /Pages /Kids [%s] /Count %d >>"
                        % (b" ".join(b"%d 0 R" % k for k in kids), len(kids))) == pages_id
        catalog = self.add(b"<< /Type /Catalog /Pages %d 0 R >>" % pages_id)
        file_id = hashlib.md5(b"tensorfold test %d" % len(pages)).digest()
        key = None
        encrypt = None
        if encrypt_user_password is not None:
            o, u, key = rc4_security(encrypt_user_password.encode(), b"owner", file_id)
            encrypt = self.add(b"<< /Filter /Standard /V 1 /R 2 /O <%s> /U <%s> /P -44 >>"
                               % (o.hex().encode(), u.hex().encode()))
        out = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
        offsets = []
        for i, body in enumerate(self.objs, start=1):
            offsets.append(len(out))
            if isinstance(body, tuple):
                data = body[1]
                if key is not None:
                    data = rc4(hashlib.md5(key + i.to_bytes(3, "little") + b"\0\0").digest()[:10], data)
                body = self.stream(data)
            out += b"%d 0 obj\n" % i + body + b"\nendobj\n"
        xref = len(out)
        out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(self.objs) + 1)
        for off in offsets:
            out += b"%010d 00000 n \n" % off
        trailer = b"<< /Size %d /Root %d 0 R /ID [<%s> <%s>]" % (len(self.objs) + 1, catalog, file_id.hex().encode(),
                                                                file_id.hex().encode())
        if encrypt:
            trailer += b" /Encrypt %d 0 R" % encrypt
        out += b"trailer\n" + trailer + b" >>\nstartxref\n%d\n%%%%EOF\n" % xref
        return bytes(out)


# DejaVu Sans 2.37 advance widths of characters 32-126 in 1/1000 em (hmtx / unitsPerEm 2048, rounded).
DEJAVU_SANS_WIDTHS = [
    318, 401, 460, 838, 636, 950, 780, 275, 390, 390, 500, 838, 318, 361, 318, 337, 636, 636, 636, 636, 636, 636, 636,
    636, 636, 636, 337, 337, 838, 838, 838, 531, 1000, 684, 686, 698, 770, 632, 575, 775, 752, 295, 295, 656, 557, 863,
    748, 787, 603, 787, 695, 635, 611, 732, 684, 989, 685, 611, 685, 390, 337, 390, 838, 500, 500, 613, 635, 550, 635,
    615, 352, 635, 634, 278, 278, 579, 278, 974, 634, 612, 635, 635, 411, 521, 392, 634, 592, 818, 592, 592, 525, 636,
    337, 636, 838]

PAD = bytes.fromhex("28BF4E5E4E758A4164004E56FFFA01082E2E00B6D0683E802F0CA9FE6453697A")


def rc4(key, data):
    s = list(range(256))
    j = 0
    for i in range(256):
        j = (j + s[i] + key[i % len(key)]) % 256
        s[i], s[j] = s[j], s[i]
    i = j = 0
    out = bytearray()
    for ch in data:
        i = (i + 1) % 256
        j = (j + s[i]) % 256
        s[i], s[j] = s[j], s[i]
        out.append(ch ^ s[(s[i] + s[j]) % 256])
    return bytes(out)


def rc4_security(user, owner, file_id):
    """PDF 1.7 algorithms 3.2-3.4 (revision 2, 40-bit keys): the /O and /U entries and the file key."""
    o = rc4(hashlib.md5((owner + PAD)[:32]).digest()[:5], (user + PAD)[:32])
    p = (-44).to_bytes(4, "little", signed=True)
    key = hashlib.md5((user + PAD)[:32] + o + p + file_id).digest()[:5]
    return o, rc4(key, PAD), key


def demo_page(lines):
    return (560, 224, 0, text_ops(lines, 26, 8, 224, 56))


def write(path, data):
    with open(path, "wb") as f:
        f.write(data)


def main(argv):
    if len(argv) == 3 and argv[1] == "--example":
        write(argv[2], Pdf().build([demo_page(p) for p in EXAMPLE]))
        with open(os.path.splitext(argv[2])[0] + ".txt", "w") as f:
            f.write("\n\f\n".join("\n".join(p) for p in EXAMPLE) + "\n")
        return 0
    if len(argv) != 2:
        print(__doc__)
        return 2
    out = argv[1]
    os.makedirs(out, exist_ok=True)
    multipage = Pdf().build([demo_page(p) for p in PAGES])
    write(os.path.join(out, "multipage.pdf"), multipage)
    with open(os.path.join(out, "multipage.txt"), "w") as f:
        f.write("\n\f\n".join("\n".join(p) for p in PAGES) + "\n")
    # /Rotate 90 turns the page clockwise: the text runs up the unrotated page (matrix 0 1 -1 0), starting at
    # the bottom-left of the shown page, which is the unrotated page's bottom-right corner.
    rot90 = text_ops(ROTATED, 26, 8, 224, 56, (0, 1, -1, 0))
    rot90 = b"1 0 0 1 224 0 cm\n" + rot90
    # /Rotate 180: draw upside down about the page centre.
    rot180 = b"-1 0 0 -1 1120 448 cm\n" + text_ops(UPSIDE, 52, 16, 448, 112)
    mixed = [demo_page(PAGES[0]), (224, 560, 90, rot90), (1120, 448, 180, rot180),
             (280, 700, 0, text_ops(PORTRAIT, 26, 8, 700, 56))]
    write(os.path.join(out, "mixed.pdf"), Pdf().build(mixed))
    with open(os.path.join(out, "mixed.json"), "w") as f:
        json.dump({"shown_pt": [[560, 224], [560, 224], [1120, 448], [280, 700]],
                   "text": ["\n".join(PAGES[0]), "\n".join(ROTATED), "\n".join(UPSIDE), "\n".join(PORTRAIT)]}, f)
    write(os.path.join(out, "encrypted.pdf"), Pdf().build([demo_page(PAGES[1])], encrypt_user_password="secret"))
    write(os.path.join(out, "truncated.pdf"), multipage[: len(multipage) * 2 // 5])
    write(os.path.join(out, "empty.pdf"), Pdf().build([]))
    write(os.path.join(out, "garbage.pdf"), b"this is not a PDF file\n" * 20)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
