// Gated DeltaNet mixer (Qwen3_5GatedDeltaNet.forward) over the rows of a step: projections, q/k/v
// split, fp32 gates, gated RMSNorm per value head and out_proj over all rows at once; per segment,
// the causal conv with its carried window and the delta rule on its state (chunked for several
// tokens, recurrent for one token on a cached state or row by row for draft verification).
#include <algorithm>
#include <numeric>
#include <utility>
#include <vector>

#include "models/layers/util.h"
#include "models/qwen3_5/model.h"

namespace tf::qwen3_5 {

namespace {

constexpr int64_t kDeltaChunk = 64;  // torch_chunk_gated_delta_rule's chunk_size

// A segment's rows [0, n) at positions pos0.. cut for the prefill forms: at each multiple of 64
// (counted from position 0) whose state the prompt cache keeps, and before the first one for the
// chunked rule.
std::vector<std::pair<int64_t, int64_t>> prefill_pieces(const Qwen35Cache& c, int64_t pos0, int64_t n) {
  std::vector<std::pair<int64_t, int64_t>> pieces;
  for (int64_t r0 = 0; r0 < n;) {
    const int64_t to_cut = kDeltaChunk - (pos0 + r0) % kDeltaChunk;
    const bool cut = c.keep_block_states || (pos0 + r0) % kDeltaChunk != 0;
    const int64_t r1 = cut ? std::min(n, r0 + to_cut) : n;
    pieces.emplace_back(r0, r1);
    r0 = r1;
  }
  return pieces;
}

// The slot prepare_block_states made for the state at `pos`, if the prompt cache keeps it.
Qwen35Cache::BlockState* kept_at(Qwen35Cache& c, int64_t pos) {
  if (!c.keep_block_states || pos % kDeltaChunk) return nullptr;
  for (auto& s : c.block_states)
    if (s.pos == pos) return &s;
  return nullptr;
}

}  // namespace

void Qwen35Model::gated_deltanet(size_t l, const Tensor& x, std::span<const SegRows> segs,
                                 const Tensor& out) {
  Backend& b = backend_;
  const TextConfig& t = cfg_.text;
  const LinearAttnWeights& G = w_.layers[l].linear;
  const DType act = info_.dtype;
  const int64_t n = x.dim(0), hk = t.linear_num_key_heads, hv = t.linear_num_value_heads;
  const int64_t dk = t.linear_key_head_dim, dv = t.linear_value_head_dim;
  const int64_t kd = hk * dk, vd = hv * dv, conv_dim = 2 * kd + vd;

  DeviceBuffer qkv = b.alloc(act, {n, conv_dim}), conv = b.alloc(act, {n, conv_dim});  // [n_rows, conv_dim]
  DeviceBuffer z = b.alloc(act, {n, vd}), bb = b.alloc(act, {n, hv}), aa = b.alloc(act, {n, hv});
  b.linear(x, G.in_proj_qkv, nullptr, qkv);
  b.linear(x, G.in_proj_z, nullptr, z);
  b.linear(x, G.in_proj_b, nullptr, bb);
  b.linear(x, G.in_proj_a, nullptr, aa);
  for (const SegRows& s : segs) {
    Qwen35Cache& c = *s.cache;
    const Tensor sx = qkv.tensor().slice_rows(s.r0, s.r1), sc = conv.tensor().slice_rows(s.r0, s.r1);
    if (s.decode_rows()) {
      // Draft verification: one row at a time, as one-token decoding runs it, keeping each window.
      for (int64_t i = 0; i < s.n(); ++i) {
        b.causal_conv1d_silu(sx.slice_rows(i, i + 1), G.conv1d, c.conv[l], sc.slice_rows(i, i + 1));
        b.copy(c.conv[l], c.kept.conv[l].tensor().slice_rows(i, i + 1));
      }
      continue;
    }
    // One call over n rows equals calls split anywhere; split at the multiples of 64 whose window
    // the prompt cache keeps.
    for (auto [r0, r1] : prefill_pieces(c, s.pos0, s.n())) {
      b.causal_conv1d_silu(sx.slice_rows(r0, r1), G.conv1d, c.conv[l], sc.slice_rows(r0, r1));
      if (Qwen35Cache::BlockState* kept = kept_at(c, s.pos0 + r1)) b.copy(c.conv[l], kept->conv[l]);
    }
  }

  // Split channels [q | k | v] with row gathers over units of gcd(dk, dv) channels.
  const int64_t u = std::gcd(dk, dv), per = conv_dim / u;
  std::vector<int32_t> rq, rk, rv;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < kd / u; ++j) rq.push_back(static_cast<int32_t>(i * per + j));
    for (int64_t j = 0; j < kd / u; ++j) rk.push_back(static_cast<int32_t>(i * per + kd / u + j));
    for (int64_t j = 0; j < vd / u; ++j) rv.push_back(static_cast<int32_t>(i * per + 2 * kd / u + j));
  }
  DeviceBuffer q = b.alloc(act, {n, hk, dk}), k = b.alloc(act, {n, hk, dk}), v = b.alloc(act, {n, hv, dv});
  const Tensor units = conv.tensor().reshaped({n * per, u});
  b.gather_rows(units, upload_i32(b, rq), q.tensor().reshaped({n * kd / u, u}));
  b.gather_rows(units, upload_i32(b, rk), k.tensor().reshaped({n * kd / u, u}));
  b.gather_rows(units, upload_i32(b, rv), v.tensor().reshaped({n * vd / u, u}));

  DeviceBuffer g = b.alloc(DType::F32, {n, hv}), beta = b.alloc(act, {n, hv});  // [n_rows, hv]
  b.gdn_gates(aa, bb, G.A_log, G.dt_bias, g, beta);

  DeviceBuffer core = b.alloc(act, {n, hv, dv});
  for (const SegRows& s : segs) {
    Qwen35Cache& c = *s.cache;
    // This segment's rows [r0, r1) of the step's q, k, v, g, beta and core.
    auto rows = [&](const DeviceBuffer& d, int64_t r0, int64_t r1) {
      return d.tensor().slice_rows(s.r0 + r0, s.r0 + r1);
    };
    const int64_t prompt_len = static_cast<int64_t>(c.rope().thw.size() / 3);
    if (s.decode_rows()) {
      for (int64_t i = 0; i < s.n(); ++i) {
        b.gated_delta_rule_recurrent(rows(q, i, i + 1), rows(k, i, i + 1), rows(v, i, i + 1),
                                     rows(g, i, i + 1), rows(beta, i, i + 1), c.state[l],
                                     rows(core, i, i + 1));
        b.copy(c.state[l], c.kept.state[l].tensor().slice_rows(i, i + 1));
      }
    } else if (s.n() == 1 && s.pos0 > 0 && s.pos0 >= prompt_len) {
      b.gated_delta_rule_recurrent(rows(q, 0, 1), rows(k, 0, 1), rows(v, 0, 1), rows(g, 0, 1),
                                   rows(beta, 0, 1), c.state[l], rows(core, 0, 1));
    } else {
      // Prompt rows (a one-row prefill chunk included) take the chunked rule, as HF's single pass
      // over the prompt does. Chunks start at multiples of 64 counted from position 0, so a prefill
      // split at such multiples reproduces the single full pass bit for bit.
      for (auto [r0, r1] : prefill_pieces(c, s.pos0, s.n())) {
        b.gated_delta_rule_chunked(rows(q, r0, r1), rows(k, r0, r1), rows(v, r0, r1), rows(g, r0, r1),
                                   rows(beta, r0, r1), c.state[l], rows(core, r0, r1));
        if (Qwen35Cache::BlockState* kept = kept_at(c, s.pos0 + r1)) b.copy(c.state[l], kept->state[l]);
      }
    }
  }
  DeviceBuffer normed = b.alloc(act, {n, vd});
  b.rms_norm_gated(core.tensor().reshaped({n * hv, dv}), z.tensor().reshaped({n * hv, dv}), G.norm,
                   static_cast<float>(t.rms_norm_eps), normed.tensor().reshaped({n * hv, dv}));
  b.linear(normed, G.out_proj, nullptr, out);
}

}  // namespace tf::qwen3_5
