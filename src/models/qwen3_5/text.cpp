// Qwen3.5 hybrid decoder over the rows of one step (segments of several sequences, each with its
// cache; Qwen3_5TextModel / Qwen3_5DecoderLayer): (1+w) RMSNorm pre-norms, Gated DeltaNet or gated
// full attention, SwiGLU MLP, final norm and lm_head. Every linear and norm runs once over all rows,
// and so does attention (paged_attention over the K/V pool, each segment through its block table),
// and the conv and delta rule (over the state pool's slots, gdn.cpp). Text M-RoPE: cos/sin from
// per-row (T, H, W) positions with HF's interleaved slots.
#include <algorithm>
#include <cmath>

#include "models/layers/decoder.h"
#include "models/layers/rope.h"
#include "models/layers/step_rows.h"
#include "models/layers/util.h"
#include "models/qwen3_5/model.h"

namespace tf::qwen3_5 {

void Qwen35Model::mixer_in(const MixerIo& io, std::span<const Tensor> w, std::span<const Tensor> out) {
  if (io.norm)
    Chains{backend_, !capture_}.rms_norm_linear(io.x, *io.norm, static_cast<float>(cfg_.text.rms_norm_eps),
                                                RmsNormKind::kOnePlusWeight, *io.xn, w, out);
  else
    backend_.linear_many(io.x, w, out);  // one launch on CUDA for a decode step's rows
}

void Qwen35Model::mixer_out(const MixerIo& io, const Tensor& a, const Tensor& w) {
  if (io.residual)
    Chains{backend_, !capture_}.linear_add(a, w, nullptr, io.out, *io.residual);
  else
    backend_.linear(a, w, nullptr, io.out);
}

void Qwen35Model::full_attention(const FullAttnWeights& A, const MixerIo& io, const Tensor& cos,
                                 const Tensor& sin, const Tensor& slots, const Tensor& ranges,
                                 const PagedKv* paged, std::span<const AttnKv> kv, const QGateRows& split,
                                 const MixerScratch& m) {
  Backend& b = backend_;
  const TextConfig& t = cfg_.text;
  const int64_t n = io.x.dim(0), nh = t.num_attention_heads, nkv = t.num_key_value_heads, D = t.head_dim;
  const int64_t qd = nh * D, kvd = nkv * D;
  const float eps = static_cast<float>(t.rms_norm_eps);

  const Tensor &qg = m.qg.tensor(), &q = m.q.tensor(), &gate = m.gate.tensor(), &k = m.k.tensor(),
               &v = m.v.tensor(), &attn = m.attn.tensor();
  TF_CHECK(qg.dim(0) == n && qg.dim(1) == 2 * qd && k.dim(1) == kvd);
  const Tensor in_w[] = {A.q_proj, A.k_proj, A.v_proj}, in_out[] = {qg, k, v};
  mixer_in(io, in_w, in_out);
  const Tensor halves = qg.reshaped({2 * n * nh, D});
  b.gather_rows(halves, split.q, q.reshaped({n * nh, D}));
  b.gather_rows(halves, split.gate, gate.reshaped({n * nh, D}));
  const Tensor qf = q.reshaped({n * nh, D}), kf = k.reshaped({n * nkv, D});
  b.rms_norm(qf, A.q_norm, eps, RmsNormKind::kOnePlusWeight, qf);
  b.rms_norm(kf, A.k_norm, eps, RmsNormKind::kOnePlusWeight, kf);
  const Tensor qh = q.reshaped({n, nh, D}), kh = k.reshaped({n, nkv, D});
  b.rope(qh, cos, sin, qh);  // first rotary_dim dims only (partial rotary)
  b.rope(kh, cos, sin, kh);
  const Tensor vh = v.reshaped({n, nkv, D}), ah = attn.reshaped({n, nh, D});
  const float scale = static_cast<float>(std::pow(static_cast<double>(D), -0.5));
  if (paged) {  // every segment at once, each against its own blocks
    b.scatter_rows(kh, slots, *paged->k);
    b.scatter_rows(vh, slots, *paged->v);
    paged_attention_cut(b, qh, *paged->k, *paged->v, *paged->tables, *paged->seg_rows, paged->cut, ranges,
                        scale, ah);
  }
  for (const AttnKv& s : kv) {  // each segment against its own contiguous K/V
    const Tensor sl = slots.slice_rows(s.r0, s.r1);
    b.scatter_rows(kh.slice_rows(s.r0, s.r1), sl, *s.k);
    b.scatter_rows(vh.slice_rows(s.r0, s.r1), sl, *s.v);
    b.attention(qh.slice_rows(s.r0, s.r1), *s.k, *s.v, ranges.slice_rows(s.r0, s.r1), scale,
                ah.slice_rows(s.r0, s.r1));
  }
  b.sigmoid_mul(attn, gate, attn);
  mixer_out(io, attn, A.o_proj);
}

MixerScratch Qwen35Model::mixer_scratch(int64_t n, bool attn, bool gdn, int64_t n_keep) {
  Backend& b = backend_;
  const TextConfig& t = cfg_.text;
  const DType act = info_.dtype;
  MixerScratch m;
  if (attn) {
    const int64_t qd = t.num_attention_heads * t.head_dim, kvd = t.num_key_value_heads * t.head_dim;
    m.qg = b.alloc(act, {n, 2 * qd});
    m.q = b.alloc(act, {n, qd});
    m.gate = b.alloc(act, {n, qd});
    m.k = b.alloc(act, {n, kvd});
    m.v = b.alloc(act, {n, kvd});
    m.attn = b.alloc(act, {n, qd});
  }
  if (gdn) {
    const int64_t hk = t.linear_num_key_heads, hv = t.linear_num_value_heads;
    const int64_t dk = t.linear_key_head_dim, dv = t.linear_value_head_dim;
    const int64_t conv_dim = 2 * hk * dk + hv * dv;
    m.qkv = b.alloc(act, {n, conv_dim});
    m.z = b.alloc(act, {n, hv * dv});
    m.bb = b.alloc(act, {n, hv});
    m.aa = b.alloc(act, {n, hv});
    m.lq = b.alloc(act, {n, hk, dk});
    m.lk = b.alloc(act, {n, hk, dk});
    m.lv = b.alloc(act, {n, hv, dv});
    m.g = b.alloc(DType::F32, {n, hv});
    m.beta = b.alloc(act, {n, hv});
    m.core = b.alloc(act, {n, hv, dv});
    m.normed = b.alloc(act, {n, hv * dv});
    if (n_keep > 0) {
      m.keep_conv = b.alloc(act, {n_keep, conv_dim, t.linear_conv_kernel_dim - 1});
      m.keep_state = b.alloc(DType::F32, {n_keep, hv, dk, dv});
    }
  }
  return m;
}

QGateRows Qwen35Model::q_gate_rows(int64_t n) {
  const int64_t nh = cfg_.text.num_attention_heads;
  std::vector<int32_t> rq(static_cast<size_t>(n * nh)), rg(rq.size());
  for (int64_t i = 0; i < n * nh; ++i) {
    rq[static_cast<size_t>(i)] = static_cast<int32_t>(2 * i);
    rg[static_cast<size_t>(i)] = static_cast<int32_t>(2 * i + 1);
  }
  return {upload_i32(backend_, rq), upload_i32(backend_, rg)};
}

Buffer Qwen35Model::mrope_angles(std::span<const SegRows> segs) const {
  // M-RoPE angles: slot i takes the H axis when i % 3 == 1 and i < 3*sec[1], W when i % 3 == 2 and
  // i < 3*sec[2], else T (apply_interleaved_mrope); emb = cat(freqs, freqs) in rope_cos_sin.
  const TextConfig& t = cfg_.text;
  const int64_t rd = t.rotary_dim, half = rd / 2;
  const std::vector<float> inv = rope_inv_freq(rd, t.rope_theta);
  int64_t n = 0;
  for (const SegRows& s : segs) n += s.n();
  Buffer ang(DType::F32, {n, half});  // [n_rows, rotary_dim / 2]
  int64_t row = 0;
  for (const SegRows& s : segs) {
    const RopeIndex& plan = s.cache->rope();
    const int64_t plan_len = static_cast<int64_t>(plan.thw.size() / 3);
    for (int64_t i = 0; i < s.n(); ++i, ++row) {
      const int64_t p = s.pos0 + i;
      int64_t thw[3];
      for (int a = 0; a < 3; ++a)
        thw[a] =
            p < plan_len ? plan.thw[static_cast<size_t>(3 * p + a)] : p + (plan_len ? plan.rope_delta : 0);
      for (int64_t k = 0; k < half; ++k) {
        int axis = 0;
        if (k % 3 == 1 && k < 3 * t.mrope_section[1]) axis = 1;
        if (k % 3 == 2 && k < 3 * t.mrope_section[2]) axis = 2;
        ang.as<float>()[row * half + k] = static_cast<float>(thw[axis]) * inv[static_cast<size_t>(k)];
      }
    }
  }
  return ang;
}

void Qwen35Model::mrope_cos_sin(std::span<const SegRows> segs, DeviceBuffer& cos, DeviceBuffer& sin) {
  Backend& b = backend_;
  DeviceBuffer dang = upload_new(b, mrope_angles(segs));
  const int64_t n = dang.tensor().dim(0), rd = cfg_.text.rotary_dim;
  cos = b.alloc(info_.dtype, {n, rd});
  sin = b.alloc(info_.dtype, {n, rd});
  b.rope_cos_sin(dang, cos, sin);
}

void Qwen35Model::text_layers(std::span<const SegRows> parts, const TextStep& in, const Tensor& h) {
  Backend& b = backend_;
  const TextConfig& t = cfg_.text;
  const float eps = static_cast<float>(t.rms_norm_eps);
  const std::string pre = "model.language_model";
  // Each mixer's input norm meets its input projections (rms_norm_linear), its output projection adds into h
  // (linear_add); the MLP's norm, gate/up linear and glu are one op (rms_norm_linear_glu), its down_proj adds
  // into h; Chains runs them op by op while capturing.
  const Chains c{b, !capture_};
  const size_t n_layers = w_.layers.size();
  for (size_t l = 0; l < n_layers; ++l) {
    const LayerWeights& L = w_.layers[l];
    const std::string name = capture_ ? pre + ".layers." + std::to_string(l) : std::string();
    const MixerIo io{h, in.o, &L.input_layernorm.tensor(), &in.xn, &h};
    if (L.full_attention) {
      const size_t pl = static_cast<size_t>(parts[0].cache->kv_layer[l]);
      const PagedKv paged{.k = &pool_->k(pl),
                          .v = &pool_->v(pl),
                          .tables = &in.tables,
                          .seg_rows = &in.seg_rows,
                          .cut = in.cut};
      full_attention(L.attn, io, in.cos, in.sin, in.slots, in.ranges, &paged, {}, in.qg, in.mix);
      capture(capture_, b, name + ".self_attn", in.o);
    } else {
      gated_deltanet(l, io, parts, in.gdn, in.mix);
      capture(capture_, b, name + ".linear_attn", in.o);
    }
    c.rms_norm_linear_glu(h, L.post_attention_layernorm, eps, RmsNormKind::kOnePlusWeight, in.xn,
                          L.mlp.gate_up_proj, in.gu, ActKind::kSilu, in.mid);
    c.linear_add(in.mid, L.mlp.down_proj, nullptr, in.o, h);
    capture(capture_, b, name + ".mlp", in.o);
    capture(capture_, b, name, h);
  }
  b.rms_norm(h, w_.norm, eps, RmsNormKind::kOnePlusWeight, in.xn);
  capture(capture_, b, pre + ".norm", in.xn);
}

Status Qwen35Model::check_segment(const SegRows& s) const {
  const ForwardBatch& batch = *s.batch;
  for (int64_t i = 0; i < s.n(); ++i) {
    const int32_t pos = batch.positions[static_cast<size_t>(i)];
    if (pos != s.pos0 + i)
      return make_error("forward: row " + std::to_string(i) + " has position " + std::to_string(pos) +
                        "; Qwen3.5's recurrent state needs rows in order from position " +
                        std::to_string(s.pos0));
  }
  const bool images = batch.image_embeds && batch.image_embeds->dim(0) > 0;
  if (batch.decode_rows && (s.pos0 == 0 || images))
    return make_error("forward: decode rows continue a non-empty cache and hold no image tokens");
  return {};
}

Expected<Buffer> Qwen35Model::forward_step(std::span<const Segment> segs, StepOutput out) {
  const TextConfig& t = cfg_.text;
  std::vector<SegRows> parts;  // [n_segments]
  for (const Segment& sg : segs) {
    auto* c = dynamic_cast<Qwen35Cache*>(sg.cache);
    if (!c || &c->table.pool() != pool_.get())
      return make_error("forward: the cache was not made by this model");
    parts.push_back({0, 0, c, c->n_past(), sg.batch});
  }
  TF_ASSIGN(const StepRows rows,
            collect_step_rows(segs, {t.vocab_size, cfg_.has_vision ? cfg_.image_token_id : -1, t.hidden_size,
                                     info_.dtype}));
  for (size_t s = 0; s < parts.size(); ++s) {
    parts[s].r0 = rows.begin(s);
    parts[s].r1 = rows.end(s);
    TF_TRY(check_segment(parts[s]));
  }
  // A state slot for every cache that holds none yet (a fresh, zeroed slot: the state a
  // sequence starts from).
  for (const SegRows& s : parts)
    if (!ensure_slot(*s.cache))
      return make_error("forward: the state pool has no free slot (" + std::to_string(states_->n_slots()) +
                        " slots)");
  // Pool blocks for every position a segment writes: the only change before the compute starts.
  std::vector<BlockTable*> tabs;
  for (const SegRows& s : parts) tabs.push_back(&s.cache->table);
  TF_ASSIGN(const PagedStep pg, page_step(tabs, rows, backend_));
  // Checked: from here on the caches change.
  for (const SegRows& s : parts) {
    if (s.decode_rows()) {
      keep_rows_capacity(*s.cache, s.n());
    } else {
      s.cache->kept.n = 0;  // rollback() only returns into the last decode_rows forward
    }
    prepare_block_states(*s.cache, s.pos0, s.n(), s.batch->keep_block_states && !s.decode_rows());
  }

  if (decode_graph_fits(parts, rows, out)) {
    TF_ASSIGN(Buffer result, decode_graph_step(parts, rows, pg, out));
    for (const SegRows& s : parts) s.cache->n_past_ = s.pos0 + s.n();  // one-token decodes: nothing kept
    return result;
  }

  Backend& b = backend_;
  const DType act = info_.dtype;
  const int64_t n = rows.n_rows(), hs = t.hidden_size, it = t.intermediate_size;
  const std::string pre = "model.language_model";

  DeviceBuffer ids = upload_i32(b, rows.token_ids);
  DeviceBuffer h = b.alloc(act, {n, hs});  // [n_rows, hidden], the residual stream
  b.embedding(ids, w_.embed_tokens, h);
  rows.scatter_images(b, segs, h);
  capture(capture_, b, pre + ".layers.0:input", h);

  DeviceBuffer cos, sin;  // [n_rows, rotary_dim]
  mrope_cos_sin(parts, cos, sin);
  capture(capture_, b, pre + ".rotary_emb.cos", cos);
  capture(capture_, b, pre + ".rotary_emb.sin", sin);
  DeviceBuffer dranges = b.alloc(DType::I32, {n, 2});  // causal over each sequence's own cache
  b.upload(dranges, rows.causal_ranges().data());
  DeviceBuffer slots = upload_i32(b, pg.slots), dseg = upload_i32(b, pg.seg_rows);
  DeviceBuffer tables = b.alloc(DType::I32, {static_cast<int64_t>(parts.size()), pg.max_blocks});
  b.upload(tables, pg.tables.data());

  const GdnStep gdn = plan_gdn(parts);
  const QGateRows qg_rows = n_attn_layers_ > 0 ? q_gate_rows(n) : QGateRows{};
  const MixerScratch mix = mixer_scratch(n, n_attn_layers_ > 0,
                                         n_attn_layers_ < static_cast<int64_t>(w_.layers.size()), gdn.n_keep);
  DeviceBuffer xn = b.alloc(act, {n, hs}), o = b.alloc(act, {n, hs});
  DeviceBuffer gu = b.alloc(act, {n, 2 * it}), mid = b.alloc(act, {n, it});
  DeviceBuffer tail;
  const PagedCut cut = upload_cut(b, pg, tail);
  text_layers(parts, {cos, sin, slots, dranges, tables, dseg, gdn, qg_rows, mix, xn, o, gu, mid, cut}, h);
  for (const SegRows& s : parts) {
    Qwen35Cache& c = *s.cache;
    c.n_past_ = s.pos0 + s.n();
    if (!s.decode_rows()) continue;
    c.kept.pos0 = s.pos0;
    c.kept.n = s.n();
    if (c.mtp.on) b.copy(xn.tensor().slice_rows(s.r0, s.r1), c.kept.hidden.tensor().slice_rows(0, s.n()));
  }
  mtp_follow(parts, xn);

  return lm_head_logits(b, xn, rows.logit_rows, w_.lm_head_weight(), capture_, out, rows.sample);
}

}  // namespace tf::qwen3_5
