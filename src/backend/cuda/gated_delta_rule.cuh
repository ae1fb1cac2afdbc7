// Gated delta rule device code shared by the one-sequence kernels (gated_delta_rule.cu), the kernels
// over all segments of a step on a pool of slots (gated_delta_rule_slots.cu) and the chunked form's two
// launches (gated_delta_rule_chunks.cu): the CPU reference's arithmetic statement by statement, so all
// give the CPU's bits. Included by those files only.
#pragma once
#include "backend/cuda/common.cuh"
#include "backend/op_checks.h"

namespace tf::cuda::gdr {

using Dims = opcheck::DeltaRuleDims;

constexpr int kChunk = 64, kThreads = 256;

// q, k rows of head h (key head h / ratio) for tokens [t0, t0 + L): normalised (x * 1/sqrt(Σx² +
// 1e-6)), q then scaled (multiply by `mul`, or divide by `div` when divide is set). qs, ks [L, dk].
template <class T>
__device__ void load_qk(const Dims& d, const T* q, const T* k, int64_t h, int64_t t0, int L, bool divide,
                        float mul, float div, float* qs, float* ks) {
  __shared__ float inv_q[kChunk], inv_k[kChunk];
  const int64_t kh = h / d.ratio;
  for (int r = threadIdx.x; r < 2 * L; r += blockDim.x) {
    const int i = r % L;
    const T* x = (r < L ? q : k) + ((t0 + i) * d.hk + kh) * d.dk;
    const float ss = dot8(x, x, d.dk);
    (r < L ? inv_q : inv_k)[i] = 1.0f / sqrtf(ss + 1e-6f);
  }
  __syncthreads();
  for (int64_t e = threadIdx.x; e < L * d.dk; e += blockDim.x) {
    const int64_t i = e / d.dk, c = e % d.dk;
    const int64_t src = ((t0 + i) * d.hk + kh) * d.dk + c;
    const float qn = to_f(q[src]) * inv_q[i];
    qs[e] = divide ? qn / div : qn * mul;
    ks[e] = to_f(k[src]) * inv_k[i];
  }
  __syncthreads();
}

// Where a call writes the states it keeps (ops.h *_slots): after the row at position p with
// (p + 1) % step == 0, head h's S goes to keep + j * stride + h * dk * dv, j = (p + 1) / step -
// pos0 / step - 1 (the j-th kept row of the call). keep null: nothing kept (the one-sequence ops).
struct KeepPlan {
  float* keep = nullptr;
  int64_t pos0 = 0, step = 1, stride = 0;
  // Head h's kept state after the row at position pos0 + t, or null when that row keeps nothing.
  __device__ float* at(int64_t t, int64_t h, int64_t head_elems) const {
    const int64_t p = pos0 + t + 1;
    if (!keep || p % step) return nullptr;
    return keep + (p / step - pos0 / step - 1) * stride + h * head_elems;
  }
};

// One value head h over the call's tokens [0, d.n), token by token. q..out point at the call's first
// row; S [dk, dv] is the head's state; qs, ks [dk] f32 scratch. blockDim.x threads split the columns.
template <class T>
__device__ void recurrent_head(const Dims& d, int64_t h, const T* q, const T* k, const T* v, const float* g,
                               const T* beta, float* S, T* out, float* qs, float* ks, float div,
                               const KeepPlan& kp) {
  for (int64_t t = 0; t < d.n; ++t) {
    float* kept = kp.at(t, h, d.dk * d.dv);
    load_qk(d, q, k, h, t, 1, /*divide=*/true, 0.0f, div, qs, ks);
    const float decay = exp_f(g[t * d.hv + h]), bt = to_f(beta[t * d.hv + h]);
    for (int64_t c = threadIdx.x; c < d.dv; c += blockDim.x) {
      float mem = 0.0f;
      for (int64_t i = 0; i < d.dk; ++i) {
        S[i * d.dv + c] *= decay;
        mem += S[i * d.dv + c] * ks[i];
      }
      const float delta = (to_f(v[(t * d.hv + h) * d.dv + c]) - mem) * bt;
      float o = 0.0f;
      for (int64_t i = 0; i < d.dk; ++i) {
        S[i * d.dv + c] += ks[i] * delta;
        o += S[i * d.dv + c] * qs[i];
      }
      out[(t * d.hv + h) * d.dv + c] = from_f<T>(o);
      if (kept)
        for (int64_t i = 0; i < d.dk; ++i) kept[i * d.dv + c] = S[i * d.dv + c];
    }
    __syncthreads();  // qs/ks are reloaded for the next token
  }
}

// The chunked form over a call's segments (gated_delta_rule_chunks.cu): segs [n_seg, 6] on the device as
// gated_delta_rule_slots.cu reads it, or null for the call's rows as one segment on `states` from position
// 0; keep null: nothing kept. mul: the query multiplier.
void launch_chunked_rule(cudaStream_t s, const Dims& d, const Tensor& q, const Tensor& k, const Tensor& v,
                         const Tensor& g, const Tensor& beta, float* states, const int32_t* segs,
                         int64_t n_seg, const Tensor& out, float* keep, float mul);

}  // namespace tf::cuda::gdr
