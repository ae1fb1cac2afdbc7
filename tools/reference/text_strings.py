#!/usr/bin/env python3
"""The deterministic test strings of the text goldens (tests/golden/text/strings.jsonl.gz): fixed seed, pure Python,
no network. Used by text_goldens.py (`strings` subcommand); see its docstring."""
import gzip
import json
import os
import random
import unicodedata

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TEXT_DIR = os.path.join(ROOT, "tests", "golden", "text")
SEED = 20261129

# ----------------------------------------------------------------------------------------------------------------
# Strings. Only explicit code point lists/ranges of characters assigned since Unicode <= 13 (or the explicit
# post-14 list below) are used, and unicodedata only for NFD of such characters, so the output does not depend on
# the Python/Unicode version that runs this.

def _rng(a, b, skip=()):
    return [chr(c) for c in range(a, b + 1) if c not in skip]


SCRIPTS = {
    "latin_accents": _rng(0xC0, 0xFF, (0xD7, 0xF7)) + _rng(0x100, 0x17F) + list("abcdefghijklmnopqrstuvwxyz"),
    "vietnamese": list("ăâđêôơưạảấầẩẫậắằẳẵặẹẻẽếềểễệỉịọỏốồổỗộớờởỡợụủứừửữựỳỵỷỹ"),
    "cjk": _rng(0x4E00, 0x9FA5),
    "kana": _rng(0x3041, 0x3096) + _rng(0x30A1, 0x30FA) + ["ー"] + _rng(0xFF66, 0xFF9D),
    "hangul": _rng(0xAC00, 0xD7A3),
    "hangul_compat_jamo": _rng(0x3131, 0x318E),
    "arabic": _rng(0x0621, 0x063A) + _rng(0x0641, 0x064A),
    "arabic_harakat": _rng(0x064B, 0x0652),
    "hebrew": _rng(0x05D0, 0x05EA),
    "hebrew_niqqud": _rng(0x05B0, 0x05BC),
    "devanagari": _rng(0x0905, 0x0939),
    "devanagari_signs": _rng(0x093E, 0x094D, (0x094E,)) + ["\u0902", "\u0901", "\u0903"],
    "thai": _rng(0x0E01, 0x0E2E),
    "thai_marks": _rng(0x0E31, 0x0E31) + _rng(0x0E34, 0x0E3A) + _rng(0x0E47, 0x0E4E),
    "cyrillic": _rng(0x0410, 0x044F) + ["ё", "Ё", "і", "ї", "є", "ґ", "ў"],
    "greek": _rng(0x0391, 0x03A9, (0x03A2,)) + _rng(0x03B1, 0x03C9) + list("άέήίόύώΐΰ"),
    "georgian": _rng(0x10D0, 0x10FA),
    "armenian": _rng(0x0531, 0x0556) + _rng(0x0561, 0x0586),
    "bengali": _rng(0x0985, 0x098C) + _rng(0x0995, 0x09A8),
    "tamil": _rng(0x0B85, 0x0B8A) + _rng(0x0B95, 0x0B95) + _rng(0x0BA8, 0x0BAA) + ["\u0BCD", "\u0BBF"],
    "ethiopic": _rng(0x1200, 0x1248),
}
WORDS = {
    "latin_accents": "café naïve résumé Ångström São Paulo Dvořák Łódź œuvre Straße Æsir Øresund İstanbul "
                     "ğüşıöç Ñandú façade coöperate Zürich Kraków piñata jalapeño".split(),
    "cjk": "中文 分词 测试 今天 天气 很好 漢字 繁體 香港 北京大学 人工智能 机器学习 東京 大阪".split(),
    "kana": "ひらがな カタカナ 日本語の テキスト です ありがとう こんにちは ｶﾀｶﾅ ﾃｽﾄ".split(),
    "hangul": "한국어 텍스트 안녕하세요 감사합니다 대한민국 서울 똠방각하 읽어요".split(),
    "arabic": "مرحبا بالعالم هذا نص عربي مُحَمَّد الكِتَابُ السلام عليكم ١٢٣".split(),
    "hebrew": "שלום עולם שָׁלוֹם ירושלים עברית תודה".split(),
    "devanagari": "नमस्ते दुनिया हिन्दी पाठ भारत संस्कृतम् क्षत्रिय".split(),
    "thai": "สวัสดีชาวโลก ภาษาไทย ไม่มีช่องว่าง กรุงเทพมหานคร ขอบคุณครับ".split(),
    "cyrillic": "Привет мир Съешь же ещё этих мягких французских булок Україна Беларусь".split(),
    "greek": "Καλημέρα κόσμε ΑΒΓΔ Ελληνικά γλώσσα ΐ ΰ Ωμέγα".split(),
}
# Code points assigned in Unicode 15/16 (so Cn for Debian's Unicode-14 PCRE2/Oniguruma) but classified as L/N/M by
# HF tokenizers (Unicode 16 tables); ranges from the research table of HF's classes.
NEW_SINCE_14 = {
    "L": [(0x1C89, 0x1C8A), (0xA7CB, 0xA7CD), (0xA7DA, 0xA7DC), (0x105C0, 0x105F3), (0x10D4A, 0x10D65),
          (0x11F04, 0x11F10), (0x16D40, 0x16D6C), (0x1E4D0, 0x1E4EB), (0x1E5D0, 0x1E5ED), (0x2EBF0, 0x2EC20),
          (0x31350, 0x31380), (0x13460, 0x13480)],
    "N": [(0x10D40, 0x10D49), (0x11F50, 0x11F59), (0x16D70, 0x16D79), (0x1CCF0, 0x1CCF9), (0x1E4F0, 0x1E4F9),
          (0x1D2C0, 0x1D2D3)],
    "M": [(0x0897, 0x0897), (0x0CF3, 0x0CF3), (0x0ECE, 0x0ECE), (0x10D69, 0x10D6D), (0x11F00, 0x11F01),
          (0x1E08F, 0x1E08F), (0x1E4EC, 0x1E4EF)],
    "emoji": [(0x1FAE8, 0x1FAE8), (0x1F6DC, 0x1F6DC), (0x1FA89, 0x1FA89), (0x1FA8F, 0x1FA8F), (0x1FABE, 0x1FABE),
              (0x1FAC6, 0x1FAC6), (0x1FA75, 0x1FA77)],
}
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
            "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>", "<|vision_end|>",
            "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>", "<tool_call>", "</tool_call>", "<|fim_prefix|>",
            "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>", "<tool_response>",
            "</tool_response>", "<think>", "</think>"]
