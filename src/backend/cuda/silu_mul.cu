// silu_mul: rnd(rnd(silu(gate)) * up), the gated MLP's two roundings.
#include "backend/cuda/elementwise.cuh"
#include "backend/cuda/kernels.h"

namespace tf::cuda {

void launch_silu_mul(cudaStream_t s, const Tensor& gate, const Tensor& up, const Tensor& out) {
  TF_CHECK(gate.numel() == up.numel() && out.numel() == gate.numel());
  TF_CHECK(gate.dtype == up.dtype && out.dtype == gate.dtype && is_float_act(gate.dtype));
  TF_DISPATCH_ACT(gate.dtype, T, {
    const T* g = ptr<const T>(gate);
    const T* u = ptr<const T>(up);
    T* o = ptr<T>(out);
    launch_elementwise(s, gate.numel(), [=] __device__(int64_t i) {
      const float gv = to_f(g[i]);
      o[i] = from_f<T>(rnd<T>(gv / (1.0f + exp_f(-gv))) * to_f(u[i]));
    });
  });
}

}  // namespace tf::cuda
