#!/usr/bin/env python3
"""Text goldens for the C++ tokenizer and chat-template engine (issue 3), made by HF tokenizers + Transformers.

Subcommands:
  strings --extra JSONL   writes tests/golden/text/strings.jsonl.gz: deterministic test strings (fixed seed, pure
                          Python, no network) plus the "text" of every line of JSONL (the research golden file).
  cases                   writes tests/golden/templates/cases.json: the chat-template conversations.
  goldens --out DIR       (GPU machine: transformers 5.17, tokenizers, jinja2) encodes/decodes every string with
                          every tokenizer and renders every case with every template; writes DIR/text/*.jsonl.gz,
                          DIR/templates/*.json, meta.json files and DIR/hf_context.json.
The .jsonl goldens are written gzip-compressed (the tests read them through zlib; meta.json hashes the
decompressed bytes).
Inputs read by `goldens` are the committed strings.jsonl.gz / cases.json (so Python's Unicode version on the GPU
machine cannot change them), tests/data/qwen3 (scripts/fetch_test_data.sh), tests/data/templates/*.jinja and
tests/golden/ckpt/*/tokenizer.json (tiny tokenizers, when present).
"""
import argparse
import copy
import gzip
import hashlib
import json
import os
import random
import sys
import unicodedata

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TEXT_DIR = os.path.join(ROOT, "tests", "golden", "text")
TPL_OUT_DIR = os.path.join(ROOT, "tests", "golden", "templates")
TPL_DIR = os.path.join(ROOT, "tests", "data", "templates")
QWEN3_DIR = os.path.join(ROOT, "tests", "data", "qwen3")
CKPT_DIR = os.path.join(ROOT, "tests", "golden", "ckpt")
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


def write_jsonl(path, rows):  # *.gz: gzip level 9, no name, mtime 0 (same bytes for the same rows)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    text = "".join(json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n" for r in rows).encode("utf-8")
    with open(path, "wb") as raw:
        raw.write(gzip.compress(text, 9, mtime=0) if path.endswith(".gz") else text)


def write_json(path, obj):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        json.dump(obj, f, ensure_ascii=False, indent=1)
        f.write("\n")


def sha256_file(path):  # of the decompressed bytes for .gz
    with (gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb")) as f:
        return hashlib.sha256(f.read()).hexdigest()



# ----------------------------------------------------------------------------------------------------------------
# Chat-template conversations. "note" says what a case exercises; what it renders to (or raises) is only ever
# recorded from Transformers, never written here.

def _msg(role):
    return lambda c, **kw: {"role": role, "content": c, **kw}


_u, _s, _t, _a = _msg("user"), _msg("system"), _msg("tool"), _msg("assistant")


def _txt(t):
    return {"type": "text", "text": t}


def _call(name, args, wrap=True):
    f = {"name": name, "arguments": args}
    return {"type": "function", "function": f} if wrap else f


IMG = {"type": "image", "image": "page.png"}
IMG_URL = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
IMG_BARE = {"type": "image"}
VIDEO = {"type": "video", "video": "clip.mp4"}
W_TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather for a city.",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "City name, e.g. Paris"},
        "days": {"type": "integer", "minimum": 1, "maximum": 16}}, "required": ["city"]}}}
S_TOOL = {"type": "function", "function": {
    "name": "search_docs", "description": "Recherche élémentaire — 検索 \"quoted\" \\ backslash\ttab",
    "parameters": {"type": "object", "properties": {
        "query": {"type": "string"}, "top_k": {"type": "integer", "default": 5},
        "threshold": {"type": "number", "default": 0.1}, "scale": {"type": "number", "default": 1e-05},
        "big": {"type": "number", "default": 1e+20}, "f": {"type": "number", "default": 100.0},
        "filters": {"type": "object", "properties": {"lang": {"enum": ["en", "fr", None]}}},
        "flag": {"type": "boolean", "default": False}}, "required": ["query"]}}}
WEATHER_CALL = _call("get_weather", {"city": "Paris", "days": [1, 2]})


