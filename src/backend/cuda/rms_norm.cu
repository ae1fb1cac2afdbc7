// rms_norm: one block per row; Σx² in the CPU's 8-lane order (lane l sums x_k² for k ≡ l mod 8 in
// increasing k, the lanes combine as combine8), then the elementwise normalisation with the rounding
// points of RmsNormKind. Rows up to kMaxStaged wide are first copied to shared memory as f32 by the whole
// block (coalesced, all loads in flight at once); the 8 lanes then run their sequential sums from shared
// memory, 8 independent loads ahead of the adds, and the normalisation reads the row from there too.
// (The 8 lanes reading global memory one element per dependent add made a one-row call of width 1024
// take ~9 µs on the H200.) Wider rows keep the direct form; both give the CPU's bits.
#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"

namespace tf::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxStaged = 8192;  // f32 row in shared memory: 32 KB, under the 48 KB default

// Σ_k f(k)² over [0, d) in the CPU's order (backend/cpu/common.h dot_f32), by the whole block; f(k) reads
// shared memory. Threads 0..7 are the lanes.
template <class F>
__device__ float block_sum_sq8(int64_t d, F f) {
  __shared__ float lanes[8];
  if (threadIdx.x < 8) {
    float a = 0.0f;
    int64_t k = threadIdx.x;
    for (; k + 56 < d; k += 64) {  // the next 8 terms of this lane: loads first, adds in order
      float v[8];
#pragma unroll
      for (int u = 0; u < 8; ++u) v[u] = f(k + 8 * u);
#pragma unroll
      for (int u = 0; u < 8; ++u) a += v[u] * v[u];
    }
    for (; k < d; k += 8) {
      const float v = f(k);
      a += v * v;
    }
    lanes[threadIdx.x] = a;
  }
  __syncthreads();
  return combine8(lanes);
}

// x, out [n, d] act; w [d] (TW). grid n; dynamic shared memory d floats when staged.
template <class T, class TW>
__global__ void rms_norm_kernel(const T* __restrict__ x, const TW* __restrict__ w, float eps, bool one_plus,
                                T* __restrict__ out, int64_t d, bool staged) {
  extern __shared__ float srow[];
  const int64_t r = blockIdx.x;
  const T* row = x + r * d;
  float ss;
  if (staged) {
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x) srow[i] = to_f(row[i]);
    __syncthreads();
    ss = block_sum_sq8(d, [&](int64_t k) { return srow[k]; });
  } else {
    ss = block_sum8(d, [&](int64_t k) {
      const float v = to_f(row[k]);
      return v * v;
    });
  }
  const float inv = 1.0f / sqrtf(ss / static_cast<float>(d) + eps);
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
    const float v = staged ? srow[i] : to_f(row[i]), wi = to_f(w[i]);
    const float y = one_plus ? v * inv * (1.0f + wi) : rnd<T>(wi * rnd<T>(v * inv));
    out[r * d + i] = from_f<T>(y);
  }
}

}  // namespace

void launch_rms_norm(cudaStream_t s, const Tensor& x, const Tensor& w, float eps, RmsNormKind kind,
                     const Tensor& out) {
  TF_CHECK(x.rank() >= 1 && out.numel() == x.numel() && out.dtype == x.dtype && is_float_act(x.dtype));
  const int64_t d = x.dim(-1), n = d ? x.numel() / d : 0;
  TF_CHECK(w.numel() == d && is_float_act(w.dtype));
  if (kind == RmsNormKind::kWeight) TF_CHECK(w.dtype == x.dtype);
  if (n == 0) return;
  const bool staged = d <= kMaxStaged;
  const size_t smem = staged ? static_cast<size_t>(d) * sizeof(float) : 0;
  TF_DISPATCH_ACT(x.dtype, T, {
    TF_DISPATCH_ACT(w.dtype, TW, {
      rms_norm_kernel<T, TW><<<static_cast<unsigned>(n), kThreads, smem, s>>>(
          ptr<const T>(x), ptr<const TW>(w), eps, kind == RmsNormKind::kOnePlusWeight, ptr<T>(out), d,
          staged);
      TF_CUDA_LAUNCHED();
    });
  });
}

}  // namespace tf::cuda