NEAR_SPECIALS = ["<|im_start", "<|im_end|", "< |im_end|>", "<think >", "<|IM_END|>", "<|im_end|>>", "<<|im_end|>",
                 "<|im_end||>", "<|im_end |>", "</think", "<thinking>", "<|im_start|", "im_start|>", "<|im-end|>",
                 "<| im_start |>", "<|endoftext", "endoftext|>", "<|image_pad", "<|image_pad|", "< think>",
                 "<Think>", "<THINK>", "</ think>", "<tool_call >", "<|im_end|\u200b>", "<\uff5cim_end\uff5c>",
                 "<|vision_start|><|vision_end", "<|<|im_end|>|>", "<|im_start|>>", "<|>", "<||>", "<|"]
EMOJI_BASE = ["😀", "😂", "🥲", "❤️", "👍", "🎉", "🚀", "🔥", "✨", "🙏", "🤖", "🧠", "📄", "✅", "❌", "☕", "⚽",
              "🇺", "🏳️", "☺", "✌", "☝️", "♥", "©", "®", "™", "↔️", "🀄", "🃏"]
EMOJI_ZWJ = ["👨‍👩‍👧‍👦", "👩‍💻", "👨‍🔬", "🏳️‍🌈", "🏴‍☠️", "👁️‍🗨️", "🧑‍🤝‍🧑", "❤️‍🔥", "🐕‍🦺", "👩🏽‍🚀",
             "🧑🏿‍🦰", "👨🏻‍❤️‍💋‍👨🏼", "🫱🏻‍🫲🏿", "😶‍🌫️", "🐻‍❄️"]