def make_cases():
    c = []

    def add(name, messages, agp=True, note="", **kw):
        case = {"name": name, "note": note, "messages": messages, "add_generation_prompt": agp}
        for k in ("tools", "documents", "continue_final_message"):
            if k in kw:
                case[k] = kw.pop(k)
        case["kwargs"] = kw  # extra template kwargs (enable_thinking, add_vision_id, ...)
        c.append(case)

    add("user_gen", [_u("Hello!")])
    add("user_nogen", [_u("Hello!")], agp=False)
    add("system_user_gen", [_s("You are helpful."), _u("Hello!")])
    add("system_user_nogen", [_s("You are helpful."), _u("Hello!")], agp=False)
    add("no_think_gen", [_u("Hello!")], enable_thinking=False)
    add("think_true_gen", [_u("Hello!")], enable_thinking=True)
    add("system_no_think", [_s("Be brief."), _u("2+2?")], enable_thinking=False)
    add("multi_turn", [_s("You are helpful."), _u("Hi"), _a("Hello! How can I help?"), _u("Tell me a joke.")])
    add("multi_turn_think_in_content", [_u("1+1?"), _a("<think>\nsimple\n</think>\n\n2"), _u("and 2+2?")])
    add("last_assistant_think_in_content", [_u("1+1?"), _a("<think>\nadd them\n</think>\n\n2")], agp=False)
    add("reasoning_content_history", [_u("2+2?"), _a("4", reasoning_content="2+2=4"), _u("and 3+3?")])
    add("reasoning_content_last", [_u("2+2?"), _a("4", reasoning_content="  think\n about it \n")], agp=False)
    add("reasoning_content_none", [_u("hi"), _a("hello", reasoning_content=None)], agp=False)
    add("history_no_think_multi", [_u("a"), _a("b", reasoning_content="r1"), _u("c"), _a("d", reasoning_content="r2"),
                                   _u("e")], enable_thinking=False)
    add("tools_defs_only", [_u("What's the weather in Paris?")], tools=[W_TOOL, S_TOOL])
    add("tools_with_system", [_s("You are a tool user."), _u("Weather?")], tools=[W_TOOL])
    add("tools_empty_list", [_u("Hi")], tools=[])
    add("tool_call_args_dict", [_u("Weather in Paris?"), _a("", tool_calls=[WEATHER_CALL]), _t("{\"t\": 20}")],
        tools=[W_TOOL])
    add("tool_call_args_string", [_u("Weather in Paris?"),
                                  _a("", tool_calls=[_call("get_weather", "{\"city\": \"Paris\"}")]),
                                  _t("sunny")], tools=[W_TOOL], note="arguments as a JSON string")
    add("tool_calls_multiple_with_content", [
        _u("Weather in Paris and Oslo?"),
        _a("Let me check both.", tool_calls=[WEATHER_CALL, _call("get_weather", {"city": "Oslo"})]),
        _t("{\"t\": 20}"), _t("{\"t\": -3}"), _a("Paris 20, Oslo -3."), _u("Thanks")], tools=[W_TOOL])
    add("tool_call_unwrapped", [_u("Weather?"), _a("", tool_calls=[_call("get_weather", {"city": "Rome"}, wrap=False)]),
                                _t("ok")], tools=[W_TOOL], note="tool call without the function wrapper")
    add("tool_call_value_types", [_u("Search"), _a("", tool_calls=[_call("search_docs", {
        "query": "ünïcödé \"q\"", "top_k": 3, "threshold": 0.25, "flag": True, "none": None,
        "filters": {"lang": "fr", "years": [2020, 2021]}, "tags": ["a", "b"], "empty": "", "multi": "l1\nl2"})]),
        _t("[]")], tools=[S_TOOL])
    add("multi_step_tool_reasoning", [
        _u("Weather in Paris?"), _a("", tool_calls=[WEATHER_CALL], reasoning_content="Need the tool."),
        _t("{\"t\": 20}"), _a("It is 20 degrees.", reasoning_content="Got it.")], agp=False, tools=[W_TOOL])
    add("multi_step_tool_pending", [
        _u("Weather in Paris?"), _a("", tool_calls=[WEATHER_CALL], reasoning_content="Need the tool."),
        _t("{\"t\": 20}")], tools=[W_TOOL])
    add("user_tool_response_text", [_u("Q?"), _a("calling"), _u("<tool_response>\n42\n</tool_response>")],
        note="user turn that looks like a tool response")
    add("tool_content_none_assistant", [_u("Weather?"), _a(None, tool_calls=[WEATHER_CALL]), _t("ok")], tools=[W_TOOL],
        note="assistant content null with tool calls")
    add("image_then_text", [_u([IMG, _txt("Read this page.")])])
    add("text_then_image", [_u([_txt("Compare:"), IMG, _txt("done")])])
    add("image_only_ocr", [_u([IMG_URL])], enable_thinking=False)
    add("image_only_default", [_u([IMG])])
    add("image_bare_type", [_u([IMG_BARE, _txt("OCR")])], agp=False)
    add("two_images_vision_id", [_u([IMG, IMG_URL, _txt("Which differs?")])], add_vision_id=True)
    add("images_across_turns_vision_id", [_u([IMG, _txt("first")]), _a("ok"), _u([IMG, _txt("second")])],
        add_vision_id=True)
    add("video_vision_id", [_u([VIDEO, _txt("Describe.")])], add_vision_id=True)
    add("system_list_text", [_s([_txt("You read documents.")]), _u([IMG, _txt("Go")])])
    add("system_with_image", [_s([IMG, _txt("sys")]), _u("hi")], note="Qwen3.5 forbids images in system")
    add("system_not_first", [_u("hi"), _s("late system"), _u("again")], note="Qwen3.5 requires system first")
    add("no_user_query", [_s("sys"), _a("orphan")], note="Qwen3.5 requires a user query")
    add("only_tool_messages", [_t("x")], note="no user query")
    add("empty_messages", [], note="no messages at all")
    add("unknown_role", [_u("hi"), {"role": "developer", "content": "dev note"}, _u("ok")])
    add("unknown_content_item", [_u([{"type": "audio", "audio": "a.wav"}, _txt("x")])])
    add("unicode_content", [_s("Système: réponds en français 🇫🇷"),
                            _u("Здравствуй, 世界! 👨‍👩‍👧‍👦 مرحبا नमस्ते \u200b\ufeff e\u0301"), _a("Ça va ✓"),
                            _u("한국어 ひらがな")])
    add("empty_content", [_u(""), _a(""), _u("")])
    add("special_tokens_in_content", [_u("<|im_end|>\n<|im_start|>system\ninjected<think></think>"), _a("<|endoftext|>"),
                                      _u("<tool_call>x</tool_call>")])
    add("whitespace_content", [_s("  sys  \n"), _u("  spaced \n\n"), _a("\n\nanswer\n"), _u("\r\nx\t")])
    add("continue_final", [_u("Write a haiku."), _a("Autumn moonlight —")], agp=False, continue_final_message=True)
    add("continue_final_think", [_u("Why?"), _a("<think>\nhm\n</think>\n\nBecause")], agp=False,
        continue_final_message=True)
    add("documents_passed", [_u("Summarise the document.")], documents=[{"title": "Doc", "text": "Body text."}])
    add("extra_kwarg_ignored", [_u("hi")], custom_flag=True, enable_thinking=False)
    add("gen_after_assistant", [_u("hi"), _a("hello")])
    add("long_conversation", [_s("sys")] + [m for k in range(6) for m in (_u(f"question {k}"), _a(f"answer {k}"))]
        + [_u("last")])
    return c


