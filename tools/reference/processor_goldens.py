"""`processor` and `resize` subcommands: image loading, resize and preprocessing goldens."""
import json
import os

from common import put, save_tensors, tensor_sha256, write_json


PV_STORE_MAX = 256 * 1024  # larger pixel_values / resized images are recorded by hash only
BIG_RESIZED = 1 << 20
RGB_STORE_MAX = 64 * 1024  # decoded RGB: the image files are committed, larger decodes are checked by hash


def real_image_processor(family, tiny=False):
    """The image processor of the published checkpoints (tiny=True: the tiny checkpoints' smaller limits)."""
    from checkpoints import CLIP_MEAN, CLIP_STD, REAL_PROCESSOR, TINY_PROCESSOR
    if tiny:
        REAL_PROCESSOR = TINY_PROCESSOR  # noqa: N806
    if family == "qwen3_5":
        from transformers import Qwen2VLImageProcessor
        return Qwen2VLImageProcessor(size={"shortest_edge": REAL_PROCESSOR["qwen_min_pixels"],
                                           "longest_edge": REAL_PROCESSOR["qwen_max_pixels"]},
                                     patch_size=16, temporal_patch_size=2, merge_size=2, image_mean=[0.5] * 3,
                                     image_std=[0.5] * 3, resample=3, do_convert_rgb=True)
    from transformers import PixtralImageProcessor
    return PixtralImageProcessor(size={"longest_edge": REAL_PROCESSOR["pixtral_longest_edge"]}, patch_size=14,
                                 resample=3, image_mean=CLIP_MEAN, image_std=CLIP_STD, do_convert_rgb=True)


def target_size(ip, h, w):
    """The (H', W') the processor's resize computes, via the processor module's own helper."""
    name = type(ip).__name__
    if name.startswith("Pixtral"):
        from transformers.models.pixtral.image_processing_pixtral import get_resize_output_image_size
        import torch
        le = ip.size["longest_edge"] if isinstance(ip.size, dict) else ip.size.longest_edge
        ps = ip.patch_size
        ps = ps["height"] if isinstance(ps, dict) else getattr(ps, "height", ps)
        return tuple(get_resize_output_image_size(torch.zeros(3, h, w), size=(le, le), patch_size=(ps, ps)))
    from transformers.models.qwen2_vl.image_processing_qwen2_vl import smart_resize
    size = ip.size if isinstance(ip.size, dict) else {"shortest_edge": ip.size.shortest_edge, "longest_edge": ip.size.longest_edge}
    return tuple(smart_resize(h, w, factor=ip.patch_size * ip.merge_size, min_pixels=size["shortest_edge"],
                              max_pixels=size["longest_edge"]))


def resize_uint8(img_chw, hw):
    """What TorchvisionBackend.resize runs: tvF.resize on the grouped [1,3,H,W] uint8 tensor (CPU)."""
    from torchvision.transforms.v2 import functional as tvF
    return tvF.resize(img_chw[None], list(hw), interpolation=tvF.InterpolationMode.BICUBIC, antialias=True)[0]


def process_one(ip, img_chw):
    """Run the image processor on one CHW uint8 tensor; also the resized uint8 and the exactness check."""
    out = ip(images=[img_chw], return_tensors="pt")
    h, w = img_chw.shape[-2:]
    hw = target_size(ip, int(h), int(w))
    resized = resize_uint8(img_chw, hw)
    again = ip(images=[resized], do_resize=False, return_tensors="pt")
    pv, pv2 = out["pixel_values"], again["pixel_values"]
    if type(ip).__name__.startswith("Pixtral"):
        pv = pv[..., : hw[0], : hw[1]]
        pv2 = pv2[..., : hw[0], : hw[1]]
    if pv.shape != pv2.shape or not bool((pv == pv2).all()):
        raise AssertionError(f"resize replication mismatch for input {tuple(img_chw.shape)} -> {hw}")
    return out, resized, hw


