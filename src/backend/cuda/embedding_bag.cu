// embedding_bag: weighted sum of table rows in f32 (taps in increasing order), one rounding.
#include "backend/cuda/elementwise.cuh"
#include "backend/cuda/kernels.h"

namespace tf::cuda {

void launch_embedding_bag(cudaStream_t s, const Tensor& table, const Tensor& idx, const Tensor& w,
                          const Tensor& out) {
  TF_CHECK(table.rank() == 2 && idx.rank() == 2 && idx.dtype == DType::I32 && w.dtype == DType::F32);
  const int64_t V = table.dim(0), d = table.dim(1), n = idx.dim(0), taps = idx.dim(1);
  TF_CHECK(w.shape == idx.shape && out.rank() == 2 && out.dim(0) == n && out.dim(1) == d);
  TF_CHECK(is_float_act(table.dtype) && is_float_act(out.dtype));
  const int32_t* ix = ptr<const int32_t>(idx);
  const float* wt = ptr<const float>(w);
  TF_DISPATCH_ACT(table.dtype, TT, {
    TF_DISPATCH_ACT(out.dtype, TO, {
      const TT* t = ptr<const TT>(table);
      TO* o = ptr<TO>(out);
      launch_elementwise(s, n * d, [=] __device__(int64_t e) {
        const int64_t i = e / d, c = e % d;
        float acc = 0.0f;
        for (int64_t k = 0; k < taps; ++k) {
          const int32_t r = ix[i * taps + k];
          if (r < 0 || r >= V) __trap();
          const float p = to_f(t[r * d + c]) * wt[i * taps + k];
          acc = k == 0 ? p : acc + p;
        }
        o[e] = from_f<TO>(acc);
      });
    });
  });
}

}  // namespace tf::cuda
