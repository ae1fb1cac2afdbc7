// Recorded decode steps for Qwen3.5 (issue 17), as LightOnOCR's (lighton_ocr/text.cpp): a step whose
// segments are one recurrent decode row each runs as a graph recorded for its row count n, so a token costs
// one replay instead of a launch per op. No padding rows: a padding row would need a state slot of its own
// for the conv and the delta rule, so each n has its graph (n <= kMaxGraphRows). The graph reads everything
// per-step from its input arena (ids, key ranges, pool slots, block tables, the Gated DeltaNet segment
// table, the M-RoPE angles, the sampling rows), written by one upload before the replay; the pools (K/V
// blocks, state slots) are indexed from there. The ops and shapes are those of the op-by-op step over the
// same n rows, so a row's bits are the same either way (DecodeGraph.ReplayedStepsEqualSoloOpByOp).
#include <algorithm>
#include <cstring>

#include "models/layers/decoder.h"
#include "models/layers/rope.h"
#include "models/layers/util.h"
#include "models/qwen3_5/model.h"

namespace tf::qwen3_5 {
namespace {
constexpr int64_t kMaxGraphRows = 64;  // decode steps of up to 64 sequences replay a graph
}  // namespace

bool Qwen35Model::decode_graph_fits(std::span<const SegRows> parts, const StepRows& rows,
                                    StepOutput out) const {
  const int64_t n = rows.n_rows();
  if (!backend_.can_capture() || capture_ || n == 0 || n > kMaxGraphRows ||
      n != static_cast<int64_t>(parts.size()) || !rows.image_rows.empty() ||
      static_cast<int64_t>(rows.logit_rows.size()) != n || n_attn_layers_ == 0 ||
      n_attn_layers_ == static_cast<int64_t>(w_.layers.size()))
    return false;
  for (int64_t i = 0; i < n; ++i)
    if (rows.logit_rows[static_cast<size_t>(i)] != i) return false;
  for (const SegRows& s : parts)
    if (s.decode_rows() || !recurrent_rows(s) || s.cache->mtp.on || !s.cache->block_states.empty())
      return false;
  // A sampled step's records fit the graph's output unless a row asks for more top logprobs than it holds.
  return out != StepOutput::kSampled || sample_width(rows.sample) <= kGraphSampleWidth;
}

Expected<Buffer> Qwen35Model::decode_graph_step(std::span<const SegRows> parts, const StepRows& rows,
                                                const PagedStep& pg, StepOutput out) {
  const TextConfig& t = cfg_.text;
  Backend& b = backend_;
  const DType act = info_.dtype;
  const int64_t n = rows.n_rows(), half = t.rotary_dim / 2, vocab = t.vocab_size;
  int64_t cap_blocks = 1;
  for (const SegRows& s : parts)
    cap_blocks = std::max(cap_blocks, (s.cache->capacity() + kKvBlock - 1) / kKvBlock);
  const int64_t width = pow2_at_least(std::max(cap_blocks, pg.max_blocks));

  std::unique_ptr<DecodeGraph>& slot = graphs_[n];
  if (!slot) {
    slot = std::make_unique<DecodeGraph>();
    DecodeGraph& g = *slot;
    const int64_t hs = t.hidden_size, it = t.intermediate_size;
    g.h = b.alloc(act, {n, hs});
    g.cos = b.alloc(act, {n, t.rotary_dim});
    g.sin = b.alloc(act, {n, t.rotary_dim});
    g.xn = b.alloc(act, {n, hs});
    g.o = b.alloc(act, {n, hs});
    g.gu = b.alloc(act, {n, 2 * it});
    g.mid = b.alloc(act, {n, it});
    g.lg = b.alloc(act, {n, vocab});
    g.lf = b.alloc(DType::F32, {n, vocab});
    g.am = b.alloc(DType::I32, {n});
    g.sampled = b.alloc(DType::I32, {n, kGraphSampleWidth});
    g.no_rows = b.alloc(DType::I32, {0, 6});  // no segment takes the chunked rule
    g.qg = q_gate_rows(n);
    g.mix = mixer_scratch(n, true, true, 0);
  }
  DecodeGraph& g = *slot;
  DecodeGraph::Recorded& rec = g.by_width[width];
  // The input arena, i32: ids[n] | ranges[n, 2] | slots[n] | seg_rows[n + 1] | gdn segs[n, 6] |
  // tables[n, width] | angles[n, half] (f32 bits) | sample[n, kSampleRowWords] (SampleRow).
  const int64_t o_ranges = n, o_slots = 3 * n, o_seg = 4 * n, o_gdn = 5 * n + 1, o_tables = o_gdn + 6 * n,
                o_angles = o_tables + n * width, o_sample = o_angles + n * half;
  if (rec.in.empty()) rec.in = b.alloc(DType::I32, {o_sample + n * kSampleRowWords});
  std::vector<int32_t> a(static_cast<size_t>(rec.in.tensor().numel()), 0);
  const std::vector<int32_t> causal = rows.causal_ranges();
  for (int64_t i = 0; i < n; ++i) {
    const SegRows& s = parts[static_cast<size_t>(i)];
    a[static_cast<size_t>(i)] = rows.token_ids[static_cast<size_t>(i)];
    a[static_cast<size_t>(o_ranges + 2 * i)] = causal[static_cast<size_t>(2 * i)];
    a[static_cast<size_t>(o_ranges + 2 * i + 1)] = causal[static_cast<size_t>(2 * i + 1)];
    a[static_cast<size_t>(o_slots + i)] = pg.slots[static_cast<size_t>(i)];
    // The segment table plan_gdn writes for a one-row recurrent segment that keeps nothing.
    const int32_t seg[6] = {static_cast<int32_t>(i),
                            static_cast<int32_t>(i + 1),
                            s.cache->slot.id(),
                            static_cast<int32_t>(s.pos0),
                            -1,
                            1};
    std::copy_n(seg, 6, a.begin() + o_gdn + 6 * i);
    std::copy_n(pg.tables.begin() + i * pg.max_blocks, pg.max_blocks, a.begin() + o_tables + i * width);
  }
  for (int64_t i = 0; i <= n; ++i) a[static_cast<size_t>(o_seg + i)] = pg.seg_rows[static_cast<size_t>(i)];
  const Buffer ang = mrope_angles(parts);
  std::memcpy(a.data() + o_angles, ang.data(), static_cast<size_t>(n * half) * sizeof(float));
  if (out == StepOutput::kSampled)
    std::memcpy(static_cast<void*>(a.data() + o_sample), static_cast<const void*>(rows.sample.data()),
                rows.sample.size() * sizeof(SampleRow));
  b.upload(rec.in, a.data());

  const Tensor& in = rec.in.tensor();
  auto view = [&](int64_t off, Shape shape, DType dt = DType::I32) {
    return Tensor{static_cast<int32_t*>(in.data) + off, dt, std::move(shape)};
  };
  const Tensor ids = view(0, {n}), ranges = view(o_ranges, {n, 2}), slots = view(o_slots, {n}),
               seg_rows = view(o_seg, {n + 1}), tables = view(o_tables, {n, width}),
               angles = view(o_angles, {n, half}, DType::F32);
  GdnStep gdn;  // the arena's segment table (aliases: not owned)
  gdn.all = DeviceBuffer(nullptr, view(o_gdn, {n, 6}));
  gdn.recurrent = DeviceBuffer(nullptr, view(o_gdn, {n, 6}));
  gdn.chunked = DeviceBuffer(nullptr, g.no_rows.tensor());
  auto record = [&] {
    b.embedding(ids, w_.embed_tokens, g.h);
    b.rope_cos_sin(angles, g.cos, g.sin);
    text_layers(parts,
                {g.cos, g.sin, slots, ranges, tables, seg_rows, gdn, g.qg, g.mix, g.xn, g.o, g.gu, g.mid},
                g.h);
    b.linear(g.xn, w_.lm_head_weight(), nullptr, g.lg);
    b.cast(g.lg, g.lf);
    if (out == StepOutput::kArgmax) b.argmax(g.lf, g.am);
    if (out == StepOutput::kSampled) b.sample(g.lf, view(o_sample, {n, kSampleRowWords}), g.sampled);
  };
  std::unique_ptr<Backend::Graph>& graph = out == StepOutput::kArgmax    ? rec.greedy
                                           : out == StepOutput::kSampled ? rec.sampled
                                                                         : rec.logits;
  replay_or_record(b, graph, record);
  if (out == StepOutput::kArgmax) return download_new(b, g.am);
  if (out == StepOutput::kSampled) return download_new(b, g.sampled);
  return download_new(b, g.lf);
}

}  // namespace tf::qwen3_5
