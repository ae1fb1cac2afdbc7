// Qwen3 decoder over the rows of one step (segments of several sequences, each with its KV cache), and the
// (tied) lm_head. HF: models/qwen3/modeling_qwen3.py (Qwen3Attention, Qwen3DecoderLayer, Qwen3Model,
// Qwen3RotaryEmbedding) and LightOnOcrModel.forward's masked_scatter; docs/lighton_ocr.md §6.
#include <algorithm>
#include <climits>
#include <cmath>

#include "models/layers/decoder.h"
#include "models/layers/rope.h"
#include "models/layers/step_rows.h"
#include "models/layers/util.h"
#include "models/lighton_ocr/model.h"

namespace tf::lighton_ocr {

Expected<Buffer> LightOnOcrModel::forward_step(std::span<const Segment> segs, StepOutput out) {
  const TextConfig& t = cfg_.text;
  std::vector<KvCache*> caches;
  for (const Segment& sg : segs) {
    caches.push_back(dynamic_cast<KvCache*>(sg.cache));
    if (!caches.back() || &caches.back()->table.pool() != pool_.get())
      return make_error("forward: the cache was not made by this model");
  }
  // Rows of all segments, in segment order: row r of segment s is step row rows.begin(s) + r.
  TF_ASSIGN(const StepRows rows,
            collect_step_rows(segs, {t.vocab_size, cfg_.image_token_id, t.hidden_size, info_.dtype}));
  const int64_t n = rows.n_rows();

  // Pool blocks for every position a segment writes: the only change before the compute starts.
  std::vector<BlockTable*> tabs;
  for (KvCache* c : caches) tabs.push_back(&c->table);
  TF_ASSIGN(const PagedStep paged, page_step(tabs, rows, backend_));

  Backend& b = backend_;
  const DType act = info_.dtype;
  const int64_t hs = t.hidden_size, hd = t.head_dim, nh = t.num_attention_heads, nkv = t.num_key_value_heads;
  const int64_t qd = nh * hd, kvd = nkv * hd, it = t.intermediate_size;
  const float eps = static_cast<float>(t.rms_norm_eps);
  const std::string pre = "model.language_model";

  DeviceBuffer ids = upload_i32(b, rows.token_ids);
  DeviceBuffer h = b.alloc(act, {n, hs});  // [n_rows, hidden], the bf16 residual stream
  b.embedding(ids, w_.embed_tokens, h);
  capture(capture_, b, pre + ".embed_tokens", h);
  rows.scatter_images(b, segs, h);
  capture(capture_, b, pre + ".layers.0:input", h);

  const std::vector<float> inv_freq = rope_inv_freq(hd, t.rope_theta);
  DeviceBuffer angles = upload_new(b, rope_angles_1d(rows.positions, inv_freq));  // [n_rows, hd/2]
  DeviceBuffer cos = b.alloc(act, {n, hd}), sin = b.alloc(act, {n, hd});
  b.rope_cos_sin(angles, cos, sin);
  capture(capture_, b, pre + ".rotary_emb.cos", cos);
  capture(capture_, b, pre + ".rotary_emb.sin", sin);
  DeviceBuffer dranges = b.alloc(DType::I32, {n, 2});  // causal over each sequence's own cache
  b.upload(dranges, rows.causal_ranges().data());
  DeviceBuffer slots = upload_i32(b, paged.slots), dseg = upload_i32(b, paged.seg_rows);
  DeviceBuffer tables = b.alloc(DType::I32, {static_cast<int64_t>(segs.size()), paged.max_blocks});
  b.upload(tables, paged.tables.data());
  KvPool& pool = caches[0]->table.pool();
  const float scale = static_cast<float>(std::pow(static_cast<double>(hd), -0.5));

  // Per layer: add_rms_norm (the previous layer's residual add + this norm), the fused q/k/v linear,
  // qkv_prep (q/k norms, RoPE, K/V into the pool), attention, o_proj, add_rms_norm, the fused gate/up
  // linear, glu, down_proj. The residual add of the last layer meets the final norm.
  DeviceBuffer xn = b.alloc(act, {n, hs}), qkv = b.alloc(act, {n, qd + 2 * kvd}),
               q = b.alloc(act, {n, nh, hd}), attn = b.alloc(act, {n, qd}), o = b.alloc(act, {n, hs});
  DeviceBuffer gu = b.alloc(act, {n, 2 * it}), mid = b.alloc(act, {n, it});
  auto bias = [](const DeviceBuffer& d) { return d.empty() ? nullptr : &d.tensor(); };
  const size_t n_layers = w_.text_layers.size();
  for (size_t l = 0; l < n_layers; ++l) {
    const TextLayerWeights& L = w_.text_layers[l];
    const std::string name = capture_ ? pre + ".layers." + std::to_string(l) : std::string();
    if (l == 0) b.rms_norm(h, L.input_layernorm, eps, RmsNormKind::kWeight, xn);
    b.linear(xn, L.qkv_proj, bias(L.qkv_bias), qkv);
    const Tensor slots_t = slots.tensor();
    b.qkv_prep(qkv, &L.q_norm.tensor(), &L.k_norm.tensor(), eps, cos, sin, &slots_t, q, pool.k(l), pool.v(l));
    b.paged_attention(q, pool.k(l), pool.v(l), tables, dseg, dranges, scale,
                      attn.tensor().reshaped({n, nh, hd}));
    b.linear(attn, L.o_proj, bias(L.o_bias), o);
    capture(capture_, b, name + ".self_attn", o);
    b.add_rms_norm(h, o, L.post_attention_layernorm, eps, RmsNormKind::kWeight, xn);
    b.linear(xn, L.gate_up_proj, nullptr, gu);
    b.glu(gu, ActKind::kSilu, mid);
    b.linear(mid, L.down_proj, nullptr, o);
    capture(capture_, b, name + ".mlp", o);
    const Tensor& next_norm =
        l + 1 < n_layers ? w_.text_layers[l + 1].input_layernorm.tensor() : w_.norm.tensor();
    b.add_rms_norm(h, o, next_norm, eps, RmsNormKind::kWeight, xn);
    capture(capture_, b, name, h);
  }
  capture(capture_, b, pre + ".norm", xn);

  return lm_head_logits(b, xn, rows.logit_rows, w_.lm_head_weight(), capture_, out);
}

}  // namespace tf::lighton_ocr
