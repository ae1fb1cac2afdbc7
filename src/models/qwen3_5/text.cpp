// Qwen3.5 hybrid decoder over one sequence's rows (Qwen3_5TextModel / Qwen3_5DecoderLayer):
// (1+w) RMSNorm pre-norms, Gated DeltaNet or gated full attention, SwiGLU MLP, final norm and
// lm_head. Text M-RoPE: cos/sin from per-row (T, H, W) positions with HF's interleaved slots.
#include <cmath>
#include <cstring>

#include "models/layers/decoder.h"
#include "models/layers/rope.h"
#include "models/layers/util.h"
#include "models/qwen3_5/model.h"

namespace tf::qwen3_5 {

void Qwen35Model::full_attention(const FullAttnWeights& A, const Tensor& x, const Tensor& cos,
                                 const Tensor& sin, const Tensor& slots, const Tensor& ranges,
                                 const Tensor& k_cache, const Tensor& v_cache, const Tensor& out) {
  Backend& b = backend_;
  const TextConfig& t = cfg_.text;
  const DType act = info_.dtype;
  const int64_t n = x.dim(0), nh = t.num_attention_heads, nkv = t.num_key_value_heads, D = t.head_dim;
  const int64_t qd = nh * D, kvd = nkv * D;
  const float eps = static_cast<float>(t.rms_norm_eps);

  DeviceBuffer qg = b.alloc(act, {n, 2 * qd});  // per head [query (D) | gate (D)]
  b.linear(x, A.q_proj, nullptr, qg);
  std::vector<int32_t> rq(static_cast<size_t>(n * nh)), rg(rq.size());
  for (int64_t i = 0; i < n * nh; ++i) {
    rq[static_cast<size_t>(i)] = static_cast<int32_t>(2 * i);
    rg[static_cast<size_t>(i)] = static_cast<int32_t>(2 * i + 1);
  }
  DeviceBuffer q = b.alloc(act, {n, qd}), gate = b.alloc(act, {n, qd}), k = b.alloc(act, {n, kvd}),
               v = b.alloc(act, {n, kvd}), attn = b.alloc(act, {n, qd});
  const Tensor halves = qg.tensor().reshaped({2 * n * nh, D});
  b.gather_rows(halves, upload_i32(b, rq), q.tensor().reshaped({n * nh, D}));
  b.gather_rows(halves, upload_i32(b, rg), gate.tensor().reshaped({n * nh, D}));
  b.linear(x, A.k_proj, nullptr, k);
  b.linear(x, A.v_proj, nullptr, v);
  const Tensor qf = q.tensor().reshaped({n * nh, D}), kf = k.tensor().reshaped({n * nkv, D});
  b.rms_norm(qf, A.q_norm, eps, RmsNormKind::kOnePlusWeight, qf);
  b.rms_norm(kf, A.k_norm, eps, RmsNormKind::kOnePlusWeight, kf);
  const Tensor qh = q.tensor().reshaped({n, nh, D}), kh = k.tensor().reshaped({n, nkv, D});
  b.rope(qh, cos, sin, qh);  // first rotary_dim dims only (partial rotary)
  b.rope(kh, cos, sin, kh);
  b.scatter_rows(kh, slots, k_cache);
  b.scatter_rows(v.tensor().reshaped({n, nkv, D}), slots, v_cache);
  b.attention(qh, k_cache, v_cache, ranges, static_cast<float>(std::pow(static_cast<double>(D), -0.5)),
              attn.tensor().reshaped({n, nh, D}));
  b.sigmoid_mul(attn, gate, attn);
  b.linear(attn, A.o_proj, nullptr, out);
}

void Qwen35Model::mrope_cos_sin(const Qwen35Cache& cache, int64_t pos0, int64_t n, DeviceBuffer& cos,
                                DeviceBuffer& sin) {
  // M-RoPE angles: slot i takes the H axis when i % 3 == 1 and i < 3*sec[1], W when i % 3 == 2 and
  // i < 3*sec[2], else T (apply_interleaved_mrope); emb = cat(freqs, freqs) in rope_cos_sin.
  const TextConfig& t = cfg_.text;
  const int64_t rd = t.rotary_dim;
  const std::vector<float> inv = rope_inv_freq(rd, t.rope_theta);
  const RopeIndex& plan = cache.rope();
  const int64_t plan_len = static_cast<int64_t>(plan.thw.size() / 3);
  Buffer ang(DType::F32, {n, rd / 2});  // [n_rows, rotary_dim / 2]
  for (int64_t i = 0; i < n; ++i) {
    const int64_t p = pos0 + i;
    int64_t thw[3];
    for (int a = 0; a < 3; ++a)
      thw[a] = p < plan_len ? plan.thw[static_cast<size_t>(3 * p + a)] : p + (plan_len ? plan.rope_delta : 0);
    for (int64_t s = 0; s < rd / 2; ++s) {
      int axis = 0;
      if (s % 3 == 1 && s < 3 * t.mrope_section[1]) axis = 1;
      if (s % 3 == 2 && s < 3 * t.mrope_section[2]) axis = 2;
      ang.as<float>()[i * (rd / 2) + s] = static_cast<float>(thw[axis]) * inv[static_cast<size_t>(s)];
    }
  }
  Backend& b = backend_;
  DeviceBuffer dang = upload_new(b, ang);
  cos = b.alloc(info_.dtype, {n, rd});
  sin = b.alloc(info_.dtype, {n, rd});
  b.rope_cos_sin(dang, cos, sin);
}

// TODO(issue 15): one pass over all segments' rows; for now each segment runs alone.
Expected<Buffer> Qwen35Model::forward_step(std::span<const Segment> segs) {
  if (segs.empty()) return make_error("forward: empty step");
  std::vector<Buffer> parts;
  int64_t rows = 0;
  for (const Segment& sg : segs) {
    TF_ASSIGN(Buffer lg, forward_one(*sg.batch, *sg.cache));
    rows += lg.view().dim(0);
    parts.push_back(std::move(lg));
  }
  if (parts.size() == 1) return std::move(parts[0]);
  Buffer out(DType::F32, {rows, info_.vocab_size});
  size_t at = 0;
  for (const Buffer& p : parts) {
    std::memcpy(static_cast<char*>(out.data()) + at, p.data(), p.view().nbytes());
    at += p.view().nbytes();
  }
  return out;
}

Expected<Buffer> Qwen35Model::forward_one(const ForwardBatch& batch, SequenceCache& seq_cache) {
  auto* cache = dynamic_cast<Qwen35Cache*>(&seq_cache);
  if (!cache) return make_error("forward: the cache was not made by this model");
  const TextConfig& t = cfg_.text;
  const int64_t n = static_cast<int64_t>(batch.token_ids.size());
  if (n == 0) return make_error("forward: empty batch");
  if (batch.positions.size() != batch.token_ids.size())
    return make_error("forward: " + std::to_string(batch.positions.size()) + " positions for " +
                      std::to_string(n) + " tokens");
  const int64_t pos0 = cache->n_past();
  if (pos0 + n > cache->capacity())
    return make_error("forward: positions up to " + std::to_string(pos0 + n - 1) +
                      " exceed the cache capacity " + std::to_string(cache->capacity()));
  std::vector<int32_t> image_rows;
  for (int64_t i = 0; i < n; ++i) {
    const int32_t id = batch.token_ids[static_cast<size_t>(i)], pos = batch.positions[static_cast<size_t>(i)];
    if (id < 0 || id >= t.vocab_size)
      return make_error("forward: token id " + std::to_string(id) + " is outside the vocabulary");
    if (pos != pos0 + i)
      return make_error("forward: row " + std::to_string(i) + " has position " + std::to_string(pos) +
                        "; Qwen3.5's recurrent state needs rows in order from position " +
                        std::to_string(pos0));
    if (cfg_.has_vision && id == cfg_.image_token_id) image_rows.push_back(static_cast<int32_t>(i));
  }
  TF_TRY(check_images_and_logit_rows(batch, image_rows.size(), n, t.hidden_size, info_.dtype));
  const int64_t n_img = static_cast<int64_t>(image_rows.size());
  if (batch.decode_rows && (pos0 == 0 || n_img > 0))
    return make_error("forward: decode rows continue a non-empty cache and hold no image tokens");

  Backend& b = backend_;
  if (batch.decode_rows) {
    keep_rows_capacity(*cache, n);
  } else {
    cache->kept.n = 0;  // rollback() only returns into the last decode_rows forward
  }
  prepare_block_states(*cache, pos0, n, batch.keep_block_states && !batch.decode_rows);
  const DType act = info_.dtype;
  const int64_t hs = t.hidden_size, it = t.intermediate_size;
  const float eps = static_cast<float>(t.rms_norm_eps);
  const std::string pre = "model.language_model";

  DeviceBuffer ids = upload_i32(b, batch.token_ids);
  DeviceBuffer h = b.alloc(act, {n, hs});  // [n_rows, hidden], the residual stream
  b.embedding(ids, w_.embed_tokens, h);
  if (n_img) b.scatter_rows(*batch.image_embeds, upload_i32(b, image_rows), h);  // masked_scatter
  capture(capture_, b, pre + ".layers.0:input", h);

  DeviceBuffer cos, sin;  // [n_rows, rotary_dim]
  mrope_cos_sin(*cache, pos0, n, cos, sin);
  capture(capture_, b, pre + ".rotary_emb.cos", cos);
  capture(capture_, b, pre + ".rotary_emb.sin", sin);
  std::vector<int32_t> ranges(static_cast<size_t>(2 * n));
  for (int64_t i = 0; i < n; ++i) ranges[static_cast<size_t>(2 * i + 1)] = static_cast<int32_t>(pos0 + i + 1);
  DeviceBuffer dranges = b.alloc(DType::I32, {n, 2});
  b.upload(dranges, ranges.data());
  DeviceBuffer slots = upload_i32(b, batch.positions);

  DeviceBuffer xn = b.alloc(act, {n, hs}), o = b.alloc(act, {n, hs});
  DeviceBuffer gate = b.alloc(act, {n, it}), up = b.alloc(act, {n, it});
  for (size_t l = 0; l < w_.layers.size(); ++l) {
    const LayerWeights& L = w_.layers[l];
    const std::string name = pre + ".layers." + std::to_string(l);
    b.rms_norm(h, L.input_layernorm, eps, RmsNormKind::kOnePlusWeight, xn);
    if (L.full_attention) {
      full_attention(L.attn, xn, cos, sin, slots, dranges, cache->k[l], cache->v[l], o);
      capture(capture_, b, name + ".self_attn", o);
    } else {
      gated_deltanet(l, xn, *cache, pos0, batch.decode_rows, o);
      capture(capture_, b, name + ".linear_attn", o);
    }
    b.add(h, o, h);
    b.rms_norm(h, L.post_attention_layernorm, eps, RmsNormKind::kOnePlusWeight, xn);
    gated_mlp(b, xn, L.mlp.gate_proj, L.mlp.up_proj, L.mlp.down_proj, ActKind::kSilu, gate, up, o);
    capture(capture_, b, name + ".mlp", o);
    b.add(h, o, h);
    capture(capture_, b, name, h);
  }
  cache->n_past_ = pos0 + n;
  b.rms_norm(h, w_.norm, eps, RmsNormKind::kOnePlusWeight, xn);
  capture(capture_, b, pre + ".norm", xn);
  if (batch.decode_rows) {
    cache->kept.pos0 = pos0;
    cache->kept.n = n;
    if (cache->mtp.on) b.copy(xn, cache->kept.hidden.tensor().slice_rows(0, n));
  }
  if (cache->mtp.on) mtp_follow(*cache, batch, pos0, xn);

  return lm_head_logits(b, xn, batch.logit_rows, w_.lm_head_weight(), capture_);
}

}  // namespace tf::qwen3_5
