// Shape and dtype checks of the larger ops, shared by the CPU reference and the CUDA kernels so the two
// accept exactly the same calls (the contract of ops.h; a violation is a programming error: TF_CHECK).
#pragma once
#include <cstdint>

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

}  // namespace tf::opcheck