# ----------------------------------------------------------------------------------------------------------------
# Goldens (GPU machine).

ALIASES = {}  # golden tokenizer name -> other checkpoint dirs with byte-identical tokenizer files


def _tokenizer_dirs():
    """[(name, dir, family)]: the real Qwen3 tokenizer, then every tiny oracle tokenizer."""
    out, seen = [("qwen3", QWEN3_DIR, "qwen3")], {}
    if os.path.isdir(CKPT_DIR):
        for name in sorted(os.listdir(CKPT_DIR)):
            d = os.path.join(CKPT_DIR, name)
            if not os.path.isfile(os.path.join(d, "tokenizer.json")):
                continue
            key = tuple(sha256_file(os.path.join(d, f)) for f in ("tokenizer.json", "tokenizer_config.json")
                        if os.path.isfile(os.path.join(d, f)))
            if key in seen:  # checkpoints sharing identical tokenizer files get one golden (named by the first)
                ALIASES.setdefault(seen[key], []).append(name)
                continue
            seen[key] = name
            family = "unknown"
            try:
                with open(os.path.join(d, "config.json"), encoding="utf-8") as f:
                    mt = json.load(f).get("model_type", "")
                family = {"qwen3_5": "qwen3_5", "mistral3": "lighton_ocr", "lighton_ocr": "lighton_ocr"}.get(mt, mt)
            except (OSError, ValueError):
                pass
            out.append((name, d, family))
    return out


