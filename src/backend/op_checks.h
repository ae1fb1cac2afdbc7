// Shape and dtype checks of the larger ops, shared by the CPU reference and the CUDA kernels so the two
// accept exactly the same calls (the contract of ops.h; a violation is a programming error: TF_CHECK).
#pragma once
#include <cstdint>
#include <vector>

#include "backend/ops.h"

namespace tf::opcheck {

inline bool is_float_act(DType t) { return t == DType::F32 || t == DType::BF16; }

// Gated delta rule: q, k[n, hk, dk], v[n, hv, dv], g[n, hv] F32, beta[n, hv] act, state[hv, dk, dv] F32,
// out like v; hv % hk == 0 (ratio = hv / hk value heads per key head).
struct DeltaRuleDims {
  int64_t n, hk, dk, hv, dv, ratio;
};
inline DeltaRuleDims delta_rule(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g,
                                const Tensor& beta, const Tensor& state, const Tensor& out) {
  TF_CHECK(q.rank() == 3 && k.shape == q.shape && v.rank() == 3 && v.dim(0) == q.dim(0));
  DeltaRuleDims d{q.dim(0), q.dim(1), q.dim(2), v.dim(1), v.dim(2), 0};
  TF_CHECK(d.hk > 0 && d.hv % d.hk == 0);
  d.ratio = d.hv / d.hk;
  TF_CHECK(g.rank() == 2 && g.dim(0) == d.n && g.dim(1) == d.hv && g.dtype == DType::F32);
  TF_CHECK(beta.shape == g.shape && beta.dtype == q.dtype);
  TF_CHECK(state.rank() == 3 && state.dim(0) == d.hv && state.dim(1) == d.dk && state.dim(2) == d.dv &&
           state.dtype == DType::F32);
  TF_CHECK(out.shape == v.shape && out.dtype == q.dtype && is_float_act(q.dtype) && k.dtype == q.dtype &&
           v.dtype == q.dtype);
  return d;
}

// The *_slots ops (ops.h): segs[n_seg, 6] I32 (r0, r1, slot, pos0, keep0, keep_step) over a step of
// n rows and a pool of n_slots; keep with n_keep rows (or null). The shapes only: the rows of segs
// live on the device (slot_segments checks them where they can be read: the CPU backend).
inline void slot_segs_shape(const Tensor& segs) {
  TF_CHECK(segs.rank() == 2 && segs.dim(1) == 6 && segs.dtype == DType::I32);
}
// An op's output as consecutive column ranges (ops.h causal_conv1d_silu_slots): 1 to 3 tensors [n, C_i] of
// dtype t, none aliasing `in`, Σ C_i = C; returns the ranges' ends (unused ones = C).
struct ColumnParts {
  int64_t end[3];
};
inline ColumnParts column_parts(std::span<const Tensor> out, int64_t n, int64_t C, DType t, const void* in) {
  TF_CHECK(!out.empty() && out.size() <= 3);
  ColumnParts p{{C, C, C}};
  int64_t c = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    TF_CHECK(out[i].rank() == 2 && out[i].dim(0) == n && out[i].dtype == t && out[i].data != in);
    c += out[i].dim(1);
    p.end[i] = c;
  }
  TF_CHECK(c == C);
  return p;
}

struct SlotSeg {
  int64_t r0, r1, slot, pos0, keep0, keep_step;
  int64_t n() const { return r1 - r0; }
  // Rows kept over positions pos0 .. pos0 + n - 1.
  int64_t n_kept() const { return keep0 < 0 ? 0 : (pos0 + n()) / keep_step - pos0 / keep_step; }
};
// Host-readable segs: each segment's rows inside [0, n), distinct slots < n_slots, keeps inside
// [0, n_keep), and (chunked) keep steps that fall on chunk ends.
inline std::vector<SlotSeg> slot_segments(const Tensor& segs, int64_t n, int64_t n_slots, int64_t n_keep,
                                          int64_t keep_multiple) {
  slot_segs_shape(segs);
  std::vector<SlotSeg> out;
  std::vector<uint8_t> used(static_cast<size_t>(n_slots), 0);
  const int32_t* p = segs.as<const int32_t>();
  for (int64_t i = 0; i < segs.dim(0); ++i, p += 6) {
    const SlotSeg s{p[0], p[1], p[2], p[3], p[4], p[5]};
    TF_CHECK(s.r0 >= 0 && s.r0 <= s.r1 && s.r1 <= n && s.slot >= 0 && s.slot < n_slots && s.pos0 >= 0);
    TF_CHECK(!used[static_cast<size_t>(s.slot)]);
    used[static_cast<size_t>(s.slot)] = 1;
    TF_CHECK(s.keep0 < 0 ||
             (s.keep_step > 0 && s.keep_step % keep_multiple == 0 && s.keep0 + s.n_kept() <= n_keep));
    out.push_back(s);
  }
  return out;
}

