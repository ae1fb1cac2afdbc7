// rms_norm: one block per row; Σx² in the CPU's 8-lane order (block_sum8), then the elementwise
// normalisation with the rounding points of RmsNormKind.
#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"

namespace tf::cuda {
namespace {

constexpr int kThreads = 256;

// x, out [n, d] act; w [d] (TW). grid n.
template <class T, class TW>
__global__ void rms_norm_kernel(const T* __restrict__ x, const TW* __restrict__ w, float eps, bool one_plus,
                                T* __restrict__ out, int64_t d) {
  const int64_t r = blockIdx.x;
  const T* row = x + r * d;
  const float ss = block_sum8(d, [&](int64_t k) {
    const float v = to_f(row[k]);
    return v * v;
  });
  const float inv = 1.0f / sqrtf(ss / static_cast<float>(d) + eps);
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
    const float v = to_f(row[i]), wi = to_f(w[i]);
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
  TF_DISPATCH_ACT(x.dtype, T, {
    TF_DISPATCH_ACT(w.dtype, TW, {
      rms_norm_kernel<T, TW><<<static_cast<unsigned>(n), kThreads, 0, s>>>(
          ptr<const T>(x), ptr<const TW>(w), eps, kind == RmsNormKind::kOnePlusWeight, ptr<T>(out), d);
      TF_CUDA_LAUNCHED();
    });
  });
}

}  // namespace tf::cuda
