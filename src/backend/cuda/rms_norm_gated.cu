// rms_norm_gated (Qwen3_5RMSNormGated): one block per row; norm rounded, weight multiply rounded,
// f32 SiLU gate, one final rounding, as the CPU reference.
#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/pdl.cuh"

namespace tf::cuda {
namespace {

constexpr int kThreads = 256;

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
    const float y = rnd<T>(to_f(w[i]) * rnd<T>(to_f(row[i]) * inv));
    const float z = to_f(gate[r * d + i]);
    out[r * d + i] = from_f<T>(y * (z / (1.0f + exp_f(-z))));
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
  TF_DISPATCH_ACT(x.dtype, T, {
    launch_pdl(s, dim3(static_cast<unsigned>(n)), dim3(kThreads), 0, rms_norm_gated_kernel<T>,
               ptr<const T>(x), ptr<const T>(gate), ptr<const T>(w), eps, ptr<T>(out), d);
  });
}

}  // namespace tf::cuda
