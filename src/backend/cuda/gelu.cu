// gelu: erf (nn.GELU()) or tanh approximation, f32 math in the CPU's operation order, one rounding.
#include "backend/cuda/elementwise.cuh"
#include "backend/cuda/kernels.h"

namespace tf::cuda {

void launch_gelu(cudaStream_t s, const Tensor& x, GeluKind kind, const Tensor& out) {
  TF_CHECK(out.numel() == x.numel() && out.dtype == x.dtype && is_float_act(x.dtype));
  const bool erf_kind = kind == GeluKind::kErf;
  TF_DISPATCH_ACT(x.dtype, T, {
    const T* a = ptr<const T>(x);
    T* o = ptr<T>(out);
    launch_elementwise(s, x.numel(), [=] __device__(int64_t i) {
      const float kSqrt1_2 = 0.70710678118654752440f;
      const float kBeta = 0.7978845608028654f;  // sqrt(2/pi)
      const float v = to_f(a[i]);
      float y;
      if (erf_kind) {
        y = v * 0.5f * (1.0f + erf_f(v * kSqrt1_2));
      } else {
        const float inner = kBeta * (v + 0.044715f * v * v * v);
        y = 0.5f * v * (1.0f + tanh_f(inner));
      }
      o[i] = from_f<T>(y);
    });
  });
}

}  // namespace tf::cuda
