#!/usr/bin/env python3
"""Transformers 5.17 oracle for tensorfold. Runs on the GPU machine (torch, transformers, tokenizers, torchvision).

Subcommands: sources, checkpoint, images, processor, resize, golden, acts, all. See tests/golden/README.md.
"""
import argparse
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from common import (HERE, PACKED_NAMES, SEED, deterministic, pack_goldens, sha256_file, sha256_packed,  # noqa: E402
                    sources, write_json)

# images the model goldens feed (processor/<family>_tiny stores their resized uint8 pixels)
TINY_IMAGES_PIXTRAL = ["page_1583x2048.png", "page_1540x1190.png", "rgba_alpha.png", "jpeg_exif6.jpg"]
TINY_IMAGES_QWEN = ["page_1583x2048.png", "photo_noise.png", "webp_lossless.webp", "palette_P.png"]
MINE = ("acts", "ckpt", "images", "model", "processor", "resize")  # text* and templates belong to text_goldens.py
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
GOLDEN = os.path.join(REPO, "tests", "golden")

# name -> (family, dtype, untied, conversation subset or None for all)
TINY = {
    "lighton_ocr-tiny-bf16": ("lighton_ocr", "bf16", False, None),
    "lighton_ocr-tiny-fp32": ("lighton_ocr", "fp32", False, ["ocr_plain", "text_only"]),
    "mistral3-tiny-bf16-untied": ("mistral3", "bf16", True, ["ocr_plain", "text_only"]),
    "qwen3_5-tiny-bf16": ("qwen3_5", "bf16", False, None),
    "qwen3_5-tiny-fp32": ("qwen3_5", "fp32", False, ["ocr_nothink", "two_images", "text_only"]),
    "qwen3_5-tiny-bf16-untied": ("qwen3_5", "bf16", True, ["text_only"]),
}


def cmd_checkpoint(a):
    import checkpoints
    deterministic()
    s = checkpoints.write_checkpoint(a.family, a.size, a.out, a.config, a.seed, a.dtype, a.untied,
                                     a.init_scale if a.init_scale is not None else checkpoints.INIT_SCALE)
    if a.size == "tiny":
        write_json(os.path.join(a.out, "oracle_build.json"), {**s, "command": " ".join(sys.argv[1:])})
    print(f"{a.family} {a.size} {a.dtype}: {s['n_params']:,} parameters ({s['n_params'] / 1e9:.3f} B; "
          f"vision+projector {s['n_vision_params']:,})")
    return s


def build_all(root, only=None):
    import checkpoints
    import images
    import model_goldens
    import processor_goldens
    deterministic()
    for sub in ("acts", "ckpt", "model", "images", "processor", "resize"):
        if only is None and sub == "model" and os.path.isdir(os.path.join(root, sub)):
            # model/demo-* are the bundled demo checkpoints' goldens (tools/train_demo/demo_goldens.py): kept
            for d in os.listdir(os.path.join(root, sub)):
                if not d.startswith("demo-"):
                    shutil.rmtree(os.path.join(root, sub, d), ignore_errors=True)
        elif only is None:
            shutil.rmtree(os.path.join(root, sub), ignore_errors=True)
    write_json(os.path.join(root, "sources.json"), sources())
    img_dir = os.path.join(root, "images")
    images.write_images(img_dir)
    for fam in ("pixtral", "qwen3_5"):
        processor_goldens.write_processor_goldens("qwen3_5" if fam == "qwen3_5" else "lighton_ocr", img_dir,
                                                  os.path.join(root, "processor", fam))
    for fam, files in (("pixtral", TINY_IMAGES_PIXTRAL), ("qwen3_5", TINY_IMAGES_QWEN)):
        processor_goldens.write_processor_goldens("qwen3_5" if fam == "qwen3_5" else "lighton_ocr", img_dir,
                                                  os.path.join(root, "processor", fam + "_tiny"), tiny=True,
                                                  only=files)
    processor_goldens.write_resize_goldens(os.path.join(root, "resize"))
    summaries = {}
    for name, (fam, dt, untied, subset) in TINY.items():
        if only and name not in only:
            continue
        deterministic()
        ck = os.path.join(root, "ckpt", name)
        s = checkpoints.write_checkpoint(fam, "tiny", ck, None, SEED, dt, untied)
        cmd = f"ref.py checkpoint --family {fam} --size tiny --dtype {dt}{' --untied' if untied else ''} {name}"
        write_json(os.path.join(ck, "oracle_build.json"), {**s, "command": cmd})
        deterministic()
        summaries[name] = model_goldens.write_golden(
            ck, os.path.join(root, "model", name), img_dir, subset,
            command=f"ref.py golden tests/golden/ckpt/{name} tests/golden/model/{name}",
            extra_meta={"init_scale": s["init_scale"], "norm_jitter": s["norm_jitter"], "seed": SEED})
        print(name, s["n_params"], summaries[name], flush=True)
    if only is None:
        summaries.update(build_acts(root))
    write_sums(root)
    return summaries


