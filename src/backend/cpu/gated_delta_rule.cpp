// Gated delta rule (Gated DeltaNet core) in f32: the chunked form HF uses for prefill and
// multi-token continuation, and the token-by-token recurrent form it uses for one-token decode.
// Each value head is independent, so heads are spread over threads; every reduction inside a head
// has a fixed order, which makes results independent of the thread count.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/common.h"
#include "backend/cpu/fmath.h"
#include "backend/cpu/kernels.h"
#include "backend/op_checks.h"

namespace tf::cpu {
namespace {

constexpr int64_t kChunk = 64;

using Dims = opcheck::DeltaRuleDims;

Dims check_dims(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
                const Tensor& state, const Tensor& out) {
  return opcheck::delta_rule(q, k, v, g, beta, state, out);
}

// x * 1/sqrt(Σx² + 1e-6) in f32 (HF l2norm, use_qk_l2norm_in_kernel=True).
void l2norm(float* x, int64_t n) {
  const float inv = 1.0f / std::sqrt(sum_sq(x, n) + 1e-6f);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

// f32 copies of head h's rows: q (normalised, scaled), k (normalised), v, beta, g. [n, d*] each.
struct HeadRows {
  std::vector<float> q, k, v, beta, g;
};

void load_head(const Dims& d, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g,
               const Tensor& beta, int64_t h, bool divide_scale, HeadRows& r) {
  const int64_t kh = h / d.ratio;
  r.q.resize(static_cast<size_t>(d.n * d.dk));
  r.k.resize(r.q.size());
  r.v.resize(static_cast<size_t>(d.n * d.dv));
  r.beta.resize(static_cast<size_t>(d.n));
  r.g.resize(static_cast<size_t>(d.n));
  // chunk: query * (1 / dk**0.5); recurrent: query / dk**0.5 (Python doubles, f32 tensor op).
  const float mul = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d.dk)));
  const float div = static_cast<float>(std::sqrt(static_cast<double>(d.dk)));
  for (int64_t t = 0; t < d.n; ++t) {
    float* qt = r.q.data() + t * d.dk;
    float* kt = r.k.data() + t * d.dk;
    load_f32_row(q, (t * d.hk + kh) * d.dk, d.dk, qt);
    load_f32_row(k, (t * d.hk + kh) * d.dk, d.dk, kt);
    l2norm(qt, d.dk);
    l2norm(kt, d.dk);
    for (int64_t i = 0; i < d.dk; ++i) qt[i] = divide_scale ? qt[i] / div : qt[i] * mul;
    load_f32_row(v, (t * d.hv + h) * d.dv, d.dv, r.v.data() + t * d.dv);
    r.beta[static_cast<size_t>(t)] = load_f32(beta, t * d.hv + h);
    r.g[static_cast<size_t>(t)] = g.as<const float>()[t * d.hv + h];
  }
}

}  // namespace

void gated_delta_rule_recurrent(ThreadPool& pool, const Tensor& q, const Tensor& k, const Tensor& v,
                                const Tensor& g, const Tensor& beta, const Tensor& state, const Tensor& out) {
  const Dims d = check_dims(q, k, v, g, beta, state, out);
  pool.parallel_for(d.hv, [&](int64_t h0, int64_t h1) {
    HeadRows r;
    std::vector<float> mem(static_cast<size_t>(d.dv)), o(static_cast<size_t>(d.dv));
    for (int64_t h = h0; h < h1; ++h) {
      load_head(d, q, k, v, g, beta, h, /*divide_scale=*/true, r);
      float* S = state.as<float>() + h * d.dk * d.dv;  // [dk, dv]
      for (int64_t t = 0; t < d.n; ++t) {
        const float* qt = r.q.data() + t * d.dk;
        const float* kt = r.k.data() + t * d.dk;
        const float* vt = r.v.data() + t * d.dv;
        const float decay = fm::exp(r.g[static_cast<size_t>(t)]), bt = r.beta[static_cast<size_t>(t)];
        for (int64_t i = 0; i < d.dk * d.dv; ++i) S[i] *= decay;
        std::fill(mem.begin(), mem.end(), 0.0f);
        for (int64_t i = 0; i < d.dk; ++i)
          for (int64_t c = 0; c < d.dv; ++c) mem[c] += S[i * d.dv + c] * kt[i];
        for (int64_t c = 0; c < d.dv; ++c) mem[c] = (vt[c] - mem[c]) * bt;  // delta
        for (int64_t i = 0; i < d.dk; ++i)
          for (int64_t c = 0; c < d.dv; ++c) S[i * d.dv + c] += kt[i] * mem[c];
        std::fill(o.begin(), o.end(), 0.0f);
        for (int64_t i = 0; i < d.dk; ++i)
          for (int64_t c = 0; c < d.dv; ++c) o[c] += S[i * d.dv + c] * qt[i];
        store_f32_row(out, (t * d.hv + h) * d.dv, d.dv, o.data());
      }
    }
  });
}

