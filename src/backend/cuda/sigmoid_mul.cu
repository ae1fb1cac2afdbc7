// sigmoid_mul: rnd(x * rnd(sigmoid(gate))) (gated attention output).
#include "backend/cuda/elementwise.cuh"
#include "backend/cuda/kernels.h"

namespace tf::cuda {

void launch_sigmoid_mul(cudaStream_t s, const Tensor& x, const Tensor& gate, const Tensor& out) {
  TF_CHECK(gate.numel() == x.numel() && out.numel() == x.numel());
  TF_CHECK(is_float_act(x.dtype) && gate.dtype == x.dtype && out.dtype == x.dtype);
  TF_DISPATCH_ACT(x.dtype, T, {
    const T* a = ptr<const T>(x);
    const T* z = ptr<const T>(gate);
    T* o = ptr<T>(out);
    launch_elementwise(s, x.numel(), [=] __device__(int64_t i) {
      const float zv = to_f(z[i]);
      o[i] = from_f<T>(to_f(a[i]) * rnd<T>(1.0f / (1.0f + exp_f(-zv))));
    });
  });
}

}  // namespace tf::cuda