def build_acts(root, only=None):
    """The hidden_act probe (acts/) and the variant goldens (model/<base>-<act>/) of act_goldens.py; needs the
    base checkpoints under root/ckpt."""
    import act_goldens
    act_goldens.write_act_probe(os.path.join(root, "acts"))
    return act_goldens.write_variant_goldens(root, only)


def write_sums(root):
    """Packs the stage/processor tensors (common.pack_goldens), then lists every golden file's sha256; a packed
    file is listed under its unpacked name with the hash of its content (`sha256sum -c` after unpacking)."""
    pack_goldens(root)
    lines = []
    for dp, dn, fn in os.walk(root):
        if dp == root:
            dn[:] = [d for d in dn if d in MINE]
        dn.sort()
        for f in sorted(fn):
            p = os.path.join(dp, f)
            rel = os.path.relpath(p, root)
            if rel in ("SHA256SUMS", "README.md") or (dp == root and rel != "sources.json"):
                continue
            if f.endswith(".part") or (f in PACKED_NAMES and os.path.exists(p + ".xz")):
                continue  # the packed copy below stands for it
            if f[:-3] in PACKED_NAMES and f.endswith(".xz"):
                lines.append(f"{sha256_packed(p)}  {rel[:-3]}")
                continue
            lines.append(f"{sha256_file(p)}  {rel}")
    with open(os.path.join(root, "SHA256SUMS"), "w") as f:
        f.write("\n".join(sorted(lines, key=lambda l: l[66:])) + "\n")


def main():
    ap = argparse.ArgumentParser()
    sp = ap.add_subparsers(dest="cmd", required=True)
    p = sp.add_parser("sources"); p.add_argument("out")
    p = sp.add_parser("checkpoint")
    p.add_argument("--family", required=True, choices=["lighton_ocr", "mistral3", "qwen3_5"])
    p.add_argument("--size", default="tiny", choices=["tiny", "full"])
    p.add_argument("--config"); p.add_argument("--seed", type=int, default=SEED)
    p.add_argument("--dtype", default="bf16", choices=["bf16", "fp32"]); p.add_argument("--untied", action="store_true")
    p.add_argument("--init-scale", type=float); p.add_argument("out")
    p = sp.add_parser("images"); p.add_argument("out")
    p = sp.add_parser("processor"); p.add_argument("--family", required=True, choices=["lighton_ocr", "mistral3", "qwen3_5"])
    p.add_argument("--images", default=os.path.join(GOLDEN, "images")); p.add_argument("--tiny", action="store_true")
    p.add_argument("--only", nargs="*"); p.add_argument("out")
    p = sp.add_parser("resize"); p.add_argument("out")
    p = sp.add_parser("golden"); p.add_argument("ckpt"); p.add_argument("out")
    p.add_argument("--images", default=os.path.join(GOLDEN, "images")); p.add_argument("--subset", nargs="*")
    p = sp.add_parser("all"); p.add_argument("--root", default=GOLDEN); p.add_argument("--only", nargs="*")
    p = sp.add_parser("acts"); p.add_argument("--root", default=GOLDEN); p.add_argument("--only", nargs="*")
    a = ap.parse_args()
    if a.cmd == "sources":
        write_json(a.out, sources())
    elif a.cmd == "checkpoint":
        cmd_checkpoint(a)
    elif a.cmd == "images":
        import images
        images.write_images(a.out)
    elif a.cmd == "processor":
        import processor_goldens
        processor_goldens.write_processor_goldens(a.family, a.images, a.out, a.tiny, a.only)
    elif a.cmd == "resize":
        import processor_goldens
        processor_goldens.write_resize_goldens(a.out)
    elif a.cmd == "golden":
        import model_goldens
        deterministic()
        print(model_goldens.write_golden(a.ckpt, a.out, a.images, a.subset, command=" ".join(sys.argv[1:])))
    elif a.cmd == "all":
        build_all(a.root, a.only)
    elif a.cmd == "acts":
        from common import unpack_goldens
        unpack_goldens(a.root)
        build_acts(a.root, a.only)
        write_sums(a.root)


if __name__ == "__main__":
    main()
