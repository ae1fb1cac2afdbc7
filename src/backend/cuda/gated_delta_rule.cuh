// Gated delta rule device code shared by the one-sequence kernels (gated_delta_rule.cu) and the
// kernels over all segments of a step on a pool of slots (gated_delta_rule_slots.cu): one function per
// value head per form, the CPU reference's arithmetic statement by statement, so both files give the
// CPU's bits. Included by those two files only (their anonymous namespaces hold the instantiations).
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

// f32 scratch floats per head of the chunked form: qs, ks, uk [C, dk]; uv, vp [C, dv].
__host__ __device__ inline int64_t chunked_scratch(int64_t dk, int64_t dv) {
  return kChunk * (3 * dk + 2 * dv);
}

// One value head h over the call's tokens, in chunks of 64 counted from position pos0 = kp.pos0 (the
// first chunk ends at the next multiple of 64; the one-sequence op passes 0). q..out point at the
// call's first row; S [dk, dv] the head's state; scratch chunked_scratch(dk, dv) floats.
template <class T>
__device__ void chunked_head(const Dims& d, int64_t h, const T* q, const T* k, const T* v, const float* g,
                             const T* beta, float* S, T* out, float* scratch, float mul, const KeepPlan& kp) {
  __shared__ float cum[kChunk], B[kChunk], P[kChunk][kChunk], A[kChunk][kChunk];
  const int64_t dk = d.dk, dv = d.dv;
  float* qs = scratch;
  float* ks = qs + kChunk * dk;
  float* uk = ks + kChunk * dk;
  float* uv = uk + kChunk * dk;
  float* vp = uv + kChunk * dv;
  int L = 0;
  for (int64_t c0 = 0; c0 < d.n; c0 += L) {
    const int64_t to_end = kChunk - (kp.pos0 + c0) % kChunk;
    L = static_cast<int>(d.n - c0 < to_end ? d.n - c0 : to_end);
    load_qk(d, q, k, h, c0, L, /*divide=*/false, mul, 0.0f, qs, ks);
    if (threadIdx.x == 0) {
      double acc = 0.0;  // torch's CPU cumsum: double accumulator, each prefix rounded to f32
      for (int i = 0; i < L; ++i) cum[i] = static_cast<float>(acc += g[(c0 + i) * d.hv + h]);
    }
    for (int i = threadIdx.x; i < L; i += blockDim.x) B[i] = to_f(beta[(c0 + i) * d.hv + h]);
    __syncthreads();
    for (int e = threadIdx.x; e < L * L; e += blockDim.x) {
      const int i = e / L, j = e % L;
      if (j <= i) P[i][j] = exp_f(cum[i] - cum[j]);
    }
    __syncthreads();
    // A[i][j] = (kβ_i · k_j) P[i][j], j < i
    for (int e = threadIdx.x; e < L * L; e += blockDim.x) {
      const int i = e / L, j = e % L;
      if (j >= i) continue;
      float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      for (int64_t c = 0; c < dk; ++c) acc[c & 7] += (ks[i * dk + c] * B[i]) * ks[j * dk + c];
      A[i][j] = combine8(acc) * P[i][j];
    }
    __syncthreads();
    // Forward substitution, row by row: [U_v | U_k]_i = [vβ | kβ∘exp(c)]_i - Σ_{j<i} A[i][j] [U_v | U_k]_j
    for (int i = 0; i < L; ++i) {
      const float ec = exp_f(cum[i]);
      for (int64_t e = threadIdx.x; e < dv + dk; e += blockDim.x) {
        if (e < dv) {
          float u = to_f(v[((c0 + i) * d.hv + h) * dv + e]) * B[i];
          for (int j = 0; j < i; ++j) u -= A[i][j] * uv[j * dv + e];
          uv[i * dv + e] = u;
        } else {
          const int64_t c = e - dv;
          float u = (ks[i * dk + c] * B[i]) * ec;
          for (int j = 0; j < i; ++j) u -= A[i][j] * uk[j * dk + c];
          uk[i * dk + c] = u;
        }
      }
      __syncthreads();
    }
    // v' = U_v - U_k S
    for (int64_t e = threadIdx.x; e < L * dv; e += blockDim.x) {
      const int64_t i = e / dv, c = e % dv;
      float acc = 0.0f;
      for (int64_t j = 0; j < dk; ++j) acc += uk[i * dk + j] * S[j * dv + c];
      vp[e] = uv[e] - acc;
    }
    // A now holds (q_i · k_j) P[i][j] for j <= i.
    for (int e = threadIdx.x; e < L * L; e += blockDim.x) {
      const int i = e / L, j = e % L;
      if (j <= i) A[i][j] = dot8(qs + i * dk, ks + j * dk, dk) * P[i][j];
    }
    __syncthreads();
    // o_i = (q_i exp(c_i)) S + Σ_{j<=i} A[i][j] v'_j, the two products summed apart, then added.
    for (int64_t e = threadIdx.x; e < L * dv; e += blockDim.x) {
      const int64_t i = e / dv, c = e % dv;
      const float ec = exp_f(cum[i]);
      float o = 0.0f, o2 = 0.0f;
      for (int64_t j = 0; j < dk; ++j) o += (qs[i * dk + j] * ec) * S[j * dv + c];
      for (int64_t j = 0; j <= i; ++j) o2 += A[i][j] * vp[j * dv + c];
      out[((c0 + i) * d.hv + h) * dv + c] = from_f<T>(o + o2);
    }
    __syncthreads();  // every read of the old state is done
    // S = S exp(c_last) + Σ_i (k_i exp(c_last - c_i)) ⊗ v'_i
    const float last = cum[L - 1], el = exp_f(last);
    float* kept = kp.at(c0 + L - 1, h, dk * dv);
    for (int64_t e = threadIdx.x; e < dk * dv; e += blockDim.x) {
      const int64_t r = e / dv, c = e % dv;
      float upd = 0.0f;
      for (int i = 0; i < L; ++i) upd += (ks[i * dk + r] * exp_f(last - cum[i])) * vp[i * dv + c];
      S[e] = S[e] * el + upd;
      if (kept) kept[e] = S[e];
    }
    __syncthreads();
  }
}

}  // namespace tf::cuda::gdr
