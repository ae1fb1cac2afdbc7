"""Each family's processor geometry for the any-geometry training data (issue 21), used in the render workers.

`shape(family, cfg)` is the processor's own output-size rule in Python (Pixtral: fit longest_edge, never
upscale, round each side up to the patch size; Qwen2-VL: smart_resize to multiples of patch * merge inside
[min_pixels, max_pixels]); data_any.py grows a training canvas until that size lands on the bucket grid. `Prep` then
runs the checkpoint's real image processor (AutoImageProcessor from the static files train.py writes) on the
rendered image and turns its pixel_values back into uint8 planes [C, H, W] (C = 1 for a grayscale image): the
pixels the model is trained on are exactly the processor's (the inverse of rescale + normalise rounds back to the
resized uint8 values; the largest rounding residual is counted and logged).
"""
import math

# processed-size grids of the training buckets: lines (height, width), pages (height, width)
GRIDS = {"lighton_ocr": {"line": (14, 56), "page": (112, 112)},
         "qwen3_5": {"line": (32, 64), "page": (128, 128)}}


def pixtral_shape(h, w, longest_edge, patch):
    r = max(h / longest_edge, w / longest_edge)
    if r > 1:
        h, w = int(math.floor(h / r)), int(math.floor(w / r))
    return ((h - 1) // patch + 1) * patch, ((w - 1) // patch + 1) * patch


def qwen_shape(h, w, factor, min_pixels, max_pixels):
    hb, wb = round(h / factor) * factor, round(w / factor) * factor
    if hb * wb > max_pixels:
        beta = math.sqrt(h * w / max_pixels)
        hb = max(factor, math.floor(h / beta / factor) * factor)
        wb = max(factor, math.floor(w / beta / factor) * factor)
    elif hb * wb < min_pixels:
        beta = math.sqrt(min_pixels / (h * w))
        hb, wb = math.ceil(h * beta / factor) * factor, math.ceil(w * beta / factor) * factor
    return hb, wb


class Shape:
    """Picklable shape rule of one family's preprocessor_config.json."""

    def __init__(self, family, ip_cfg):
        self.family = family
        if family == "lighton_ocr":
            self.args = (ip_cfg["size"]["longest_edge"], ip_cfg["patch_size"])
        else:
            self.args = (ip_cfg["patch_size"] * ip_cfg["merge_size"], ip_cfg["size"]["shortest_edge"],
                         ip_cfg["size"]["longest_edge"])

    def __call__(self, h, w):
        return (pixtral_shape if self.family == "lighton_ocr" else qwen_shape)(h, w, *self.args)


_IP = {}


class Prep:
    """uint8 image [h, w] or [h, w, 3] -> (uint8 [C, H, W] as the checkpoint's image processor resizes it, the
    largest rounding residual), or None if its size is not the predicted one. Attributes shape_fn and grids serve data_any.render_any_chunk."""

    def __init__(self, family, static_dir, ip_cfg):
        self.family, self.static_dir = family, static_dir
        self.shape_fn = Shape(family, ip_cfg)
        self.grids = GRIDS[family]
        self.mean, self.std = ip_cfg["image_mean"], ip_cfg["image_std"]

    def processor(self):
        if self.static_dir not in _IP:
            import torch
            from transformers import AutoImageProcessor
            torch.set_num_threads(1)
            _IP[self.static_dir] = AutoImageProcessor.from_pretrained(self.static_dir)
        return _IP[self.static_dir]

    fast = False  # set by validate(): resize with torchvision directly instead of calling the processor

    def resize(self, a):
        """The processor's resize without the processor: the uint8 image as a contiguous 3-channel tensor, resized
        (bicubic, antialiased, uint8 kernel) to shape_fn's size when that differs -> uint8 [3, H, W]."""
        import torch
        from torchvision.transforms import InterpolationMode
        from torchvision.transforms.v2 import functional as tvF
        torch.set_num_threads(1)
        H, W = self.shape_fn(a.shape[0], a.shape[1])
        x = torch.from_numpy(a)
        x = (x[None].expand(3, -1, -1) if a.ndim == 2 else x.permute(2, 0, 1)).contiguous()
        if (H, W) != tuple(x.shape[1:]):
            x = tvF.resize(x, [H, W], interpolation=InterpolationMode.BICUBIC, antialias=True)
        return x.numpy()

    def validate(self, images):
        """Use the direct resize only if it gives the processor's uint8 planes exactly on every image (lines,
        pages scaled down to the longest edge, the first recipe's sizes). -> (fast, max |diff|)"""
        import numpy as np
        worst = 0
        for a in images:
            self.fast = False
            ref = self(a)
            mine = self.resize(a)
            mine = mine[:1] if a.ndim == 2 else mine
            if ref is None or ref[0].shape != mine.shape:
                worst = 255
                break
            worst = max(worst, int(np.abs(ref[0].astype(np.int16) - mine.astype(np.int16)).max()))
        self.fast = worst == 0
        return self.fast, worst

    def __call__(self, a):
        import numpy as np
        import torch
        from PIL import Image
        gray = a.ndim == 2
        if self.fast:
            u8 = self.resize(a)
            return (np.ascontiguousarray(u8[:1]) if gray else u8), 0.0
        im = Image.fromarray(a).convert("RGB")
        out = self.processor()(images=[im], return_tensors="pt")
        pv = out["pixel_values"]
        if self.family == "lighton_ocr":
            x = pv[0].double()  # [3, H, W]
        else:
            _, gh, gw = (int(v) for v in out["image_grid_thw"][0])
            x = pv.double().reshape(gh // 2, gw // 2, 2, 2, 3, 2, 16, 16)[:, :, :, :, :, 0]
            x = x.permute(4, 0, 2, 5, 1, 3, 6).reshape(3, gh * 16, gw * 16)
        mean = torch.tensor(self.mean, dtype=torch.float64).view(3, 1, 1)
        std = torch.tensor(self.std, dtype=torch.float64).view(3, 1, 1)
        x = (x * std + mean) * 255.0
        u8 = x.round().clamp(0, 255)
        resid = float((x - u8).abs().max())
        if tuple(u8.shape[1:]) != self.shape_fn(a.shape[0], a.shape[1]):
            return None
        u8 = u8.to(torch.uint8).numpy()
        return (np.ascontiguousarray(u8[:1]) if gray else u8), resid
