// gdn_gates: Gated DeltaNet decay g = -exp(A_log) * softplus(a + dt_bias) in f32 (torch's softplus
// threshold 20) and write strength beta = rnd(sigmoid(b)).
#include "backend/cuda/elementwise.cuh"
#include "backend/cuda/kernels.h"

namespace tf::cuda {

void launch_gdn_gates(cudaStream_t s, const Tensor& a, const Tensor& b, const Tensor& A_log,
                      const Tensor& dt_bias, const Tensor& g, const Tensor& beta) {
  TF_CHECK(a.rank() == 2 && b.shape == a.shape && g.shape == a.shape && beta.shape == a.shape);
  const int64_t n = a.dim(0), h = a.dim(1);
  TF_CHECK(A_log.numel() == h && dt_bias.numel() == h && is_float_act(A_log.dtype) &&
           is_float_act(dt_bias.dtype));
  TF_CHECK(is_float_act(a.dtype) && b.dtype == a.dtype && beta.dtype == a.dtype && g.dtype == DType::F32);
  TF_DISPATCH_ACT(a.dtype, T, {
    TF_DISPATCH_ACT(A_log.dtype, TL, {
      TF_DISPATCH_ACT(dt_bias.dtype, TD, {
        const T* av = ptr<const T>(a);
        const T* bv = ptr<const T>(b);
        const TL* al = ptr<const TL>(A_log);
        const TD* dt = ptr<const TD>(dt_bias);
        float* go = ptr<float>(g);
        T* bo = ptr<T>(beta);
        launch_elementwise(s, n * h, [=] __device__(int64_t e) {
          const int64_t j = e % h;
          const float neg_a = -exp_f(to_f(al[j]));
          const float x = to_f(av[e]) + to_f(dt[j]);
          const float sp = x > 20.0f ? x : log1p_f(exp_f(x));
          go[e] = neg_a * sp;
          bo[e] = from_f<T>(1.0f / (1.0f + exp_f(-to_f(bv[e]))));
        });
      });
    });
  });
}

}  // namespace tf::cuda
