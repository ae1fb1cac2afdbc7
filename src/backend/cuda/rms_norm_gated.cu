// rms_norm_gated (Qwen3_5RMSNormGated): norm rounded, weight multiply rounded, f32 SiLU gate, one final
// rounding, as the CPU reference. One block per row, or for calls of >= kRowFormMinRows rows of d % 8 == 0 a
// warp per row (the row staged in the warp's shared memory, warp_sum_sq8: block_sum8's lane sums and tree, so
// the same bits): a Qwen3.5 prefill's [50,496, 128] call took 76 us in 50,496 blocks (BENCHMARKS.md).
#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/pdl.cuh"
#include "backend/cuda/vec8.cuh"

namespace tf::cuda {
namespace {

constexpr int kThreads = 256;

// One output value: the norm rounded, the weight multiply rounded, times the f32 SiLU of the gate (the value
// before the final rounding; both forms below).
template <class T>
__device__ __forceinline__ float gated_value(float x, float inv, float w, float z) {
  const float y = rnd<T>(w * rnd<T>(x * inv));
  return y * (z / (1.0f + exp_f(-z)));
}

// x, gate, out [n, d] act; w [d] act. grid n.
template <class T>
__global__ void rms_norm_gated_kernel(const T* __restrict__ x, const T* __restrict__ gate,
                                      const T* __restrict__ w, float eps, T* __restrict__ out, int64_t d) {
  pdl_wait();  // pdl.cuh
  pdl_trigger();
  const int64_t r = blockIdx.x;
  const T* row = x + r * d;
  const float ss = block_sum8(d, [&](int64_t k) {
    const float v = to_f(row[k]);
    return v * v;
  });
  const float inv = 1.0f / sqrtf(ss / static_cast<float>(d) + eps);
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
    out[r * d + i] = from_f<T>(gated_value<T>(to_f(row[i]), inv, to_f(w[i]), to_f(gate[r * d + i])));
  }
}

constexpr int kWarps = 8;

// The warp form: rows blockIdx.x * kWarps + warp; dynamic shared memory kWarps * d floats.
template <class T>
__global__ void __launch_bounds__(32 * kWarps)
    rms_norm_gated_warp_kernel(const T* __restrict__ x, const T* __restrict__ gate, const T* __restrict__ w,
                               float eps, T* __restrict__ out, int64_t n, int d) {
  extern __shared__ float sxs[];
  pdl_wait();  // pdl.cuh
  pdl_trigger();
  const int warp = static_cast<int>(threadIdx.x / 32), lane = static_cast<int>(threadIdx.x % 32);
  const int64_t r = static_cast<int64_t>(blockIdx.x) * kWarps + warp;
  if (r >= n) return;
  float* sx = sxs + warp * d;
  for (int c = 8 * lane; c < d; c += 256) {
    float v[8];
    load8(x + r * d + c, v);
#pragma unroll
    for (int k = 0; k < 8; ++k) sx[c + k] = v[k];
  }
  __syncwarp();
  const float ss = warp_sum_sq8(sx, d, lane);
  const float inv = 1.0f / sqrtf(ss / static_cast<float>(d) + eps);
  for (int c = 8 * lane; c < d; c += 256) {
    float wv[8], z[8], o[8];
    load8(w + c, wv);
    load8(gate + r * d + c, z);
#pragma unroll
    for (int k = 0; k < 8; ++k) o[k] = gated_value<T>(sx[c + k], inv, wv[k], z[k]);
    store8(out + r * d + c, o);
  }
}

}  // namespace

void launch_rms_norm_gated(cudaStream_t s, const Tensor& x, const Tensor& gate, const Tensor& w, float eps,
                           const Tensor& out) {
  TF_CHECK(x.rank() >= 1 && gate.numel() == x.numel() && out.numel() == x.numel());
  TF_CHECK(is_float_act(x.dtype) && gate.dtype == x.dtype && out.dtype == x.dtype && w.dtype == x.dtype);
  const int64_t d = x.dim(-1), n = d ? x.numel() / d : 0;
  TF_CHECK(w.numel() == d);
  if (n == 0) return;
  if (n >= kRowFormMinRows && d % 8 == 0 && d <= 1024 && aligned16(x.data) && aligned16(gate.data) &&
      aligned16(w.data) && aligned16(out.data)) {
    TF_CHECK((n + kWarps - 1) / kWarps < (int64_t{1} << 31));
    TF_DISPATCH_ACT(x.dtype, T, {
      launch_pdl(s, dim3(static_cast<unsigned>((n + kWarps - 1) / kWarps)), dim3(32 * kWarps),
                 kWarps * d * sizeof(float), rms_norm_gated_warp_kernel<T>, ptr<const T>(x),
                 ptr<const T>(gate), ptr<const T>(w), eps, ptr<T>(out), n, static_cast<int>(d));
    });
    return;
  }
  TF_DISPATCH_ACT(x.dtype, T, {
    launch_pdl(s, dim3(static_cast<unsigned>(n)), dim3(kThreads), 0, rms_norm_gated_kernel<T>,
               ptr<const T>(x), ptr<const T>(gate), ptr<const T>(w), eps, ptr<T>(out), d);
  });
}

}  // namespace tf::cuda