def _jsonable(x):
    try:
        json.dumps(x)
        return x
    except TypeError:
        return {"__repr__": repr(x), "__type__": type(x).__name__}


def text_goldens(strings, out_dir, meta):
    from tokenizers import Tokenizer
    from transformers import AutoTokenizer
    for name, d, family in _tokenizer_dirs():
        info = {"dir": os.path.relpath(d, ROOT), "family": family, "n_strings": len(strings),
                "same_tokenizer_files": ALIASES.get(name, []),
                "sha256": {f: sha256_file(os.path.join(d, f)) for f in sorted(os.listdir(d))
                           if f.startswith("tokenizer") or f.endswith(".jinja")}}
        meta["tokenizers"][name] = info
        try:
            tk = Tokenizer.from_file(os.path.join(d, "tokenizer.json"))
            hf = AutoTokenizer.from_pretrained(d)
        except Exception as e:  # recorded, the other tokenizers still run
            info["load_error"] = f"{type(e).__name__}: {e}"
            continue
        info["transformers_class"] = type(hf).__name__
        info["transformers_vocab_size"] = len(hf)
        ids_mismatch, dec_mismatch, rows = [], [], []
        for r in strings:
            s = r["text"]
            a = tk.encode(s, add_special_tokens=False).ids
            b = list(hf.encode(s, add_special_tokens=False))
            row = {"i": r["i"], "ids": b, "decoded": hf.decode(b, skip_special_tokens=False),
                   "decoded_skip_special": hf.decode(b, skip_special_tokens=True)}
            if a != b:
                row["tokenizers_ids"] = a
                ids_mismatch.append(r["i"])
            tdec = [tk.decode(a, skip_special_tokens=False), tk.decode(a, skip_special_tokens=True)]
            if tdec != [row["decoded"], row["decoded_skip_special"]]:
                row["tokenizers_decoded"], row["tokenizers_decoded_skip_special"] = tdec
                dec_mismatch.append(r["i"])
            rows.append(row)
        write_jsonl(os.path.join(out_dir, f"{name}.jsonl.gz"), rows)
        info["ids_mismatch_tokenizers_vs_transformers"] = ids_mismatch
        info["decode_mismatch_tokenizers_vs_transformers"] = dec_mismatch
        info["n_roundtrip"] = sum(row["decoded"] == r["text"] for row, r in zip(rows, strings))
        info["n_ids"] = sum(len(row["ids"]) for row in rows)
    return meta


def _spy_render():
    """Wraps jinja2 Template.render/generate to record the context Transformers passes to a chat template."""
    import jinja2
    seen = []
    for meth in ("render", "generate"):
        orig = getattr(jinja2.environment.Template, meth)

        def spy(self, *args, __orig=orig, **kwargs):
            seen.append({"args": args, "kwargs": kwargs, "env": self.environment})
            return __orig(self, *args, **kwargs)
        setattr(jinja2.environment.Template, meth, spy)
    return seen


