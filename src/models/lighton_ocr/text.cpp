// Qwen3 decoder over the rows of one step (segments of several sequences, each with its KV cache), and the
// (tied) lm_head. HF: models/qwen3/modeling_qwen3.py (Qwen3Attention, Qwen3DecoderLayer, Qwen3Model,
// Qwen3RotaryEmbedding) and LightOnOcrModel.forward's masked_scatter; docs/lighton_ocr.md §6.
//
// A step of one-row segments (decode) on a backend that records graphs runs as a replayed graph of B
// rows (B the next power of two; padding rows store no K/V and their outputs are dropped): the same kernels
// with the same shapes' arithmetic, so its rows have the bits of the same rows run op by op.
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>

#include "models/layers/decoder.h"
#include "models/layers/rope.h"
#include "models/layers/step_rows.h"
#include "models/layers/util.h"
#include "models/lighton_ocr/model.h"

namespace tf::lighton_ocr {
namespace {
constexpr int64_t kMaxGraphRows = 256;  // decode steps of up to 256 sequences replay a graph
}  // namespace

const std::vector<float>& LightOnOcrModel::text_inv_freq() {
  if (inv_freq_.empty()) inv_freq_ = rope_inv_freq(cfg_.text.head_dim, cfg_.text.rope_theta);
  return inv_freq_;
}

LightOnOcrModel::TextScratch LightOnOcrModel::text_scratch(int64_t n) {
  const TextConfig& t = cfg_.text;
  Backend& b = backend_;
  const DType act = info_.dtype;
  const int64_t hs = t.hidden_size, hd = t.head_dim, nh = t.num_attention_heads, nkv = t.num_key_value_heads;
  TextScratch s;
  s.h = b.alloc(act, {n, hs});
  s.cos = b.alloc(act, {n, hd});
  s.sin = b.alloc(act, {n, hd});
  s.xn = b.alloc(act, {n, hs});
  s.qkv = b.alloc(act, {n, (nh + 2 * nkv) * hd});
  s.q = b.alloc(act, {n, nh, hd});
  s.attn = b.alloc(act, {n, nh, hd});
  s.o = b.alloc(act, {n, hs});
  s.gu = b.alloc(act, {n, 2 * t.intermediate_size});
  s.mid = b.alloc(act, {n, t.intermediate_size});
  return s;
}

// Embedding (+ the segments' image rows when `rows` is given), RoPE table, every layer, the final norm
// into s.xn. Per layer: the norm and the fused q/k/v linear (rms_norm_linear), qkv_prep (q/k norms, RoPE,
// K/V into the pool), paged attention, o_proj into the residual stream (linear_add), the norm, gate/up
// linear and glu (rms_norm_linear_glu), down_proj into the residual stream (the last three: layer_tail);
// then the final norm. (Chains: op by op while capturing, whose s.o a fusing backend leaves unwritten.)
void LightOnOcrModel::text_stack(const TextInputs& in, const TextScratch& s, const StepRows* rows,
                                 std::span<const Segment> segs) {
  const TextConfig& t = cfg_.text;
  Backend& b = backend_;
  const int64_t n = in.ids.numel(), hd = t.head_dim, nh = t.num_attention_heads;
  const float eps = static_cast<float>(t.rms_norm_eps);
  const float scale = static_cast<float>(std::pow(static_cast<double>(hd), -0.5));
  const std::string pre = "model.language_model";
  KvPool& pool = *pool_;

  b.embedding(in.ids, w_.embed_tokens, s.h);
  capture(capture_, b, pre + ".embed_tokens", s.h);
  if (rows) rows->scatter_images(b, segs, s.h);
  capture(capture_, b, pre + ".layers.0:input", s.h);
  b.rope_cos_sin(in.angles, s.cos, s.sin);
  capture(capture_, b, pre + ".rotary_emb.cos", s.cos);
  capture(capture_, b, pre + ".rotary_emb.sin", s.sin);

  auto bias = [](const DeviceBuffer& d) { return d.empty() ? nullptr : &d.tensor(); };
  const Chains c{b, !capture_};
  const size_t n_layers = w_.text_layers.size();
  for (size_t l = 0; l < n_layers; ++l) {
    const TextLayerWeights& L = w_.text_layers[l];
    const std::string name = capture_ ? pre + ".layers." + std::to_string(l) : std::string();
    const Tensor qkv_w[] = {L.qkv_proj.tensor()}, qkv_out[] = {s.qkv.tensor()};
    if (L.qkv_bias.empty()) {
      c.rms_norm_linear(s.h, L.input_layernorm, eps, RmsNormKind::kWeight, s.xn, qkv_w, qkv_out);
    } else {
      b.rms_norm(s.h, L.input_layernorm, eps, RmsNormKind::kWeight, s.xn);
      b.linear(s.xn, L.qkv_proj, &L.qkv_bias.tensor(), s.qkv);
    }
    b.qkv_prep(s.qkv, &L.q_norm.tensor(), &L.k_norm.tensor(), eps, s.cos, s.sin, &in.slots, s.q, pool.k(l),
               pool.v(l));
    paged_attention_cut(b, s.q, pool.k(l), pool.v(l), in.tables, in.seg_rows, in.cut, in.ranges, scale,
                        s.attn);
    const Tensor attn = s.attn.tensor().reshaped({n, nh * hd});
    if (!capture_) {
      c.layer_tail(attn,
                   {L.o_proj, bias(L.o_bias), L.post_attention_layernorm, eps, RmsNormKind::kWeight,
                    L.gate_up_proj, ActKind::kSilu, L.down_proj},
                   {s.o, s.xn, s.gu, s.mid}, s.h);
      continue;
    }
    c.linear_add(attn, L.o_proj, bias(L.o_bias), s.o, s.h);
    capture(capture_, b, name + ".self_attn", s.o);
    c.rms_norm_linear_glu(s.h, L.post_attention_layernorm, eps, RmsNormKind::kWeight, s.xn, L.gate_up_proj,
                          s.gu, ActKind::kSilu, s.mid);
    c.linear_add(s.mid, L.down_proj, nullptr, s.o, s.h);
    capture(capture_, b, name + ".mlp", s.o);
    capture(capture_, b, name, s.h);
  }
  b.rms_norm(s.h, w_.norm, eps, RmsNormKind::kWeight, s.xn);
  capture(capture_, b, pre + ".norm", s.xn);
}

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