void gated_delta_rule_chunked(ThreadPool& pool, const Tensor& q, const Tensor& k, const Tensor& v,
                              const Tensor& g, const Tensor& beta, const Tensor& state, const Tensor& out) {
  const Dims d = check_dims(q, k, v, g, beta, state, out);
  const int64_t dk = d.dk, dv = d.dv, C = kChunk;
  pool.parallel_for(d.hv, [&](int64_t h0, int64_t h1) {
    HeadRows r;
    // Per chunk scratch: cum[C], P[C][C], A[C][C], U_v[C][dv], U_k[C][dk], v'[C][dv], state update [dk][dv].
    std::vector<float> cum(C), P(C * C), A(C * C), uv(C * dv), uk(C * dk), vp(C * dv), o(dv), o2(dv), kb(dk),
        upd(dk * dv);
    for (int64_t h = h0; h < h1; ++h) {
      load_head(d, q, k, v, g, beta, h, /*divide_scale=*/false, r);
      float* S = state.as<float>() + h * dk * dv;  // [dk, dv]
      for (int64_t c0 = 0; c0 < d.n; c0 += C) {
        const int64_t L = std::min(C, d.n - c0);
        const float* Q = r.q.data() + c0 * dk;
        const float* K = r.k.data() + c0 * dk;
        const float* V = r.v.data() + c0 * dv;
        const float* B = r.beta.data() + c0;
        // torch's CPU cumsum accumulates float in double and rounds each prefix to f32.
        double acc = 0.0;
        for (int64_t i = 0; i < L; ++i) cum[i] = static_cast<float>(acc += r.g[static_cast<size_t>(c0 + i)]);
        for (int64_t i = 0; i < L; ++i)
          for (int64_t j = 0; j <= i; ++j) P[i * C + j] = fm::exp(cum[i] - cum[j]);
        // A = strictly_lower((kβ kᵀ) ∘ P); right-hand sides vβ and kβ ∘ exp(cum).
        for (int64_t i = 0; i < L; ++i) {
          for (int64_t e = 0; e < dk; ++e) kb[e] = K[i * dk + e] * B[i];
          for (int64_t j = 0; j < i; ++j) A[i * C + j] = dot_f32(kb.data(), K + j * dk, dk) * P[i * C + j];
          const float ec = fm::exp(cum[i]);
          for (int64_t c = 0; c < dv; ++c) uv[i * dv + c] = V[i * dv + c] * B[i];
          for (int64_t e = 0; e < dk; ++e) uk[i * dk + e] = kb[e] * ec;
          // Forward substitution with the unit lower-triangular (I + A).
          for (int64_t j = 0; j < i; ++j) {
            const float a = A[i * C + j];
            for (int64_t c = 0; c < dv; ++c) uv[i * dv + c] -= a * uv[j * dv + c];
            for (int64_t e = 0; e < dk; ++e) uk[i * dk + e] -= a * uk[j * dk + e];
          }
        }
        // v' = U_v - U_k S
        for (int64_t i = 0; i < L; ++i) {
          for (int64_t c = 0; c < dv; ++c) vp[i * dv + c] = 0.0f;
          for (int64_t e = 0; e < dk; ++e) {
            const float u = uk[i * dk + e];
            for (int64_t c = 0; c < dv; ++c) vp[i * dv + c] += u * S[e * dv + c];
          }
          for (int64_t c = 0; c < dv; ++c) vp[i * dv + c] = uv[i * dv + c] - vp[i * dv + c];
        }
        // o_i = (q_i exp(c_i)) S + Σ_{j<=i} (q_i·k_j) P[i][j] v'_j
        for (int64_t i = 0; i < L; ++i) {
          const float ec = fm::exp(cum[i]);
          // attn_inter + attn @ v_new, each product summed on its own, then added (HF's grouping).
          std::fill(o.begin(), o.end(), 0.0f);
          std::fill(o2.begin(), o2.end(), 0.0f);
          for (int64_t e = 0; e < dk; ++e) {
            const float qe = Q[i * dk + e] * ec;
            for (int64_t c = 0; c < dv; ++c) o[c] += qe * S[e * dv + c];
          }
          for (int64_t j = 0; j <= i; ++j) {
            const float a = dot_f32(Q + i * dk, K + j * dk, dk) * P[i * C + j];
            for (int64_t c = 0; c < dv; ++c) o2[c] += a * vp[j * dv + c];
          }
          for (int64_t c = 0; c < dv; ++c) o[c] += o2[c];
          store_f32_row(out, ((c0 + i) * d.hv + h) * dv, dv, o.data());
        }
        // S = S exp(c_last) + Σ_i (k_i exp(c_last - c_i)) ⊗ v'_i
        const float last = cum[L - 1], el = fm::exp(last);
        std::fill(upd.begin(), upd.end(), 0.0f);
        for (int64_t i = 0; i < L; ++i) {
          const float w = fm::exp(last - cum[i]);
          for (int64_t e = 0; e < dk; ++e) {
            const float ke = K[i * dk + e] * w;
            for (int64_t c = 0; c < dv; ++c) upd[e * dv + c] += ke * vp[i * dv + c];
          }
        }
        for (int64_t e = 0; e < dk * dv; ++e) S[e] = S[e] * el + upd[e];
      }
    }
  });
}

}  // namespace tf::cpu