SKIN = ["\U0001F3FB", "\U0001F3FC", "\U0001F3FD", "\U0001F3FE", "\U0001F3FF"]
FLAGS = ["🇫🇷", "🇩🇪", "🇯🇵", "🇺🇸", "🇧🇷", "🇮🇳", "🇪🇺", "🇺🇳", "🏴󠁧󠁢󠁳󠁣󠁴󠁿", "🏴󠁧󠁢󠁷󠁬󠁳󠁿"]
KEYCAPS = ["1️⃣", "#️⃣", "*️⃣", "🔟"]
CODE = [
    "def f(x):\n    return x ** 2  # square\n",
    "import numpy as np\n\nclass Foo(Bar):\n\tdef __init__(self, *args, **kw):\n\t\tsuper().__init__()\n",
    "for i in range(10):\n    if i % 2 == 0:\n        print(f\"{i:>4d} even\")\n    else:\n        continue\n",
    "lambda a, b=3: a if a > b else b",
    "#include <stdio.h>\nint main(void) {\n  printf(\"Hello, %s!\\n\", \"world\");\n  return 0;\n}\n",
    "static inline uint32_t rotl(uint32_t x, int k) { return (x << k) | (x >> (32 - k)); }",
    "std::vector<std::pair<int,float>> v{{1,2.f},{3,4.5f}}; auto it = v.begin(); it->first += 0x7FFF;",
    "template <typename T> concept Addable = requires(T a, T b) { a + b; };",
    "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": [1, 2, 3], \"ok\": true, \"x\": null}}",
    "{\"a\":1,\"b\":[1.5e-3,-2E+10],\"c\":{\"d\":\"\\u00e9\\n\\t\"}}",
    "[\n  {\n    \"id\": 1,\n    \"tags\": []\n  }\n]\n",
    "<!DOCTYPE html>\n<html lang=\"en\">\n<head><meta charset=\"utf-8\"><title>Test &amp; more</title></head>\n"
    "<body>\n  <div class=\"a b\" id='x'>Hi&nbsp;there &lt;b&gt;</div>\n</body>\n</html>\n",
    "<table><tr><td>1</td><td>2</td></tr></table>",
    "SELECT id, name FROM users WHERE age >= 18 AND name LIKE '%son' ORDER BY id DESC;",
    "$ ls -la | grep -E '^d' && echo \"done\" || exit 1",
    "const f = async (x) => { await g(x?.y ?? 0); return `${x}`; };",
    "fn main() { let v: Vec<u8> = vec![0; 16]; println!(\"{:?}\", &v[..]); }",
    "x = {'a': 1, 'b': [1, 2]}; y = x['a'] + x.get('c', 0)",
    "    \n        indented line\n\t\ttabbed line\n",
    "a==b!=c<=d>=e->f::g<<h>>i&&j||k",
    "\\documentclass{article}\n\\begin{equation} E = mc^2 \\quad \\int_0^\\infty e^{-x} dx \\end{equation}",
    "| col1 | col2 |\n|------|------|\n| a    | b    |\n",
    "```python\nprint('hi')\n```",
    "https://example.com/path/to/page?query=1&lang=en#section-2",
    "user@example.org, +1 (555) 123-4567, 2026-11-29T16:30:00Z",
]
CONTRACTIONS = ["it's", "IT'S", "It'S", "we'LL", "they'Re", "I'm", "I'M", "you'VE", "he'd", "HE'D", "don't",
                "DON'T", "'s", "''s", "’s", "rock'n'roll", "'LL'LL", "o'clock", "y'all'd've", "'re'", "' s",
                "'ss", "'", "''", "the cat's toy", "THE CAT'S TOY", "we'll've", "'tis", "ma'am", "'m'", "'ve'd"]
WS = [" ", "  ", "   ", "\t", "\t\t", "\n", "\n\n", "\n\n\n", "\r\n", "\r", "\r\r", "\r\n\r\n", " \n", "\n ",
      " \t \n", "\u00a0", "\u3000", "\u2028", "\u2029", "\u0085", "\u2003", "\u200b", "\u180e", "\u202f", "\u205f",
      "\u1680", "\x0b", "\x0c", "\u2009\u200a"]
CONTROLS = [chr(c) for c in list(range(0x00, 0x20)) + [0x7F] + list(range(0x80, 0xA0))]
ODD_CPS = ["\u180e", "\ufeff", "\ue000", "\uf8ff", "\U000F0000", "\U0010FFFD", "\U000FFFFD", "\ufffd", "\ufffe",
           "\uffff", "\ufdd0", "\U0010FFFF", "\u0378", "\u0380", "\U0001FFFF", "\U000E0001", "\U000E0041",
           "\u00ad", "\u200c", "\u200d", "\u2060", "\u061c", "\u200e", "\u200f", "\u202e", "\ufe0f", "\ufe0e",
           "\U000E0100", "\u034f", "\u115f", "\u3164"]