def n_image_tokens(ip, out, i=0):
    if "image_grid_thw" in out:
        t, gh, gw = [int(v) for v in out["image_grid_thw"][i]]
        return t * gh * gw // (ip.merge_size ** 2)
    h, w = [int(v) for v in out["image_sizes"][i]]
    return (h // 28) * (w // 28)


def loaders(path):
    """The three ways Transformers 5.17 turns a file into RGB pixels. Returns {name: HWC uint8 tensor or error}."""
    import numpy as np
    import torch
    from PIL import Image
    from transformers.image_transforms import convert_to_rgb
    from transformers.image_utils import load_image, load_image_as_tensor
    res = {}
    try:  # chat template / processor with a path, URL or base64 string: TorchvisionBackend.fetch_images
        t = load_image_as_tensor(path)
        res["chat"] = t.permute(1, 2, 0).contiguous()
    except Exception as e:  # noqa: BLE001
        res["chat"] = f"{type(e).__name__}: {e}"
    try:  # transformers.image_utils.load_image: exif_transpose + convert("RGB") (pipelines)
        res["load_image"] = torch.from_numpy(np.asarray(load_image(path)).copy())
    except Exception as e:  # noqa: BLE001
        res["load_image"] = f"{type(e).__name__}: {e}"
    try:  # a PIL image handed to the processor: convert_to_rgb only, no EXIF transpose
        res["pil_object"] = torch.from_numpy(np.asarray(convert_to_rgb(Image.open(path))).copy())
    except Exception as e:  # noqa: BLE001
        res["pil_object"] = f"{type(e).__name__}: {e}"
    return res


def write_processor_goldens(family, images_dir, out_dir, tiny=False, only=None):
    """tiny=True: the tiny checkpoints' processor on the images `only` (those the model goldens use); the
    resized uint8 images are then always stored so model tests can rebuild pixel_values exactly."""
    import torch
    ip = real_image_processor(family, tiny)
    with open(os.path.join(images_dir, "cases.json")) as f:
        cases = json.load(f)
    if only:
        cases = [c for c in cases if c["file"] in only]
    rgb_max = 0 if tiny else RGB_STORE_MAX
    resized_max = BIG_RESIZED if tiny else PV_STORE_MAX
    store, hashes, report = {}, {}, {}
    for c in cases:
        name, path = c["name"], os.path.join(images_dir, c["file"])
        rec = {"file": c["file"]}
        lds = loaders(path)
        chat = lds["chat"]
        for k, v in lds.items():
            if isinstance(v, str):
                rec[f"{k}_error"] = v
                continue
            rec[f"{k}_shape"] = list(v.shape)
            rec[f"{k}_dtype"] = str(v.dtype).replace("torch.", "")
            rec[f"{k}_sha256"] = tensor_sha256(v)
            if k != "chat":
                same = (not isinstance(chat, str)) and chat.shape == v.shape and chat.dtype == v.dtype and bool((chat.int() == v.int()).all())
                rec[f"{k}_equals_chat"] = same
                if not same:
                    if not isinstance(chat, str) and chat.shape == v.shape:
                        rec[f"{k}_max_abs_diff_vs_chat"] = int((chat.int() - v.int()).abs().max())
                    if v.numel() <= rgb_max:
                        store[f"{name}.rgb_{k}"] = v
        if isinstance(chat, str):
            report[name] = rec
            continue
        if chat.numel() * chat.element_size() <= rgb_max:
            store[f"{name}.rgb"] = chat.to(torch.int32) if chat.dtype == torch.uint16 else chat
        try:
            out, resized, hw = process_one(ip, chat.permute(2, 0, 1).contiguous())
        except Exception as e:  # noqa: BLE001
            rec["process_error"] = f"{type(e).__name__}: {e}"
            report[name] = rec
            continue
        rec["target_hw"] = list(hw)
        rec["resampled"] = list(hw) != list(chat.shape[:2])
        if resized.numel() * resized.element_size() <= resized_max:
            store[f"{name}.resized"] = resized.to(torch.int32) if resized.dtype == torch.uint16 else resized
        else:
            hashes[f"{name}.resized"] = {"sha256": tensor_sha256(resized), "shape": list(resized.shape),
                                         "dtype": str(resized.dtype).replace("torch.", "")}
        pv = out["pixel_values"]
        if pv.numel() * 4 <= PV_STORE_MAX:
            store[f"{name}.pixel_values"] = pv
        else:  # exactly ((float(resized) - mean*255) / (std*255)), patchified: the hash checks it
            hashes[f"{name}.pixel_values"] = {"sha256": tensor_sha256(pv), "shape": list(pv.shape), "dtype": "float32"}
        rec["pixel_values_shape"] = list(out["pixel_values"].shape)
        if "image_grid_thw" in out:
            rec["image_grid_thw"] = [int(v) for v in out["image_grid_thw"][0]]
        else:
            rec["image_sizes"] = [int(v) for v in out["image_sizes"][0]]
        rec["n_image_tokens"] = n_image_tokens(ip, out)
        report[name] = rec
    save_tensors(os.path.join(out_dir, "tensors.safetensors"), store)
    write_json(os.path.join(out_dir, "processor.json"),
               {"family": family, "tiny": tiny, "image_processor": json.loads(ip.to_json_string()), "images": report,
                "hashed_tensors": hashes})
    return report


def resize_cases():
    """~40 (H, W) -> (H', W') cases: each axis up/down independently, extreme ratios, size 1, identity."""
    cases = [
        ((16, 16), (8, 8)), ((16, 16), (32, 32)), ((16, 16), (16, 16)), ((20, 30), (10, 45)), ((30, 20), (45, 10)),
        ((17, 23), (17, 40)), ((17, 23), (9, 23)), ((64, 64), (1, 1)), ((1, 1), (14, 14)), ((1, 1), (1, 1)),
        ((1, 50), (3, 7)), ((50, 1), (7, 3)), ((13, 97), (28, 196)), ((97, 13), (196, 28)), ((64, 48), (1, 48)),
        ((64, 48), (64, 1)), ((5, 200), (2, 28)), ((200, 5), (28, 2)), ((33, 77), (32, 64)), ((48, 80), (64, 96)),
        ((100, 60), (28, 16)), ((60, 100), (16, 28)), ((31, 31), (30, 32)), ((31, 31), (32, 30)), ((7, 9), (70, 90)),
        ((90, 70), (9, 7)), ((128, 96), (126, 98)), ((128, 96), (42, 28)), ((3, 3), (2, 5)), ((2, 2), (3, 3)),
        ((40, 40), (39, 41)), ((256, 32), (64, 8)), ((32, 256), (8, 64)), ((150, 100), (140, 91)),
        ((100, 150), (91, 140)), ((45, 45), (15, 15)), ((45, 45), (135, 135)), ((11, 13), (11, 14)),
        ((24, 18), (12, 18)), ((9, 1000), (1, 100)),
    ]
    return cases


def write_resize_goldens(out_dir, seed=7):
    import torch
    g = torch.Generator().manual_seed(seed)
    store, meta = {}, []
    for i, ((h, w), (oh, ow)) in enumerate(resize_cases()):
        kind = "noise" if i % 2 == 0 else "smooth"
        if kind == "noise":
            x = torch.randint(0, 256, (3, h, w), generator=g, dtype=torch.uint8)
        else:
            base = torch.rand(3, max(1, h // 4 + 1), max(1, w // 4 + 1), generator=g) * 255
            x = torch.nn.functional.interpolate(base[None], size=(h, w), mode="bilinear", align_corners=False)[0]
            x = x.round().clamp(0, 255).to(torch.uint8)
        name = f"case{i:02d}"
        rec = {"name": name, "in_chw": [3, h, w], "out_hw": [oh, ow], "content": kind,
               "interpolation": "bicubic", "antialias": True, "input_sha256": tensor_sha256(x)}
        store[name + ".input"] = x
        try:
            y = resize_uint8(x, (oh, ow))
            y3 = resize_uint8_3d(x, (oh, ow))
            store[name + ".output"] = y
            rec.update(output_sha256=tensor_sha256(y), unbatched_equal=bool((y == y3).all()))
        except Exception as e:  # noqa: BLE001  (torch 2.11 asserts on some shapes: recorded, not hidden)
            rec["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"
        meta.append(rec)
    save_tensors(os.path.join(out_dir, "resize.safetensors"), store)
    write_json(os.path.join(out_dir, "cases.json"), meta)
    return meta


def resize_uint8_3d(x, hw):
    from torchvision.transforms.v2 import functional as tvF
    return tvF.resize(x, list(hw), interpolation=tvF.InterpolationMode.BICUBIC, antialias=True)