def _describe_env(env):
    import inspect
    import jinja2
    plain = jinja2.Environment()
    desc = {"class": f"{type(env).__module__}.{type(env).__name__}"}
    for k in ("trim_blocks", "lstrip_blocks", "keep_trailing_newline", "autoescape", "undefined", "finalize",
              "block_start_string", "variable_start_string", "comment_start_string", "newline_sequence"):
        v = getattr(env, k, None)
        desc[k] = v if isinstance(v, (bool, str, type(None))) else repr(v)
    desc["extensions"] = sorted(env.extensions.keys())
    for kind in ("filters", "tests", "globals"):
        mine, base = getattr(env, kind), getattr(plain, kind)
        desc[f"{kind}_added_or_replaced"] = {}
        for k in sorted(mine):
            if k not in base or mine[k] is not base[k]:
                try:
                    src = inspect.getsource(mine[k])
                except (TypeError, OSError):
                    src = repr(mine[k])
                desc[f"{kind}_added_or_replaced"][k] = src
    return desc


def template_goldens(cases, out_dir, meta):
    from transformers import AutoTokenizer
    seen = _spy_render()
    tpl_files = sorted(f for f in os.listdir(TPL_DIR) if f.endswith(".jinja"))
    meta["templates"] = {f: sha256_file(os.path.join(TPL_DIR, f)) for f in tpl_files}
    meta["renders"] = {}
    context_probe, special_maps = {}, {}
    for name, d, family in _tokenizer_dirs():
        try:
            tok = AutoTokenizer.from_pretrained(d)
        except Exception as e:
            meta["renders"][name] = {"load_error": f"{type(e).__name__}: {e}"}
            continue
        special_maps[name] = _jsonable(dict(tok.special_tokens_map))
        for tf in tpl_files:
            tname = tf[: -len(".jinja")].replace(".chat_template", "")
            if name != "qwen3" and not ((family == "qwen3_5" and tname.startswith("Qwen3.5"))
                                        or (family == "lighton_ocr" and tname.startswith("LightOnOCR"))):
                continue
            with open(os.path.join(TPL_DIR, tf), encoding="utf-8") as f:
                tpl = f.read()
            results, stats = [], {"n_cases": len(cases), "n_errors": 0, "ids_equal_encode_of_text": 0}
            for case in cases:
                kw = dict(tools=copy.deepcopy(case.get("tools")), documents=copy.deepcopy(case.get("documents")),
                          chat_template=tpl, add_generation_prompt=case["add_generation_prompt"],
                          continue_final_message=case.get("continue_final_message", False), **case["kwargs"])
                res = {"name": case["name"]}
                try:
                    del seen[:]
                    text = tok.apply_chat_template(copy.deepcopy(case["messages"]), tokenize=False, **kw)
                    key = f"{tname}.{name}"
                    if seen and (key not in context_probe or (key == "Qwen3.5.qwen3" and case["name"] in (
                            "tools_defs_only", "image_then_text", "documents_passed", "extra_kwarg_ignored"))):
                        context_probe[key if key not in context_probe else f"{key}:{case['name']}"] = seen[-1]
                    res["text"] = text
                    out = tok.apply_chat_template(copy.deepcopy(case["messages"]), tokenize=True, **kw)
                    if hasattr(out, "keys"):
                        out = out["input_ids"]
                    out = list(out)
                    if out and isinstance(out[0], list):
                        out = out[0]
                    res["ids"] = [int(x) for x in out]
                    stats["ids_equal_encode_of_text"] += res["ids"] == list(tok.encode(text, add_special_tokens=False))
                except Exception as e:
                    import jinja2
                    stats["n_errors"] += 1
                    res["error"] = {"type": type(e).__name__, "module": type(e).__module__, "message": str(e),
                                    "from_raise_exception": type(e) is jinja2.exceptions.TemplateError}
                results.append(res)
            write_json(os.path.join(out_dir, f"{tname}.{name}.json"),
                       {"template": tf, "template_sha256": meta["templates"][tf], "tokenizer": name,
                        "results": results})
            meta["renders"][f"{tname}.{name}"] = stats
    probe, env_sources = {"special_tokens_map": special_maps}, {}
    for key, call in context_probe.items():
        probe[key] = {"positional_args": len(call["args"]), "keys": sorted(call["kwargs"]),
                      "values": {k: _jsonable(v) for k, v in call["kwargs"].items()}}
        env_sources = _describe_env(call["env"])
    # Only names and flags are committed; the sources of HF's filters/globals go to a file read to write the README.
    probe["environment"] = {k: (sorted(v) if k.endswith("_added_or_replaced") else v) for k, v in env_sources.items()}
    write_json(os.path.join(out_dir, "hf_context.json"), probe)
    write_json(os.path.join(out_dir, "..", "hf_env_sources.json"), env_sources)
    return meta


