// Draft support for Qwen3.5: rollback after draft verification, and the multi-token-prediction
// (MTP) module that proposes drafts. Transformers 5.17 drops mtp.* (no oracle); the structure
// follows the published checkpoints' layout as vLLM's qwen3_5_mtp reads it:
//   x = fc(cat(pre_fc_norm_embedding(embed(token p+1)), pre_fc_norm_hidden(h_p)))   [n, hidden]
//   x = decoder layer (gated full attention with its own K/V, SwiGLU MLP); out = norm(x)
// where h_p is the target's final-norm hidden state at position p (the input of lm_head), and the
// logits are the shared lm_head over out. Drafting chains it: step i feeds its own output as h.
// Only the first MTP layer is used (every published config has mtp_num_hidden_layers = 1).
// Drafts are proposals; verification decides, so MTP numerics never change an output.
#include <algorithm>
#include <cmath>

#include "models/layers/decoder.h"
#include "models/layers/util.h"
#include "models/qwen3_5/model.h"

namespace tf::qwen3_5 {

namespace {

bool layer_complete(const LayerWeights& L) {
  const FullAttnWeights& A = L.attn;
  for (const DeviceBuffer* d :
       {&L.input_layernorm, &L.post_attention_layernorm, &A.q_proj, &A.k_proj, &A.v_proj, &A.o_proj,
        &A.q_norm, &A.k_norm, &L.mlp.gate_up_proj, &L.mlp.down_proj})
    if (d->empty()) return false;
  return true;
}

}  // namespace

int64_t Qwen35Model::n_mtp_layers() const {
  const MtpWeights& m = w_.mtp;
  if (!m.present || m.pre_fc_norm_embedding.empty() || m.pre_fc_norm_hidden.empty() || m.norm.empty() ||
      m.layers.empty() || !layer_complete(m.layers[0]))
    return 0;
  return 1;
}

Status Qwen35Model::enable_mtp(SequenceCache& seq_cache) {
  auto* c = dynamic_cast<Qwen35Cache*>(&seq_cache);
  if (!c) return make_error("enable_mtp: the cache was not made by this model");
  if (n_mtp_layers() == 0) return make_error("this checkpoint has no complete mtp.* layer to draft with");
  if (c->mtp.on) return {};
  const TextConfig& t = cfg_.text;
  c->mtp.k.clear();
  c->mtp.v.clear();
  c->mtp.k.push_back(backend_.alloc(info_.dtype, {c->capacity(), t.num_key_value_heads, t.head_dim}));
  c->mtp.v.push_back(backend_.alloc(info_.dtype, {c->capacity(), t.num_key_value_heads, t.head_dim}));
  c->mtp.hidden = backend_.alloc(info_.dtype, {1, t.hidden_size});
  c->mtp.n_done = 0;
  c->mtp.on = true;
  return {};
}

void Qwen35Model::keep_rows_capacity(Qwen35Cache& c, int64_t n) {
  const TextConfig& t = cfg_.text;
  if (!c.kept.hidden.empty() && c.kept.hidden.tensor().dim(0) >= n) return;
  const int64_t conv_dim =
      2 * t.linear_num_key_heads * t.linear_key_head_dim + t.linear_num_value_heads * t.linear_value_head_dim;
  c.kept.conv.clear();
  c.kept.state.clear();
  for (int64_t l = 0; l < t.num_hidden_layers; ++l) {
    if (t.full_attention[static_cast<size_t>(l)]) {
      c.kept.conv.emplace_back();
      c.kept.state.emplace_back();
      continue;
    }
    c.kept.conv.push_back(backend_.alloc(info_.dtype, {n, conv_dim, t.linear_conv_kernel_dim - 1}));
    c.kept.state.push_back(backend_.alloc(
        DType::F32, {n, t.linear_num_value_heads, t.linear_key_head_dim, t.linear_value_head_dim}));
  }
  c.kept.hidden = backend_.alloc(info_.dtype, {n, t.hidden_size});
  c.kept.n = 0;
}

Status Qwen35Model::rollback(SequenceCache& seq_cache, int64_t n_positions) {
  auto* c = dynamic_cast<Qwen35Cache*>(&seq_cache);
  if (!c) return make_error("rollback: the cache was not made by this model");
  if (n_positions == c->n_past()) return {};
  const auto& kept = c->kept;
  if (kept.n == 0 || c->n_past() != kept.pos0 + kept.n || n_positions <= kept.pos0 ||
      n_positions > kept.pos0 + kept.n)
    return make_error("rollback: the cache holds " + std::to_string(c->n_past()) +
                      " positions and no kept state for " + std::to_string(n_positions));
  Backend& b = backend_;
  const int64_t r = n_positions - 1 - kept.pos0;
  for (size_t l = 0; l < c->conv.size(); ++l) {
    if (c->conv[l].empty()) continue;
    b.copy(kept.conv[l].tensor().slice_rows(r, r + 1), c->conv[l]);
    b.copy(kept.state[l].tensor().slice_rows(r, r + 1), c->state[l]);
  }
  if (c->mtp.on) {
    b.copy(kept.hidden.tensor().slice_rows(r, r + 1), c->mtp.hidden);
    c->mtp.n_done = std::min(c->mtp.n_done, n_positions - 1);
  }
  c->n_past_ = n_positions;
  c->kept.n = r + 1;
  return {};
}

DeviceBuffer Qwen35Model::mtp_rows(std::span<const SegRows> segs, const Tensor& hidden,
                                   const std::vector<int32_t>& ids) {
  Backend& b = backend_;
  const TextConfig& t = cfg_.text;
  const MtpWeights& M = w_.mtp;
  const LayerWeights& L = M.layers[0];
  const DType act = info_.dtype;
  const int64_t n = static_cast<int64_t>(ids.size()), hs = t.hidden_size, it = t.intermediate_size;
  const float eps = static_cast<float>(t.rms_norm_eps);

  DeviceBuffer emb = b.alloc(act, {n, hs}), en = b.alloc(act, {n, hs}), hn = b.alloc(act, {n, hs});
  b.embedding(upload_i32(b, ids), w_.embed_tokens, emb);
  b.rms_norm(emb, M.pre_fc_norm_embedding, eps, RmsNormKind::kOnePlusWeight, en);
  b.rms_norm(hidden, M.pre_fc_norm_hidden, eps, RmsNormKind::kOnePlusWeight, hn);
  // cat([embedding, hidden], -1): row i of [n, 2*hidden] is rows 2i and 2i + 1 of a [2n, hidden] view.
  DeviceBuffer cat = b.alloc(act, {n, 2 * hs});
  std::vector<int32_t> even(static_cast<size_t>(n)), odd(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    even[static_cast<size_t>(i)] = static_cast<int32_t>(2 * i);
    odd[static_cast<size_t>(i)] = static_cast<int32_t>(2 * i + 1);
  }
  const Tensor halves = cat.tensor().reshaped({2 * n, hs});
  b.scatter_rows(en, upload_i32(b, even), halves);
  b.scatter_rows(hn, upload_i32(b, odd), halves);
  DeviceBuffer h = b.alloc(act, {n, hs});  // [n_rows, hidden], the MTP layer's residual stream
  b.linear(cat, M.fc, nullptr, h);

  DeviceBuffer cos, sin;  // [n_rows, rotary_dim]
  mrope_cos_sin(segs, cos, sin);
  std::vector<int32_t> pos, ranges;  // [n_rows], [n_rows, 2]
  std::vector<AttnKv> kv;
  for (const SegRows& s : segs) {
    for (int64_t i = 0; i < s.n(); ++i) {
      pos.push_back(static_cast<int32_t>(s.pos0 + i));
      ranges.push_back(0);
      ranges.push_back(static_cast<int32_t>(s.pos0 + i + 1));
    }
    kv.push_back({s.r0, s.r1, &s.cache->mtp.k[0].tensor(), &s.cache->mtp.v[0].tensor()});
  }
  DeviceBuffer dranges = b.alloc(DType::I32, {n, 2});
  b.upload(dranges, ranges.data());
  DeviceBuffer xn = b.alloc(act, {n, hs}), o = b.alloc(act, {n, hs});
  DeviceBuffer gu = b.alloc(act, {n, 2 * it}), mid = b.alloc(act, {n, it});
  b.rms_norm(h, L.input_layernorm, eps, RmsNormKind::kOnePlusWeight, xn);
  full_attention(L.attn, {xn, o}, cos, sin, upload_i32(b, pos), dranges, nullptr, kv, q_gate_rows(n),
                 mixer_scratch(n, true, false, 0));
  b.add(h, o, h);
  b.rms_norm(h, L.post_attention_layernorm, eps, RmsNormKind::kOnePlusWeight, xn);
  gated_mlp(b, xn, L.mlp.gate_up_proj, L.mlp.down_proj, ActKind::kSilu, gu, mid, o);
  b.add(h, o, h);
  b.rms_norm(h, M.norm, eps, RmsNormKind::kOnePlusWeight, xn);
  return xn;
}

void Qwen35Model::mtp_follow(std::span<const SegRows> segs, const Tensor& xn) {
  Backend& b = backend_;
  const int64_t hs = xn.dim(1);
  // MTP rows of every segment with MTP on: its positions start..last, last = pos0 + n - 2. Positions
  // before pos0 - 1 that were never followed (a prefix resumed without MTP state) keep stale K/V: the
  // drafts get worse, the output cannot change.
  std::vector<SegRows> parts;        // MTP rows [r0, r1) of each part at MTP positions pos0..
  std::vector<const SegRows*> from;  // the step segment of each part
  int64_t m = 0;
  for (const SegRows& s : segs) {
    if (!s.cache->mtp.on) continue;
    const int64_t start = std::max<int64_t>({s.cache->mtp.n_done, s.pos0 - 1, 0}), last = s.pos0 + s.n() - 2;
    if (start > last) continue;
    parts.push_back({m, m + last - start + 1, s.cache, start, s.batch});
    from.push_back(&s);
    m += last - start + 1;
  }
  if (m > 0) {
    DeviceBuffer hid = b.alloc(xn.dtype, {m, hs});  // [m, hidden]: target hidden at each part's positions
    std::vector<int32_t> ids;                       // [m]: the token after each of those positions
    for (size_t i = 0; i < parts.size(); ++i) {
      const SegRows &p = parts[i], &s = *from[i];
      int64_t row = 0;  // the pending hidden state (position s.pos0 - 1) comes first when it is needed
      if (p.pos0 == s.pos0 - 1) {
        b.copy(s.cache->mtp.hidden, hid.tensor().slice_rows(p.r0, p.r0 + 1));
        row = 1;
      }
      const int64_t x0 = s.r0 + p.pos0 + row - s.pos0;  // step row of the next position
      if (p.n() > row) b.copy(xn.slice_rows(x0, x0 + p.n() - row), hid.tensor().slice_rows(p.r0 + row, p.r1));
      for (int64_t q = p.pos0; q < p.pos0 + p.n(); ++q)
        ids.push_back(s.batch->token_ids[static_cast<size_t>(q + 1 - s.pos0)]);
    }
    mtp_rows(parts, hid, ids);
  }
  for (const SegRows& s : segs) {
    if (!s.cache->mtp.on) continue;
    s.cache->mtp.n_done = std::max(s.cache->mtp.n_done, s.pos0 + s.n() - 1);
    b.copy(xn.slice_rows(s.r1 - 1, s.r1), s.cache->mtp.hidden);
  }
}

Expected<std::vector<std::vector<int32_t>>> Qwen35Model::propose_mtp_batch(std::span<const MtpRequest> reqs) {
  const TextConfig& t = cfg_.text;
  // Each chain: request i, its cache, and p0 = the cache's last position (the chain's step z runs at
  // MTP position p0 + z, pairing the hidden state there with the token after it).
  struct Chain {
    size_t i = 0;
    Qwen35Cache* c = nullptr;
    int64_t p0 = 0;
    int k = 0;
  };
  std::vector<Chain> chains;
  for (size_t i = 0; i < reqs.size(); ++i) {
    const MtpRequest& r = reqs[i];
    auto* c = dynamic_cast<Qwen35Cache*>(r.cache);
    if (!c) return make_error("propose_mtp: the cache was not made by this model");
    if (!c->mtp.on) return make_error("propose_mtp: enable_mtp was not called for this cache");
    if (r.next_token < 0 || r.next_token >= t.vocab_size)
      return make_error("propose_mtp: token id " + std::to_string(r.next_token) +
                        " is outside the vocabulary");
    for (const Chain& o : chains)
      if (o.c == c) return make_error("propose_mtp: the same cache twice in one call");
    const int64_t p0 = c->n_past() - 1;
    const int k =
        static_cast<int>(std::min<int64_t>(std::max(r.k, 0), c->capacity() - std::max<int64_t>(p0, 0)));
    if (p0 < 0 || c->mtp.n_done < p0 || k <= 0) continue;  // nothing followed yet, or nothing asked
    chains.push_back({i, c, p0, k});
  }
  std::vector<std::vector<int32_t>> drafts(reqs.size());
  if (chains.empty()) return drafts;
  Backend& b = backend_;
  const int64_t hs = t.hidden_size, V = t.vocab_size;
  // Step z's rows: the chains with more than z steps, in request order; row j's input hidden state is
  // hid[j] (step 0: the target's at p0; then the chain's own previous output) and its token tok[j].
  DeviceBuffer hid = b.alloc(info_.dtype, {static_cast<int64_t>(chains.size()), hs});
  std::vector<int32_t> tok;
  for (size_t j = 0; j < chains.size(); ++j) {
    b.copy(chains[j].c->mtp.hidden,
           hid.tensor().slice_rows(static_cast<int64_t>(j), static_cast<int64_t>(j) + 1));
    tok.push_back(reqs[chains[j].i].next_token);
  }
  for (int z = 0; !chains.empty(); ++z) {
    const int64_t n = static_cast<int64_t>(chains.size());
    std::vector<SegRows> rows;
    for (int64_t j = 0; j < n; ++j)
      rows.push_back(
          {j, j + 1, chains[static_cast<size_t>(j)].c, chains[static_cast<size_t>(j)].p0 + z, nullptr});
    DeviceBuffer out = mtp_rows(rows, hid, tok);
    if (z == 0)
      for (const Chain& ch : chains) ch.c->mtp.n_done = ch.p0 + 1;  // p0 paired h_p0 with the real next token
    DeviceBuffer lg = b.alloc(info_.dtype, {n, V}), lf = b.alloc(DType::F32, {n, V}),
                 best = b.alloc(DType::I32, {n});
    b.linear(out, w_.lm_head_weight(), nullptr, lg);
    b.cast(lg, lf);
    b.argmax(lf, best);
    std::vector<int32_t> ids(static_cast<size_t>(n));
    b.download(best, ids.data());
    // The chains that go on keep their rows of out as the next step's hidden states.
    std::vector<Chain> next;
    std::vector<int32_t> keep;
    tok.clear();
    for (int64_t j = 0; j < n; ++j) {
      const Chain& ch = chains[static_cast<size_t>(j)];
      drafts[ch.i].push_back(ids[static_cast<size_t>(j)]);
      if (z + 1 < ch.k) {
        next.push_back(ch);
        keep.push_back(static_cast<int32_t>(j));
        tok.push_back(ids[static_cast<size_t>(j)]);
      }
    }
    if (next.empty()) break;
    if (next.size() == chains.size()) {
      hid = std::move(out);
    } else {
      hid = b.alloc(info_.dtype, {static_cast<int64_t>(next.size()), hs});
      b.gather_rows(out, upload_i32(b, keep), hid);
    }
    chains = std::move(next);
  }
  return drafts;
}

}  // namespace tf::qwen3_5
