"""The `qwen3_5` half of the demo trainer: config, processor, the processor's pixel pipeline on batches,
a batched vision attention for training (checked equal to Transformers'), and the CTC features of the tower.

Everything here is Transformers 5.17's own Qwen3_5ForConditionalGeneration; only the training loop takes
shortcuts, each compared with the stock code path before training starts (see train.py).
"""
import sys


MIN_PIXELS = 4096      # processor size.shortest_edge: a 150 x 24 line stays at native scale (160 x 32)
MAX_PIXELS = 786432    # processor size.longest_edge (1024 x 768): a 1,600 x 1,200 page -> 1,024 x 768 (64 x 48 patches,
# text at 0.64 x, as Pixtral's longest_edge 1008 gives lighton); a 2-core CPU takes ~3.6 s for examples/page.png's
# vision and ~17 s for a 1,581 x 763 page (tensorfold, load average ~5, 2026-12-02);
# the 560 x 56 lines and 560 x 224 blocks of the first recipe are resized to 576 x 64 and 576 x 224 as before

# --qwen-size: "s" is the lines-only checkpoint of commit 21f078d (1.8 M parameters); "m" (default) doubles the
# widths (the Pixtral/Qwen3 demo's 256) for the block data (~7.7 M parameters).
SIZES = {
    "s": (dict(hidden_size=128, intermediate_size=384, num_attention_heads=4, num_key_value_heads=2, head_dim=64,
               linear_key_head_dim=32, linear_value_head_dim=32, linear_num_key_heads=2, linear_num_value_heads=4),
          dict(depth=3, hidden_size=96, intermediate_size=256, num_heads=2, out_hidden_size=128)),
    "m": (dict(hidden_size=256, intermediate_size=768, num_attention_heads=4, num_key_value_heads=2, head_dim=64,
               linear_key_head_dim=64, linear_value_head_dim=64, linear_num_key_heads=2, linear_num_value_heads=4),
          dict(depth=4, hidden_size=256, intermediate_size=768, num_heads=4, out_hidden_size=256)),
}
LAYERS = dict(num_hidden_layers=4, max_position_embeddings=4096,
              layer_types=["linear_attention", "linear_attention", "linear_attention", "full_attention"])


def make_config(ids, model_vocab, size="m"):
    import checkpoints as ck
    text, vision = SIZES[size]
    cfg = ck.make_config_dict("qwen3_5", "tiny", ids, init_scale=0.02)
    cfg["text_config"].update(text, **LAYERS, vocab_size=model_vocab)
    cfg["text_config"]["rope_parameters"]["mrope_section"] = [3, 3, 2]  # rotary dim 16 (head_dim 64 x 0.25)
    cfg["vision_config"].update(vision)
    return cfg


