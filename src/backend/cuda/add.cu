// add: rnd(a + b), the residual stream. out may alias a or b (each element is read before written).
#include "backend/cuda/elementwise.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/vec8.cuh"

namespace tf::cuda {

void launch_add(cudaStream_t s, const Tensor& a, const Tensor& b, const Tensor& out) {
  TF_CHECK(a.numel() == b.numel() && out.numel() == a.numel());
  TF_CHECK(a.dtype == b.dtype && out.dtype == a.dtype && is_float_act(a.dtype));
  TF_DISPATCH_ACT(a.dtype, T, {
    const T* x = ptr<const T>(a);
    const T* y = ptr<const T>(b);
    T* o = ptr<T>(out);
    if (a.numel() % 8 == 0 && aligned16(x) && aligned16(y) && aligned16(o)) {  // 8-element vectors
      launch_elementwise(s, a.numel() / 8, [=] __device__(int64_t v) {
        float p[8], q[8];
        load8(x + 8 * v, p);
        load8(y + 8 * v, q);
#pragma unroll
        for (int k = 0; k < 8; ++k) p[k] += q[k];
        store8(o + 8 * v, p);
      });
      return;
    }
    launch_elementwise(s, a.numel(),
                       [=] __device__(int64_t i) { o[i] = from_f<T>(to_f(x[i]) + to_f(y[i])); });
  });
}

}  // namespace tf::cuda
