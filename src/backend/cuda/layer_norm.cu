// layer_norm: one block per row; mean and variance as f32 sums in the CPU's 8-lane order (two
// passes), affine in f32, one rounding.
#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"

namespace tf::cuda {
namespace {

constexpr int kThreads = 256;

// x, out [n, d] act; w, b [d]. grid n.
template <class T, class TW, class TB>
__global__ void layer_norm_kernel(const T* __restrict__ x, const TW* __restrict__ w, const TB* __restrict__ b,
                                  float eps, T* __restrict__ out, int64_t d) {
  const int64_t r = blockIdx.x;
  const T* row = x + r * d;
  const float mean = block_sum8(d, [&](int64_t k) { return to_f(row[k]); }) / static_cast<float>(d);
  const float ss = block_sum8(d, [&](int64_t k) {
    const float c = to_f(row[k]) - mean;
    return c * c;
  });
  const float rstd = 1.0f / sqrtf(ss / static_cast<float>(d) + eps);
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
    const float c = to_f(row[i]) - mean;
    out[r * d + i] = from_f<T>(c * rstd * to_f(w[i]) + to_f(b[i]));
  }
}

}  // namespace

void launch_layer_norm(cudaStream_t s, const Tensor& x, const Tensor& w, const Tensor& b, float eps,
                       const Tensor& out) {
  TF_CHECK(x.rank() >= 1 && out.numel() == x.numel() && out.dtype == x.dtype && is_float_act(x.dtype));
  const int64_t d = x.dim(-1), n = d ? x.numel() / d : 0;
  TF_CHECK(w.numel() == d && b.numel() == d && is_float_act(w.dtype) && is_float_act(b.dtype));
  if (n == 0) return;
  TF_DISPATCH_ACT(x.dtype, T, {
    TF_DISPATCH_ACT(w.dtype, TW, {
      TF_DISPATCH_ACT(b.dtype, TB, {
        layer_norm_kernel<T, TW, TB><<<static_cast<unsigned>(n), kThreads, 0, s>>>(
            ptr<const T>(x), ptr<const TW>(w), ptr<const TB>(b), eps, ptr<T>(out), d);
        TF_CUDA_LAUNCHED();
      });
    });
  });
}

}  // namespace tf::cuda
