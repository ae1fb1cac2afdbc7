"""The `lighton_ocr` half of the demo trainer: config, processor, and a batched image-feature path for
training (checked equal to Transformers' own get_image_features before training starts, see train.py).

Everything here is Transformers 5.17's own LightOnOcrForConditionalGeneration. The stock Pixtral tower flattens
all images of a call into one sequence with a block-diagonal mask (quadratic in the batch) and the patch merger
loops over images; when every image of a call has the same size, the same modules run on a [B, patches, C]
batch with no mask and the 2 x 2 merge is one reshape.
"""

PATCH = 14
LONGEST_EDGE = 1008  # processor size.longest_edge: a 1,600-px page becomes <= 1008 px (72 x 72 patches at most);
                     # the 560 x 56 lines and 560 x 224 blocks of the first recipe are not resized


def make_config(ids, model_vocab):
    import checkpoints as ck
    cfg = ck.make_config_dict("lighton_ocr", "tiny", ids, init_scale=0.02)
    cfg["text_config"].update(vocab_size=model_vocab, hidden_size=256, intermediate_size=768, num_hidden_layers=4,
                              num_attention_heads=4, num_key_value_heads=2, head_dim=64, max_position_embeddings=4096)
    cfg["vision_config"].update(hidden_size=256, num_hidden_layers=4, num_attention_heads=4, head_dim=64,
                                intermediate_size=768)
    return cfg


def make_processor(tok, template):
    from transformers import LightOnOcrProcessor, PixtralImageProcessor, TokenizersBackend
    import checkpoints as ck
    ht = TokenizersBackend(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>", bos_token=None,
                           image_token="<|image_pad|>", image_break_token="<|vision_pad|>",
                           image_end_token="<|vision_end|>")
    ip = PixtralImageProcessor(size={"longest_edge": LONGEST_EDGE}, patch_size=PATCH, resample=3,
                               image_mean=ck.CLIP_MEAN, image_std=ck.CLIP_STD, do_convert_rgb=True)
    return LightOnOcrProcessor(image_processor=ip, tokenizer=ht, patch_size=PATCH, spatial_merge_size=2,
                               chat_template=template)


def image_features(model, pv):
    """pv fp32 [B, 3, H, W], every image H x W (multiples of 14) -> (projected features [B, (h//2) * (w//2), Dt]
    in the row-major merged order the placeholders take, tower output [B, h, w, Dv]) with h, w = H/14, W/14; an
    odd last patch row / column is dropped by the merge, as the stock unfold(kernel 2, stride 2) drops it."""
    import torch
    venc = model.model.vision_encoder
    proj = model.model.vision_projection
    B, _, H, W = pv.shape
    h, w = H // PATCH, W // PATCH
    x = venc.patch_conv(pv.to(venc.patch_conv.weight.dtype))  # [B, Dv, h, w]
    x = venc.ln_pre(x.flatten(2).transpose(1, 2))  # [B, h*w, Dv]
    hpos, wpos = torch.meshgrid(torch.arange(h, device=pv.device), torch.arange(w, device=pv.device), indexing="ij")
    ids = torch.stack([hpos.flatten(), wpos.flatten()], dim=-1)  # [h*w, 2]: axial (row, column) positions
    pos = venc.patch_positional_embedding(x, ids)  # cos, sin [h*w, head_dim]
    for layer in venc.transformer.layers:
        x = layer(x, None, position_embeddings=pos)  # 5.17 layers return the tensor
    tower = x
    x = proj.norm(x)
    d = x.shape[-1]
    x = x.reshape(B, h, w, d)[:, :h // 2 * 2, :w // 2 * 2]
    # unfold(kernel 2, stride 2) order: feature index = c * 4 + ki * 2 + kj, blocks row-major
    x = x.reshape(B, h // 2, 2, w // 2, 2, d).permute(0, 1, 3, 5, 2, 4).reshape(B, (h // 2) * (w // 2), d * 4)
    x = proj.patch_merger.merging_layer(x)
    x = proj.linear_2(proj.act(proj.linear_1(x)))
    return x, tower.reshape(B, h, w, d)


def ctc_features(tower):
    """Tower output [B, h, w, C] of line images -> column features [B, w, C] (mean over patch rows)."""
    return tower.float().mean(1)
