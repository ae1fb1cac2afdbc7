// Qwen3 decoder over the rows of one step (segments of several sequences, each with its KV cache), and the
// (tied) lm_head. HF: models/qwen3/modeling_qwen3.py (Qwen3Attention, Qwen3DecoderLayer, Qwen3Model,
// Qwen3RotaryEmbedding) and LightOnOcrModel.forward's masked_scatter; docs/lighton_ocr.md §6.
#include <algorithm>
#include <climits>
#include <cmath>

#include "models/layers/decoder.h"
#include "models/layers/rope.h"
#include "models/layers/util.h"
#include "models/lighton_ocr/model.h"

namespace tf::lighton_ocr {

Expected<Buffer> LightOnOcrModel::forward_step(std::span<const Segment> segs) {
  const TextConfig& t = cfg_.text;
  if (segs.empty()) return make_error("forward: empty step");
  // Rows of all segments, in segment order: row r of segment s is global row off[s] + r.
  std::vector<int32_t> token_ids, positions, image_rows, logit_rows;
  std::vector<int64_t> off;
  std::vector<KvCache*> caches;
  for (const Segment& sg : segs) {
    const ForwardBatch& batch = *sg.batch;
    auto* cache = dynamic_cast<KvCache*>(sg.cache);
    if (!cache || &cache->table.pool() != pool_.get())
      return make_error("forward: the cache was not made by this model");
    for (const KvCache* c : caches)
      if (c == cache) return make_error("forward: a step holds each sequence once");
    const int64_t n = static_cast<int64_t>(batch.token_ids.size()),
                  o = static_cast<int64_t>(token_ids.size());
    if (n == 0) return make_error("forward: empty batch");
    if (batch.positions.size() != batch.token_ids.size())
      return make_error("forward: " + std::to_string(batch.positions.size()) + " positions for " +
                        std::to_string(n) + " tokens");
    size_t n_img = 0;
    for (int64_t i = 0; i < n; ++i) {
      const int32_t id = batch.token_ids[static_cast<size_t>(i)],
                    pos = batch.positions[static_cast<size_t>(i)];
      if (id < 0 || id >= t.vocab_size)
        return make_error("forward: token id " + std::to_string(id) + " is outside the vocabulary");
      if (pos < 0 || pos >= cache->capacity())
        return make_error("forward: position " + std::to_string(pos) + " is outside the cache (capacity " +
                          std::to_string(cache->capacity()) + ")");
      if (id == cfg_.image_token_id) {
        image_rows.push_back(static_cast<int32_t>(o + i));
        ++n_img;
      }
    }
    TF_TRY(check_images_and_logit_rows(batch, n_img, n, t.hidden_size, info_.dtype));
    off.push_back(o);
    caches.push_back(cache);
    token_ids.insert(token_ids.end(), batch.token_ids.begin(), batch.token_ids.end());
    positions.insert(positions.end(), batch.positions.begin(), batch.positions.end());
    for (int32_t r : batch.logit_rows) logit_rows.push_back(static_cast<int32_t>(o + r));
  }
  off.push_back(static_cast<int64_t>(token_ids.size()));
  const int64_t n = off.back();

  // Pool blocks for every position a segment writes (a block shared with the prompt cache is
  // copied before it is written). Taking blocks is the only change before the compute starts.
  std::vector<int32_t> slots_h(static_cast<size_t>(n));
  std::vector<int32_t> seg_rows(off.begin(), off.end());  // [n_seg + 1] row offsets
  size_t max_blocks = 1;
  for (size_t s = 0; s < segs.size(); ++s) {
    BlockTable& tab = caches[s]->table;
    int32_t lo = INT32_MAX, hi = 0;
    for (int64_t i = off[s]; i < off[s + 1]; ++i) {
      lo = std::min(lo, positions[static_cast<size_t>(i)]);
      hi = std::max(hi, positions[static_cast<size_t>(i)] + 1);
    }
    if (!tab.grow(hi))
      return make_error("forward: the K/V pool is full (" + std::to_string(tab.pool().n_blocks()) +
                        " blocks)");
    for (int64_t blk = lo / kKvBlock; blk * kKvBlock < hi; ++blk)
      if (!tab.make_private(static_cast<size_t>(blk), backend_))
        return make_error("forward: the K/V pool is full (" + std::to_string(tab.pool().n_blocks()) +
                          " blocks)");
    for (int64_t i = off[s]; i < off[s + 1]; ++i) {
      slots_h[static_cast<size_t>(i)] = tab.slot(positions[static_cast<size_t>(i)]);
    }
    max_blocks = std::max(max_blocks, tab.blocks().size());
  }
  // tables[n_seg, max_blocks]: each segment's blocks (unused entries 0).
  std::vector<int32_t> tables_h(segs.size() * max_blocks, 0);
  for (size_t s = 0; s < segs.size(); ++s)
    std::copy(caches[s]->table.blocks().begin(), caches[s]->table.blocks().end(),
              tables_h.begin() + s * max_blocks);

  Backend& b = backend_;
  const DType act = info_.dtype;
  const int64_t hs = t.hidden_size, hd = t.head_dim, nh = t.num_attention_heads, nkv = t.num_key_value_heads;
  const int64_t qd = nh * hd, kvd = nkv * hd, it = t.intermediate_size;
  const float eps = static_cast<float>(t.rms_norm_eps);
  const std::string pre = "model.language_model";

  DeviceBuffer ids = upload_i32(b, token_ids);
  DeviceBuffer h = b.alloc(act, {n, hs});  // [n_rows, hidden], the bf16 residual stream
  b.embedding(ids, w_.embed_tokens, h);
  capture(capture_, b, pre + ".embed_tokens", h);
  // inputs_embeds.masked_scatter(image mask, features), per segment
  for (size_t s = 0, k = 0; s < segs.size(); ++s) {
    const Tensor* emb = segs[s].batch->image_embeds;
    if (!emb || emb->dim(0) == 0) continue;
    const std::vector<int32_t> rows(image_rows.begin() + static_cast<int64_t>(k),
                                    image_rows.begin() + static_cast<int64_t>(k) + emb->dim(0));
    b.scatter_rows(*emb, upload_i32(b, rows), h);
    k += static_cast<size_t>(emb->dim(0));
  }
  capture(capture_, b, pre + ".layers.0:input", h);

  const std::vector<float> inv_freq = rope_inv_freq(hd, t.rope_theta);
  DeviceBuffer angles = upload_new(b, rope_angles_1d(positions, inv_freq));  // [n_rows, hd/2]
  DeviceBuffer cos = b.alloc(act, {n, hd}), sin = b.alloc(act, {n, hd});
  b.rope_cos_sin(angles, cos, sin);
  capture(capture_, b, pre + ".rotary_emb.cos", cos);
  capture(capture_, b, pre + ".rotary_emb.sin", sin);
  std::vector<int32_t> ranges(static_cast<size_t>(2 * n));  // causal over each sequence's own cache
  for (int64_t i = 0; i < n; ++i)
    ranges[static_cast<size_t>(2 * i + 1)] = positions[static_cast<size_t>(i)] + 1;
  DeviceBuffer dranges = b.alloc(DType::I32, {n, 2});
  b.upload(dranges, ranges.data());
  DeviceBuffer slots = upload_i32(b, slots_h), dseg = upload_i32(b, seg_rows);
  DeviceBuffer tables =
      b.alloc(DType::I32, {static_cast<int64_t>(segs.size()), static_cast<int64_t>(max_blocks)});
  b.upload(tables, tables_h.data());
  KvPool& pool = caches[0]->table.pool();
  const float scale = static_cast<float>(std::pow(static_cast<double>(hd), -0.5));

  DeviceBuffer xn = b.alloc(act, {n, hs}), q = b.alloc(act, {n, qd}), k = b.alloc(act, {n, kvd}),
               v = b.alloc(act, {n, kvd}), attn = b.alloc(act, {n, qd}), o = b.alloc(act, {n, hs});
  DeviceBuffer gate = b.alloc(act, {n, it}), up = b.alloc(act, {n, it});
  auto bias = [](const DeviceBuffer& d) { return d.empty() ? nullptr : &d.tensor(); };
  for (size_t l = 0; l < w_.text_layers.size(); ++l) {
    const TextLayerWeights& L = w_.text_layers[l];
    const std::string name = pre + ".layers." + std::to_string(l);
    b.rms_norm(h, L.input_layernorm, eps, RmsNormKind::kWeight, xn);
    b.linear(xn, L.q_proj, bias(L.q_bias), q);
    b.linear(xn, L.k_proj, bias(L.k_bias), k);
    b.linear(xn, L.v_proj, bias(L.v_bias), v);
    // q/k RMSNorm over head_dim, per head, before RoPE.
    const Tensor qflat = q.tensor().reshaped({n * nh, hd}), kflat = k.tensor().reshaped({n * nkv, hd});
    b.rms_norm(qflat, L.q_norm, eps, RmsNormKind::kWeight, qflat);
    b.rms_norm(kflat, L.k_norm, eps, RmsNormKind::kWeight, kflat);
    const Tensor qh = q.tensor().reshaped({n, nh, hd}), kh = k.tensor().reshaped({n, nkv, hd});
    b.rope(qh, cos, sin, qh);
    b.rope(kh, cos, sin, kh);
    b.scatter_rows(kh, slots, pool.k(l));
    b.scatter_rows(v.tensor().reshaped({n, nkv, hd}), slots, pool.v(l));
    b.paged_attention(qh, pool.k(l), pool.v(l), tables, dseg, dranges, scale,
                      attn.tensor().reshaped({n, nh, hd}));
    b.linear(attn, L.o_proj, bias(L.o_bias), o);
    capture(capture_, b, name + ".self_attn", o);
    b.add(h, o, h);
    b.rms_norm(h, L.post_attention_layernorm, eps, RmsNormKind::kWeight, xn);
    gated_mlp(b, xn, L.gate_proj, L.up_proj, L.down_proj, ActKind::kSilu, gate, up, o);
    capture(capture_, b, name + ".mlp", o);
    b.add(h, o, h);
    capture(capture_, b, name, h);
  }
  b.rms_norm(h, w_.norm, eps, RmsNormKind::kWeight, xn);
  capture(capture_, b, pre + ".norm", xn);

  return lm_head_logits(b, xn, logit_rows, w_.lm_head_weight(), capture_);
}

}  // namespace tf::lighton_ocr
