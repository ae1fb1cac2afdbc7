// One step of segments over a pool of state slots for the *_slots ops (ops.h: causal_conv1d_silu_slots,
// gated_delta_rule_{chunked,recurrent}_slots), run either as the batched ops (one call per op) or as
// the per-segment reference: the one-sequence ops on each segment's rows and slot, cut where the model
// cut them before the pool (every kept row; the chunked form at every multiple of 64 of position), the
// kept windows/states copied out after each cut. Shared by the CPU test (gdn_slots_test.cpp) and the
// CUDA contract test (cuda_contract_slots_test.cpp).
#pragma once
#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "backend/ops.h"
#include "op_test_util.h"

namespace tf::slotcase {

struct SegSpec {
  int64_t n, slot, pos0;
  int64_t keep_step = 0;  // 0: keeps nothing
};

struct Case {
  int64_t C, K, hk, hv, dk, dv, n_slots;
  bool chunked;
  std::vector<SegSpec> segs;  // rows in this order, with `gap` unused rows before each
  int64_t gap = 1;
};

struct Result {
  Buffer conv_out, windows, conv_keep, out, states, keep;
};

inline int64_t n_kept(const SegSpec& s) {
  return s.keep_step ? (s.pos0 + s.n) / s.keep_step - s.pos0 / s.keep_step : 0;
}

// Rows of the step, the segs table ([n_seg, 6] I32) and the keep count.
struct Layout {
  int64_t n = 0, n_keep = 0;
  std::vector<int32_t> segs;
};
inline Layout layout(const Case& c, bool swap_slots) {
  Layout l;
  for (const SegSpec& s : c.segs) {
    l.n += c.gap;
    const int32_t keep0 = s.keep_step ? static_cast<int32_t>(l.n_keep) : -1;
    const int32_t row[6] = {static_cast<int32_t>(l.n),
                            static_cast<int32_t>(l.n + s.n),
                            static_cast<int32_t>(s.slot),
                            static_cast<int32_t>(s.pos0),
                            keep0,
                            static_cast<int32_t>(s.keep_step ? s.keep_step : 1)};
    l.segs.insert(l.segs.end(), row, row + 6);
    l.n += s.n;
    l.n_keep += n_kept(s);
  }
  l.n += c.gap;
  if (swap_slots && c.segs.size() >= 2) std::swap(l.segs[2], l.segs[8]);  // the planted wrong mapping
  l.n_keep = std::max<int64_t>(l.n_keep, 1);
  return l;
}

// Row i of a host buffer, as its own buffer.
inline Buffer clone_rows(const Buffer& b, int64_t i) {
  const Tensor t = b.view().slice_rows(i, i + 1);
  Buffer out(t.dtype, t.shape);
  std::memcpy(out.data(), t.data, t.nbytes());
  return out;
}

inline Tensor slot_of(const Tensor& pool, int64_t i) {
  Shape rest(pool.shape.begin() + 1, pool.shape.end());
  return pool.slice_rows(i, i + 1).reshaped(std::move(rest));
}

// batched: the *_slots ops; otherwise the per-segment reference. swap_slots: the batched ops with the
// slots of the first two segments exchanged (a planted wrong slot mapping). split_out: the batched conv
// writes its columns to three matrices (a quarter, a quarter, the rest), reassembled here into one.
inline Result run(Backend& be, const Case& c, DType act, uint32_t seed, bool batched, bool swap_slots = false,
                  bool split_out = false) {
  using optest::randn;
  const Layout L = layout(c, swap_slots);
  const int64_t n = L.n, C = c.C, K = c.K;
  Buffer x = randn(act, {n, C}, seed, 2.0f), w = randn(act, {C, K}, seed + 1, 0.7f);
  Buffer win0 = randn(act, {c.n_slots, C, K - 1}, seed + 2, 2.0f);
  Buffer q = randn(act, {n, c.hk, c.dk}, seed + 3), k = randn(act, {n, c.hk, c.dk}, seed + 4);
  Buffer v = randn(act, {n, c.hv, c.dv}, seed + 5), g(DType::F32, {n, c.hv}), beta(act, {n, c.hv});
  Buffer st0 = randn(DType::F32, {c.n_slots, c.hv, c.dk, c.dv}, seed + 6, 0.3f);
  Buffer gr = randn(DType::F32, {n, c.hv}, seed + 7), br = randn(DType::F32, {n, c.hv}, seed + 8);
  for (int64_t i = 0; i < n * c.hv; ++i) {  // log decays in (-1.5, 0), betas in (0, 1)
    g.as<float>()[i] = -1.5f / (1.0f + std::exp(-gr.as<float>()[i])) - 1e-3f;
    store_f32(beta.view(), i, 1.0f / (1.0f + std::exp(-br.as<float>()[i])));
  }
  auto dx = upload_new(be, x), dw = upload_new(be, w), dwin = upload_new(be, win0);
  auto dq = upload_new(be, q), dk = upload_new(be, k), dv = upload_new(be, v), dg = upload_new(be, g);
  auto db = upload_new(be, beta), dst = upload_new(be, st0);
  auto cout = be.alloc(act, {n, C}), out = be.alloc(act, {n, c.hv, c.dv});
  auto ckeep = be.alloc(act, {L.n_keep, C, K - 1}),
       skeep = be.alloc(DType::F32, {L.n_keep, c.hv, c.dk, c.dv});
  if (batched) {
    auto segs = be.alloc(DType::I32, {static_cast<int64_t>(c.segs.size()), 6});
    be.upload(segs, L.segs.data());
    const int64_t widths[3] = {C / 4, C / 4, C - 2 * (C / 4)};
    std::vector<DeviceBuffer> parts;
    std::vector<Tensor> outs;
    for (int64_t wdt : split_out ? std::span<const int64_t>(widths) : std::span<const int64_t>(&C, 1)) {
      parts.push_back(be.alloc(act, {n, wdt}));
      outs.push_back(parts.back().tensor());
    }
    be.causal_conv1d_silu_slots(dx, dw, dwin, segs, outs, &ckeep.tensor());
    if (split_out) {  // the parts' columns back into cout, row by row
      Buffer whole(act, {n, C});
      int64_t c0 = 0;
      const size_t es = dtype_size(act);
      for (const DeviceBuffer& p : parts) {
        const Buffer h = download_new(be, p);
        const int64_t wdt = h.shape()[1];
        for (int64_t r = 0; r < n; ++r)
          std::memcpy(static_cast<char*>(whole.data()) + static_cast<size_t>(r * C + c0) * es,
                      static_cast<const char*>(h.data()) + static_cast<size_t>(r * wdt) * es,
                      static_cast<size_t>(wdt) * es);
        c0 += wdt;
      }
      be.upload(cout, whole.data());
    } else {
      be.copy(parts[0], cout);
    }
    if (c.chunked)
      be.gated_delta_rule_chunked_slots(dq, dk, dv, dg, db, dst, segs, out, &skeep.tensor());
    else
      be.gated_delta_rule_recurrent_slots(dq, dk, dv, dg, db, dst, segs, out, &skeep.tensor());
  } else {
    for (size_t i = 0; i < c.segs.size(); ++i) {
      const SegSpec& s = c.segs[i];
      const int64_t r0 = L.segs[6 * i], keep0 = L.segs[6 * i + 4];
      const Tensor W = slot_of(dwin, s.slot), S = slot_of(dst, s.slot);
      int64_t j = 0;
      for (int64_t a = 0; a < s.n;) {
        int64_t b = s.n;
        if (c.chunked) b = std::min(b, a + 64 - (s.pos0 + a) % 64);
        if (s.keep_step) b = std::min(b, a + s.keep_step - (s.pos0 + a) % s.keep_step);
        auto sl = [&](const DeviceBuffer& t) { return t.tensor().slice_rows(r0 + a, r0 + b); };
        be.causal_conv1d_silu(sl(dx), dw, W, sl(cout));
        if (c.chunked)
          be.gated_delta_rule_chunked(sl(dq), sl(dk), sl(dv), sl(dg), sl(db), S, sl(out));
        else
          be.gated_delta_rule_recurrent(sl(dq), sl(dk), sl(dv), sl(dg), sl(db), S, sl(out));
        if (s.keep_step && (s.pos0 + b) % s.keep_step == 0) {
          be.copy(W, slot_of(ckeep, keep0 + j));
          be.copy(S, slot_of(skeep, keep0 + j));
          ++j;
        }
        a = b;
      }
    }
  }
  be.synchronize();
  return {download_new(be, cout), download_new(be, dwin), download_new(be, ckeep),
          download_new(be, out),  download_new(be, dst),  download_new(be, skeep)};
}

// Recurrent steps: decode (one row each, slots spread over the pool, the last slot included), draft
// verification (rows kept), a segment of several plain rows. Chunked: prefill chunks starting inside
// and on a multiple of 64, one crossing several multiples with the prompt cache keeping them, a
// one-row prompt chunk.
inline std::vector<Case> cases(int64_t hk, int64_t hv, int64_t dk, int64_t dv) {
  std::vector<Case> v;
  Case dec{37, 4, hk, hv, dk, dv, 70, false, {}};
  for (int64_t i = 0; i < 8; ++i) dec.segs.push_back({1, (i * 29 + 3) % 70, 5 + 13 * i});
  dec.segs.push_back({1, 69, 100});
  v.push_back(dec);
  Case ver{
      37, 4, hk, hv, dk, dv, 12, false, {{1, 4, 40}, {4, 7, 60, 1}, {1, 0, 9}, {3, 11, 63, 1}, {2, 2, 17}}};
  v.push_back(ver);
  Case pre{
      37, 4, hk, hv, dk, dv, 9, true, {{70, 3, 30}, {64, 8, 64}, {150, 0, 10, 64}, {1, 5, 0}, {5, 1, 127}}};
  v.push_back(pre);
  Case two{29, 2, hk, hv, dk, dv, 4, true, {{65, 1, 0}, {66, 2, 62, 64}}, 0};
  v.push_back(two);
  return v;
}

}  // namespace tf::slotcase
