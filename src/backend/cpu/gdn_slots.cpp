// The Gated DeltaNet ops over every segment of a step on a pool of state slots
// (causal_conv1d_silu_slots, gated_delta_rule_{chunked,recurrent}_slots; ops.h). The reference runs
// the one-sequence op per segment on its slot, cut after every kept row (a call over n rows equals
// any split of them at chunk-aligned positions, ops.h), and copies the kept window / state out: the
// bits a per-segment loop gives, which is what makes it the reference for the goldens.
#include <algorithm>

#include "backend/cpu/common.h"
#include "backend/cpu/kernels.h"
#include "backend/op_checks.h"

namespace tf::cpu {
namespace {

constexpr int64_t kChunk = 64;

// Pieces [a, b) of segment rows [0, n): cut after each kept row and, for the chunked form, at every
// multiple of 64 in position (so each piece is one of the chunks counted from position 0).
template <class Fn>
void for_pieces(const opcheck::SlotSeg& s, int64_t cut_every, Fn fn) {
  int64_t j = 0;  // kept rows so far
  for (int64_t a = 0; a < s.n();) {
    int64_t b = s.n();
    if (cut_every > 0) b = std::min(b, a + cut_every - (s.pos0 + a) % cut_every);
    if (s.keep0 >= 0) b = std::min(b, a + s.keep_step - (s.pos0 + a) % s.keep_step);
    const bool keep = s.keep0 >= 0 && (s.pos0 + b) % s.keep_step == 0;
    fn(a, b, keep ? s.keep0 + j : -1);
    j += keep ? 1 : 0;
    a = b;
  }
}

Tensor slot_of(const Tensor& pool, int64_t i) {
  Shape rest(pool.shape.begin() + 1, pool.shape.end());
  return pool.slice_rows(i, i + 1).reshaped(std::move(rest));
}

template <class Op>
void delta_rule_slots(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
                      const Tensor& states, const Tensor& segs, const Tensor& out, const Tensor* keep,
                      bool chunked, Op op) {
  TF_CHECK(states.rank() == 4 &&
           (!keep || (keep->rank() == 4 && keep->dtype == DType::F32 &&
                      std::equal(keep->shape.begin() + 1, keep->shape.end(), states.shape.begin() + 1))));
  // Checks q..out against the slot shape (one whole call's worth; pieces are row slices of it).
  (void)opcheck::delta_rule(q, k, v, g, beta, slot_of(states, 0), out);
  const auto all =
      opcheck::slot_segments(segs, q.dim(0), states.dim(0), keep ? keep->dim(0) : 0, chunked ? kChunk : 1);
  for (const opcheck::SlotSeg& s : all) {
    const Tensor S = slot_of(states, s.slot);
    for_pieces(s, chunked ? kChunk : 0, [&](int64_t a, int64_t b, int64_t kept) {
      const int64_t r0 = s.r0 + a, r1 = s.r0 + b;
      op(q.slice_rows(r0, r1), k.slice_rows(r0, r1), v.slice_rows(r0, r1), g.slice_rows(r0, r1),
         beta.slice_rows(r0, r1), S, out.slice_rows(r0, r1));
      if (kept >= 0) copy(S, slot_of(*keep, kept));
    });
  }
}

}  // namespace

void causal_conv1d_silu_slots(ThreadPool& pool, const Tensor& x, const Tensor& w, const Tensor& windows,
                              const Tensor& segs, std::span<const Tensor> parts, const Tensor* keep) {
  TF_CHECK(x.rank() == 2 && windows.rank() == 3);
  opcheck::column_parts(parts, x.dim(0), x.dim(1), x.dtype, x.data);
  // Several parts: the whole output into a scratch matrix, then its column ranges copied (exact) to them.
  Buffer whole;
  if (parts.size() > 1) whole = Buffer(x.dtype, x.shape);
  const Tensor out = parts.size() > 1 ? whole.view() : parts[0];
  TF_CHECK(!keep || (keep->rank() == 3 && keep->dtype == windows.dtype && keep->dim(1) == windows.dim(1) &&
                     keep->dim(2) == windows.dim(2)));
  const auto all =
      opcheck::slot_segments(segs, x.dim(0), windows.dim(0), keep ? keep->dim(0) : 0, /*keep_multiple=*/1);
  for (const opcheck::SlotSeg& s : all) {
    const Tensor W = slot_of(windows, s.slot);
    for_pieces(s, 0, [&](int64_t a, int64_t b, int64_t kept) {
      causal_conv1d_silu(pool, x.slice_rows(s.r0 + a, s.r0 + b), w, W, out.slice_rows(s.r0 + a, s.r0 + b));
      if (kept >= 0) copy(W, slot_of(*keep, kept));
    });
  }
  if (parts.size() > 1) {
    const size_t es = dtype_size(x.dtype);
    const int64_t C = x.dim(1);
    for (int64_t r = 0; r < x.dim(0); ++r) {
      int64_t c0 = 0;
      for (const Tensor& p : parts) {
        const int64_t wdt = p.dim(1);
        std::memcpy(static_cast<char*>(p.data) + static_cast<size_t>(r * wdt) * es,
                    static_cast<const char*>(out.data) + static_cast<size_t>(r * C + c0) * es,
                    static_cast<size_t>(wdt) * es);
        c0 += wdt;
      }
    }
  }
}

void gated_delta_rule_chunked_slots(ThreadPool& pool, const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& g, const Tensor& beta, const Tensor& states,
                                    const Tensor& segs, const Tensor& out, const Tensor* keep) {
  delta_rule_slots(
      q, k, v, g, beta, states, segs, out, keep, /*chunked=*/true,
      [&](const Tensor& q1, const Tensor& k1, const Tensor& v1, const Tensor& g1, const Tensor& b1,
          const Tensor& S, const Tensor& o1) { gated_delta_rule_chunked(pool, q1, k1, v1, g1, b1, S, o1); });
}

void gated_delta_rule_recurrent_slots(ThreadPool& pool, const Tensor& q, const Tensor& k, const Tensor& v,
                                      const Tensor& g, const Tensor& beta, const Tensor& states,
                                      const Tensor& segs, const Tensor& out, const Tensor* keep) {
  delta_rule_slots(q, k, v, g, beta, states, segs, out, keep, /*chunked=*/false,
                   [&](const Tensor& q1, const Tensor& k1, const Tensor& v1, const Tensor& g1,
                       const Tensor& b1, const Tensor& S,
                       const Tensor& o1) { gated_delta_rule_recurrent(pool, q1, k1, v1, g1, b1, S, o1); });
}

}  // namespace tf::cpu