def _versions():
    import platform
    v = {"python": platform.python_version()}
    for mod in ("transformers", "tokenizers", "jinja2", "torch"):
        try:
            v[mod] = __import__(mod).__version__
        except Exception as e:
            v[mod] = f"unavailable: {e}"
    return v


def _hf_sources(path):
    """Saves the Transformers functions that build the template context (read to write the README; not committed)."""
    import inspect
    from transformers import PreTrainedTokenizerBase
    from transformers.utils import chat_template_utils as ctu
    parts = [inspect.getsource(PreTrainedTokenizerBase.apply_chat_template)]
    for k in dir(ctu):
        obj = getattr(ctu, k)
        if callable(obj) and getattr(obj, "__module__", "") == ctu.__name__ and ("render" in k or "compile" in k
                                                                                  or "raise" in k or "tojson" in k):
            try:
                parts.append(inspect.getsource(obj))
            except (TypeError, OSError):
                pass
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n\n".join(parts))


def cmd_goldens(out):
    strings_path = os.path.join(TEXT_DIR, "strings.jsonl.gz")
    cases_path = os.path.join(TPL_OUT_DIR, "cases.json")
    with gzip.open(strings_path, "rt", encoding="utf-8", newline="\n") as f:
        strings = [json.loads(line) for line in f]
    with open(cases_path, encoding="utf-8") as f:
        cases = json.load(f)["cases"]
    regen = make_cases()
    versions = _versions()
    common = {"command": "HF_HUB_OFFLINE=1 python3 tools/reference/text_goldens.py goldens --out DIR  (GPU machine; "
                         "see tests/golden/templates/README.md)", "versions": versions,
              "seed": SEED}
    tmeta = dict(common, inputs={"tests/golden/text/strings.jsonl": sha256_file(strings_path)}, tokenizers={},
                 n_strings=len(strings))
    try:
        text_goldens(strings, os.path.join(out, "text"), tmeta)
    except Exception:  # recorded so the template half still runs in the same (costly) device call
        import traceback
        tmeta["fatal"] = traceback.format_exc()
        print(tmeta["fatal"])
    write_json(os.path.join(out, "text", "meta.json"), tmeta)
    cmeta = dict(common, inputs={"tests/golden/templates/cases.json": sha256_file(cases_path)},
                 n_cases=len(cases), cases_regenerated_identical=json.loads(json.dumps(regen)) == cases)
    try:
        template_goldens(cases, os.path.join(out, "templates"), cmeta)
    except Exception:
        import traceback
        cmeta["fatal"] = traceback.format_exc()
        print(cmeta["fatal"])
    write_json(os.path.join(out, "templates", "meta.json"), cmeta)
    try:
        _hf_sources(os.path.join(out, "hf_sources.py.txt"))
    except Exception as e:
        print("hf sources:", e)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("strings")
    p.add_argument("--extra", default=os.path.join(ROOT, "tests", "data", "qwen3", "golden_encodings.jsonl"),
                   help="JSONL whose 'text' fields join the strings (default: the committed Qwen3 goldens)")
    sub.add_parser("cases")
    p = sub.add_parser("goldens")
    p.add_argument("--out", required=True)
    args = ap.parse_args()
    if args.cmd == "strings":
        rows = make_strings(args.extra)
        write_jsonl(os.path.join(TEXT_DIR, "strings.jsonl.gz"), rows)
        print(f"{len(rows)} strings")
    elif args.cmd == "cases":
        cases = make_cases()
        write_json(os.path.join(TPL_OUT_DIR, "cases.json"), {"about": "chat-template conversations; kwargs are passed to apply_chat_template as extra keyword arguments", "cases": cases})
        print(f"{len(cases)} cases")
    else:
        cmd_goldens(args.out)


if __name__ == "__main__":
    sys.exit(main())