EN_WORDS = ("the of and to in is you that it he was for on are as with his they at be this have from or one had by "
            "word but not what all were we when your can said there use an each which she do how their if will up "
            "other about out many then them these so some her would make like him into time has look two more write "
            "go see number no way could people my than first water been call who oil its now find long down day did "
            "get come made may part invoice total page table figure document scan OCR receipt").split()


def _pick_new(rng, cls, n):
    return "".join(chr(rng.randint(*rng.choice(NEW_SINCE_14[cls]))) for _ in range(n))


def _word(rng, chars, lo=1, hi=10):
    return "".join(rng.choice(chars) for _ in range(rng.randint(lo, hi)))


def _sentence(rng, pool, n_lo=1, n_hi=8, seps=(" ",)):
    return rng.choice(seps).join(pool() for _ in range(rng.randint(n_lo, n_hi)))


def _emoji(rng):
    k = rng.randrange(6)
    if k == 0:
        return rng.choice(EMOJI_ZWJ)
    if k == 1:
        return rng.choice(["👍", "👋", "🙌", "👩", "🧑", "✋", "👶"]) + rng.choice(SKIN)
    if k == 2:
        return rng.choice(FLAGS)
    if k == 3:
        return rng.choice(KEYCAPS)
    return rng.choice(EMOJI_BASE)


def _number(rng):
    k = rng.randrange(10)
    n = rng.randint(0, 10 ** rng.randint(1, 12))
    if k == 0:
        return f"{n:,}"
    if k == 1:
        return f"{n:,}".replace(",", ".") + "," + str(rng.randint(0, 99)).zfill(2)
    if k == 2:
        return f"{n:_}"
    if k == 3:
        return f"{n:,}".replace(",", " ")
    if k == 4:
        return f"{n:,}".replace(",", "'")
    if k == 5:
        return f"{rng.uniform(-1e6, 1e6):.{rng.randint(0, 8)}f}"
    if k == 6:
        return f"{rng.uniform(-10, 10):.3e}"
    if k == 7:
        digits = rng.choice(["٠١٢٣٤٥٦٧٨٩", "۰۱۲۳۴۵۶۷۸۹", "०१२३४५६७८९", "０１２３４５６７８９", "๐๑๒๓๔๕๖๗๘๙",
                             "①②③④⑤⑥⑦⑧⑨", "²³¹¼½¾", "ⅠⅡⅢⅣⅤ"])
        return _word(rng, digits, 1, 12)
    if k == 8:
        return "0x" + f"{n:X}"
    return str(n) * rng.randint(1, 3)


def _code(rng):
    s = rng.choice(CODE)
    k = rng.randrange(4)
    if k == 1:
        s = s.replace("\n", "\r\n")
    elif k == 2:
        s = s.replace("    ", "\t")
    elif k == 3:
        s = "\n".join(line + " " * rng.randint(0, 3) for line in s.split("\n"))
    return s


def _script_text(rng, name):
    chars = SCRIPTS[name]
    if name == "arabic" and rng.random() < 0.5:
        return _sentence(rng, lambda: "".join(c + (rng.choice(SCRIPTS["arabic_harakat"]) if rng.random() < 0.5
                                                   else "") for c in _word(rng, chars, 2, 6)))
    if name == "hebrew" and rng.random() < 0.5:
        return _sentence(rng, lambda: "".join(c + rng.choice(SCRIPTS["hebrew_niqqud"]) for c in _word(rng, chars, 2, 5)))
    if name == "devanagari":
        return _sentence(rng, lambda: "".join(c + (rng.choice(SCRIPTS["devanagari_signs"]) if rng.random() < 0.6
                                                   else "") for c in _word(rng, chars, 1, 5)))
    if name == "thai":
        return "".join(c + (rng.choice(SCRIPTS["thai_marks"]) if rng.random() < 0.4 else "")
                       for c in _word(rng, chars, 3, 40))
    if name in ("cjk", "kana") and rng.random() < 0.5:
        return _word(rng, chars, 1, 30) + rng.choice(["。", "、", "，", "！", "？", "「", "」", "", " "])
    if name in WORDS and rng.random() < 0.5:
        return _sentence(rng, lambda: rng.choice(WORDS[name]), 1, 8, (" ", ", ", "\n", "  "))
    return _sentence(rng, lambda: _word(rng, chars, 1, 9), 1, 8, (" ", ". ", ", ", "\n", "-", "  "))


