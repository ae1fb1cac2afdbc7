// Pixtral vision tower and the LightOnOCR/Mistral3 projector.
// HF: models/pixtral/modeling_pixtral.py (PixtralVisionModel, PixtralAttention, PixtralMLP,
// PixtralRotaryEmbedding, generate_block_attention_mask) and models/lighton_ocr/modeling_lighton_ocr.py
// (LightOnOcrMultiModalProjector, LightOnOcrPatchMerger); docs/lighton_ocr.md §1-5.
#include <cmath>

#include "models/layers/decoder.h"
#include "models/layers/rope.h"
#include "models/layers/util.h"
#include "models/lighton_ocr/model.h"

namespace tf::lighton_ocr {

namespace {
constexpr float kPixtralEps = 1e-5f;  // PixtralRMSNorm eps is hard-coded, not read from the config
}

Expected<DeviceBuffer> LightOnOcrModel::encode_images(const std::vector<ImageInput>& images) {
  const VisionConfig& v = cfg_.vision;
  const int64_t p = v.patch_size, max_side = v.image_size / v.patch_size;
  std::vector<std::pair<int64_t, int64_t>> grids;
  for (size_t i = 0; i < images.size(); ++i) {
    const ImageInput& im = images[i];
    const Tensor& px = im.pixel_values;
    const std::string which = "image " + std::to_string(i) + ": ";
    if (px.rank() != 3 || px.dtype != DType::F32 || px.dim(0) != v.num_channels)
      return make_error(which + "pixel_values must be F32 [" + std::to_string(v.num_channels) +
                        ", H, W], got " + std::string(dtype_name(px.dtype)) + " " + shape_str(px.shape));
    if (im.height <= 0 || im.width <= 0 || im.height % p || im.width % p || im.height > px.dim(1) ||
        im.width > px.dim(2))
      return make_error(which + "size " + std::to_string(im.height) + "x" + std::to_string(im.width) +
                        " must be positive multiples of the patch size " + std::to_string(p) +
                        " within pixel_values " + shape_str(px.shape));
    if (im.height / p > max_side || im.width / p > max_side)
      return make_error(which + "size " + std::to_string(im.height) + "x" + std::to_string(im.width) +
                        " exceeds the vision tower's image_size " + std::to_string(v.image_size));
    grids.emplace_back(im.height / p, im.width / p);
  }
  if (grids.empty()) return backend_.alloc(info_.dtype, {0, cfg_.text.hidden_size});
  DeviceBuffer feats = vision_tower(images, grids);
  return projector(feats, grids);
}

DeviceBuffer LightOnOcrModel::vision_tower(const std::vector<ImageInput>& images,
                                           const std::vector<std::pair<int64_t, int64_t>>& grids) {
  Backend& b = backend_;
  const VisionConfig& v = cfg_.vision;
  const DType act = info_.dtype;
  const int64_t hv = v.hidden_size, heads = v.num_attention_heads, hd = v.head_dim, iv = v.intermediate_size;
  const int64_t p = v.patch_size, cols = v.num_channels * p * p;
  const std::string pre = w_.vision_prefix;
  int64_t n = 0;
  for (auto [gh, gw] : grids) n += gh * gw;

  // Patch conv as a GEMM per image; images concatenated into one sequence (flatten(1).T, cat).
  DeviceBuffer x = b.alloc(act, {n, hv});  // [n_patches, hidden_v]
  std::vector<int32_t> ranges;             // [n_patches, 2]: block-diagonal attention, one block per image
  int64_t off = 0;
  for (size_t i = 0; i < images.size(); ++i) {
    const auto [gh, gw] = grids[i];
    DeviceBuffer px = upload_new(b, images[i].pixel_values);  // [C, H, W] f32
    DeviceBuffer patches = b.alloc(act, {gh * gw, cols});     // [gh*gw, C*p*p]
    b.patchify(px, p, gh, gw, patches);
    b.linear(patches, w_.patch_conv, nullptr, x.tensor().slice_rows(off, off + gh * gw));
    for (int64_t r = 0; r < gh * gw; ++r) {
      ranges.push_back(static_cast<int32_t>(off));
      ranges.push_back(static_cast<int32_t>(off + gh * gw));
    }
    off += gh * gw;
  }
  capture(capture_, b, pre + ".patch_conv", x);
  DeviceBuffer h = b.alloc(act, {n, hv});  // [n_patches, hidden_v], the residual stream
  b.rms_norm(x, w_.ln_pre, kPixtralEps, RmsNormKind::kWeight, h);
  capture(capture_, b, pre + ".ln_pre", h);

  Buffer angles = pixtral_rope_angles(grids, hd, v.rope_theta);  // [n_patches, hd/2]
  DeviceBuffer dang = upload_new(b, angles);
  DeviceBuffer cos = b.alloc(act, {n, hd}), sin = b.alloc(act, {n, hd});
  b.rope_cos_sin(dang, cos, sin);
  capture(capture_, b, pre + ".patch_positional_embedding.cos", cos);
  capture(capture_, b, pre + ".patch_positional_embedding.sin", sin);
  DeviceBuffer dranges = b.alloc(DType::I32, {n, 2});
  b.upload(dranges, ranges.data());
  const float scale = static_cast<float>(std::pow(static_cast<double>(hd), -0.5));

  // Per layer: norm, the fused q/k/v linear and qkv_prep (2D RoPE on q and k: linear_qkv_prep), attention
  // within each image, o_proj, add_rms_norm (residual + ffn_norm), the fused gate/up linear, glu, down_proj,
  // residual add. From o_proj on that is Backend::layer_tail bit for bit (add_rms_norm is add then rms_norm),
  // so a fusing backend runs it as one op; op by op while capturing (the captures read o, which it may leave
  // unwritten).
  DeviceBuffer xn = b.alloc(act, {n, hv}), qkv = b.alloc(act, {n, 3 * hv}), attn = b.alloc(act, {n, hv}),
               o = b.alloc(act, {n, hv});
  DeviceBuffer q = b.alloc(act, {n, heads, hd}), k = b.alloc(act, {n, heads, hd}),
               val = b.alloc(act, {n, heads, hd});
  DeviceBuffer gu = b.alloc(act, {n, 2 * iv}), mid = b.alloc(act, {n, iv});
  for (size_t l = 0; l < w_.vision_layers.size(); ++l) {
    const VisionLayerWeights& L = w_.vision_layers[l];
    const std::string name = capture_ ? pre + ".transformer.layers." + std::to_string(l) : std::string();
    b.rms_norm(h, L.attention_norm, kPixtralEps, RmsNormKind::kWeight, xn);
    b.linear_qkv_prep(xn, L.qkv_proj, nullptr, qkv, cos, sin, q, k, val);
    b.attention(q, k, val, dranges, scale, attn.tensor().reshaped({n, heads, hd}));
    if (!capture_) {
      b.layer_tail(attn,
                   {L.o_proj, nullptr, L.ffn_norm, kPixtralEps, RmsNormKind::kWeight, L.gate_up_proj,
                    cfg_.vision.act, L.down_proj},
                   {o, xn, gu, mid}, h);
      continue;
    }
    b.linear(attn, L.o_proj, nullptr, o);
    capture(capture_, b, name + ".attention", o);
    b.add_rms_norm(h, o, L.ffn_norm, kPixtralEps, RmsNormKind::kWeight, xn);
    b.linear(xn, L.gate_up_proj, nullptr, gu);
    b.glu(gu, cfg_.vision.act, mid);
    b.linear(mid, L.down_proj, nullptr, o);
    capture(capture_, b, name + ".feed_forward", o);
    b.add(h, o, h);
    capture(capture_, b, name, h);
  }
  capture(capture_, b, pre, h);  // last_hidden_state (no final norm in Pixtral)
  return h;
}

DeviceBuffer LightOnOcrModel::projector(const Tensor& feats,
                                        const std::vector<std::pair<int64_t, int64_t>>& grids) {
  Backend& b = backend_;
  const DType act = info_.dtype;
  const int64_t hv = cfg_.vision.hidden_size, ht = cfg_.text.hidden_size, n = feats.dim(0);
  const std::string pre = w_.projector_prefix;
  DeviceBuffer xn = b.alloc(act, {n, hv});  // [n_patches, hidden_v]
  b.rms_norm(feats, w_.proj_norm, static_cast<float>(cfg_.text.rms_norm_eps), RmsNormKind::kWeight, xn);
  capture(capture_, b, pre + ".norm", xn);
  int64_t n_tok = 0;
  for (auto [gh, gw] : grids) n_tok += (gh / 2) * (gw / 2);
  DeviceBuffer merged = b.alloc(act, {n_tok, 4 * hv});  // [n_tokens, 4*hidden_v], channel-major 2×2
  int64_t off = 0, toff = 0;
  for (auto [gh, gw] : grids) {
    const int64_t t = (gh / 2) * (gw / 2);
    b.unfold_2x2(xn.tensor().slice_rows(off, off + gh * gw), gh, gw,
                 merged.tensor().slice_rows(toff, toff + t));
    off += gh * gw;
    toff += t;
  }
  DeviceBuffer y = b.alloc(act, {n_tok, hv});  // [n_tokens, hidden_v]
  b.linear(merged, w_.merging_layer, nullptr, y);
  capture(capture_, b, pre + ".patch_merger", y);
  DeviceBuffer z = b.alloc(act, {n_tok, ht}), out = b.alloc(act, {n_tok, ht});  // [n_tokens, hidden]
  const Tensor b1 = w_.linear_1_bias.tensor(), b2 = w_.linear_2_bias.tensor();
  b.linear(y, w_.linear_1, w_.linear_1_bias.empty() ? nullptr : &b1, z);
  capture(capture_, b, pre + ".linear_1", z);
  b.act(z, cfg_.projector_gelu_tanh ? ActKind::kGeluTanh : ActKind::kGelu, z);
  capture(capture_, b, pre + ".act", z);
  b.linear(z, w_.linear_2, w_.linear_2_bias.empty() ? nullptr : &b2, out);
  capture(capture_, b, pre + ".linear_2", out);
  capture(capture_, b, pre, out);
  return out;
}

}  // namespace tf::lighton_ocr
