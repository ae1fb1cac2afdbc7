"""Deterministic tiny byte-level BPE tokenizers with the Qwen special-token layout.

The corpus is built in code (no files, no network) so `ref.py all` rebuilds the same
tokenizer.json byte for byte. Trained with HF `tokenizers` (the Rust library Transformers uses).
"""
import json
import random

# Qwen2/Qwen3 split regex (LightOnOCR's Qwen2Tokenizer) and the Qwen3.5 one (adds \p{M}).
QWEN3_REGEX = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
QWEN3_5_REGEX = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"

# The 26 added tokens of Qwen2/Qwen3/Qwen3.5 in their real order: (content, special).
ADDED_TOKENS = [
    ("<|endoftext|>", True), ("<|im_start|>", True), ("<|im_end|>", True),
    ("<|object_ref_start|>", True), ("<|object_ref_end|>", True), ("<|box_start|>", True), ("<|box_end|>", True),
    ("<|quad_start|>", True), ("<|quad_end|>", True), ("<|vision_start|>", True), ("<|vision_end|>", True),
    ("<|vision_pad|>", True), ("<|image_pad|>", True), ("<|video_pad|>", True),
    ("<tool_call>", False), ("</tool_call>", False), ("<|fim_prefix|>", False), ("<|fim_middle|>", False),
    ("<|fim_suffix|>", False), ("<|fim_pad|>", False), ("<|repo_name|>", False), ("<|file_sep|>", False),
    ("<tool_response>", False), ("</tool_response>", False), ("<think>", False), ("</think>", False),
]

BPE_VOCAB = 2000   # upper bound for alphabet + merges (the fixed corpus yields ~1400); the 26 added tokens follow
MODEL_VOCAB = 2048  # embedding rows (padded past the tokenizer, as the real checkpoints are)

_ENGLISH = """The quick brown fox jumps over the lazy dog.
Optical character recognition turns a scanned page into text that a computer can search and edit.
Each page is rendered at two hundred dots per inch, then the longest edge is resized to 1540 pixels.
The invoice total is $1,234.56, due on 2026-11-29; late payments incur a 1.5% monthly fee.
Table 3: Results on the benchmark (higher is better). Model A scored 83.2 and model B scored 76.1.
She said: "It's not what you think, isn't it?" He'd already left, and they'll never know.
Chapter 1. Introduction
In this paper we present a simple method for reading documents with a small vision-language model.
## Methods
- Render the PDF page.
- Encode the image with the vision tower.
- Decode the text, token by token, until the end of the page.
1. First item; 2. second item; 3. third item.
Email: info@example.com | Phone: +1 (555) 010-9999 | https://example.org/docs?page=2&lang=en
def add(a, b):
    return a + b  # returns the sum
for (int i = 0; i < n; ++i) { total += x[i] * w[i]; }
$$ E = mc^2, \\quad \\int_0^1 x^2 \\, dx = \\frac{1}{3} $$
| Name | Qty | Price |
|------|-----|-------|
| Apple | 3 | 0.50 |
| Pear | 12 | 1.25 |
![figure](120,340,560,780) Figure 2 shows the layout of the scanned page.
Grounding boxes use coordinates from 0 to 1000, written as (x1,y1,x2,y2).
"""

_MULTI = """Bonjour le monde ! Ça va très bien, merci. L'été dernier, nous étions à Paris.
Größe, Straße, Übung, schön; Die Katze schläft auf dem Sofa.
¿Dónde está la biblioteca? El niño comió piñata y jalapeño.
Привет, мир! Это простой текст для проверки токенизатора.
Καλημέρα κόσμε, αυτό είναι ένα κείμενο.
你好，世界！这是一个用于测试的简单文本。光学字符识别。
こんにちは世界。これはテスト用の文章です。カタカナとひらがな。
안녕하세요 세계. 이것은 테스트 문장입니다.
مرحبا بالعالم، هذا نص بسيط للاختبار.
नमस्ते दुनिया, यह एक सरल परीक्षण पाठ है।
สวัสดีชาวโลก นี่คือข้อความทดสอบ
Combining: e\u0301 a\u0300 o\u0308 n\u0303 — café naïve coöperate
Emoji: 👍 😀 🎉 👨‍👩‍👧 ✓ ✗ → ← ≤ ≥ ± × ÷ € £ ¥ © ® ™ … • ° µ
Tabs\tand  double  spaces\r\nCRLF lines\n\n\nand trailing spaces   
"""


def corpus():
    """Fixed training corpus: hand-written text plus seeded numbers, dates and word mixes."""
    rng = random.Random(20261129)
    lines = (_ENGLISH * 6 + _MULTI * 3).splitlines()
    words = sorted(set(w for w in _ENGLISH.split() if w.isalpha()))
    for _ in range(400):
        kind = rng.randrange(5)
        if kind == 0:
            lines.append(" ".join(rng.choice(words) for _ in range(rng.randrange(3, 12))) + rng.choice(".,;:!?"))
        elif kind == 1:
            lines.append(f"{rng.randrange(10 ** rng.randrange(1, 7))} {rng.uniform(-1000, 1000):.{rng.randrange(0, 4)}f}")
        elif kind == 2:
            lines.append(f"{rng.randrange(1900, 2100)}-{rng.randrange(1, 13):02d}-{rng.randrange(1, 29):02d} "
                         f"{rng.randrange(24):02d}:{rng.randrange(60):02d}")
        elif kind == 3:
            lines.append("(" + ",".join(str(rng.randrange(1001)) for _ in range(4)) + ")")
        else:
            lines.append(rng.choice(words).upper() + " " + rng.choice(words).capitalize())
    return lines


def train(regex):
    """Return a tokenizers.Tokenizer: NFC, Split(regex)+ByteLevel, BPE, 26 Qwen added tokens."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE(dropout=None, unk_token=None, continuing_subword_prefix="", end_of_word_suffix="",
                               fuse_unk=False, byte_fallback=False, ignore_merges=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(regex), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
    ])
    tok.post_processor = processors.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    tok.decoder = decoders.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    trainer = trainers.BpeTrainer(vocab_size=BPE_VOCAB, min_frequency=2, show_progress=False, special_tokens=[],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus(), trainer=trainer)
    n = tok.get_vocab_size()
    if n > BPE_VOCAB:
        raise RuntimeError(f"BPE vocab {n} > {BPE_VOCAB}")
    for content, special in ADDED_TOKENS:
        t = AddedToken(content, single_word=False, lstrip=False, rstrip=False, normalized=False, special=special)
        if special:
            tok.add_special_tokens([t])
        else:
            tok.add_tokens([t])
    return tok


def token_ids(tok):
    return {c: tok.token_to_id(c) for c, _ in ADDED_TOKENS}


def tokenizer_json_text(tok):
    """Canonical tokenizer.json text: the library's own key order, indent 2, UTF-8."""
    return json.dumps(json.loads(tok.to_str()), ensure_ascii=False, indent=2) + "\n"
