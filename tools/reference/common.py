"""Shared helpers: versions, hashing, deterministic JSON and safetensors writing."""
import hashlib
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SEED = 20261129

# Transformers files the three families use (model, config, processor, image processor, tokenizer code).
SOURCE_FILES = [
    "models/lighton_ocr/configuration_lighton_ocr.py", "models/lighton_ocr/modeling_lighton_ocr.py",
    "models/lighton_ocr/processing_lighton_ocr.py",
    "models/mistral3/configuration_mistral3.py", "models/mistral3/modeling_mistral3.py",
    "models/pixtral/configuration_pixtral.py", "models/pixtral/modeling_pixtral.py",
    "models/pixtral/image_processing_pixtral.py", "models/pixtral/image_processing_pil_pixtral.py",
    "models/pixtral/processing_pixtral.py",
    "models/qwen3/configuration_qwen3.py", "models/qwen3/modeling_qwen3.py",
    "models/qwen2/tokenization_qwen2.py",
    "models/qwen3_5/configuration_qwen3_5.py", "models/qwen3_5/modeling_qwen3_5.py",
    "models/qwen3_5/tokenization_qwen3_5.py",
    "models/qwen2_vl/image_processing_qwen2_vl.py", "models/qwen2_vl/image_processing_pil_qwen2_vl.py",
    "models/qwen3_vl/processing_qwen3_vl.py", "models/qwen3_vl/video_processing_qwen3_vl.py",
    "image_processing_backends.py", "image_processing_utils.py", "image_utils.py", "image_transforms.py",
    "processing_utils.py", "tokenization_utils_base.py", "tokenization_utils_tokenizers.py",
    "modeling_rope_utils.py", "masking_utils.py", "modeling_utils.py", "conversion_mapping.py",
    "cache_utils.py", "generation/utils.py", "generation/logits_process.py", "integrations/sdpa_attention.py",
    "activations.py",
]


def versions():
    import numpy, PIL, safetensors, tokenizers, torch, torchvision, transformers
    return {"python": sys.version.split()[0], "torch": torch.__version__, "transformers": transformers.__version__,
            "tokenizers": tokenizers.__version__, "torchvision": torchvision.__version__, "PIL": PIL.__version__,
            "numpy": numpy.__version__, "safetensors": safetensors.__version__}


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def sources():
    import torchvision
    import transformers
    root = os.path.dirname(transformers.__file__)
    files = {}
    for rel in SOURCE_FILES:
        p = os.path.join(root, rel)
        files["transformers/" + rel] = sha256_file(p) if os.path.exists(p) else None
    tv = os.path.join(os.path.dirname(torchvision.__file__), "transforms/v2/functional/_geometry.py")
    files["torchvision/transforms/v2/functional/_geometry.py"] = sha256_file(tv)
    return {"versions": versions(), "files": files}


def write_json(path, obj):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, sort_keys=True, indent=1, ensure_ascii=False)
        f.write("\n")


def tensor_sha256(t):
    """SHA-256 of the raw little-endian row-major bytes of a tensor (bf16 as its 2-byte pattern)."""
    import torch
    t = t.detach().cpu().contiguous()
    if t.dtype in (torch.bfloat16, torch.uint16):
        t = t.view(torch.int16)
    elif t.dtype == torch.uint32:
        t = t.view(torch.int32)
    return hashlib.sha256(t.numpy().tobytes()).hexdigest()


BIG = 1 << 20  # tensors larger than this (bytes) are stored as a hash only


def put(store, hashes, name, t):
    """Keep a tensor in `store` if small, otherwise record {sha256, shape, dtype} in `hashes`."""
    import torch
    t = t.detach().cpu().contiguous()
    if t.dtype == torch.uint16:  # safetensors/numpy lack uint16 in places: widen losslessly
        t = t.to(torch.int32)
    if t.numel() * t.element_size() > BIG:
        hashes[name] = {"sha256": tensor_sha256(t), "shape": list(t.shape), "dtype": str(t.dtype).replace("torch.", "")}
    else:
        store[name] = t


def compact_bf16(store):
    """F32 tensors whose every value is exactly a bf16 value (stages of a bf16 model) are stored as BF16:
    lossless, and half the bytes. tools/reference/compact_stages.py applies the same rule to old files."""
    import torch
    for k, t in list(store.items()):
        if t.dtype == torch.float32 and t.numel() and torch.equal(t.view(torch.int32) & 0xFFFF, torch.zeros_like(t, dtype=torch.int32)):
            store[k] = t.bfloat16()
    return store


# The stage and processor tensors under tests/golden/{model,processor}/ are committed xz-compressed (X.xz) and
# unpacked next to themselves (X, git-ignored) by CMake's configure step or unpack_goldens().
PACKED_NAMES = ("stages.safetensors", "tensors.safetensors")
PACKED_DIRS = ("model", "processor")


def _packed_files(root, suffix=""):
    for top in PACKED_DIRS:
        for dp, dn, fn in os.walk(os.path.join(root, top)):
            dn.sort()
            for f in sorted(fn):
                if f in tuple(n + suffix for n in PACKED_NAMES):
                    yield os.path.join(dp, f)


def pack_goldens(root):
    """Write X.xz for every raw X newer than its X.xz (a fresh oracle output); an unchanged content is left alone.
    xz -9e, CRC64: the same bytes for the same input."""
    import lzma
    n = 0
    for raw in _packed_files(root):
        z = raw + ".xz"
        if os.path.exists(z) and os.path.getmtime(z) >= os.path.getmtime(raw):
            continue
        with open(raw, "rb") as f:
            data = f.read()
        if os.path.exists(z):
            with open(z, "rb") as f:
                if lzma.decompress(f.read()) == data:
                    continue
        with open(z + ".part", "wb") as f:
            f.write(lzma.compress(data, format=lzma.FORMAT_XZ, check=lzma.CHECK_CRC64,
                                  preset=9 | lzma.PRESET_EXTREME))
        os.replace(z + ".part", z)
        n += 1
    return n


def unpack_goldens(root):
    """Write X from X.xz where X is missing or older (as cmake/unpack_goldens.cmake does)."""
    import lzma
    n = 0
    for z in _packed_files(root, ".xz"):
        raw = z[:-3]
        if os.path.exists(raw) and os.path.getmtime(raw) > os.path.getmtime(z):
            continue
        with open(z, "rb") as f:
            data = lzma.decompress(f.read())
        with open(raw + ".part", "wb") as f:
            f.write(data)
        os.replace(raw + ".part", raw)
        n += 1
    return n


def sha256_packed(z):
    """sha256 of the content of an .xz file."""
    import lzma
    with open(z, "rb") as f:
        return hashlib.sha256(lzma.decompress(f.read())).hexdigest()


def save_tensors(path, tensors):
    from safetensors.torch import save_file
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    save_file({k: tensors[k].contiguous().clone() for k in sorted(tensors)}, path, metadata={"format": "pt"})


def deterministic(threads=8):
    import torch
    torch.manual_seed(SEED)
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.set_num_threads(threads)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