  bool one_row_segments = n == static_cast<int64_t>(segs.size()) && rows.image_rows.empty() &&
                          static_cast<int64_t>(rows.logit_rows.size()) == n;
  for (int64_t i = 0; one_row_segments && i < n; ++i) one_row_segments = rows.logit_rows[i] == i;
  // A sampled step's records fit the graph's output unless a row asks for more top logprobs than it holds.
  const bool graph_fits = out != StepOutput::kSampled || sample_width(rows.sample) <= kGraphSampleWidth;
  if (one_row_segments && graph_fits && n <= kMaxGraphRows && backend_.can_capture() && !capture_) {
    int64_t cap_blocks = 1;
    for (KvCache* c : caches) cap_blocks = std::max(cap_blocks, (c->capacity() + kKvBlock - 1) / kKvBlock);
    return decode_graph_step(rows, paged, pow2_at_least(std::max(cap_blocks, paged.max_blocks)), out);
  }

  Backend& b = backend_;
  DeviceBuffer ids = upload_i32(b, rows.token_ids);
  DeviceBuffer angles = upload_new(b, rope_angles_1d(rows.positions, text_inv_freq()));
  DeviceBuffer ranges = b.alloc(DType::I32, {n, 2});  // causal over each sequence's own cache
  b.upload(ranges, rows.causal_ranges().data());
  DeviceBuffer slots = upload_i32(b, paged.slots), seg_rows = upload_i32(b, paged.seg_rows);
  DeviceBuffer tables = b.alloc(DType::I32, {static_cast<int64_t>(segs.size()), paged.max_blocks});
  b.upload(tables, paged.tables.data());
  DeviceBuffer tail;
  const PagedCut cut = upload_cut(b, paged, tail);
  const TextScratch s = text_scratch(n);
  text_stack({ids, angles, ranges, slots, seg_rows, tables, cut}, s, &rows, segs);
  return lm_head_logits(b, s.xn, rows.logit_rows, w_.lm_head_weight(), capture_, out, rows.sample);
}