def _nfd_text(rng):
    base = rng.choice([
        lambda: _script_text(rng, "latin_accents"), lambda: _word(rng, SCRIPTS["vietnamese"], 2, 12),
        lambda: _script_text(rng, "hangul"), lambda: _script_text(rng, "greek"), lambda: rng.choice(WORDS["kana"]),
        lambda: _script_text(rng, "cyrillic")])()
    form = rng.choice(["NFD", "NFD", "NFKD", "mix"])
    if form == "mix":
        return unicodedata.normalize("NFC", base) + " " + unicodedata.normalize("NFD", base)
    return unicodedata.normalize(form, base)


def _combining(rng):
    marks = _rng(0x0300, 0x036F)
    k = rng.randrange(4)
    if k == 0:  # stacked marks on one base
        return rng.choice("aeiouxqZ ") + "".join(rng.choice(marks) for _ in range(rng.randint(1, 12)))
    if k == 1:  # leading marks
        return "".join(rng.choice(marks) for _ in range(rng.randint(1, 3))) + _word(rng, "abcdef", 1, 6)
    if k == 2:  # mark after space / punctuation / digit / CJK / emoji
        return rng.choice([" ", ".", "1", "中", "😀", "\n", "-"]) + rng.choice(marks) + "x"
    return "".join(c + (rng.choice(marks) if rng.random() < 0.5 else "") for c in _word(rng, "abcdefghijklmnop", 3, 15))


def _whitespace(rng):
    parts = []
    for _ in range(rng.randint(1, 6)):
        parts.append(rng.choice(WS) * rng.randint(1, 4))
        if rng.random() < 0.7:
            parts.append(rng.choice(["word", "x", "Hello", "中文", "123", ".", "😀", "a b", "é", "'s"]))
    return "".join(parts)


def _special_in_text(rng):
    parts = []
    for _ in range(rng.randint(1, 6)):
        k = rng.randrange(4)
        if k == 0:
            parts.append(rng.choice(SPECIALS))
        elif k == 1:
            parts.append(rng.choice(NEAR_SPECIALS))
        elif k == 2:
            parts.append(rng.choice(["user", "assistant", "Hello", " ", "\n", "中文", "x", "", "😀", "'s", "123"]))
        else:
            parts.append(rng.choice(WS))
    return "".join(parts)


def _odd(rng):
    k = rng.randrange(5)
    if k == 0:
        return _word(rng, CONTROLS, 1, 5) + rng.choice(["", "a", " b", "\n"])
    if k == 1:
        return rng.choice(["x", " ", "", "é"]) + rng.choice(ODD_CPS) + rng.choice(["y", " ", "", "中"])
    if k == 2:
        return rng.choice(["a", " ", "", "1"]) + _pick_new(rng, rng.choice("LNM"), rng.randint(1, 6)) + rng.choice(["", " x", "1"])
    if k == 3:
        return _pick_new(rng, "emoji", 1) + rng.choice(SKIN + ["", "\u200d", " "])
    return "".join(rng.choice(ODD_CPS + CONTROLS[:5]) for _ in range(rng.randint(1, 6)))


def _long_strings(rng):
    out = [
        "a" * 2500, "x" * 4096, "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(3000)),
        "ab" * 1500, "Ab" * 1100, "".join(rng.choice(SCRIPTS["cjk"]) for _ in range(2500)),
        "1234567890" * 250, " " * 3000, "\n" * 2000, "\t" * 2100, "👨‍👩‍👧‍👦" * 300, "e\u0301" * 1500,
        "".join(rng.choice(SCRIPTS["thai"]) for _ in range(2500)), "".join(rng.choice(SCRIPTS["arabic"]) for _ in range(2500)),
        "-" * 3000, "=" * 2000, "".join(rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
                                        for _ in range(4000)),
        "".join(rng.choice(SCRIPTS["hangul"]) for _ in range(2200)), "Ω" * 2000, "\u00e9" * 2300,
        "".join(rng.choice(SCRIPTS["latin_accents"]) for _ in range(2600)), "<|im_end|>" * 400,
        " " * 2001 + "x", "x" + "\r\n" * 1200, ".\u200b" * 1100,
    ]
    out.append(" ".join(rng.choice(EN_WORDS) for _ in range(6000)))  # ~30k chars of English-like text
    out.append(" ".join(rng.choice([_script_text(rng, s) for s in ("cjk", "arabic", "hangul", "thai", "cyrillic")]
                                   + [_emoji(rng), _number(rng), rng.choice(SPECIALS)]) for _ in range(1500)))
    out.append("\n".join(_code(rng) for _ in range(200)))
    return out


