// Gated DeltaNet mixer (Qwen3_5GatedDeltaNet.forward) over the rows of a step: projections, q/k/v
// split, fp32 gates, gated RMSNorm per value head and out_proj over all rows at once; the causal conv
// and the delta rule over all segments in one call each (on the state pool's slots, in place):
// the chunked rule for prompt rows, the recurrent rule for one-token decode and draft verification.
// The conv/state a segment must keep (each verified row for rollback, each multiple of 64 for the
// prompt cache) come out of the same calls into the step's keep buffers and are copied to the cache.
#include <algorithm>
#include <utility>
#include <vector>

#include "models/layers/util.h"
#include "models/qwen3_5/model.h"

namespace tf::qwen3_5 {

namespace {

constexpr int32_t kDeltaChunk = 64;  // torch_chunk_gated_delta_rule's chunk_size

}  // namespace

GdnStep Qwen35Model::plan_gdn(std::span<const SegRows> segs) {
  GdnStep p;
  std::vector<int32_t> all, chunked, rec;
  for (size_t i = 0; i < segs.size(); ++i) {
    const SegRows& s = segs[i];
    Qwen35Cache& c = *s.cache;
    int32_t keep0 = -1, step = 1;
    if (s.decode_rows()) {  // each row's state, for rollback()
      keep0 = static_cast<int32_t>(p.n_keep);
      p.keeps.push_back({i, p.n_keep, s.n(), true});
      p.n_keep += s.n();
    } else if (c.keep_block_states && !c.block_states.empty()) {  // each multiple of 64 reached
      keep0 = static_cast<int32_t>(p.n_keep);
      step = kDeltaChunk;
      const int64_t k = static_cast<int64_t>(c.block_states.size());
      p.keeps.push_back({i, p.n_keep, k, false});
      p.n_keep += k;
    }
    const int32_t row[6] = {static_cast<int32_t>(s.r0),
                            static_cast<int32_t>(s.r1),
                            c.slot.id(),
                            static_cast<int32_t>(s.pos0),
                            keep0,
                            step};
    all.insert(all.end(), row, row + 6);
    std::vector<int32_t>& form = recurrent_rows(s) ? rec : chunked;
    form.insert(form.end(), row, row + 6);
  }
  Backend& b = backend_;
  auto up = [&](const std::vector<int32_t>& v) {
    DeviceBuffer d = b.alloc(DType::I32, {static_cast<int64_t>(v.size() / 6), 6});
    if (!v.empty()) b.upload(d, v.data());
    return d;
  };
  p.all = up(all);
  p.chunked = up(chunked);
  p.recurrent = up(rec);
  return p;
}

void Qwen35Model::gated_deltanet(size_t l, const MixerIo& io, std::span<const SegRows> segs,
                                 const GdnStep& plan, const MixerScratch& m) {
  Backend& b = backend_;
  const TextConfig& t = cfg_.text;
  const LinearAttnWeights& G = w_.layers[l].linear;
  const int64_t n = io.x.dim(0), hk = t.linear_num_key_heads, hv = t.linear_num_value_heads;
  const int64_t dk = t.linear_key_head_dim, dv = t.linear_value_head_dim;
  const int64_t kd = hk * dk, vd = hv * dv, conv_dim = 2 * kd + vd;
  const size_t pl = static_cast<size_t>(segs[0].cache->state_layer[l]);

  const Tensor &qkv = m.qkv.tensor(), &z = m.z.tensor(), &bb = m.bb.tensor(), &aa = m.aa.tensor();
  TF_CHECK(qkv.dim(0) == n && qkv.dim(1) == conv_dim);
  const Tensor in_w[] = {G.in_proj_qkv, G.in_proj_z, G.in_proj_b, G.in_proj_a}, in_out[] = {qkv, z, bb, aa};
  mixer_in(io, in_w, in_out);
  // Kept windows and states of this layer: [n_keep, conv_dim, K-1] act and [n_keep, hv, dk, dv] F32.
  const Tensor &keep_conv = m.keep_conv.tensor(), &keep_state = m.keep_state.tensor();
  const Tensor* kc = plan.n_keep > 0 ? &keep_conv : nullptr;
  const Tensor* ks = plan.n_keep > 0 ? &keep_state : nullptr;
  // The conv's output channels [q | k | v] go straight to q, k and v (its stores split them).
  const Tensor &q = m.lq.tensor(), &k = m.lk.tensor(), &v = m.lv.tensor();
  const Tensor qkv_parts[] = {q.reshaped({n, kd}), k.reshaped({n, kd}), v.reshaped({n, vd})};
  b.causal_conv1d_silu_slots(qkv, G.conv1d, states_->windows(pl), plan.all, qkv_parts, kc);

  const Tensor &g = m.g.tensor(), &beta = m.beta.tensor();  // [n_rows, hv]
  b.gdn_gates(aa, bb, G.A_log, G.dt_bias, g, beta);

  const Tensor& core = m.core.tensor();
  if (plan.chunked.tensor().dim(0) > 0)
    b.gated_delta_rule_chunked_slots(q, k, v, g, beta, states_->states(pl), plan.chunked, core, ks);
  if (plan.recurrent.tensor().dim(0) > 0)
    b.gated_delta_rule_recurrent_slots(q, k, v, g, beta, states_->states(pl), plan.recurrent, core, ks);
  // The kept rows to where rollback() and snapshot() look for them.
  for (const GdnStep::Keep& kp : plan.keeps) {
    Qwen35Cache& c = *segs[kp.seg].cache;
    if (kp.rows) {
      b.copy(keep_conv.slice_rows(kp.keep0, kp.keep0 + kp.n), c.kept.conv[l].tensor().slice_rows(0, kp.n));
      b.copy(keep_state.slice_rows(kp.keep0, kp.keep0 + kp.n), c.kept.state[l].tensor().slice_rows(0, kp.n));
      continue;
    }
    for (int64_t j = 0; j < kp.n; ++j) {
      Qwen35Cache::BlockState& bs = c.block_states[static_cast<size_t>(j)];
      b.copy(keep_conv.slice_rows(kp.keep0 + j, kp.keep0 + j + 1), bs.conv[l]);
      b.copy(keep_state.slice_rows(kp.keep0 + j, kp.keep0 + j + 1), bs.state[l]);
    }
  }
  const Tensor& normed = m.normed.tensor();
  b.rms_norm_gated(core.reshaped({n * hv, dv}), z.reshaped({n * hv, dv}), G.norm,
                   static_cast<float>(t.rms_norm_eps), normed.reshaped({n * hv, dv}));
  mixer_out(io, normed, G.out_proj);
}

}  // namespace tf::qwen3_5
