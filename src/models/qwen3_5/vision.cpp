// Qwen3.5 vision tower (Qwen3_5VisionModel): Conv3d patch embed as a GEMM, the learned 48×48
// position table resampled bilinearly (align_corners) per image, 2D rotary applied in f32,
// pre-LayerNorm blocks with bidirectional attention inside each image, and the patch merger
// (LayerNorm, m×m concat, Linear-GELU(erf)-Linear). Patches are in spatial-merge-block order
// (block_row, block_col, in_row, in_col) throughout, as the processor emits them.
// HF: modeling_qwen3_5.py Qwen3_5Vision*, vision_utils.py get_vision_interpolation_indices_and_weights.
#include <algorithm>
#include <cmath>

#include "models/layers/rope.h"
#include "models/layers/util.h"
#include "models/qwen3_5/model.h"

namespace tf::qwen3_5 {
namespace {

constexpr float kVisionEps = 1e-6f;

// (row, col) of patch q of a gh×gw grid in merge-block order.
std::pair<int64_t, int64_t> patch_rc(int64_t q, int64_t gw, int64_t m) {
  const int64_t bw = gw / m, in_col = q % m, in_row = (q / m) % m, bc = (q / (m * m)) % bw,
                br = q / (m * m * bw);
  return {br * m + in_row, bc * m + in_col};
}

// One axis of the bilinear taps (align_corners=True), f32 exactly as 5.17 evaluates it.
void axis_taps(int64_t idx, int64_t size, int64_t side, int64_t tap[2], float wt[2]) {
  const float src = static_cast<float>(idx) * static_cast<float>(side - 1) /
                    static_cast<float>(std::max<int64_t>(size - 1, 1));
  const float fl = std::floor(src);
  for (int o = 0; o < 2; ++o) {
    tap[o] = std::clamp<int64_t>(static_cast<int64_t>(fl) + o, 0, side - 1);
    const float dist = std::fabs(src - fl - static_cast<float>(o));
    wt[o] = std::max(1.0f - dist, 0.0f);
  }
}

// [C, H, W] normalised pixels -> the processor's [gh*gw, C*T*p*p] patches (frames duplicated).
Buffer patchify_host(const Tensor& px, int64_t H, int64_t W, int64_t p, int64_t T, int64_t m) {
  const int64_t C = px.dim(0), gh = H / p, gw = W / p, Wp = px.dim(2), Hp = px.dim(1);
  Buffer out(DType::F32, {gh * gw, C * T * p * p});
  float* dst = out.as<float>();
  for (int64_t q = 0; q < gh * gw; ++q) {
    const auto [r, c] = patch_rc(q, gw, m);
    for (int64_t ch = 0; ch < C; ++ch)
      for (int64_t t = 0; t < T; ++t)
        for (int64_t y = 0; y < p; ++y)
          for (int64_t x = 0; x < p; ++x)
            *dst++ = px.as<const float>()[(ch * Hp + r * p + y) * Wp + c * p + x];
  }
  return out;
}

}  // namespace

Expected<DeviceBuffer> Qwen35Model::encode_images(const std::vector<ImageInput>& images) {
  if (!cfg_.has_vision && !images.empty())
    return make_error(
        "this qwen3_5 checkpoint has no image tower (no vision_config); image input is refused");
  const VisionConfig& v = cfg_.vision;
  const int64_t p = v.patch_size, m = v.spatial_merge_size, u = p * m;
  const int64_t cols = v.in_channels * v.temporal_patch_size * p * p;
  std::vector<Buffer> made;     // patches of images handed over as [C, H, W] pixels
  std::vector<Tensor> patches;  // each image's [gh*gw, cols] f32 rows: the caller's, or one of `made`
  made.reserve(images.size());
  std::vector<std::pair<int64_t, int64_t>> grids;
  for (size_t i = 0; i < images.size(); ++i) {
    const ImageInput& im = images[i];
    const Tensor& px = im.pixel_values;
    const std::string which = "image " + std::to_string(i) + ": ";
    if (im.height <= 0 || im.width <= 0 || im.height % u || im.width % u)
      return make_error(
          which + "size " + std::to_string(im.height) + "x" + std::to_string(im.width) +
          " must be positive multiples of patch_size * spatial_merge_size = " + std::to_string(u));
    const int64_t gh = im.height / p, gw = im.width / p;
    if (px.dtype == DType::F32 && px.rank() == 2 && px.dim(0) == gh * gw && px.dim(1) == cols) {
      patches.push_back(px);  // uploaded from where it is (a page is ~77 MB of f32 patches)
    } else if (px.dtype == DType::F32 && px.rank() == 3 && px.dim(0) == v.in_channels &&
               px.dim(1) >= im.height && px.dim(2) >= im.width) {
      made.push_back(patchify_host(px, im.height, im.width, p, v.temporal_patch_size, m));
      patches.push_back(made.back().view());
    } else {
      return make_error(which + "pixel_values must be F32 [" + std::to_string(gh * gw) + ", " +
                        std::to_string(cols) + "] patches or [" + std::to_string(v.in_channels) +
                        ", H, W] pixels, got " + std::string(dtype_name(px.dtype)) + " " +
                        shape_str(px.shape));
    }
    grids.emplace_back(gh, gw);
  }
  if (grids.empty()) return backend_.alloc(info_.dtype, {0, cfg_.text.hidden_size});
  if (v.out_hidden_size != cfg_.text.hidden_size)
    return make_error("vision out_hidden_size " + std::to_string(v.out_hidden_size) + " != text hidden_size");
  return vision_tower(patches, grids);
}

DeviceBuffer Qwen35Model::vision_tower(const std::vector<Tensor>& patches,
                                       const std::vector<std::pair<int64_t, int64_t>>& grids) {
  Backend& b = backend_;
  const VisionConfig& v = cfg_.vision;
  const VisionWeights& W = w_.vision;
  const DType act = info_.dtype;
  const int64_t hv = v.hidden_size, heads = v.num_heads, hd = v.head_dim, iv = v.intermediate_size;
  const int64_t m = v.spatial_merge_size, m2 = m * m, side = v.num_grid_per_side;
  const int64_t cols = patches[0].dim(1);
  int64_t n = 0;
  for (auto [gh, gw] : grids) n += gh * gw;
  const std::string pre = "model.visual";

  // Pixel rows [n_patches, C*T*p*p] f32, each image's uploaded straight from its own rows; host tables:
  // position taps/weights, rotary angles, attention ranges.
  DeviceBuffer dpx = b.alloc(DType::F32, {n, cols});
  Buffer idx(DType::I32, {n, 4}), wts(DType::F32, {n, 4});
  Buffer ang(DType::F32, {n, hd / 2});  // [n_patches, hd/2] = [row·f | col·f]
  std::vector<int32_t> ranges;
  const std::vector<float> inv = rope_inv_freq(hd / 2, v.rope_theta);  // hd/4 frequencies
  const int64_t nf = static_cast<int64_t>(inv.size());
  int64_t off = 0;
  for (size_t i = 0; i < grids.size(); ++i) {
    const auto [gh, gw] = grids[i];
    b.upload(dpx.tensor().slice_rows(off, off + gh * gw), patches[i].data);
    for (int64_t q = 0; q < gh * gw; ++q) {
      const int64_t row = off + q;
      const auto [r, c] = patch_rc(q, gw, m);
      int64_t ht[2], wt_[2];
      float hw[2], ww[2];
      axis_taps(r, gh, side, ht, hw);
      axis_taps(c, gw, side, wt_, ww);
      for (int a = 0; a < 2; ++a)
        for (int e = 0; e < 2; ++e) {
          idx.as<int32_t>()[row * 4 + a * 2 + e] = static_cast<int32_t>(ht[a] * side + wt_[e]);
          wts.as<float>()[row * 4 + a * 2 + e] = hw[a] * ww[e];
        }
      for (int64_t j = 0; j < nf; ++j) {
        ang.as<float>()[row * (hd / 2) + j] = static_cast<float>(r) * inv[static_cast<size_t>(j)];
        ang.as<float>()[row * (hd / 2) + nf + j] = static_cast<float>(c) * inv[static_cast<size_t>(j)];
      }
      ranges.push_back(static_cast<int32_t>(off));
      ranges.push_back(static_cast<int32_t>(off + gh * gw));
    }
    off += gh * gw;
  }

  // Patch embed: pixel_values.type(bf16), then Conv3d (= GEMM with bias).
  DeviceBuffer xin = b.alloc(act, {n, cols});
  b.cast(dpx, xin);
  DeviceBuffer x = b.alloc(act, {n, hv});  // [n_patches, hidden_v]
  b.linear(xin, W.patch_w, &W.patch_b.tensor(), x);
  capture(capture_, b, pre + ".patch_embed", x);
  DeviceBuffer pos = b.alloc(act, {n, hv});
  DeviceBuffer didx = upload_new(b, idx), dwts = upload_new(b, wts);
  b.embedding_bag(W.pos_embed, didx, dwts, pos);
  b.add(x, pos, x);
  capture(capture_, b, pre + ".blocks.0:input", x);

  DeviceBuffer dang = upload_new(b, ang);
  DeviceBuffer cos = b.alloc(DType::F32, {n, hd}), sin = b.alloc(DType::F32, {n, hd});
  b.rope_cos_sin(dang, cos, sin);
  capture(capture_, b, pre + ".rotary_pos_emb.cos", cos);
  capture(capture_, b, pre + ".rotary_pos_emb.sin", sin);
  DeviceBuffer dranges = b.alloc(DType::I32, {n, 2});
  b.upload(dranges, ranges.data());
  std::vector<int32_t> qrows(static_cast<size_t>(n)), krows(qrows.size()), vrows(qrows.size());
  for (int64_t t = 0; t < n; ++t) {
    qrows[static_cast<size_t>(t)] = static_cast<int32_t>(3 * t);
    krows[static_cast<size_t>(t)] = static_cast<int32_t>(3 * t + 1);
    vrows[static_cast<size_t>(t)] = static_cast<int32_t>(3 * t + 2);
  }
  DeviceBuffer dq = upload_i32(b, qrows), dk = upload_i32(b, krows), dv = upload_i32(b, vrows);
  const float scale = static_cast<float>(std::pow(static_cast<double>(hd), -0.5));

  DeviceBuffer xn = b.alloc(act, {n, hv}), qkv = b.alloc(act, {n, 3 * hv}), q = b.alloc(act, {n, hv}),
               k = b.alloc(act, {n, hv}), val = b.alloc(act, {n, hv}), attn = b.alloc(act, {n, hv}),
               o = b.alloc(act, {n, hv}), mid = b.alloc(act, {n, iv});
  const Shape hs{n, heads, hd};
  for (size_t l = 0; l < W.blocks.size(); ++l) {
    const VisionBlockWeights& B = W.blocks[l];
    b.layer_norm(x, B.norm1_w, B.norm1_b, kVisionEps, xn);
    b.linear(xn, B.qkv_w, &B.qkv_b.tensor(), qkv);
    const Tensor rows3 = qkv.tensor().reshaped({3 * n, hv});  // reshape(N, 3, heads, hd)
    b.gather_rows(rows3, dq, q);
    b.gather_rows(rows3, dk, k);
    b.gather_rows(rows3, dv, val);
    const Tensor qh = q.tensor().reshaped(hs), kh = k.tensor().reshaped(hs);
    b.rope_f32(qh, cos, sin, qh);
    b.rope_f32(kh, cos, sin, kh);
    b.attention(qh, kh, val.tensor().reshaped(hs), dranges, scale, attn.tensor().reshaped(hs));
    b.linear_add(attn, B.proj_w, &B.proj_b.tensor(), o, x);  // proj into the residual stream
    b.layer_norm(x, B.norm2_w, B.norm2_b, kVisionEps, xn);
    b.linear(xn, B.fc1_w, &B.fc1_b.tensor(), mid);
    b.act(mid, v.act, mid);
    b.linear_add(mid, B.fc2_w, &B.fc2_b.tensor(), o, x);
    capture(capture_, b, pre + ".blocks." + std::to_string(l), x);
  }

  // Merger: per-patch LayerNorm, then m² consecutive patches (one merge block) concatenated.
  b.layer_norm(x, W.merger_norm_w, W.merger_norm_b, kVisionEps, xn);
  const int64_t n_tok = n / m2;
  const Tensor merged = xn.tensor().reshaped({n_tok, m2 * hv});
  DeviceBuffer h1 = b.alloc(act, {n_tok, m2 * hv}), out = b.alloc(act, {n_tok, v.out_hidden_size});
  b.linear(merged, W.merger_fc1_w, &W.merger_fc1_b.tensor(), h1);
  b.act(h1, ActKind::kGelu, h1);  // the merger's nn.GELU()
  b.linear(h1, W.merger_fc2_w, &W.merger_fc2_b.tensor(), out);
  capture(capture_, b, pre + ".merger", out);
  return out;
}

}  // namespace tf::qwen3_5
