// rope_f32: rotary embedding applied in f32 with f32 tables and one rounding (Qwen vision).
#include <vector>

#include "backend/cpu/common.h"
#include "backend/cpu/kernels.h"

namespace tf::cpu {

void rope_f32(ThreadPool& pool, const Tensor& x, const Tensor& cos, const Tensor& sin, const Tensor& out) {
  TF_CHECK(x.rank() == 3 && out.numel() == x.numel() && out.dtype == x.dtype && is_float_act(x.dtype));
  const int64_t n = x.dim(0), heads = x.dim(1), d = x.dim(2), h2 = d / 2;
  TF_CHECK(d % 2 == 0 && cos.rank() == 2 && cos.dim(0) == n && cos.dim(1) == d && sin.shape == cos.shape);
  TF_CHECK(cos.dtype == DType::F32 && sin.dtype == DType::F32);
  const DType act = x.dtype;
  pool.parallel_for(n, [&](int64_t i0, int64_t i1) {
    std::vector<float> in(static_cast<size_t>(d)), o(static_cast<size_t>(d));
    for (int64_t i = i0; i < i1; ++i) {
      const float* c = cos.as<const float>() + i * d;
      const float* s = sin.as<const float>() + i * d;
      for (int64_t h = 0; h < heads; ++h) {
        const int64_t off = (i * heads + h) * d;
        load_f32_row(x, off, d, in.data());
        for (int64_t j = 0; j < d; ++j) {
          const float rot = j < h2 ? -in[j + h2] : in[j - h2];
          const float a = in[j] * c[j];
          const float b = rot * s[j];
          o[j] = rnd(a + b, act);
        }
        store_f32_row(out, off, d, o.data());
      }
    }
  });
}

}  // namespace tf::cpu