def make_processor(tok, template):
    from transformers import Qwen2VLImageProcessor, Qwen3VLProcessor, Qwen3VLVideoProcessor, TokenizersBackend
    ht = TokenizersBackend(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>", bos_token=None)
    ip = Qwen2VLImageProcessor(size={"shortest_edge": MIN_PIXELS, "longest_edge": MAX_PIXELS}, patch_size=16,
                               temporal_patch_size=2, merge_size=2, image_mean=[0.5] * 3, image_std=[0.5] * 3,
                               resample=3, do_convert_rgb=True)
    return Qwen3VLProcessor(image_processor=ip, tokenizer=ht, video_processor=Qwen3VLVideoProcessor(),
                            chat_template=template)


def pixel_values(u8):
    """uint8 [B, C, H, W] (already resized; C = 1 grey or 3) -> fp32 [B * H/16 * W/16, 1536]: rescale+normalise,
    patches in (block_row, block_col, in_row, in_col) order, each patch [c][t][y][x] with the frame duplicated
    (T = 2)."""
    B, C, H, W = u8.shape
    gh, gw = H // 16, W // 16
    x = u8.float() * (1 / 255.0)
    x = (x - 0.5) / 0.5  # the processor's rescale then normalise (mean = std = 0.5)
    x = x.reshape(B, C, gh // 2, 2, 16, gw // 2, 2, 16).permute(0, 2, 5, 3, 6, 1, 4, 7)  # [B, bh, bw, ih, iw, C, 16, 16]
    x = x[:, :, :, :, :, :, None].expand(-1, -1, -1, -1, -1, 3, 2, -1, -1)  # [.., C, T, 16, 16]
    return x.reshape(B * gh * gw, 3 * 2 * 16 * 16)


def patch_vision_attention(model, state):
    """Replace the vision attention's per-image loop (one SDPA call per image) with one batched SDPA call; valid
    while every image of a call has state["L"] patches. Returns a function that restores the stock forward."""
    import torch.nn.functional as F
    cls = type(model.model.visual.blocks[0].attn)
    mod = sys.modules[cls.__module__]
    orig = cls.forward

    def fast(self, hidden_states, cu_seqlens, position_embeddings=None, **kw):
        n = hidden_states.shape[0]
        q, k, v = self.qkv(hidden_states).reshape(n, 3, self.num_heads, -1).permute(1, 0, 2, 3).unbind(0)
        cos, sin = position_embeddings
        q, k = mod.apply_rotary_pos_emb_vision(q, k, cos, sin)
        L = state["L"]
        b = n // L
        q, k, v = (t.reshape(b, L, self.num_heads, -1).transpose(1, 2) for t in (q, k, v))
        o = F.scaled_dot_product_attention(q, k, v, scale=self.scaling)  # [b, heads, L, hd]
        return self.proj(o.transpose(1, 2).reshape(n, -1))

    cls.forward = fast

    def restore():
        cls.forward = orig
    return restore, orig, cls


def patch_vision_positions(model, grid, log):
    """Transformers computes the tower's position-table interpolation and rotary positions per call from grid_thw
    (module functions get_vision_interpolation_indices_and_weights / get_vision_position_ids); every image of a
    training call has the same grid, so compute them for the first image and tile them over the call. The tiled
    result is compared with the stock one for a 3-image grid here; the patch is applied only if they are equal.
    Returns a function that restores the stock functions (or None when not patched)."""
    import torch
    mod = sys.modules[type(model.model.visual).__module__]
    names = ("get_vision_interpolation_indices_and_weights", "get_vision_position_ids")
    stock = {n: getattr(mod, n) for n in names if hasattr(mod, n)}

    def tile(x, B, L):  # L: patches per image
        if isinstance(x, (tuple, list)):
            return type(x)(tile(t, B, L) for t in x)
        if not torch.is_tensor(x):
            return x
        axis = [d for d, n in enumerate(x.shape) if n == L]
        if len(axis) != 1:
            raise ValueError(f"no single patch axis in {tuple(x.shape)}")
        return x.repeat(*[B if d == axis[0] else 1 for d in range(x.dim())])

    def once(fn):
        return lambda grid_thw, *a, **k: tile(fn(grid_thw[:1], *a, **k), grid_thw.shape[0], int(grid_thw[0].prod()))

    def same(x, y):
        if isinstance(x, (tuple, list)):
            return len(x) == len(y) and all(same(p, q) for p, q in zip(x, y))
        return bool((x == y).all()) if torch.is_tensor(x) else x == y

    g3 = grid.expand(3, -1)
    vis = model.model.visual
    kw = dict(num_grid_per_side=vis.num_grid_per_side, mode=vis.interpolation_mode,
              align_corners=vis.interpolation_align_corners, spatial_merge_size=vis.spatial_merge_size, kwargs={})
    try:
        for n, fn in stock.items():
            args = kw if n == names[0] else {}
            call = (lambda f: f(g3, **args)) if args else (lambda f: f(g3, vis.spatial_merge_size, kwargs={}))
            ok = same(call(fn), call(once(fn)))
            log(f"vision positions: {n} tiled == stock for 3 images: {ok}")
            if not ok:
                return None
    except Exception as e:  # a Transformers change: keep the stock path
        log(f"vision positions: not patched ({type(e).__name__}: {e})")
        return None
    for n, fn in stock.items():
        setattr(mod, n, once(fn))

    def restore():
        for n, fn in stock.items():
            setattr(mod, n, fn)
    return restore


def ctc_features(last_hidden, B, gh, gw):
    """Vision tower output of line images [B * gh * gw, C] (block order) -> column features [B, gw, C] (mean over
    patch rows)."""
    x = last_hidden.float().reshape(B, gh // 2, gw // 2, 2, 2, -1).permute(0, 1, 3, 2, 4, 5)
    return x.reshape(B, gh, gw, -1).mean(1)