// One-row segments, n <= kMaxGraphRows: inputs padded to B rows and uploaded into the bucket's arena for
// this table width; the first step of a (bucket, width, output) runs op by op and records the graph,
// later steps replay it.
Expected<Buffer> LightOnOcrModel::decode_graph_step(const StepRows& rows, const PagedStep& paged,
                                                    int64_t width, StepOutput out) {
  const TextConfig& t = cfg_.text;
  Backend& b = backend_;
  const int64_t n = rows.n_rows(), B = pow2_at_least(n), half = t.head_dim / 2, vocab = t.vocab_size;
  std::unique_ptr<DecodeGraph>& slot = graphs_[B];
  if (!slot) {
    slot = std::make_unique<DecodeGraph>();
    DecodeGraph& g = *slot;
    g.s = text_scratch(B);
    g.lg = b.alloc(info_.dtype, {B, vocab});
    g.lf = b.alloc(DType::F32, {B, vocab});
    g.am = b.alloc(DType::I32, {B});
    g.sampled = b.alloc(DType::I32, {B, kGraphSampleWidth});
  }
  DecodeGraph& g = *slot;
  DecodeGraph::Recorded& rec = g.by_width[width];
  if (rec.in.empty()) rec.in = b.alloc(DType::I32, {B * (5 + width + half + kSampleRowWords) + 1});
  // The input arena, i32: ids[B] | ranges[B, 2] | slots[B] | seg_rows[B + 1] | tables[B, width] |
  // angles[B, half] (f32 bits) | sample[B, kSampleRowWords] (SampleRow). A padding row: token 0 at
  // position 0, stores no K/V (slot -1), attends to key 0 of pool block 0 (table row of zeros) and is
  // greedy: finite values nobody reads.
  // Offsets of the arena's parts, in i32 elements: the host copy and the device views both use them.
  const int64_t o_ranges = B, o_slots = 3 * B, o_seg = 4 * B, o_tables = 5 * B + 1,
                o_angles = o_tables + B * width, o_sample = o_angles + B * half;
  std::vector<int32_t> a(static_cast<size_t>(rec.in.tensor().numel()), 0);
  int32_t* ids = a.data();
  int32_t* ranges = ids + o_ranges;
  int32_t* slots = ids + o_slots;
  int32_t* seg = ids + o_seg;
  int32_t* tables = ids + o_tables;
  auto* angles = reinterpret_cast<float*>(ids + o_angles);
  std::vector<int32_t> positions(static_cast<size_t>(B), 0);
  const std::vector<int32_t> causal = rows.causal_ranges();
  for (int64_t i = 0; i < B; ++i) {
    const bool real = i < n;
    ids[i] = real ? rows.token_ids[i] : 0;
    ranges[2 * i] = real ? causal[2 * i] : 0;
    ranges[2 * i + 1] = real ? causal[2 * i + 1] : 1;
    slots[i] = real ? paged.slots[i] : -1;
    positions[i] = real ? rows.positions[i] : 0;
    if (real) std::copy_n(paged.tables.begin() + i * paged.max_blocks, paged.max_blocks, tables + i * width);
  }
  for (int64_t i = 0; i <= B; ++i) seg[i] = static_cast<int32_t>(i);
  const Buffer ang = rope_angles_1d(positions, text_inv_freq());
  std::copy_n(ang.as<float>(), B * half, angles);
  if (out == StepOutput::kSampled) {
    std::vector<SampleRow> sample(static_cast<size_t>(B));  // padding rows: greedy, no logprobs
    std::copy(rows.sample.begin(), rows.sample.end(), sample.begin());
    std::memcpy(static_cast<void*>(ids + o_sample), static_cast<const void*>(sample.data()),
                sample.size() * sizeof(SampleRow));
  }
  b.upload(rec.in, a.data());

  const Tensor& in = rec.in.tensor();
  auto view = [&](int64_t off, Shape shape, DType dt = DType::I32) {
    return Tensor{static_cast<int32_t*>(in.data) + off, dt, std::move(shape)};
  };
  const TextInputs inputs{view(0, {B}),           view(o_angles, {B, half}, DType::F32),
                          view(o_ranges, {B, 2}), view(o_slots, {B}),
                          view(o_seg, {B + 1}),   view(o_tables, {B, width})};
  auto record = [&] {
    text_stack(inputs, g.s, nullptr, {});
    b.linear(g.s.xn, w_.lm_head_weight(), nullptr, g.lg);
    b.cast(g.lg, g.lf);
    if (out == StepOutput::kArgmax) b.argmax(g.lf, g.am);
    if (out == StepOutput::kSampled) b.sample(g.lf, view(o_sample, {B, kSampleRowWords}), g.sampled);
  };
  // A graph is recorded for each (bucket, width, output): argmax is part of the greedy one, the sample op
  // (reading each row's parameters from the arena) of the sampled one.
  std::unique_ptr<Backend::Graph>& graph = out == StepOutput::kArgmax    ? rec.greedy
                                           : out == StepOutput::kSampled ? rec.sampled
                                                                         : rec.logits;
  replay_or_record(b, graph, record);
  if (out == StepOutput::kArgmax) {
    Buffer ids_out(DType::I32, {n});
    Buffer all = download_new(b, g.am);
    std::copy_n(all.as<int32_t>(), n, ids_out.as<int32_t>());
    return ids_out;
  }
  if (out == StepOutput::kSampled) {
    Buffer records(DType::I32, {n, kGraphSampleWidth});
    b.download(g.sampled.tensor().slice_rows(0, n), records.data());
    return records;
  }
  Buffer logits(DType::F32, {n, vocab});
  b.download(g.lf.tensor().slice_rows(0, n), logits.data());
  return logits;
}

}  // namespace tf::lighton_ocr
