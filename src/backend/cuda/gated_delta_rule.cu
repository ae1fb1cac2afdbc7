// Gated delta rule, chunked (prefill) and recurrent (decode) forms, one block per value head. The
// arithmetic is the CPU reference's statement by statement (backend/cpu/gated_delta_rule.cpp): every
// sum runs in the same order, so the outputs and the f32 state are bit-identical to it. Within a
// head, threads split the independent output elements; the sequential parts (the cumsum, the forward
// substitution's row order) stay sequential. Per-head f32 scratch (normalised q/k rows, U_v, U_k, v')
// lives in one global buffer allocated for the call.
#include <atomic>

#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"
#include "backend/op_checks.h"
#include "backend/test_hooks.h"

namespace tf::cuda {
namespace {

constexpr int kChunk = 64, kThreads = 256;

using Dims = opcheck::DeltaRuleDims;

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

// state[hv, dk, dv] f32; scratch per head: qs, ks [1, dk]. grid hv.
template <class T>
__global__ void recurrent_kernel(Dims d, const T* q, const T* k, const T* v, const float* g, const T* beta,
                                 float* state, T* out, float* scratch, float div) {
  const int64_t h = blockIdx.x;
  float* qs = scratch + h * 2 * d.dk;
  float* ks = qs + d.dk;
  float* S = state + h * d.dk * d.dv;  // [dk, dv]
  for (int64_t t = 0; t < d.n; ++t) {
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
    }
    __syncthreads();  // qs/ks are reloaded for the next token
  }
}

// scratch per head: qs, ks, uk [C, dk]; uv, vp [C, dv]. grid hv.
template <class T>
__global__ void chunked_kernel(Dims d, const T* q, const T* k, const T* v, const float* g, const T* beta,
                               float* state, T* out, float* scratch, float mul) {
  __shared__ float cum[kChunk], B[kChunk], P[kChunk][kChunk], A[kChunk][kChunk];
  const int64_t h = blockIdx.x, dk = d.dk, dv = d.dv;
  float* qs = scratch + h * kChunk * (3 * dk + 2 * dv);
  float* ks = qs + kChunk * dk;
  float* uk = ks + kChunk * dk;
  float* uv = uk + kChunk * dk;
  float* vp = uv + kChunk * dv;
  float* S = state + h * dk * dv;  // [dk, dv]
  for (int64_t c0 = 0; c0 < d.n; c0 += kChunk) {
    const int L = static_cast<int>(d.n - c0 < kChunk ? d.n - c0 : kChunk);
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
    for (int64_t e = threadIdx.x; e < dk * dv; e += blockDim.x) {
      const int64_t r = e / dv, c = e % dv;
      float upd = 0.0f;
      for (int i = 0; i < L; ++i) upd += (ks[i * dk + r] * exp_f(last - cum[i])) * vp[i * dv + c];
      S[e] = S[e] * el + upd;
    }
    __syncthreads();
  }
}

}  // namespace

// 0: the kernels above (the default); 1: gated_delta_rule_seq.cu's per-token recurrence.
std::atomic<int> g_delta_rule_variant{0};

void launch_gated_delta_rule(cudaStream_t s, const Tensor& q, const Tensor& k, const Tensor& v,
                             const Tensor& g, const Tensor& beta, const Tensor& state, const Tensor& out,
                             bool chunked) {
  if (g_delta_rule_variant.load(std::memory_order_relaxed) == 1)
    return launch_gated_delta_rule_seq(s, q, k, v, g, beta, state, out, chunked);
  const Dims d = opcheck::delta_rule(q, k, v, g, beta, state, out);
  if (d.n == 0 || d.hv == 0) return;
  // chunk: query * (1 / dk**0.5); recurrent: query / dk**0.5 (Python doubles, f32 tensor op).
  const float mul = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d.dk)));
  const float div = static_cast<float>(std::sqrt(static_cast<double>(d.dk)));
  const size_t per_head = chunked ? static_cast<size_t>(kChunk * (3 * d.dk + 2 * d.dv)) : 2 * d.dk;
  float* scratch = nullptr;
  TF_CUDA_CHECK(cudaMallocAsync(&scratch, per_head * d.hv * sizeof(float), s));
  TF_DISPATCH_ACT(q.dtype, T, {
    if (chunked)
      chunked_kernel<T><<<static_cast<unsigned>(d.hv), kThreads, 0, s>>>(
          d, ptr<const T>(q), ptr<const T>(k), ptr<const T>(v), ptr<const float>(g), ptr<const T>(beta),
          ptr<float>(state), ptr<T>(out), scratch, mul);
    else
      recurrent_kernel<T><<<static_cast<unsigned>(d.hv), kThreads, 0, s>>>(
          d, ptr<const T>(q), ptr<const T>(k), ptr<const T>(v), ptr<const float>(g), ptr<const T>(beta),
          ptr<float>(state), ptr<T>(out), scratch, div);
    TF_CUDA_LAUNCHED();
  });
  TF_CUDA_CHECK(cudaFreeAsync(scratch, s));
}

}  // namespace tf::cuda

namespace tf::test_hooks {
bool set_cuda_delta_rule_variant(int which) {
  TF_CHECK(which == 0 || which == 1);
  tf::cuda::g_delta_rule_variant.store(which, std::memory_order_relaxed);
  return true;
}
}  // namespace tf::test_hooks