// qkv_prep (ops.h): qkv[n, (heads + 2 kv_heads) d], q_out[n, heads, d], k_out/v_out[m, kv_heads, d],
// cos/sin[n, r] (r even, <= d), optional norm weights [d] and slots[n] I32 (< m).
struct QkvPrepDims {
  int64_t n, heads, kv_heads, d, r, m;
};
inline QkvPrepDims qkv_prep(const Tensor& qkv, const Tensor* q_norm, const Tensor* k_norm, const Tensor& cos,
                            const Tensor& sin, const Tensor* slots, const Tensor& q_out, const Tensor& k_out,
                            const Tensor& v_out) {
  TF_CHECK(q_out.rank() == 3 && k_out.rank() == 3 && v_out.shape == k_out.shape && qkv.rank() == 2);
  QkvPrepDims a{q_out.dim(0), q_out.dim(1), k_out.dim(1), q_out.dim(2), cos.rank() == 2 ? cos.dim(1) : -1,
                k_out.dim(0)};
  TF_CHECK(k_out.dim(2) == a.d && qkv.dim(0) == a.n && qkv.dim(1) == (a.heads + 2 * a.kv_heads) * a.d);
  TF_CHECK(is_float_act(qkv.dtype) && q_out.dtype == qkv.dtype && k_out.dtype == qkv.dtype &&
           v_out.dtype == qkv.dtype && cos.dtype == qkv.dtype && sin.dtype == qkv.dtype);
  TF_CHECK(cos.rank() == 2 && cos.dim(0) == a.n && a.r % 2 == 0 && a.r <= a.d && sin.shape == cos.shape);
  TF_CHECK((q_norm == nullptr) == (k_norm == nullptr));
  if (q_norm)
    TF_CHECK(q_norm->numel() == a.d && k_norm->numel() == a.d && q_norm->dtype == qkv.dtype &&
             k_norm->dtype == qkv.dtype);
  if (slots)
    TF_CHECK(slots->dtype == DType::I32 && slots->numel() == a.n);
  else
    TF_CHECK(a.m == a.n);
  return a;
}

// Attention: q[n_q, heads, d], k/v[n_k, kv_heads, d], key_ranges[n_q, 2] I32, out like q; GQA groups.
struct AttentionDims {
  int64_t n_q, heads, d, n_k, kv_heads;
};
inline AttentionDims attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& key_ranges,
                               const Tensor& out) {
  TF_CHECK(q.rank() == 3 && k.rank() == 3 && v.rank() == 3 && out.numel() == q.numel());
  AttentionDims a{q.dim(0), q.dim(1), q.dim(2), k.dim(0), k.dim(1)};
  TF_CHECK(k.dim(2) == a.d && v.dim(0) == a.n_k && v.dim(1) == a.kv_heads && v.dim(2) == a.d);
  TF_CHECK(a.kv_heads > 0 && a.heads % a.kv_heads == 0);
  TF_CHECK(key_ranges.dtype == DType::I32 && key_ranges.numel() == 2 * a.n_q);
  TF_CHECK(q.dtype == k.dtype && k.dtype == v.dtype && out.dtype == q.dtype && is_float_act(q.dtype));
  return a;
}

// paged_attention: as attention with k/v the block pool [n_blocks * kKvBlock, kv_heads, d] (n_k = its
// rows), tables[n_seg, max_blocks] I32, seg_rows[n_seg + 1] I32.
inline AttentionDims paged_attention(const Tensor& q, const Tensor& k_pool, const Tensor& v_pool,
                                     const Tensor& tables, const Tensor& seg_rows, const Tensor& key_ranges,
                                     const Tensor& out) {
  const AttentionDims a = attention(q, k_pool, v_pool, key_ranges, out);
  TF_CHECK(a.n_k % kKvBlock == 0);
  TF_CHECK(tables.dtype == DType::I32 && tables.rank() == 2 && tables.dim(0) > 0 && tables.dim(1) > 0);
  TF_CHECK(seg_rows.dtype == DType::I32 && seg_rows.numel() == tables.dim(0) + 1);
  return a;
}

// rope: x[n, heads, d] act, cos/sin[n, r] act with r even, r <= d (partial rotary); out like x.
struct RopeDims {
  int64_t n, heads, d, r;
};
inline RopeDims rope(const Tensor& x, const Tensor& cos, const Tensor& sin, const Tensor& out) {
  TF_CHECK(x.rank() == 3 && out.numel() == x.numel() && out.dtype == x.dtype && is_float_act(x.dtype));
  RopeDims a{x.dim(0), x.dim(1), x.dim(2), cos.rank() == 2 ? cos.dim(1) : 0};
  TF_CHECK(cos.rank() == 2 && cos.dim(0) == a.n && sin.numel() == cos.numel());
  TF_CHECK(cos.dtype == x.dtype && sin.dtype == x.dtype);
  TF_CHECK(a.r % 2 == 0 && a.r <= a.d);
  return a;
}

// gather_rows / scatter_rows: m indexed rows of row_bytes each; n rows in the indexed tensor (src for
// gather, dst for scatter). row_bytes is 0 when m is 0 (nothing to move).
struct RowCopy {
  int64_t m, n;
  size_t row_bytes;
};
inline RowCopy gather_rows(const Tensor& src, const Tensor& rows, const Tensor& out) {
  TF_CHECK(rows.dtype == DType::I32 && src.dtype == out.dtype && src.rank() >= 1 && out.rank() >= 1);
  const int64_t m = rows.numel(), n = src.dim(0);
  TF_CHECK(out.dim(0) == m && (n == 0 || m == 0 || out.numel() / m == src.numel() / n));
  return {m, n, m ? out.nbytes() / static_cast<size_t>(m) : 0};
}
inline RowCopy scatter_rows(const Tensor& src, const Tensor& rows, const Tensor& dst) {
  TF_CHECK(rows.dtype == DType::I32 && src.dtype == dst.dtype && src.rank() >= 1 && dst.rank() >= 1);
  const int64_t m = rows.numel(), n = dst.dim(0);
  TF_CHECK(src.dim(0) == m);
  if (m == 0) return {0, n, 0};
  const size_t rb = src.nbytes() / static_cast<size_t>(m);
  TF_CHECK(n > 0 && dst.nbytes() / static_cast<size_t>(n) == rb);
  return {m, n, rb};
}

}  // namespace tf::opcheck