def _fixed():
    out = ["", " ", "a", "\n", "Hello world", "Hello, world!", " Hello", "hello  world", "HELLO WORLD",
           "The quick brown fox jumps over 13 lazy dogs.", "Invoice No. 4711 - Total: 1,234.56 EUR"]
    out += SPECIALS + NEAR_SPECIALS + ["".join(SPECIALS), " ".join(SPECIALS), "\n".join(SPECIALS)]
    out += [f"x{s}y" for s in SPECIALS] + [f" {s} " for s in SPECIALS]
    out += ["<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n", "<think>a</think>", "<|image_pad|>" * 8,
            "<|vision_start|>" + "<|image_pad|>" * 4 + "<|vision_end|>", " <|im_end|> ", "<|im_end|>\n\n",
            "a<|endoftext|>b", "<|endoftext|><|endoftext|>", "<think>\n\n</think>\n\n", "</think>x<think>"]
    out += CONTRACTIONS + [f"{a} {b}" for a, b in zip(CONTRACTIONS, CONTRACTIONS[1:])]
    out += WS + [w * 5 for w in WS] + ["trailing   ", "trailing\t", "trailing \n", "x \r\ny", "x\ry", "x\r", "\rx"]
    out += CONTROLS + ODD_CPS + EMOJI_BASE + EMOJI_ZWJ + FLAGS + KEYCAPS
    out += [e + s for e in ("👍", "👋🏽"[0]) for s in SKIN] + ["".join(FLAGS), "".join(EMOJI_ZWJ)]
    for cls in ("L", "N", "M", "emoji"):
        for a, b in NEW_SINCE_14[cls]:
            out.append("".join(chr(c) for c in range(a, min(b, a + 7) + 1)))
            out.append("x " + chr(a) + " y")
    return out


GENERATORS = [  # (category, count, fn(rng) -> str)
    ("script", 40 * len(SCRIPTS), lambda rng: _script_text(rng, rng.choice(
        [k for k in SCRIPTS if k not in ("arabic_harakat", "hebrew_niqqud", "devanagari_signs", "thai_marks")]))),
    ("emoji", 120, lambda rng: _sentence(rng, lambda: _emoji(rng) if rng.random() < 0.7 else rng.choice(EN_WORDS),
                                         1, 8, (" ", "", "\n"))),
    ("nfd", 100, _nfd_text),
    ("combining", 80, _combining),
    ("number", 160, lambda rng: _sentence(rng, lambda: _number(rng) if rng.random() < 0.8 else rng.choice(EN_WORDS),
                                          1, 6, (" ", ", ", "", "\n", "-", "/"))),
    ("code", 100, _code),
    ("whitespace", 200, _whitespace),
    ("special", 160, _special_in_text),
    ("contraction", 60, lambda rng: _sentence(rng, lambda: rng.choice(CONTRACTIONS + EN_WORDS), 1, 8)),
    ("odd", 140, _odd),
]


def make_strings(extra_jsonl):
    rng = random.Random(SEED)
    rows = [("fixed", s) for s in _fixed()]
    pools = []
    for cat, count, fn in GENERATORS:
        for _ in range(count):
            s = fn(rng)
            rows.append((cat, s))
            pools.append(s)
    for _ in range(500):  # mixtures of fragments from every category
        rows.append(("mixture", "".join(rng.choice(pools) + rng.choice(["", " ", "\n", " - ", "\t"])
                                        for _ in range(rng.randint(2, 5)))))
    rows += [("long", s) for s in _long_strings(rng)]
    if os.path.isfile(extra_jsonl):
        with open(extra_jsonl, encoding="utf-8") as f:
            rows += [("research_golden", json.loads(line)["text"]) for line in f if line.strip()]
    else:  # no such file: its strings are already in the committed strings.jsonl
        with gzip.open(os.path.join(TEXT_DIR, "strings.jsonl.gz"), "rt", encoding="utf-8", newline="\n") as f:
            rows += [("research_golden", r["text"]) for r in map(json.loads, f) if r["category"] == "research_golden"]
    seen, out = set(), []
    for cat, s in rows:
        assert not any(0xD800 <= ord(c) <= 0xDFFF for c in s)
        if s not in seen:
            seen.add(s)
            out.append({"i": len(out), "category": cat, "text": s})
    return out
